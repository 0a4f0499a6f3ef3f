package generic

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch/charset"
)

var jsonSpec = crawl.TaskSpec{
	Name:  JSONTask,
	Doc:   "a JSON API response: an item per element of `items` (a gjson path) with its `fields`; paging by page number, offset, cursor or next link",
	Seeds: seedInputs,
	Params: []crawl.Param{
		urlsParam,
		baseURLParam,
		{Name: "items", Type: crawl.String, Doc: "gjson path of the item array, e.g. data.stories (empty: the document, an array or a single object)"},
		fieldsParam("field name → field spec, a gjson path inside each item; omitted: every key of the item as it is", false),
		keyParam,
		detailParam,
		detailTaskParam(""),
		{Name: "page_param", Type: crawl.String, Doc: "page paging: the query parameter that takes the page number, e.g. page"},
		{Name: "start_page", Type: crawl.Int, Default: 1, Doc: "page paging: number of the first page"},
		{Name: "max_pages", Type: crawl.Int, Default: 0, Doc: "stop after this many pages per start URL (0: until a page is empty, has_more is false, or the cursor or next link ends)"},
		{Name: "offset_param", Type: crawl.String, Doc: "offset paging: the query parameter that takes the offset, e.g. offset"},
		{Name: "offset_start", Type: crawl.Int, Default: 0, Doc: "offset paging: offset of the first page when the start URL has none"},
		{Name: "offset_step", Type: crawl.Int, Default: 0, Doc: "offset paging: how far each page moves (0: the number of items on the page)"},
		{Name: "cursor_path", Type: crawl.String, Doc: "cursor paging: gjson path of the next cursor in the response, e.g. meta.next_cursor"},
		{Name: "cursor_param", Type: crawl.String, Doc: "cursor paging: the query parameter the cursor goes into, e.g. cursor"},
		{Name: "next_path", Type: crawl.String, Doc: "next-link paging: gjson path of the next page's URL in the response, e.g. links.next"},
		{Name: "has_more_path", Type: crawl.String, Doc: "gjson path of a value that is false (or 0, empty, null) on the last page, e.g. has_more"},
		headersParam,
	},
	Output:  commonOutput,
	Timeout: 30 * time.Second,
	Retries: 3,
	Check:   checker(buildJSON),
}

// JSON is the generic.json task.
var JSON = configTask(jsonSpec, buildJSON, runJSON)

type pagingMode int

const (
	pageNone pagingMode = iota
	pageByNumber
	pageByOffset
	pageByCursor
	pageByLink
)

type jsonConfig struct {
	common
	itemRules
	items       string
	mode        pagingMode
	pageParam   string
	startPage   int
	maxPages    int
	offsetParam string
	offsetStart int
	offsetStep  int
	cursorPath  string
	cursorParam string
	nextPath    string
	hasMorePath string
}

func buildJSON(p crawl.Params) (*jsonConfig, []error) {
	c := &jsonConfig{}
	var errs, e []error
	c.common, errs = parseCommon(JSONTask, p)
	c.items = strings.TrimSpace(str(p["items"]))
	if c.items != "" {
		if err := checkJSONPath(c.items); err != nil {
			errs = append(errs, fmt.Errorf("param items: bad JSON path %q: %v; fix the path", c.items, err))
		}
	}
	c.itemRules, e = parseItemRules(JSONTask, p, srcJSON, nil, "")
	errs = append(errs, e...)
	c.pageParam = strings.TrimSpace(str(p["page_param"]))
	c.startPage = intParam(p, "start_page", 1)
	c.maxPages = intParam(p, "max_pages", 0)
	c.offsetParam = strings.TrimSpace(str(p["offset_param"]))
	c.offsetStart = intParam(p, "offset_start", 0)
	c.offsetStep = intParam(p, "offset_step", 0)
	c.cursorPath = strings.TrimSpace(str(p["cursor_path"]))
	c.cursorParam = strings.TrimSpace(str(p["cursor_param"]))
	c.nextPath = strings.TrimSpace(str(p["next_path"]))
	c.hasMorePath = strings.TrimSpace(str(p["has_more_path"]))
	errs = append(errs, checkNonNegative(p, "max_pages", "offset_start", "offset_step")...)
	for _, pp := range []struct{ name, path string }{{"cursor_path", c.cursorPath}, {"next_path", c.nextPath}, {"has_more_path", c.hasMorePath}} {
		if pp.path == "" {
			continue
		}
		if err := checkJSONPath(pp.path); err != nil {
			errs = append(errs, fmt.Errorf("param %s: bad JSON path %q: %v; fix the path", pp.name, pp.path, err))
		}
	}
	var modes []string
	if c.pageParam != "" {
		modes = append(modes, "page_param")
		c.mode = pageByNumber
	}
	if c.offsetParam != "" {
		modes = append(modes, "offset_param")
		c.mode = pageByOffset
	}
	if c.cursorPath != "" || c.cursorParam != "" {
		modes = append(modes, "cursor_path")
		c.mode = pageByCursor
		if c.cursorPath == "" {
			errs = append(errs, fmt.Errorf("param cursor_param: needs cursor_path, the gjson path of the next cursor in the response"))
		} else if c.cursorParam == "" {
			errs = append(errs, fmt.Errorf("param cursor_path: needs cursor_param, the query parameter the cursor goes into"))
		}
	}
	if c.nextPath != "" {
		modes = append(modes, "next_path")
		c.mode = pageByLink
	}
	if len(modes) > 1 {
		errs = append(errs, fmt.Errorf("param %s: these are different paging modes; set only one", strings.Join(modes, ", ")))
	}
	if c.hasMorePath != "" && c.mode == pageNone {
		errs = append(errs, fmt.Errorf("param has_more_path: applies only with a paging mode (page_param, offset_param, cursor_path or next_path)"))
	}
	return c, errs
}

