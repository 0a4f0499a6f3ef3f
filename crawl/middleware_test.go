package crawl_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

// tag is a middleware that appends its name to a trace on the way in.
func tag(name string, trace *[]string) crawl.Middleware {
	return func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			*trace = append(*trace, name)
			return next.Fetch(ctx, r)
		})
	}
}

func TestWrapPutsTheFirstMiddlewareOutermost(t *testing.T) {
	var trace []string
	end := crawl.FetcherFunc(func(context.Context, *crawl.Request) (*crawl.Response, error) {
		trace = append(trace, "fetcher")
		return &crawl.Response{Status: 200}, nil
	})
	f := crawl.Wrap(end, tag("outer", &trace), nil, tag("inner", &trace))
	if _, err := f.Fetch(context.Background(), &crawl.Request{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(trace, " → "); got != "outer → inner → fetcher" {
		t.Fatalf("order %s", got)
	}
}

func init() {
	crawl.RegisterMiddleware("test_tag", func(params map[string]any) (crawl.Middleware, error) {
		if _, ok := params["label"].(string); !ok && params != nil {
			return nil, errors.New("param label: want a text label, e.g. test_tag: {label: a}")
		}
		return func(next crawl.Fetcher) crawl.Fetcher { return next }, nil
	})
}

func TestChainMiddlewares(t *testing.T) {
	const chain = `name: news
middlewares: [test_tag]
steps:
  - id: feed
    task: news.feed
    middlewares:
      - test_tag: {label: feed}
  - id: story
    task: news.story
    from: feed
`
	reg := testRegistry()
	c, err := crawl.Load("news.yaml", []byte(chain), crawl.LoadOptions{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(reg)
	if err != nil {
		t.Fatal(err)
	}
	feed, story := p.Steps[0].Middlewares, p.Steps[1].Middlewares
	if len(feed) != 2 || feed[0].Name != "test_tag" || feed[0].Params != nil || feed[1].Params["label"] != "feed" {
		t.Fatalf("feed middlewares %+v, want the chain's then the step's", feed)
	}
	if len(story) != 1 || story[0].Name != "test_tag" {
		t.Fatalf("story middlewares %+v, want the chain's", story)
	}
	if _, err := crawl.BuildMiddlewares(feed); err != nil {
		t.Fatal(err)
	}

	names := strings.Join(crawl.MiddlewareNames(), ", ")
	for _, tc := range []struct{ yaml, want string }{
		{"name: x\nmiddlewares: [test_tga]\nsteps:\n  - id: a\n    task: news.feed\n",
			`f.yaml:2: middlewares: unknown middleware "test_tga" (did you mean "test_tag"?); registered middlewares: ` + names},
		{"name: x\nsteps:\n  - id: a\n    task: news.feed\n    middlewares:\n      - test_tag: {label: 3}\n",
			`f.yaml:6: step "a": middleware test_tag: param label: want a text label, e.g. test_tag: {label: a}`},
		{"name: x\nsteps:\n  - id: a\n    task: news.feed\n    middlewares: test_tag\n",
			"f.yaml:5: `step 1.middlewares` must be a list of middleware names, e.g. [header], not a plain value (\"test_tag\")"},
	} {
		_, err := crawl.Load("f.yaml", []byte(tc.yaml), crawl.LoadOptions{Registry: reg})
		if err == nil || err.Error() != tc.want {
			t.Errorf("got  %v\nwant %s", err, tc.want)
		}
	}
}
