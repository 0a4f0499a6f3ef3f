package eslite

import (
	"fmt"
	"math"
	"net/http"
	"reflect"
	"sort"
	"time"

	"github.com/blevesearch/bleve/v2/search/query"
)

// searchLimits refuses what Elasticsearch refuses before running a search, with its
// messages.
func searchLimits(r *http.Request, req map[string]any, t *target, from, size int) error {
	q := r.URL.Query()
	switch st := q.Get("search_type"); st {
	case "", "query_then_fetch", "dfs_query_then_fetch":
	default:
		return badRequest("illegal_argument_exception", "No search type for [%s]", st)
	}
	window := t.intSetting("max_result_window", maxResultWindow)
	if from < 0 {
		return badRequest("illegal_argument_exception", "[from] parameter cannot be negative, found [%d]", from)
	}
	if size < 0 {
		return badRequest("illegal_argument_exception", "[size] parameter cannot be negative, found [%d]", size)
	}
	if scrollOf(r) != nil {
		if size > window {
			return badRequest("illegal_argument_exception", "Batch size is too large, size must be less than or equal to: [%d] but was [%d]. Scroll batch sizes cost as much memory as result windows so they are controlled by the [index.max_result_window] index level setting.", window, size)
		}
		if req["collapse"] != nil {
			return badRequest("illegal_argument_exception", "cannot use `collapse` in a scroll context")
		}
	} else if from+size > window {
		return badRequest("illegal_argument_exception", "Result window is too large, from + size must be less than or equal to: [%d] but was [%d]. See the scroll api for a more efficient way to request large data sets. This limit can be set by changing the [index.max_result_window] index level setting.", window, from+size)
	}
	if rs := req["rescore"]; rs != nil {
		for _, x := range clauses(rs) {
			o, _ := x.(map[string]any)
			if w, ok := toFloat(o["window_size"]); ok && int(w) > window {
				return badRequest("illegal_argument_exception", "Rescore window [%d] is too large. It must be less than [%d]. This prevents allocating massive heaps for storing the results to be rescored. This limit can be set by changing the [index.max_result_window] index level setting.", int(w), window)
			}
		}
		if req["collapse"] != nil {
			return badRequest("illegal_argument_exception", "cannot use `collapse` in conjunction with `rescore`")
		}
		return badRequest("illegal_argument_exception", "eslite does not support [rescore]")
	}
	if dv := clauses(req["docvalue_fields"]); len(dv) > t.intSetting("max_docvalue_fields_search", 100) {
		return badRequest("illegal_argument_exception", "Trying to retrieve too many docvalue_fields. Must be less than or equal to: [%d] but was [%d]. This limit can be set by changing the [index.max_docvalue_fields_search] index level setting.", t.intSetting("max_docvalue_fields_search", 100), len(dv))
	}
	if sf, ok := req["script_fields"].(map[string]any); ok {
		if max := t.intSetting("max_script_fields", 32); len(sf) > max {
			return badRequest("illegal_argument_exception", "Trying to retrieve too many script_fields. Must be less than or equal to: [%d] but was [%d]. This limit can be set by changing the [index.max_script_fields] index level setting.", max, len(sf))
		}
	}
	if c, ok := req["collapse"].(map[string]any); ok && req["search_after"] != nil {
		specs := clauses(req["sort"])
		f := fmt.Sprint(c["field"])
		ok := len(specs) == 1
		if ok {
			m, isMap := specs[0].(map[string]any)
			_, named := m[f]
			ok = (isMap && named && len(m) == 1) || specs[0] == f
		}
		if !ok {
			return badRequest("illegal_argument_exception", "Cannot use [collapse] in conjunction with [search_after] unless the search is sorted on the same field. Multiple sort fields are not allowed.")
		}
	}
	return nil
}

