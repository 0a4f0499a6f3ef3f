package eslite

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
)

const maxResultWindow = 10000

// target is the set of indexes a search reads, with their merged field mappings.
type target struct {
	ixs    []*esIndex
	fields map[string]fieldInfo
	alias  bleve.Index
}

func (s *server) searchTarget(expr string) (*target, error) {
	ixs, err := s.resolveStrict(expr)
	if err != nil {
		// Patterns never fail; exact unknown names do.
		return nil, err
	}
	t := &target{ixs: ixs, fields: map[string]fieldInfo{}}
	for _, ix := range ixs {
		for n, fi := range ix.fieldMap() {
			if _, ok := t.fields[n]; !ok {
				t.fields[n] = fi
			}
		}
	}
	if len(ixs) == 1 {
		t.alias = ixs[0].bi
	} else if len(ixs) > 1 {
		bis := make([]bleve.Index, len(ixs))
		for i, ix := range ixs {
			bis[i] = ix.bi
		}
		t.alias = bleve.NewIndexAlias(bis...)
	}
	return t, nil
}

// searchBody merges URL parameters into the request body.
func searchBody(r *http.Request, body []byte) (map[string]any, error) {
	req, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	if v := q.Get("q"); v != "" {
		req["query"] = map[string]any{"query_string": map[string]any{"query": v}}
	}
	for _, k := range []string{"size", "from"} {
		if v := q.Get(k); v != "" {
			req[k] = json.Number(v)
		}
	}
	if v := q.Get("sort"); v != "" {
		var sorts []any
		for _, part := range strings.Split(v, ",") {
			f, dir, ok := strings.Cut(part, ":")
			if ok {
				sorts = append(sorts, map[string]any{f: dir})
			} else {
				sorts = append(sorts, f)
			}
		}
		req["sort"] = sorts
	}
	if v := q.Get("track_total_hits"); v != "" {
		req["track_total_hits"] = v
	}
	if v := q.Get("_source"); v != "" {
		if b, err := strconv.ParseBool(v); err == nil {
			req["_source"] = b
		} else {
			req["_source"] = strings.Split(v, ",")
		}
	}
	return req, nil
}

func intParam(v any, name string, def int) (int, error) {
	if v == nil {
		return def, nil
	}
	f, ok := toFloat(v)
	if !ok || f != math.Trunc(f) {
		return 0, parsingErr("[%s] must be an integer, found [%v]", name, v)
	}
	return int(f), nil
}

func (s *server) count(r *http.Request, expr string, body []byte) (int, any, error) {
	req, err := searchBody(r, body)
	if err != nil {
		return 0, nil, err
	}
	for k := range req {
		if k != "query" {
			return 0, nil, parsingErr("request does not support [%s] (count takes only [query])", k)
		}
	}
	t, err := s.searchTarget(expr)
	if err != nil {
		return 0, nil, err
	}
	c := &qctx{fields: t.fields, now: time.Now()}
	q, err := c.translate(req["query"])
	if err != nil {
		return 0, nil, err
	}
	n := uint64(0)
	if t.alias != nil {
		sr := bleve.NewSearchRequestOptions(q, 0, 0, false)
		res, err := t.alias.Search(sr)
		if err != nil {
			return 0, nil, searchErr(err)
		}
		n = res.Total
	}
	return 200, map[string]any{"count": n, "_shards": map[string]any{"total": len(t.ixs), "successful": len(t.ixs), "skipped": 0, "failed": 0}}, nil
}

func searchErr(err error) error {
	return badRequest("search_phase_execution_exception", "all shards failed: %v", err)
}

type sortSpec struct {
	field string // "_score", "_doc" or a field
	desc  bool
	fi    fieldInfo
}

