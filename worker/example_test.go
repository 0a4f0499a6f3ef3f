package worker_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/worker"
)

// Headline is what the example task stores.
type Headline struct {
	Title string `json:"title" css:"h1" required:"true"`
}

var headline = crawl.HTMLTask("example.headline", func(p *crawl.Page, out *crawl.Out[Headline]) error {
	out.PageItem(out.Scan(p))
	return nil
}, crawl.StartAt("https://example.com/"))

// A worker process of your own: it runs example.headline (and the generic.* tasks) for
// chains started with `trawler run --temporal temporal.internal:7233`, until Ctrl-C.
func ExampleRun() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := worker.Run(ctx, worker.Config{Temporal: "temporal.internal:7233", OutDir: "/var/lib/trawler/out", Redis: "redis.internal:6379"}, headline)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// Run checks its config before it connects anywhere.
func ExampleConfig() {
	err := worker.Run(context.Background(), worker.Config{Temporal: "127.0.0.1:7233"}, headline)
	fmt.Println(err)
	// Output:
	// worker.Config.OutDir is empty: name the directory of the jsonl sink, e.g. /var/lib/trawler/out
}
