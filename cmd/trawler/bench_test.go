//go:build !production

package main

import (
	"context"
	"testing"
	"time"

	"trawler/internal/devstack/demosite"
)

// Both crawlers of `trawler bench crawl` must do the same, complete work; how fast they
// do it is not asserted.
func TestBenchCrawlSameWork(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := &settings{data: t.TempDir()}
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

	// The list → detail shape: no comments pages on either side.
	res, err = benchCrawl(ctx, &settings{data: t.TempDir()}, benchOptions{pages: 3, perPage: 7, depth: 2, concurrency: 4, runs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Colly.Pages != 3+21 || res.Trawler.Pages != 3+21 || res.Colly.Items != 21 || res.Trawler.Items != 21 {
		t.Errorf("3 list pages × 7 details at depth 2: colly %d pages %d items, trawler %d pages %d items; want 24 pages, 21 items",
			res.Colly.Pages, res.Colly.Items, res.Trawler.Pages, res.Trawler.Items)
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
	res, err := benchHops(ctx, &settings{data: t.TempDir()}, 6, 1)
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
