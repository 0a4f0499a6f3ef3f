package capacity

import (
	"strings"
	"testing"
	"time"
)

// The default scenario meets the goals: no worker ever holds more memory than it has,
// the small worker runs only the small task, every task keeps running (the rendering
// task too, decayed onto the other workers while the big one is away), and the
// desired-worker signal settles within two sampling periods of each load step.
func TestSimulationMeetsTheGoals(t *testing.T) {
	sc := DefaultScenario()
	r := Simulate(sc)
	if r.OverMemory != 0 {
		t.Errorf("%d worker-ticks over their memory bound, want 0", r.OverMemory)
	}
	for task, n := range r.SmallByTask {
		if task != "feed" && n > 0 {
			t.Errorf("the small worker ran %d %s batches; only feed batches fit it", n, task)
		}
	}
	if r.SmallByTask["feed"] == 0 {
		t.Error("the small worker ran no feed batches: small workers must still get small tasks")
	}
	// Every batch that arrived more than a drain target before the end finished, and
	// no batch waited longer than the drain target.
	drainTicks := int(sc.Target.Drain / Tick)
	for _, task := range sc.Tasks {
		arrived := 0
		for p := 0; p < sc.Periods-drainTicks/sc.Period; p++ {
			arrived += task.Arrivals(p)
		}
		if r.Done[task.Name] < arrived {
			t.Errorf("task %s: %d batches done, %d arrived before the last %s", task.Name, r.Done[task.Name], arrived, sc.Target.Drain)
		}
		if w := time.Duration(r.MaxWait[task.Name]) * Tick; w > sc.Target.Drain {
			t.Errorf("task %s: a batch waited %s, longer than the drain target %s", task.Name, w, sc.Target.Drain)
		}
	}
	for p, ev := range sc.Events {
		if k := r.Settle[p]; k > 2 {
			t.Errorf("after %q (period %d) the signal took %d periods to settle, want at most 2", ev, p, k)
		}
	}
	decayedWhileGone, decayedOtherwise := 0, 0
	for _, row := range r.Rows {
		_, bigLive := row.Running["big"]
		if !bigLive {
			decayedWhileGone += row.Decayed
		} else {
			decayedOtherwise += row.Decayed
		}
	}
	if decayedWhileGone == 0 || decayedOtherwise != 0 {
		t.Errorf("%d batches decayed while the big worker was away, %d while it was there; want some, and none", decayedWhileGone, decayedOtherwise)
	}
	// The backlog step raises the signal at the first sample that sees it.
	if before, after := r.Rows[7].Desired, r.Rows[8].Desired; after <= before {
		t.Errorf("desired workers %d before the step, %d at the first sample after it; want a rise", before, after)
	}
	var b strings.Builder
	r.Print(&b, sc)
	if lines := strings.Count(b.String(), "\n"); lines != sc.Periods+1 {
		t.Errorf("the table has %d lines, want a header and %d periods", lines, sc.Periods)
	}
	// The same scenario gives the same rows.
	if again := Simulate(DefaultScenario()); !equalRows(again.Rows, r.Rows) {
		t.Error("two runs of the same scenario differ")
	}
}

func equalRows(a, b []Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Desired != b[i].Desired || a[i].Decayed != b[i].Decayed || a[i].Waiting != b[i].Waiting || a[i].Fleet != b[i].Fleet {
			return false
		}
	}
	return true
}

func TestNeedsAndDecay(t *testing.T) {
	render := Cost{MSPerPage: 2000, CPUMSPerPage: 700, KBPerPage: 2500}
	if n := Need(render, 16); n.CPU != 5.6 || n.MemMB != 8+16*2500*8/1024.0 {
		t.Errorf("render at 16: %v", n)
	}
	big, small := Resources{CPU: 8, MemMB: 4096}, Resources{CPU: 1, MemMB: 512}
	if s, ok := DecaySteps(render, 16, []Resources{big, small}); s != 0 || !ok {
		t.Errorf("with the big worker: %d steps (%v), want 0", s, ok)
	}
	// Alone, the small worker takes it at 16 >> 3 = 2 pages at a time (1.4 → 0.7 cores).
	if s, ok := DecaySteps(render, 16, []Resources{small}); s != 3 || !ok || Decayed(16, s) != 2 {
		t.Errorf("small worker alone: %d steps (%v), want 3 (concurrency 2)", s, ok)
	}
	if _, ok := DecaySteps(render, 16, []Resources{{CPU: 0.1, MemMB: 10}}); ok {
		t.Error("a worker too small even for one page must not qualify")
	}
	ds := []Demand{{Task: "a", Backlog: 6000, Inflow: 10, PerWorker: 20}}
	// (10 + 6000/600) / 20 = 1 worker; at half efficiency 2.
	if n := DesiredWorkers(ds, 1, Target{Drain: 10 * time.Minute}); n != 1 {
		t.Errorf("desired %d, want 1", n)
	}
	if n := DesiredWorkers(ds, 0.5, Target{Drain: 10 * time.Minute, Max: 5}); n != 2 {
		t.Errorf("desired at half efficiency %d, want 2", n)
	}
	if n := DesiredWorkers(nil, 1, Target{Min: 1}); n != 1 {
		t.Errorf("an idle queue wants its minimum, got %d", n)
	}
}
