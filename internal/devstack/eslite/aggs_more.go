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

// Sibling pipeline aggregations: they read the buckets of another aggregation at the
// same level through buckets_path instead of documents.
var pipelineKinds = map[string]bool{"avg_bucket": true, "max_bucket": true, "min_bucket": true, "sum_bucket": true, "stats_bucket": true}

// Parent pipeline aggregations: they add to (or, bucket_sort, reorder) the buckets of
// the multi-bucket aggregation they are declared in.
var movingFnRe = regexp.MustCompile(`^\s*MovingFunctions\.(max|min|sum|unweightedAvg)\(values\)\s*;?\s*$`)

var parentPipelineKinds = map[string]bool{"cumulative_sum": true, "derivative": true, "serial_diff": true, "bucket_sort": true, "moving_fn": true,
	"bucket_script": true, "bucket_selector": true}

// checkParents rejects parent pipelines declared outside a multi-bucket aggregation (or,
// for the histogram-only ones, outside a histogram).
func checkParents(defs []*aggDef, parent *aggDef) error {
	for _, a := range defs {
		if parentPipelineKinds[a.kind] {
			histoOnly := a.kind != "bucket_sort" && a.kind != "bucket_script" && a.kind != "bucket_selector"
			switch {
			case parent == nil && !histoOnly:
				return badRequest("action_request_validation_exception", "Validation Failed: 1: %s aggregation [%s] must be declared inside of another aggregation;", a.kind, a.name)
			case parent == nil:
				return badRequest("action_request_validation_exception", "Validation Failed: 1: %s aggregation [%s] must have a histogram, date_histogram or auto_date_histogram as parent but doesn't have a parent;", a.kind, a.name)
			case histoOnly && parent.kind != "histogram" && parent.kind != "date_histogram" && parent.kind != "auto_date_histogram":
				return badRequest("action_request_validation_exception", "Validation Failed: 1: %s aggregation [%s] must have a histogram, date_histogram or auto_date_histogram as parent;", a.kind, a.name)
			}
		}
		if err := checkRandomSampler(a, parent); err != nil {
			return err
		}
		if err := checkParents(a.subs, a); err != nil {
			return err
		}
	}
	return nil
}