func (s *server) search(r *http.Request, expr string, body []byte) (int, any, error) {
	start := time.Now()
	req, err := searchBody(r, body)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range req {
		if !searchKeys[k] {
			kind := "START_OBJECT"
			if _, isObj := v.(map[string]any); !isObj {
				kind = "VALUE_STRING"
			}
			return 0, nil, parsingErr("Unknown key for a %s in [%s].", kind, k)
		}
	}
	q := r.URL.Query()
	asInt := q.Get("rest_total_hits_as_int") == "true"
	size, err := intParam(req["size"], "size", 10)
	if err != nil {
		return 0, nil, err
	}
	from, err := intParam(req["from"], "from", 0)
	if err != nil {
		return 0, nil, err
	}
	trackLimit := maxResultWindow // accurate up to this many
	trackOff := false
	switch tt := req["track_total_hits"].(type) {
	case nil:
	case bool:
		trackOff, trackLimit = !tt, -1
	case string:
		if b, err := boolString(tt); err == nil {
			trackOff, trackLimit = !b, -1
		} else if n, err := intParam(tt, "track_total_hits", 0); err == nil {
			trackLimit = n
		} else {
			return 0, nil, parsingErr("[track_total_hits] must be a boolean or an integer, found [%s]", tt)
		}
	default:
		n, err := intParam(tt, "track_total_hits", 0)
		if err != nil {
			return 0, nil, err
		}
		trackLimit = n
	}
	if trackLimit < -1 {
		return 0, nil, badRequest("illegal_argument_exception", "[track_total_hits] parameter must be positive or equals to -1, got %d", trackLimit)
	}
	if asInt && !trackOff && trackLimit != -1 && req["track_total_hits"] != nil {
		return 0, nil, badRequest("illegal_argument_exception", "[rest_total_hits_as_int] cannot be used if the tracking of total hits is not accurate, got %d", trackLimit)
	}
	if q.Get("scroll") != "" {
		return s.openScroll(r, expr, req)
	}
	var pit *pointInTime
	var pitID string
	if sc := scrollOf(r); sc != nil {
		pit = sc.pit
	} else if spec, ok := req["pit"]; ok {
		if expr != "_all" {
			return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: 1: [indices] cannot be used with point in time. Do not specify any index with point in time.;")
		}
		if pit, pitID, err = s.pit(spec); err != nil {
			return 0, nil, err
		}
		expr = pit.pitIndexes()
	}
	t, err := s.searchTarget(r, expr)
	if err != nil {
		return 0, nil, err
	}
	t.pit = pit
	// The query is parsed before the limits are checked, as a shard creates its search
	// context: an invalid query reports its own error first.
	c := &qctx{fields: t.fields, now: time.Now(), t: t}
	bq, err := c.translate(req["query"])
	if err != nil {
		return 0, nil, err
	}
	if err := searchLimits(r, req, t, from, size); err != nil {
		return 0, nil, err
	}
	specs, err := c.parseSort(req["sort"])
	if err != nil {
		return 0, nil, err
	}
	srcFilter, err := parseSourceFilter(req["_source"])
	if err != nil {
		return 0, nil, err
	}
	hl, err := parseHighlight(req["highlight"], t)
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
	if err := checkParents(aggs, nil); err != nil {
		return 0, nil, err
	}
	if err := checkMatrixFields(aggs, t.ixs); err != nil {
		return 0, nil, err
	}
	maxBuckets := s.maxBuckets()
	if err := checkBucketLimits(aggs, maxBuckets); err != nil {
		return 0, nil, err
	}
	dvFields, err := parseFieldRequests(req["docvalue_fields"], "docvalue_fields")
	if err != nil {
		return 0, nil, err
	}
	fetch, err := parseFieldRequests(req["fields"], "fields")
	if err != nil {
		return 0, nil, err
	}
	scripts, err := parseScriptFields(req["script_fields"])
	if err != nil {
		return 0, nil, err
	}
	boostOfIndex, err := s.indexBoosts(req["indices_boost"], q.Get("ignore_unavailable") == "true")
	if err != nil {
		return 0, nil, err
	}
	col, err := parseCollapse(req["collapse"], c)
	if err != nil {
		return 0, nil, err
	}
	// stored_fields: "_none_" drops _id and _source, a list drops _source unless it
	// names it; listed fields mapped with store: true come back in fields.
	storedNone, storedList, withSource := storedFields(req, srcFilter != nil)
	minScore, hasMin := toFloat(req["min_score"])
	trackScores := boolOpt(req["track_scores"])
	scored := len(specs) == 0 || trackScores || hasMin || req["indices_boost"] != nil || len(namedQueries(bq)) > 0
	for _, sp := range specs {
		if sp.field == "_score" {
			scored = true
		}
	}
	docs, err := matchDocs(t, bq, scored)
	if err != nil {
		return 0, nil, err
	}
	if req["indices_boost"] != nil {
		for _, d := range docs {
			d.score *= boostOfIndex(d.ix)
		}
	}
	if hasMin {
		kept := docs[:0]
		for _, d := range docs {
			if d.score >= minScore {
				kept = append(kept, d)
			}
		}
		docs = kept
	}
	if ta, err := intParam(req["terminate_after"], "terminate_after", 0); err == nil && ta < 0 {
		return 0, nil, badRequest("illegal_argument_exception", "terminateAfter must be > 0")
	} else if err == nil && ta > 0 && len(docs) > ta {
		docs = docs[:ta]
	}
	var aggOut map[string]any
	if len(aggs) > 0 {
		srcs := make([]map[string]any, len(docs))
		keyOf := make(map[uintptr]string, len(docs))
		for i, d := range docs {
			srcs[i] = d.src
			keyOf[reflect.ValueOf(d.src).Pointer()] = d.ix.name + "\x00" + d.id
		}
		match := func(fq any) (map[string]bool, error) {
			q, err := c.translate(fq)
			if err != nil {
				return nil, err
			}
			found, err := matchDocs(t, q, false)
			if err != nil {
				return nil, err
			}
			out := make(map[string]bool, len(found))
			for _, d := range found {
				out[d.ix.name+"\x00"+d.id] = true
			}
			return out, nil
		}
		docKey := func(src map[string]any) string { return keyOf[reflect.ValueOf(src).Pointer()] }
		byKey := make(map[string]*scoredDoc, len(docs))
		for _, d := range docs {
			byKey[d.ix.name+"\x00"+d.id] = d
		}
		all := func() ([]map[string]any, error) {
			found, err := matchDocs(t, query.NewMatchAllQuery(), false)
			if err != nil {
				return nil, err
			}
			out := make([]map[string]any, len(found))
			for i, d := range found {
				out[i] = d.src
				if _, ok := byKey[d.ix.name+"\x00"+d.id]; !ok {
					byKey[d.ix.name+"\x00"+d.id] = d
				}
				keyOf[reflect.ValueOf(d.src).Pointer()] = d.ix.name + "\x00" + d.id
			}
			return out, nil
		}
		// A nested aggregation's documents are hits of their own: the nested object, at
		// its offset in the document it came from.
		nested := map[uintptr]*scoredDoc{}
		nestedOf := func(doc, parent map[string]any, path string, offset int) {
			pd := byKey[docKey(parent)]
			if pd == nil {
				if pn := nested[reflect.ValueOf(parent).Pointer()]; pn != nil {
					pd = pn
				} else {
					return
				}
			}
			nd := *pd
			nd.src, nd.toks, nd.matched = doc, nil, nil
			nd.nested = &nestedPos{field: path, offset: offset}
			nested[reflect.ValueOf(doc).Pointer()] = &nd
		}
		hits := func(srcs []map[string]any, o map[string]any) (map[string]any, error) {
			lookup := func(src map[string]any) *scoredDoc {
				if d := byKey[docKey(src)]; d != nil {
					return d
				}
				return nested[reflect.ValueOf(src).Pointer()]
			}
			return s.topHits(srcs, o, lookup, c, t, asInt, fetch)
		}
		score := func(src map[string]any) float64 {
			if d := byKey[docKey(src)]; d != nil {
				return d.score
			}
			return 0
		}
		if err := prepareAggs(aggs, aggPrep{match: match, docKey: docKey, all: all, hits: hits, score: score, nestedOf: nestedOf}); err != nil {
			return 0, nil, err
		}
		if aggOut, err = runAggs(aggs, srcs); err != nil {
			return 0, nil, err
		}
		if countBuckets(aggOut) > maxBuckets {
			return 0, nil, tooManyBuckets(maxBuckets, " but this number of buckets was exceeded")
		}
	}
	if pf := req["post_filter"]; pf != nil {
		fq, err := c.translate(pf)
		if err != nil {
			return 0, nil, err
		}
		docs = filterDocs(t, fq, docs)
	}
	total := len(docs)
	order(docs, specs)
	if sa := req["search_after"]; sa != nil {
		if len(specs) == 0 {
			return 0, nil, badRequest("illegal_argument_exception", "Sort must contain at least one field.")
		}
		after, err := afterKeys(specs, sa)
		if err != nil {
			return 0, nil, err
		}
		kept := docs[:0]
		for _, d := range docs {
			if compareKeys(specs, docSortKeys(specs, d), after) > 0 {
				kept = append(kept, d)
			}
		}
		docs = kept
	}
	if col != nil {
		col.groupSource = append([]*scoredDoc(nil), docs...)
		docs = col.apply(docs)
	}
	page := docs
	if from >= len(page) {
		page = nil
	} else {
		page = page[from:]
	}
	if len(page) > size {
		page = page[:size]
	}
	hits := []any{}
	var maxScore any
	if scored && len(docs) > 0 && (len(specs) == 0 || trackScores || specs[0].field == "_score") {
		m := math.Inf(-1)
		for _, d := range docs {
			m = math.Max(m, d.score)
		}
		maxScore = m
	}
	for _, d := range page {
		hit, err := s.renderHit(d, hitOptions{specs: specs, scored: scored && (len(specs) == 0 || trackScores || hasScoreSort(specs)),
			src: srcFilter, withSource: withSource, storedNone: storedNone, stored: storedList, dv: dvFields, fetch: fetch,
			hl: hl, c: c, fields: t.fields, version: boolOpt(req["version"]), seqNo: boolOpt(req["seq_no_primary_term"]), asInt: asInt, scripts: scripts,
			namedScores: q.Get("include_named_queries_score") == "true"})
		if err != nil {
			return 0, nil, err
		}
		if col != nil {
			col.decorate(s, hit, d, hitOptions{src: srcFilter, withSource: true, fields: t.fields, c: c, asInt: asInt, version: boolOpt(req["version"])})
		}
		hits = append(hits, hit)
	}
	if inners, err := findNestedInner(req["query"]); err != nil {
		return 0, nil, err
	} else if len(inners) > 0 && len(page) > 0 {
		if err := s.nestedInnerHits(t, inners, page, hits, asInt); err != nil {
			return 0, nil, err
		}
	}
	hitsOut := map[string]any{"max_score": maxScore, "hits": hits}
	switch {
	case asInt && trackOff:
		hitsOut["total"] = -1
	case asInt:
		hitsOut["total"] = total
	case trackOff:
	default:
		hitsOut["total"] = totalObj(total, trackLimit)
	}
	out := map[string]any{
		"took":      time.Since(start).Milliseconds(),
		"timed_out": false,
		"_shards":   map[string]any{"total": len(t.ixs), "successful": len(t.ixs), "skipped": 0, "failed": 0},
		"hits":      hitsOut,
	}
	if aggOut != nil {
		if q.Get("typed_keys") == "true" {
			typedKeys(aggs, aggOut)
		}
		out["aggregations"] = aggOut
	}
	if pit != nil {
		out["pit_id"] = pitID
	}
	if boolOpt(req["profile"]) {
		out["profile"] = profileOut(t, req["query"], aggs, time.Since(start))
		fp := fetchProfile(storedNone, withSource, len(fetch) > 0 || len(dvFields) > 0, hasInnerHits(req["query"]), len(page))
		for _, sh := range out["profile"].(map[string]any)["shards"].([]any) {
			sh.(map[string]any)["fetch"] = fp
		}
	}
	return 200, out, nil
}

