package activities

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"trawler/crawl"
	"trawler/fetch"
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
	f := fetch.New(fetch.Options{})
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

func TestSnowflakeIDsAreUniqueAndOrdered(t *testing.T) {
	s := newSnowflake(7)
	prev := int64(0)
	for i := 0; i < 20000; i++ {
		id := s.next()
		if id <= prev {
			t.Fatalf("id %d after %d: not increasing", id, prev)
		}
		if (id>>12)&0x3ff != 7 {
			t.Fatalf("node bits of %d are not 7", id)
		}
		prev = id
	}
}
