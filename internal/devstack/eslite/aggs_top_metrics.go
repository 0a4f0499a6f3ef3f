package eslite

import (
	"sort"
	"strings"
)

// configureTopMetrics reads a top_metrics aggregation: one sort (a field, asc or desc,
// or _score), the metrics' fields and size.
func (a *aggDef) configureTopMetrics(fields map[string]fieldInfo) error {
	for k := range a.opts {
		if k != "sort" && k != "metrics" && k != "size" {
			return parsingErr("[top_metrics] unknown field [%s]", k)
		}
	}
	var err error
	if a.size, err = intParam(a.opts["size"], "size", 1); err != nil {
		return err
	}
	if a.size < 1 {
		return badRequest("illegal_argument_exception", "[size] must be more than 0 but was [%d]", a.size)
	}
	sorts := clauses(a.opts["sort"])
	if len(sorts) != 1 {
		return badRequest("illegal_argument_exception", "[top_metrics] only supports sorting on a single field")
	}
	switch s := sorts[0].(type) {
	case string:
		a.topSort = &termsOrder{path: s, desc: s == "_score"}
	case map[string]any:
		for f, v := range s {
			dir := scalarString(v)
			if o, ok := v.(map[string]any); ok {
				dir = scalarString(orDefault(o["order"], "asc"))
			}
			a.topSort = &termsOrder{path: f, desc: strings.EqualFold(dir, "desc")}
		}
	}
	if a.topSort == nil {
		return parsingErr("[top_metrics] malformed [sort]")
	}
	if a.topSort.path != "_score" {
		a.fi = mappedOrUnmapped(fields, a.topSort.path)
	}
	for _, x := range clauses(a.opts["metrics"]) {
		m, _ := x.(map[string]any)
		f, _ := m["field"].(string)
		if f == "" {
			return parsingErr("[top_metrics] each metric needs a [field]")
		}
		fi := mappedOrUnmapped(fields, f)
		if fi.Type == "text" {
			return badRequest("illegal_argument_exception", "Field [%s] of type [%s] is not supported for aggregation [top_metrics]", f, fi.ESType)
		}
		a.topMetrics = append(a.topMetrics, &aggDef{name: f, field: f, fi: fi})
	}
	if len(a.topMetrics) == 0 {
		return parsingErr("[top_metrics] requires [metrics]")
	}
	return nil
}

// topMetrics returns the metrics of the size best documents by the sort; documents
// without a sort value come last.
func (a *aggDef) topMetricsRun(docs []map[string]any) map[string]any {
	type row struct {
		key any
		doc map[string]any
	}
	o := a.topSort
	var rows []row
	for _, d := range docs {
		var key any
		if o.path == "_score" {
			if a.score != nil {
				key = a.score(d)
			}
		} else {
			// A multi-valued field sorts by its smallest value ascending, its largest
			// descending.
			for _, v := range a.values(d) {
				if c := compareValues(v, key); key == nil || (o.desc && c > 0) || (!o.desc && c < 0) {
					key = v
				}
			}
		}
		rows = append(rows, row{key, d})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		ki, kj := rows[i].key, rows[j].key
		if ki == nil || kj == nil {
			return kj == nil && ki != nil
		}
		c := compareValues(ki, kj)
		if o.desc {
			return c > 0
		}
		return c < 0
	})
	if len(rows) > a.size {
		rows = rows[:a.size]
	}
	top := []any{}
	for _, r := range rows {
		metrics := map[string]any{}
		for _, m := range a.topMetrics {
			var v any
			if vals := m.values(r.doc); len(vals) > 0 {
				v = renderValue(m.fi, vals[0])
			}
			metrics[m.name] = v
		}
		top = append(top, map[string]any{"sort": []any{renderValue(a.fi, r.key)}, "metrics": metrics})
	}
	return map[string]any{"top": top}
}

// renderValue shows a typed value as aggregations report it: dates formatted, longs
// as integers, booleans as true or false.
func renderValue(fi fieldInfo, v any) any {
	f, ok := v.(float64)
	switch {
	case !ok:
		return v
	case fi.Type == "date":
		return formatDate(f, outputFormat(fi.DateFormat), nil)
	case fi.Type == "long":
		return jsonNumber(f)
	}
	return f
}

// topMetric reads metric name of the first document of a top_metrics result, for
// ordering and buckets paths.
func topMetric(m map[string]any, name string) (any, bool) {
	top, ok := m["top"].([]any)
	if !ok {
		return nil, false
	}
	if len(top) == 0 {
		return nil, true
	}
	metrics, _ := top[0].(map[string]any)["metrics"].(map[string]any)
	v, ok := metrics[name]
	return v, ok
}

func (a *aggDef) hasTopMetric(name string) bool {
	for _, m := range a.topMetrics {
		if m.name == name {
			return true
		}
	}
	return false
}