func boolString(s string) (bool, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean")
}

func hasScoreSort(specs []sortSpec) bool {
	for _, sp := range specs {
		if sp.field == "_score" {
			return true
		}
	}
	return false
}

// order sorts documents by relevance or by the sort clauses, ties in index order.
func order(docs []*scoredDoc, specs []sortSpec) {
	if len(specs) == 0 {
		byScore(docs)
		return
	}
	keys := make(map[*scoredDoc][]sortKey, len(docs))
	for _, d := range docs {
		keys[d] = docSortKeys(specs, d)
	}
	sort.SliceStable(docs, func(i, j int) bool {
		if c := compareKeys(specs, keys[docs[i]], keys[docs[j]]); c != 0 {
			return c < 0
		}
		if docs[i].ix.name != docs[j].ix.name {
			return docs[i].ix.name < docs[j].ix.name
		}
		return docs[i].seq < docs[j].seq
	})
}

// filterDocs keeps the documents a query matches (post_filter).
func filterDocs(t *target, q query.Query, docs []*scoredDoc) []*scoredDoc {
	byIndex := map[*esIndex][]*scoredDoc{}
	for _, d := range docs {
		byIndex[d.ix] = append(byIndex[d.ix], d)
	}
	keep := map[*scoredDoc]bool{}
	for ix, ds := range byIndex {
		sc := &scorer{ix: ix, fields: t.fields, docs: ds}
		m := sc.leafMatches(q)
		for _, d := range ds {
			if m[d.id] {
				keep[d] = true
			}
		}
	}
	out := docs[:0]
	for _, d := range docs {
		if keep[d] {
			out = append(out, d)
		}
	}
	return out
}