// applyParentPipelines runs the parent pipelines among a's sub-aggregations over its
// buckets.
func (a *aggDef) applyParentPipelines(buckets []any) ([]any, error) {
	for _, p := range a.subs {
		if !parentPipelineKinds[p.kind] {
			continue
		}
		if p.kind == "bucket_sort" || p.kind == "bucket_script" || p.kind == "bucket_selector" {
			var err error
			if p.kind == "bucket_sort" {
				buckets, err = p.bucketSort(buckets)
			} else {
				buckets, err = p.bucketScript(buckets)
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		path, _ := p.opts["buckets_path"].(string)
		vals := make([]*float64, len(buckets))
		for i, b := range buckets {
			v, err := bucketMetric(b.(map[string]any), path, path, p.name)
			if err != nil {
				return nil, err
			}
			vals[i] = v
		}
		lag := 1
		if p.kind == "serial_diff" {
			if l, ok := toFloat(p.opts["lag"]); ok {
				lag = int(l)
			}
		}
		sum := 0.0
		for i, b := range buckets {
			bm := b.(map[string]any)
			switch p.kind {
			case "cumulative_sum":
				if vals[i] != nil {
					sum += *vals[i]
				}
				bm[p.name] = map[string]any{"value": sum}
			case "moving_fn":
				w, _ := toFloat(p.opts["window"])
				var win []float64
				for j := max(0, i-int(w)); j < i; j++ {
					if vals[j] != nil {
						win = append(win, *vals[j])
					}
				}
				bm[p.name] = map[string]any{"value": movingFn(p.opts["_fn"].(string), win)}
			case "serial_diff", "derivative":
				if i < lag || vals[i] == nil || vals[i-lag] == nil {
					continue
				}
				bm[p.name] = map[string]any{"value": *vals[i] - *vals[i-lag]}
			}
		}
	}
	return buckets, nil
}

// bucketSort sorts buckets by the sort clauses' paths and keeps from..from+size.
func (a *aggDef) bucketSort(buckets []any) ([]any, error) {
	type key struct {
		path string
		desc bool
	}
	var keys []key
	for _, c := range clauses(a.opts["sort"]) {
		switch t := c.(type) {
		case string:
			keys = append(keys, key{t, false})
		case map[string]any:
			for f, o := range t {
				desc := false
				if om, ok := o.(map[string]any); ok {
					desc = strings.EqualFold(scalarString(om["order"]), "desc")
				} else {
					desc = strings.EqualFold(scalarString(o), "desc")
				}
				keys = append(keys, key{f, desc})
			}
		}
	}
	vals := make(map[int][]*float64, len(buckets))
	for i, b := range buckets {
		for _, k := range keys {
			var v *float64
			if k.path == "_key" {
				if f, ok := toFloat(b.(map[string]any)["key"]); ok {
					v = &f
				}
			} else {
				var err error
				if v, err = bucketMetric(b.(map[string]any), k.path, k.path, a.name); err != nil {
					return nil, err
				}
			}
			vals[i] = append(vals[i], v)
		}
	}
	idx := make([]int, len(buckets))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(x, y int) bool {
		for ki, k := range keys {
			a, b := vals[idx[x]][ki], vals[idx[y]][ki]
			switch {
			case a == nil && b == nil:
				continue
			case a == nil:
				return false
			case b == nil:
				return true
			case *a == *b:
				continue
			}
			return (*a < *b) != k.desc
		}
		return false
	})
	out := make([]any, 0, len(buckets))
	for _, i := range idx {
		out = append(out, buckets[i])
	}
	from, _ := toFloat(a.opts["from"])
	if int(from) >= len(out) {
		return []any{}, nil
	}
	out = out[int(from):]
	if size, ok := toFloat(a.opts["size"]); ok && int(size) < len(out) {
		out = out[:int(size)]
	}
	return out, nil
}

// configureMore checks the options of the aggregations that configure does not know:
// pipelines, weighted_avg, rare_terms, filter and global. It reports whether a.kind is
// one of them.
// mappedOrUnmapped is field f's mapping; for _index, a keyword read from the
// document's identity; for a key under a flattened field, a keyword; else an unmapped
// field, which aggregates nothing, as in Elasticsearch.
func mappedOrUnmapped(fields map[string]fieldInfo, f string) fieldInfo {
	if fi, ok := fields[f]; ok {
		return fi
	}
	switch {
	case f == "_index":
		return fieldInfo{Type: "keyword", Src: f, ESType: f}
	case flattenedKey(fields, f):
		return fieldInfo{Type: "keyword", Src: f, ESType: "keyword"}
	}
	return fieldInfo{Type: "unmapped", Src: f}
}

// fieldOption reads the field an aggregation requires: its name, its mapping (or an
// unmapped field) and the missing value.
func (a *aggDef) fieldOption(fields map[string]fieldInfo) error {
	f, _ := a.opts["field"].(string)
	if f == "" {
		return parsingErr("Required one of fields [field, script], but none were specified in [%s] aggregation [%s]", a.kind, a.name)
	}
	if f == "_id" {
		return idFielddataErr()
	}
	a.field, a.fi, a.missing = f, mappedOrUnmapped(fields, f), a.opts["missing"]
	return nil
}

func (a *aggDef) configureMore(fields map[string]fieldInfo) (bool, error) {
	switch {
	case pipelineKinds[a.kind]:
		for k, v := range a.opts {
			switch k {
			case "buckets_path", "gap_policy", "format":
				if _, ok := v.(string); !ok {
					return true, parsingErr("[%s] aggregation [%s]: [%s] must be a string", a.kind, a.name, k)
				}
			default:
				return true, parsingErr("[%s] aggregation [%s] does not support [%s]", a.kind, a.name, k)
			}
		}
		if _, ok := a.opts["buckets_path"]; !ok {
			return true, parsingErr("Required parameter [buckets_path] not specified in [%s]", a.name)
		}
		switch gp, _ := a.opts["gap_policy"].(string); gp {
		case "", "skip", "insert_zeros", "keep_values":
		default:
			return true, parsingErr("[%s] aggregation [%s]: unknown gap_policy [%s]", a.kind, a.name, gp)
		}
		return true, nil
	case parentPipelineKinds[a.kind]:
		if a.kind == "bucket_script" || a.kind == "bucket_selector" {
			return true, a.configureBucketScript()
		}
		if a.kind == "moving_fn" {
			if w, ok := toFloat(a.opts["window"]); !ok || w <= 0 || w != math.Trunc(w) {
				return true, badRequest("illegal_argument_exception", "[window] must be a positive, non-zero integer.")
			}
			src := scalarString(a.opts["script"])
			if m, ok := a.opts["script"].(map[string]any); ok {
				src = scalarString(m["source"])
			}
			if !movingFnRe.MatchString(src) {
				return true, parsingErr("[moving_fn] aggregation [%s]: eslite only runs MovingFunctions.max, min, sum and unweightedAvg over values, not [%s]", a.name, src)
			}
			a.opts["_fn"] = movingFnRe.FindStringSubmatch(src)[1]
			return true, nil
		}
		if a.kind == "bucket_sort" {
			for k := range a.opts {
				if k != "sort" && k != "from" && k != "size" && k != "gap_policy" {
					return true, parsingErr("[bucket_sort] aggregation [%s] does not support [%s]", a.name, k)
				}
			}
			return true, nil
		}
		if _, ok := a.opts["buckets_path"].(string); !ok {
			return true, parsingErr("Required parameter [buckets_path] not specified in [%s]", a.name)
		}
		if l, ok := a.opts["lag"]; ok {
			if n, isNum := toFloat(l); !isNum || n <= 0 {
				return true, badRequest("illegal_argument_exception", "[lag] must be a positive integer: [%s]", a.name)
			}
		}
		return true, nil
	case a.kind == "weighted_avg":
		for k := range a.opts {
			if k != "value" && k != "weight" && k != "format" && k != "value_type" {
				return true, parsingErr("[weighted_avg] aggregation [%s] does not support [%s]", a.name, k)
			}
		}
		for _, side := range []string{"value", "weight"} {
			m, ok := a.opts[side].(map[string]any)
			if !ok {
				return true, parsingErr("[weighted_avg] aggregation [%s]: [%s] must be an object with a field", a.name, side)
			}
			f, _ := m["field"].(string)
			if f == "" {
				return true, parsingErr("[weighted_avg] aggregation [%s]: [%s.field] is required", a.name, side)
			}
			fi := mappedOrUnmapped(fields, f)
			if fi.Type == "keyword" || fi.Type == "text" {
				return true, badRequest("illegal_argument_exception", "Field [%s] of type [%s] is not supported for aggregation [weighted_avg]", f, fi.ESType)
			}
			a.weighted = append(a.weighted, &aggDef{name: side, kind: "avg", field: f, fi: fi, missing: m["missing"]})
		}
		return true, nil
	case a.kind == "rare_terms":
		if err := a.fieldOption(fields); err != nil {
			return true, err
		}
		if a.fi.Type == "text" && !a.fi.Fielddata {
			return true, badRequest("illegal_argument_exception", "Text fields are not optimised for operations that require per-document field data like aggregations and sorting, so these operations are disabled by default. Please use a keyword field instead. Alternatively, set fielddata=true on [%s] in order to load field data by uninverting the inverted index.", a.field)
		}
		a.size = 1
		for k, v := range a.opts {
			switch k {
			case "field", "missing", "format", "precision", "threshold", "value_type":
			case "max_doc_count":
				n, ok := toFloat(v)
				if !ok || n < 1 || n != math.Trunc(n) {
					return true, badRequest("illegal_argument_exception", "[maxDocCount] must be greater than 0. Found [%v] in [%s]", v, a.name)
				}
				if n > 100 {
					return true, badRequest("illegal_argument_exception", "[maxDocCount] must be smaller than or equal to 100. Found [%v] in [%s]", v, a.name)
				}
				a.size = int(n)
			case "include", "exclude":
				if err := a.addTermFilter(k, v); err != nil {
					return true, err
				}
			default:
				return true, parsingErr("[rare_terms] aggregation [%s] does not support [%s] in eslite", a.name, k)
			}
		}
		return true, nil
	case a.kind == "adjacency_matrix":
		fs, ok := a.opts["filters"].(map[string]any)
		if !ok || len(fs) == 0 {
			return true, badRequest("illegal_argument_exception", "[filters] must not be empty in [%s]", a.name)
		}
		for k := range a.opts {
			if k != "filters" && k != "separator" {
				return true, parsingErr("[adjacency_matrix] aggregation [%s] does not support [%s]", a.name, k)
			}
		}
		names := make([]string, 0, len(fs))
		for n := range fs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			a.filters = append(a.filters, aggFilter{key: n, query: fs[n]})
		}
		return true, nil
	case a.kind == "filter":
		// The options are the query itself.
		a.filters = []aggFilter{{query: a.opts}}
		return true, nil
	case a.kind == "top_hits":
		for k, v := range a.opts {
			switch k {
			case "from", "size":
				if n, ok := toFloat(v); !ok || n < 0 {
					return true, badRequest("illegal_argument_exception", "[%s] must be a non-negative number in [%s]", k, a.name)
				}
			case "sort", "_source", "highlight", "explain", "stored_fields", "docvalue_fields", "fields", "version",
				"seq_no_primary_term", "track_scores", "script_fields":
			default:
				return true, parsingErr("[top_hits] aggregation [%s] does not support [%s]", a.name, k)
			}
		}
		return true, nil
	case a.kind == "date_range":
		if err := a.fieldOption(fields); err != nil {
			return true, err
		}
		if a.fi.Type != "date" && a.fi.Type != "unmapped" {
			return true, badRequest("illegal_argument_exception", "Field [%s] of type [%s] is not supported for aggregation [date_range]", a.field, a.fi.ESType)
		}
		for k := range a.opts {
			switch k {
			case "field", "ranges", "keyed", "missing", "format":
			case "time_zone":
				loc, err := loadZone(scalarString(a.opts[k]))
				if err != nil {
					return true, parsingErr("[date_range] aggregation [%s]: time_zone [%v] is not known", a.name, a.opts[k])
				}
				a.loc = loc
			default:
				return true, parsingErr("[date_range] aggregation [%s] does not support [%s]", a.name, k)
			}
		}
		a.keyed = boolOpt(a.opts["keyed"])
		rs, ok := a.opts["ranges"].([]any)
		if !ok || len(rs) == 0 {
			return true, badRequest("illegal_argument_exception", "No [ranges] specified for the [%s] aggregation", a.name)
		}
		now := time.Now()
		format := a.dateFormat()
		for _, r := range rs {
			rm, _ := r.(map[string]any)
			var ar aggRange
			for k, v := range rm {
				if v == nil {
					continue
				}
				switch k {
				case "from", "to":
					// Bounds read in the aggregation's or the field's format and time zone.
					t, err := parseDateIn(v, format, a.loc)
					if s, isStr := v.(string); err != nil || (isStr && (strings.HasPrefix(s, "now") || strings.Contains(s, "||"))) {
						t, err = parseDateMathFormat(v, now, false, format)
					}
					if err != nil {
						return true, badRequest("parse_exception", "failed to parse date field [%v] in [date_range] aggregation [%s]", v, a.name)
					}
					ms := float64(t.UnixMilli())
					if k == "from" {
						ar.from = &ms
					} else {
						ar.to = &ms
					}
				case "key":
					ar.key = scalarString(v)
				default:
					return true, parsingErr("[date_range] aggregation [%s]: unknown range key [%s]", a.name, k)
				}
			}
			if ar.key == "" {
				f, t := "*", "*"
				if ar.from != nil {
					f = formatDate(*ar.from, outputFormat(format), a.loc)
				}
				if ar.to != nil {
					t = formatDate(*ar.to, outputFormat(format), a.loc)
				}
				ar.key = f + "-" + t
			}
			a.ranges = append(a.ranges, ar)
		}
		sortRanges(a.ranges)
		return true, nil
	case a.kind == "composite":
		return true, a.configureComposite(fields)
	case a.kind == "significant_terms" || a.kind == "significant_text":
		return true, a.configureSignificant(fields)
	case a.kind == "geohash_grid" || a.kind == "geotile_grid":
		return true, a.configureGeoGrid(fields)
	case a.kind == "geo_bounds" || a.kind == "geo_centroid":
		return true, a.configureGeoMetric(fields)
	case a.kind == "top_metrics":
		return true, a.configureTopMetrics(fields)
	case a.kind == "auto_date_histogram":
		return true, a.configureAutoDate(fields)
	case a.kind == "matrix_stats":
		return true, a.configureMatrixStats(fields)
	case a.kind == "variable_width_histogram":
		return true, a.configureVariableWidth(fields)
	case a.kind == "random_sampler":
		return true, a.configureRandomSampler()
	case a.kind == "ip_range" || a.kind == "ip_prefix":
		if err := a.fieldOption(fields); err != nil {
			return true, err
		}
		if a.kind == "ip_prefix" {
			return true, a.configureIPPrefix()
		}
		return true, a.configureIPRange()
	case a.kind == "sampler" || a.kind == "diversified_sampler":
		a.size = 100
		a.minDocCount = 1
		for k, v := range a.opts {
			switch {
			case k == "shard_size" || (k == "max_docs_per_value" && a.kind == "diversified_sampler"):
				n, ok := toFloat(v)
				if !ok || n < 1 {
					return true, badRequest("illegal_argument_exception", "[%s] must be greater than 0 in [%s]", k, a.name)
				}
				if k == "shard_size" {
					a.size = int(n)
				} else {
					a.minDocCount = int(n)
				}
			case a.kind == "diversified_sampler" && (k == "field" || k == "execution_hint"):
			default:
				return true, parsingErr("[%s] aggregation [%s] does not support [%s]", a.kind, a.name, k)
			}
		}
		if a.kind == "diversified_sampler" {
			f, _ := a.opts["field"].(string)
			if f == "" {
				return true, parsingErr("[diversified_sampler] aggregation [%s] requires a [field]", a.name)
			}
			a.field = f
			fi := mappedOrUnmapped(fields, f)
			a.fi = fi
		}
		return true, nil
	case a.kind == "nested":
		path, _ := a.opts["path"].(string)
		if path == "" {
			return true, parsingErr("[nested] aggregation [%s] requires a [path]", a.name)
		}
		for k := range a.opts {
			if k != "path" {
				return true, parsingErr("[nested] aggregation [%s] does not support [%s]", a.name, k)
			}
		}
		a.field = path
		return true, nil
	case a.kind == "global":
		if len(a.opts) > 0 {
			return true, parsingErr("[global] aggregation [%s] takes no options", a.name)
		}
		return true, nil
	}
	return false, nil
}

