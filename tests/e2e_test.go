// Package tests holds Trawler's end-to-end tests: real chains on the embedded Temporal
// server (SQLite file), a real worker, real HTTP sites on loopback, and items read back
// from the store. One stack is shared by the whole package.
package tests

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/devstack"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/workflows"
	"github.com/trawlerhq/trawler/tests/fixture/hn"
	"github.com/trawlerhq/trawler/tests/fixture/synth"

	_ "github.com/trawlerhq/trawler/internal/sites/demo"
	_ "github.com/trawlerhq/trawler/internal/sites/hackernews"
)

const taskQueue = "e2e"

// shared is the package's one embedded stack and in-process worker.
var shared struct {
	dir    string
	port   int
	stack  *devstack.Stack
	client client.Client
	worker *engine.Worker
	sink   *jsonl.Sink
	redis  *miniredis.Miniredis
}

// fast tuning: short backoffs and heartbeat timeouts so failure paths finish in seconds;
// outages are held 2 s in a batch, then waited out in steps of 200 ms to 2 s.
var fast = workflows.Tuning{RetryBase: 100 * time.Millisecond, RetryMax: time.Second, HeartbeatTimeout: 3 * time.Second,
	OutageHold: 2 * time.Second, OutageBase: 200 * time.Millisecond, OutageMax: 2 * time.Second}

// fastFetch: one retry and short waits, so failing pages fail in seconds.
// The test sites listen on loopback, which a worker reaches only when allowed to.
var fastFetch = fetch.Options{Timeout: time.Second, Retries: 1, Backoff: 20 * time.Millisecond, MaxRetryWait: 2 * time.Second, AllowPrivate: true}

var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

func TestMain(m *testing.M) {
	crawl.Default.Register(synth.Node, synth.Heavy)
	// The trawler processes the tests start (workers, try) crawl loopback sites too.
	os.Setenv("TRAWLER_ALLOW_PRIVATE", "1")
	dir, err := os.MkdirTemp("", "trawler-e2e-")
	if err != nil {
		panic(err)
	}
	shared.dir = dir
	if shared.redis, err = miniredis.Run(); err != nil {
		panic(err)
	}
	if err := startShared(0); err != nil {
		fmt.Fprintln(os.Stderr, "start embedded stack:", err)
		os.Exit(1)
	}
	code := m.Run()
	stopShared()
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "test data kept in", dir)
	}
	os.Exit(code)
}

func startShared(port int) error {
	st, err := devstack.StartTemporal(context.Background(), devstack.Options{DataDir: shared.dir, TemporalPort: port, UIPort: -1})
	if err != nil {
		return err
	}
	shared.stack = st
	_, p, _ := strings.Cut(st.Endpoints.Temporal, ":")
	fmt.Sscan(p, &shared.port)
	c, err := client.Dial(client.Options{HostPort: st.Endpoints.Temporal, Namespace: st.Endpoints.Namespace, Logger: sdklog.NewStructuredLogger(quiet)})
	if err != nil {
		return err
	}
	shared.client = c
	w, err := engine.NewWorker(c, engine.WorkerOptions{
		TaskQueue: taskQueue, OutDir: shared.dir + "/out", Log: quiet, Redis: shared.redis.Addr(),
		Fetch: fastFetch,
	})
	if err != nil {
		return err
	}
	shared.worker, shared.sink = w, w.JSONL
	return w.Start()
}

func stopShared() {
	if shared.worker != nil {
		shared.worker.Stop()
		shared.worker = nil
	}
	if shared.client != nil {
		shared.client.Close()
		shared.client = nil
	}
	if shared.stack != nil {
		_ = shared.stack.Stop()
		shared.stack = nil
	}
}