type hitOptions struct {
	specs      []sortSpec
	scored     bool
	src        *sourceFilter
	withSource bool
	storedNone bool
	stored     []string
	dv, fetch  []fieldRequest
	hl         *highlighter
	c          *qctx
	fields     map[string]fieldInfo
	version    bool
	seqNo      bool
	asInt      bool
	// namedScores reports matched_queries with their scores (include_named_queries_score).
	namedScores bool
	// scripts are the script_fields, each hit's values computed by a script.
	scripts []scriptField
}

func (s *server) renderHit(d *scoredDoc, o hitOptions) (map[string]any, error) {
	hit := map[string]any{"_index": d.ix.name, "_score": nil}
	if !o.storedNone {
		hit["_id"] = d.id
	}
	if o.scored {
		hit["_score"] = d.score
	}
	// _ignored lists the fields of the document whose values were not indexed
	// (ignore_above, ignore_malformed), as Elasticsearch returns it with every hit.
	if sd, err := d.ix.getDoc(d.id); err == nil && sd != nil {
		if o.version {
			hit["_version"] = sd.version
		}
		if len(sd.ignored) > 0 && !o.storedNone {
			hit["_ignored"] = sd.ignored
		}
	}
	if o.seqNo {
		hit["_seq_no"], hit["_primary_term"] = d.seq, 1
	}
	if o.withSource && !o.storedNone && o.src != nil {
		hit["_source"] = o.src.apply(d.src)
	}
	if d.nested != nil {
		// A nested object's hit: its _source is the object alone.
		hit["_nested"] = map[string]any{"field": d.nested.field, "offset": d.nested.offset}
		if _, on := d.ix.nestedAndSource(); !on {
			delete(hit, "_source")
		}
		if _, ok := hit["_source"]; ok {
			// The filter names fields by their full path (comments.author), as in
			// the document; the hit shows what it keeps of the object.
			obj := map[string]any{}
			if vs := sourceValues(o.src.apply(d.src), d.nested.field); len(vs) > 0 {
				obj, _ = vs[0].(map[string]any)
			}
			hit["_source"] = obj
		}
	}
	if len(o.specs) > 0 {
		hit["sort"] = sortValues(o.specs, d)
	}
	fields := map[string]any{}
	for _, n := range o.stored {
		if fi, ok := o.fields[n]; ok && fi.Store {
			if vals := formatValues(fi, fieldValues(fi, d.src)); len(vals) > 0 {
				fields[n] = vals
			}
		}
	}
	if err := docValueFields(o.dv, o.fields, d.src, fields); err != nil {
		return nil, err
	}
	if err := fieldsOption(o.fetch, d.ix, d.src, fields); err != nil {
		return nil, err
	}
	for _, sf := range o.scripts {
		v, err := sf.script.run(o.fields, d, d.score)
		if err != nil {
			if sf.ignoreFailure {
				continue
			}
			return nil, err
		}
		fields[sf.name] = []any{v}
	}
	if len(fields) > 0 {
		hit["fields"] = fields
	}
	if len(d.matched) > 0 {
		names := make([]string, 0, len(d.matched))
		for n := range d.matched {
			names = append(names, n)
		}
		javaHashOrder(names)
		if o.namedScores {
			hit["matched_queries"] = d.matched
		} else {
			hit["matched_queries"] = names
		}
	}
	if o.hl != nil {
		if h, err := o.hl.apply(o.c, d.src); err != nil {
			return nil, err
		} else if len(h) > 0 {
			hit["highlight"] = h
		}
	}
	return hit, nil
}

