package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
)

// A chain names user middlewares registered in Go: one at the chain level adds the
// team's header to every request, one on the step counts the 403s the site answers. A
// real run on the embedded stack goes through them in the worker's fetcher.

// forbiddenSeen counts the 403 answers the step's middleware saw.
var forbiddenSeen atomic.Int64

func init() {
	crawl.RegisterMiddleware("e2e_team_header", func(params map[string]any) (crawl.Middleware, error) {
		team, _ := params["team"].(string)
		if team == "" {
			return nil, fmt.Errorf("param team: give the team's name, e.g. e2e_team_header: {team: news}")
		}
		return fetch.SetHeaders(http.Header{"X-Team": {team}}), nil
	})
	crawl.RegisterMiddleware("e2e_count_forbidden", func(map[string]any) (crawl.Middleware, error) {
		return func(next crawl.Fetcher) crawl.Fetcher {
			return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
				resp, err := next.Fetch(ctx, r)
				if resp != nil && resp.Status == http.StatusForbidden {
					forbiddenSeen.Add(1)
				}
				return resp, err
			})
		}, nil
	})
	crawl.Default.Register(crawl.TaskFunc(crawl.TaskSpec{
		Name:   "mwtest.page",
		Params: []crawl.Param{{Name: "base_url", Type: crawl.URL}, {Name: "pages", Type: crawl.Int}},
		Output: []crawl.Field{{Name: "body", Type: crawl.String}},
		Seeds: func(p crawl.Params) []crawl.Input {
			var in []crawl.Input
			for i := 1; i <= p.Int("pages"); i++ {
				in = append(in, crawl.Input{URL: fmt.Sprintf("%s/page/%d", p.String("base_url"), i)})
			}
			return in
		},
	}, func(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
		resp, err := env.Get(ctx, in.URL)
		if err != nil {
			return crawl.Result{}, err
		}
		return crawl.Result{Items: []crawl.Item{{Key: in.URL, URL: in.URL, Data: map[string]any{"body": string(resp.Body)}}}}, nil
	}))
}

func TestChainMiddlewaresRunInTheWorkersFetcher(t *testing.T) {
	var withoutTeam atomic.Int64
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Team") != "news" {
			withoutTeam.Add(1)
		}
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/page/3", "/page/7":
			http.Error(w, "members only", http.StatusForbidden)
		default:
			_, _ = io.WriteString(w, "page "+strings.TrimPrefix(r.URL.Path, "/page/"))
		}
	}))
	defer site.Close()
	forbiddenSeen.Store(0)

	chain := `name: middlewares
middlewares:
  - e2e_team_header: {team: news}
steps:
  - id: pages
    task: mwtest.page
    retries: 2
    middlewares: [e2e_count_forbidden]
    params: {pages: 10}
`
	id := start(t, plan(t, "middlewares.yaml", chain, "base_url="+site.URL), taskQueue)
	s := wait(t, id, 2*time.Minute)

	keys := stored(t, id)
	if len(keys) != 8 {
		t.Errorf("stored %d pages, want the 8 that answer 200: %v", len(keys), keys)
	}
	assertOnce(t, keys)
	if n := withoutTeam.Load(); n != 0 {
		t.Errorf("%d requests (robots.txt included) went out without the chain's X-Team header", n)
	}
	// A 403 is permanent: each forbidden page is fetched once, and the step's
	// middleware saw each as a response before the fetcher failed it.
	if n := forbiddenSeen.Load(); n != 2 {
		t.Errorf("the step's middleware counted %d 403 answers, want 2", n)
	}
	if len(s.Failures) != 2 {
		t.Fatalf("%d failures, want pages 3 and 7: %+v", len(s.Failures), s.Failures)
	}
	for _, f := range s.Failures {
		if f.Class != crawl.CauseHTTP403 || f.Attempts != 1 || !strings.Contains(f.Cause, "HTTP 403 Forbidden") {
			t.Errorf("failure %+v, want one permanent http_403 attempt", f)
		}
	}
}
