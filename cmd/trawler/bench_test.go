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
	wantPages, wantItems := demoCrawlSize(demosite.Options{Pages: 2}, 2)
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
}

// The page and item counts the bench checks against are the documented ones.
func TestDemoCrawlSize(t *testing.T) {
	pages, items := demoCrawlSize(demosite.Options{Pages: 20}, 20)
	if pages != 1579 || items != 13770 {
		t.Fatalf("20 feed pages: %d pages, %d items; want 1579 and 13770", pages, items)
	}
}