func (c *qctx) parseSort(v any) ([]sortSpec, error) {
	var out []sortSpec
	for _, x := range clauses(v) {
		switch t := x.(type) {
		case string:
			out = append(out, sortSpec{field: t, desc: t == "_score"})
		case map[string]any:
			for f, o := range t {
				sp := sortSpec{field: f, desc: f == "_score"}
				switch ov := o.(type) {
				case string:
					sp.desc = strings.EqualFold(ov, "desc")
					if !sp.desc && !strings.EqualFold(ov, "asc") {
						return nil, parsingErr("[sort] order [%s] must be asc or desc", ov)
					}
				case map[string]any:
					for k, val := range ov {
						switch k {
						case "order":
							sp.desc = strings.EqualFold(scalarString(val), "desc")
						case "unmapped_type", "missing", "mode", "format":
						default:
							return nil, parsingErr("[sort] option [%s] on [%s] is not supported by eslite", k, f)
						}
					}
				default:
					return nil, parsingErr("[sort] malformed for field [%s]", f)
				}
				out = append(out, sp)
			}
		default:
			return nil, parsingErr("[sort] malformed: [%v]", x)
		}
	}
	for i, sp := range out {
		if sp.field == "_score" || sp.field == "_doc" || sp.field == "_id" {
			continue
		}
		fi, ok := c.fields[sp.field]
		if !ok {
			return nil, badRequest("query_shard_exception", "No mapping found for [%s] in order to sort on", sp.field)
		}
		if fi.Type == "text" {
			return nil, badRequest("illegal_argument_exception", "Text fields are not optimised for operations that require per-document field data like aggregations and sorting, so these operations are disabled by default. Please use a keyword field instead. Alternatively, set fielddata=true on [%s] in order to load field data by uninverting the inverted index.", sp.field)
		}
		out[i].fi = fi
	}
	return out, nil
}

func bleveSort(specs []sortSpec) search.SortOrder {
	var order search.SortOrder
	if len(specs) == 0 {
		order = append(order, &search.SortScore{Desc: true})
	}
	for _, sp := range specs {
		switch sp.field {
		case "_score":
			order = append(order, &search.SortScore{Desc: sp.desc})
		case "_doc", "_id":
			order = append(order, &search.SortDocID{Desc: sp.desc})
		default:
			mode := search.SortFieldMin
			if sp.desc {
				mode = search.SortFieldMax
			}
			order = append(order, &search.SortField{Field: sp.field, Desc: sp.desc, Mode: mode, Missing: search.SortFieldMissingLast})
		}
	}
	// Ties break on the id so pages are stable.
	order = append(order, &search.SortDocID{})
	return order
}

var searchKeys = map[string]bool{"query": true, "from": true, "size": true, "sort": true, "_source": true, "track_total_hits": true,
	"highlight": true, "aggs": true, "aggregations": true, "track_scores": true, "timeout": true, "explain": false}

