package eslite

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// termsOrder is one criterion of a terms aggregation's order: _count, _key, or a path to
// a sub-aggregation's value ("max", "stats.avg", "filter>max", "filter" for its count).
type termsOrder struct {
	path string
	desc bool
}

// configureTerms reads the options of a terms aggregation beyond field, missing and
// format.
func (a *aggDef) configureTerms(allowed map[string]bool) error {
	for _, k := range []string{"size", "order", "min_doc_count", "shard_size", "shard_min_doc_count", "include", "exclude",
		"value_type", "collect_mode", "execution_hint", "show_term_doc_count_error"} {
		allowed[k] = true
	}
	var err error
	if a.size, err = intParam(a.opts["size"], "size", 10); err != nil {
		return err
	}
	if a.size <= 0 {
		return badRequest("illegal_argument_exception", "[size] must be greater than 0. Found [%d] in [%s]", a.size, a.name)
	}
	if a.minDocCount, err = intParam(a.opts["min_doc_count"], "min_doc_count", 1); err != nil {
		return err
	}
	if a.minDocCount < 0 {
		return badRequest("illegal_argument_exception", "[min_doc_count] must be greater than or equal to 0. Found [%d] in [%s]", a.minDocCount, a.name)
	}
	if cm, ok := a.opts["collect_mode"]; ok {
		// Both modes give the same buckets; breadth_first only defers sub-aggregations.
		if s := scalarString(cm); s != "depth_first" && s != "breadth_first" {
			return badRequest("illegal_argument_exception", "Unknown `collect_mode` [%s], expected one of [depth_first, breadth_first]", s)
		}
	}
	if eh, ok := a.opts["execution_hint"]; ok {
		// A hint on how to collect, which never changes the result.
		switch s := scalarString(eh); s {
		case "map", "global_ordinals", "global_ordinals_hash", "global_ordinals_low_cardinality":
		default:
			return badRequest("illegal_argument_exception", "Unknown `execution_hint`: [%s], expected any of [map, global_ordinals]", s)
		}
	}
	if vt, ok := a.opts["value_type"]; ok {
		if err := a.setValueType(scalarString(vt)); err != nil {
			return err
		}
	}
	for _, k := range []string{"include", "exclude"} {
		if v, ok := a.opts[k]; ok {
			if err := a.addTermFilter(k, v); err != nil {
				return err
			}
		}
	}
	return a.parseTermsOrder()
}

// setValueType applies value_type, the type an unmapped field's missing value and keys
// take (a mapped field keeps its own type).
func (a *aggDef) setValueType(vt string) error {
	types := map[string]string{"string": "keyword", "ip": "keyword", "boolean": "boolean", "date": "date",
		"long": "long", "numeric": "double", "double": "double", "number": "double"}
	t, ok := types[vt]
	if !ok {
		return parsingErr("[%s] aggregation [%s]: unknown value_type [%s]", a.kind, a.name, vt)
	}
	if a.fi.Type == "unmapped" {
		a.valueType = t
	}
	return nil
}

// keyType is the type the aggregation's keys are rendered as.
func (a *aggDef) keyType() string {
	if a.fi.Type == "unmapped" && a.valueType != "" {
		return a.valueType
	}
	return a.fi.Type
}

func (a *aggDef) parseTermsOrder() error {
	a.order = []termsOrder{{path: "_count", desc: true}}
	raw, ok := a.opts["order"]
	if !ok {
		return nil
	}
	var list []any
	switch t := raw.(type) {
	case map[string]any:
		list = []any{t}
	case []any:
		list = t
	default:
		return parsingErr("[%s] aggregation [%s]: [order] must be an object or an array of objects", a.kind, a.name)
	}
	a.order = nil
	for _, x := range list {
		m, ok := x.(map[string]any)
		if !ok || len(m) != 1 {
			return parsingErr("[%s] aggregation [%s]: each [order] must be an object with one key", a.kind, a.name)
		}
		for path, dir := range m {
			d := strings.ToLower(scalarString(dir))
			if d != "asc" && d != "desc" {
				return parsingErr("Unknown terms order direction [%s]", scalarString(dir))
			}
			a.order = append(a.order, termsOrder{path: path, desc: d == "desc"})
		}
	}
	return nil
}

// checkTermsOrder checks, once the sub-aggregations are parsed, that each order path
// leads through single-bucket aggregations to a metric, as Elasticsearch requires.
func (a *aggDef) checkTermsOrder() error {
	for _, o := range a.order {
		if o.path == "_count" || o.path == "_key" {
			continue
		}
		if _, err := a.orderLeaf(o.path); err != nil {
			return err
		}
	}
	return nil
}

