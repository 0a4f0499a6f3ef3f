package eslite

import (
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// Geo points are kept in _source only; geo_bounding_box reads them from there.

type geoPoint struct{ lat, lon float64 }

type geoBox struct{ top, left, bottom, right float64 }

func (b geoBox) contains(p geoPoint) bool {
	if p.lat > b.top || p.lat < b.bottom {
		return false
	}
	if b.left <= b.right {
		return p.lon >= b.left && p.lon <= b.right
	}
	// The box crosses the dateline.
	return p.lon >= b.left || p.lon <= b.right
}

// scanQuery matches the documents of the searched indices whose _source keep says yes.
func (c *qctx) scanQuery(keep func(src map[string]any) bool) (query.Query, error) {
	if c.t == nil {
		return bleve.NewMatchNoneQuery(), nil
	}
	docs, err := matchDocs(c.t, bleve.NewMatchAllQuery(), false)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, d := range docs {
		if keep(d.src) {
			ids = append(ids, d.id)
		}
	}
	if len(ids) == 0 {
		return bleve.NewMatchNoneQuery(), nil
	}
	return bleve.NewDocIDQuery(ids), nil
}

func (c *qctx) geoBoundingBoxQ(body any) (query.Query, error) {
	return c.geoPointQuery("geo_bounding_box", body, []string{"type"}, func(spec any, _ map[string]any) (func(geoPoint) bool, error) {
		box, err := parseGeoBox(spec)
		return box.contains, err
	})
}

// geoPointQuery answers a query on one geo_point field: body names the field (with its
// spec) beside the options common to geo queries and extra ones; keep, built from the
// spec and the whole body, says which points match. Documents with a matching point
// match.
func (c *qctx) geoPointQuery(kind string, body any, extra []string, build func(spec any, body map[string]any) (func(geoPoint) bool, error)) (query.Query, error) {
	m, ok := body.(map[string]any)
	if !ok {
		return nil, parsingErr("[%s] query malformed", kind)
	}
	var field string
	var spec any
	for k, v := range m {
		switch {
		case k == "boost" || k == "_name" || k == "validation_method" || k == "ignore_unmapped" || contains(extra, k):
		default:
			if field != "" {
				return nil, parsingErr("[%s] query doesn't support multiple fields, found [%s] and [%s]", kind, field, k)
			}
			field, spec = k, v
		}
	}
	keep, err := build(spec, m)
	if err != nil {
		return nil, err
	}
	fi, ok := c.fields[field]
	if !ok {
		if boolOpt(m["ignore_unmapped"]) {
			return bleve.NewMatchNoneQuery(), nil
		}
		return nil, badRequest("query_shard_exception", "failed to find geo field [%s]", field)
	}
	if fi.ESType != "geo_point" {
		return nil, badRequest("query_shard_exception", "Field [%s] is of unsupported type [%s] for [%s] query", field, fi.ESType, kind)
	}
	q, err := c.scanQuery(func(src map[string]any) bool {
		for _, p := range geoPoints(sourceValues(src, fi.Src)) {
			if keep(p) {
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	return boosted(q, m["boost"]), nil
}

func parseGeoBox(spec any) (geoBox, error) {
	m, ok := spec.(map[string]any)
	if !ok {
		return geoBox{}, parsingErr("[geo_bounding_box] query malformed: expected an object for the field")
	}
	b := geoBox{top: math.NaN(), left: math.NaN(), bottom: math.NaN(), right: math.NaN()}
	corner := func(v any, topLeft bool) (geoPoint, error) {
		if s, ok := v.(string); ok && geohashRe.MatchString(s) && !strings.Contains(s, ",") {
			cell := geohashCell(s)
			if topLeft {
				return geoPoint{cell.top, cell.left}, nil
			}
			return geoPoint{cell.bottom, cell.right}, nil
		}
		ps := geoPoints([]any{v})
		if len(ps) != 1 {
			return geoPoint{}, parsingErr("[geo_bounding_box] query: cannot parse point [%v]", v)
		}
		return ps[0], nil
	}
	for k, v := range m {
		switch k {
		case "top_left", "bottom_right", "top_right", "bottom_left":
			p, err := corner(v, k == "top_left" || k == "top_right")
			if err != nil {
				return b, err
			}
			if strings.HasPrefix(k, "top") {
				b.top = p.lat
			} else {
				b.bottom = p.lat
			}
			if strings.HasSuffix(k, "left") {
				b.left = p.lon
			} else {
				b.right = p.lon
			}
		case "top", "left", "bottom", "right":
			f, ok := toFloat(v)
			if !ok {
				return b, parsingErr("[geo_bounding_box] query: [%s] must be a number", k)
			}
			switch k {
			case "top":
				b.top = f
			case "left":
				b.left = f
			case "bottom":
				b.bottom = f
			case "right":
				b.right = f
			}
		case "wkt":
			mm := bboxRe.FindStringSubmatch(strings.ToUpper(scalarString(v)))
			if mm == nil {
				return b, parsingErr("[geo_bounding_box] query: cannot parse wkt [%v]", v)
			}
			var f [4]float64
			for i := range f {
				f[i], _ = strconv.ParseFloat(mm[i+1], 64)
			}
			b.left, b.right, b.top, b.bottom = f[0], f[1], f[2], f[3]
		case "geohash":
			b = geohashCell(scalarString(v))
		case "geotile":
			parts := strings.Split(scalarString(v), "/")
			if len(parts) != 3 {
				return b, parsingErr("[geo_bounding_box] query: cannot parse geotile [%v]", v)
			}
			z, _ := strconv.Atoi(parts[0])
			x, _ := strconv.Atoi(parts[1])
			y, _ := strconv.Atoi(parts[2])
			n := math.Exp2(float64(z))
			tileLat := func(y float64) float64 { return math.Atan(math.Sinh(math.Pi*(1-2*y/n))) * 180 / math.Pi }
			b = geoBox{top: tileLat(float64(y)), bottom: tileLat(float64(y + 1)), left: float64(x)/n*360 - 180, right: float64(x+1)/n*360 - 180}
		default:
			return b, parsingErr("failed to parse bounding box. unexpected field [%s]", k)
		}
	}
	if math.IsNaN(b.top) || math.IsNaN(b.left) || math.IsNaN(b.bottom) || math.IsNaN(b.right) {
		return b, parsingErr("failed to parse bounding box: top, left, bottom and right are required")
	}
	if b.top < b.bottom {
		return b, badRequest("illegal_argument_exception", "top is below bottom corner: %v vs. %v", b.top, b.bottom)
	}
	return b, nil
}

var (
	bboxRe     = regexp.MustCompile(`^\s*BBOX\s*\(\s*([-\d.eE+]+)\s*,\s*([-\d.eE+]+)\s*,\s*([-\d.eE+]+)\s*,\s*([-\d.eE+]+)\s*\)\s*$`)
	pointRe    = regexp.MustCompile(`^\s*POINT\s*\(\s*([-\d.eE+]+)\s*,?\s+([-\d.eE+]+)\s*\)\s*$|^\s*POINT\s*\(\s*([-\d.eE+]+)\s*,\s*([-\d.eE+]+)\s*\)\s*$`)
	geohashRe  = regexp.MustCompile(`^[0-9b-hjkmnp-z]{1,12}$`)
	latLonRe   = regexp.MustCompile(`^\s*([-\d.eE+]+)\s*,\s*([-\d.eE+]+)\s*$`)
	base32Geo  = "0123456789bcdefghjkmnpqrstuvwxyz"
	geoNumeric = func(v any) bool { _, ok := toFloat(v); _, isStr := v.(string); return ok && !isStr }
)

// geohashCell returns the box a geohash names.
func geohashCell(h string) geoBox {
	lat := [2]float64{-90, 90}
	lon := [2]float64{-180, 180}
	even := true
	for _, ch := range h {
		idx := strings.IndexRune(base32Geo, ch)
		for bit := 4; bit >= 0; bit-- {
			on := idx>>uint(bit)&1 == 1
			r := &lat
			if even {
				r = &lon
			}
			mid := (r[0] + r[1]) / 2
			if on {
				r[0] = mid
			} else {
				r[1] = mid
			}
			even = !even
		}
	}
	return geoBox{top: lat[1], bottom: lat[0], left: lon[0], right: lon[1]}
}

// geoPoints reads the geo points of _source values (arrays flattened or not): {lat, lon} objects, GeoJSON points,
// [lon, lat] arrays, "lat,lon" strings, WKT points and geohashes.
func geoPoints(vals []any) []geoPoint {
	var out []geoPoint
	for i := 0; i < len(vals); i++ {
		v := vals[i]
		if geoNumeric(v) && i+1 < len(vals) && geoNumeric(vals[i+1]) {
			// A flattened [lon, lat] array.
			lon, _ := toFloat(v)
			lat, _ := toFloat(vals[i+1])
			out = append(out, geoPoint{lat, lon})
			i++
			continue
		}
		switch t := v.(type) {
		case map[string]any:
			if coords, ok := t["coordinates"].([]any); ok {
				out = append(out, geoPoints([]any{coords})...)
				continue
			}
			lat, ok1 := toFloat(t["lat"])
			lon, ok2 := toFloat(t["lon"])
			if ok1 && ok2 {
				out = append(out, geoPoint{lat, lon})
			}
		case []any:
			if len(t) >= 2 && geoNumeric(t[0]) && geoNumeric(t[1]) {
				lon, _ := toFloat(t[0])
				lat, _ := toFloat(t[1])
				out = append(out, geoPoint{lat, lon})
				continue
			}
			out = append(out, geoPoints(t)...)
		case string:
			if mm := latLonRe.FindStringSubmatch(t); mm != nil {
				lat, _ := strconv.ParseFloat(mm[1], 64)
				lon, _ := strconv.ParseFloat(mm[2], 64)
				out = append(out, geoPoint{lat, lon})
			} else if mm := pointRe.FindStringSubmatch(strings.ToUpper(t)); mm != nil {
				x, y := mm[1], mm[2]
				if x == "" {
					x, y = mm[3], mm[4]
				}
				lon, _ := strconv.ParseFloat(x, 64)
				lat, _ := strconv.ParseFloat(y, 64)
				out = append(out, geoPoint{lat, lon})
			} else if geohashRe.MatchString(t) {
				c := geohashCell(t)
				out = append(out, geoPoint{(c.top + c.bottom) / 2, (c.left + c.right) / 2})
			}
		}
	}
	return out
}

// geoDistanceQ matches documents with a point within distance of an origin (geo_distance).
func (c *qctx) geoDistanceQ(body any) (query.Query, error) {
	return c.geoPointQuery("geo_distance", body, []string{"distance", "distance_type"}, func(origin any, m map[string]any) (func(geoPoint) bool, error) {
		dist, err := parseDistance(scalarString(m["distance"]))
		if err != nil || m["distance"] == nil {
			return nil, parsingErr("[geo_distance] requires a valid [distance]: %v", m["distance"])
		}
		center := geoPoints([]any{origin})
		if len(center) == 0 {
			return nil, parsingErr("[geo_distance] cannot parse the point [%v]", origin)
		}
		return func(p geoPoint) bool { return haversine(center[0], p) <= dist }, nil
	})
}
