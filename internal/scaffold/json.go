package scaffold

import (
	"bytes"
	"fmt"
	"mime"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// JSONArray is an array of objects in a JSON document: a possible list of items.
type JSONArray struct {
	Path  string `json:"path"` // gjson path; "" the document itself
	Count int    `json:"count"`
	Why   string `json:"why"`
}

// JSONFindings is what a JSON API response says about itself.
type JSONFindings struct {
	Candidates []JSONArray `json:"candidates"` // largest first, at most 5
	Items      JSONArray   `json:"items"`
	Fields     []string    `json:"fields"` // the first item's keys, stored as they are
	Key        string      `json:"key"`    // gjson path of the item's id inside the item; "" none
	KeyWhy     string      `json:"key_why"`
	// Paging is the generic.json param that pages: next_path, cursor_path, page_param,
	// offset_param, or "" when the response shows no way to the next page.
	Paging      string `json:"paging"`
	PagingWhy   string `json:"paging_why"`
	NextPath    string `json:"next_path,omitempty"`
	CursorPath  string `json:"cursor_path,omitempty"`
	CursorParam string `json:"cursor_param,omitempty"`
	PageParam   string `json:"page_param,omitempty"`
	StartPage   int    `json:"start_page,omitempty"`
	OffsetParam string `json:"offset_param,omitempty"`
	HasMorePath string `json:"has_more_path,omitempty"`
	HasMoreWhy  string `json:"has_more_why,omitempty"`
}

// IsJSON reports whether a response is JSON: by its media type (application/json or a
// +json type), else by a body that opens like a JSON object or array, since many APIs
// answer with text/plain or no type at all.
func IsJSON(contentType string, body []byte) bool {
	if mt, _, err := mime.ParseMediaType(contentType); err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return true
	}
	b := bytes.TrimLeft(bytes.TrimPrefix(body, []byte("\uFEFF")), " \t\r\n")
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

// Where APIs put the next page's URL, its cursor, and whether there is more, in the
// order they are tried.
var (
	nextLinkPaths = []string{"next", "next_url", "nextUrl", "next_page_url", "next_link", "links.next", "links.next.href", "_links.next.href", "paging.next", "meta.next", "pagination.next"}
	cursorPaths   = []string{"next_cursor", "nextCursor", "cursor", "after", "meta.next_cursor", "meta.cursor", "pagination.next_cursor", "paging.cursors.after"}
	hasMorePaths  = []string{"has_more", "hasMore", "more", "meta.has_more", "paging.has_more", "pagination.has_more"}
	cursorParams  = []string{"cursor", "after", "page_token", "pageToken", "continuation", "next_cursor"}
	pageParams    = []string{"page", "p", "pg", "page_no", "pageNo", "page_number"}
	offsetParams  = []string{"offset", "start", "skip"}
)

// AnalyzeJSON finds the items of a JSON API response (the largest array of objects), a
// key field every item has, and how the API pages: a next link or a cursor in the
// response, else a page number or offset in the URL of the page.
func AnalyzeJSON(body []byte, page *url.URL) (JSONFindings, error) {
	var f JSONFindings
	body = bytes.TrimPrefix(body, []byte("\uFEFF"))
	if !gjson.ValidBytes(body) {
		return f, fmt.Errorf("the response is not valid JSON (it starts %q)", clip(string(body), 40))
	}
	doc := gjson.ParseBytes(body)
	var arrays []JSONArray
	collectArrays(doc, "", &arrays)
	if len(arrays) == 0 {
		return f, fmt.Errorf("no list of objects in the JSON at %s; give the URL of a response that lists items (an array of objects), or write a generic.json step by hand with items set", page)
	}
	// Largest first; on a tie the shallower, then the earlier in the document.
	best := 0
	for i, a := range arrays {
		if a.Count > arrays[best].Count || (a.Count == arrays[best].Count && depth(a.Path) < depth(arrays[best].Path)) {
			best = i
		}
	}
	f.Items = arrays[best]
	f.Candidates = append([]JSONArray{f.Items}, without(arrays, best)...)
	if len(f.Candidates) > 5 {
		f.Candidates = f.Candidates[:5]
	}
	items := doc
	if f.Items.Path != "" {
		items = doc.Get(f.Items.Path)
	}
	elems := objects(items)
	elems[0].ForEach(func(k, _ gjson.Result) bool {
		f.Fields = append(f.Fields, k.String())
		return true
	})
	f.Key, f.KeyWhy = findKey(elems, f.Fields)
	findPaging(&f, doc, page)
	return f, nil
}

// collectArrays appends every array of objects in v (v itself included), descending
// into objects only: an array inside one item describes that item, not the list.
func collectArrays(v gjson.Result, path string, out *[]JSONArray) {
	switch {
	case v.IsArray():
		elems := v.Array()
		n := len(objects(v))
		// An array of objects, a stray null or scalar allowed.
		if n > 0 && n*5 >= len(elems)*4 {
			where := "the document is itself an array"
			if path != "" {
				where = fmt.Sprintf("%q is an array", path)
			}
			*out = append(*out, JSONArray{Path: path, Count: n, Why: fmt.Sprintf("%s of %d objects", where, n)})
		}
	case v.IsObject():
		v.ForEach(func(k, val gjson.Result) bool {
			p := gjson.Escape(k.String())
			if path != "" {
				p = path + "." + p
			}
			collectArrays(val, p, out)
			return true
		})
	}
}

func objects(arr gjson.Result) []gjson.Result {
	var out []gjson.Result
	for _, e := range arr.Array() {
		if e.IsObject() {
			out = append(out, e)
		}
	}
	return out
}

func depth(path string) int {
	if path == "" {
		return 0
	}
	return strings.Count(path, ".") + 1
}

func without(a []JSONArray, i int) []JSONArray {
	out := append([]JSONArray{}, a[:i]...)
	out = append(out, a[i+1:]...)
	// The runners-up largest first, as they are printed.
	sort.SliceStable(out, func(x, y int) bool { return out[x].Count > out[y].Count })
	return out
}

// findKey is the item field that names it: id, _id, uuid, key, slug or a name ending in
// _id, present in every item with a scalar value, and distinct across them so that two
// items never share a key.
func findKey(elems []gjson.Result, fields []string) (string, string) {
	var names []string
	for _, want := range []string{"id", "_id", "uuid", "key", "slug"} {
		for _, k := range fields {
			if strings.EqualFold(k, want) {
				names = append(names, k)
			}
		}
	}
	for _, k := range fields {
		if l := strings.ToLower(k); strings.HasSuffix(l, "_id") && l != "_id" {
			names = append(names, k)
		}
	}
	for _, k := range names {
		seen := map[string]bool{}
		ok := true
		for _, e := range elems {
			v := e.Get(gjson.Escape(k))
			if (v.Type != gjson.String && v.Type != gjson.Number) || v.String() == "" || seen[v.String()] {
				ok = false
				break
			}
			seen[v.String()] = true
		}
		if ok {
			return gjson.Escape(k), fmt.Sprintf("%q is set and distinct in all %d items (e.g. %s)", k, len(elems), elems[0].Get(gjson.Escape(k)).Raw)
		}
	}
	return "", "no id, _id, uuid, key, slug or *_id field set and distinct in every item: the key is the page URL and the item's position"
}

// findPaging sets how the API pages, the first that applies: a next link in the
// response, a cursor in it, a page number in the URL, an offset in the URL.
func findPaging(f *JSONFindings, doc gjson.Result, page *url.URL) {
	q := page.Query()
	for _, p := range nextLinkPaths {
		v := doc.Get(p)
		if v.Type != gjson.String {
			continue
		}
		if u, err := page.Parse(strings.TrimSpace(v.Str)); err == nil && (u.Scheme == "http" || u.Scheme == "https") && v.Str != "" {
			f.Paging, f.NextPath = "next_path", p
			f.PagingWhy = fmt.Sprintf("%q holds the next page's URL (%s)", p, clip(v.Str, 80))
			break
		}
	}
	if f.Paging == "" {
		for _, p := range cursorPaths {
			v := doc.Get(p)
			if (v.Type != gjson.String && v.Type != gjson.Number) || v.String() == "" {
				continue
			}
			f.Paging, f.CursorPath = "cursor_path", p
			f.CursorParam = cursorParam(p, q)
			f.PagingWhy = fmt.Sprintf("%q holds a cursor (%s), sent back as ?%s=", p, clip(v.String(), 40), f.CursorParam)
			break
		}
	}
	if f.Paging == "" {
		if name, n, ok := intQuery(q, pageParams); ok {
			f.Paging, f.PageParam, f.StartPage = "page_param", name, n
			f.PagingWhy = fmt.Sprintf("the URL's query has the page number %s=%d", name, n)
		} else if name, n, ok := intQuery(q, offsetParams); ok {
			f.Paging, f.OffsetParam = "offset_param", name
			f.PagingWhy = fmt.Sprintf("the URL's query has the offset %s=%d; each page moves by its number of items", name, n)
		}
	}
	if f.Paging == "" {
		f.PagingWhy = "no next link or cursor in the response, no page number or offset in the URL: only this page is read"
		return
	}
	for _, p := range hasMorePaths {
		if v := doc.Get(p); v.Type == gjson.True || v.Type == gjson.False {
			f.HasMorePath = p
			f.HasMoreWhy = fmt.Sprintf("%q is a boolean (%s here): paging stops when it is false", p, v.Raw)
			return
		}
	}
}

// cursorParam is the query parameter a cursor goes into: the one the URL already uses
// for a cursor, else the field's name without next (next_cursor → cursor).
func cursorParam(path string, q url.Values) string {
	for _, name := range cursorParams {
		if q.Has(name) {
			return name
		}
	}
	name := path[strings.LastIndex(path, ".")+1:]
	for _, prefix := range []string{"next_", "next"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok && rest != "" {
			return strings.ToLower(rest[:1]) + rest[1:]
		}
	}
	return name
}

func intQuery(q url.Values, names []string) (string, int, bool) {
	for _, name := range names {
		if n, err := strconv.Atoi(q.Get(name)); err == nil && n >= 0 {
			return name, n, true
		}
	}
	return "", 0, false
}

// JSONChainYAML writes a chain of one generic.json step: the items of the page and of
// its next pages, stored as they are, keyed and paged as the findings say.
func JSONChainYAML(o ChainOptions, j JSONFindings) ([]byte, error) {
	params := map[string]any{"urls": []string{o.URL.RequestURI()}}
	if j.Items.Path != "" {
		params["items"] = j.Items.Path
	}
	if j.Key != "" {
		params["key"] = map[string]any{"path": j.Key}
	}
	for name, v := range map[string]string{"next_path": j.NextPath, "cursor_path": j.CursorPath, "cursor_param": j.CursorParam,
		"page_param": j.PageParam, "offset_param": j.OffsetParam, "has_more_path": j.HasMorePath} {
		if v != "" {
			params[name] = v
		}
	}
	if j.PageParam != "" {
		params["start_page"] = j.StartPage
	}
	step := map[string]any{"id": "list", "task": "generic.json", "store": []string{"all"}, "params": params}
	if j.Paging != "" {
		params["max_pages"] = o.MaxPages
		// The next pages come back to this step, as the HTML list's do.
		step["from"] = "list"
		step["max_depth"] = 100
	}
	return encodeChain(o, "generic.json", "paths", []any{step})
}