func runJSON(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	return runPages(env, in, JSONTask, buildJSON, func(c *jsonConfig, u string, start bool) (crawl.Result, error) {
		if start {
			return c.page(ctx, env, u, c.startPage, nil)
		}
		return c.page(ctx, env, u, pageNumber(in, c.startPage), seenOf(in))
	})
}

func (c *jsonConfig) page(ctx context.Context, env *crawl.Env, u string, page int, seen seenSet) (crawl.Result, error) {
	resp, err := c.fetch(ctx, env, u)
	if err != nil {
		return crawl.Result{}, err
	}
	body, err := charset.Text(resp.Body, resp.Header.Get("Content-Type"), nil)
	if err != nil {
		return crawl.Result{}, crawl.Permanentf("%s: %s: %v", JSONTask, u, err)
	}
	if !gjson.ValidBytes(body) {
		return crawl.Result{}, crawl.Permanentf("%s: %s: the response is not JSON (it starts %q)", JSONTask, u, clip(string(body)))
	}
	doc := gjson.ParseBytes(body)
	list := doc
	if c.items != "" {
		list = doc.Get(c.items)
	}
	var elems []gjson.Result
	switch {
	case list.IsArray():
		elems = list.Array()
	case list.IsObject():
		elems = []gjson.Result{list}
	}
	base := finalURL(resp, u)
	col := newCollector(c.itemRules, env, u, base)
	for _, e := range elems {
		e := e
		get := func(f *fieldSpec) ([]raw, string) { return f.fromJSON(e) }
		if len(c.fields) > 0 {
			if err := col.add(get, ""); err != nil {
				return crawl.Result{}, err
			}
			continue
		}
		col.n++
		data, ok := jsonValue(e).(map[string]any)
		if !ok {
			data = map[string]any{"value": jsonValue(e)}
		}
		if err := col.addData(data, get, ""); err != nil {
			return crawl.Result{}, err
		}
	}
	res := col.res
	if next, ok := c.nextURL(doc, u, base, page, len(elems)); ok {
		followPage(env, &res, JSONTask, u, next, page, seen)
	}
	return res, nil
}

// nextURL is the URL of the page after u, if there is one.
func (c *jsonConfig) nextURL(doc gjson.Result, u string, base *url.URL, page, items int) (string, bool) {
	if c.mode == pageNone {
		return "", false
	}
	if c.maxPages > 0 && page-c.startPage+1 >= c.maxPages {
		return "", false
	}
	if c.hasMorePath != "" && !truthy(doc.Get(c.hasMorePath)) {
		return "", false
	}
	switch c.mode {
	case pageByNumber:
		if items == 0 {
			return "", false
		}
		return setQuery(u, c.pageParam, strconv.Itoa(page+1))
	case pageByOffset:
		if items == 0 {
			return "", false
		}
		offset := c.offsetStart
		if pu, err := url.Parse(u); err == nil {
			if n, err := strconv.Atoi(pu.Query().Get(c.offsetParam)); err == nil {
				offset = n
			}
		}
		step := c.offsetStep
		if step <= 0 {
			step = items
		}
		return setQuery(u, c.offsetParam, strconv.Itoa(offset+step))
	case pageByCursor:
		cur := doc.Get(c.cursorPath)
		if !cur.Exists() || cur.Type == gjson.Null || cur.String() == "" || cur.Type == gjson.False {
			return "", false
		}
		if pu, err := url.Parse(u); err == nil && pu.Query().Get(c.cursorParam) == cur.String() {
			return "", false // the same cursor again: the API is not moving
		}
		return setQuery(u, c.cursorParam, cur.String())
	case pageByLink:
		link := doc.Get(c.nextPath)
		if !link.Exists() || link.Type != gjson.String || strings.TrimSpace(link.Str) == "" {
			return "", false
		}
		if l := linksOf(link.Str, base); len(l) > 0 {
			return l[0], true
		}
	}
	return "", false
}

// truthy reads a has_more value: true, a non-zero number, a non-empty string other than
// "false" and "0", a non-empty array or object.
func truthy(v gjson.Result) bool {
	switch v.Type {
	case gjson.True:
		return true
	case gjson.Number:
		return v.Float() != 0
	case gjson.String:
		s := strings.ToLower(strings.TrimSpace(v.Str))
		return s != "" && s != "false" && s != "0" && s != "no"
	case gjson.JSON:
		return len(v.Array()) > 0 || len(v.Map()) > 0
	}
	return false
}

// setQuery returns u with one query parameter set.
func setQuery(u, name, value string) (string, bool) {
	pu, err := url.Parse(u)
	if err != nil {
		return "", false
	}
	q := pu.Query()
	q.Set(name, value)
	pu.RawQuery = q.Encode()
	return pu.String(), true
}