func (s *server) search(r *http.Request, expr string, body []byte) (int, any, error) {
	start := time.Now()
	req, err := searchBody(r, body)
	if err != nil {
		return 0, nil, err
	}
	for k := range req {
		if !searchKeys[k] {
			return 0, nil, parsingErr("Unknown key for a START_OBJECT in [%s] (eslite supports query, from, size, sort, _source, track_total_hits, highlight, aggs)", k)
		}
	}
	t, err := s.searchTarget(expr)
	if err != nil {
		return 0, nil, err
	}
	c := &qctx{fields: t.fields, now: time.Now()}
	q, err := c.translate(req["query"])
	if err != nil {
		return 0, nil, err
	}
	size, err := intParam(req["size"], "size", 10)
	if err != nil {
		return 0, nil, err
	}
	from, err := intParam(req["from"], "from", 0)
	if err != nil {
		return 0, nil, err
	}
	if size < 0 || from < 0 {
		return 0, nil, badRequest("illegal_argument_exception", "[from] and [size] must be non-negative")
	}
	if from+size > maxResultWindow {
		return 0, nil, badRequest("illegal_argument_exception", "Result window is too large, from + size must be less than or equal to: [%d] but was [%d].", maxResultWindow, from+size)
	}
	specs, err := c.parseSort(req["sort"])
	if err != nil {
		return 0, nil, err
	}
	srcFilter, err := parseSourceFilter(req["_source"])
	if err != nil {
		return 0, nil, err
	}
	hl, err := parseHighlight(req["highlight"], t.fields)
	if err != nil {
		return 0, nil, err
	}
	aggDefs := req["aggs"]
	if aggDefs == nil {
		aggDefs = req["aggregations"]
	}
	aggs, err := parseAggs(aggDefs, t.fields)
	if err != nil {
		return 0, nil, err
	}
	trackScores := false
	if b, ok := toBool(req["track_scores"]); ok {
		trackScores = b
	}

	var total uint64
	hits := []any{}
	var maxScore any
	var aggOut map[string]any
	if t.alias != nil {
		sr := bleve.NewSearchRequestOptions(q, size, from, false)
		sr.SortByCustom(bleveSort(specs))
		sr.Fields = []string{fSource}
		res, err := t.alias.Search(sr)
		if err != nil {
			return 0, nil, searchErr(err)
		}
		total = res.Total
		scored := len(specs) == 0 || trackScores
		for _, sp := range specs {
			if sp.field == "_score" {
				scored = true
			}
		}
		if scored && len(res.Hits) > 0 {
			maxScore = res.MaxScore
		}
		for _, h := range res.Hits {
			src := decodeSource(h.Fields[fSource])
			hit := map[string]any{"_index": h.Index, "_id": h.ID, "_score": nil}
			if scored {
				hit["_score"] = h.Score
			}
			if srcFilter != nil {
				hit["_source"] = srcFilter.apply(src)
			}
			if len(specs) > 0 {
				hit["sort"] = sortValues(specs, src, h)
			}
			if hl != nil {
				if h := hl.apply(c, src); len(h) > 0 {
					hit["highlight"] = h
				}
			}
			hits = append(hits, hit)
		}
		if len(aggs) > 0 {
			docs, err := allSources(t.alias, q, int(total))
			if err != nil {
				return 0, nil, err
			}
			aggOut, err = runAggs(aggs, docs)
			if err != nil {
				return 0, nil, err
			}
		}
	} else if len(aggs) > 0 {
		aggOut, err = runAggs(aggs, nil)
		if err != nil {
			return 0, nil, err
		}
	}
	hitsOut := map[string]any{"max_score": maxScore, "hits": hits}
	switch tt := req["track_total_hits"].(type) {
	case nil:
		hitsOut["total"] = totalObj(total, maxResultWindow)
	case bool:
		if tt {
			hitsOut["total"] = totalObj(total, -1)
		}
	case string:
		if b, err := strconv.ParseBool(tt); err == nil {
			if b {
				hitsOut["total"] = totalObj(total, -1)
			}
		} else if n, err := strconv.Atoi(tt); err == nil {
			hitsOut["total"] = totalObj(total, n)
		} else {
			return 0, nil, parsingErr("[track_total_hits] must be a boolean or an integer, found [%s]", tt)
		}
	default:
		n, err := intParam(tt, "track_total_hits", 0)
		if err != nil {
			return 0, nil, err
		}
		if n < 0 {
			hitsOut["total"] = totalObj(total, -1)
		} else {
			hitsOut["total"] = totalObj(total, n)
		}
	}
	out := map[string]any{
		"took":      time.Since(start).Milliseconds(),
		"timed_out": false,
		"_shards":   map[string]any{"total": len(t.ixs), "successful": len(t.ixs), "skipped": 0, "failed": 0},
		"hits":      hitsOut,
	}
	if aggOut != nil {
		out["aggregations"] = aggOut
	}
	return 200, out, nil
}

func totalObj(total uint64, limit int) map[string]any {
	if limit >= 0 && total > uint64(limit) {
		return map[string]any{"value": limit, "relation": "gte"}
	}
	return map[string]any{"value": total, "relation": "eq"}
}

