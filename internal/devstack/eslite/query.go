package eslite

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// ---- dates ----

var dateLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04:05",
	"2006-01-02T15:04",
	"2006-01-02T15",
	"2006-01-02",
	"2006-01",
	"2006",
}

// defaultDateFormat is the format of a date field whose mapping sets none.
const defaultDateFormat = "strict_date_optional_time||epoch_millis"

func parseDateString(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("failed to parse date field [%s] with format [%s]", s, defaultDateFormat)
}

func parseDateValue(v any) (time.Time, error) {
	switch t := v.(type) {
	case string:
		return parseDateString(t)
	case json.Number:
		if ms, err := t.Int64(); err == nil {
			return time.UnixMilli(ms).UTC(), nil
		}
		f, err := t.Float64()
		if err != nil {
			return time.Time{}, err
		}
		return time.UnixMilli(int64(f)).UTC(), nil
	case float64:
		return time.UnixMilli(int64(t)).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("failed to parse date value [%v]", v)
}

var mathStep = regexp.MustCompile(`^([+-])(\d+)([yMwdhHms])|^/([yMwdhHms])`)

// parseDateMath understands `now`, `<date>||`, followed by +N<unit>, -N<unit> and /<unit>.
// roundUp selects the end of the rounded unit (for lte and gt), as Elasticsearch does.
func parseDateMath(v any, now time.Time, roundUp bool) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return parseDateValue(v)
	}
	var base time.Time
	var rest string
	switch {
	case strings.HasPrefix(s, "now"):
		base, rest = now.UTC(), s[3:]
	case strings.Contains(s, "||"):
		i := strings.Index(s, "||")
		t, err := parseDateString(s[:i])
		if err != nil {
			return time.Time{}, err
		}
		base, rest = t, s[i+2:]
	default:
		return parseDateString(s)
	}
	t := base
	for rest != "" {
		m := mathStep.FindStringSubmatch(rest)
		if m == nil {
			return time.Time{}, fmt.Errorf("failed to parse date math [%s] at [%s]", s, rest)
		}
		rest = rest[len(m[0]):]
		if m[4] != "" {
			t = roundDate(t, m[4], roundUp)
			continue
		}
		n, _ := strconv.Atoi(m[2])
		if m[1] == "-" {
			n = -n
		}
		t = addUnit(t, m[3], n)
	}
	return t, nil
}

func addUnit(t time.Time, unit string, n int) time.Time {
	switch unit {
	case "y":
		return t.AddDate(n, 0, 0)
	case "M":
		return t.AddDate(0, n, 0)
	case "w":
		return t.AddDate(0, 0, 7*n)
	case "d":
		return t.AddDate(0, 0, n)
	case "h", "H":
		return t.Add(time.Duration(n) * time.Hour)
	case "m":
		return t.Add(time.Duration(n) * time.Minute)
	case "s":
		return t.Add(time.Duration(n) * time.Second)
	}
	return t
}

func floorUnit(t time.Time, unit string) time.Time {
	t = t.UTC()
	switch unit {
	case "y":
		return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
	case "q":
		return time.Date(t.Year(), time.Month((int(t.Month())-1)/3*3+1), 1, 0, 0, 0, 0, time.UTC)
	case "M":
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	case "w":
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		wd := (int(d.Weekday()) + 6) % 7 // Monday first
		return d.AddDate(0, 0, -wd)
	case "d":
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	case "h", "H":
		return t.Truncate(time.Hour)
	case "m":
		return t.Truncate(time.Minute)
	case "s":
		return t.Truncate(time.Second)
	}
	return t
}

func roundDate(t time.Time, unit string, up bool) time.Time {
	f := floorUnit(t, unit)
	if !up {
		return f
	}
	return addUnit(f, unit, 1).Add(-time.Millisecond)
}

// ---- query DSL ----

// qctx carries what a query is translated against.
type qctx struct {
	fields map[string]fieldInfo
	now    time.Time
	t      *target // the indexes searched, for their settings and terms lookups
	// hl collects, per field, the terms a hit may be highlighted on, and hlPrefix the
	// prefixes of prefix and wildcard queries.
	hl       map[string]map[string]bool
	hlPrefix map[string][]string
}

func (c *qctx) addHL(field string, terms ...string) {
	if c.hl == nil {
		c.hl = map[string]map[string]bool{}
	}
	if c.hl[field] == nil {
		c.hl[field] = map[string]bool{}
	}
	for _, t := range terms {
		c.hl[field][t] = true
	}
}

func (c *qctx) addHLPrefix(field, p string) {
	if c.hlPrefix == nil {
		c.hlPrefix = map[string][]string{}
	}
	c.hlPrefix[field] = append(c.hlPrefix[field], strings.ToLower(p))
}

func singleField(v any, what string) (string, any, error) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", nil, parsingErr("[%s] query malformed, must have exactly one field", what)
	}
	for k, x := range m {
		return k, x, nil
	}
	return "", nil, nil
}

