//go:build !production

package devcli

import (
	"context"
	"encoding/json"
	"github.com/trawlerhq/trawler/internal/cli"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
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
