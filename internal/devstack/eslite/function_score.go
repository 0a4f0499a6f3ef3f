package eslite

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/mapping"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"
)

// functionScoreQuery matches what its query matches and scores each document by its
// functions (function_score).
type functionScoreQuery struct {
	inner     query.Query
	funcs     []scoreFunc
	scoreMode string
	boostMode string
	maxBoost  float64
	boost     float64
}

func (q *functionScoreQuery) Searcher(ctx context.Context, i bindex.IndexReader, m mapping.IndexMapping, o bsearch.SearcherOptions) (bsearch.Searcher, error) {
	return q.inner.Searcher(ctx, i, m, o)
}

// scoreFunc is one function of a function_score: a filter it applies under, a weight,
// and what it computes (nil: the weight alone).
type scoreFunc struct {
	filter query.Query
	weight float64
	eval   func(d *scoredDoc) (float64, error)
}

// distanceFeatureQuery matches documents with a value in field and scores them
// boost · pivot / (pivot + distance to origin) (distance_feature).
type distanceFeatureQuery struct {
	query.Query // the documents that have the field
	dist        distanceOf
	pivot       float64 // millis or meters
	boost       float64
}

func (c *qctx) functionScoreQ(body any) (query.Query, error) {
	o, ok := body.(map[string]any)
	if !ok {
		return nil, parsingErr("[function_score] malformed query, expected an object")
	}
	q := &functionScoreQuery{scoreMode: "multiply", boostMode: "multiply", maxBoost: math.MaxFloat32, boost: 1}
	var err error
	if q.inner, err = c.translate(o["query"]); err != nil {
		return nil, err
	}
	var single map[string]any
	for k, v := range o {
		switch k {
		case "query":
		case "functions":
			for _, x := range clauses(v) {
				fm, ok := x.(map[string]any)
				if !ok {
					return nil, parsingErr("[function_score] malformed query, expected an object in [functions]")
				}
				f, err := c.scoreFunction(fm)
				if err != nil {
					return nil, err
				}
				q.funcs = append(q.funcs, f)
			}
		case "score_mode":
			q.scoreMode = scalarString(v)
			if !contains([]string{"multiply", "sum", "avg", "first", "max", "min"}, q.scoreMode) {
				return nil, badRequest("illegal_argument_exception", "illegal score_mode [%s]", q.scoreMode)
			}
		case "boost_mode":
			q.boostMode = scalarString(v)
			if !contains([]string{"multiply", "replace", "sum", "avg", "max", "min"}, q.boostMode) {
				return nil, badRequest("illegal_argument_exception", "function_score illegal boost_mode [%s]", q.boostMode)
			}
		case "max_boost", "boost":
			f, ok := toFloat(v)
			if !ok {
				return nil, parsingErr("[function_score] [%s] must be a number", k)
			}
			if k == "boost" {
				q.boost = f
			} else {
				q.maxBoost = f
			}
		case "weight", "random_score", "field_value_factor", "gauss", "exp", "linear", "script_score":
			if single == nil {
				single = map[string]any{}
			}
			single[k] = v
		case "min_score":
			return nil, parsingErr("[function_score] [min_score] is not supported by eslite")
		default:
			return nil, parsingErr("function_score query does not support [%s]", k)
		}
	}
	if single != nil {
		if len(q.funcs) > 0 {
			return nil, parsingErr("failed to parse [function_score] query. already found [functions] array, now encountering [%s].", firstKey(single))
		}
		f, err := c.scoreFunction(single)
		if err != nil {
			return nil, err
		}
		q.funcs = append(q.funcs, f)
	}
	return q, nil
}

func firstKey(m map[string]any) string {
	for k := range m {
		return k
	}
	return ""
}

