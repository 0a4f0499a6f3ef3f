package tests

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
)

// countingSite puts a counter of requests per path and query in front of a demo site.
func countingSite(t *testing.T, o demosite.Options) (string, func(path string) int) {
	t.Helper()
	var mu sync.Mutex
	hits := map[string]int{}
	return inFrontOf(t, startSite(t, o), func(w http.ResponseWriter, r *http.Request, site http.Handler) {
			mu.Lock()
			hits[r.URL.RequestURI()]++
			mu.Unlock()
			site.ServeHTTP(w, r)
		}), func(path string) int {
			mu.Lock()
			defer mu.Unlock()
			return hits[path]
		}
}

// sharedFeed is the demo chain with its feed step made a shared source.
func sharedFeed(t *testing.T, tenant, site string) *crawl.Plan {
	t.Helper()
	p := plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=2")
	p.Tenant = tenantOf(t) + "-" + tenant
	for i := range p.Steps {
		if p.Steps[i].ID == "feed" {
			p.Steps[i].Shared = time.Minute
		}
	}
	return p
}

// Two chains of two tenants read the same feed: each feed page is fetched once in the
// interval, and both chains store every story and comment the feed leads to.
func TestSharedSourceFetchedOnce(t *testing.T) {
	o := demosite.Options{Pages: 3, Latency: 20 * time.Millisecond}
	site, hits := countingSite(t, o)
	a := start(t, sharedFeed(t, "a", site), taskQueue)
	b := start(t, sharedFeed(t, "b", site), taskQueue)
	assertFeedShared(t, o, hits, "the chains of two tenants", a, b)
	if n := hits("/item/1"); n != 2 {
		t.Errorf("story 1 fetched %d times; each chain fetches its own (not shared) stories", n)
	}
}

// renamedFeed is the demo chain under another name, with other step ids; its feed is
// a shared source read with the same task, params and input as any other such chain.
const renamedFeed = `
name: %s
defaults: {params: {base_url: %q}}
steps:
  - {id: %s, task: demo.feed, from: %[3]s, max_depth: 1000, shared: 1m, params: {pages: 2}}
  - {id: %s, task: demo.story, from: %[3]s, store: [jsonl]}
  - {id: replies, task: demo.comments, from: [%[4]s, replies], max_depth: 100, store: [jsonl]}
`

// What makes a source shared is the task, its params and the input, not the chain or
// the step that reads it: two chains of other names and step ids fetch the feed once.
func TestSharedSourceAcrossChainsAndSteps(t *testing.T) {
	o := demosite.Options{Pages: 3, Latency: 20 * time.Millisecond}
	site, hits := countingSite(t, o)
	var ids []string
	for _, c := range []struct{ name, feed, story string }{{"frontpage", "front", "article"}, {"headlines", "news", "detail"}} {
		p := plan(t, c.name+".yaml", fmt.Sprintf(renamedFeed, c.name, site, c.feed, c.story))
		p.Tenant += "-" + c.name // its own dedup, so both store everything
		ids = append(ids, start(t, p, taskQueue))
	}
	assertFeedShared(t, o, hits, "chains frontpage and headlines", ids...)
}

// assertFeedShared waits for runs that each read two feed pages of a shared source:
// every run stores all the feed leads to, and each feed page was fetched once.
func assertFeedShared(t *testing.T, o demosite.Options, hits func(string) int, who string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		s := wait(t, id, 2*time.Minute)
		if _, _, _, failed := s.Totals(); failed != 0 {
			t.Fatalf("run %s: %d failures: %+v", id, failed, s.Failures)
		}
		assertDemoStored(t, stored(t, id), o, 2)
	}
	for _, page := range []string{"/news?p=1", "/news?p=2"} {
		if n := hits(page); n != 1 {
			t.Errorf("%s fetched %d times by %s; a shared source fetches it once per interval", page, n, who)
		}
	}
}