// runMore runs the aggregations configureMore configured, except pipelines, which
// runPipeline runs once their siblings ran.
func (a *aggDef) runMore(docs []map[string]any) (map[string]any, bool, error) {
	switch a.kind {
	case "weighted_avg":
		val, wt := a.weighted[0], a.weighted[1]
		var sum, weights float64
		n := 0
		for _, d := range docs {
			ws := wt.values(d)
			if len(ws) > 1 {
				return nil, true, badRequest("aggregation_execution_exception", "Encountered more than one weight for a single document. Use a script to combine multiple weights-per-doc into a single value.")
			}
			vs := val.values(d)
			if len(ws) == 0 || len(vs) == 0 {
				continue
			}
			w, _ := toFloat(ws[0])
			for _, v := range vs {
				f, _ := toFloat(v)
				sum += f * w
				weights += w
				n++
			}
		}
		out := map[string]any{"value": nil}
		if n > 0 && weights != 0 {
			out["value"] = sum / weights
			if fm, ok := a.opts["format"].(string); ok {
				out["value_as_string"] = decimalFormat(sum/weights, fm)
			}
		}
		return out, true, nil
	case "rare_terms":
		var list []*termGroup
		for _, g := range a.termGroups(docs) {
			if len(g.docs) <= a.size {
				list = append(list, g)
			}
		}
		sort.Slice(list, func(i, j int) bool {
			if len(list[i].docs) != len(list[j].docs) {
				return len(list[i].docs) < len(list[j].docs)
			}
			return compareValues(list[i].key, list[j].key) < 0
		})
		buckets := []any{}
		for _, g := range list {
			b, err := a.termBucket(g)
			if err != nil {
				return nil, true, err
			}
			buckets = append(buckets, b)
		}
		return map[string]any{"buckets": buckets}, true, nil
	case "adjacency_matrix":
		// A bucket per filter and per pair of filters, for the non-empty ones, sorted
		// by key.
		sep := "&"
		if s, ok := a.opts["separator"].(string); ok {
			sep = s
		}
		matches := func(f aggFilter, d map[string]any) bool {
			return a.docKey != nil && f.matched[a.docKey(d)]
		}
		var buckets []map[string]any
		add := func(key string, keep func(map[string]any) bool) error {
			var in []map[string]any
			for _, d := range docs {
				if keep(d) {
					in = append(in, d)
				}
			}
			if len(in) == 0 {
				return nil
			}
			b, err := a.bucket(key, in, nil)
			if err == nil {
				buckets = append(buckets, b)
			}
			return err
		}
		for i, f := range a.filters {
			if err := add(f.key, func(d map[string]any) bool { return matches(f, d) }); err != nil {
				return nil, true, err
			}
			for _, g := range a.filters[i+1:] {
				if err := add(f.key+sep+g.key, func(d map[string]any) bool { return matches(f, d) && matches(g, d) }); err != nil {
					return nil, true, err
				}
			}
		}
		sort.SliceStable(buckets, func(i, j int) bool { return buckets[i]["key"].(string) < buckets[j]["key"].(string) })
		out := make([]any, len(buckets))
		for i, b := range buckets {
			out[i] = b
		}
		return map[string]any{"buckets": out}, true, nil
	case "filter":
		var in []map[string]any
		for _, d := range docs {
			if a.docKey != nil && a.filters[0].matched[a.docKey(d)] {
				in = append(in, d)
			}
		}
		b, err := a.bucket(nil, in, nil)
		if err != nil {
			return nil, true, err
		}
		delete(b, "key")
		return b, true, nil
	case "top_hits":
		if a.hits == nil {
			return nil, true, fmt.Errorf("eslite: top_hits [%s] not prepared", a.name)
		}
		out, err := a.hits(docs, a.opts)
		return out, true, err
	case "composite":
		out, err := a.composite(docs)
		return out, true, err
	case "significant_terms", "significant_text":
		out, err := a.significant(docs)
		return out, true, err
	case "geohash_grid", "geotile_grid":
		out, err := a.geoGrid(docs)
		return out, true, err
	case "geo_bounds", "geo_centroid":
		return a.geoMetric(docs), true, nil
	case "top_metrics":
		return a.topMetricsRun(docs), true, nil
	case "auto_date_histogram":
		out, err := a.autoDateHistogram(docs)
		return out, true, err
	case "matrix_stats":
		return a.matrixStats(docs), true, nil
	case "variable_width_histogram":
		out, err := a.variableWidth(docs)
		return out, true, err
	case "random_sampler":
		out, err := a.randomSampler(docs)
		return out, true, err
	case "ip_prefix":
		out, err := a.ipPrefixRun(docs)
		return out, true, err
	case "ip_range":
		out, err := a.ipRangeRun(docs)
		return out, true, err
	case "sampler", "diversified_sampler":
		// The best scoring documents (shard_size of them; for diversified_sampler at
		// most max_docs_per_value per value of the field).
		sorted := append([]map[string]any(nil), docs...)
		if a.score != nil {
			sort.SliceStable(sorted, func(i, j int) bool { return a.score(sorted[i]) > a.score(sorted[j]) })
		}
		var in []map[string]any
		perValue := map[string]int{}
		for _, d := range sorted {
			if len(in) >= a.size {
				break
			}
			if a.kind == "diversified_sampler" {
				k := fmt.Sprint(a.values(d))
				if perValue[k] >= a.minDocCount {
					continue
				}
				perValue[k]++
			}
			in = append(in, d)
		}
		b, err := a.bucket(nil, in, nil)
		if err != nil {
			return nil, true, err
		}
		delete(b, "key")
		return b, true, nil
	case "nested":
		// Each object under the path becomes a document of its own, placed at the
		// path so that the sub-aggregations' field paths reach it.
		var objs []map[string]any
		segs := strings.Split(a.field, ".")
		for _, d := range docs {
			offset := 0
			for _, v := range sourceValues(d, a.field) {
				o, ok := v.(map[string]any)
				if !ok {
					continue
				}
				var doc any = o
				for i := len(segs) - 1; i >= 0; i-- {
					doc = map[string]any{segs[i]: doc}
				}
				objs = append(objs, doc.(map[string]any))
				if a.nestedOf != nil {
					a.nestedOf(doc.(map[string]any), d, a.field, offset)
				}
				offset++
			}
		}
		b, err := a.bucket(nil, objs, nil)
		if err != nil {
			return nil, true, err
		}
		delete(b, "key")
		return b, true, nil
	case "global":
		b, err := a.bucket(nil, a.allDocs, nil)
		if err != nil {
			return nil, true, err
		}
		delete(b, "key")
		return b, true, nil
	}
	return nil, false, nil
}

