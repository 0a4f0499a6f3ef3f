package fetch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

// What a site receives for a request: its method and body, the transport's User-Agent
// unless the request names its own, a body's type sniffed when the request names none,
// a JSON or XML body asking for its own type back, and the body sent again on a 307.
func TestRequestAsSent(t *testing.T) {
	type seen struct{ method, path, ua, ctype, accept, body string }
	var mu sync.Mutex
	var got []seen
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.Header.Get("User-Agent"), r.Header.Get("Content-Type"), r.Header.Get("Accept"), string(b)})
		mu.Unlock()
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/api", http.StatusTemporaryRedirect)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	f := New(fast())
	cases := []struct {
		name string
		req  crawl.Request
		want []seen
	}{
		{"a plain GET", crawl.Request{URL: s.URL + "/page"},
			[]seen{{"GET", "/page", "Trawler/1.0", "", "", ""}}},
		{"its own User-Agent", crawl.Request{URL: s.URL + "/page", Header: http.Header{"user-agent": {"OtherBot/2"}}},
			[]seen{{"GET", "/page", "OtherBot/2", "", "", ""}}},
		{"a form without a type", crawl.Request{Method: "post", URL: s.URL + "/form", Body: []byte("q=1&page=2")},
			[]seen{{"POST", "/form", "Trawler/1.0", "text/plain; charset=utf-8", "", "q=1&page=2"}}},
		{"a typed JSON body", crawl.Request{Method: "POST", URL: s.URL + "/api", Body: []byte(`{"q":1}`), Header: http.Header{"Content-Type": {"application/json"}}},
			[]seen{{"POST", "/api", "Trawler/1.0", "application/json", "application/json", `{"q":1}`}}},
		{"a JSON body asking for HTML", crawl.Request{Method: "POST", URL: s.URL + "/api", Body: []byte(`{"q":1}`), Header: http.Header{"Content-Type": {"application/json"}, "Accept": {"text/html"}}},
			[]seen{{"POST", "/api", "Trawler/1.0", "application/json", "text/html", `{"q":1}`}}},
		{"a body sent again on 307", crawl.Request{Method: "PUT", URL: s.URL + "/moved", Body: []byte("<a/>"), Header: http.Header{"Content-Type": {"text/xml; charset=utf-8"}}},
			[]seen{{"PUT", "/moved", "Trawler/1.0", "text/xml; charset=utf-8", "text/xml; charset=utf-8", "<a/>"}, {"PUT", "/api", "Trawler/1.0", "text/xml; charset=utf-8", "text/xml; charset=utf-8", "<a/>"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			resp, err := f.Fetch(context.Background(), &tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if string(resp.Body) != "ok" {
				t.Fatalf("body %q", resp.Body)
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("the site saw\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
	_, err := f.Fetch(context.Background(), &crawl.Request{Method: "GE T", URL: s.URL + "/page"})
	if err == nil || !crawl.IsPermanent(err) || !strings.Contains(err.Error(), `invalid method "GE T"`) {
		t.Fatalf("a method with a space: %v; want a permanent error naming it", err)
	}
}