// scoreFunction reads one function: weight, random_score, field_value_factor or a
// decay function (gauss, exp, linear), with an optional filter.
func (c *qctx) scoreFunction(fm map[string]any) (scoreFunc, error) {
	f := scoreFunc{weight: 1}
	kinds := 0
	for k, v := range fm {
		switch k {
		case "filter":
			fq, err := c.translate(v)
			if err != nil {
				return f, err
			}
			f.filter = fq
		case "weight":
			w, ok := toFloat(v)
			if !ok {
				return f, parsingErr("[function_score] [weight] must be a number")
			}
			f.weight = w
		case "random_score":
			kinds++
			eval, err := c.randomScore(v)
			if err != nil {
				return f, err
			}
			f.eval = eval
		case "field_value_factor":
			kinds++
			eval, err := c.fieldValueFactor(v)
			if err != nil {
				return f, err
			}
			f.eval = eval
		case "gauss", "exp", "linear":
			kinds++
			eval, err := c.decay(k, v)
			if err != nil {
				return f, err
			}
			f.eval = eval
		case "script_score":
			return f, parsingErr("[function_score] [script_score] is not supported by eslite: it runs no scripts")
		default:
			return f, parsingErr("function_score query does not support [%s]", k)
		}
	}
	if kinds > 1 {
		return f, parsingErr("failed to parse [function_score] query. a function may have only one score function")
	}
	return f, nil
}

func (c *qctx) randomScore(v any) (func(d *scoredDoc) (float64, error), error) {
	o, _ := v.(map[string]any)
	seed := int64(0)
	if s, ok := o["seed"]; ok {
		n, err := strconv.ParseInt(scalarString(s), 10, 64)
		if err != nil {
			seed = int64(murmur3x86_32([]byte(scalarString(s)), 0))
		} else {
			seed = n
		}
	}
	field := scalarString(orDefault(o["field"], ""))
	if field == "_id" {
		return nil, idFielddataErr()
	}
	fi, mapped := c.fields[field]
	if field != "" && field != "_seq_no" && !mapped {
		return nil, badRequest("illegal_argument_exception", "No field found for [%s] in mapping", field)
	}
	return func(d *scoredDoc) (float64, error) {
		var key string
		switch field {
		case "":
			key = d.ix.name + "\x00" + d.id
		case "_seq_no":
			key = strconv.FormatInt(d.seq, 10)
		default:
			key = fmt.Sprint(fieldValues(fi, d.src))
		}
		h := mix64(int64(murmur3x86_32([]byte(key), 0)) ^ seed)
		return float64(h&0xffffff) / (1 << 24), nil
	}, nil
}

var fvfModifiers = map[string]func(float64) float64{
	"none": func(x float64) float64 { return x }, "log": math.Log10,
	"log1p": func(x float64) float64 { return math.Log10(x + 1) }, "log2p": func(x float64) float64 { return math.Log10(x + 2) },
	"ln": math.Log, "ln1p": math.Log1p, "ln2p": func(x float64) float64 { return math.Log(x + 2) },
	"square": func(x float64) float64 { return x * x }, "sqrt": math.Sqrt, "reciprocal": func(x float64) float64 { return 1 / x },
}

func (c *qctx) fieldValueFactor(v any) (func(d *scoredDoc) (float64, error), error) {
	o, _ := v.(map[string]any)
	field, _ := o["field"].(string)
	if field == "" {
		return nil, parsingErr("[field_value_factor] requires a [field]")
	}
	factor := 1.0
	if f, ok := toFloat(o["factor"]); ok {
		factor = f
	}
	mod := fvfModifiers["none"]
	if m, ok := o["modifier"]; ok {
		if mod, ok = fvfModifiers[strings.ToLower(scalarString(m))]; !ok {
			return nil, parsingErr("Illegal modifier: %s", scalarString(m))
		}
	}
	missing, hasMissing := toFloat(o["missing"])
	fi, mapped := c.fields[field]
	return func(d *scoredDoc) (float64, error) {
		var vals []any
		if mapped {
			vals = fieldValues(fi, d.src)
		}
		x := missing
		if len(vals) > 0 {
			x, _ = toFloat(vals[0])
		} else if !hasMissing {
			// Elasticsearch fails the shard with a plain exception here.
			return 0, &esError{status: 500, typ: "exception", reason: "Missing value for field [" + field + "]"}
		}
		r := mod(factor * x)
		if math.IsNaN(r) || math.IsInf(r, 0) {
			return 0, badRequest("illegal_argument_exception", "field value function must not produce negative, infinite or NaN scores: [%v]", r)
		}
		return r, nil
	}, nil
}

