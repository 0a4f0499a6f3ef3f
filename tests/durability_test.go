package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/trawlerhq/trawler/internal/devstack"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/events"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/storage/kafka"
	"github.com/trawlerhq/trawler/internal/storage/mongo"
	"github.com/trawlerhq/trawler/internal/workflows"
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
	return workerProcessOn(t, bin, shared.redis.Addr(), queue, out, extra...)
}

// workerProcessOn is workerProcess on the Redis (or redis-cluster://) at redisURL.
func workerProcessOn(t *testing.T, bin, redisURL, queue, out string, extra ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"worker", "--temporal", shared.stack.Endpoints.Temporal, "--namespace", shared.stack.Endpoints.Namespace,
		"--task-queue", queue, "--out", out, "--redis", redisURL}, extra...)
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
	pages := 0
	eventually(t, 2*time.Minute, fmt.Sprintf("run %s reaching %d pages", id, n), func() bool {
		st, err := engine.Describe(context.Background(), shared.client, id)
		if err != nil || st.Progress == nil {
			return false
		}
		if pages, _, _, _ = st.Progress.Totals(); pages >= n {
			return true
		}
		if st.State != "running" {
			t.Fatalf("run ended (%s) at %d pages, before reaching %d", st.State, pages, n)
		}
		return false
	})
	return pages
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

	victim, batch := runningBatch(t, id, workers, "")
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

