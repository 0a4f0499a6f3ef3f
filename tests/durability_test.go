package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"trawler/engine"
	"trawler/internal/devstack/demosite"
	"trawler/storage/jsonl"
)

// buildTrawler builds the real binary once for the tests that run worker processes.
func buildTrawler(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(shared.dir, "trawler")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/trawler")
	cmd.Dir = ".."
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build ./cmd/trawler: %v", err)
	}
	return bin
}

// workerProcess starts `trawler worker` as its own process on a task queue, storing
// into the jsonl directory out and whatever stores extra flags name.
func workerProcess(t *testing.T, bin, queue, out string, extra ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"worker", "--temporal", shared.stack.Endpoints.Temporal, "--namespace", shared.stack.Endpoints.Namespace,
		"--task-queue", queue, "--out", out, "--redis", shared.redis.Addr()}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// waitPages polls a run's progress until it has processed at least n pages.
func waitPages(t *testing.T, id string, n int) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		st, err := engine.Describe(context.Background(), shared.client, id)
		if err == nil && st.Progress != nil {
			if pages, _, _, _ := st.Progress.Totals(); pages >= n {
				return pages
			}
			if st.State != "running" {
				t.Fatalf("run ended (%s) before reaching %d pages", st.State, n)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("run %s did not reach %d pages", id, n)
	return 0
}

// TestKilledWorkerLosesNothing runs one crawl on three worker processes storing to
// jsonl, Kafka and MongoDB, and SIGKILLs the one holding a running batch. The run must
// complete on the other two, the dead worker's batch must be retried elsewhere after
// its heartbeat timeout, and every store must hold each item exactly once.
func TestKilledWorkerLosesNothing(t *testing.T) {
	bin := buildTrawler(t)
	k, m := hotReaders(t)
	// A site that takes 40 ms a page keeps batches in flight when a worker dies.
	o := demosite.Options{Pages: 6, Latency: 40 * time.Millisecond}
	site := startSite(t, o)
	const queue = "kill-test"
	out := filepath.Join(shared.dir, "kill-out")
	workers := map[int]*exec.Cmd{}
	for range 3 {
		w := workerProcess(t, bin, queue, out, "--kafka", strings.Join(hot.kafka, ","), "--mongo", hot.mongo)
		workers[w.Process.Pid] = w
	}
	id := start(t, storeHot(plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=6")), queue)
	at := waitPages(t, id, 40)

	victim, batch := runningBatch(t, id, workers)
	if err := workers[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = workers[victim].Wait()
	t.Logf("killed worker %d, running batch %s, after %d pages", victim, batch, at)

	s := wait(t, id, 3*time.Minute)
	if _, _, _, failed := s.Totals(); failed != 0 {
		t.Errorf("%d inputs failed: %+v", failed, s.Failures)
	}
	attempt, by := finalAttempt(t, id, batch)
	if attempt < 2 || strings.HasPrefix(by, fmt.Sprintf("%d@", victim)) {
		t.Errorf("batch %s finished in attempt %d by %q; want a retry on another worker", batch, attempt, by)
	}
	js, err := jsonl.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	assertHotStored(t, id, o, 6, js, k, m)
}

// runningBatch waits for a batch of the run that one of the workers has started, and
// returns that worker's pid and the batch's activity id.
func runningBatch(t *testing.T, runID string, workers map[int]*exec.Cmd) (int, string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		d, err := shared.client.DescribeWorkflowExecution(context.Background(), runID, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, pa := range d.GetPendingActivities() {
			if pa.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED {
				continue
			}
			// The SDK's default worker identity is "pid@host@".
			pid, _ := strconv.Atoi(strings.SplitN(pa.GetLastWorkerIdentity(), "@", 2)[0])
			if workers[pid] != nil {
				return pid, pa.GetActivityId()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no worker process held a running batch")
	return 0, ""
}

// finalAttempt reads the run's history for the attempt that completed a batch and the
// identity of the worker that ran it.
func finalAttempt(t *testing.T, runID, activityID string) (int32, string) {
	t.Helper()
	scheduled := int64(0)
	it := shared.client.GetWorkflowHistory(context.Background(), runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityId() == activityID {
			scheduled = ev.GetEventId()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && scheduled != 0 && a.GetScheduledEventId() == scheduled {
			return a.GetAttempt(), a.GetIdentity()
		}
	}
	t.Fatalf("no started event for batch %s in the history of %s", activityID, runID)
	return 0, ""
}

func TestServerRestartResumesTheRun(t *testing.T) {
	o := demosite.Options{Pages: 6, Latency: 40 * time.Millisecond}
	site := startSite(t, o)
	id := start(t, plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=6"), taskQueue)
	at := waitPages(t, id, 60)
	// Stop worker and server while the run is in flight, then bring both back on the
	// same SQLite file (and port, as `trawler dev` does).
	port := shared.port
	stopShared()
	if err := startShared(port); err != nil {
		t.Fatalf("restart on the same data dir: %v", err)
	}
	t.Logf("restarted the server after %d pages", at)
	s := wait(t, id, 3*time.Minute)
	keys := stored(t, id)
	assertDemoStored(t, keys, o, 6)
	if pages, _, _, failed := s.Totals(); failed != 0 || pages <= at {
		t.Errorf("after restart: pages %d (had %d before), failed %d", pages, at, failed)
	}
}
