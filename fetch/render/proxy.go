package render

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// proxy is the only way out of a browser. Chromium is started with it as its proxy,
// loopback included, and with a host resolver that resolves nothing, so every
// connection the browser opens by itself — a navigation or frame the page's
// interception did not answer, a popup, a service worker's fetch, a WebSocket, a
// preconnect, the browser's own background services — ends here, on loopback, in the
// worker. Each tab's browser context has a proxy of its own, which answers for the page
// the tab shows: a request through the page's fetcher, a tunnel (CONNECT: WebSockets
// and HTTPS) through its address guard. The browser's own proxy has no page and refuses
// everything, as does a tab's between pages.
type proxy struct {
	ln   net.Listener
	srv  *http.Server
	page func() *pageRun // nil: refuse everything
	wg   sync.WaitGroup  // tunnels
}

// startProxy listens on a loopback port of its own.
func startProxy(page func() *pageRun) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the browser's proxy: %w", err)
	}
	p := &proxy{ln: ln, page: page}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// addr is the proxy as Chromium's --proxy-server takes it.
func (p *proxy) addr() string { return "http://" + p.ln.Addr().String() }

// close stops the proxy and its tunnels.
func (p *proxy) close() {
	_ = p.srv.Close()
	p.wg.Wait()
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var pg *pageRun
	if p.page != nil {
		pg = p.page()
	}
	switch {
	case pg == nil:
		http.Error(w, "this browser has no page to make requests for", http.StatusForbidden)
	case req.Method == http.MethodConnect:
		p.tunnel(w, req, pg)
	case !req.URL.IsAbs():
		http.Error(w, "a proxy request names its URL in full", http.StatusBadRequest)
	case req.Header.Get("Upgrade") != "":
		http.Error(w, "upgrades are refused; a WebSocket goes through a tunnel (CONNECT)", http.StatusForbidden)
	default:
		pg.forward(w, req)
	}
}

// tunnel connects the browser to host:port through the page's address guard.
func (p *proxy) tunnel(w http.ResponseWriter, req *http.Request, pg *pageRun) {
	if pg.r.Dial == nil {
		http.Error(w, "this worker opens no tunnels for the browser", http.StatusForbidden)
		return
	}
	ctx, cancel := context.WithTimeout(pg.ctx, pg.r.Opts.Timeout)
	up, err := pg.r.Dial(ctx, "tcp", req.Host)
	cancel()
	if err != nil {
		status := http.StatusBadGateway
		if crawl.CauseOf(err) == crawl.CauseBlocked {
			status = http.StatusForbidden
		}
		http.Error(w, err.Error(), status)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, rw, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		_ = up.Close()
		_ = down.Close()
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		// The page's end, or the proxy's, ends the tunnel.
		stop := context.AfterFunc(pg.ctx, func() { _ = up.Close(); _ = down.Close() })
		defer stop()
		done := make(chan struct{})
		go func() {
			_, _ = io.Copy(up, rw) // what the browser sent, buffered ones first
			_ = up.Close()
			close(done)
		}()
		_, _ = io.Copy(down, up)
		_ = down.Close()
		<-done
	}()
}

// forward answers a request of the browser's through the page's fetcher.
func (pg *pageRun) forward(w http.ResponseWriter, req *http.Request) {
	pg.begin()
	defer pg.end()
	creq := &crawl.Request{Method: req.Method, URL: req.URL.String(), Header: req.Header.Clone()}
	for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "User-Agent"} {
		creq.Header.Del(h) // hop by hop; the user agent is the worker's (or a leased one)
	}
	if req.Body != nil {
		creq.Body, _ = io.ReadAll(io.LimitReader(req.Body, 10<<20))
	}
	// An answer of any status is the page's business, as for its intercepted requests.
	creq.Accept = func(int) bool { return true }
	resp, err := pg.r.Inner.Fetch(pg.ctx, creq)
	if err != nil {
		status := http.StatusBadGateway
		if crawl.CauseOf(err) == crawl.CauseBlocked {
			status = http.StatusForbidden
		}
		http.Error(w, err.Error(), status)
		return
	}
	for k, vs := range resp.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Encoding", "Content-Length", "Transfer-Encoding", "Connection": // the body is decoded
			continue
		}
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}