// bucketValue is one value a buckets_path reads, with the key of its bucket.
type bucketValue struct {
	key   string
	value *float64
}

// resolveBucketsPath reads path ("agg>metric", "agg>metric.stat", "agg>_count",
// "agg.metric") over the sibling results.
func resolveBucketsPath(siblings map[string]any, path, name string) ([]bucketValue, error) {
	first, rest, hasRest := strings.Cut(path, ">")
	if !hasRest {
		// "agg.metric" names the metric of each bucket of agg with a dot.
		first, rest, hasRest = strings.Cut(path, ".")
	}
	r, ok := siblings[first].(map[string]any)
	if !ok {
		return nil, badRequest("action_request_validation_exception", "Validation Failed: 1: No aggregation found for path [%s];", path)
	}
	raw, ok := r["buckets"]
	if !ok || !hasRest {
		return nil, badRequest("illegal_argument_exception", "buckets_path must reference either a number value or a single value numeric metric aggregation, got: [%s] at aggregation [%s]", path, first)
	}
	var buckets []map[string]any
	switch t := raw.(type) {
	case []any:
		for _, b := range t {
			buckets = append(buckets, b.(map[string]any))
		}
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b := t[k].(map[string]any)
			if _, ok := b["key"]; !ok {
				b = mapWith(b, "key", k)
			}
			buckets = append(buckets, b)
		}
	}
	var out []bucketValue
	for _, b := range buckets {
		key := scalarString(b["key_as_string"])
		if b["key_as_string"] == nil {
			key = scalarString(b["key"])
			if f, ok := b["key"].(float64); ok {
				key = esDouble(f)
			}
		}
		v, err := bucketMetric(b, rest, path, name)
		if err != nil {
			return nil, err
		}
		if dc, _ := toFloat(b["doc_count"]); dc == 0 && rest != "_count" {
			// An empty bucket is a gap whatever its metric says, as in Elasticsearch.
			v = nil
		}
		out = append(out, bucketValue{key: key, value: v})
	}
	return out, nil
}