func (c *qctx) translate(v any) (query.Query, error) {
	if v == nil {
		return bleve.NewMatchAllQuery(), nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, parsingErr("[query] malformed, expected an object but found [%v]", v)
	}
	if len(m) != 1 {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(m) == 0 {
			return bleve.NewMatchAllQuery(), nil
		}
		return nil, parsingErr("[query] malformed, one query type expected but found [%s]", strings.Join(keys, ", "))
	}
	for kind, body := range m {
		var name string
		body, name = stripName(body)
		if name != "" {
			q, err := c.translate(map[string]any{kind: body})
			if err != nil {
				return nil, err
			}
			return &namedQuery{inner: q, name: name}, nil
		}
		if q, ok, err := indexNameQuery(kind, body); ok {
			return q, err
		}
		switch kind {
		case "match_all":
			q := bleve.NewMatchAllQuery()
			if o, ok := body.(map[string]any); ok {
				return boosted(q, o["boost"]), nil
			}
			return q, nil
		case "constant_score":
			o, _ := body.(map[string]any)
			f, ok := o["filter"]
			if !ok {
				return nil, parsingErr("[constant_score] requires a 'filter' element")
			}
			inner, err := c.translate(f)
			if err != nil {
				return nil, err
			}
			b := 1.0
			if x, ok := toFloat(o["boost"]); ok {
				b = x
			}
			return &constScoreQuery{inner: inner, boost: b}, nil
		case "dis_max":
			o, _ := body.(map[string]any)
			var qs []query.Query
			for _, x := range clauses(o["queries"]) {
				q, err := c.translate(x)
				if err != nil {
					return nil, err
				}
				qs = append(qs, q)
			}
			if len(qs) == 0 {
				return bleve.NewMatchNoneQuery(), nil
			}
			tie, _ := toFloat(o["tie_breaker"])
			return boosted(&disMaxQuery{DisjunctionQuery: bleve.NewDisjunctionQuery(qs...), tie: tie}, o["boost"]), nil
		case "combined_fields":
			o, _ := body.(map[string]any)
			mm := map[string]any{"type": "most_fields"}
			for k, v := range o {
				if k != "auto_generate_synonyms_phrase_query" && k != "zero_terms_query" {
					mm[k] = v
				}
			}
			return c.multiMatch(mm)
		case "regexp":
			return c.regexpQ(body)
		case "match_none":
			return bleve.NewMatchNoneQuery(), nil
		case "match":
			return c.matchQ(body, false)
		case "match_phrase":
			return c.matchQ(body, true)
		case "multi_match":
			return c.multiMatch(body)
		case "term":
			return c.termQ(body)
		case "terms":
			return c.termsQ(body)
		case "range":
			return c.rangeQ(body)
		case "exists":
			o, _ := body.(map[string]any)
			f, _ := o["field"].(string)
			if f == "" {
				return nil, parsingErr("[exists] query requires a [field]")
			}
			switch f {
			case "_id", "_index", "_seq_no", "_version", "_primary_term":
				// Every document has these metadata fields.
				return bleve.NewMatchAllQuery(), nil
			case "_source":
				return nil, badRequest("query_shard_exception", "failed to create query: the _source field is not searchable")
			}
			tq := bleve.NewTermQuery(f)
			tq.SetField(fFieldNames)
			return tq, nil
		case "nested":
			return c.nestedQ(body)
		case "match_bool_prefix":
			return c.matchBoolPrefixQ(body)
		case "prefix", "wildcard":
			return c.patternQ(kind, body)
		case "intervals":
			return c.intervalsQ(body)
		case "geo_bounding_box":
			return c.geoBoundingBoxQ(body)
		case "geo_distance":
			return c.geoDistanceQ(body)
		case "boosting":
			return c.boostingQ(body)
		case "ids":
			o, _ := body.(map[string]any)
			vals, ok := o["values"].([]any)
			if !ok {
				return nil, parsingErr("[ids] query requires a [values] array")
			}
			if c.t != nil {
				if max := c.t.intSetting("max_result_window", maxResultWindow); len(vals) > max {
					return nil, badRequest("query_shard_exception", "failed to create query: Too many ids specified, allowed max result window is [%d]", max)
				}
			}
			ids := make([]string, len(vals))
			for i, x := range vals {
				ids[i] = scalarString(x)
			}
			return bleve.NewDocIDQuery(ids), nil
		case "bool":
			return c.boolQ(body)
		case "query_string":
			return c.queryString(body)
		case "simple_query_string":
			return c.simpleQueryString(body)
		case "fuzzy":
			return c.fuzzyQ(body)
		case "script_score":
			return c.scriptScoreQ(body)
		case "script":
			return c.scriptQ(body)
		case "match_phrase_prefix":
			f, v, opts, err := fieldAndValue(kind, body, "query")
			if err != nil {
				return nil, err
			}
			for k := range opts {
				if k != "query" && k != "slop" && k != "max_expansions" && k != "analyzer" && k != "boost" && k != "zero_terms_query" {
					return nil, parsingErr("[match_phrase_prefix] query does not support [%s]", k)
				}
			}
			slop, _ := toFloat(opts["slop"])
			return c.sloppyPhrase(f, scalarString(v), int(slop), true, opts)
		case "span_term", "span_multi", "span_near", "span_or", "span_first", "span_not", "span_containing", "span_within", "span_field_masking":
			return c.spanQ(kind, body)
		case "function_score":
			return c.functionScoreQ(body)
		case "distance_feature":
			return c.distanceFeatureQ(body)
		default:
			return nil, parsingErr("unknown query [%s] (eslite supports match, match_phrase, match_bool_prefix, intervals, geo_bounding_box, geo_distance, boosting, multi_match, combined_fields, term, terms, range, exists, prefix, wildcard, regexp, ids, bool, nested, dis_max, constant_score, function_score, distance_feature, query_string, simple_query_string, script_score, script, fuzzy, match_phrase_prefix, span_term, span_multi, span_near, span_or, span_first, span_not, span_containing, span_within, span_field_masking, match_all, match_none)", kind)
		}
	}
	return nil, nil
}

// fieldAndValue reads {"field": value} or {"field": {"<key>": value, ...}}.
func fieldAndValue(kind string, body any, key string) (string, any, map[string]any, error) {
	f, x, err := singleField(body, kind)
	if err != nil {
		return "", nil, nil, err
	}
	if o, ok := x.(map[string]any); ok {
		v, ok := o[key]
		if !ok {
			return "", nil, nil, parsingErr("[%s] query on field [%s] requires [%s]", kind, f, key)
		}
		return f, v, o, nil
	}
	return f, x, map[string]any{}, nil
}

func (c *qctx) matchQ(body any, phrase bool) (query.Query, error) {
	kind := "match"
	if phrase {
		kind = "match_phrase"
	}
	f, v, opts, err := fieldAndValue(kind, body, "query")
	if err != nil {
		return nil, err
	}
	for k := range opts {
		switch k {
		case "query", "operator", "minimum_should_match", "boost", "analyzer", "lenient", "zero_terms_query":
		case "slop":
		default:
			return nil, parsingErr("[%s] query does not support [%s]", kind, k)
		}
	}
	if n, _ := toFloat(opts["slop"]); n != 0 && phrase {
		return c.sloppyPhrase(f, scalarString(v), int(n), false, opts)
	}
	op := strings.ToLower(fmt.Sprint(orDefault(opts["operator"], "or")))
	if op != "or" && op != "and" {
		return nil, parsingErr("[%s] query: unknown operator [%v], expected and or or", kind, opts["operator"])
	}
	q, err := c.matchField(f, scalarString(v), op, opts["minimum_should_match"], phrase)
	if err != nil {
		return nil, err
	}
	return boosted(q, opts["boost"]), nil
}

func orDefault(v any, d any) any {
	if v == nil {
		return d
	}
	return v
}

func boosted(q query.Query, b any) query.Query {
	if b == nil {
		return q
	}
	f, ok := toFloat(b)
	if !ok {
		return q
	}
	if bq, ok := q.(query.BoostableQuery); ok {
		bq.SetBoost(f)
	}
	return q
}

// matchField builds a match (or phrase) query on one field according to its type.
func (c *qctx) matchField(f, text, op string, msm any, phrase bool) (query.Query, error) {
	fi, ok := c.fields[f]
	if !ok {
		return bleve.NewMatchNoneQuery(), nil
	}
	if fi.Type != "text" {
		return c.exactValue(f, fi, text)
	}
	terms := analyze(text)
	if len(terms) == 0 {
		return bleve.NewMatchNoneQuery(), nil
	}
	c.addHL(f, terms...)
	if phrase && len(terms) > 1 {
		return bleve.NewPhraseQuery(terms, f), nil
	}
	qs := make([]query.Query, len(terms))
	for i, t := range terms {
		tq := bleve.NewTermQuery(t)
		tq.SetField(f)
		qs[i] = tq
	}
	if len(qs) == 1 {
		return qs[0], nil
	}
	if op == "and" {
		return bleve.NewConjunctionQuery(qs...), nil
	}
	dq := bleve.NewDisjunctionQuery(qs...)
	if msm != nil {
		n, err := minimumShouldMatch(msm, len(qs))
		if err != nil {
			return nil, err
		}
		dq.SetMin(float64(n))
	}
	return dq, nil
}

func minimumShouldMatch(v any, clauses int) (int, error) {
	s := strings.TrimSpace(scalarString(v))
	if strings.HasSuffix(s, "%") {
		p, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
		if err != nil {
			return 0, parsingErr("[minimum_should_match] malformed: [%s]", s)
		}
		n := int(math.Floor(float64(clauses) * float64(p) / 100))
		if p < 0 {
			n = clauses + int(math.Ceil(float64(clauses)*float64(p)/100))
		}
		return n, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, parsingErr("[minimum_should_match] malformed: [%s] (eslite supports a count or a percentage)", s)
	}
	if n < 0 {
		n = clauses + n
	}
	return n, nil
}