// profileOut is a profile section in Elasticsearch's shape; eslite times the whole
// request, not each Lucene query.
func profileOut(t *target, q any, aggs []*aggDef, took time.Duration) map[string]any {
	// Each aggregation reports its phases; eslite does them in one pass, so each phase
	// is charged one nanosecond at least and the collect phase the rest.
	var aggProfiles []any
	for _, a := range aggs {
		typ := map[string]string{"cardinality": "CardinalityAggregator", "terms": "StringTermsAggregatorFromFilters",
			"avg": "AvgAggregator", "sum": "SumAggregator", "min": "MinAggregator", "max": "MaxAggregator",
			"value_count": "ValueCountAggregator", "histogram": "NumericHistogramAggregator",
			"date_histogram": "DateHistogramAggregator", "range": "RangeAggregator"}[a.kind]
		if a.kind == "cardinality" && a.fi.Type == "keyword" {
			typ = "GlobalOrdCardinalityAggregator"
		}
		debug := map[string]any{}
		if a.kind == "cardinality" {
			numeric := 0
			if a.fi.Type == "long" || a.fi.Type == "double" || a.fi.Type == "date" {
				numeric = 1
			}
			debug = map[string]any{"empty_collectors_used": 0, "numeric_collectors_used": numeric, "ordinals_collectors_used": 0,
				"ordinals_collectors_overhead_too_high": 0, "string_hashing_collectors_used": 0}
		}
		aggProfiles = append(aggProfiles, map[string]any{"type": typ, "description": a.name, "time_in_nanos": took.Nanoseconds(),
			"breakdown": map[string]any{"initialize": 1, "build_leaf_collector": 1, "collect": max(took.Nanoseconds(), 1),
				"build_aggregation": 1, "post_collection": 1, "reduce": 0}, "debug": debug})
	}
	if aggProfiles == nil {
		aggProfiles = []any{}
	}
	var shards []any
	desc := "*:*"
	if q != nil {
		desc = fmt.Sprint(q)
	}
	for _, ix := range t.ixs {
		shards = append(shards, map[string]any{
			"id":           "[eslite][" + ix.name + "][0]",
			"node_id":      "eslite",
			"shard_id":     0,
			"index":        ix.name,
			"cluster":      "(local)",
			"searches":     []any{map[string]any{"query": []any{map[string]any{"type": "BooleanQuery", "description": desc, "time_in_nanos": took.Nanoseconds(), "breakdown": map[string]any{}}}, "rewrite_time": 0, "collector": []any{map[string]any{"name": "QueryPhaseCollector", "reason": "search_query_phase", "time_in_nanos": took.Nanoseconds()}}}},
			"aggregations": aggProfiles,
			"fetch":        map[string]any{"type": "fetch", "description": "", "time_in_nanos": 0, "breakdown": map[string]any{}},
		})
	}
	return map[string]any{"shards": shards}
}

