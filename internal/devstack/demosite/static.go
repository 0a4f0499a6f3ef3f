package demosite

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"
)

// StaticHandler returns the feed, story and comments pages of the demo site (and its
// robots.txt) rendered once, up front, and served from memory: the same pages and links
// as Handler, but each answer costs the site a map lookup and a write instead of a
// template run. A benchmark crawls it to measure what a crawler itself costs per page
// when the pages are cheap. Faults, Live and Latency do not apply.
func StaticHandler(o Options) (http.Handler, error) {
	o = o.WithDefaults()
	o.Faults, o.Live, o.Latency = nil, nil, 0
	site := newSite(o)
	pages := map[string][]byte{}
	render := func(uri string) error {
		rec := httptest.NewRecorder()
		site.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, uri, nil))
		if rec.Code != http.StatusOK {
			return fmt.Errorf("demo site: GET %s answered %d while rendering it ahead", uri, rec.Code)
		}
		pages[uri] = rec.Body.Bytes()
		return nil
	}
	uris := []string{"/robots.txt"}
	for p := 1; p <= o.Pages; p++ {
		uris = append(uris, "/news?p="+strconv.Itoa(p))
	}
	for id := 1; id <= o.Stories(); id++ {
		item := "/item/" + strconv.Itoa(id)
		uris = append(uris, item)
		for p := 1; p <= o.CommentPages(id); p++ {
			uris = append(uris, item+"/comments?p="+strconv.Itoa(p))
		}
	}
	for _, uri := range uris {
		if err := render(uri); err != nil {
			return nil, err
		}
	}
	length := make(map[string][]string, len(pages))
	for uri, b := range pages {
		length[uri] = []string{strconv.Itoa(len(b))}
	}
	html, text := []string{"text/html; charset=utf-8"}, []string{"text/plain; charset=utf-8"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uri := r.URL.RequestURI()
		b, ok := pages[uri]
		if !ok || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h["Content-Type"] = html
		if uri == "/robots.txt" {
			h["Content-Type"] = text
		}
		h["Content-Length"] = length[uri]
		_, _ = w.Write(b)
	}), nil
}

// StartStatic serves StaticHandler(o) on addr like Start.
func StartStatic(addr string, o Options) (baseURL string, stop func() error, err error) {
	h, err := StaticHandler(o)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), srv.Close, nil
}
