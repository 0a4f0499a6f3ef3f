package eslite

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

type aggDef struct {
	name  string
	kind  string
	field string
	fi    fieldInfo
	opts  map[string]any
	subs  []*aggDef
	meta  any // returned as is with the result
	// missing is the value documents without the field count with, when set.
	missing any

	// terms
	size        int
	minDocCount int
	order       []termsOrder
	valueType   string // value_type: the type an unmapped field's missing value takes
	// histograms
	interval float64        // histogram interval, or fixed date interval in ms
	calUnit  string         // calendar unit for date_histogram
	loc      *time.Location // date_histogram time_zone; nil for UTC
	offset   float64        // histogram buckets start at offset + n·interval
	bounds   *[2]float64
	keyed    bool // buckets as an object keyed by their key instead of a list
	ranges   []aggRange
	// stats, extended_stats, percentiles; random_sampler: the probability
	sigma    float64
	percents []float64
	// filters: the named (or, anonymous, numbered) filter queries, and once the search
	// ran them, the documents each matches.
	filters     []aggFilter
	filterNamed bool
	docKey      func(map[string]any) string
	// terms and rare_terms include and exclude clauses
	termFilter []termFilter
	// weighted_avg: the value and weight sources
	weighted []*aggDef
	// global: every document of the searched indices
	allDocs []map[string]any
	// top_hits: renders documents as a search's hits
	hits func(docs []map[string]any, opts map[string]any) (map[string]any, error)
	// nested: records, for each document it makes of a nested object, the document it
	// came from, the path and the object's offset, so top_hits can render it as a hit
	nestedOf func(doc, parent map[string]any, path string, offset int)
	// ip_range
	ipRanges []ipRange
	// ip_prefix: the prefix length and whether addresses are read as IPv6;
	// geohash_grid, geotile_grid: the precision
	prefixLen int
	isIPv6    bool
	// composite: its sources and the after key, a value per source
	sources []*compositeSource
	after   []any
	// significant_terms, significant_text
	heuristic significance
	// bucket_script, bucket_selector: the script, its params and the buckets paths
	// its variables read
	scriptSrc    string
	scriptParams map[string]any
	scriptPaths  map[string]string
	// auto_date_histogram: the finest rounding it may pick (minimum_interval)
	minRounding int
	// top_metrics: its sort and its metrics' fields; matrix_stats: its fields
	topSort    *termsOrder
	topMetrics []*aggDef
	// sampler, diversified_sampler: a document's relevance score
	score func(doc map[string]any) float64
}

type aggFilter struct {
	key     string
	query   any
	matched map[string]bool
}

type aggRange struct {
	key      string
	from, to *float64
}

var metricKinds = map[string]bool{"avg": true, "sum": true, "min": true, "max": true, "value_count": true, "cardinality": true,
	"stats": true, "extended_stats": true, "percentiles": true, "percentile_ranks": true, "weighted_avg": true, "top_hits": true,
	"geo_bounds": true, "geo_centroid": true, "top_metrics": true, "matrix_stats": true}
var bucketKinds = map[string]bool{"terms": true, "date_histogram": true, "histogram": true, "range": true, "filters": true,
	"rare_terms": true, "filter": true, "global": true, "nested": true, "sampler": true, "diversified_sampler": true, "ip_range": true, "ip_prefix": true, "date_range": true, "adjacency_matrix": true, "composite": true,
	"significant_terms": true, "significant_text": true, "geohash_grid": true, "geotile_grid": true, "auto_date_histogram": true, "variable_width_histogram": true, "random_sampler": true}

