package eslite

import (
	"strconv"
	"time"
)

// autoRounding is one of auto_date_histogram's roundings: a calendar unit (as
// floorUnit names it) and the multiples of it that may make one bucket.
type autoRounding struct {
	unit, name string
	inners     []int
}

// autoRoundings are Elasticsearch's, finest first.
var autoRoundings = []autoRounding{
	{"s", "second", []int{1, 5, 10, 30}}, {"m", "minute", []int{1, 5, 10, 30}}, {"h", "hour", []int{1, 3, 12}},
	{"d", "day", []int{1, 7}}, {"M", "month", []int{1, 3}}, {"y", "year", []int{1, 5, 10, 20, 50, 100}},
}

func (a *aggDef) configureAutoDate(fields map[string]fieldInfo) error {
	for k := range a.opts {
		switch k {
		case "field", "buckets", "format", "time_zone", "minimum_interval", "missing":
		default:
			return parsingErr("[auto_date_histogram] unknown field [%s]", k)
		}
	}
	if err := a.fieldOption(fields); err != nil {
		return err
	}
	f := a.field
	if a.fi.Type != "date" && a.fi.Type != "unmapped" {
		return badRequest("illegal_argument_exception", "Field [%s] of type [%s] is not supported for aggregation [auto_date_histogram]", f, a.fi.ESType)
	}
	var err error
	if a.size, err = intParam(a.opts["buckets"], "buckets", 10); err != nil {
		return err
	}
	if a.size <= 0 {
		return badRequest("illegal_argument_exception", "[buckets] must be greater than 0 in [%s]", a.name)
	}
	if tz, ok := a.opts["time_zone"]; ok {
		if a.loc, err = loadZone(scalarString(tz)); err != nil {
			return parsingErr("[auto_date_histogram] aggregation [%s]: time_zone [%v] is not known", a.name, tz)
		}
	}
	a.minRounding = 0
	if mi, ok := a.opts["minimum_interval"]; ok {
		a.minRounding = -1
		for i, r := range autoRoundings {
			if r.name == scalarString(mi) {
				a.minRounding = i
			}
		}
		if a.minRounding < 0 {
			return badRequest("illegal_argument_exception", "minimum_interval must be one of [second, minute, hour, day, month, year]")
		}
	}
	return nil
}

// unitIndex numbers t's calendar unit from the epoch: months and years by the
// calendar, the rest by their fixed length.
func unitIndex(t time.Time, unit string) int64 {
	switch unit {
	case "M":
		return int64(t.Year())*12 + int64(t.Month()) - 1
	case "y":
		return int64(t.Year())
	}
	_, off := t.Zone()
	ms := t.UnixMilli() + int64(off)*1000
	size := map[string]int64{"s": 1e3, "m": 6e4, "h": 3.6e6, "d": 8.64e7}[unit]
	if ms < 0 {
		return (ms - size + 1) / size
	}
	return ms / size
}

// autoDateHistogram picks the finest rounding (from minimum_interval on) that puts
// the values in at most `buckets` buckets, counting the empty ones between, and
// buckets them; a bucket of n units starts at the first value's unit, as
// Elasticsearch merges them.
func (a *aggDef) autoDateHistogram(docs []map[string]any) (map[string]any, error) {
	loc := a.loc
	if loc == nil {
		loc = time.UTC
	}
	var lo, hi time.Time
	found := false
	for _, d := range docs {
		for _, v := range a.values(d) {
			if f, ok := v.(float64); ok {
				t := time.UnixMilli(int64(f)).In(loc)
				if !found || t.Before(lo) {
					lo = t
				}
				if !found || t.After(hi) {
					hi = t
				}
				found = true
			}
		}
	}
	r, inner := autoRoundings[a.minRounding], autoRoundings[a.minRounding].inners[0]
	if found {
	pick:
		for _, cand := range autoRoundings[a.minRounding:] {
			span := unitIndex(hi, cand.unit) - unitIndex(lo, cand.unit)
			for _, n := range cand.inners {
				r, inner = cand, n
				if span/int64(n)+1 <= int64(a.size) {
					break pick
				}
			}
		}
	}
	start := floorUnitIn(lo, r.unit)
	groups := map[int64][]map[string]any{}
	last := int64(-1)
	for _, d := range docs {
		seen := map[int64]bool{}
		for _, v := range a.values(d) {
			f, ok := v.(float64)
			if !ok {
				continue
			}
			k := (unitIndex(time.UnixMilli(int64(f)).In(loc), r.unit) - unitIndex(start, r.unit)) / int64(inner)
			if !seen[k] {
				seen[k] = true
				groups[k] = append(groups[k], d)
			}
			last = max(last, k)
		}
	}
	buckets := []any{}
	for k := int64(0); found && k <= last; k++ {
		key := addUnit(start, r.unit, int(k)*inner)
		extra := map[string]any{"key_as_string": formatDate(float64(key.UnixMilli()), scalarString(orDefault(a.opts["format"], "")), a.loc)}
		b, err := a.bucket(key.UnixMilli(), groups[k], extra)
		if err != nil {
			return nil, err
		}
		buckets = append(buckets, b)
	}
	out := a.bucketsOut(buckets)
	out["interval"] = strconv.Itoa(inner) + r.unit
	return out, nil
}
