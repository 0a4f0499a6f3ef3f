package eslite

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// compositeSource is one source of a composite aggregation: the values of a field
// (terms), their histogram or date_histogram buckets, or their geotile_grid cells.
type compositeSource struct {
	name          string
	kind          string
	def           *aggDef // the field, its mapping and, for histograms, the interval
	desc          bool
	missingBucket bool
	nullsFirst    bool // where documents without a value sort, with missing_bucket
	format        string
	precision     int // geotile_grid zoom
}

func (a *aggDef) configureComposite(fields map[string]fieldInfo) error {
	for k := range a.opts {
		switch k {
		case "sources", "size", "after":
		default:
			return parsingErr("[composite] aggregation [%s] does not support [%s]", a.name, k)
		}
	}
	raw, ok := a.opts["sources"]
	if !ok {
		return parsingErr("Required [sources]")
	}
	list, _ := raw.([]any)
	if len(list) == 0 {
		return badRequest("illegal_argument_exception", "Composite [sources] cannot be null or empty")
	}
	var err error
	if a.size, err = intParam(a.opts["size"], "size", 10); err != nil {
		return err
	}
	if a.size <= 0 {
		return badRequest("illegal_argument_exception", "[size] must be greater than 0. Found [%d] in [%s]", a.size, a.name)
	}
	seen := map[string]bool{}
	var dups []string
	for _, x := range list {
		m, ok := x.(map[string]any)
		if !ok || len(m) != 1 {
			return parsingErr("[composite] aggregation [%s]: each source must be an object with one name", a.name)
		}
		for name, body := range m {
			if seen[name] {
				dups = append(dups, name)
			}
			seen[name] = true
			src, err := a.compositeSource(name, body, fields)
			if err != nil {
				return err
			}
			a.sources = append(a.sources, src)
		}
	}
	if len(dups) > 0 {
		return badRequest("illegal_argument_exception", "Composite source names must be unique, found duplicates: [%s]", strings.Join(dups, ", "))
	}
	if after, ok := a.opts["after"]; ok {
		return a.parseAfter(after)
	}
	return nil
}

func (a *aggDef) compositeSource(name string, body any, fields map[string]fieldInfo) (*compositeSource, error) {
	m, ok := body.(map[string]any)
	if !ok || len(m) != 1 {
		return nil, parsingErr("[composite] source [%s] must be an object with one source type", name)
	}
	src := &compositeSource{name: name}
	for kind, x := range m {
		opts, ok := x.(map[string]any)
		if !ok {
			return nil, parsingErr("[composite] source [%s] malformed", name)
		}
		src.kind = kind
		inner := map[string]any{}
		for k, v := range opts {
			switch k {
			case "order":
				switch o := strings.ToLower(scalarString(v)); o {
				case "asc", "desc":
					src.desc = o == "desc"
				default:
					return nil, parsingErr("Unknown order [%s] for composite source [%s]", scalarString(v), name)
				}
			case "missing_bucket":
				src.missingBucket = boolOpt(v)
			case "missing_order":
				switch scalarString(v) {
				case "first", "last", "default":
				default:
					return nil, badRequest("illegal_argument_exception", "Unknown missing_order [%s] in composite source [%s]", scalarString(v), name)
				}
			case "format":
				src.format = scalarString(v)
			case "precision":
				if kind != "geotile_grid" {
					return nil, parsingErr("[%s] composite source [%s] does not support [precision]", kind, name)
				}
				p, err := intParam(v, "precision", 7)
				if err != nil {
					return nil, err
				}
				if p < 0 || p > 29 {
					return nil, badRequest("illegal_argument_exception", "Invalid geotile_grid precision of %d. Must be between 0 and 29.", p)
				}
				src.precision = p
			case "script":
				return nil, parsingErr("[composite] source [%s]: scripts are not supported by eslite", name)
			default:
				inner[k] = v
			}
		}
		mo := "default"
		if v, ok := opts["missing_order"]; ok {
			mo = scalarString(v)
		}
		src.nullsFirst = mo == "first" || (mo == "default" && !src.desc)
		if !src.missingBucket && mo != "default" {
			return nil, badRequest("illegal_argument_exception", "missing_order can only be set if missing_bucket is true")
		}
		switch kind {
		case "terms", "histogram", "date_histogram":
			if _, ok := inner["missing"]; ok {
				return nil, badRequest("illegal_argument_exception", "[missing] is not supported in composite sources, use [missing_bucket]")
			}
			if kind == "terms" {
				// Only value_type and field mean anything to a terms source.
				for k := range inner {
					if k != "field" && k != "value_type" {
						return nil, parsingErr("[terms] composite source [%s] does not support [%s]", name, k)
					}
				}
			}
			def := &aggDef{name: name, kind: kind, opts: inner}
			if err := def.configure(fields); err != nil {
				return nil, err
			}
			src.def = def
		case "geotile_grid":
			f, _ := inner["field"].(string)
			if f == "" {
				return nil, parsingErr("Required one of fields [field, script], but none were specified in [geotile_grid] source [%s]", name)
			}
			if _, ok := opts["precision"]; !ok {
				src.precision = 7
			}
			src.def = &aggDef{name: name, kind: kind, field: f, fi: mappedOrUnmapped(fields, f)}
		default:
			return nil, parsingErr("Unknown composite source type [%s] in [%s]", kind, name)
		}
	}
	return src, nil
}

