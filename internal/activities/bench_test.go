package activities

import (
	"fmt"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/sites/demo"
	"github.com/trawlerhq/trawler/internal/storage"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
)

// BenchmarkBatchPath runs batches of the demo site's story and comments pages, served
// from memory, through the whole batch path: fetch, parse, items, the jsonl sink, the
// checkpoint and the activity's result. It reports the allocations and bytes per page
// (of the benchmark process, site included), which -benchmem gives per batch:
//
//	go test -run XXX -bench BatchPath -benchmem ./internal/activities/
func BenchmarkBatchPath(b *testing.B) {
	const perBatch = 50
	h, err := demosite.StaticHandler(demosite.Options{Pages: 2})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, c := range []struct {
		task string
		path string // story id → page
	}{
		{demo.StoryTask, "/item/%d"},
		{demo.CommentsTask, "/item/%d/comments?p=1"},
	} {
		b.Run(c.task, func(b *testing.B) {
			sink, err := jsonl.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			a := &Activities{
				Registry: crawl.Default, Sinks: storage.Set{"jsonl": sink},
				Fetcher: fetch.New(fetch.Options{AllowPrivate: true}),
			}
			step := crawl.PlanStep{ID: "s", Task: c.task, Timeout: 10 * time.Second, Concurrency: 4, Store: []string{"jsonl"}}
			work := make([]crawl.Work, perBatch)
			for i := range work {
				work[i] = crawl.Work{Input: crawl.Input{URL: srv.URL + fmt.Sprintf(c.path, i+1)}}
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				res, err := runBatchActivity(b, a, crawl.Batch{Chain: "bench", RunID: "r" + strconv.Itoa(i), Step: step, Work: work})
				if err != nil || res.Pages != perBatch {
					b.Fatalf("batch: %d pages of %d, %v", res.Pages, perBatch, err)
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			pages := float64(b.N * perBatch)
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/pages, "allocs/page")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/pages, "B/page")
		})
	}
}
