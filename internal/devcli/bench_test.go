//go:build !production

package devcli

import (
	"context"
	"encoding/json"
	"github.com/trawlerhq/trawler/internal/cli"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
)

// Both crawlers of `trawler bench crawl` must do the same, complete work; how fast they
// do it is not asserted.
func TestBenchCrawlSameWork(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := &cli.Settings{Data: t.TempDir()}
	res, err := benchCrawl(ctx, s, benchOptions{pages: 2, concurrency: 4, runs: 2})
	if err != nil {
		t.Fatal(err)
	}
	wantPages, wantItems := demoCrawlSize(demosite.Options{Pages: 2}, 2, 3)
	if res.Colly.Pages != wantPages || res.Trawler.Pages != wantPages {
		t.Errorf("pages: colly %d, trawler %d, want %d", res.Colly.Pages, res.Trawler.Pages, wantPages)
	}
	if res.Colly.Items != wantItems || res.Trawler.Items != wantItems {
		t.Errorf("items: colly %d, trawler %d, want %d", res.Colly.Items, res.Trawler.Items, wantItems)
	}
	if len(res.CollyRuns) != 2 || len(res.TrawlerRuns) != 2 {
		t.Errorf("runs: colly %v, trawler %v, want 2 each", res.CollyRuns, res.TrawlerRuns)
	}
	if res.Pages != wantPages || res.Items != wantItems || res.Concurrency != 4 {
		t.Errorf("result %+v", res)
	}
	if res.Colly.CPUPerPageMS <= 0 || res.Trawler.CPUPerPageMS <= 0 {
		t.Errorf("CPU per page: colly %v ms, trawler %v ms; both crawls used the CPU", res.Colly.CPUPerPageMS, res.Trawler.CPUPerPageMS)
	}

	// The list → detail shape, pre-rendered, with the worker on Redis: no comments pages on
	// either side, and the Redis commands are counted.
	res, err = benchCrawl(ctx, &cli.Settings{Data: t.TempDir()}, benchOptions{pages: 3, perPage: 7, depth: 2, concurrency: 4, runs: 1, site: "static", redis: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Colly.Pages != 3+21 || res.Trawler.Pages != 3+21 || res.Colly.Items != 21 || res.Trawler.Items != 21 {
		t.Errorf("3 list pages × 7 details at depth 2: colly %d pages %d items, trawler %d pages %d items; want 24 pages, 21 items",
			res.Colly.Pages, res.Colly.Items, res.Trawler.Pages, res.Trawler.Items)
	}
	if res.Site != "static" || res.RedisCommandsPerPage == nil || *res.RedisCommandsPerPage <= 0 || len(res.Processes) != 1 || res.Processes[0].CPUPerPageMS <= 0 {
		t.Errorf("static site on Redis: site %q, Redis commands per page %v, processes %+v; want the count (the seen-set uses Redis) and this process's CPU",
			res.Site, res.RedisCommandsPerPage, res.Processes)
	}
}

// `trawler bench crawl --worker-process` runs the worker as trawler worker in a process of
// its own, on the bench's stack and Redis: both sides still do the same, complete work,
// the worker process's CPU is measured apart and counted in Trawler's, and the process
// is gone when the bench returns.
func TestBenchCrawlWorkerProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the trawler binary and starts an embedded Temporal server")
	}
	bin := buildTrawler(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := t.TempDir()
	res, err := benchCrawl(ctx, &cli.Settings{Data: data}, benchOptions{pages: 2, concurrency: 4, runs: 1, redis: true, workerProcess: true, workerBinary: bin})
	if err != nil {
		t.Fatal(err)
	}
	wantPages, wantItems := demoCrawlSize(demosite.Options{Pages: 2}, 2, 3)
	if res.Colly.Pages != wantPages || res.Trawler.Pages != wantPages || res.Colly.Items != wantItems || res.Trawler.Items != wantItems {
		t.Errorf("colly %d pages %d items, trawler %d pages %d items; want %d pages, %d items",
			res.Colly.Pages, res.Colly.Items, res.Trawler.Pages, res.Trawler.Items, wantPages, wantItems)
	}
	if !res.WorkerProcess || res.Trawler.WorkerProcessCPUPerPageMS <= 0 {
		t.Errorf("worker process %v, its CPU per page %v ms; want it measured", res.WorkerProcess, res.Trawler.WorkerProcessCPUPerPageMS)
	}
	// The worker used the bench's embedded Redis (the seen-set's commands are counted
	// there), and its CPU is a row of its own, in the ratio with this process's.
	if res.RedisCommandsPerPage == nil || *res.RedisCommandsPerPage <= 0 {
		t.Errorf("Redis commands per page %v: the worker process did not use the bench's Redis", res.RedisCommandsPerPage)
	}
	if len(res.Processes) != 2 || res.Processes[1].Name != "worker process: worker, sinks" || res.Processes[1].CPUPerPageMS != res.Trawler.WorkerProcessCPUPerPageMS {
		t.Errorf("processes %+v; want this one's and the worker process's", res.Processes)
	}
	all := res.Trawler.CPUPerPageMS + res.Trawler.WorkerProcessCPUPerPageMS
	if want := cli.RoundTo(all/res.Colly.CPUPerPageMS, 2); res.CPURatio != want {
		t.Errorf("CPU ratio %v, want both processes' %v ms over Colly's %v ms = %v", res.CPURatio, all, res.Colly.CPUPerPageMS, want)
	}
	log, err := os.ReadFile(filepath.Join(data, "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "worker polling task queue") {
		t.Errorf("the worker process's log lacks its start-up line:\n%s", log)
	}
	if pids := processesOf(t, bin); len(pids) > 0 {
		t.Errorf("the worker process still runs after the bench: pids %v", pids)
	}
	text := captureStdout(t, res.print)
	if !strings.Contains(text, "worker in its own process") || !strings.Contains(text, "worker process: worker, sinks") {
		t.Errorf("the report does not show the worker process:\n%s", text)
	}
}

// A worker process that ends before it polls fails the bench at once, saying how it
// ended and where its log is, and showing the log's end.
func TestBenchWorkerProcessEndingEarlyIsReported(t *testing.T) {
	log := filepath.Join(t.TempDir(), "worker.log")
	// /bin/sh takes "worker" for a script, finds none and exits with an error.
	s := &cli.Settings{Temporal: "127.0.0.1:7233", Namespace: "default"}
	_, err := startWorkerProcess(context.Background(), noPollers{}, s, "/bin/sh", engine.WorkerOptions{TaskQueue: "bench", OutDir: t.TempDir()}, log)
	if err == nil {
		t.Fatal("no error from a worker process that exited at once")
	}
	for _, want := range []string{"--worker-process: the worker process (/bin/sh worker --temporal 127.0.0.1:7233", `ended before it polled task queue "bench" (exit status`, "its log " + log + " ends:", "No such file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
}

// noPollers is a Temporal client whose task queues have no pollers.
type noPollers struct{ client.Client }

func (noPollers) DescribeTaskQueue(context.Context, string, enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error) {
	return &workflowservice.DescribeTaskQueueResponse{}, nil
}

// processesOf lists the processes running the binary bin.
func processesOf(t *testing.T, bin string) []string {
	t.Helper()
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, path := range cmdlines {
		b, err := os.ReadFile(path)
		if arg0, _, _ := strings.Cut(string(b), "\x00"); err == nil && arg0 == bin {
			pids = append(pids, filepath.Base(filepath.Dir(path)))
		}
	}
	return pids
}

// buildTrawler builds the trawler binary for tests that run it as a worker process (the
// test binary is not one).
func buildTrawler(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "trawler")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/trawlerhq/trawler/cmd/trawler")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/trawler: %v\n%s", err, out)
	}
	return bin
}