// orderLeaf is the sub-aggregation an order path ends at.
func (a *aggDef) orderLeaf(path string) (*aggDef, error) {
	invalid := func(name string) error {
		return badRequest("aggregation_execution_exception", "Invalid aggregation order path [%s]. The provided aggregation [%s] either does not exist, or is a pipeline aggregation and cannot be used to sort the buckets.", path, name)
	}
	cur := a
	steps := orderSteps(path)
	for i, step := range steps {
		name := step
		if j := strings.IndexAny(step, ".["); j > 0 {
			name = step[:j]
		}
		var next *aggDef
		for _, s := range cur.subs {
			if s.name == name && !pipelineKinds[s.kind] && !parentPipelineKinds[s.kind] {
				next = s
			}
		}
		if next == nil {
			return nil, invalid(name)
		}
		if bucketKinds[next.kind] && !singleBucketKinds[next.kind] {
			return nil, badRequest("aggregation_execution_exception", "Buckets can only be sorted on a sub-aggregator path that is built out of zero or more single-bucket aggregations within the path and a final single-bucket or a metrics aggregation at the path end. Sub-path [%s] points to non single-bucket aggregation", step)
		}
		if i < len(steps)-1 && !singleBucketKinds[next.kind] {
			return nil, badRequest("aggregation_execution_exception", "Buckets can only be sorted on a sub-aggregator path that is built out of zero or more single-bucket aggregations within the path and a final single-bucket or a metrics aggregation at the path end.")
		}
		if _, metric, ok := strings.Cut(step, "."); ok && next.kind == "top_metrics" && !next.hasTopMetric(metric) {
			return nil, badRequest("aggregation_execution_exception", "Invalid aggregation order path [%s]. unknown metric [%s]", path, metric)
		}
		cur = next
	}
	return cur, nil
}

// orderSteps splits an order path at its ">" separators, writing a metric named in
// brackets (top_metrics[field]) with a dot (top_metrics.field), its other spelling.
func orderSteps(path string) []string {
	steps := strings.Split(path, ">")
	for i, step := range steps {
		if name, metric, ok := strings.Cut(step, "["); ok && strings.HasSuffix(metric, "]") {
			steps[i] = name + "." + strings.TrimSuffix(metric, "]")
		}
	}
	return steps
}

var singleBucketKinds = map[string]bool{"filter": true, "global": true, "nested": true, "sampler": true, "diversified_sampler": true}

// orderValue is the value a bucket sorts by under a sub-aggregation path: a number,
// or a top_metrics value, which may be a string. An empty metric sorts as
// Elasticsearch's does: max as -∞, min as +∞, others as NaN, which sorts above every
// number.
func (a *aggDef) orderValue(b map[string]any, path string) any {
	leaf, _ := a.orderLeaf(path)
	if leaf != nil && (singleBucketKinds[leaf.kind] || leaf.kind == "top_metrics") {
		steps := orderSteps(path)
		sub := b
		for _, step := range steps[:len(steps)-1] {
			sub, _ = sub[step].(map[string]any)
		}
		name, metric, _ := strings.Cut(steps[len(steps)-1], ".")
		sub, _ = sub[name].(map[string]any)
		if leaf.kind == "top_metrics" {
			if v, _ := topMetric(sub, metric); v != nil {
				return v
			}
			return math.NaN()
		}
		f, _ := toFloat(sub["doc_count"])
		return f
	}
	if v, err := bucketMetric(b, path, path, a.name); err == nil && v != nil {
		return *v
	}
	switch {
	case leaf != nil && leaf.kind == "max":
		return math.Inf(-1)
	case leaf != nil && leaf.kind == "min":
		return math.Inf(1)
	}
	return math.NaN()
}