func decodeSource(v any) map[string]any {
	s, _ := v.(string)
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	_ = dec.Decode(&m)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

// allSources loads the _source of every document matching q (for aggregations).
func allSources(idx bleve.Index, q query.Query, n int) ([]map[string]any, error) {
	if n == 0 {
		return nil, nil
	}
	sr := bleve.NewSearchRequestOptions(q, n, 0, false)
	sr.SortByCustom(search.SortOrder{&search.SortDocID{}})
	sr.Fields = []string{fSource}
	res, err := idx.Search(sr)
	if err != nil {
		return nil, searchErr(err)
	}
	out := make([]map[string]any, len(res.Hits))
	for i, h := range res.Hits {
		out[i] = decodeSource(h.Fields[fSource])
	}
	return out, nil
}

// sourceValues returns the values at a dotted path of _source, arrays flattened.
func sourceValues(src map[string]any, path string) []any {
	var out []any
	var walk func(v any, rest string)
	walk = func(v any, rest string) {
		if arr, ok := v.([]any); ok {
			for _, x := range arr {
				walk(x, rest)
			}
			return
		}
		if rest == "" {
			if v != nil {
				out = append(out, v)
			}
			return
		}
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if x, ok := m[rest]; ok {
			walk(x, "")
			return
		}
		for i := 0; i < len(rest); i++ {
			if rest[i] == '.' {
				if x, ok := m[rest[:i]]; ok {
					walk(x, rest[i+1:])
				}
			}
		}
	}
	walk(src, path)
	return out
}

// typedValue converts a _source value to the field's type: string, float64, time (as
// epoch millis float64) or bool.
func typedValue(fi fieldInfo, v any) (any, bool) {
	switch fi.Type {
	case "text", "keyword":
		if _, ok := v.(map[string]any); ok {
			return nil, false
		}
		return scalarString(v), true
	case "long", "double":
		f, ok := toFloat(v)
		if ok && fi.Type == "long" {
			f = math.Trunc(f)
		}
		return f, ok
	case "date":
		t, err := parseDateValue(v)
		if err != nil {
			return nil, false
		}
		return float64(t.UnixMilli()), true
	case "boolean":
		b, ok := toBool(v)
		return b, ok
	}
	return nil, false
}

func fieldValues(fi fieldInfo, src map[string]any) []any {
	var out []any
	for _, v := range sourceValues(src, fi.Src) {
		if tv, ok := typedValue(fi, v); ok {
			out = append(out, tv)
		}
	}
	return out
}

func jsonNumber(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}

func sortValues(specs []sortSpec, src map[string]any, h *search.DocumentMatch) []any {
	out := make([]any, 0, len(specs))
	for _, sp := range specs {
		switch sp.field {
		case "_score":
			out = append(out, h.Score)
			continue
		case "_doc", "_id":
			out = append(out, h.ID)
			continue
		}
		vals := fieldValues(sp.fi, src)
		if len(vals) == 0 {
			if sp.desc {
				out = append(out, math.MinInt64)
			} else {
				out = append(out, math.MaxInt64)
			}
			continue
		}
		best := vals[0]
		for _, v := range vals[1:] {
			if c := compareValues(v, best); (c < 0 && !sp.desc) || (c > 0 && sp.desc) {
				best = v
			}
		}
		switch b := best.(type) {
		case float64:
			out = append(out, jsonNumber(b))
		case bool:
			if b {
				out = append(out, 1)
			} else {
				out = append(out, 0)
			}
		default:
			out = append(out, b)
		}
	}
	return out
}

func compareValues(a, b any) int {
	switch x := a.(type) {
	case float64:
		y, _ := b.(float64)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case string:
		y, _ := b.(string)
		return strings.Compare(x, y)
	case bool:
		y, _ := b.(bool)
		if x == y {
			return 0
		}
		if !x {
			return -1
		}
		return 1
	}
	return 0
}

// ---- _source filtering ----

type sourceFilter struct {
	includes, excludes []string
	none               bool
}

func parseSourceFilter(v any) (*sourceFilter, error) {
	switch t := v.(type) {
	case nil:
		return &sourceFilter{}, nil
	case bool:
		if !t {
			return nil, nil
		}
		return &sourceFilter{}, nil
	case string:
		return &sourceFilter{includes: []string{t}}, nil
	case []any:
		f := &sourceFilter{}
		for _, x := range t {
			f.includes = append(f.includes, scalarString(x))
		}
		return f, nil
	case []string:
		return &sourceFilter{includes: t}, nil
	case map[string]any:
		f := &sourceFilter{}
		for k, x := range t {
			var list []string
			for _, y := range clauses(x) {
				list = append(list, scalarString(y))
			}
			switch k {
			case "includes", "include":
				f.includes = list
			case "excludes", "exclude":
				f.excludes = list
			default:
				return nil, parsingErr("[_source] does not support [%s] (includes, excludes)", k)
			}
		}
		return f, nil
	}
	return nil, parsingErr("[_source] malformed: [%v]", v)
}

func pathMatches(patterns []string, path string, prefixOK bool) bool {
	for _, p := range patterns {
		if globMatch(p, path) || strings.HasPrefix(path, p+".") {
			return true
		}
		if prefixOK && strings.HasPrefix(p, path+".") {
			return true
		}
	}
	return false
}

func (f *sourceFilter) apply(src map[string]any) map[string]any {
	if len(f.includes) == 0 && len(f.excludes) == 0 {
		return src
	}
	var walk func(m map[string]any, prefix string) map[string]any
	walk = func(m map[string]any, prefix string) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			path := prefix + k
			if len(f.excludes) > 0 && pathMatches(f.excludes, path, false) {
				continue
			}
			inc := len(f.includes) == 0 || pathMatches(f.includes, path, false)
			if sub, ok := v.(map[string]any); ok && !inc && pathMatches(f.includes, path, true) {
				if r := walk(sub, path+"."); len(r) > 0 {
					out[k] = r
				}
				continue
			}
			if sub, ok := v.(map[string]any); ok && inc && len(f.excludes) > 0 {
				out[k] = walk(sub, path+".")
				continue
			}
			if inc {
				out[k] = v
			}
		}
		return out
	}
	return walk(src, "")
}

