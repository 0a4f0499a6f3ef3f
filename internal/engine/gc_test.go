package engine

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestGCSettings(t *testing.T) {
	const gib = int64(1) << 30
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	for _, c := range []struct {
		name            string
		vars            map[string]string
		cgroup, machine int64
		percent         int
		limit           int64
	}{
		{"nothing set: 300 and three quarters of the machine", nil, 0, 16 * gib, 300, 12 * gib},
		{"a cgroup smaller than the machine bounds the heap", nil, 4 * gib, 16 * gib, 300, 3 * gib},
		{"a cgroup larger than the machine does not", nil, 64 * gib, 16 * gib, 300, 12 * gib},
		{"GOGC set: the percent is Go's", map[string]string{"GOGC": "100"}, 0, 16 * gib, 0, 12 * gib},
		{"GOGC=off is the user's too", map[string]string{"GOGC": "off"}, 0, 16 * gib, 0, 12 * gib},
		{"GOMEMLIMIT set: the limit is Go's", map[string]string{"GOMEMLIMIT": "2GiB"}, 4 * gib, 16 * gib, 300, 0},
		{"memory unknown: no limit", nil, 0, 0, 300, 0},
	} {
		p, l := gcSettings(env(c.vars), c.cgroup, c.machine)
		if p != c.percent || l != c.limit {
			t.Errorf("%s: got percent %d, limit %d; want %d, %d", c.name, p, l, c.percent, c.limit)
		}
	}
}

func TestTuneGCSetsTheCollector(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetGCPercent(100)
	beforeLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(before); debug.SetMemoryLimit(beforeLimit) })
	percent, limit := TuneGC()
	if got := debug.SetGCPercent(100); got != GCPercent || percent != GCPercent {
		t.Errorf("GC percent %d (TuneGC said %d), want %d", got, percent, GCPercent)
	}
	if got := debug.SetMemoryLimit(-1); limit <= 0 || got != limit {
		t.Errorf("memory limit %d, TuneGC said %d; want the same, above 0", got, limit)
	}
}