func mapWith(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for kk, vv := range m {
		out[kk] = vv
	}
	out[k] = v
	return out
}

// bucketMetric reads one path element chain such as "v", "v.avg", "f>v" or "_count"
// from a bucket.
func bucketMetric(b map[string]any, path, full, name string) (*float64, error) {
	if path == "_count" {
		f, _ := toFloat(b["doc_count"])
		return &f, nil
	}
	head, rest, deeper := strings.Cut(path, ">")
	if deeper {
		sub, ok := b[head].(map[string]any)
		if !ok {
			return nil, badRequest("illegal_argument_exception", "No aggregation found for path [%s]", full)
		}
		return bucketMetric(sub, rest, full, name)
	}
	agg, stat := head, "value"
	if i := strings.IndexByte(head, '['); i > 0 && strings.HasSuffix(head, "]") {
		agg, stat = head[:i], head[i+1:len(head)-1]
	} else if i := strings.IndexByte(head, '.'); i > 0 {
		agg, stat = head[:i], head[i+1:]
	}
	m, ok := b[agg].(map[string]any)
	if !ok {
		return nil, badRequest("illegal_argument_exception", "No aggregation found for path [%s]", full)
	}
	var v any
	if vals, ok := m["values"].(map[string]any); ok && stat != "value" {
		v = vals[stat]
		if v == nil {
			if f, err := strconv.ParseFloat(stat, 64); err == nil {
				v = vals[esDouble(f)]
			}
		}
	} else if _, isBuckets := m["buckets"]; isBuckets {
		return nil, badRequest("illegal_argument_exception", "buckets_path must reference either a number value or a single value numeric metric aggregation, got: [%s] at aggregation [%s]", full, agg)
	} else if tv, ok := topMetric(m, stat); ok {
		v = tv
	} else {
		var present bool
		v, present = m[stat]
		if !present {
			if stat == "value" {
				return nil, badRequest("illegal_argument_exception", "buckets_path must reference either a number value or a single value numeric metric aggregation, but [%s] contains multiple values. Please specify which to use.", agg)
			}
			return nil, badRequest("illegal_argument_exception", "No aggregation found for path [%s]", full)
		}
	}
	if v == nil {
		return nil, nil
	}
	f, ok := toFloat(v)
	if !ok || math.IsNaN(f) {
		return nil, nil
	}
	return &f, nil
}

