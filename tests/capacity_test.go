package tests

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/capacity"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/monitor"
)

const heavyTree = `
name: heavy
defaults: {batch: 5, concurrency: 16, parallel: 4, dedup: "off"}
steps:
  - id: node
    task: synth.heavy
    from: node
    max_depth: 2
    params: {widths: [10, 3]}
`

// Two workers of different declared capacity share a queue. A task whose learned needs
// (12 cores a batch) only the big worker covers runs only there; with the big worker
// gone, its need decays (16 pages at once → 2) until the small worker covers it, and
// runs there: nothing waits forever, nothing is lost.
func TestPlacementFollowsLearnedNeeds(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: shared.redis.Addr()})
	defer rdb.Close()
	rec := monitor.NewRecorder(rdb)
	// What earlier runs taught: 200 ms, 150 ms of CPU and 100 KB a page, over a weight
	// of 10,000 pages, so this test's own light pages barely move it.
	const pages = 10000
	if err := rec.TaskCost(ctx, "synth.heavy", pages, pages*200*time.Millisecond, pages*150*time.Millisecond, pages*100*1024); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.ForgetNeeds(ctx, "synth.heavy") })
	queue := "cap-" + tenantOf(t)
	big := testWorker(t, engine.WorkerOptions{TaskQueue: queue, MaxBatches: 4, Redis: shared.redis.Addr(), Identity: "big",
		Capacity: capacity.Resources{CPU: 16, MemMB: 8192}})
	testWorker(t, engine.WorkerOptions{TaskQueue: queue, MaxBatches: 4, Redis: shared.redis.Addr(), Identity: "small",
		Capacity: capacity.Resources{CPU: 2, MemMB: 1024}})
	out := shared.dir + "/" + queue

	report := func(want func(*engine.TaskPlacement) bool) *engine.TaskPlacement {
		t.Helper()
		var last *engine.TaskPlacement
		if !poll(15*time.Second, func() bool {
			ov, err := engine.GetOverview(ctx, shared.client, rdb, 0)
			if err != nil {
				t.Fatal(err)
			}
			ov.PlanCapacity(capacity.Target{Drain: 10 * time.Minute})
			for i, tp := range ov.Capacity.Tasks {
				if tp.Task == "synth.heavy" {
					last = &ov.Capacity.Tasks[i]
				}
			}
			return last != nil && want(last)
		}) {
			t.Fatalf("the needs report never showed what was expected; last: %+v", last)
		}
		return last
	}
	tp := report(func(tp *engine.TaskPlacement) bool { return slices.Contains(tp.Qualify, "big") })
	if tp.Need.CPU != 12 || slices.Contains(tp.Qualify, "small") || tp.DecaySteps != 0 {
		t.Errorf("with both workers: needs %v, qualifying %v, decay %d; want 12 cores, only big, no decay", tp.Need, tp.Qualify, tp.DecaySteps)
	}

	// The admin report, as `trawler status --needs` prints it: the task's row.
	needsRow := func() string {
		t.Helper()
		stdout, stderr, code := trawler(t, "status", "--needs", "--data", shared.dir, "--redis", shared.redis.Addr())
		for _, line := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(line, "synth.heavy ") {
				return line
			}
		}
		t.Fatalf("status --needs: exit %d, no synth.heavy row:\n%s%s", code, stdout, stderr)
		return ""
	}
	if row := needsRow(); !strings.HasSuffix(row, " big") || !strings.Contains(row, " 12.00 ") || !strings.Contains(row, " none ") {
		t.Errorf("status --needs with both workers: %q; want 12.00 cores, no decay, only big qualifying", row)
	}

	run := func() (string, map[string]int) {
		t.Helper()
		id := startTuned(t, plan(t, "heavy.yaml", heavyTree), queue, fast)
		s := wait(t, id, 2*time.Minute)
		p, _, _, failed := s.Totals()
		if p != 41 || failed != 0 {
			t.Fatalf("run %s: %d pages, %d failed; want all 41 nodes", id, p, failed)
		}
		if n := len(storedIn(t, out, id)); n != 41 {
			t.Errorf("run %s stored %d items, want 41", id, n)
		}
		return id, batchWorkers(t, id)
	}
	_, ran := run()
	if ran["small"] != 0 || ran["big"] == 0 {
		t.Errorf("with both workers the heavy batches ran on %v; want the big worker only", ran)
	}

	// The big worker goes away: its heartbeat is gone, and the small worker decays
	// the need until it fits.
	decayedBefore := decayedCount()
	big.Stop()
	tp = report(func(tp *engine.TaskPlacement) bool { return len(tp.Qualify) == 0 })
	if tp.DecaySteps != 3 || tp.DecayedConcurrency != 2 || !tp.Runnable {
		t.Errorf("without the big worker: decay %d steps to %d pages at once (runnable %v); want 3 steps to 2", tp.DecaySteps, tp.DecayedConcurrency, tp.Runnable)
	}
	if row := needsRow(); !strings.Contains(row, " 16→2 ") || !strings.HasSuffix(row, " none live") {
		t.Errorf("status --needs without the big worker: %q; want decay 16→2, no worker qualifying whole", row)
	}
	_, ran = run()
	decayed := decayedCount() - decayedBefore
	if ran["small"] == 0 || len(ran) != 1 || int(decayed) != ran["small"] {
		t.Errorf("without the big worker the batches ran on %v, %v of them decayed; want all on small, all decayed", ran, decayed)
	}
	t.Logf("without the big worker: %d batches on small, decayed 16 → %d pages at once", ran["small"], tp.DecayedConcurrency)
}

// decayedCount reads trawler_decayed_batches_total for synth.heavy from this process's
// metrics (the test's workers run in it).
func decayedCount() float64 {
	var m dto.Metric
	_ = monitor.DecayedBatches.WithLabelValues("synth.heavy").Write(&m)
	return m.GetCounter().GetValue()
}