// collapse keeps the best hit per value of a field, with optional inner hits.
type collapse struct {
	field string
	fi    fieldInfo
	inner []innerHits
	// groupSource holds every matching document, in order, for the inner hits.
	groupSource []*scoredDoc
}

type innerHits struct {
	name    string
	from    int
	size    int
	specs   []sortSpec
	version bool
	fields  []fieldRequest
	seqNo   bool
}

func parseCollapse(v any, c *qctx) (*collapse, error) {
	if v == nil {
		return nil, nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, parsingErr("[collapse] malformed")
	}
	f, _ := o["field"].(string)
	fi, ok := c.fields[f]
	if !ok {
		return nil, badRequest("illegal_argument_exception", "no mapping found for `%s` in order to collapse on", f)
	}
	if fi.Type != "keyword" && fi.Type != "long" && fi.Type != "double" && fi.Type != "date" {
		return nil, badRequest("illegal_argument_exception", "collapse is not supported for the field [%s] of the type [%s]", f, fi.ESType)
	}
	col := &collapse{field: f, fi: fi}
	for _, x := range clauses(o["inner_hits"]) {
		ih, _ := x.(map[string]any)
		in := innerHits{name: scalarString(orDefault(ih["name"], f)), size: 3}
		if n, err := intParam(ih["size"], "size", 3); err == nil {
			in.size = n
		}
		if n, err := intParam(ih["from"], "from", 0); err == nil {
			in.from = n
		}
		specs, err := c.parseSort(ih["sort"])
		if err != nil {
			return nil, err
		}
		in.specs = specs
		in.version = boolOpt(ih["version"])
		in.seqNo = boolOpt(ih["seq_no_primary_term"])
		if in.fields, err = parseFieldRequests(ih["fields"], "fields"); err != nil {
			return nil, err
		}
		col.inner = append(col.inner, in)
	}
	return col, nil
}

