package tests

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"trawler/internal/devstack/demosite"
	"trawler/storage/jsonl"
)

// A worker SIGKILLed while its batch follows the feed page after page: the batch is
// retried on another worker from its checkpoint (the pages it followed included), the
// run completes, and every store holds each item exactly once. The feed took far fewer
// activities than it has pages, so the pages were followed on the worker.
func TestKilledWorkerMidFollowLosesNothing(t *testing.T) {
	bin := buildTrawler(t)
	k, m := hotReaders(t)
	const feedPages = 30
	// 30 ms a page: the feed batch follows its pages for about a second.
	o := demosite.Options{Pages: feedPages, PerPage: 3, Latency: 30 * time.Millisecond}
	site := startSite(t, o)
	const queue = "follow-kill-test"
	out := filepath.Join(shared.dir, "follow-kill-out")
	workers := map[int]*exec.Cmd{}
	for range 3 {
		w := workerProcess(t, bin, queue, out, "--kafka", strings.Join(hot.kafka, ","), "--mongo", hot.mongo)
		workers[w.Process.Pid] = w
	}
	id := start(t, storeHot(plan(t, "demo.yaml", "", "base_url="+site, fmt.Sprintf("feed.pages=%d", feedPages))), queue)

	victim, batch := runningBatch(t, id, workers, "feed/")
	// Long enough for a checkpoint with followed pages (heartbeats every second).
	time.Sleep(1200 * time.Millisecond)
	if err := workers[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = workers[victim].Wait()
	t.Logf("killed worker %d while it ran %s", victim, batch)

	s := wait(t, id, 3*time.Minute)
	if _, _, _, failed := s.Totals(); failed != 0 {
		t.Errorf("%d inputs failed: %+v", failed, s.Failures)
	}
	if feed := s.Steps[0]; feed.Pages != feedPages {
		t.Errorf("feed step ran %d pages, want %d", feed.Pages, feedPages)
	}
	js, err := jsonl.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	assertHotStored(t, id, o, feedPages, js, k, m)
	if n := batchesOf(t, id, "feed/"); n >= feedPages/2 {
		t.Errorf("the feed's %d pages took %d activities; following should need a few", feedPages, n)
	} else {
		t.Logf("the feed's %d pages took %d activities", feedPages, n)
	}
}

// batchesOf counts the batch activities a run scheduled for the step whose activity ids
// start with prefix.
func batchesOf(t *testing.T, runID, prefix string) int {
	t.Helper()
	n := 0
	it := shared.client.GetWorkflowHistory(context.Background(), runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && strings.HasPrefix(a.GetActivityId(), prefix) {
			n++
		}
	}
	return n
}