var distanceRe = regexp.MustCompile(`^([0-9.eE+-]+)\s*(km|kilometers|m|meters|mi|miles|yd|yards|ft|feet|in|inch|cm|centimeters|mm|millimeters|nmi|NM|nauticalmiles)?$`)

// parseDistance reads a distance such as 2km or 100 (meters) as meters.
func parseDistance(s string) (float64, error) {
	m := distanceRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("failed to parse distance [%s]", s)
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, err
	}
	unit := map[string]float64{"": 1, "m": 1, "meters": 1, "km": 1000, "kilometers": 1000, "mi": 1609.344, "miles": 1609.344,
		"yd": 0.9144, "yards": 0.9144, "ft": 0.3048, "feet": 0.3048, "in": 0.0254, "inch": 0.0254, "cm": 0.01,
		"centimeters": 0.01, "mm": 0.001, "millimeters": 0.001, "nmi": 1852, "NM": 1852, "nauticalmiles": 1852}[m[2]]
	return n * unit, nil
}

// haversine is the distance in meters between two points, on Elasticsearch's earth.
func haversine(a, b geoPoint) float64 {
	const r = 6371008.7714
	la1, la2 := a.lat*math.Pi/180, b.lat*math.Pi/180
	dla, dlo := la2-la1, (b.lon-a.lon)*math.Pi/180
	h := math.Sin(dla/2)*math.Sin(dla/2) + math.Cos(la1)*math.Cos(la2)*math.Sin(dlo/2)*math.Sin(dlo/2)
	return 2 * r * math.Asin(math.Min(1, math.Sqrt(h)))
}

// timeValueMillis reads a time value with Elasticsearch's units, nanos to days, as
// milliseconds.
func timeValueMillis(s string) (float64, error) {
	for _, u := range []struct {
		suffix string
		ms     float64
	}{{"nanos", 1e-6}, {"micros", 1e-3}, {"ms", 1}, {"s", 1e3}, {"m", 6e4}, {"h", 3.6e6}, {"d", 8.64e7}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			if f, err := strconv.ParseFloat(n, 64); err == nil {
				return f * u.ms, nil
			}
		}
	}
	return 0, fmt.Errorf("failed to parse [%s] as a time value", s)
}

// distanceOf reads, for a field's type, how far a document's nearest value is from an
// origin (numbers, dates in millis, geo points in meters); ok is false without a value.
type distanceOf func(d *scoredDoc) (float64, bool)

// origin reads a decay or distance_feature origin and scale for a field.
func (c *qctx) distanceFn(fi fieldInfo, origin any, hasOrigin bool) (distanceOf, error) {
	switch {
	case fi.ESType == "geo_point":
		pts := geoPoints([]any{origin})
		if len(pts) == 0 {
			return nil, parsingErr("failed to parse [origin] [%v] as a geo point", origin)
		}
		o := pts[0]
		return func(d *scoredDoc) (float64, bool) {
			best, ok := math.Inf(1), false
			for _, p := range geoPoints(sourceValues(d.src, fi.Src)) {
				best, ok = math.Min(best, haversine(o, p)), true
			}
			return best, ok
		}, nil
	case fi.Type == "date" || fi.Type == "long" || fi.Type == "double":
		var o float64
		switch {
		case fi.Type == "date" && !hasOrigin:
			o = float64(c.now.UnixMilli())
		case fi.Type == "date":
			t, err := parseDateMathFormat(origin, c.now, false, fi.DateFormat)
			if err != nil {
				return nil, parsingErr("failed to parse date [%v]", origin)
			}
			o = float64(t.UnixMilli())
		default:
			f, ok := toFloat(origin)
			if !ok {
				return nil, parsingErr("[origin] must be a number for field [%s]", fi.Src)
			}
			o = f
		}
		return func(d *scoredDoc) (float64, bool) {
			best, ok := math.Inf(1), false
			for _, v := range fieldValues(fi, d.src) {
				if f, isNum := v.(float64); isNum {
					best, ok = math.Min(best, math.Abs(f-o)), true
				}
			}
			return best, ok
		}, nil
	}
	return nil, badRequest("illegal_argument_exception", "field [%s] is of type [%s], but only numeric, date and geo_point fields are supported", fi.Src, fi.ESType)
}

