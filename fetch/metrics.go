package fetch

import (
	"context"
	"net/url"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/monitor"
)

// Metrics records how long each fetch took, per host, in the trawler_fetch_seconds
// histogram: the whole request as the task waits for it — politeness waits, robots.txt,
// in-process retries and lease switches included — whatever its answer or error.
//
// It sits just inside StatusCheck, outside everything else, so the time is what the
// task waited.
func Metrics() crawl.Middleware {
	return func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			start := time.Now()
			resp, err := next.Fetch(ctx, r)
			if u, perr := url.Parse(r.URL); perr == nil && u.Host != "" {
				monitor.FetchSeconds.WithLabelValues(u.Host).Observe(time.Since(start).Seconds())
			}
			return resp, err
		})
	}
}
