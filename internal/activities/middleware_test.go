package activities

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
)

// A step's `middlewares:` go into the worker's fetcher: the built-in header middleware
// reaches the site; a name this worker does not register fails the batch's inputs with
// the name, the registered ones and the fix.
func TestStepFetcherAppliesTheStepsMiddlewares(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("team=" + r.Header.Get("X-Team")))
	}))
	defer srv.Close()
	a := &Activities{Fetcher: fetch.New(fetch.Options{AllowPrivate: true})}
	b := crawl.Batch{Step: crawl.PlanStep{ID: "story", Middlewares: []crawl.MiddlewareRef{
		{Name: "header", Params: map[string]any{"X-Team": "news"}},
	}}}
	s, err := a.stepFetcher(crawl.TaskSpec{Name: "x.y"}, b)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Fetch(context.Background(), &crawl.Request{Method: "GET", URL: srv.URL + "/", IgnoreRobots: true})
	if err != nil || string(resp.Body) != "team=news" {
		t.Fatalf("%v %q, want the step's header sent", err, resp.Body)
	}

	b.Step.Middlewares = []crawl.MiddlewareRef{{Name: "hedaer"}}
	_, err = a.stepFetcher(crawl.TaskSpec{Name: "x.y"}, b)
	want := `step story: unknown middleware "hedaer" (did you mean "header"?); registered middlewares: `
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "; deploy a worker that registers it (crawl.RegisterMiddleware)") {
		t.Fatalf("error %v, want it to start %q", err, want)
	}
}
