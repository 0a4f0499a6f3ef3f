package eslite

import (
	"math"
	"sort"
	"strings"
)

// configureGeoGrid reads a geohash_grid or geotile_grid aggregation: the field, the
// precision (a geohash length, 1 to 12, or a tile zoom, 0 to 29) and size.
func (a *aggDef) configureGeoGrid(fields map[string]fieldInfo) error {
	for k := range a.opts {
		switch k {
		case "field", "precision", "size", "shard_size", "bounds":
		default:
			return parsingErr("[%s] aggregation [%s] does not support [%s]", a.kind, a.name, k)
		}
	}
	if err := a.geoField(fields); err != nil {
		return err
	}
	lo, hi, def := 1, 12, 5
	if a.kind == "geotile_grid" {
		lo, hi, def = 0, 29, 7
	}
	p, err := intParam(a.opts["precision"], "precision", def)
	if err != nil {
		return err
	}
	if p < lo || p > hi {
		if a.kind == "geotile_grid" {
			return badRequest("illegal_argument_exception", "Invalid geotile_grid precision of %d. Must be between 0 and 29.", p)
		}
		return badRequest("illegal_argument_exception", "Invalid geohash aggregation precision of %d. Must be between 1 and 12.", p)
	}
	a.prefixLen = p
	if a.size, err = intParam(a.opts["size"], "size", 10000); err != nil {
		return err
	}
	if a.size <= 0 {
		return badRequest("illegal_argument_exception", "[size] must be greater than 0. Found [%d] in [%s]", a.size, a.name)
	}
	return nil
}

// geohash encodes a point as a geohash of n characters.
func geohash(p geoPoint, n int) string {
	lat := [2]float64{-90, 90}
	lon := [2]float64{-180, 180}
	var b strings.Builder
	bit, ch, even := 0, 0, true
	for b.Len() < n {
		r, v := &lat, p.lat
		if even {
			r, v = &lon, p.lon
		}
		mid := (r[0] + r[1]) / 2
		ch <<= 1
		if v >= mid {
			ch |= 1
			r[0] = mid
		} else {
			r[1] = mid
		}
		even = !even
		if bit++; bit == 5 {
			b.WriteByte(base32Geo[ch])
			bit, ch = 0, 0
		}
	}
	return b.String()
}

// geoGrid buckets documents by the cell of each of their points, the fullest cells
// first.
func (a *aggDef) geoGrid(docs []map[string]any) (map[string]any, error) {
	groups := map[string]*termGroup{}
	for _, d := range docs {
		seen := map[string]bool{}
		for _, p := range geoPoints(sourceValues(d, a.fi.Src)) {
			k := geohash(p, a.prefixLen)
			if a.kind == "geotile_grid" {
				k = geotileKey(p, a.prefixLen)
			}
			if seen[k] {
				continue
			}
			seen[k] = true
			if groups[k] == nil {
				groups[k] = &termGroup{key: k}
			}
			groups[k].docs = append(groups[k].docs, d)
		}
	}
	list := make([]*termGroup, 0, len(groups))
	for _, g := range groups {
		list = append(list, g)
	}
	sort.Slice(list, func(i, j int) bool {
		ci, cj := docCount(list[i].docs), docCount(list[j].docs)
		if ci != cj {
			return ci > cj
		}
		return list[i].key.(string) < list[j].key.(string)
	})
	if len(list) > a.size {
		list = list[:a.size]
	}
	buckets := []any{}
	for _, g := range list {
		b, err := a.bucket(g.key, g.docs, nil)
		if err != nil {
			return nil, err
		}
		buckets = append(buckets, b)
	}
	return a.bucketsOut(buckets), nil
}

// configureGeoMetric reads geo_bounds (field, wrap_longitude) or geo_centroid (field).
func (a *aggDef) configureGeoMetric(fields map[string]fieldInfo) error {
	for k := range a.opts {
		if k != "field" && !(k == "wrap_longitude" && a.kind == "geo_bounds") {
			return parsingErr("[%s] aggregation [%s] does not support [%s]", a.kind, a.name, k)
		}
	}
	return a.geoField(fields)
}

// geoMetric computes geo_bounds (the box around every point; with wrap_longitude, the
// narrower of the boxes that do or do not cross the dateline) or geo_centroid (the mean
// point and the number of points).
func (a *aggDef) geoMetric(docs []map[string]any) map[string]any {
	var pts []geoPoint
	for _, d := range docs {
		pts = append(pts, geoPoints(sourceValues(d, a.fi.Src))...)
	}
	if a.kind == "geo_centroid" {
		if len(pts) == 0 {
			return map[string]any{"count": 0}
		}
		lats, lons := make([]float64, len(pts)), make([]float64, len(pts))
		for i, p := range pts {
			lats[i], lons[i] = p.lat, p.lon
		}
		n := float64(len(pts))
		return map[string]any{"location": map[string]any{"lat": compensatedSum(lats) / n, "lon": compensatedSum(lons) / n}, "count": len(pts)}
	}
	if len(pts) == 0 {
		return map[string]any{}
	}
	inf := math.Inf(1)
	top, bottom := -inf, inf
	posLeft, posRight, negLeft, negRight := inf, -inf, inf, -inf
	for _, p := range pts {
		top, bottom = math.Max(top, p.lat), math.Min(bottom, p.lat)
		if p.lon >= 0 {
			posLeft, posRight = math.Min(posLeft, p.lon), math.Max(posRight, p.lon)
		} else {
			negLeft, negRight = math.Min(negLeft, p.lon), math.Max(negRight, p.lon)
		}
	}
	left, right := negLeft, posRight
	switch {
	case math.IsInf(posLeft, 1):
		left, right = negLeft, negRight
	case math.IsInf(negLeft, 1):
		left, right = posLeft, posRight
	case a.opts["wrap_longitude"] == nil || boolOpt(a.opts["wrap_longitude"]):
		if posRight-negLeft > (180-posLeft)-(-180-negRight) {
			left, right = posLeft, negRight
		}
	}
	return map[string]any{"bounds": map[string]any{
		"top_left":     map[string]any{"lat": top, "lon": left},
		"bottom_right": map[string]any{"lat": bottom, "lon": right},
	}}
}

// geoField reads the aggregation's field, which must be a geo_point (or unmapped).
func (a *aggDef) geoField(fields map[string]fieldInfo) error {
	if err := a.fieldOption(fields); err != nil {
		return err
	}
	if a.fi.Type != "unmapped" && a.fi.ESType != "geo_point" {
		return badRequest("illegal_argument_exception", "Field [%s] of type [%s] is not supported for aggregation [%s]", a.field, a.fi.ESType, a.kind)
	}
	return nil
}