// scaleOf reads a scale or offset for a field's type: meters, millis or a number.
func scaleOf(fi fieldInfo, v any) (float64, error) {
	if f, ok := toFloat(v); ok {
		if _, isStr := v.(string); !isStr || (fi.Type != "date" && fi.ESType != "geo_point") {
			return f, nil
		}
	}
	s := scalarString(v)
	if fi.ESType == "geo_point" {
		return parseDistance(s)
	}
	if fi.Type == "date" {
		return timeValueMillis(s)
	}
	return 0, fmt.Errorf("failed to parse [%s]", s)
}

func (c *qctx) decay(kind string, v any) (func(d *scoredDoc) (float64, error), error) {
	o, _ := v.(map[string]any)
	var field string
	var spec map[string]any
	for k, x := range o {
		if k == "multi_value_mode" {
			continue
		}
		field = k
		spec, _ = x.(map[string]any)
	}
	fi, ok := c.fields[field]
	if spec == nil || !ok {
		return nil, parsingErr("[%s] unknown field [%s]", kind, field)
	}
	origin, hasOrigin := spec["origin"]
	if !hasOrigin && fi.Type != "date" {
		return nil, badRequest("illegal_argument_exception", "[origin] must be set for numeric and geo fields.")
	}
	dist, err := c.distanceFn(fi, origin, hasOrigin)
	if err != nil {
		return nil, err
	}
	scale, err := scaleOf(fi, spec["scale"])
	if err != nil || scale <= 0 {
		return nil, parsingErr("[%s] requires a positive [scale] for field [%s]", kind, field)
	}
	offset := 0.0
	if x, ok := spec["offset"]; ok {
		if offset, err = scaleOf(fi, x); err != nil {
			return nil, parsingErr("[%s] cannot parse [offset] for field [%s]", kind, field)
		}
	}
	decay := 0.5
	if x, ok := toFloat(spec["decay"]); ok {
		if x <= 0 || x >= 1 {
			return nil, badRequest("illegal_argument_exception", "decay must be in the range [0..1].")
		}
		decay = x
	}
	return func(d *scoredDoc) (float64, error) {
		x, ok := dist(d)
		if !ok {
			return 1, nil
		}
		x = math.Max(0, x-offset)
		switch kind {
		case "linear":
			s := scale / (1 - decay)
			return math.Max(0, (s-x)/s), nil
		case "exp":
			return math.Exp(math.Log(decay) / scale * x), nil
		}
		sigma2 := -scale * scale / (2 * math.Log(decay))
		return math.Exp(-x * x / (2 * sigma2)), nil
	}, nil
}