// plan loads an example chain (or inline YAML) with overrides. Each test runs as its own
// tenant, so dedup (per tenant and task) does not carry over from one test to the next.
func plan(t *testing.T, name, yaml string, sets ...string) *crawl.Plan {
	t.Helper()
	data := []byte(yaml)
	if yaml == "" {
		var err error
		if data, err = examples.Files.ReadFile(name); err != nil {
			t.Fatal(err)
		}
	}
	c, err := crawl.Load(name, data, crawl.LoadOptions{Sinks: engine.KnownSinks, Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Tenant = tenantOf(t)
	return p
}

// tenantOf is the test's own tenant. A test whose runs, sites and checks stay within
// its tenant (its dedup, quotas, records and failures by run id) may call t.Parallel:
// parallel tests start once every other test has ended, so none of them meets a test
// that restarts the shared stack or reads what all workers and tenants do.
func tenantOf(t *testing.T) string {
	return strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
}

func start(t *testing.T, p *crawl.Plan, tq string) string {
	t.Helper()
	id, err := engine.Start(context.Background(), shared.client, p, engine.RunOptions{TaskQueue: tq, Tuning: fast})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func wait(t *testing.T, id string, limit time.Duration) *workflows.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	s, err := engine.Wait(ctx, shared.client, id, nil)
	if err != nil {
		t.Fatalf("run %s: %v", id, err)
	}
	return s
}

// stored reads the jsonl sink back: key → how many records the run holds.
func stored(t *testing.T, runID string) map[string]int {
	t.Helper()
	return runRecords(t, shared.sink, runID)
}

// runRecords reads a jsonl sink back: key → how many records of the run it holds.
func runRecords(t *testing.T, js *jsonl.Sink, runID string) map[string]int {
	t.Helper()
	keys := map[string]int{}
	if err := js.Scan(func(it crawl.Item) error {
		if it.RunID == runID {
			keys[it.Key]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

func countPrefix(keys map[string]int, prefix string) int {
	n := 0
	for k := range keys {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

func assertOnce(t *testing.T, keys map[string]int) {
	t.Helper()
	for k, n := range keys {
		if n != 1 {
			t.Errorf("%s stored %d times, want exactly once", k, n)
		}
	}
}

// assertDemoStored checks that a run stored exactly the stories and comments of the
// first `pages` feed pages of the demo site, each once.
func assertDemoStored(t *testing.T, keys map[string]int, o demosite.Options, pages int) {
	t.Helper()
	stories, comments := demosite.Expected(o, pages)
	if got := countPrefix(keys, "demo:story:"); got != stories {
		t.Errorf("stored %d stories, want %d", got, stories)
	}
	if got := countPrefix(keys, "demo:comment:"); got != comments {
		t.Errorf("stored %d comments, want %d", got, comments)
	}
	assertOnce(t, keys)
}

func startSite(t *testing.T, o demosite.Options) string {
	t.Helper()
	url, stop, err := demosite.Start("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return url
}

// inFrontOf serves the site at target through handle, which gets every request and the
// proxy that passes it on to the site: a test counts requests there, or holds them.
func inFrontOf(t *testing.T, target string, handle func(w http.ResponseWriter, r *http.Request, site http.Handler)) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handle(w, r, proxy) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestDemoChainStoresExactlyTheSite(t *testing.T) {
	t.Parallel()
	o := demosite.Options{Pages: 5}
	site := startSite(t, o)
	id := start(t, plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=4"), taskQueue)
	s := wait(t, id, 2*time.Minute)
	keys := stored(t, id)
	assertDemoStored(t, keys, o, 4)
	pages, items, _, failed := s.Totals()
	if stories, comments := demosite.Expected(o, 4); items != stories+comments || failed != 0 || s.Steps[0].Pages != 4 {
		t.Errorf("summary: pages %d items %d failed %d feed pages %d", pages, items, failed, s.Steps[0].Pages)
	}
	// Every record carries the item fields of the data model.
	n := 0
	_ = shared.sink.Scan(func(it crawl.Item) error {
		if it.RunID == id && n == 0 {
			n++
			if it.ID == 0 || it.Biz == "" || it.Hash == "" || it.TS.IsZero() || it.Chain != "demo" || it.Tenant != tenantOf(t) || len(it.Data) == 0 {
				t.Errorf("incomplete record %+v", it)
			}
		}
		return nil
	})
}

func TestHackerNewsChainAgainstFixture(t *testing.T) {
	t.Parallel()
	base, stop := hn.Start()
	defer stop()
	id := start(t, plan(t, "hackernews.yaml", "", "base_url="+base), taskQueue)
	s := wait(t, id, 2*time.Minute)
	keys := stored(t, id)
	wantStories, wantComments, wantSkipped := hn.Expected("topstories", 30, 10)
	var stories, comments int
	_ = shared.sink.Scan(func(it crawl.Item) error {
		if it.RunID != id {
			return nil
		}
		if it.Data["type"] == "story" {
			stories++
		} else {
			comments++
		}
		return nil
	})
	if stories != wantStories || comments != wantComments {
		t.Errorf("stored %d stories and %d comments, want %d and %d", stories, comments, wantStories, wantComments)
	}
	if _, _, skipped, failed := s.Totals(); skipped != wantSkipped || failed != 0 {
		t.Errorf("skipped %d failed %d, want %d skipped (deleted, dead, null) and 0 failed", skipped, failed, wantSkipped)
	}
	assertOnce(t, keys)
	for k := range keys {
		var itemID int
		fmt.Sscanf(k, "hn:item:%d", &itemID)
		if it, ok := hn.Lookup(itemID); !ok || it.Skipped() {
			t.Errorf("stored %s, which the fixture marks deleted/dead or does not have", k)
		}
	}
}

func TestBadInputIsRecordedAndNothingElseLost(t *testing.T) {
	t.Parallel()
	o := demosite.Options{Pages: 1, Faults: map[int]demosite.Fault{
		3: demosite.FaultStatus500, 5: demosite.FaultRetryAfter, 7: demosite.FaultTruncated,
		9: demosite.FaultHugeBody, 11: demosite.FaultHang,
	}}
	site := startSite(t, o)
	id := start(t, plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=1"), taskQueue)
	s := wait(t, id, 3*time.Minute)
	keys := stored(t, id)
	assertDemoStored(t, keys, o, 1)
	if keys["demo:story:5"] != 1 {
		t.Error("story 5 (429 with Retry-After, then fine) was not stored")
	}
	causes := map[string]string{}
	for _, f := range s.Failures {
		causes[f.Input.URL] = f.Cause
	}
	want := map[int]string{
		3:  "HTTP 500 Internal Server Error",
		7:  "missing required field title",
		9:  "body exceeds the 10 MiB limit",
		11: "timeout",
	}
	if len(s.Failures) != len(want) {
		t.Errorf("%d failures, want %d: %+v", len(s.Failures), len(want), s.Failures)
	}
	for story, text := range want {
		url := fmt.Sprintf("%s/item/%d", site, story)
		if !strings.Contains(causes[url], text) {
			t.Errorf("failure of %s = %q, want it to say %q", url, causes[url], text)
		}
	}
	// The failure log holds the same causes, so nothing is lost silently.
	logged := 0
	data, _ := os.ReadFile(shared.sink.Dir() + "/" + jsonl.FailuresFile)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, id) {
			logged++
		}
	}
	if logged != len(want) {
		t.Errorf("failure log has %d lines for this run, want %d", logged, len(want))
	}
}

// firedRun waits for the nth run a schedule started and returns its workflow id.
func firedRun(t *testing.T, h client.ScheduleHandle, n int) string {
	t.Helper()
	var runID string
	eventually(t, 30*time.Second, fmt.Sprintf("run %d of schedule %s", n, h.GetID()), func() bool {
		if d, err := h.Describe(context.Background()); err == nil && len(d.Info.RecentActions) >= n {
			runID = d.Info.RecentActions[n-1].StartWorkflowResult.WorkflowID
		}
		return runID != ""
	})
	return runID
}

func TestScheduleStartsRuns(t *testing.T) {
	site := startSite(t, demosite.Options{Pages: 1})
	p := plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=1")
	ctx := context.Background()
	if err := engine.CreateSchedule(ctx, shared.client, "demo-every-hour", "0 * * * *", p, engine.RunOptions{TaskQueue: taskQueue, Tuning: fast}); err != nil {
		t.Fatal(err)
	}
	h := shared.client.ScheduleClient().GetHandle(ctx, "demo-every-hour")
	defer h.Delete(ctx)
	desc, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next := desc.Info.NextActionTimes; len(next) == 0 || next[0].Minute() != 0 {
		t.Fatalf("next firings %v, want on the hour", next)
	}
	// Fire it now instead of waiting for the hour.
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	runID := firedRun(t, h, 1)
	wait(t, runID, time.Minute)
	stories, comments := demosite.Expected(demosite.Options{Pages: 1}, 1)
	if got := len(stored(t, runID)); got != stories+comments {
		t.Fatalf("scheduled run %s stored %d items, want %d", runID, got, stories+comments)
	}
}