func (col *collapse) key(d *scoredDoc) string {
	vals := fieldValues(col.fi, d.src)
	if len(vals) == 0 {
		return "\x00null"
	}
	return fmt.Sprint(vals[0])
}

func (col *collapse) apply(docs []*scoredDoc) []*scoredDoc {
	seen := map[string]bool{}
	var out []*scoredDoc
	for _, d := range docs {
		k := col.key(d)
		if !seen[k] {
			seen[k] = true
			out = append(out, d)
		}
	}
	return out
}

// decorate adds the collapse field and the inner hits of a collapsed hit.
func (col *collapse) decorate(s *server, hit map[string]any, d *scoredDoc, o hitOptions) {
	fields, _ := hit["fields"].(map[string]any)
	if fields == nil {
		fields = map[string]any{}
		hit["fields"] = fields
	}
	if vals := formatValues(col.fi, fieldValues(col.fi, d.src)); len(vals) > 0 {
		fields[col.field] = vals[:1]
	} else {
		fields[col.field] = []any{nil}
	}
	if len(col.inner) == 0 {
		return
	}
	k := col.key(d)
	inner := map[string]any{}
	for _, ih := range col.inner {
		var group []*scoredDoc
		for _, x := range col.groupSource {
			if col.key(x) == k {
				group = append(group, x)
			}
		}
		order(group, ih.specs)
		total := len(group)
		if ih.from < len(group) {
			group = group[ih.from:]
		} else {
			group = nil
		}
		if len(group) > ih.size {
			group = group[:ih.size]
		}
		hits := []any{}
		for _, x := range group {
			h, err := s.renderHit(x, hitOptions{specs: ih.specs, scored: len(ih.specs) == 0, src: o.src, withSource: true,
				fields: o.fields, c: o.c, fetch: ih.fields, version: ih.version, seqNo: ih.seqNo})
			if err == nil {
				hits = append(hits, h)
			}
		}
		var tot any = totalObj(total, -1)
		if o.asInt {
			tot = total
		}
		inner[ih.name] = map[string]any{"hits": map[string]any{"total": tot, "max_score": nil, "hits": hits}}
	}
	hit["inner_hits"] = inner
}

// topHits renders the documents of a bucket as a top_hits aggregation: sorted, paged
// and fetched with the aggregation's own options, as a search's hits are.
func (s *server) topHits(srcs []map[string]any, o map[string]any, lookup func(map[string]any) *scoredDoc, c *qctx, t *target, asInt bool, searchFetch []fieldRequest) (map[string]any, error) {
	docs := make([]*scoredDoc, 0, len(srcs))
	for _, src := range srcs {
		if d := lookup(src); d != nil {
			docs = append(docs, d)
		}
	}
	specs, err := c.parseSort(o["sort"])
	if err != nil {
		return nil, err
	}
	srcFilter, err := parseSourceFilter(o["_source"])
	if err != nil {
		return nil, err
	}
	hl, err := parseHighlight(o["highlight"], t)
	if err != nil {
		return nil, err
	}
	dv, err := parseFieldRequests(o["docvalue_fields"], "docvalue_fields")
	if err != nil {
		return nil, err
	}
	fetch, err := parseFieldRequests(o["fields"], "fields")
	if err != nil {
		return nil, err
	}
	if o["fields"] == nil {
		// The search's own fields apply to the top hits too.
		fetch = searchFetch
	}
	storedNone, storedList, withSource := storedFields(o, srcFilter != nil)
	from, err := intParam(o["from"], "from", 0)
	if err != nil {
		return nil, err
	}
	size, err := intParam(o["size"], "size", 3)
	if err != nil {
		return nil, err
	}
	sorted := append([]*scoredDoc(nil), docs...)
	order(sorted, specs)
	scored := len(specs) == 0 || boolOpt(o["track_scores"]) || hasScoreSort(specs)
	var maxScore any
	if scored && len(sorted) > 0 {
		m := math.Inf(-1)
		for _, d := range sorted {
			m = math.Max(m, d.score)
		}
		maxScore = m
	}
	page := sorted
	if from >= len(page) {
		page = nil
	} else {
		page = page[from:]
	}
	if len(page) > size {
		page = page[:size]
	}
	hits := []any{}
	for _, d := range page {
		hit, err := s.renderHit(d, hitOptions{specs: specs, scored: scored, src: srcFilter, withSource: withSource,
			storedNone: storedNone, stored: storedList, dv: dv, fetch: fetch, hl: hl, c: c, fields: t.fields,
			version: boolOpt(o["version"]), seqNo: boolOpt(o["seq_no_primary_term"]), asInt: asInt})
		if err != nil {
			return nil, err
		}
		hits = append(hits, hit)
	}
	var total any = map[string]any{"value": len(docs), "relation": "eq"}
	if asInt {
		total = len(docs)
	}
	return map[string]any{"hits": map[string]any{"total": total, "max_score": maxScore, "hits": hits}}, nil
}

