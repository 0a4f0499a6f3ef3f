package activities

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/archive"
)

// readers are the archives a worker's reparse steps read, kept open between batches:
// opening one reads the run's whole CDXJ index. The few most recently used are kept.
type readers struct {
	mu   sync.Mutex
	open []openReader
}

type openReader struct {
	key    readerKey
	r      *archive.Reader
	opened time.Time
}

type readerKey struct {
	sel    crawl.Reparse
	tenant string
}

// keptReaders bounds the archives kept open: one per reparse running on the worker.
const keptReaders = 4

// get is the reader of a reparse step of tenant's run, opened when no batch has it.
func (rs *readers) get(ctx context.Context, sel crawl.Reparse, tenant string) (*archive.Reader, error) {
	k := readerKey{sel, tenant}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i, o := range rs.open {
		if o.key == k {
			rs.open[i].opened = time.Now()
			return o.r, nil
		}
	}
	r, err := archive.OpenReader(ctx, sel, tenant)
	if err != nil {
		return nil, err
	}
	if len(rs.open) >= keptReaders {
		oldest := 0
		for i, o := range rs.open {
			if o.opened.Before(rs.open[oldest].opened) {
				oldest = i
			}
		}
		// A batch still reading it fails the read at hand with a retryable error,
		// and its retry opens the archive again.
		_ = rs.open[oldest].r.Close()
		rs.open = append(rs.open[:oldest], rs.open[oldest+1:]...)
	}
	rs.open = append(rs.open, openReader{key: k, r: r, opened: time.Now()})
	return r, nil
}

// reparseFetcher is what a reparse step fetches through: the archive of the run it
// re-parses, and for the pages that are not in it the worker's fetcher with
// `--fetch-missing`, else none.
func (a *Activities) reparseFetcher(b crawl.Batch) (crawl.Fetcher, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := a.readers.get(ctx, *b.Step.Reparse, cmp.Or(b.Tenant, crawl.DefaultTenant))
	if err != nil {
		return nil, err
	}
	var missing crawl.Fetcher
	if b.Step.Reparse.FetchMissing {
		missing = a.Fetcher
	}
	return r.Fetcher(missing), nil
}
