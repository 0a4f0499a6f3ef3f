package activities

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/storage"
)

func TestStepFetcherAppliesChainRobotsSwitch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			w.Write([]byte("User-agent: *\nDisallow: /private\n"))
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	f := fetch.New(fetch.Options{AllowPrivate: true})
	ctx := context.Background()
	obey := stepFetcher{f: f, spec: crawl.TaskSpec{Name: "x.y"}}
	_, err := obey.Fetch(ctx, &crawl.Request{Method: "GET", URL: srv.URL + "/private/1"})
	if err == nil || !crawl.IsPermanent(err) || !strings.Contains(err.Error(), "set robots: false on the chain") {
		t.Fatalf("robots.txt not obeyed: %v", err)
	}
	ignore := stepFetcher{f: f, spec: crawl.TaskSpec{Name: "x.y"}, ignoreRobots: true}
	resp, err := ignore.Fetch(ctx, &crawl.Request{Method: "GET", URL: srv.URL + "/private/1"})
	if err != nil || string(resp.Body) != "ok" {
		t.Fatalf("robots: false did not reach the fetcher: %v", err)
	}
}

func TestItemIDsAreStablePerRunAndKey(t *testing.T) {
	seen := map[int64]string{}
	for i := 0; i < 20000; i++ {
		key := fmt.Sprintf("demo:story:%d", i)
		id := itemID("run-1", key)
		if id <= 0 || id != itemID("run-1", key) {
			t.Fatalf("id %d of %s: not positive or not stable", id, key)
		}
		if other, dup := seen[id]; dup {
			t.Fatalf("%s and %s share id %d", key, other, id)
		}
		seen[id] = key
		if itemID("run-2", key) == id {
			t.Fatalf("%s has the same id in two runs", key)
		}
	}
}

// `store: [all]` is every store of the worker but its pools; a plan changed in code may
// name more beside it.
func TestStoresOfAll(t *testing.T) {
	a := &Activities{Sinks: storage.Set{"jsonl": nil, "kafka": nil, "pool:cookie": nil}}
	for _, tc := range []struct {
		store []string
		want  string
	}{
		{[]string{"all"}, "[jsonl kafka]"},
		{[]string{"all", "hbase"}, "[jsonl kafka hbase]"},
		{[]string{"kafka"}, "[kafka]"},
		{nil, "[]"},
	} {
		if got := fmt.Sprint(a.storesOf(crawl.PlanStep{Store: tc.store})); got != tc.want {
			t.Errorf("store %v: %s, want %s", tc.store, got, tc.want)
		}
	}
}