func (c *qctx) distanceFeatureQ(body any) (query.Query, error) {
	o, ok := body.(map[string]any)
	if !ok {
		return nil, parsingErr("[distance_feature] malformed query")
	}
	field, _ := o["field"].(string)
	fi, mapped := c.fields[field]
	for _, k := range []string{"field", "origin", "pivot"} {
		if _, ok := o[k]; !ok {
			return nil, parsingErr("[distance_feature] requires [%s]", k)
		}
	}
	if !mapped {
		return bleve.NewMatchNoneQuery(), nil
	}
	if fi.Type != "date" && fi.ESType != "geo_point" {
		return nil, badRequest("illegal_argument_exception", "Illegal data type of [%s]! [distance_feature] query can only be run on a date, date_nanos or geo_point field type!", fi.ESType)
	}
	dist, err := c.distanceFn(fi, o["origin"], true)
	if err != nil {
		return nil, err
	}
	pivot, err := scaleOf(fi, o["pivot"])
	if err != nil || pivot <= 0 {
		return nil, parsingErr("[distance_feature] cannot parse [pivot] [%v]", o["pivot"])
	}
	boost := 1.0
	if b, ok := toFloat(o["boost"]); ok {
		if b < 0 {
			return nil, badRequest("illegal_argument_exception", "[distance_feature] query doesn't support negative boost [%v]", o["boost"])
		}
		boost = b
	}
	exists := bleve.NewTermQuery(field)
	exists.SetField(fFieldNames)
	return &distanceFeatureQuery{Query: exists, boost: boost, pivot: pivot, dist: dist}, nil
}

// functionScore is a document's score under a function_score query: its query's score
// combined (boost_mode) with its functions' scores combined (score_mode).
func (s *scorer) functionScore(q *functionScoreQuery, d *scoredDoc, queryScore float64) float64 {
	var vals, weights []float64
	for _, f := range q.funcs {
		if f.filter != nil {
			if _, ok := s.score(f.filter, d); !ok {
				continue
			}
		}
		v := f.weight
		if f.eval != nil {
			x, err := f.eval(d)
			if err != nil && s.err == nil {
				s.err = err
			}
			v = x * f.weight
		}
		vals, weights = append(vals, v), append(weights, f.weight)
	}
	fs := 1.0
	if len(vals) > 0 {
		fs = vals[0]
		for _, v := range vals[1:] {
			switch q.scoreMode {
			case "multiply":
				fs *= v
			case "sum", "avg":
				fs += v
			case "max":
				fs = math.Max(fs, v)
			case "min":
				fs = math.Min(fs, v)
			}
		}
		if q.scoreMode == "avg" {
			fs /= compensatedSum(weights)
		}
	}
	fs = math.Min(fs, q.maxBoost)
	var out float64
	switch q.boostMode {
	case "replace":
		out = fs
	case "sum":
		out = queryScore + fs
	case "avg":
		out = (queryScore + fs) / 2
	case "max":
		out = math.Max(queryScore, fs)
	case "min":
		out = math.Min(queryScore, fs)
	default:
		out = queryScore * fs
	}
	return q.boost * out
}

// boostingQuery matches what positive matches, scoring the documents negative also
// matches by negative_boost times their score (boosting).
type boostingQuery struct {
	positive, negative query.Query
	factor, boost      float64
}

func (q *boostingQuery) Searcher(ctx context.Context, i bindex.IndexReader, m mapping.IndexMapping, o bsearch.SearcherOptions) (bsearch.Searcher, error) {
	return q.positive.Searcher(ctx, i, m, o)
}

func (c *qctx) boostingQ(body any) (query.Query, error) {
	o, ok := body.(map[string]any)
	if !ok {
		return nil, parsingErr("[boosting] malformed query")
	}
	for k := range o {
		if k != "positive" && k != "negative" && k != "negative_boost" && k != "boost" && k != "_name" {
			return nil, parsingErr("[boosting] query does not support [%s]", k)
		}
	}
	if o["positive"] == nil {
		return nil, parsingErr("boosting query requires 'positive' query to be set'")
	}
	if o["negative"] == nil {
		return nil, parsingErr("boosting query requires 'negative' query to be set'")
	}
	f, ok := toFloat(o["negative_boost"])
	if !ok || f < 0 {
		return nil, parsingErr("boosting query requires 'negative_boost' to be set to be a positive value'")
	}
	pos, err := c.translate(o["positive"])
	if err != nil {
		return nil, err
	}
	neg, err := c.translate(o["negative"])
	if err != nil {
		return nil, err
	}
	return &boostingQuery{positive: pos, negative: neg, factor: f, boost: boostValue(o["boost"])}, nil
}