// The page and item counts the bench checks against are the documented ones.
func TestDemoCrawlSize(t *testing.T) {
	pages, items := demoCrawlSize(demosite.Options{Pages: 20}, 20, 3)
	if pages != 1579 || items != 13770 {
		t.Fatalf("20 feed pages: %d pages, %d items; want 1579 and 13770", pages, items)
	}
}

// `trawler bench hops` crawls the same pages both ways: one batch per page through the
// server, one batch in all when the batch follows its pages; and it accounts for every
// phase of a hop. How long a hop takes is not asserted.
func TestBenchHopsCountsEveryHop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := benchHops(ctx, &cli.Settings{Data: t.TempDir()}, 6, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.ServerBatches != 6 || res.WorkerBatches != 1 {
		t.Errorf("batches: %d through the server, %d on the worker; want 6 and 1", res.ServerBatches, res.WorkerBatches)
	}
	for _, ph := range hopPhaseNames {
		if v, ok := res.Phases[ph]; !ok || v < 0 {
			t.Errorf("phase %q: %v", ph, v)
		}
	}
	if res.Phases[hopPhaseNames[1]] <= 0 {
		t.Errorf("phases %v: a batch that fetched a page took no time", res.Phases)
	}
}

// `trawler bench polite` prints what a user reads: the rate the site saw against the one
// declared (never above it), and both sides' CPU and Redis calls per page. How fast
// either side is is not asserted.
func TestBenchPolitePrintsRateAndCost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Temporal server and a redis-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := benchPolite(ctx, &cli.Settings{}, politeOptions{rate: 10, feedPages: 2, perPage: 8, pages: 200, concurrency: 8, limit: 16, rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	text := captureStdout(t, res.print)
	for _, want := range []string{"3 workers, declared 10/s; the site saw 19 requests", "achieved", "ratio", "busiest 1 s window",
		"local budgets (no sharing)", "fleet budgets (Redis)", "fleet over local:"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	var got struct {
		Rate struct {
			Declared  *float64 `json:"declared_per_s"`
			Achieved  *float64 `json:"achieved_per_s"`
			Ratio     *float64 `json:"ratio"`
			Requests  int      `json:"requests"`
			Busiest1s int      `json:"busiest_1s"`
		} `json:"rate"`
		Cost struct {
			Local, Fleet struct {
				Pages             int      `json:"pages"`
				CPUPerPageUS      float64  `json:"cpu_per_page_us"`
				RedisCallsPerPage *float64 `json:"redis_calls_per_page"`
			}
			Overhead *float64 `json:"overhead"`
		} `json:"cost"`
	}
	out := captureStdout(t, func() {
		if err := cli.PrintJSON(res); err != nil {
			t.Error(err)
		}
	})
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	r := got.Rate
	if r.Declared == nil || *r.Declared != 10 || r.Achieved == nil || r.Ratio == nil {
		t.Fatalf("rate fields missing: %s", out)
	}
	// 2 feed pages, 16 story pages and robots.txt, read once for the three workers.
	if r.Requests != 19 {
		t.Errorf("the site saw %d requests, want 19: %s", r.Requests, out)
	}
	if *r.Ratio <= 0 || *r.Ratio > 1.02 {
		t.Errorf("achieved/declared %v: the workers went above the declared 10/s", *r.Ratio)
	}
	if r.Busiest1s > 11 {
		t.Errorf("busiest second %d requests at a declared 10/s", r.Busiest1s)
	}
	c := got.Cost
	if c.Local.Pages != 400 || c.Fleet.Pages != 400 {
		t.Errorf("pages: local %d, fleet %d; want 2 rounds × 200 each", c.Local.Pages, c.Fleet.Pages)
	}
	if c.Local.CPUPerPageUS <= 0 || c.Fleet.CPUPerPageUS <= 0 || c.Overhead == nil {
		t.Errorf("CPU per page missing: %s", out)
	}
	if c.Fleet.RedisCallsPerPage == nil || *c.Fleet.RedisCallsPerPage <= 0 {
		t.Errorf("the fleet side made no Redis calls: %s", out)
	}
}

// A rate the bench cannot read is refused with the form it takes.
func TestBenchPoliteRefusesABadRate(t *testing.T) {
	cmd := benchPoliteCmd(&cli.Settings{})
	cmd.SetArgs([]string{"--rate", "fast"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	if err == nil || err.Error() != `--rate "fast": give a rate like 20/s, 600/m or 5/s` {
		t.Fatalf("got %v", err)
	}
}

// captureStdout runs fn, which prints a bench result, and returns what it printed.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = f
	fn()
	os.Stdout = saved
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// `trawler bench scale` starts worker processes that crawl its slow demo site on
// loopback to the end: every page of the site, no failure.
func TestBenchScaleWorkersCrawlTheSlowSite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the trawler binary and starts an embedded stack")
	}
	bin := buildTrawler(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	site := scaleSite{pages: 1, perPage: 4, latency: time.Millisecond}
	var err error
	out := captureStdout(t, func() {
		err = runBenchScale(ctx, &cli.Settings{JSON: true}, bin, []int{1, 2}, site, 2, 4, 16)
	})
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Points []scalePoint `json:"points"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	wantPages, _ := demoCrawlSize(demosite.Options{Pages: 1, PerPage: 4}, 1, 3)
	if len(res.Points) != 2 || res.Points[0].Pages != wantPages || res.Points[1].Pages != wantPages || res.Points[1].Workers != 2 {
		t.Errorf("points %+v; want 1 and 2 workers crawling %d pages each", res.Points, wantPages)
	}
	if pids := processesOf(t, bin); len(pids) > 0 {
		t.Errorf("worker processes still run after the bench: pids %v", pids)
	}
}

// A worker process of `trawler bench scale` that ends fails the bench at once, saying
// how it ended and showing its log, instead of leaving the run waiting for it.
func TestBenchScaleWorkerEndingIsReported(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded stack")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// /bin/sh takes "worker" for a script, finds none and exits with an error.
	err := runBenchScale(ctx, &cli.Settings{JSON: true}, "/bin/sh", []int{1}, scaleSite{pages: 1, perPage: 4, latency: time.Millisecond}, 2, 4, 16)
	if err == nil {
		t.Fatal("no error from a worker process that exited at once")
	}
	for _, want := range []string{"bench scale: the worker process (/bin/sh worker --data ", "ended before it polled task queue", "(exit status", "No such file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
}