// compareOrdered compares order values: strings as strings, numbers like Java's
// Double.compare (NaN above everything), strings before numbers.
func compareOrdered(a, b any) int {
	xs, xStr := a.(string)
	ys, yStr := b.(string)
	switch {
	case xStr && yStr:
		return strings.Compare(xs, ys)
	case xStr:
		return -1
	case yStr:
		return 1
	}
	x, _ := toFloat(a)
	y, _ := toFloat(b)
	switch {
	case math.IsNaN(x) && math.IsNaN(y):
		return 0
	case math.IsNaN(x):
		return 1
	case math.IsNaN(y):
		return -1
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// termsBucket is one term's bucket while a terms aggregation sorts them.
type termsBucket struct {
	key    any
	count  int
	bucket map[string]any
}

// sortTerms orders buckets by the aggregation's order, then by key ascending, as
// Elasticsearch breaks ties.
func (a *aggDef) sortTerms(list []termsBucket) {
	vals := make([][]any, len(list))
	for i, tb := range list {
		for _, o := range a.order {
			if o.path != "_count" && o.path != "_key" {
				vals[i] = append(vals[i], a.orderValue(tb.bucket, o.path))
			}
		}
	}
	idx := make([]int, len(list))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(x, y int) bool {
		i, j := idx[x], idx[y]
		n := 0
		for _, o := range a.order {
			var c int
			switch o.path {
			case "_count":
				c = list[i].count - list[j].count
			case "_key":
				c = compareValues(list[i].key, list[j].key)
			default:
				c = compareOrdered(vals[i][n], vals[j][n])
				n++
			}
			if c != 0 {
				return (c < 0) != o.desc
			}
		}
		return compareValues(list[i].key, list[j].key) < 0
	})
	sorted := make([]termsBucket, len(list))
	for k, i := range idx {
		sorted[k] = list[i]
	}
	copy(list, sorted)
}

// termFilter is one include or exclude clause of terms or rare_terms: a set of values, a
// regular expression, or (include only) one partition of the terms' hashes.
type termFilter struct {
	exclude       bool
	set           map[string]bool
	re            *regexp.Regexp
	partition     int
	numPartitions int
}

// addTermFilter reads an include or exclude clause.
func (a *aggDef) addTermFilter(k string, v any) error {
	fi := a.fi
	switch t := v.(type) {
	case string:
		if (fi.Type != "keyword" && fi.Type != "text" && fi.Type != "unmapped") || fi.ESType == "ip" {
			// A shard-level failure in Elasticsearch, hence its 500.
			return &esError{status: 500, typ: "aggregation_execution_exception", reason: fmt.Sprintf("Aggregation [%s] cannot support regular expression style include/exclude settings as they can only be applied to string fields. Use an array of values for include/exclude clauses", a.name)}
		}
		re, err := regexp.Compile("^(?:" + t + ")$")
		if err != nil {
			return badRequest("illegal_argument_exception", "invalid regular expression [%s] in [%s]", t, a.name)
		}
		a.termFilter = append(a.termFilter, termFilter{exclude: k == "exclude", re: re})
	case []any:
		set := map[string]bool{}
		for _, x := range t {
			if tv, ok := typedValue(fi, x); ok && fi.Type != "unmapped" {
				set[fmt.Sprint(tv)] = true
			} else {
				set[scalarString(x)] = true
			}
		}
		a.termFilter = append(a.termFilter, termFilter{exclude: k == "exclude", set: set})
	case map[string]any:
		if k != "include" || a.kind != "terms" {
			return parsingErr("[%s] aggregation [%s]: [%s] must be a string or an array", a.kind, a.name, k)
		}
		n, okN := toFloat(t["num_partitions"])
		p, okP := toFloat(t["partition"])
		if !okN || !okP || len(t) != 2 {
			return badRequest("illegal_argument_exception", "Missing [partition] or [num_partitions] parameter for partition-based include in [%s]", a.name)
		}
		if n < 1 || p < 0 || p >= n {
			return badRequest("illegal_argument_exception", "Invalid partition [%v] of [%v] partitions in [%s]", jsonNumber(p), jsonNumber(n), a.name)
		}
		a.termFilter = append(a.termFilter, termFilter{partition: int(p), numPartitions: int(n)})
	default:
		return parsingErr("[%s] aggregation [%s]: [%s] must be a string or an array", a.kind, a.name, k)
	}
	return nil
}

func (a *aggDef) keepTerm(v any) bool {
	for _, tf := range a.termFilter {
		var hit bool
		switch {
		case tf.numPartitions > 0:
			hit = termPartition(v, tf.numPartitions, a.keyType()) == tf.partition
		case tf.re != nil:
			hit = tf.re.MatchString(scalarString(v))
		default:
			hit = tf.set[fmt.Sprint(v)]
		}
		if hit == tf.exclude {
			return false
		}
	}
	return true
}

// termPartition is the partition a term falls in, by Elasticsearch's hashes: murmur3 of
// the UTF-8 bytes (seed 31) for strings, BitMixer.mix64 of the value for longs (and of
// its sortable bits for doubles), each modulo the number of partitions.
func termPartition(v any, n int, typ string) int {
	var h int64
	switch t := v.(type) {
	case string:
		h = int64(murmur3x86_32([]byte(t), 31))
	case float64:
		bits := int64(t)
		if typ == "double" {
			bits = int64(math.Float64bits(t))
			bits ^= (bits >> 63) & 0x7fffffffffffffff
		}
		h = mix64(bits)
	case bool:
		if t {
			h = mix64(1)
		} else {
			h = mix64(0)
		}
	default:
		h = int64(murmur3x86_32([]byte(scalarString(v)), 31))
	}
	m := h % int64(n)
	if m < 0 {
		m += int64(n)
	}
	return int(m)
}

// murmur3x86_32 is MurmurHash3's 32-bit x86 variant, as Lucene's StringHelper has it.
func murmur3x86_32(data []byte, seed uint32) int32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	h := seed
	n := len(data) &^ 3
	for i := 0; i < n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= c1
		k = k<<15 | k>>17
		k *= c2
		h ^= k
		h = h<<13 | h>>19
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch len(data) & 3 {
	case 3:
		k = uint32(data[n+2]) << 16
		fallthrough
	case 2:
		k |= uint32(data[n+1]) << 8
		fallthrough
	case 1:
		k |= uint32(data[n])
		k *= c1
		k = k<<15 | k>>17
		k *= c2
		h ^= k
	}
	h ^= uint32(len(data))
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return int32(h)
}