func parseAggs(v any, fields map[string]fieldInfo) ([]*aggDef, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, parsingErr("[aggs] malformed: expected an object")
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*aggDef
	for _, name := range names {
		body, ok := m[name].(map[string]any)
		if !ok {
			return nil, parsingErr("Expected [START_OBJECT] under [%s], but got a value", name)
		}
		a := &aggDef{name: name}
		var subs any
		for k, x := range body {
			switch {
			case k == "aggs" || k == "aggregations":
				subs = x
			case k == "meta":
				a.meta = x
			case metricKinds[k] || bucketKinds[k] || pipelineKinds[k] || parentPipelineKinds[k]:
				if a.kind != "" {
					return nil, parsingErr("Found two aggregation type definitions in [%s]: [%s] and [%s]", name, a.kind, k)
				}
				a.kind = k
				a.opts, _ = x.(map[string]any)
				if a.opts == nil {
					return nil, parsingErr("[%s] aggregation [%s] malformed", k, name)
				}
			default:
				return nil, parsingErr("Unknown aggregation type [%s] in [%s] (eslite supports terms, rare_terms, date_histogram, auto_date_histogram, variable_width_histogram, histogram, range, date_range, ip_range, ip_prefix, composite, significant_terms, significant_text, geohash_grid, geotile_grid, filter, filters, adjacency_matrix, global, nested, sampler, diversified_sampler, random_sampler, top_hits, top_metrics, matrix_stats, geo_bounds, geo_centroid, avg, weighted_avg, sum, min, max, value_count, cardinality, stats, extended_stats, percentiles, percentile_ranks, avg_bucket, max_bucket, min_bucket, sum_bucket, stats_bucket, cumulative_sum, derivative, serial_diff, bucket_sort, bucket_script, bucket_selector, moving_fn)", k, name)
			}
		}
		if a.kind == "" {
			return nil, parsingErr("Missing definition for aggregation [%s]", name)
		}
		if err := a.configure(fields); err != nil {
			return nil, err
		}
		if subs != nil {
			if !bucketKinds[a.kind] {
				return nil, badRequest("aggregation_initialization_exception", "Aggregator [%s] of type [%s] cannot accept sub-aggregations", name, a.kind)
			}
			var err error
			if a.subs, err = parseAggs(subs, fields); err != nil {
				return nil, err
			}
		}
		if a.kind == "terms" {
			if err := a.checkTermsOrder(); err != nil {
				return nil, err
			}
		}
		if err := checkCompositeParent(a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

var fixedInterval = regexp.MustCompile(`^(\d+)(ms|s|m|h|d)$`)

func (a *aggDef) configure(fields map[string]fieldInfo) error {
	if handled, err := a.configureMore(fields); handled {
		return err
	}
	if a.kind == "filters" {
		return a.configureFilters()
	}
	f, _ := a.opts["field"].(string)
	if f == "" {
		return parsingErr("Required one of fields [field, script], but none were specified in [%s] aggregation [%s]", a.kind, a.name)
	}
	if f == "_id" {
		return idFielddataErr()
	}
	a.field = f
	fi := mappedOrUnmapped(fields, f)
	a.fi = fi
	if fi.Type == "text" && !fi.Fielddata {
		return badRequest("illegal_argument_exception", "Text fields are not optimised for operations that require per-document field data like aggregations and sorting, so these operations are disabled by default. Please use a keyword field instead. Alternatively, set fielddata=true on [%s] in order to load field data by uninverting the inverted index.", f)
	}
	allowed := map[string]bool{"field": true, "missing": true, "format": true}
	a.missing = a.opts["missing"]
	if (a.kind == "avg" || a.kind == "sum" || a.kind == "min" || a.kind == "max" || a.kind == "stats" ||
		a.kind == "extended_stats" || a.kind == "percentiles" || a.kind == "percentile_ranks") && (fi.Type == "keyword" || fi.Type == "none") {
		return badRequest("illegal_argument_exception", "Field [%s] of type [%s] is not supported for aggregation [%s]", f, fi.ESType, a.kind)
	}
	var err error
	switch a.kind {
	case "terms":
		if err := a.configureTerms(allowed); err != nil {
			return err
		}
	case "histogram":
		for _, k := range []string{"interval", "min_doc_count", "offset", "extended_bounds", "keyed", "hard_bounds"} {
			allowed[k] = true
		}
		iv, ok := toFloat(a.opts["interval"])
		if !ok || iv <= 0 {
			return badRequest("illegal_argument_exception", "[interval] must be >0 for histogram aggregation [%s]", a.name)
		}
		a.interval = iv
		if a.minDocCount, err = intParam(a.opts["min_doc_count"], "min_doc_count", 0); err != nil {
			return err
		}
	case "date_histogram":
		for _, k := range []string{"calendar_interval", "fixed_interval", "min_doc_count", "time_zone", "offset", "extended_bounds", "keyed"} {
			allowed[k] = true
		}
		if tz, ok := a.opts["time_zone"]; ok && tz != "UTC" && tz != "Z" && tz != "+00:00" {
			loc, err := loadZone(scalarString(tz))
			if err != nil {
				return parsingErr("[date_histogram] aggregation [%s]: time_zone [%v] is not known", a.name, tz)
			}
			a.loc = loc
		}
		if a.minDocCount, err = intParam(a.opts["min_doc_count"], "min_doc_count", 0); err != nil {
			return err
		}
		ci, hasCal := a.opts["calendar_interval"].(string)
		fx, hasFix := a.opts["fixed_interval"].(string)
		switch {
		case hasCal && hasFix:
			return badRequest("illegal_argument_exception", "Cannot use [fixed_interval] with [calendar_interval] configuration option in [%s]", a.name)
		case hasCal:
			units := map[string]string{"minute": "m", "1m": "m", "hour": "h", "1h": "h", "day": "d", "1d": "d", "week": "w", "1w": "w", "month": "M", "1M": "M", "quarter": "q", "1q": "q", "year": "y", "1y": "y"}
			u, ok := units[ci]
			if !ok {
				return badRequest("illegal_argument_exception", "The supplied interval [%s] could not be parsed as a calendar interval in [%s]", ci, a.name)
			}
			a.calUnit = u
		case hasFix:
			m := fixedInterval.FindStringSubmatch(fx)
			if m == nil {
				return badRequest("illegal_argument_exception", "failed to parse setting [date_histogram.fixedInterval] with value [%s] as a time value: unit is missing or unrecognized", fx)
			}
			n, _ := strconv.Atoi(m[1])
			mult := map[string]float64{"ms": 1, "s": 1e3, "m": 6e4, "h": 3.6e6, "d": 8.64e7}[m[2]]
			a.interval = float64(n) * mult
			if a.interval <= 0 {
				return badRequest("illegal_argument_exception", "[fixed_interval] must be positive in [%s]", a.name)
			}
		default:
			if _, ok := a.opts["interval"]; ok {
				return parsingErr("[date_histogram] aggregation [%s]: [interval] is not supported; use [calendar_interval] or [fixed_interval]", a.name)
			}
			return badRequest("illegal_argument_exception", "Invalid interval specified, must be non-null and non-empty in [%s]", a.name)
		}
		if fi.Type != "date" && fi.Type != "unmapped" {
			return badRequest("illegal_argument_exception", "Field [%s] of type [%s] is not supported for aggregation [date_histogram]", f, fi.Type)
		}
	case "range":
		allowed["ranges"] = true
		allowed["keyed"] = true
		rs, ok := a.opts["ranges"].([]any)
		if !ok || len(rs) == 0 {
			return badRequest("illegal_argument_exception", "No [ranges] specified for the [%s] aggregation", a.name)
		}
		for _, r := range rs {
			rm, _ := r.(map[string]any)
			var ar aggRange
			for k, v := range rm {
				if v == nil && (k == "from" || k == "to") {
					// A null bound leaves the range open on that side.
					continue
				}
				n, ok := toFloat(v)
				switch k {
				case "from":
					if !ok {
						return parsingErr("[range] aggregation [%s]: [from] must be a number", a.name)
					}
					ar.from = &n
				case "to":
					if !ok {
						return parsingErr("[range] aggregation [%s]: [to] must be a number", a.name)
					}
					ar.to = &n
				case "key":
					ar.key = scalarString(v)
				default:
					return parsingErr("[range] aggregation [%s]: unknown range key [%s]", a.name, k)
				}
			}
			if ar.key == "" {
				ar.key = rangeBound(ar.from) + "-" + rangeBound(ar.to)
			}
			a.ranges = append(a.ranges, ar)
		}
		sortRanges(a.ranges)
	}
	if err := a.configureStats(allowed); err != nil {
		return err
	}
	if a.kind == "cardinality" {
		allowed["precision_threshold"] = true
		if pt, ok := toFloat(a.opts["precision_threshold"]); ok && pt < 0 {
			return badRequest("illegal_argument_exception", "[precisionThreshold] must be greater than or equal to 0. Found [%v] in [%s]", jsonNumber(pt), a.name)
		}
	}
	for k := range a.opts {
		if !allowed[k] {
			return parsingErr("[%s] aggregation [%s] does not support [%s] in eslite", a.kind, a.name, k)
		}
	}
	a.keyed = boolOpt(a.opts["keyed"])
	if off, ok := a.opts["offset"]; ok {
		if f, isNum := toFloat(off); isNum {
			a.offset = f
		} else if d, err := parseDuration(scalarString(off)); err == nil {
			a.offset = d
		} else {
			return parsingErr("[%s] aggregation [%s]: cannot parse [offset] [%v]", a.kind, a.name, off)
		}
	}
	if eb, ok := a.opts["extended_bounds"].(map[string]any); ok {
		var b [2]float64
		for i, k := range []string{"min", "max"} {
			v := eb[k]
			if f, ok := toFloat(v); ok {
				b[i] = f
			} else if t, err := parseDateIn(v, a.dateFormat(), a.loc); err == nil && a.kind == "date_histogram" {
				b[i] = float64(t.UnixMilli())
			} else if t, err := parseDateMath(v, time.Now(), i == 1); err == nil {
				b[i] = float64(t.UnixMilli())
			} else {
				return parsingErr("[%s] aggregation [%s]: cannot parse [extended_bounds.%s] [%v]", a.kind, a.name, k, v)
			}
		}
		if b[0] > b[1] {
			return badRequest("illegal_argument_exception", "[extended_bounds.min][%v] cannot be greater than [extended_bounds.max][%v] for histogram aggregation [%s]", jsonNumber(b[0]), jsonNumber(b[1]), a.name)
		}
		a.bounds = &b
	}
	if (a.kind == "histogram" || a.kind == "range" || a.kind == "avg" || a.kind == "sum") && fi.Type != "long" && fi.Type != "double" && fi.Type != "date" && fi.Type != "unmapped" {
		return badRequest("illegal_argument_exception", "Field [%s] of type [%s] is not supported for aggregation [%s]", f, fi.Type, a.kind)
	}
	return nil
}

func rangeBound(f *float64) string {
	if f == nil {
		return "*"
	}
	return esDouble(*f)
}

// esDouble formats a double as Java does for whole numbers ("100.0").
func esDouble(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

func runAggs(defs []*aggDef, docs []map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for _, a := range defs {
		if pipelineKinds[a.kind] || parentPipelineKinds[a.kind] {
			continue
		}
		r, err := a.run(docs)
		if err != nil {
			return nil, err
		}
		if a.meta != nil {
			r["meta"] = a.meta
		}
		out[a.name] = r
	}
	for _, a := range defs {
		if !pipelineKinds[a.kind] {
			continue
		}
		r, err := a.runPipeline(out)
		if err != nil {
			return nil, err
		}
		if a.meta != nil {
			r["meta"] = a.meta
		}
		out[a.name] = r
	}
	return out, nil
}

func (a *aggDef) values(doc map[string]any) []any {
	var vals []any
	switch {
	case a.fi.ESType == "_index":
		// The index name comes from the document's identity.
		if a.docKey != nil {
			if ix, _, ok := strings.Cut(a.docKey(doc), "\x00"); ok {
				vals = []any{ix}
			}
		}
	case a.fi.Type == "unmapped":
	case a.fi.Type == "text":
		// A text field with fielddata aggregates the tokens it was indexed with.
		for _, t := range fieldTokens(a.fi, doc) {
			vals = append(vals, t)
		}
	default:
		vals = fieldValues(a.fi, doc)
	}
	if len(vals) == 0 && a.missing != nil {
		fi := a.fi
		if fi.Type == "unmapped" {
			// An unmapped field with a missing value aggregates that value as its
			// value_type, or as a number when it is one, as Elasticsearch does.
			fi.Type = a.valueType
			if fi.Type == "" {
				fi.Type = "double"
				if _, ok := toFloat(a.missing); !ok {
					fi.Type = "keyword"
				}
			}
		}
		if v, ok := typedValue(fi, a.missing); ok {
			vals = []any{v}
		}
	}
	return vals
}

// docCount counts documents as aggregations do: a document with a _doc_count field
// (pre-aggregated data) stands for that many.
func docCount(docs []map[string]any) int {
	n := 0
	for _, d := range docs {
		if c, ok := toFloat(d["_doc_count"]); ok && c >= 0 {
			n += int(c)
		} else {
			n++
		}
	}
	return n
}

func (a *aggDef) bucket(key any, docs []map[string]any, extra map[string]any) (map[string]any, error) {
	b := map[string]any{"key": key, "doc_count": docCount(docs)}
	for k, v := range extra {
		b[k] = v
	}
	if len(a.subs) > 0 {
		sub, err := runAggs(a.subs, docs)
		if err != nil {
			return nil, err
		}
		for k, v := range sub {
			b[k] = v
		}
	}
	return b, nil
}

func (a *aggDef) run(docs []map[string]any) (map[string]any, error) {
	if out, ok, err := a.runMore(docs); ok {
		return out, err
	}
	switch a.kind {
	case "avg", "sum", "min", "max", "value_count", "cardinality":
		return a.metric(docs), nil
	case "stats", "extended_stats", "percentiles", "percentile_ranks":
		return a.statsOf(docs), nil
	case "filters":
		return a.filtersRun(docs)
	case "terms":
		return a.terms(docs)
	case "histogram", "date_histogram":
		return a.histogram(docs)
	case "range", "date_range":
		var buckets []any
		for _, r := range a.ranges {
			var in []map[string]any
			for _, d := range docs {
				for _, v := range a.values(d) {
					f, _ := v.(float64)
					if (r.from == nil || f >= *r.from) && (r.to == nil || f < *r.to) {
						in = append(in, d)
						break
					}
				}
			}
			extra := map[string]any{}
			if r.from != nil {
				extra["from"] = jsonNumber(*r.from)
				if a.kind == "date_range" {
					extra["from_as_string"] = formatDate(*r.from, outputFormat(a.dateFormat()), a.loc)
				}
			}
			if r.to != nil {
				extra["to"] = jsonNumber(*r.to)
				if a.kind == "date_range" {
					extra["to_as_string"] = formatDate(*r.to, outputFormat(a.dateFormat()), a.loc)
				}
			}
			b, err := a.bucket(r.key, in, extra)
			if err != nil {
				return nil, err
			}
			buckets = append(buckets, b)
		}
		return a.bucketsOut(buckets), nil
	}
	return nil, fmt.Errorf("eslite: aggregation kind %s", a.kind)
}

// compensatedSum adds with Kahan–Neumaier compensation, as Elasticsearch's sum and avg
// do: the result does not depend on the order the documents come in (4.12, not
// 4.119999999999999).
func compensatedSum(nums []float64) float64 {
	var sum, c float64
	for _, n := range nums {
		t := sum + n
		if math.Abs(sum) >= math.Abs(n) {
			c += (sum - t) + n
		} else {
			c += (n - t) + sum
		}
		sum = t
	}
	return sum + c
}

func (a *aggDef) metric(docs []map[string]any) map[string]any {
	var nums []float64
	distinct := map[string]bool{}
	count := 0
	for _, d := range docs {
		for _, v := range a.values(d) {
			count++
			distinct[fmt.Sprint(v)] = true
			switch x := v.(type) {
			case float64:
				nums = append(nums, x)
			case bool:
				if x {
					nums = append(nums, 1)
				} else {
					nums = append(nums, 0)
				}
			}
		}
	}
	switch a.kind {
	case "value_count":
		return map[string]any{"value": count}
	case "cardinality":
		return map[string]any{"value": len(distinct)}
	case "sum":
		return map[string]any{"value": compensatedSum(nums)}
	}
	if len(nums) == 0 {
		return map[string]any{"value": nil}
	}
	var v float64
	switch a.kind {
	case "avg":
		v = compensatedSum(nums) / float64(len(nums))
	case "min":
		v = nums[0]
		for _, n := range nums {
			v = math.Min(v, n)
		}
	case "max":
		v = nums[0]
		for _, n := range nums {
			v = math.Max(v, n)
		}
	}
	out := map[string]any{"value": v}
	if a.fi.Type == "date" && (a.kind == "min" || a.kind == "max" || a.kind == "avg") {
		out["value_as_string"] = formatDate(v, outputFormat(a.dateFormat()), nil)
	}
	return out
}

// histKey is the key of the histogram or date_histogram bucket value v falls in.
func (a *aggDef) histKey(v float64) float64 {
	if a.calUnit != "" {
		if a.loc != nil {
			return float64(floorUnitIn(time.UnixMilli(int64(v-a.offset)).In(a.loc), a.calUnit).UnixMilli()) + a.offset
		}
		return float64(floorUnit(time.UnixMilli(int64(v-a.offset)), a.calUnit).UnixMilli()) + a.offset
	}
	if a.loc != nil && a.kind == "date_histogram" {
		// Fixed intervals are rounded in local time too.
		_, off := time.UnixMilli(int64(v)).In(a.loc).Zone()
		o := float64(off) * 1000
		return math.Floor((v+o-a.offset)/a.interval)*a.interval + a.offset - o
	}
	return math.Floor((v-a.offset)/a.interval)*a.interval + a.offset
}

func (a *aggDef) histogram(docs []map[string]any) (map[string]any, error) {
	keyOf := a.histKey
	next := func(k float64) float64 {
		if a.calUnit != "" {
			t := time.UnixMilli(int64(k)).UTC()
			if a.loc != nil {
				t = t.In(a.loc)
			}
			if a.calUnit == "q" {
				return float64(t.AddDate(0, 3, 0).UnixMilli())
			}
			return float64(addUnit(t, a.calUnit, 1).UnixMilli())
		}
		return k + a.interval
	}
	groups := map[float64][]map[string]any{}
	for _, d := range docs {
		seen := map[float64]bool{}
		for _, v := range a.values(d) {
			f, ok := v.(float64)
			if !ok {
				continue
			}
			k := keyOf(f)
			if !seen[k] {
				seen[k] = true
				groups[k] = append(groups[k], d)
			}
		}
	}
	keys := make([]float64, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Float64s(keys)
	if a.bounds != nil && a.minDocCount == 0 {
		lo, hi := keyOf(a.bounds[0]), keyOf(a.bounds[1])
		if len(keys) == 0 || lo < keys[0] {
			keys = append([]float64{lo}, keys...)
		}
		if hi > keys[len(keys)-1] {
			keys = append(keys, hi)
		}
	}
	if a.minDocCount == 0 && len(keys) > 1 {
		var filled []float64
		for k := keys[0]; k <= keys[len(keys)-1] && len(filled) < 100000; k = next(k) {
			filled = append(filled, k)
		}
		keys = filled
	}
	buckets := []any{}
	for _, k := range keys {
		if len(groups[k]) < a.minDocCount {
			continue
		}
		extra := map[string]any{}
		var key any = k
		if a.kind == "date_histogram" {
			key = int64(k)
			// In the aggregation's or the field's format, in the time zone.
			extra["key_as_string"] = formatDate(k, outputFormat(a.dateFormat()), a.loc)
		} else if fm, ok := a.opts["format"].(string); ok && a.kind == "histogram" {
			extra["key_as_string"] = decimalFormat(k, fm)
		}
		b, err := a.bucket(key, groups[k], extra)
		if err != nil {
			return nil, err
		}
		buckets = append(buckets, b)
	}
	return a.bucketsOut(buckets), nil
}

// bucketsOut returns buckets as a list, or keyed by their key_as_string or key.
func (a *aggDef) bucketsOut(buckets []any) map[string]any {
	if out, err := a.applyParentPipelines(buckets); err == nil {
		buckets = out
	}
	if !a.keyed {
		return map[string]any{"buckets": buckets}
	}
	keyed := map[string]any{}
	for _, b := range buckets {
		bm := b.(map[string]any)
		k := bm["key_as_string"]
		if k == nil {
			switch kv := bm["key"].(type) {
			case float64:
				k = esDouble(kv)
			default:
				k = scalarString(kv)
			}
		}
		keyed[fmt.Sprint(k)] = bm
	}
	return map[string]any{"buckets": keyed}
}

// parseDuration reads a time value such as 30m, 1h or 2d as milliseconds.
func parseDuration(s string) (float64, error) {
	m := fixedInterval.FindStringSubmatch(strings.TrimPrefix(s, "+"))
	if m == nil {
		return 0, fmt.Errorf("not a duration")
	}
	n, _ := strconv.Atoi(m[1])
	mult := map[string]float64{"ms": 1, "s": 1e3, "m": 6e4, "h": 3.6e6, "d": 8.64e7}[m[2]]
	f := float64(n) * mult
	if strings.HasPrefix(s, "-") {
		f = -f
	}
	return f, nil
}

// configureStats checks the options of stats, extended_stats and percentiles.
func (a *aggDef) configureStats(allowed map[string]bool) error {
	switch a.kind {
	case "extended_stats":
		allowed["sigma"] = true
		a.sigma = 2
		if v, ok := a.opts["sigma"]; ok {
			f, isNum := toFloat(v)
			if !isNum {
				return badRequest("x_content_parse_exception", "[1:1] [extended_stats] failed to parse field [sigma]")
			}
			if f < 0 {
				return badRequest("illegal_argument_exception", "[sigma] must be greater than or equal to 0. Found [%s] in [%s]", esDouble(f), a.name)
			}
			a.sigma = f
		}
	case "percentiles", "percentile_ranks":
		for _, k := range []string{"percents", "values", "keyed", "tdigest", "hdr"} {
			allowed[k] = true
		}
		if a.kind == "percentile_ranks" {
			arr, ok := a.opts["values"].([]any)
			if !ok || len(arr) == 0 {
				return badRequest("illegal_argument_exception", "[values] must not be null or empty: [%s]", a.name)
			}
			for _, x := range arr {
				f, ok := toFloat(x)
				if _, isStr := x.(string); !ok || isStr {
					return badRequest("x_content_parse_exception", "[percentile_ranks] failed to parse field [values]")
				}
				a.percents = append(a.percents, f)
			}
		}
		if td, ok := a.opts["tdigest"].(map[string]any); ok {
			if c, ok := toFloat(td["compression"]); ok && c < 0 {
				return badRequest("illegal_argument_exception", "[compression] must be greater than or equal to 0. Found [%s] in [%s]", esDouble(c), a.name)
			}
		}
		if hdr, ok := a.opts["hdr"].(map[string]any); ok {
			if v, present := hdr["number_of_significant_value_digits"]; present {
				n, ok := toFloat(v)
				if !ok {
					return badRequest("x_content_parse_exception", "[hdr] failed to parse field [number_of_significant_value_digits]")
				}
				if n < 0 || n > 5 {
					return badRequest("illegal_argument_exception", "[numberOfSignificantValueDigits] must be between 0 and 5")
				}
			}
		}
		if a.kind == "percentile_ranks" {
			if _, ok := a.opts["percents"]; ok {
				return parsingErr("[percentile_ranks] aggregation [%s] does not support [percents]", a.name)
			}
			break
		}
		a.percents = []float64{1, 5, 25, 50, 75, 95, 99}
		if v, ok := a.opts["percents"]; ok {
			arr, isArr := v.([]any)
			if !isArr || len(arr) == 0 {
				return badRequest("illegal_argument_exception", "[percents] must not be empty")
			}
			a.percents = a.percents[:0]
			for _, x := range arr {
				f, ok := toFloat(x)
				if !ok {
					return badRequest("x_content_parse_exception", "[percents] must be numbers")
				}
				a.percents = append(a.percents, f)
			}
		}
	}
	return nil
}

// statsOf computes stats, extended_stats and percentiles over the numeric values of the
// documents. Percentiles are exact, interpolated between the sorted values as a t-digest
// that keeps every value does.
func (a *aggDef) statsOf(docs []map[string]any) map[string]any {
	var nums []float64
	for _, d := range docs {
		for _, v := range a.values(d) {
			switch x := v.(type) {
			case float64:
				nums = append(nums, x)
			case bool:
				if x {
					nums = append(nums, 1)
				} else {
					nums = append(nums, 0)
				}
			}
		}
	}
	if a.kind == "percentiles" || a.kind == "percentile_ranks" {
		sort.Float64s(nums)
		_, hdr := a.opts["hdr"].(map[string]any)
		digits := 3
		if h, ok := a.opts["hdr"].(map[string]any); ok {
			if d, ok := toFloat(h["number_of_significant_value_digits"]); ok {
				digits = int(d)
			}
		}
		value := func(p float64) any {
			switch {
			case a.kind == "percentile_ranks" && hdr:
				return hdrRank(nums, p)
			case a.kind == "percentile_ranks":
				return percentileRank(nums, p)
			case hdr:
				return hdrPercentile(nums, p, digits)
			}
			return percentile(nums, p)
		}
		if k, ok := a.opts["keyed"]; ok && !boolOpt(k) {
			var vals []any
			for _, p := range a.percents {
				vals = append(vals, map[string]any{"key": p, "value": value(p)})
			}
			return map[string]any{"values": vals}
		}
		vals := map[string]any{}
		for _, p := range a.percents {
			vals[esDouble(p)] = value(p)
		}
		return map[string]any{"values": vals}
	}
	n := float64(len(nums))
	out := map[string]any{"count": len(nums), "min": nil, "max": nil, "avg": nil, "sum": 0.0}
	if len(nums) > 0 {
		mn, mx := nums[0], nums[0]
		for _, x := range nums {
			mn, mx = math.Min(mn, x), math.Max(mx, x)
		}
		sum := compensatedSum(nums)
		out["min"], out["max"], out["avg"], out["sum"] = mn, mx, sum/n, sum
	}
	if a.kind == "extended_stats" {
		sq := make([]float64, len(nums))
		for i, x := range nums {
			sq[i] = x * x
		}
		sumSq := compensatedSum(sq)
		out["sum_of_squares"] = sumSq
		if len(nums) == 0 {
			out["sum_of_squares"] = nil
			for _, k := range []string{"variance", "variance_population", "variance_sampling", "std_deviation",
				"std_deviation_population", "std_deviation_sampling"} {
				out[k] = nil
			}
			out["std_deviation_bounds"] = map[string]any{"upper": nil, "lower": nil, "upper_population": nil,
				"lower_population": nil, "upper_sampling": nil, "lower_sampling": nil}
			return out
		}
		sum := compensatedSum(nums)
		avg := sum / n
		variance := math.Max(0, (sumSq-sum*sum/n)/n)
		sampling := math.NaN()
		if n > 1 {
			sampling = math.Max(0, (sumSq-sum*sum/n)/(n-1))
		}
		std := math.Sqrt(variance)
		out["variance"], out["variance_population"] = variance, variance
		out["std_deviation"], out["std_deviation_population"] = std, std
		bounds := map[string]any{
			"upper": avg + a.sigma*std, "lower": avg - a.sigma*std,
			"upper_population": avg + a.sigma*std, "lower_population": avg - a.sigma*std,
		}
		if !math.IsNaN(sampling) {
			ss := math.Sqrt(sampling)
			out["variance_sampling"], out["std_deviation_sampling"] = sampling, ss
			bounds["upper_sampling"], bounds["lower_sampling"] = avg+a.sigma*ss, avg-a.sigma*ss
		}
		out["std_deviation_bounds"] = bounds
	}
	return out
}

// percentile interpolates the p-th percentile of sorted values, each value standing at
// the middle of its rank as in a t-digest of single-value centroids.
func percentile(sorted []float64, p float64) any {
	n := len(sorted)
	if n == 0 {
		return nil
	}
	pos := p / 100 * float64(n)
	if pos <= 0.5 {
		return sorted[0]
	}
	if pos >= float64(n)-0.5 {
		return sorted[n-1]
	}
	i := int(math.Floor(pos - 0.5))
	frac := pos - 0.5 - float64(i)
	return sorted[i] + frac*(sorted[i+1]-sorted[i])
}

// percentileRank is the percentage of the sorted values below x, interpolated between
// the values' centroids as a t-digest that keeps every value does: equal values form one
// centroid whose weight is centred on it, and the first and last segments extend past
// the ends.
func percentileRank(sorted []float64, x float64) any {
	n := len(sorted)
	if n == 0 {
		return nil
	}
	if x >= sorted[n-1] {
		return 100.0
	}
	type centroid struct{ mean, cum, w float64 }
	var cs []centroid
	seen := 0.0
	for i := 0; i < n; {
		j := i
		for j < n && sorted[j] == sorted[i] {
			j++
		}
		w := float64(j - i)
		cs = append(cs, centroid{sorted[i], seen + w/2, w})
		seen += w
		i = j
	}
	if len(cs) == 1 {
		if x < cs[0].mean {
			return 0.0
		}
		return 100.0
	}
	i := 0
	for i < len(cs)-2 && x >= cs[i+1].mean {
		i++
	}
	a, b := cs[i], cs[i+1]
	cum := a.cum + (x-a.mean)/(b.mean-a.mean)*(b.cum-a.cum)
	cum = math.Max(0, math.Min(float64(n), cum))
	return cum / float64(n) * 100
}

// hdrRank is the percentage of the sorted values at or below x, as an HDR histogram
// counts.
func hdrRank(sorted []float64, x float64) any {
	if len(sorted) == 0 {
		return nil
	}
	k := sort.Search(len(sorted), func(i int) bool { return sorted[i] > x })
	return float64(k) / float64(len(sorted)) * 100
}

// hdrPercentile is the p-th percentile of the sorted values as an HDR double histogram
// with digits significant digits reports it: the highest value equivalent to the value
// at that rank, at the resolution the histogram has there. The histogram's unit follows
// the magnitude of the smallest non-zero value.
func hdrPercentile(sorted []float64, p float64, digits int) any {
	n := len(sorted)
	if n == 0 {
		return nil
	}
	rank := int(p/100*float64(n) + 0.5)
	rank = max(1, min(n, rank))
	v := sorted[rank-1]
	subBucketCount := math.Exp2(math.Ceil(math.Log2(2 * math.Pow(10, float64(digits)))))
	minNonZero := 0.0
	for _, x := range sorted {
		if x > 0 {
			minNonZero = x
			break
		}
	}
	if v <= 0 || minNonZero == 0 {
		return v
	}
	unit := math.Exp2(math.Floor(math.Log2(minNonZero))) / (subBucketCount / 2)
	u := math.Floor(v / unit)
	width := 1.0
	if u >= subBucketCount {
		width = math.Exp2(math.Floor(math.Log2(u)) - math.Log2(subBucketCount) + 1)
	}
	lowest := math.Floor(u/width) * width
	return (lowest + width - 1) * unit
}

func (a *aggDef) configureFilters() error {
	for k := range a.opts {
		switch k {
		case "filters", "other_bucket", "other_bucket_key", "keyed":
		default:
			return parsingErr("[filters] aggregation [%s] does not support [%s] in eslite", a.name, k)
		}
	}
	switch fs := a.opts["filters"].(type) {
	case map[string]any:
		if len(fs) == 0 {
			return parsingErr("[filters] cannot be empty.")
		}
		keys := make([]string, 0, len(fs))
		for k := range fs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			a.filters = append(a.filters, aggFilter{key: k, query: fs[k]})
		}
		a.filterNamed = true
	case []any:
		if len(fs) == 0 {
			return parsingErr("[filters] cannot be empty.")
		}
		for i, q := range fs {
			a.filters = append(a.filters, aggFilter{key: strconv.Itoa(i), query: q})
		}
	default:
		return parsingErr("[filters] cannot be empty.")
	}
	if boolOpt(a.opts["other_bucket"]) || a.opts["other_bucket_key"] != nil {
		key := "_other_"
		if k, ok := a.opts["other_bucket_key"].(string); ok {
			key = k
		}
		a.filters = append(a.filters, aggFilter{key: key})
	}
	a.keyed = a.filterNamed
	if k, ok := a.opts["keyed"]; ok {
		a.keyed = boolOpt(k)
	}
	return nil
}

// aggPrep is what the search gives the aggregations that need more than _source:
// query matching (filter, filters), every document (global) and hit rendering
// (top_hits).
type aggPrep struct {
	match  func(q any) (map[string]bool, error)
	docKey func(map[string]any) string
	all    func() ([]map[string]any, error)
	hits   func(docs []map[string]any, opts map[string]any) (map[string]any, error)
	score  func(doc map[string]any) float64
	// nestedOf records where a nested aggregation's document came from.
	nestedOf func(doc, parent map[string]any, path string, offset int)
}

func prepareAggs(defs []*aggDef, p aggPrep) error {
	match, docKey, all := p.match, p.docKey, p.all
	for _, a := range defs {
		a.hits, a.score, a.docKey, a.nestedOf = p.hits, p.score, docKey, p.nestedOf
		significant := a.kind == "significant_terms" || a.kind == "significant_text"
		if a.kind == "global" || (a.kind == "terms" && a.minDocCount == 0) || significant {
			docs, err := all()
			if err != nil {
				return err
			}
			a.allDocs = docs
		}
		if a.kind == "random_sampler" {
			a.docKey = docKey
		}
		if a.kind == "filters" || a.kind == "filter" || a.kind == "adjacency_matrix" || significant {
			a.docKey = docKey
			for i := range a.filters {
				if a.filters[i].query == nil {
					continue
				}
				m, err := match(a.filters[i].query)
				if err != nil {
					return err
				}
				a.filters[i].matched = m
			}
		}
		if err := prepareAggs(a.subs, p); err != nil {
			return err
		}
	}
	return nil
}

func (a *aggDef) filtersRun(docs []map[string]any) (map[string]any, error) {
	inAny := map[int]bool{}
	var list []any
	keyed := map[string]any{}
	for fi, f := range a.filters {
		var in []map[string]any
		for di, d := range docs {
			if f.query == nil {
				if !inAny[di] {
					in = append(in, d)
				}
				continue
			}
			if a.docKey != nil && f.matched[a.docKey(d)] {
				in = append(in, d)
				inAny[di] = true
			}
		}
		_ = fi
		b, err := a.bucket(f.key, in, nil)
		if err != nil {
			return nil, err
		}
		if a.keyed {
			delete(b, "key")
			keyed[f.key] = b
		} else {
			if !a.filterNamed {
				delete(b, "key")
			}
			list = append(list, b)
		}
	}
	if a.keyed {
		return map[string]any{"buckets": keyed}, nil
	}
	return map[string]any{"buckets": list}, nil
}

// loadZone reads a time_zone: an offset such as +01:00 or -0530, or a region name.
func loadZone(tz string) (*time.Location, error) {
	for _, layout := range []string{"-07:00", "-0700", "-07"} {
		if t, err := time.Parse(layout, tz); err == nil {
			_, off := t.Zone()
			return time.FixedZone(tz, off), nil
		}
	}
	return time.LoadLocation(tz)
}

// floorUnitIn rounds t down to a calendar unit in t's own location.
func floorUnitIn(t time.Time, unit string) time.Time {
	loc := t.Location()
	switch unit {
	case "y":
		return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, loc)
	case "q":
		return time.Date(t.Year(), time.Month((int(t.Month())-1)/3*3+1), 1, 0, 0, 0, 0, loc)
	case "M":
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
	case "w":
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	case "d":
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	case "h", "H":
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, loc)
	case "m":
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), 0, 0, loc)
	case "s":
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, loc)
	}
	return t
}

// flattenedKey reports whether f names a key inside a flattened field.
func flattenedKey(fields map[string]fieldInfo, f string) bool {
	for i := strings.LastIndexByte(f, '.'); i > 0; i = strings.LastIndexByte(f[:i], '.') {
		if fi, ok := fields[f[:i]]; ok {
			return fi.ESType == "flattened"
		}
	}
	return false
}
