package render

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// Requests a page makes go through the step's fetcher, not the browser's network
// stack, and still carry the cookies the site set while the page was browsed: one its
// answer set (Set-Cookie) and one a script set (document.cookie) both go with the XHR
// that fills the page.
func TestPageRequestsCarryCookiesTheSiteSet(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "consent", Value: "yes", Path: "/"})
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<html><body><div id="out"></div><script>
document.cookie = "region=eu; path=/";
fetch("/items").then(r => r.text()).then(t => { document.getElementById("out").textContent = t });
</script></body></html>`))
	})
	mux.HandleFunc("/items", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("cookie header: " + r.Header.Get("Cookie")))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	p := startPool(t, Options{Browsers: 1, Tabs: 1})
	r := renderer(p, crawl.Render{Mode: crawl.RenderAlways, Timeout: 5 * time.Second, Viewport: crawl.DefaultViewport, Block: crawl.DefaultRenderBlock, Idle: true, WaitFor: "#out:not(:empty)"})
	resp, err := r.Fetch(context.Background(), &crawl.Request{URL: srv.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	body := string(resp.Body)
	for _, c := range []string{"consent=yes", "region=eu"} {
		if !strings.Contains(body, c) {
			t.Errorf("the page's XHR went without the cookie %s:\n%s", c, body)
		}
	}
}
