package eslite

import (
	"math"
	"reflect"
	"sort"
)

func (a *aggDef) configureVariableWidth(fields map[string]fieldInfo) error {
	for k := range a.opts {
		switch k {
		case "field", "buckets", "shard_size", "initial_buffer", "missing", "format":
		default:
			return parsingErr("[variable_width_histogram] unknown field [%s]", k)
		}
	}
	if err := a.fieldOption(fields); err != nil {
		return err
	}
	f := a.field
	if a.fi.Type != "long" && a.fi.Type != "double" && a.fi.Type != "unmapped" {
		return badRequest("illegal_argument_exception", "Field [%s] of type [%s] is not supported for aggregation [variable_width_histogram]", f, a.fi.ESType)
	}
	var err error
	if a.size, err = intParam(a.opts["buckets"], "buckets", 10); err != nil {
		return err
	}
	if a.size <= 0 {
		return badRequest("illegal_argument_exception", "[buckets] must be greater than 0 in [%s]", a.name)
	}
	return nil
}

// variableWidth clusters the values: each distinct value starts as a bucket, then the
// two neighbouring buckets whose centroids are closest merge until `buckets` remain, as
// Elasticsearch's reduction does. A bucket's key is its centroid.
func (a *aggDef) variableWidth(docs []map[string]any) (map[string]any, error) {
	type cluster struct {
		min, max, sum float64
		n             int
		docs          []map[string]any
	}
	byValue := map[float64]*cluster{}
	for _, d := range docs {
		for _, v := range a.values(d) {
			f, ok := v.(float64)
			if !ok {
				continue
			}
			c := byValue[f]
			if c == nil {
				c = &cluster{min: f, max: f}
				byValue[f] = c
			}
			c.sum += f
			c.n++
			c.docs = append(c.docs, d)
		}
	}
	list := make([]*cluster, 0, len(byValue))
	for _, c := range byValue {
		list = append(list, c)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].min < list[j].min })
	centroid := func(c *cluster) float64 { return c.sum / float64(c.n) }
	for len(list) > a.size {
		best, gap := 0, math.Inf(1)
		for i := 0; i+1 < len(list); i++ {
			if g := centroid(list[i+1]) - centroid(list[i]); g < gap {
				best, gap = i, g
			}
		}
		x, y := list[best], list[best+1]
		merged := &cluster{min: math.Min(x.min, y.min), max: math.Max(x.max, y.max), sum: x.sum + y.sum, n: x.n + y.n, docs: append(x.docs, y.docs...)}
		list = append(append(list[:best:best], merged), list[best+2:]...)
	}
	buckets := []any{}
	for _, c := range list {
		// A document with several values in one bucket counts once.
		seen := map[uintptr]bool{}
		var ds []map[string]any
		for _, d := range c.docs {
			if p := reflect.ValueOf(d).Pointer(); !seen[p] {
				seen[p] = true
				ds = append(ds, d)
			}
		}
		b, err := a.bucket(centroid(c), ds, map[string]any{"min": c.min, "max": c.max})
		if err != nil {
			return nil, err
		}
		buckets = append(buckets, b)
	}
	return a.bucketsOut(buckets), nil
}