// runningBatch waits for a batch of the run that one of the workers has started (of the
// step named by prefix, "feed/", or any), and returns that worker's pid and the batch's
// activity id.
func runningBatch(t *testing.T, runID string, workers map[int]*exec.Cmd, prefix string) (int, string) {
	t.Helper()
	var pid int
	var batch string
	eventually(t, time.Minute, "a worker process holding a running batch", func() bool {
		d, err := shared.client.DescribeWorkflowExecution(context.Background(), runID, "")
		if err != nil {
			t.Fatal(err)
		}
		// The batch started last has the most work left: killing its worker cannot come
		// after the batch finished.
		var newest *workflowpb.PendingActivityInfo
		for _, pa := range d.GetPendingActivities() {
			if pa.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED || !workflows.IsBatchActivity(pa.GetActivityType().GetName()) ||
				!strings.HasPrefix(pa.GetActivityId(), prefix) {
				continue
			}
			// The SDK's default worker identity is "pid@host@".
			pid, _ := strconv.Atoi(strings.SplitN(pa.GetLastWorkerIdentity(), "@", 2)[0])
			if workers[pid] != nil && (newest == nil || pa.GetLastStartedTime().AsTime().After(newest.GetLastStartedTime().AsTime())) {
				newest = pa
			}
		}
		if newest == nil {
			return false
		}
		pid, _ = strconv.Atoi(strings.SplitN(newest.GetLastWorkerIdentity(), "@", 2)[0])
		batch = newest.GetActivityId()
		return true
	})
	return pid, batch
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

// outageTuning keeps a batch's own retries to two attempts, far shorter than the
// outages below: before runs waited outages out, these runs would have failed.
func outageTuning() workflows.Tuning {
	tu := fast
	tu.BatchAttempts = 2
	return tu
}

// TestMongoOutageRunWaits stops MongoDB while a run stores to jsonl, Kafka and MongoDB,
// keeps it down well past the batches' own retries, and brings it back on the same
// address: the run waits (its status names the store and the waiting inputs), then
// completes with every record exactly once in every store.
func TestMongoOutageRunWaits(t *testing.T) {
	startHot(t)
	dir := filepath.Join(shared.dir, "mongo-outage")
	uri, stop, err := devstack.StartMongo(dir)
	if err != nil {
		t.Fatal(err)
	}
	queue := "mongo-outage"
	w := testWorker(t, engine.WorkerOptions{TaskQueue: queue, OutDir: filepath.Join(dir, "out"),
		Redis: shared.redis.Addr(), Kafka: hot.kafka, Mongo: uri})
	o := demosite.Options{Pages: 4, Latency: 60 * time.Millisecond}
	// Story and comments pages past the 30th wait until MongoDB is down, so that work is
	// left to meet the outage however fast the run.
	site, served, release := gatedSite(t, startSite(t, o), "/item/", 30)
	rdb := redis.NewClient(&redis.Options{Addr: shared.redis.Addr()})
	defer rdb.Close()
	received := watchAlerts(t, rdb, tenantOf(t), 0)
	// Small story batches one at a time, so that work is left when MongoDB stops: a
	// run's progress counts a batch's pages when it ends, and a story batch runs its
	// comments too.
	p := storeHot(plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=4"))
	p.Steps[1].Batch, p.Steps[1].Parallel = 10, 1
	id, err := engine.Start(context.Background(), shared.client, p, engine.RunOptions{TaskQueue: queue, Tuning: outageTuning()})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "30 story and comments pages served", func() bool { return served() >= 30 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	t.Log("stopped MongoDB")
	release()
	out := waitOutage(t, id, "store mongo", "in mongo")
	t.Logf("status while MongoDB is down: %+v", out)
	// The outage itself is under test: it lasts far past two attempts of a batch, and
	// the run must still be waiting, not failed, at its end.
	time.Sleep(8 * time.Second)
	if st, err := engine.Describe(context.Background(), shared.client, id); err != nil || st.State != "running" {
		t.Fatalf("after 8 s of outage: %+v, %v; want the run still running", st, err)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(uri, "mongodb://"), "/")
	if _, stop, err = devstack.StartMongoOn(dir, host); err != nil {
		t.Fatalf("restart MongoDB on %s: %v", host, err)
	}
	t.Cleanup(func() { _ = stop() })
	t.Log("restarted MongoDB")

	s := wait(t, id, 3*time.Minute)
	if _, _, _, failed := s.Totals(); failed != 0 || s.Status != workflows.StatusCompleted || len(s.Outages) != 0 {
		t.Errorf("run ended %s with %d failures %+v and outages %+v", s.Status, failed, s.Failures, s.Outages)
	}
	k, _ := hotReaders(t)
	m, err := mongo.Open(mongo.Config{URI: uri, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	assertHotStored(t, id, o, 4, w.JSONL, k, m)
	assertNoKafkaRepeats(t, id, w.JSONL, k, m)
	// The webhook heard of the outage, naming the store, and of its end (the run's own
	// end is another alert, run_ended, left out here).
	var alerts []events.Alert
	poll(10*time.Second, func() bool {
		alerts = slices.DeleteFunc(received(), func(a events.Alert) bool { return a.Alert == "run_ended" })
		return len(alerts) >= 2 && alerts[len(alerts)-1].Resolved
	})
	if len(alerts) < 2 || alerts[0].Alert != "outage" || alerts[0].Dependency != "store mongo" || alerts[0].Resolved ||
		// The cause is the store's own error: "connection refused", or a socket closed
		// under a write in flight when the store stopped.
		!strings.HasPrefix(alerts[0].Cause, "store mongo: ") || alerts[0].Since == nil || !alerts[len(alerts)-1].Resolved {
		t.Errorf("alerts %+v; want an outage alert for store mongo with its cause, then its resolution", alerts)
	}
}

// TestRedisOutageRunWaits takes the Redis that dedup, quotas and pools use away from a
// worker mid-run and brings it back: the run waits, names Redis in its status, and
// stores every record exactly once, recorded as seen in dedup.
func TestRedisOutageRunWaits(t *testing.T) {
	startHot(t)
	rd := miniredis.RunT(t)
	queue := "redis-outage"
	dir := filepath.Join(shared.dir, "redis-outage")
	w := testWorker(t, engine.WorkerOptions{TaskQueue: queue, OutDir: filepath.Join(dir, "out"),
		Redis: rd.Addr(), Kafka: hot.kafka, Mongo: hot.mongo})
	o := demosite.Options{Pages: 4, Latency: 60 * time.Millisecond}
	// Pages past the 30th wait until Redis is down (see TestMongoOutageRunWaits).
	site, served, release := gatedSite(t, startSite(t, o), "/item/", 30)
	p := storeHot(plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=4"))
	id, err := engine.Start(context.Background(), shared.client, p, engine.RunOptions{TaskQueue: queue, Tuning: outageTuning()})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "30 story and comments pages served", func() bool { return served() >= 30 })
	rd.Close()
	t.Log("stopped Redis")
	release()
	out := waitOutage(t, id, "redis", "")
	t.Logf("status while Redis is down: %+v", out)
	time.Sleep(8 * time.Second) // the outage under test lasts far past two attempts of a batch
	if err := rd.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Log("restarted Redis")

	s := wait(t, id, 3*time.Minute)
	if _, _, _, failed := s.Totals(); failed != 0 || s.Status != workflows.StatusCompleted {
		t.Errorf("run ended %s with %d failures %+v", s.Status, failed, s.Failures)
	}
	k, m := hotReaders(t)
	assertHotStored(t, id, o, 4, w.JSONL, k, m)
	assertNoKafkaRepeats(t, id, w.JSONL, k, m)
}

// assertNoKafkaRepeats checks that Kafka got each record of a run once: a write held
// through an outage is not sent again.
func assertNoKafkaRepeats(t *testing.T, id string, js *jsonl.Sink, k *kafka.Sink, m *mongo.Sink) {
	t.Helper()
	_, _, kafkaIDs := hotRecords(t, id, js, k, m)
	for key, ids := range kafkaIDs {
		for _, n := range ids {
			if n != 1 {
				t.Errorf("%s: %d copies in Kafka, want 1", key, n)
			}
		}
	}
}

// TestEachStartURLFailsAlone: of ten start URLs, one answers 500, one 429 and one
// hangs; the seven good pages are stored and each bad one fails with its own cause.
func TestEachStartURLFailsAlone(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/500":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/429":
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case "/hang":
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		default:
			fmt.Fprintf(w, "<html><body><h1>page %s</h1></body></html>", r.URL.Path)
		}
	}))
	defer srv.Close()
	p := plan(t, "seeds.yaml", `
name: seeds
defaults: {retries: 1, timeout: 2s}
steps:
  - id: page
    task: generic.html_detail
    params:
      base_url: `+srv.URL+`
      urls: [/ok1, /500, /ok2, /429, /ok3, /hang, /ok4, /ok5, /ok6, /ok7]
      fields: {title: h1}
`)
	id := start(t, p, taskQueue)
	s := wait(t, id, 2*time.Minute)
	keepHistories(t, "seeds", id)
	keys := stored(t, id)
	if len(keys) != 7 {
		t.Errorf("stored %d pages (%v), want the 7 good ones", len(keys), keys)
	}
	assertOnce(t, keys)
	if pages, items, _, failed := s.Totals(); pages != 7 || items != 7 || failed != 3 {
		t.Errorf("summary: %d pages, %d items, %d failed; want 7, 7, 3", pages, items, failed)
	}
	causes := map[string]string{}
	for _, f := range s.Failures {
		causes[f.Input.URL] = f.Cause
	}
	for path, want := range map[string]string{"/500": "500", "/429": "429", "/hang": "time"} {
		if c := causes[srv.URL+path]; !strings.Contains(c, want) {
			t.Errorf("%s failed with %q, want its own cause (%s)", path, c, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, path := range []string{"/ok1", "/ok2", "/ok3", "/ok4", "/ok5", "/ok6", "/ok7"} {
		if hits[path] != 1 {
			t.Errorf("%s fetched %d times, want once", path, hits[path])
		}
	}
}

// A batch whose every page takes longer than a short heartbeat timeout still checkpoints
// inside it: no attempt is taken for lost while its worker is busy.
func TestShortHeartbeatTimeoutKeepsSlowBatchesAlive(t *testing.T) {
	queue := slotWorker(t, 2)
	tune := fast
	tune.HeartbeatTimeout = 1500 * time.Millisecond
	// A root and its two children, one at a time, 2 s each: the first page alone
	// outlasts the timeout (and the batch's 2 s tick, which heartbeated it before).
	id := startTuned(t, slowPlan(t, "heartbeat", "hb", 1, 10, 1, "[2]", 2000), queue, tune)
	s := wait(t, id, time.Minute)
	if pages, _, _, failed := s.Totals(); pages != 3 || failed != 0 {
		t.Fatalf("run: %d pages, %d failed; want 3, 0", pages, failed)
	}
	it := shared.client.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
			t.Errorf("a batch ran %d attempts: an earlier one went silent past the 1.5 s heartbeat timeout (%s)", a.GetAttempt(), a.GetLastFailure().GetMessage())
		}
	}
}