// runPipeline computes a sibling pipeline aggregation over the results of its siblings.
func (a *aggDef) runPipeline(siblings map[string]any) (map[string]any, error) {
	path, _ := a.opts["buckets_path"].(string)
	vals, err := resolveBucketsPath(siblings, path, a.name)
	if err != nil {
		return nil, err
	}
	gap, _ := a.opts["gap_policy"].(string)
	var nums []float64
	var keys []string
	for _, bv := range vals {
		switch {
		case bv.value != nil:
			nums = append(nums, *bv.value)
		case gap == "insert_zeros":
			nums = append(nums, 0)
		default:
			continue
		}
		keys = append(keys, bv.key)
	}
	format, _ := a.opts["format"].(string)
	withString := func(out map[string]any, k string, v float64) {
		out[k] = v
		if format != "" {
			s := k + "_as_string"
			if k == "value" {
				s = "value_as_string"
			}
			out[s] = decimalFormat(v, format)
		}
	}
	out := map[string]any{}
	switch a.kind {
	case "sum_bucket":
		withString(out, "value", compensatedSum(nums))
	case "avg_bucket":
		out["value"] = nil
		if len(nums) > 0 {
			withString(out, "value", compensatedSum(nums)/float64(len(nums)))
		}
	case "max_bucket", "min_bucket":
		out["value"] = nil
		best := []string{}
		if len(nums) > 0 {
			v := nums[0]
			for _, n := range nums {
				if (a.kind == "max_bucket" && n > v) || (a.kind == "min_bucket" && n < v) {
					v = n
				}
			}
			for i, n := range nums {
				if n == v {
					best = append(best, keys[i])
				}
			}
			withString(out, "value", v)
		}
		out["keys"] = best
	case "stats_bucket":
		out["count"] = len(nums)
		for _, k := range []string{"min", "max", "avg"} {
			out[k] = nil
		}
		out["sum"] = 0.0
		if len(nums) > 0 {
			mn, mx := nums[0], nums[0]
			for _, n := range nums {
				mn, mx = math.Min(mn, n), math.Max(mx, n)
			}
			sum := compensatedSum(nums)
			withString(out, "min", mn)
			withString(out, "max", mx)
			withString(out, "avg", sum/float64(len(nums)))
			withString(out, "sum", sum)
		}
	}
	return out, nil
}

