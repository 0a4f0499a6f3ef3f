package tests

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// markers counts the version markers in a run's root history.
func markers(t *testing.T, id string) int {
	t.Helper()
	n := 0
	it := shared.client.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e.GetEventType() == enumspb.EVENT_TYPE_MARKER_RECORDED {
			n++
		}
	}
	return n
}

// A run started by a worker built before a workflow change finishes on a worker built
// after it: the guarded change stays off for that run, new runs get it.
func TestRollingUpgradeMidRun(t *testing.T) {
	const queue = "upgrade"
	newWorker := func(wf func(workflow.Context, workflows.ChainInput) (*workflows.Summary, error)) *engine.Worker {
		w, err := engine.NewWorker(shared.client, engine.WorkerOptions{
			TaskQueue: queue, OutDir: shared.sink.Dir(), Log: quiet, Redis: shared.redis.Addr(), Workflow: wf,
			Fetch: fetch.Options{Timeout: 5 * time.Second, AllowPrivate: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	o := demosite.Options{Pages: 4, Latency: 30 * time.Millisecond}
	site := startSite(t, o)

	old := newWorker(workflows.WorkflowBefore(workflows.ChangeDownstreamFirst))
	id := start(t, plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=4"), queue)
	at := waitPages(t, id, 40)
	old.Stop()
	t.Logf("old worker stopped after %d pages", at)

	current := newWorker(nil)
	defer current.Stop()
	s := wait(t, id, 3*time.Minute)
	assertDemoStored(t, stored(t, id), o, 4)
	if _, _, _, failed := s.Totals(); failed != 0 {
		t.Fatalf("%d failures: %+v", failed, s.Failures)
	}
	if n := markers(t, id); n != 0 {
		t.Fatalf("the upgraded run recorded %d version markers; it must keep the old behaviour", n)
	}
	// A run started on the new build takes the changes.
	fresh := start(t, plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=1"), queue)
	wait(t, fresh, 2*time.Minute)
	if n, want := markers(t, fresh), len(workflows.Changes()); n != want {
		t.Fatalf("a new run recorded %d version markers, want %d (one per guarded change)", n, want)
	}
}
