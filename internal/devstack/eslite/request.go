package eslite

import (
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// target is the set of indexes a search reads, with their merged field mappings.
type target struct {
	ixs []*esIndex
	// filters are, per index reached only through aliases with a filter, those filters
	// (raw query JSON); a search sees the documents any of them matches.
	filters map[*esIndex][]any
	fields  map[string]fieldInfo
	alias   bleve.Index
	server  *server
	pit     *pointInTime // the point in time the search reads through, if any
}

func (s *server) searchTarget(r *http.Request, expr string) (*target, error) {
	ixs, err := s.resolveFor(r, expr, expandOpen)
	if err != nil {
		return nil, err
	}
	open := ixs[:0:0]
	for _, ix := range ixs {
		if ix.closed() {
			if r.URL.Query().Get("ignore_unavailable") == "true" {
				// An unavailable index is left out of the search.
				continue
			}
			return nil, &esError{status: 400, typ: "index_closed_exception", reason: "closed", extra: map[string]any{"index": ix.name}}
		}
		open = append(open, ix)
	}
	ixs = open
	t := &target{ixs: ixs, fields: map[string]fieldInfo{}, server: s, filters: aliasFilters(expr, ixs)}
	for _, ix := range ixs {
		for n, fi := range ix.fieldMap() {
			have, ok := t.fields[n]
			switch {
			case !ok:
				t.fields[n] = fi
			case have.Type == "long" && fi.Type == "double":
				// A number that is whole in one index and floating in another is
				// read as floating everywhere, as Elasticsearch widens a long to a
				// double when it merges the indexes' terms.
				t.fields[n] = fi
			case have.Type == "date" && fi.Type == "date" && have.DateFormat != fi.DateFormat:
				// A date field mapped with different formats in the indexes searched
				// reads each index's values in its own format.
				have.DateFormat = formatOrDefault(have.DateFormat) + "||" + formatOrDefault(fi.DateFormat)
				t.fields[n] = have
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

// aliasFilters finds, for each index of ixs, the filters of the aliases expr reaches it
// through, as Elasticsearch applies them: an index named by its own name, a pattern
// matching its name, _all, or an alias without a filter is searched whole; one reached
// only through aliases with filters shows the documents any of those filters matches.
func aliasFilters(expr string, ixs []*esIndex) map[*esIndex][]any {
	var parts []string
	for _, p := range strings.Split(expr, ",") {
		p = strings.TrimSpace(p)
		if p == "" || strings.HasPrefix(p, "-") {
			continue
		}
		if name, err := dateMathName(p, time.Now()); err == nil {
			p = name
		}
		parts = append(parts, p)
	}
	matches := func(part, name string) bool {
		return part == name || (strings.ContainsAny(part, "*?") && globMatch(part, name))
	}
	out := map[*esIndex][]any{}
	for _, ix := range ixs {
		aliases := ix.snapshotMeta().Aliases
		whole := false
		var filters []any
		for _, p := range parts {
			if p == "_all" || matches(p, ix.name) {
				whole = true
				break
			}
			for a, attrs := range aliases {
				if !matches(p, a) {
					continue
				}
				if f, ok := attrs["filter"]; ok && f != nil {
					filters = append(filters, f)
				} else {
					whole = true
				}
			}
		}
		if !whole && len(filters) > 0 {
			out[ix] = filters
		}
	}
	return out
}

// applyAliasFilters keeps, of the documents of each filtered index, those its alias
// filters match.
func (t *target) applyAliasFilters(docs []*scoredDoc) ([]*scoredDoc, error) {
	if len(t.filters) == 0 {
		return docs, nil
	}
	c := &qctx{fields: t.fields, now: time.Now(), t: t}
	byIndex := map[*esIndex][]*scoredDoc{}
	for _, d := range docs {
		if _, ok := t.filters[d.ix]; ok {
			byIndex[d.ix] = append(byIndex[d.ix], d)
		}
	}
	keep := map[*scoredDoc]bool{}
	for ix, ds := range byIndex {
		qs := make([]query.Query, 0, len(t.filters[ix]))
		for _, f := range t.filters[ix] {
			q, err := c.translate(f)
			if err != nil {
				return nil, err
			}
			qs = append(qs, q)
		}
		sc := &scorer{ix: ix, fields: t.fields, docs: ds}
		m := sc.leafMatches(bleve.NewDisjunctionQuery(qs...))
		for _, d := range ds {
			if m[d.id] {
				keep[d] = true
			}
		}
	}
	out := docs[:0]
	for _, d := range docs {
		if _, filtered := t.filters[d.ix]; !filtered || keep[d] {
			out = append(out, d)
		}
	}
	return out, nil
}

// intSetting reads an integer index setting of the target, the smallest over its indexes.
func (t *target) intSetting(key string, def int) int {
	out := def
	for i, ix := range t.ixs {
		if v := ix.setting(key); v != "" {
			if n, err := strconv.Atoi(v); err == nil && (i == 0 || n < out) {
				out = n
			}
		}
	}
	return out
}

// queryStringParams turns ?q= and its companions into a query_string query.
func queryStringParams(q url.Values) map[string]any {
	v := q.Get("q")
	if v == "" {
		return nil
	}
	qs := map[string]any{"query": v}
	if df := q.Get("df"); df != "" {
		qs["default_field"] = df
	}
	if op := q.Get("default_operator"); op != "" {
		qs["default_operator"] = op
	}
	if l := q.Get("lenient"); l != "" {
		qs["lenient"] = l == "true"
	}
	return map[string]any{"query_string": qs}
}

var searchURLParams = map[string]bool{"q": true, "df": true, "default_operator": true, "lenient": true, "analyzer": true,
	"analyze_wildcard": true, "size": true, "from": true, "sort": true, "track_total_hits": true, "_source": true,
	"_source_includes": true, "_source_excludes": true, "docvalue_fields": true, "stored_fields": true, "track_scores": true,
	"rest_total_hits_as_int": true, "typed_keys": true, "search_type": true, "ignore_unavailable": true, "allow_no_indices": true,
	"expand_wildcards": true, "preference": true, "routing": true, "request_cache": true, "timeout": true, "terminate_after": true,
	"version": true, "seq_no_primary_term": true, "explain": true, "scroll": true, "batched_reduce_size": true,
	"max_concurrent_shard_requests": true, "pre_filter_shard_size": true, "ccs_minimize_roundtrips": true,
	"allow_partial_search_results": true, "include_named_queries_score": true, "error_trace": true, "filter_path": true,
	"human": true, "pretty": true, "min_score": true, "stats": true, "suggest_field": true, "force_synthetic_source": true}

// searchBody merges URL parameters into the request body.
func searchBody(r *http.Request, body []byte) (map[string]any, error) {
	req, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	for k := range q {
		if !searchURLParams[k] {
			return nil, badRequest("illegal_argument_exception", "request [%s] contains unrecognized parameter: [%s]", r.URL.Path, k)
		}
	}
	if qs := queryStringParams(q); qs != nil {
		req["query"] = qs
	}
	for _, k := range []string{"size", "from", "terminate_after", "min_score"} {
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
	for _, k := range []string{"track_total_hits", "track_scores", "version", "seq_no_primary_term", "explain"} {
		if v := q.Get(k); v != "" {
			req[k] = v
		}
	}
	for _, k := range []string{"docvalue_fields", "stored_fields"} {
		if v, ok := q[k]; ok {
			var list []any
			for _, x := range strings.Split(v[0], ",") {
				list = append(list, x)
			}
			req[k] = list
		}
	}
	if f, err := sourceFilterFrom(q, req["_source"]); err != nil {
		return nil, err
	} else if f == nil {
		req["_source"] = false
	} else {
		req["_source"] = f
	}
	return req, nil
}

// sourceFilterFrom combines a body _source option with the URL's _source,
// _source_includes and _source_excludes, which take precedence; nil means no _source.
func sourceFilterFrom(q url.Values, body any) (*sourceFilter, error) {
	f, err := parseSourceFilter(body)
	if err != nil {
		return nil, err
	}
	if v, ok := q["_source"]; ok {
		if b, err := strconv.ParseBool(v[0]); err == nil {
			if !b {
				return nil, nil
			}
			f = &sourceFilter{}
		} else {
			f = &sourceFilter{includes: strings.Split(v[0], ",")}
		}
	}
	inc, exc := q.Get("_source_includes"), q.Get("_source_excludes")
	if inc != "" || exc != "" {
		if f == nil {
			f = &sourceFilter{}
		}
		if inc != "" {
			f.includes = strings.Split(inc, ",")
		}
		if exc != "" {
			f.excludes = strings.Split(exc, ",")
		}
	}
	return f, nil
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

func searchErr(err error) error {
	return badRequest("search_phase_execution_exception", "all shards failed: %v", err)
}

// matchDocs returns every document q matches in the target, scored by BM25 when
// scores are needed.
func matchDocs(t *target, q query.Query, scored bool) ([]*scoredDoc, error) {
	if t.alias == nil {
		return nil, nil
	}
	count := bleve.NewSearchRequestOptions(q, 0, 0, false)
	res, err := t.alias.Search(count)
	if err != nil {
		return nil, searchErr(err)
	}
	if res.Total == 0 {
		return nil, nil
	}
	sr := bleve.NewSearchRequestOptions(q, int(res.Total), 0, false)
	sr.Fields = []string{fSource, fSeqNo, fVersion}
	sr.Score = "none"
	res, err = t.alias.Search(sr)
	if err != nil {
		return nil, searchErr(err)
	}
	byName := map[string]*esIndex{}
	limits := map[*esIndex]int64{}
	for _, ix := range t.ixs {
		byName[ix.name] = ix
		if limit, limited := ix.visibleUpTo(); limited {
			limits[ix] = limit
		}
	}
	docs := make([]*scoredDoc, 0, len(res.Hits))
	for _, h := range res.Hits {
		ix := byName[h.Index]
		if ix == nil && len(t.ixs) == 1 {
			ix = t.ixs[0]
		}
		if ix == nil {
			continue
		}
		d := &scoredDoc{ix: ix, id: h.ID, src: decodeSource(h.Fields[fSource]), seq: parseSeq(h.Fields[fSeqNo]), hit: h}
		if t.pit != nil && !t.pit.holds(ix.name, d.id, d.seq) {
			continue
		}
		if limit, ok := limits[ix]; ok && d.seq > limit {
			continue
		}
		docs = append(docs, d)
	}
	docs, err = t.applyAliasFilters(docs)
	if err != nil {
		return nil, err
	}
	if scored {
		perIndex := map[*esIndex][]*scoredDoc{}
		for _, d := range docs {
			perIndex[d.ix] = append(perIndex[d.ix], d)
		}
		for ix, ds := range perIndex {
			if err := scoreAll(ix, q, t.fields, ds); err != nil {
				return nil, err
			}
		}
	}
	return docs, nil
}

func (s *server) count(r *http.Request, expr string, body []byte) (int, any, error) {
	q := r.URL.Query()
	if v := q.Get("terminate_after"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n <= 0 {
			return 0, nil, badRequest("illegal_argument_exception", "terminateAfter must be > 0")
		}
	}
	req, err := decodeObject(body)
	if err != nil {
		return 0, nil, err
	}
	for k := range req {
		if k != "query" && k != "stats" {
			return 0, nil, parsingErr("request does not support [%s]", k)
		}
	}
	if qs := queryStringParams(q); qs != nil {
		req["query"] = qs
	}
	t, err := s.searchTarget(r, expr)
	if err != nil {
		return 0, nil, err
	}
	c := &qctx{fields: t.fields, now: time.Now(), t: t}
	bq, err := c.translate(req["query"])
	if err != nil {
		return 0, nil, err
	}
	minScore, hasMin := toFloat(q.Get("min_score"))
	docs, err := matchDocs(t, bq, hasMin)
	if err != nil {
		return 0, nil, err
	}
	n := 0
	for _, d := range docs {
		if !hasMin || d.score >= minScore {
			n++
		}
	}
	return 200, map[string]any{"count": n, "_shards": map[string]any{"total": len(t.ixs), "successful": len(t.ixs), "skipped": 0, "failed": 0}}, nil
}

type sortSpec struct {
	field string // "_score", "_doc", "_script" or a field
	desc  bool
	fi    fieldInfo
	// format renders a date field's sort values (and reads its search_after values) in
	// a date format instead of as epoch millis.
	format string
	// missingFirst puts documents without a value first, whatever the order ("missing":
	// "_first"); missingValue, when set, is the value they sort by instead.
	missingFirst bool
	missingValue any
	// script computes a _script sort's value for a document.
	script func(d *scoredDoc) []any
}

func (c *qctx) parseSort(v any) ([]sortSpec, error) {
	var out []sortSpec
	for _, x := range clauses(v) {
		switch t := x.(type) {
		case string:
			out = append(out, sortSpec{field: t, desc: t == "_score"})
		case map[string]any:
			for _, f := range slices.Sorted(maps.Keys(t)) {
				o := t[f]
				if f == "_script" {
					sp, err := c.scriptSort(o)
					if err != nil {
						return nil, err
					}
					out = append(out, sp)
					continue
				}
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
						case "format":
							sp.format = scalarString(val)
						case "missing":
							switch m := scalarString(val); m {
							case "_first":
								sp.missingFirst = true
							case "_last":
							default:
								sp.missingValue = val
							}
						case "unmapped_type", "mode", "numeric_type":
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
		if sp.field == "_score" || sp.field == "_doc" || sp.field == "_id" || sp.script != nil {
			continue
		}
		if sp.field == "_shard_doc" {
			// eslite has no point in time, the only context _shard_doc sorts in.
			return nil, badRequest("action_request_validation_exception", "Validation Failed: 1: [_shard_doc] sort field cannot be used without [point in time];")
		}
		fi, ok := c.fields[sp.field]
		if !ok {
			return nil, badRequest("query_shard_exception", "No mapping found for [%s] in order to sort on", sp.field)
		}
		if fi.Type == "text" {
			return nil, badRequest("illegal_argument_exception", "Text fields are not optimised for operations that require per-document field data like aggregations and sorting, so these operations are disabled by default. Please use a keyword field instead. Alternatively, set fielddata=true on [%s] in order to load field data by uninverting the inverted index.", sp.field)
		}
		out[i].fi = fi
		if sp.missingValue != nil {
			tv, ok := typedValue(fi, sp.missingValue)
			if !ok {
				return nil, badRequest("illegal_argument_exception", "[sort] missing value [%v] of [%s] is not a %s", sp.missingValue, sp.field, fi.ESType)
			}
			out[i].missingValue = tv
		}
	}
	return out, nil
}

// sortKey is one document's value for one sort clause; missing values sort last.
type sortKey struct {
	v       any
	missing bool
}

func docSortKeys(specs []sortSpec, d *scoredDoc) []sortKey {
	keys := make([]sortKey, len(specs))
	for i, sp := range specs {
		switch sp.field {
		case "_score":
			keys[i] = sortKey{v: d.score}
		case "_doc":
			keys[i] = sortKey{v: float64(d.seq)}
		case "_id":
			keys[i] = sortKey{v: d.id}
		default:
			vals := sortSource(sp, d)
			if len(vals) == 0 && sp.missingValue != nil {
				vals = []any{sp.missingValue}
			}
			if len(vals) == 0 {
				keys[i] = sortKey{missing: true}
				continue
			}
			best := vals[0]
			for _, v := range vals[1:] {
				if c := compareValues(v, best); (c < 0 && !sp.desc) || (c > 0 && sp.desc) {
					best = v
				}
			}
			keys[i] = sortKey{v: best}
		}
	}
	return keys
}

func compareKeys(specs []sortSpec, a, b []sortKey) int {
	for i, sp := range specs {
		ka, kb := a[i], b[i]
		switch {
		case ka.missing && kb.missing:
			continue
		case ka.missing != kb.missing:
			if ka.missing == sp.missingFirst {
				return -1
			}
			return 1
		}
		c := compareValues(ka.v, kb.v)
		if sp.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// afterKeys parses search_after values against the sort clauses.
func afterKeys(specs []sortSpec, v any) ([]sortKey, error) {
	vals, ok := v.([]any)
	if !ok || len(vals) != len(specs) {
		return nil, parsingErr("search_after has %d value(s) but sort has %d.", len(clauses(v)), len(specs))
	}
	out := make([]sortKey, len(specs))
	for i, sp := range specs {
		x := vals[i]
		switch {
		case sp.field == "_id":
			out[i] = sortKey{v: scalarString(x)}
		case sp.field == "_score" || sp.field == "_doc" || sp.fi.Type == "long" || sp.fi.Type == "double":
			f, ok := toFloat(x)
			if !ok {
				return nil, parsingErr("Failed to parse search_after value [%v] for field [%s]", x, sp.field)
			}
			out[i] = sortKey{v: f}
		case sp.fi.Type == "date":
			if f, ok := toFloat(x); ok {
				out[i] = sortKey{v: f}
				continue
			}
			format := sp.format
			if format == "" {
				format = sp.fi.DateFormat
			}
			tm, err := parseDateIn(x, format, time.UTC)
			if format == "" {
				tm, err = parseDateValue(x)
			}
			if err != nil {
				return nil, badRequest("parse_exception", "failed to parse date field [%v] with format [%s]", x, formatOrDefault(format))
			}
			out[i] = sortKey{v: float64(tm.UnixMilli())}
		case sp.fi.Type == "boolean":
			b, _ := toBool(x)
			out[i] = sortKey{v: b}
		default:
			out[i] = sortKey{v: scalarString(x)}
		}
	}
	return out, nil
}

// formatValues renders typed field values as the fields and docvalue_fields options do.
func formatValues(fi fieldInfo, vals []any) []any {
	out := make([]any, 0, len(vals))
	for _, v := range vals {
		switch t := v.(type) {
		case float64:
			if fi.Type == "date" {
				out = append(out, time.UnixMilli(int64(t)).UTC().Format("2006-01-02T15:04:05.000Z"))
			} else if fi.Type == "long" {
				out = append(out, jsonNumber(t))
			} else {
				out = append(out, t)
			}
		default:
			out = append(out, t)
		}
	}
	return out
}

// decimalFormat applies a Java DecimalFormat such as "#.0" or "0.00" to a number.
func decimalFormat(f float64, pattern string) string {
	// Text around the number pattern (digits, #, commas and the point) is kept as is.
	start := strings.IndexAny(pattern, "#0")
	if start < 0 {
		return pattern
	}
	end := start
	for end < len(pattern) && strings.ContainsRune("#0,.", rune(pattern[end])) {
		end++
	}
	if start > 0 || end < len(pattern) {
		return pattern[:start] + decimalFormat(f, pattern[start:end]) + pattern[end:]
	}
	_, frac, ok := strings.Cut(pattern, ".")
	if !ok {
		return strconv.FormatFloat(math.Round(f), 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'f', len(frac), 64)
}

// fieldRequest is one entry of docvalue_fields or fields: a name or pattern, a format,
// and (fields only) whether unmapped _source paths count too.
type fieldRequest struct {
	pattern, format string
	unmapped        bool
}

func parseFieldRequests(v any, what string) ([]fieldRequest, error) {
	var out []fieldRequest
	for _, x := range clauses(v) {
		switch t := x.(type) {
		case string:
			out = append(out, fieldRequest{pattern: t})
		case map[string]any:
			f, ok := t["field"].(string)
			if !ok {
				return nil, parsingErr("[%s] entries need a [field]", what)
			}
			out = append(out, fieldRequest{pattern: f, format: scalarString(orDefault(t["format"], "")), unmapped: boolOpt(t["include_unmapped"])})
		default:
			return nil, parsingErr("[%s] malformed: [%v]", what, x)
		}
	}
	return out, nil
}

// docValueFields fills a hit's fields for docvalue_fields requests.
func docValueFields(reqs []fieldRequest, fields map[string]fieldInfo, src map[string]any, out map[string]any) error {
	for _, fr := range reqs {
		var names []string
		if strings.ContainsAny(fr.pattern, "*?") {
			for n := range fields {
				if globMatch(fr.pattern, n) {
					names = append(names, n)
				}
			}
		} else {
			names = []string{fr.pattern}
		}
		for _, n := range names {
			fi, ok := fields[n]
			if !ok || fi.Type == "none" {
				continue
			}
			if fi.Type == "text" {
				return badRequest("illegal_argument_exception", "Can't load fielddata on [%s] because fielddata is unsupported on fields of type [text]. Use a field with doc values instead.", n)
			}
			vals := formatValues(fi, fieldValues(fi, src))
			if fr.format != "" && (fi.Type == "long" || fi.Type == "double") {
				for i, v := range vals {
					if f, ok := toFloat(v); ok {
						vals[i] = decimalFormat(f, fr.format)
					}
				}
			}
			if len(vals) > 0 {
				out[n] = vals
			}
		}
	}
	return nil
}

func totalObj(total int, limit int) map[string]any {
	if limit >= 0 && total > limit {
		return map[string]any{"value": limit, "relation": "gte"}
	}
	return map[string]any{"value": total, "relation": "eq"}
}

// indexBoost returns the indices_boost factor of an index: the first entry naming it,
// an alias of it, or a pattern matching it.
func (s *server) indexBoosts(v any, ignoreUnavailable bool) (func(ix *esIndex) float64, error) {
	type entry struct {
		expr  string
		boost float64
	}
	var entries []entry
	add := func(m map[string]any) error {
		for k, x := range m {
			f, ok := toFloat(x)
			if !ok {
				return parsingErr("[indices_boost] value for [%s] must be a number", k)
			}
			entries = append(entries, entry{k, f})
		}
		return nil
	}
	switch t := v.(type) {
	case nil:
		return func(*esIndex) float64 { return 1 }, nil
	case []any:
		for _, x := range t {
			m, ok := x.(map[string]any)
			if !ok {
				return nil, parsingErr("[indices_boost] entries must be objects")
			}
			if err := add(m); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			if err := add(map[string]any{k: t[k]}); err != nil {
				return nil, err
			}
		}
	default:
		return nil, parsingErr("[indices_boost] malformed")
	}
	for _, e := range entries {
		if !strings.ContainsAny(e.expr, "*?") && len(s.resolve(e.expr)) == 0 && !ignoreUnavailable {
			return nil, notFoundIndex(e.expr)
		}
	}
	return func(ix *esIndex) float64 {
		for _, e := range entries {
			if globMatch(e.expr, ix.name) || ix.hasAlias(e.expr) {
				return e.boost
			}
			for _, a := range ix.aliasNames() {
				if strings.ContainsAny(e.expr, "*?") && globMatch(e.expr, a) {
					return e.boost
				}
			}
		}
		return 1
	}, nil
}

var searchKeys = map[string]bool{"query": true, "from": true, "size": true, "sort": true, "_source": true, "track_total_hits": true,
	"highlight": true, "aggs": true, "aggregations": true, "track_scores": true, "timeout": true, "explain": true,
	"stored_fields": true, "docvalue_fields": true, "fields": true, "min_score": true, "indices_boost": true,
	"collapse": true, "profile": true, "version": true, "seq_no_primary_term": true, "search_after": true,
	"post_filter": true, "terminate_after": true, "stats": true, "script_fields": true, "rescore": true,
	"runtime_mappings": true, "ext": true, "pit": true, "suggest": false, "knn": false, "retriever": false}

func boolOpt(v any) bool {
	b, _ := toBool(v)
	return b
}

// formatOrDefault is a date field's format, the default one when its mapping sets none.
func formatOrDefault(f string) string {
	if f == "" {
		return defaultDateFormat
	}
	return f
}
