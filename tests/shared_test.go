package tests

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"trawler/crawl"
	"trawler/internal/devstack/demosite"
)

// countingSite puts a counter of requests per path and query in front of a demo site.
func countingSite(t *testing.T, o demosite.Options) (string, func(path string) int) {
	t.Helper()
	target, err := url.Parse(startSite(t, o))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	hits := map[string]int{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.RequestURI()]++
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func(path string) int {
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
	for _, id := range []string{a, b} {
		s := wait(t, id, 2*time.Minute)
		if _, _, _, failed := s.Totals(); failed != 0 {
			t.Fatalf("run %s: %d failures: %+v", id, failed, s.Failures)
		}
		assertDemoStored(t, stored(t, id), o, 2)
	}
	for _, page := range []string{"/news?p=1", "/news?p=2"} {
		if n := hits(page); n != 1 {
			t.Errorf("%s fetched %d times by the two chains; a shared source fetches it once", page, n)
		}
	}
	if n := hits("/item/1"); n != 2 {
		t.Errorf("story 1 fetched %d times; each chain fetches its own (not shared) stories", n)
	}
}