// exactValue is a term-level match of one value against a non-text field.
func (c *qctx) exactValue(f string, fi fieldInfo, v any) (query.Query, error) {
	incl := true
	switch fi.Type {
	case "text", "keyword":
		s := scalarString(v)
		if fi.Type == "text" {
			c.addHL(f, s)
		}
		tq := bleve.NewTermQuery(s)
		tq.SetField(f)
		return tq, nil
	case "long", "double":
		n, ok := toFloat(v)
		if !ok {
			return nil, badRequest("query_shard_exception", "failed to create query: For input string: \"%v\" (field [%s] is of type [%s])", v, f, fi.Type)
		}
		q := bleve.NewNumericRangeInclusiveQuery(&n, &n, &incl, &incl)
		q.SetField(f)
		return q, nil
	case "date":
		t, err := parseDateMathFormat(v, c.now, false, fi.DateFormat)
		if err != nil {
			return nil, badRequest("query_shard_exception", "failed to create query: %v (field [%s])", err, f)
		}
		return c.dateRange(f, fi, true, true, t, t, true, true)
	case "boolean":
		b, ok := toBool(v)
		if !ok {
			return nil, badRequest("query_shard_exception", "failed to create query: Can't parse boolean value [%v] for field [%s], expected [true] or [false]", v, f)
		}
		q := bleve.NewBoolFieldQuery(b)
		q.SetField(f)
		return q, nil
	}
	return bleve.NewMatchNoneQuery(), nil
}

