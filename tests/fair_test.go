package tests

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// slowTree is a synth crawl whose nodes take sleep_ms each, so a worker's few slots
// stay busy and the order in which Temporal hands out batches decides who progresses.
const slowTree = `
name: %s
tenant: %s
priority: %d
defaults: {batch: %d, concurrency: %d, parallel: 8}
steps:
  - id: node
    task: synth.node
    from: node
    max_depth: 3
    params: {widths: %s, sleep_ms: %d}
`

func slowPlan(t *testing.T, name, tenant string, priority, batch, conc int, widths string, sleepMS int) *crawl.Plan {
	t.Helper()
	tenant = tenantOf(t) + "-" + tenant
	p := plan(t, name+".yaml", fmt.Sprintf(slowTree, name, tenant, priority, batch, conc, widths, sleepMS))
	p.Tenant = tenant
	return p
}

// slotWorker starts a worker on a queue of its own that runs at most `slots` batches
// at once: the scarce capacity the tests share out.
func slotWorker(t *testing.T, slots int) string {
	t.Helper()
	queue := "slots-" + tenantOf(t)
	testWorker(t, engine.WorkerOptions{TaskQueue: queue, MaxBatches: slots})
	return queue
}

// testWorker starts an in-process worker for one test, quiet, with the shared worker's
// fast fetch settings, storing jsonl under a directory named after its queue unless
// the options name one; it stops when the test ends.
func testWorker(t *testing.T, o engine.WorkerOptions) *engine.Worker {
	t.Helper()
	o.OutDir, o.Log = cmp.Or(o.OutDir, shared.dir+"/"+o.TaskQueue), cmp.Or(o.Log, quiet)
	if reflect.DeepEqual(o.Fetch, fetch.Options{}) { // Options holds a slice: not comparable with ==
		o.Fetch = fastFetch
	}
	w, err := engine.NewWorker(shared.client, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

func startTuned(t *testing.T, p *crawl.Plan, queue string, tune workflows.Tuning) string {
	t.Helper()
	id, err := engine.Start(context.Background(), shared.client, p, engine.RunOptions{TaskQueue: queue, Tuning: tune})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shared.client.TerminateWorkflow(context.Background(), id, "", "test over") })
	return id
}

func stateOf(t *testing.T, id string) string {
	t.Helper()
	st, err := engine.Describe(context.Background(), shared.client, id)
	if err != nil {
		t.Fatal(err)
	}
	return st.State
}

// A small urgent crawl of one tenant finishes while another tenant's 20,000-input
// low-priority crawl holds every slot of the worker.
func TestUrgentSmallCrawlPassesABigOne(t *testing.T) {
	queue := slotWorker(t, 2)
	big := startTuned(t, slowPlan(t, "big", "bulk", 5, 20, 4, "[20, 1000]", 20), queue, fast)
	waitPages(t, big, 100)

	small := startTuned(t, slowPlan(t, "small", "urgent", 1, 10, 4, "[49]", 20), queue, fast)
	s := wait(t, small, 2*time.Minute)
	if pages, items, _, failed := s.Totals(); pages != 50 || items != 50 || failed != 0 {
		t.Errorf("small crawl: %d pages, %d items, %d failed; want 50, 50, 0", pages, items, failed)
	}
	if got := stateOf(t, big); got != "running" {
		t.Fatalf("the big crawl is %s; the small one should have finished first", got)
	}
	st, _ := engine.Describe(context.Background(), shared.client, big)
	done, _, _, _ := st.Progress.Totals()
	t.Logf("small crawl done while the big one had processed %d of 20,021 inputs", done)
	if done >= 20021 {
		t.Errorf("big crawl already processed everything")
	}
}

// Aging: a low-priority crawl queued behind a steady stream of urgent work gains a
// priority level every AgingStep it waits, so it finishes while the stream goes on.
func TestAgingLetsLowPriorityFinish(t *testing.T) {
	queue := slotWorker(t, 1)
	tune := fast
	tune.AgingStep = time.Second
	// 300 urgent nodes of 60 ms, one at a time: about 18 s of work, always queued.
	stream := startTuned(t, slowPlan(t, "stream", "urgent", 1, 1, 1, "[299]", 60), queue, tune)
	waitPages(t, stream, 5)

	low := startTuned(t, slowPlan(t, "low", "patient", 5, 10, 4, "[3]", 10), queue, tune)
	s := wait(t, low, 2*time.Minute)
	if pages, _, _, failed := s.Totals(); pages != 4 || failed != 0 {
		t.Errorf("low-priority crawl: %d pages, %d failed; want 4, 0", pages, failed)
	}
	if got := stateOf(t, stream); got != "running" {
		t.Fatalf("the urgent stream is %s; the test needs it running to show aging", got)
	}
	aged := 0
	for _, st := range s.Steps {
		aged += st.Aged
	}
	if aged == 0 {
		t.Errorf("the low-priority crawl finished without aging; the stream did not hold it back")
	}
	t.Logf("low-priority crawl finished after %d re-dispatches while the urgent stream ran", aged)
	// Each re-dispatch went out more urgently than the batch it replaced.
	first, best := priorities(t, low)
	if best >= first {
		t.Errorf("batches went out at priority %d at best, first at %d: the re-sent batch gained no level", best, first)
	}
	keepHistories(t, "aging", low)
}

// priorities reads a run's history for the priority key of its first batch and the most
// urgent one any batch went out with.
func priorities(t *testing.T, runID string) (first, best int32) {
	t.Helper()
	it := shared.client.GetWorkflowHistory(context.Background(), runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil || !workflows.IsBatchActivity(a.GetActivityType().GetName()) {
			continue
		}
		k := a.GetPriority().GetPriorityKey()
		if first == 0 {
			first, best = k, k
		}
		best = min(best, k)
	}
	if first == 0 {
		t.Fatalf("run %s scheduled no batch with a priority", runID)
	}
	return first, best
}

// A worker whose slots follow its CPU and memory (the SDK's resource-based tuner) runs a
// crawl to the end like any other.
func TestResourceTunedWorkerCrawls(t *testing.T) {
	queue := "tuned-" + tenantOf(t)
	w := testWorker(t, engine.WorkerOptions{TaskQueue: queue, MaxBatches: 8, ResourceTuned: true, TargetCPU: 0.9, TargetMem: 0.95})
	o := demosite.Options{Pages: 2}
	id := start(t, plan(t, "demo.yaml", "", "base_url="+startSite(t, o), "feed.pages=2"), queue)
	s := wait(t, id, 2*time.Minute)
	if _, _, _, failed := s.Totals(); failed != 0 {
		t.Fatalf("%d failures: %+v", failed, s.Failures)
	}
	assertDemoStored(t, runRecords(t, w.JSONL, id), o, 2)
}