// javaHashOrder orders names as a java.util.HashMap of them iterates, the order
// Elasticsearch reports matched_queries in: by bucket (the spread String.hashCode modulo
// the table size, 16 doubling past a 0.75 load), then by name.
func javaHashOrder(names []string) {
	size := 16
	for float64(len(names)) > 0.75*float64(size) {
		size *= 2
	}
	bucket := func(s string) int {
		var h int32
		for _, r := range s {
			if r >= 0x10000 {
				// UTF-16 surrogate pair
				r -= 0x10000
				h = 31*h + int32(0xD800+(r>>10))
				h = 31*h + int32(0xDC00+(r&0x3FF))
				continue
			}
			h = 31*h + int32(r)
		}
		u := uint32(h)
		return int((u ^ u>>16) & uint32(size-1))
	}
	sort.SliceStable(names, func(i, j int) bool {
		bi, bj := bucket(names[i]), bucket(names[j])
		if bi != bj {
			return bi < bj
		}
		return names[i] < names[j]
	})
}

// fetchProfile is the fetch section of a profile, with the sub-phases the request runs:
// fields, _source, inner hits and stored fields (none when stored_fields is _none_).
// eslite fetches in one pass, so each phase is charged one nanosecond per hit.
func fetchProfile(storedNone, source, fields, inner bool, hits int) map[string]any {
	n := max(hits, 1)
	out := map[string]any{"type": "fetch", "description": "", "time_in_nanos": n,
		"breakdown": map[string]any{"next_reader": 1, "next_reader_count": 1, "load_stored_fields": n,
			"load_stored_fields_count": n, "load_source": n, "load_source_count": n}}
	if storedNone {
		out["debug"] = map[string]any{"stored_fields": []any{}}
		return out
	}
	out["debug"] = map[string]any{"stored_fields": []any{"_id", "_routing", "_source"}}
	phase := func(typ string) map[string]any {
		return map[string]any{"type": typ, "description": "", "time_in_nanos": n,
			"breakdown": map[string]any{"next_reader": 1, "next_reader_count": 1, "process": n, "process_count": n}}
	}
	var children []any
	if fields {
		children = append(children, phase("FetchFieldsPhase"))
	}
	if source {
		p := phase("FetchSourcePhase")
		p["debug"] = map[string]any{"fast_path": n}
		children = append(children, p)
	}
	if inner {
		children = append(children, phase("InnerHitsPhase"))
	}
	out["children"] = append(children, phase("StoredFieldsPhase"))
	return out
}

// hasInnerHits reports whether a query asks for inner hits anywhere.
func hasInnerHits(q any) bool {
	switch t := q.(type) {
	case map[string]any:
		for k, v := range t {
			if k == "inner_hits" || hasInnerHits(v) {
				return true
			}
		}
	case []any:
		for _, v := range t {
			if hasInnerHits(v) {
				return true
			}
		}
	}
	return false
}

// storedFields reads a search body's stored_fields: "_none_" drops _id and _source, a list drops _source
// unless it names it (and a source filter of false drops it anyway); listed fields
// mapped with store: true come back in fields.
func storedFields(body map[string]any, hasSource bool) (none bool, list []string, withSource bool) {
	withSource = hasSource
	sf, ok := body["stored_fields"]
	if !ok {
		return false, nil, withSource
	}
	withSource = false
	for _, x := range clauses(sf) {
		switch n := scalarString(x); n {
		case "_none_":
			none = true
		case "_source":
			withSource = hasSource
		default:
			list = append(list, n)
		}
	}
	return none, list, withSource
}