func (c *qctx) termQ(body any) (query.Query, error) {
	f, v, opts, err := fieldAndValue("term", body, "value")
	if err != nil {
		return nil, err
	}
	for k := range opts {
		if k != "value" && k != "boost" && k != "case_insensitive" {
			return nil, parsingErr("[term] query does not support [%s]", k)
		}
	}
	if f == fIgnored {
		tq := bleve.NewTermQuery(scalarString(v))
		tq.SetField(fIgnoredTerms)
		return &constScoreQuery{inner: tq, boost: boostValue(opts["boost"])}, nil
	}
	if f == "_id" {
		return &constScoreQuery{inner: bleve.NewDocIDQuery([]string{scalarString(v)}), boost: boostValue(opts["boost"])}, nil
	}
	fi, ok := c.fields[f]
	if !ok {
		return bleve.NewMatchNoneQuery(), nil
	}
	if boolOpt(opts["case_insensitive"]) && (fi.Type == "keyword" || fi.Type == "text") {
		// A regexp where every letter accepts both cases, constant-scoring like
		// Elasticsearch's automaton query.
		var b strings.Builder
		for _, r := range scalarString(v) {
			lo, up := strings.ToLower(string(r)), strings.ToUpper(string(r))
			if lo != up {
				b.WriteString("[" + regexp.QuoteMeta(lo) + regexp.QuoteMeta(up) + "]")
			} else {
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		rq := bleve.NewRegexpQuery(b.String())
		rq.SetField(f)
		return &constScoreQuery{inner: rq, boost: boostValue(opts["boost"])}, nil
	}
	q, err := c.exactValue(f, fi, v)
	if err != nil {
		return nil, err
	}
	return boosted(q, opts["boost"]), nil
}

func (c *qctx) termsQ(body any) (query.Query, error) {
	o, ok := body.(map[string]any)
	if !ok {
		return nil, parsingErr("[terms] query malformed")
	}
	var f string
	var vals []any
	for k, v := range o {
		if k == "boost" || k == "_name" {
			continue
		}
		if lk, isObj := v.(map[string]any); isObj && f == "" {
			looked, err := c.termsLookup(lk)
			if err != nil {
				return nil, err
			}
			f, vals = k, looked
			continue
		}
		arr, ok := v.([]any)
		if !ok || f != "" {
			return nil, parsingErr("[terms] query requires one field with an array of values")
		}
		f, vals = k, arr
	}
	if c.t != nil {
		if max := c.t.intSetting("max_terms_count", 65536); len(vals) > max {
			return nil, badRequest("illegal_argument_exception", "The number of terms [%d] used in the Terms Query request has exceeded the allowed maximum of [%d]. This maximum can be set by changing the [index.max_terms_count] index level setting.", len(vals), max)
		}
	}
	if f == "" {
		return nil, parsingErr("[terms] query requires one field with an array of values")
	}
	if f == fIgnored && len(vals) > 0 {
		qs := make([]query.Query, 0, len(vals))
		for _, v := range vals {
			tq := bleve.NewTermQuery(scalarString(v))
			tq.SetField(fIgnoredTerms)
			qs = append(qs, tq)
		}
		return &constScoreQuery{inner: bleve.NewDisjunctionQuery(qs...), boost: boostValue(o["boost"])}, nil
	}
	if f == "_id" {
		ids := make([]string, len(vals))
		for i, v := range vals {
			ids[i] = scalarString(v)
		}
		return &constScoreQuery{inner: bleve.NewDocIDQuery(ids), boost: boostValue(o["boost"])}, nil
	}
	fi, ok := c.fields[f]
	if !ok || len(vals) == 0 {
		return bleve.NewMatchNoneQuery(), nil
	}
	qs := make([]query.Query, 0, len(vals))
	for _, v := range vals {
		q, err := c.exactValue(f, fi, v)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return &constScoreQuery{inner: bleve.NewDisjunctionQuery(qs...), boost: boostValue(o["boost"])}, nil
}

func boostValue(v any) float64 {
	if f, ok := toFloat(v); ok {
		return f
	}
	return 1
}

// stripName takes the _name off a query's options (at the top or under its field) and
// returns it, so the query can be wrapped in a namedQuery.
func stripName(body any) (any, string) {
	o, ok := body.(map[string]any)
	if !ok {
		return body, ""
	}
	name := ""
	cp := map[string]any{}
	for k, v := range o {
		if k == "_name" {
			name = scalarString(v)
			continue
		}
		if inner, ok := v.(map[string]any); ok {
			if n, has := inner["_name"]; has {
				name = scalarString(n)
				ic := map[string]any{}
				for ik, iv := range inner {
					if ik != "_name" {
						ic[ik] = iv
					}
				}
				v = ic
			}
		}
		cp[k] = v
	}
	return cp, name
}

// termsLookup reads a terms query's values from a field of another document.
func (c *qctx) termsLookup(lk map[string]any) ([]any, error) {
	idx, _ := lk["index"].(string)
	id := scalarString(lk["id"])
	path, _ := lk["path"].(string)
	if idx == "" || id == "" || path == "" {
		return nil, parsingErr("[terms] query lookup element requires specifying [index], [id] and [path]")
	}
	if c.t == nil || c.t.server == nil {
		return nil, nil
	}
	ixs := c.t.server.resolve(idx)
	if len(ixs) != 1 {
		return nil, notFoundIndex(idx)
	}
	sd, err := ixs[0].getDoc(id)
	if err != nil || sd == nil {
		return nil, err
	}
	return sourceValues(sd.src, path), nil
}

// regexpQ is a regexp query on a keyword or text field, limited like Elasticsearch's.
func (c *qctx) regexpQ(body any) (query.Query, error) {
	f, v, opts, err := fieldAndValue("regexp", body, "value")
	if err != nil {
		return nil, err
	}
	s := scalarString(v)
	if err := c.checkRegexLength(s); err != nil {
		return nil, err
	}
	fi, ok := c.fields[f]
	if !ok {
		return bleve.NewMatchNoneQuery(), nil
	}
	if err := c.expensive("[regexp] queries", ""); err != nil {
		return nil, err
	}
	if fi.Type != "text" && fi.Type != "keyword" {
		return nil, badRequest("query_shard_exception", "Can only use regexp queries on keyword and text fields - not on [%s] which is of type [%s]", f, fi.ESType)
	}
	q := bleve.NewRegexpQuery(s)
	q.SetField(f)
	return &constScoreQuery{inner: q, boost: boostValue(opts["boost"])}, nil
}

func (c *qctx) checkRegexLength(s string) error {
	max := 1000
	if c.t != nil {
		max = c.t.intSetting("max_regex_length", 1000)
	}
	if n := len([]rune(s)); n > max {
		return badRequest("illegal_argument_exception", "The length of regex [%d] used in the Regexp Query request has exceeded the allowed maximum of [%d]. This maximum can be set by changing the [index.max_regex_length] index level setting.", n, max)
	}
	return nil
}

func (c *qctx) rangeQ(body any) (query.Query, error) {
	f, x, err := singleField(body, "range")
	if err != nil {
		return nil, err
	}
	o, ok := x.(map[string]any)
	if !ok {
		return nil, parsingErr("[range] query malformed, no start_object after field name [%s]", f)
	}
	var lo, hi any
	var loIncl, hiIncl bool
	for k, v := range o {
		switch k {
		case "gt":
			lo, loIncl = v, false
		case "gte", "from":
			lo, loIncl = v, true
		case "lt":
			hi, hiIncl = v, false
		case "lte", "to":
			hi, hiIncl = v, true
		case "boost", "format":
		case "time_zone":
			if s := fmt.Sprint(v); s != "UTC" && s != "Z" && s != "+00:00" {
				return nil, parsingErr("[range] option [time_zone] %q is not supported by eslite (UTC only)", s)
			}
		default:
			return nil, parsingErr("[range] query does not support [%s]", k)
		}
	}
	fi, ok := c.fields[f]
	if !ok {
		return bleve.NewMatchNoneQuery(), nil
	}
	if fi.Type == "text" || fi.Type == "keyword" {
		if err := c.expensive("[range] queries on [text] or [keyword] fields", ""); err != nil {
			return nil, err
		}
	}
	switch fi.Type {
	case "long", "double":
		var mn, mx *float64
		if lo != nil {
			n, ok := toFloat(lo)
			if !ok {
				return nil, badRequest("query_shard_exception", "failed to create query: [range] bound [%v] on field [%s] is not a number", lo, f)
			}
			mn = &n
		}
		if hi != nil {
			n, ok := toFloat(hi)
			if !ok {
				return nil, badRequest("query_shard_exception", "failed to create query: [range] bound [%v] on field [%s] is not a number", hi, f)
			}
			mx = &n
		}
		q := bleve.NewNumericRangeInclusiveQuery(mn, mx, &loIncl, &hiIncl)
		q.SetField(f)
		return q, nil
	case "date":
		var start, end time.Time
		yearOnly, _ := o["format"].(string)
		if yearOnly == "uuuu" || yearOnly == "yyyy" {
			// Year-only bounds: numbers are years, not epoch milliseconds.
			for _, b := range []*any{&lo, &hi} {
				if _, isStr := (*b).(string); !isStr && *b != nil {
					if n, ok := toFloat(*b); ok {
						*b = fmt.Sprintf("%04d", int(n))
					}
				}
			}
		}
		if lo != nil {
			// gt rounds up, gte rounds down
			t, err := parseDateMathFormat(lo, c.now, !loIncl, fi.DateFormat)
			if err != nil {
				return nil, badRequest("parse_exception", "[range] on field [%s]: %v", f, err)
			}
			start = t
		}
		if hi != nil {
			// lte rounds up, lt rounds down
			t, err := parseDateMathFormat(hi, c.now, hiIncl, fi.DateFormat)
			if err != nil {
				return nil, badRequest("parse_exception", "[range] on field [%s]: %v", f, err)
			}
			end = t
			if yearOnly == "uuuu" && hiIncl {
				// Elasticsearch rounds a uuuu upper bound up to the end of the year's
				// first day only.
				end = end.Add(24*time.Hour - time.Millisecond)
			}
		}
		if lo == nil && hi == nil {
			tq := bleve.NewTermQuery(f)
			tq.SetField(fFieldNames)
			return tq, nil
		}
		return c.dateRange(f, fi, lo != nil, hi != nil, start, end, loIncl, hiIncl)
	case "keyword", "text":
		var mn, mx string
		if lo != nil {
			mn = scalarString(lo)
		}
		if hi != nil {
			mx = scalarString(hi)
		}
		q := bleve.NewTermRangeInclusiveQuery(mn, mx, &loIncl, &hiIncl)
		q.SetField(f)
		return q, nil
	}
	return nil, badRequest("query_shard_exception", "[range] is not supported on field [%s] of type [%s]", f, fi.Type)
}

func (c *qctx) patternQ(kind string, body any) (query.Query, error) {
	f, v, opts, err := fieldAndValue(kind, body, "value")
	if err != nil {
		return nil, err
	}
	for k := range opts {
		switch k {
		case "value", "boost", "rewrite":
		case "case_insensitive":
			if b, _ := toBool(opts[k]); b {
				return nil, parsingErr("[%s] option [case_insensitive] is not supported by eslite", kind)
			}
		default:
			return nil, parsingErr("[%s] query does not support [%s]", kind, k)
		}
	}
	fi, ok := c.fields[f]
	if !ok {
		return bleve.NewMatchNoneQuery(), nil
	}
	if fi.Type != "text" && fi.Type != "keyword" {
		return nil, badRequest("query_shard_exception", "Can only use %s queries on keyword and text fields - not on [%s] which is of type [%s]", kind, f, fi.Type)
	}
	hint := ""
	if kind == "prefix" {
		hint = " For optimised prefix queries on text fields please enable [index_prefixes]."
	}
	if err := c.expensive("["+kind+"] queries", hint); err != nil {
		return nil, err
	}
	s := scalarString(v)
	if kind == "prefix" {
		c.addHLPrefix(f, s)
		q := bleve.NewPrefixQuery(s)
		q.SetField(f)
		return &constScoreQuery{inner: q, boost: boostValue(opts["boost"])}, nil
	}
	if i := strings.IndexAny(s, "*?"); i > 0 {
		c.addHLPrefix(f, s[:i])
	}
	q := bleve.NewWildcardQuery(s)
	q.SetField(f)
	return &constScoreQuery{inner: q, boost: boostValue(opts["boost"])}, nil
}

func clauses(v any) []any {
	switch t := v.(type) {
	case nil:
		return nil
	case []any:
		return t
	}
	return []any{v}
}

func (c *qctx) boolQ(body any) (query.Query, error) {
	o, ok := body.(map[string]any)
	if !ok {
		return nil, parsingErr("[bool] query malformed")
	}
	tr := func(name string) ([]query.Query, error) {
		var out []query.Query
		for _, x := range clauses(o[name]) {
			q, err := c.translate(x)
			if err != nil {
				return nil, err
			}
			out = append(out, q)
		}
		return out, nil
	}
	for k := range o {
		switch k {
		case "must", "should", "filter", "must_not", "minimum_should_match", "boost", "adjust_pure_negative", "_name":
		default:
			return nil, parsingErr("[bool] query does not support [%s]", k)
		}
	}
	must, err := tr("must")
	if err != nil {
		return nil, err
	}
	should, err := tr("should")
	if err != nil {
		return nil, err
	}
	filter, err := tr("filter")
	if err != nil {
		return nil, err
	}
	mustNot, err := tr("must_not")
	if err != nil {
		return nil, err
	}
	minShould := 0
	if len(must) == 0 && len(filter) == 0 && len(should) > 0 {
		minShould = 1
	}
	if v, ok := o["minimum_should_match"]; ok {
		n, err := minimumShouldMatch(v, len(should))
		if err != nil {
			return nil, err
		}
		minShould = n
	}
	if len(should) > 0 && minShould > len(should) {
		return bleve.NewMatchNoneQuery(), nil
	}
	bq := bleve.NewBooleanQuery()
	if len(must) > 0 {
		bq.AddMust(must...)
	}
	if len(should) > 0 {
		if minShould > 0 {
			// A required should clause set becomes a must on a disjunction with a minimum.
			dq := bleve.NewDisjunctionQuery(should...)
			dq.SetMin(float64(minShould))
			bq.AddMust(dq)
		} else {
			bq.AddShould(should...)
		}
	}
	if len(mustNot) > 0 {
		bq.AddMustNot(mustNot...)
	}
	if len(filter) > 0 {
		if len(filter) == 1 {
			bq.AddFilter(filter[0])
		} else {
			bq.AddFilter(bleve.NewConjunctionQuery(filter...))
		}
	}
	if len(must) == 0 && minShould == 0 {
		// Only optional clauses, filters or exclusions: every document is a candidate,
		// and only the optional clauses score, as in Elasticsearch.
		bq.AddMust(&constScoreQuery{inner: bleve.NewMatchAllQuery(), boost: 0})
	}
	return boosted(bq, o["boost"]), nil
}

// expandFields resolves field patterns (with ^boost) to mapped fields; an empty list means
// every text and keyword field.
func (c *qctx) expandFields(patterns []string) []fieldBoost {
	if len(patterns) == 0 {
		patterns = []string{"*"}
	}
	var out []fieldBoost
	seen := map[string]bool{}
	for _, p := range patterns {
		boost := 1.0
		if i := strings.LastIndex(p, "^"); i > 0 {
			if b, err := strconv.ParseFloat(p[i+1:], 64); err == nil {
				boost = b
			}
			p = p[:i]
		}
		var names []string
		if strings.ContainsAny(p, "*?") {
			for n, fi := range c.fields {
				if (fi.Type == "text" || fi.Type == "keyword") && globMatch(p, n) {
					names = append(names, n)
				}
			}
			sort.Strings(names)
		} else {
			names = []string{p}
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				out = append(out, fieldBoost{n, boost})
			}
		}
	}
	return out
}

type fieldBoost struct {
	name  string
	boost float64
}

func (c *qctx) multiMatch(body any) (query.Query, error) {
	o, ok := body.(map[string]any)
	if !ok {
		return nil, parsingErr("[multi_match] query malformed")
	}
	text, ok := o["query"]
	if !ok {
		return nil, parsingErr("[multi_match] requires [query]")
	}
	var pats []string
	for k, v := range o {
		switch k {
		case "query", "operator", "minimum_should_match", "boost", "lenient", "tie_breaker", "_name", "analyzer":
		case "fields":
			for _, x := range clauses(v) {
				pats = append(pats, scalarString(x))
			}
		case "type":
			switch v {
			case "best_fields", "most_fields", "phrase", "bool_prefix":
			default:
				return nil, parsingErr("[multi_match] type [%v] is not supported by eslite (best_fields, most_fields, phrase, bool_prefix)", v)
			}
		case "fuzziness", "prefix_length", "max_expansions", "fuzzy_transpositions", "fuzzy_rewrite":
		case "slop", "cutoff_frequency":
			if o["type"] == "bool_prefix" {
				return nil, parsingErr("[%s] not allowed for type [bool_prefix]", k)
			}
			return nil, parsingErr("[multi_match] query does not support [%s]", k)
		default:
			return nil, parsingErr("[multi_match] query does not support [%s]", k)
		}
	}
	op := strings.ToLower(fmt.Sprint(orDefault(o["operator"], "or")))
	phrase := o["type"] == "phrase"
	var qs []query.Query
	for _, fb := range c.expandFields(pats) {
		fi, ok := c.fields[fb.name]
		if !ok {
			continue
		}
		if fi.Type != "text" && fi.Type != "keyword" && len(pats) == 0 {
			continue
		}
		var q query.Query
		var err error
		if o["type"] == "bool_prefix" {
			q, err = c.boolPrefixField(fb.name, scalarString(text), op, o)
		} else {
			q, err = c.matchField(fb.name, scalarString(text), op, o["minimum_should_match"], phrase)
		}
		if err != nil {
			return nil, err
		}
		if fb.boost != 1 {
			q = boosted(q, fb.boost)
		}
		qs = append(qs, q)
	}
	if len(qs) == 0 {
		return bleve.NewMatchNoneQuery(), nil
	}
	if o["type"] == "most_fields" {
		return boosted(bleve.NewDisjunctionQuery(qs...), o["boost"]), nil
	}
	tie, _ := toFloat(o["tie_breaker"])
	return boosted(&disMaxQuery{DisjunctionQuery: bleve.NewDisjunctionQuery(qs...), tie: tie}, o["boost"]), nil
}

// ---- query_string ----

func (c *qctx) queryString(body any) (query.Query, error) {
	o, ok := body.(map[string]any)
	if !ok {
		return nil, parsingErr("[query_string] query malformed")
	}
	qs, ok := o["query"].(string)
	if !ok {
		return nil, parsingErr("[query_string] requires a [query] string")
	}
	var fields []string
	defOp := "or"
	for k, v := range o {
		switch k {
		case "query", "boost", "lenient", "analyze_wildcard", "_name", "analyzer", "auto_generate_synonyms_phrase_query":
		case "fields":
			for _, x := range clauses(v) {
				fields = append(fields, scalarString(x))
			}
		case "default_field":
			fields = append(fields, scalarString(v))
		case "default_operator":
			defOp = strings.ToLower(scalarString(v))
			if defOp != "or" && defOp != "and" {
				return nil, parsingErr("[query_string] default_operator [%v] must be AND or OR", v)
			}
		default:
			return nil, parsingErr("[query_string] query does not support [%s]", k)
		}
	}
	if t := strings.TrimSpace(qs); len(t) > 1 && strings.HasPrefix(t, "/") && strings.HasSuffix(t, "/") {
		re := t[1 : len(t)-1]
		if err := c.checkRegexLength(re); err != nil {
			return nil, err
		}
		var rqs []query.Query
		for _, fb := range c.expandFields(fields) {
			if fi, ok := c.fields[fb.name]; ok && (fi.Type == "text" || fi.Type == "keyword") {
				rq := bleve.NewRegexpQuery(re)
				rq.SetField(fb.name)
				rqs = append(rqs, &constScoreQuery{inner: rq, boost: fb.boost})
			}
		}
		if len(rqs) == 0 {
			return bleve.NewMatchNoneQuery(), nil
		}
		return &disMaxQuery{DisjunctionQuery: bleve.NewDisjunctionQuery(rqs...)}, nil
	}
	p := &qsParser{c: c, fields: fields, defOp: defOp, src: qs, lenient: boolOpt(o["lenient"])}
	if err := p.lex(); err != nil {
		return nil, err
	}
	q, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, p.fail("unexpected [%s]", p.toks[p.pos].text)
	}
	if q == nil {
		return bleve.NewMatchNoneQuery(), nil
	}
	return boosted(q, o["boost"]), nil
}

type qsTok struct {
	kind string // word, phrase, lparen, rparen, and, or, not, plus, minus, colon, range
	text string
}

type qsParser struct {
	lenient bool // values that do not fit a field's type match nothing instead of failing
	c       *qctx
	fields  []string
	defOp   string
	src     string
	toks    []qsTok
	pos     int
}

func (p *qsParser) fail(format string, args ...any) error {
	return badRequest("query_shard_exception", "Failed to parse query [%s]: %s", p.src, fmt.Sprintf(format, args...))
}

func (p *qsParser) lex() error {
	s := p.src
	i := 0
	for i < len(s) {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			i++
		case ch == '(':
			p.toks = append(p.toks, qsTok{"lparen", "("})
			i++
		case ch == ')':
			p.toks = append(p.toks, qsTok{"rparen", ")"})
			i++
		case ch == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return p.fail("unterminated phrase starting at position %d", i)
			}
			p.toks = append(p.toks, qsTok{"phrase", s[i+1 : i+1+j]})
			i += j + 2
		case ch == '[' || ch == '{':
			j := strings.IndexAny(s[i:], "]}")
			if j < 0 {
				return p.fail("unterminated range starting at position %d", i)
			}
			p.toks = append(p.toks, qsTok{"range", s[i : i+j+1]})
			i += j + 1
		case ch == '+' && (i == 0 || s[i-1] == ' ' || s[i-1] == '('):
			p.toks = append(p.toks, qsTok{"plus", "+"})
			i++
		case ch == '-' && (i == 0 || s[i-1] == ' ' || s[i-1] == '('):
			p.toks = append(p.toks, qsTok{"minus", "-"})
			i++
		case ch == '!':
			p.toks = append(p.toks, qsTok{"not", "!"})
			i++
		case strings.HasPrefix(s[i:], "&&"):
			p.toks = append(p.toks, qsTok{"and", "&&"})
			i += 2
		case strings.HasPrefix(s[i:], "||"):
			p.toks = append(p.toks, qsTok{"or", "||"})
			i += 2
		default:
			j := i
			for j < len(s) {
				c := s[j]
				if c == '\\' && j+1 < len(s) {
					j += 2
					continue
				}
				if c == ' ' || c == '\t' || c == '\n' || c == '(' || c == ')' || c == '"' || (c == ':' && j > i) {
					break
				}
				j++
			}
			w := s[i:j]
			i = j
			if i < len(s) && s[i] == ':' {
				p.toks = append(p.toks, qsTok{"field", strings.ReplaceAll(w, `\`, "")})
				i++
				continue
			}
			switch w {
			case "AND":
				p.toks = append(p.toks, qsTok{"and", w})
			case "OR":
				p.toks = append(p.toks, qsTok{"or", w})
			case "NOT":
				p.toks = append(p.toks, qsTok{"not", w})
			default:
				p.toks = append(p.toks, qsTok{"word", strings.ReplaceAll(w, `\`, "")})
			}
		}
	}
	return nil
}

func (p *qsParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos].kind
	}
	return ""
}

// parseOr: and-groups joined by OR.
func (p *qsParser) parseOr() (query.Query, error) {
	var groups []query.Query
	for {
		g, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		if g != nil {
			groups = append(groups, g)
		}
		if p.peek() != "or" {
			break
		}
		p.pos++
	}
	switch len(groups) {
	case 0:
		return nil, nil
	case 1:
		return groups[0], nil
	}
	return bleve.NewDisjunctionQuery(groups...), nil
}

// parseAnd: unary operands joined by AND or by juxtaposition (the default operator).
func (p *qsParser) parseAnd() (query.Query, error) {
	var must, should, not []query.Query
	first := true
	for {
		k := p.peek()
		if k == "" || k == "rparen" || k == "or" {
			break
		}
		explicitAnd := false
		if k == "and" {
			if first {
				return nil, p.fail("AND without a left operand")
			}
			explicitAnd = true
			p.pos++
		}
		req, prohibit := false, false
		switch p.peek() {
		case "plus":
			req = true
			p.pos++
		case "minus", "not":
			prohibit = true
			p.pos++
		}
		q, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		switch {
		case prohibit:
			not = append(not, q)
		case req || explicitAnd || p.defOp == "and" || (p.peek() == "and"):
			must = append(must, q)
		default:
			should = append(should, q)
		}
		first = false
	}
	if len(must)+len(should)+len(not) == 0 {
		return nil, nil
	}
	if len(must) == 1 && len(should) == 0 && len(not) == 0 {
		return must[0], nil
	}
	if len(should) == 1 && len(must) == 0 && len(not) == 0 {
		return should[0], nil
	}
	bq := bleve.NewBooleanQuery()
	if len(must) > 0 {
		bq.AddMust(must...)
	}
	if len(should) > 0 {
		if len(must) == 0 {
			dq := bleve.NewDisjunctionQuery(should...)
			dq.SetMin(1)
			bq.AddMust(dq)
		} else {
			bq.AddShould(should...)
		}
	}
	if len(not) > 0 {
		bq.AddMustNot(not...)
	}
	if len(must) == 0 && len(should) == 0 {
		bq.AddMust(bleve.NewMatchAllQuery())
	}
	return bq, nil
}

func (p *qsParser) parsePrimary() (query.Query, error) {
	if p.pos >= len(p.toks) {
		return nil, p.fail("expected a term at the end of the query")
	}
	t := p.toks[p.pos]
	switch t.kind {
	case "lparen":
		p.pos++
		q, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.peek() != "rparen" {
			return nil, p.fail("missing closing parenthesis")
		}
		p.pos++
		if q == nil {
			return bleve.NewMatchNoneQuery(), nil
		}
		return q, nil
	case "field":
		p.pos++
		return p.fieldValue(t.text)
	case "word", "phrase":
		p.pos++
		return p.onFields(p.fields, t)
	}
	return nil, p.fail("unexpected [%s]", t.text)
}

func (p *qsParser) fieldValue(field string) (query.Query, error) {
	if p.pos >= len(p.toks) {
		return nil, p.fail("field [%s] has no value", field)
	}
	t := p.toks[p.pos]
	if field == "_exists_" && t.kind == "word" {
		p.pos++
		tq := bleve.NewTermQuery(t.text)
		tq.SetField(fFieldNames)
		return tq, nil
	}
	switch t.kind {
	case "lparen":
		saved := p.fields
		p.fields = []string{field}
		q, err := p.parsePrimary()
		p.fields = saved
		return q, err
	case "range":
		p.pos++
		return p.rangeTerm(field, t.text)
	case "word", "phrase":
		p.pos++
		if t.kind == "word" {
			for _, op := range []string{">=", "<=", ">", "<"} {
				if strings.HasPrefix(t.text, op) {
					v := t.text[len(op):]
					r := map[string]any{}
					switch op {
					case ">=":
						r["gte"] = v
					case "<=":
						r["lte"] = v
					case ">":
						r["gt"] = v
					case "<":
						r["lt"] = v
					}
					return p.c.rangeQ(map[string]any{field: r})
				}
			}
		}
		return p.onFields([]string{field}, t)
	}
	return nil, p.fail("field [%s] has no value", field)
}

func (p *qsParser) rangeTerm(field, text string) (query.Query, error) {
	loIncl := text[0] == '['
	hiIncl := text[len(text)-1] == ']'
	inner := text[1 : len(text)-1]
	parts := strings.Split(inner, " TO ")
	if len(parts) != 2 {
		return nil, p.fail("range [%s] must look like [a TO b]", text)
	}
	r := map[string]any{}
	lo, hi := strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1])
	if lo != "*" {
		if loIncl {
			r["gte"] = lo
		} else {
			r["gt"] = lo
		}
	}
	if hi != "*" {
		if hiIncl {
			r["lte"] = hi
		} else {
			r["lt"] = hi
		}
	}
	return p.c.rangeQ(map[string]any{field: r})
}

// onFields matches a word or phrase on the given field patterns.
func (p *qsParser) onFields(patterns []string, t qsTok) (query.Query, error) {
	var qs []query.Query
	for _, fb := range p.c.expandFields(patterns) {
		fi, ok := p.c.fields[fb.name]
		if !ok {
			continue
		}
		var q query.Query
		var err error
		switch {
		case t.kind == "word" && t.text == "*":
			tq := bleve.NewTermQuery(fb.name)
			tq.SetField(fFieldNames)
			q = tq
		case t.kind == "word" && strings.ContainsAny(t.text, "*?") && (fi.Type == "text" || fi.Type == "keyword"):
			w := t.text
			if fi.Type == "text" {
				w = strings.ToLower(w)
			}
			wq := bleve.NewWildcardQuery(w)
			wq.SetField(fb.name)
			q = wq
		case fi.Type == "text":
			q, err = p.c.matchField(fb.name, t.text, "and", nil, t.kind == "phrase")
		case fi.Type == "keyword":
			q, err = p.c.exactValue(fb.name, fi, t.text)
		default:
			if len(patterns) == 0 || strings.ContainsAny(strings.Join(patterns, ""), "*") {
				continue // lenient on expanded fields
			}
			q, err = p.c.exactValue(fb.name, fi, t.text)
		}
		if err != nil && p.lenient {
			continue
		}
		if err != nil {
			return nil, err
		}
		qs = append(qs, boosted(q, fb.boost))
	}
	switch len(qs) {
	case 0:
		return bleve.NewMatchNoneQuery(), nil
	case 1:
		return qs[0], nil
	}
	return bleve.NewDisjunctionQuery(qs...), nil
}

// nestedQ answers a nested query. Nested objects are indexed as plain objects, so the
// inner query runs against the whole document: a document matches when any of its
// nested objects' values match (conditions across several fields of one nested object
// may also match values from different objects, where Elasticsearch would not).
func (c *qctx) nestedQ(body any) (query.Query, error) {
	o, ok := body.(map[string]any)
	if !ok {
		return nil, parsingErr("[nested] query malformed")
	}
	path, _ := o["path"].(string)
	if path == "" {
		return nil, parsingErr("[nested] requires 'path' field")
	}
	inner, ok := o["query"]
	if !ok {
		return nil, parsingErr("[nested] requires 'query' field")
	}
	if err := c.expensive("[joining] queries", ""); err != nil {
		return nil, err
	}
	mapped := false
	for f := range c.fields {
		if strings.HasPrefix(f, path+".") {
			mapped = true
			break
		}
	}
	if !mapped && c.fields != nil {
		if boolOpt(o["ignore_unmapped"]) {
			return bleve.NewMatchNoneQuery(), nil
		}
		return nil, badRequest("query_shard_exception", "failed to create query: [nested] failed to find nested object under path [%s]", path)
	}
	q, err := c.translate(inner)
	if err != nil {
		return nil, err
	}
	return boosted(q, o["boost"]), nil
}

// matchBoolPrefixQ answers match_bool_prefix: the analysed terms as a bool query of term
// queries, the last one a prefix query.
func (c *qctx) matchBoolPrefixQ(body any) (query.Query, error) {
	f, v, opts, err := fieldAndValue("match_bool_prefix", body, "query")
	if err != nil {
		return nil, err
	}
	for k := range opts {
		switch k {
		case "query", "operator", "minimum_should_match", "boost", "analyzer", "fuzziness", "prefix_length",
			"max_expansions", "fuzzy_transpositions", "fuzzy_rewrite", "_name":
		default:
			return nil, parsingErr("[match_bool_prefix] query does not support [%s]", k)
		}
	}
	op := strings.ToLower(fmt.Sprint(orDefault(opts["operator"], "or")))
	if op != "or" && op != "and" {
		return nil, parsingErr("[match_bool_prefix] query: unknown operator [%v], expected and or or", opts["operator"])
	}
	q, err := c.boolPrefixField(f, scalarString(v), op, opts)
	if err != nil {
		return nil, err
	}
	return boosted(q, opts["boost"]), nil
}

// analyzeWith analyses text with a named search analyzer: whitespace and keyword keep
// case, anything else is the standard-like analysis text fields are indexed with.
func analyzeWith(analyzer any, text string) []string {
	switch analyzer {
	case "whitespace":
		return strings.Fields(text)
	case "keyword":
		return []string{text}
	}
	return analyze(text)
}

// fuzzDistance reads a fuzziness (0, 1, 2 or AUTO) for a term.
func fuzzDistance(v any, term string) int {
	if v == nil {
		return 0
	}
	s := strings.ToUpper(scalarString(v))
	if strings.HasPrefix(s, "AUTO") {
		switch n := len([]rune(term)); {
		case n <= 2:
			return 0
		case n <= 5:
			return 1
		}
		return 2
	}
	n, _ := strconv.Atoi(s)
	if n > 2 {
		n = 2
	}
	return n
}

func (c *qctx) boolPrefixField(f, text, op string, opts map[string]any) (query.Query, error) {
	fi, ok := c.fields[f]
	if !ok {
		return bleve.NewMatchNoneQuery(), nil
	}
	if fi.Type != "text" {
		return c.exactValue(f, fi, text)
	}
	terms := analyzeWith(opts["analyzer"], text)
	if len(terms) == 0 {
		return bleve.NewMatchNoneQuery(), nil
	}
	c.addHL(f, terms[:len(terms)-1]...)
	c.addHLPrefix(f, terms[len(terms)-1])
	prefixLen := 0
	if n, ok := toFloat(opts["prefix_length"]); ok {
		prefixLen = int(n)
	}
	qs := make([]query.Query, len(terms))
	for i, t := range terms {
		if i == len(terms)-1 {
			pq := bleve.NewPrefixQuery(t)
			pq.SetField(f)
			qs[i] = &constScoreQuery{inner: pq, boost: 1}
			continue
		}
		if d := fuzzDistance(opts["fuzziness"], t); d > 0 {
			fq := bleve.NewFuzzyQuery(t)
			fq.SetField(f)
			fq.SetFuzziness(d)
			fq.SetPrefix(prefixLen)
			qs[i] = fq
			continue
		}
		tq := bleve.NewTermQuery(t)
		tq.SetField(f)
		qs[i] = tq
	}
	if len(qs) == 1 {
		return qs[0], nil
	}
	if op == "and" {
		return bleve.NewConjunctionQuery(qs...), nil
	}
	dq := bleve.NewDisjunctionQuery(qs...)
	if msm := opts["minimum_should_match"]; msm != nil {
		n, err := minimumShouldMatch(msm, len(qs))
		if err != nil {
			return nil, err
		}
		dq.SetMin(float64(n))
	}
	return dq, nil
}

// The range of dates bleve indexes and queries (nanoseconds since the epoch in an int64),
// within a margin.
var (
	bleveMinDate = time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC)
	bleveMaxDate = time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)
)

// dateRange matches the dates between start and end. Dates outside the years bleve
// indexes (before 1678, after 2262) stay in _source only: the bounds are clamped for the
// index, and when a bound lies outside those years the dates there are compared in
// _source.
func (c *qctx) dateRange(f string, fi fieldInfo, hasLo, hasHi bool, start, end time.Time, loIncl, hiIncl bool) (query.Query, error) {
	bs, be := start, end
	if hasLo && bs.Before(bleveMinDate) {
		bs = bleveMinDate
	}
	if hasHi && be.After(bleveMaxDate) {
		be = bleveMaxDate
	}
	dq := bleve.NewDisjunctionQuery()
	if (!hasLo || !bs.After(bleveMaxDate)) && (!hasHi || !be.Before(bleveMinDate)) {
		q := bleve.NewDateRangeInclusiveQuery(bs, be, &loIncl, &hiIncl)
		q.SetField(f)
		dq.AddQuery(q)
	}
	if (hasLo && start.Before(bleveMinDate)) || (hasHi && end.After(bleveMaxDate)) {
		outside, err := c.scanQuery(func(src map[string]any) bool {
			for _, v := range sourceValues(src, fi.Src) {
				t, err := parseDateValue(v)
				if err != nil || (!t.Before(bleveMinDate) && !t.After(bleveMaxDate)) {
					continue
				}
				if hasLo && (t.Before(start) || (!loIncl && t.Equal(start))) {
					continue
				}
				if hasHi && (t.After(end) || (!hiIncl && t.Equal(end))) {
					continue
				}
				return true
			}
			return false
		})
		if err != nil {
			return nil, err
		}
		if _, none := outside.(*query.MatchNoneQuery); !none {
			dq.AddQuery(outside)
		}
	}
	switch len(dq.Disjuncts) {
	case 0:
		return bleve.NewMatchNoneQuery(), nil
	case 1:
		return dq.Disjuncts[0], nil
	}
	return dq, nil
}

// parseDateMathFormat reads a query's date: in the field's format when it parses so
// (plain values, no date math), else as parseDateMath does.
func parseDateMathFormat(v any, now time.Time, roundUp bool, format string) (time.Time, error) {
	if format != "" {
		if s, ok := v.(string); !ok || (!strings.HasPrefix(s, "now") && !strings.Contains(s, "||")) {
			if t, err := parseDateFormat(v, format); err == nil {
				return t, nil
			}
		}
	}
	return parseDateMath(v, now, roundUp)
}

var javaDateTokens = strings.NewReplacer("yyyy", "2006", "uuuu", "2006", "MM", "01", "dd", "02", "HH", "15",
	"mm", "04", "ss", "05", "SSSSSSSSS", "000000000", "SSSSSS", "000000", "SSS", "000", "'T'", "T", "XXX", "Z07:00",
	"ZZZZZ", "Z07:00", "Z", "Z0700")

// parseDateFormat reads a date in a mapping's format: alternatives joined by ||, each
// epoch_millis, epoch_second, one of the built-in ISO formats, or a Java pattern made of
// yyyy/uuuu, MM, dd, HH, mm, ss, SSS and literals. Without a format, the default
// strict_date_optional_time||epoch_millis applies.
func parseDateFormat(v any, format string) (time.Time, error) {
	if format == "" {
		return parseDateValue(v)
	}
	var firstErr error
	for _, f := range strings.Split(format, "||") {
		var t time.Time
		var err error
		switch f {
		case "epoch_millis":
			n, ok := toFloat(numberValue(v))
			if !ok {
				err = fmt.Errorf("failed to parse date field [%v] with format [epoch_millis]", v)
			} else {
				t = time.UnixMilli(int64(n)).UTC()
			}
		case "epoch_second":
			n, ok := toFloat(numberValue(v))
			if !ok {
				err = fmt.Errorf("failed to parse date field [%v] with format [epoch_second]", v)
			} else {
				t = time.UnixMilli(int64(n * 1000)).UTC()
			}
		case "strict_date_optional_time", "date_optional_time", "strict_date_optional_time_nanos", "date_time", "strict_date_time",
			"strict_date", "date", "basic_date":
			t, err = parseDateValue(v)
		default:
			s, isStr := v.(string)
			if !isStr {
				s = scalarString(v)
			}
			t, err = time.Parse(javaDateTokens.Replace(f), s)
			t = t.UTC()
		}
		if err == nil {
			return t, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return time.Time{}, firstErr
}

// numberValue turns a numeric string into a number, for the epoch formats.
func numberValue(v any) any {
	if s, ok := v.(string); ok {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f
		}
	}
	return v
}

// indexNameQuery answers term, terms, match, prefix and wildcard queries on the _index
// metadata field, which match documents by the name of their index. ok is false for
// any other query.
func indexNameQuery(kind string, body any) (query.Query, bool, error) {
	if kind != "term" && kind != "terms" && kind != "match" && kind != "prefix" && kind != "wildcard" {
		return nil, false, nil
	}
	m, _ := body.(map[string]any)
	v, ok := m["_index"]
	if !ok {
		return nil, false, nil
	}
	if o, isObj := v.(map[string]any); isObj {
		v = orDefault(o["value"], orDefault(o["query"], o["wildcard"]))
	}
	var qs []query.Query
	for _, x := range clauses(v) {
		name := scalarString(x)
		switch kind {
		case "prefix":
			pq := bleve.NewPrefixQuery(name)
			pq.SetField(fIndexName)
			qs = append(qs, pq)
		case "wildcard":
			wq := bleve.NewWildcardQuery(name)
			wq.SetField(fIndexName)
			qs = append(qs, wq)
		default:
			tq := bleve.NewTermQuery(name)
			tq.SetField(fIndexName)
			qs = append(qs, tq)
		}
	}
	if len(qs) == 1 {
		return qs[0], true, nil
	}
	return bleve.NewDisjunctionQuery(qs...), true, nil
}

// fuzzyQ answers a fuzzy query: terms within an edit distance (fuzziness, AUTO by
// default) of the value, on text and keyword fields; the value is not analysed.
func (c *qctx) fuzzyQ(body any) (query.Query, error) {
	f, v, opts, err := fieldAndValue("fuzzy", body, "value")
	if err != nil {
		return nil, err
	}
	for k := range opts {
		switch k {
		case "value", "fuzziness", "prefix_length", "max_expansions", "transpositions", "rewrite", "boost", "_name":
		default:
			return nil, parsingErr("[fuzzy] query does not support [%s]", k)
		}
	}
	fi, ok := c.fields[f]
	if !ok {
		return bleve.NewMatchNoneQuery(), nil
	}
	if err := c.expensive("[fuzzy] queries", ""); err != nil {
		return nil, err
	}
	if fi.Type != "text" && fi.Type != "keyword" {
		return c.exactValue(f, fi, scalarString(v))
	}
	term := scalarString(v)
	fq := bleve.NewFuzzyQuery(term)
	fq.SetField(f)
	fq.SetFuzziness(fuzzDistance(orDefault(opts["fuzziness"], "AUTO"), term))
	if p, ok := toFloat(opts["prefix_length"]); ok {
		fq.SetPrefix(int(p))
	}
	c.addHL(f, term)
	return boosted(fq, opts["boost"]), nil
}