// movingFn applies one of the MovingFunctions to a window of values; an empty window
// gives null for max, min and unweightedAvg, as NaN renders.
func movingFn(fn string, win []float64) any {
	if fn == "sum" {
		return compensatedSum(win)
	}
	if len(win) == 0 {
		return nil
	}
	v := win[0]
	switch fn {
	case "max":
		for _, x := range win {
			v = math.Max(v, x)
		}
	case "min":
		for _, x := range win {
			v = math.Min(v, x)
		}
	case "unweightedAvg":
		v = compensatedSum(win) / float64(len(win))
	}
	return v
}

// dateFormat is the format an aggregation reads and writes dates in: its own, else its
// field's.
func (a *aggDef) dateFormat() string {
	if f, ok := a.opts["format"].(string); ok {
		return f
	}
	return a.fi.DateFormat
}

// outputFormat is the format dates are written in: the first of a format's
// alternatives.
func outputFormat(format string) string {
	f, _, _ := strings.Cut(format, "||")
	return f
}

// sortRanges orders ranges by from, then to, an open bound first for from and last
// for to, as Elasticsearch orders range buckets.
func sortRanges(rs []aggRange) {
	bound := func(f *float64, open float64) float64 {
		if f == nil {
			return open
		}
		return *f
	}
	sort.SliceStable(rs, func(i, j int) bool {
		fi, fj := bound(rs[i].from, math.Inf(-1)), bound(rs[j].from, math.Inf(-1))
		if fi != fj {
			return fi < fj
		}
		return bound(rs[i].to, math.Inf(1)) < bound(rs[j].to, math.Inf(1))
	})
}

// idFielddataErr is Elasticsearch's refusal to aggregate, sort or score on _id values.
func idFielddataErr() error {
	return badRequest("illegal_argument_exception", "Fielddata access on the _id field is disallowed, you can re-enable it by updating the dynamic cluster setting: indices.id_field_data.enabled")
}