// parseAfter reads the after key: a value per source, in the source's key space.
func (a *aggDef) parseAfter(after any) error {
	m, ok := after.(map[string]any)
	if !ok {
		return parsingErr("[composite] aggregation [%s]: [after] must be an object", a.name)
	}
	if len(m) != len(a.sources) {
		return badRequest("illegal_argument_exception", "[after] has %d value(s) but [sources] has %d", len(m), len(a.sources))
	}
	for _, s := range a.sources {
		v, ok := m[s.name]
		if !ok {
			return badRequest("illegal_argument_exception", "Missing value for [after.%s]", s.name)
		}
		if v == nil {
			if !s.missingBucket {
				return badRequest("illegal_argument_exception", "Invalid value for [after.%s], [missing_bucket] must be enabled", s.name)
			}
			a.after = append(a.after, nil)
			continue
		}
		k, err := s.afterValue(v)
		if err != nil {
			return err
		}
		a.after = append(a.after, k)
	}
	return nil
}

func (s *compositeSource) afterValue(v any) (any, error) {
	switch s.kind {
	case "geotile_grid":
		return scalarString(v), nil
	case "date_histogram":
		if f, ok := toFloat(v); ok {
			if _, isStr := v.(string); !isStr {
				return f, nil
			}
		}
		t, err := parseDateIn(v, s.format, s.def.loc)
		if err != nil {
			return nil, badRequest("illegal_argument_exception", "failed to parse date field [%v] for [after.%s]", v, s.name)
		}
		return float64(t.UnixMilli()), nil
	case "histogram":
		f, ok := toFloat(v)
		if !ok {
			return nil, badRequest("illegal_argument_exception", "Invalid value for [after.%s]: [%v] is not a number", s.name, v)
		}
		return f, nil
	}
	fi := s.def.fi
	if fi.Type == "unmapped" {
		return v, nil
	}
	if fi.Type == "date" {
		if t, err := parseDateIn(v, s.format, nil); err == nil {
			return float64(t.UnixMilli()), nil
		}
	}
	tv, ok := typedValue(fi, v)
	if !ok {
		return nil, badRequest("illegal_argument_exception", "Invalid value for [after.%s]: [%v]", s.name, v)
	}
	return tv, nil
}

// parseDateIn reads a date in a format (a Java pattern or a built-in name) and time
// zone, as a composite's after key gives it.
func parseDateIn(v any, format string, loc *time.Location) (time.Time, error) {
	if loc == nil {
		loc = time.UTC
	}
	if s, ok := v.(string); ok {
		layout := ""
		switch format {
		case "", "iso8601", "strict_date_optional_time", "date_optional_time", "strict_date_optional_time_nanos", "date_optional_time_nanos":
		case "epoch_millis", "epoch_second":
		default:
			layout = javaDateTokens.Replace(format)
		}
		if layout != "" {
			return time.ParseInLocation(layout, s, loc)
		}
		if strings.HasPrefix(format, "epoch_") {
			return parseDateFormat(v, format)
		}
		for _, l := range []string{"2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05", "2006-01-02"} {
			if t, err := time.ParseInLocation(l, s, loc); err == nil {
				return t, nil
			}
		}
	}
	return parseDateFormat(v, format)
}

// formatDate renders epoch millis in a date format: a built-in ISO name, epoch_millis,
// epoch_second or a Java pattern, in loc (UTC when nil).
func formatDate(ms float64, format string, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	t := time.UnixMilli(int64(ms)).In(loc)
	switch format {
	case "", "iso8601", "strict_date_optional_time", "date_optional_time", "strict_date_time", "date_time",
		"strict_date_optional_time_nanos", "date_optional_time_nanos":
		return t.Format("2006-01-02T15:04:05.000Z07:00")
	case "epoch_millis":
		return strconv.FormatInt(int64(ms), 10)
	case "epoch_second":
		return strconv.FormatInt(int64(ms)/1000, 10)
	}
	return t.Format(javaDateTokens.Replace(format))
}

// geotileKey is the z/x/y tile of a point at a zoom, as Elasticsearch's GeoTileUtils
// computes it.
func geotileKey(p geoPoint, zoom int) string {
	tiles := math.Exp2(float64(zoom))
	clamp := func(n float64) int {
		switch {
		case n < 0:
			return 0
		case n >= tiles:
			return int(tiles) - 1
		}
		return int(n)
	}
	x := clamp(math.Floor((p.lon + 180) / 360 * tiles))
	s := math.Sin(p.lat * math.Pi / 180)
	y := clamp(math.Floor((0.5 - math.Log((1+s)/(1-s))/(4*math.Pi)) * tiles))
	return fmt.Sprintf("%d/%d/%d", zoom, x, y)
}

