package fetch_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
)

// A fetcher fetches a page as a task's env.Fetch does: robots.txt, per-host limits and
// retries included. AllowPrivate lets it reach this test server on loopback, which
// the address guard refuses by default.
func ExampleNew() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nAllow: /\n")
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<h1>Hello</h1>")
	}))
	defer site.Close()

	f := fetch.New(fetch.Options{AllowPrivate: true})
	resp, err := f.Fetch(context.Background(), &crawl.Request{URL: site.URL + "/hello"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Status, string(resp.Body))
	// Output:
	// 200 <h1>Hello</h1>
}