// mix64 is HPPC's BitMixer.mix64.
func mix64(z int64) int64 {
	u := uint64(z)
	u = (u ^ (u >> 32)) * 0x4cd6944c5cc20b6d
	u = (u ^ (u >> 29)) * 0xfc12c5b19d3259e9
	return int64(u ^ (u >> 32))
}

// termGroup is the documents that hold one term.
type termGroup struct {
	key  any
	docs []map[string]any
}

// termGroups groups documents by each value of the field the include and exclude
// clauses keep; a document with a value twice counts once.
func (a *aggDef) termGroups(docs []map[string]any) map[string]*termGroup {
	groups := map[string]*termGroup{}
	for _, d := range docs {
		seen := map[string]bool{}
		for _, v := range a.values(d) {
			k := fmt.Sprint(v)
			if seen[k] || !a.keepTerm(v) {
				continue
			}
			seen[k] = true
			g, ok := groups[k]
			if !ok {
				g = &termGroup{key: v}
				groups[k] = g
			}
			g.docs = append(g.docs, d)
		}
	}
	return groups
}

// termBucket renders a term's bucket: numbers as JSON numbers (dates with their
// key_as_string), booleans as 1 or 0 with "true" or "false".
func (a *aggDef) termBucket(g *termGroup) (map[string]any, error) {
	var key any = g.key
	extra := map[string]any{}
	switch k := g.key.(type) {
	case float64:
		key = jsonNumber(k)
		if a.keyType() == "date" {
			extra["key_as_string"] = formatDate(k, outputFormat(a.dateFormat()), nil)
		}
	case bool:
		key = 0
		if k {
			key = 1
		}
		extra["key_as_string"] = strconv.FormatBool(k)
	}
	return a.bucket(key, g.docs, extra)
}

// terms buckets documents by term.
func (a *aggDef) terms(docs []map[string]any) (map[string]any, error) {
	groups := a.termGroups(docs)
	if a.minDocCount == 0 {
		// Every term of the searched indexes has a bucket, matched or not.
		for k, g := range a.termGroups(a.allDocs) {
			if _, ok := groups[k]; !ok {
				groups[k] = &termGroup{key: g.key}
			}
		}
	}
	list := make([]termsBucket, 0, len(groups))
	for _, g := range groups {
		n := docCount(g.docs)
		if n < a.minDocCount {
			continue
		}
		b, err := a.termBucket(g)
		if err != nil {
			return nil, err
		}
		list = append(list, termsBucket{key: g.key, count: n, bucket: b})
	}
	a.sortTerms(list)
	other := 0
	if len(list) > a.size {
		for _, tb := range list[a.size:] {
			other += tb.count
		}
		list = list[:a.size]
	}
	buckets := make([]any, 0, len(list))
	for _, tb := range list {
		buckets = append(buckets, tb.bucket)
	}
	var err error
	if buckets, err = a.applyParentPipelines(buckets); err != nil {
		return nil, err
	}
	return map[string]any{"doc_count_error_upper_bound": 0, "sum_other_doc_count": other, "buckets": buckets}, nil
}