// ---- highlighting ----

type highlighter struct {
	fields    []string
	pre, post string
}

func parseHighlight(v any, fields map[string]fieldInfo) (*highlighter, error) {
	if v == nil {
		return nil, nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, parsingErr("[highlight] malformed")
	}
	h := &highlighter{pre: "<em>", post: "</em>"}
	for k, x := range o {
		switch k {
		case "fields":
			var names []string
			switch fs := x.(type) {
			case map[string]any:
				for n := range fs {
					names = append(names, n)
				}
			case []any:
				for _, e := range fs {
					if m, ok := e.(map[string]any); ok {
						for n := range m {
							names = append(names, n)
						}
					}
				}
			default:
				return nil, parsingErr("[highlight] [fields] malformed")
			}
			for _, n := range names {
				if strings.ContainsAny(n, "*?") {
					for fn, fi := range fields {
						if fi.Type == "text" && globMatch(n, fn) {
							h.fields = append(h.fields, fn)
						}
					}
				} else {
					h.fields = append(h.fields, n)
				}
			}
		case "pre_tags", "post_tags":
			tags := clauses(x)
			if len(tags) == 0 {
				continue
			}
			if k == "pre_tags" {
				h.pre = scalarString(tags[0])
			} else {
				h.post = scalarString(tags[0])
			}
		case "require_field_match", "type", "fragment_size", "number_of_fragments", "encoder", "order":
		default:
			return nil, parsingErr("[highlight] option [%s] is not supported by eslite", k)
		}
	}
	sort.Strings(h.fields)
	return h, nil
}

func (h *highlighter) apply(c *qctx, src map[string]any) map[string]any {
	out := map[string]any{}
	for _, f := range h.fields {
		fi, ok := c.fields[f]
		if !ok || fi.Type != "text" {
			continue
		}
		terms := c.hl[f]
		if len(terms) == 0 {
			continue
		}
		var frags []any
		for _, v := range sourceValues(src, fi.Src) {
			s := scalarString(v)
			if frag, ok := h.mark(s, terms); ok {
				frags = append(frags, frag)
			}
		}
		if len(frags) > 0 {
			out[f] = frags
		}
	}
	return out
}

func (h *highlighter) mark(s string, terms map[string]bool) (string, bool) {
	var b bytes.Buffer
	last := 0
	hit := false
	for _, tok := range textAnalyzer.Analyze([]byte(s)) {
		if !terms[string(tok.Term)] {
			continue
		}
		hit = true
		b.WriteString(s[last:tok.Start])
		b.WriteString(h.pre)
		b.WriteString(s[tok.Start:tok.End])
		b.WriteString(h.post)
		last = tok.End
	}
	b.WriteString(s[last:])
	return b.String(), hit
}