// keys are the source's bucket keys for a document: nil alone when it has none.
func (s *compositeSource) keys(d map[string]any) []any {
	var out []any
	seen := map[string]bool{}
	add := func(k any) {
		if id := fmt.Sprint(k); !seen[id] {
			seen[id] = true
			out = append(out, k)
		}
	}
	switch s.kind {
	case "geotile_grid":
		for _, p := range geoPoints(sourceValues(d, s.def.field)) {
			add(geotileKey(p, s.precision))
		}
	case "histogram", "date_histogram":
		for _, v := range s.def.values(d) {
			if f, ok := v.(float64); ok {
				add(s.def.histKey(f))
			}
		}
	default:
		for _, v := range s.def.values(d) {
			add(v)
		}
	}
	if len(out) == 0 && s.missingBucket {
		out = []any{nil}
	}
	return out
}

// compare orders two keys of the source, documents without a value where missing_order
// puts them.
func (s *compositeSource) compare(x, y any) int {
	switch {
	case x == nil && y == nil:
		return 0
	case x == nil || y == nil:
		c := 1
		if (x == nil) == s.nullsFirst {
			c = -1
		}
		if s.desc {
			// The caller reverses the whole comparison for desc; keep nulls in place.
			c = -c
		}
		return c
	}
	var c int
	if xs, ok := x.(string); ok && s.kind == "geotile_grid" {
		c = compareTiles(xs, y.(string))
	} else {
		c = compareValues(x, y)
	}
	return c
}

// compareTiles orders z/x/y tiles as Elasticsearch's long encoding does: by zoom, x, y.
func compareTiles(a, b string) int {
	pa, pb := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < 3 && i < len(pa) && i < len(pb); i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// render is how a key appears in the response: strings, numbers, booleans, or dates
// as millis unless the source has a format.
func (s *compositeSource) render(k any) any {
	switch t := k.(type) {
	case float64:
		date := s.kind == "date_histogram" || (s.kind == "terms" && s.def.keyType() == "date")
		if date && s.format != "" {
			return formatDate(t, s.format, s.def.loc)
		}
		if s.kind == "histogram" {
			return t
		}
		if s.kind == "terms" && s.def.keyType() == "double" {
			return t
		}
		return jsonNumber(t)
	}
	return k
}

// composite pages through every combination of its sources' keys, in key order,
// size at a time after the after key.
func (a *aggDef) composite(docs []map[string]any) (map[string]any, error) {
	type group struct {
		key  []any
		docs []map[string]any
	}
	groups := map[string]*group{}
	for _, d := range docs {
		combos := [][]any{nil}
		for _, s := range a.sources {
			var next [][]any
			for _, k := range s.keys(d) {
				for _, c := range combos {
					next = append(next, append(append([]any(nil), c...), k))
				}
			}
			combos = next
		}
		for _, c := range combos {
			id := fmt.Sprintf("%#v", c)
			g, ok := groups[id]
			if !ok {
				g = &group{key: c}
				groups[id] = g
			}
			g.docs = append(g.docs, d)
		}
	}
	cmp := func(x, y []any) int {
		for i, s := range a.sources {
			c := s.compare(x[i], y[i])
			if s.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	}
	list := make([]*group, 0, len(groups))
	for _, g := range groups {
		if a.after == nil || cmp(g.key, a.after) > 0 {
			list = append(list, g)
		}
	}
	sort.Slice(list, func(i, j int) bool { return cmp(list[i].key, list[j].key) < 0 })
	if len(list) > a.size {
		list = list[:a.size]
	}
	buckets := []any{}
	var last map[string]any
	for _, g := range list {
		key := map[string]any{}
		for i, s := range a.sources {
			key[s.name] = s.render(g.key[i])
		}
		b, err := a.bucket(key, g.docs, nil)
		if err != nil {
			return nil, err
		}
		buckets = append(buckets, b)
		last = key
	}
	var err error
	if buckets, err = a.applyParentPipelines(buckets); err != nil {
		return nil, err
	}
	out := map[string]any{"buckets": buckets}
	if last != nil {
		out["after_key"] = last
	}
	return out, nil
}

// checkCompositeParent refuses a composite aggregation under any bucket aggregation but
// nested, reverse_nested and filter, as Elasticsearch does.
func checkCompositeParent(parent *aggDef) error {
	switch parent.kind {
	case "nested", "reverse_nested", "filter":
		return nil
	}
	for _, s := range parent.subs {
		if s.kind == "composite" {
			factory := ""
			for _, w := range strings.Split(parent.kind, "_") {
				factory += strings.ToUpper(w[:1]) + w[1:]
			}
			factory += "AggregatorFactory"
			return badRequest("illegal_argument_exception", "[composite] aggregation cannot be used with a parent aggregation of type: [%s]", factory)
		}
	}
	return nil
}
