package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// server starts an httptest server whose /robots.txt answers 404 unless the handler
// serves it; requests counts the other requests.
type server struct {
	*httptest.Server
	requests atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/robots.txt" {
			s.requests.Add(1)
		}
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func robots404(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return true
	}
	return false
}

func get(f *Fetcher, u string) (*crawl.Response, error) {
	return f.Fetch(context.Background(), &crawl.Request{Method: http.MethodGet, URL: u})
}

func asError(t *testing.T, err error) *Error {
	t.Helper()
	if err == nil {
		t.Fatal("want an error, got nil")
	}
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %T %v is not a *fetch.Error", err, err)
	}
	return fe
}

// fast: short waits; the test servers listen on loopback, which the guard allows only
// when asked.
func fast() Options {
	return Options{Timeout: 2 * time.Second, Backoff: 10 * time.Millisecond, AllowPrivate: true}
}

func TestGzipBody(t *testing.T) {
	want := strings.Repeat("hello gzip ", 1000)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write([]byte(want))
		_ = zw.Close()
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(buf.Bytes())
	})
	f := New(fast())

	resp, err := get(f, s.URL+"/page")
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != want {
		t.Fatalf("transparent gzip: body %d bytes, want %d", len(resp.Body), len(want))
	}

	// A request that asks for gzip itself gets the body decoded too.
	resp, err = f.Fetch(context.Background(), &crawl.Request{
		URL:    s.URL + "/page",
		Header: http.Header{"Accept-Encoding": {"gzip"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != want {
		t.Fatalf("explicit gzip: body %d bytes, want %d", len(resp.Body), len(want))
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" {
		t.Fatalf("Content-Encoding %q left on a decoded body", ce)
	}
	if resp.Status != 200 {
		t.Fatalf("status %d", resp.Status)
	}
}

func TestRedirects(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		if ua := r.Header.Get("User-Agent"); ua != "Trawler/1.0" {
			t.Errorf("%s: User-Agent %q", r.URL.Path, ua)
		}
		switch r.URL.Path {
		case "/a":
			http.Redirect(w, r, "/b", http.StatusFound)
		case "/b":
			http.Redirect(w, r, "/c", http.StatusMovedPermanently)
		case "/c":
			http.Redirect(w, r, "/final?x=1", http.StatusSeeOther)
		case "/final":
			_, _ = io.WriteString(w, "done")
		}
	})

	resp, err := get(New(fast()), s.URL+"/a")
	if err != nil {
		t.Fatal(err)
	}
	if resp.URL != s.URL+"/final?x=1" || string(resp.Body) != "done" {
		t.Fatalf("URL %q body %q", resp.URL, resp.Body)
	}

	o := fast()
	o.MaxRedirects = 2
	_, err = get(New(o), s.URL+"/a")
	fe := asError(t, err)
	if !crawl.IsPermanent(err) || fe.Status != http.StatusSeeOther {
		t.Fatalf("too many redirects: permanent=%v status=%d: %v", crawl.IsPermanent(err), fe.Status, err)
	}
	want := fmt.Sprintf("GET %s/a: stopped after 2 redirects, next was %s/final?x=1 (raise fetch max_redirects) (1 attempt)", s.URL, s.URL)
	if err.Error() != want {
		t.Fatalf("error\n got %q\nwant %q", err.Error(), want)
	}
}

func TestRetryThenSuccess(t *testing.T) {
	var n atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		if n.Add(1) < 3 {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	resp, err := get(New(fast()), s.URL+"/item/7")
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != "ok" {
		t.Fatalf("body %q", resp.Body)
	}
	if got := s.requests.Load(); got != 3 {
		t.Fatalf("server saw %d requests, want 3 (two 500s, then 200)", got)
	}
}

func TestAlways500(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	_, err := get(New(fast()), s.URL+"/item/7")
	fe := asError(t, err)
	want := "GET " + s.URL + "/item/7: HTTP 500 Internal Server Error (3 attempts)"
	if err.Error() != want {
		t.Fatalf("error\n got %q\nwant %q", err.Error(), want)
	}
	if fe.Attempts != 3 || fe.Status != 500 || fe.Method != "GET" || fe.URL != s.URL+"/item/7" {
		t.Fatalf("fields %+v", fe)
	}
	if crawl.IsPermanent(err) {
		t.Fatal("a 500 must not be permanent")
	}
	if d := crawl.RetryDelay(err); d != 0 {
		t.Fatalf("RetryDelay %v without Retry-After", d)
	}
	if got := s.requests.Load(); got != 3 {
		t.Fatalf("server saw %d requests, want 3", got)
	}
}

func TestRetryAfterShort(t *testing.T) {
	var mu sync.Mutex
	var times []time.Time
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		mu.Lock()
		times = append(times, time.Now())
		first := len(times) == 1
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	resp, err := get(New(fast()), s.URL+"/x")
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != "ok" {
		t.Fatalf("body %q", resp.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(times) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(times))
	}
	if gap := times[1].Sub(times[0]); gap < 900*time.Millisecond {
		t.Fatalf("retried after %v, Retry-After asked for 1s", gap)
	}
}

func TestRetryAfterLong(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		w.Header().Set("Retry-After", "3600")
		http.Error(w, "come back later", http.StatusTooManyRequests)
	})
	_, err := get(New(fast()), s.URL+"/x")
	fe := asError(t, err)
	if d := crawl.RetryDelay(err); d != time.Hour {
		t.Fatalf("RetryDelay %v, want 1h", d)
	}
	if crawl.IsPermanent(err) {
		t.Fatal("a 429 must not be permanent")
	}
	if fe.Attempts != 1 || s.requests.Load() != 1 {
		t.Fatalf("attempts %d, server saw %d; a long Retry-After must not be slept on", fe.Attempts, s.requests.Load())
	}
	want := "GET " + s.URL + "/x: HTTP 429 Too Many Requests (1 attempt)"
	if err.Error() != want {
		t.Fatalf("error\n got %q\nwant %q", err.Error(), want)
	}
}

func TestNotFoundPermanent(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	})
	_, err := get(New(fast()), s.URL+"/missing")
	fe := asError(t, err)
	want := "GET " + s.URL + "/missing: HTTP 404 Not Found (1 attempt)"
	if err.Error() != want {
		t.Fatalf("error\n got %q\nwant %q", err.Error(), want)
	}
	if !crawl.IsPermanent(err) || fe.Status != 404 {
		t.Fatalf("permanent=%v status=%d", crawl.IsPermanent(err), fe.Status)
	}
	if got := s.requests.Load(); got != 1 {
		t.Fatalf("server saw %d requests, want 1 (no retries on 404)", got)
	}
}

func TestBodyTooLarge(t *testing.T) {
	const total = 50 << 20
	written := make(chan int64, 1)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		// No Content-Length: the limit has to be enforced while reading.
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		var n int64
		for n < total {
			m, err := w.Write(chunk)
			n += int64(m)
			if err != nil {
				break
			}
			w.(http.Flusher).Flush()
		}
		written <- n
	})
	_, err := get(New(fast()), s.URL+"/big")
	fe := asError(t, err)
	want := "GET " + s.URL + "/big: body exceeds the 10 MiB limit (raise fetch max_body) (1 attempt)"
	if err.Error() != want {
		t.Fatalf("error\n got %q\nwant %q", err.Error(), want)
	}
	if !crawl.IsPermanent(err) || !errors.Is(err, ErrBodyTooLarge) || fe.Status != 200 {
		t.Fatalf("permanent=%v is=%v status=%d", crawl.IsPermanent(err), errors.Is(err, ErrBodyTooLarge), fe.Status)
	}
	select {
	case n := <-written:
		t.Logf("server wrote %d bytes", n)
		if n > total/2 {
			t.Fatalf("server wrote %d of %d bytes; the fetcher should hang up soon after the limit", n, total)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("server still writing 5s after the fetcher gave up")
	}

	// A declared Content-Length over the limit fails before reading.
	s2 := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(2<<20))
		_, _ = w.Write(make([]byte, 2<<20))
	})
	o := fast()
	o.MaxBody = 1 << 20
	_, err = get(New(o), s2.URL+"/big")
	if want := "GET " + s2.URL + "/big: body exceeds the 1 MiB limit (raise fetch max_body) (1 attempt)"; err == nil || err.Error() != want {
		t.Fatalf("error\n got %v\nwant %q", err, want)
	}
}

// hangingListener accepts connections and never answers.
func hangingListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

func TestHangingConnectionTimesOut(t *testing.T) {
	base := hangingListener(t)
	f := New(Options{Timeout: 300 * time.Millisecond, Retries: 1, Backoff: 10 * time.Millisecond, AllowPrivate: true})
	start := time.Now()
	_, err := f.Fetch(context.Background(), &crawl.Request{URL: base + "/x", IgnoreRobots: true})
	fe := asError(t, err)
	want := "GET " + base + "/x: read timeout after 300ms (2 attempts)"
	if err.Error() != want {
		t.Fatalf("error\n got %q\nwant %q", err.Error(), want)
	}
	if crawl.IsPermanent(err) || fe.Attempts != 2 || fe.Status != 0 {
		t.Fatalf("permanent=%v %+v", crawl.IsPermanent(err), fe)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("a timeout should match context.DeadlineExceeded")
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
}

func TestContextCancelAborts(t *testing.T) {
	base := hangingListener(t)
	f := New(Options{Timeout: time.Minute, AllowPrivate: true})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	// robots.txt is on: the cancellation must also end the robots.txt read.
	_, err := f.Fetch(ctx, &crawl.Request{URL: base + "/x"})
	asError(t, err)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancellation took %v", d)
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = f.Fetch(ctx, &crawl.Request{URL: base + "/y", IgnoreRobots: true})
	if fe := asError(t, err); !errors.Is(err, context.Canceled) || crawl.IsPermanent(err) {
		t.Fatalf("want a non-permanent context.Canceled, got %v (%+v)", err, fe)
	}
}

func TestRobots(t *testing.T) {
	var robotsReads atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			robotsReads.Add(1)
			_, _ = io.WriteString(w, "User-agent: *\nDisallow: /private\n\nUser-agent: otherbot\nDisallow: /\n")
		case "/private/x":
			_, _ = io.WriteString(w, "secret")
		default:
			_, _ = io.WriteString(w, "public")
		}
	})
	f := New(fast())

	_, err := get(f, s.URL+"/private/x")
	fe := asError(t, err)
	want := "GET " + s.URL + "/private/x: disallowed by " + s.URL + "/robots.txt for user-agent Trawler/1.0 (set robots: false on the chain to ignore robots.txt)"
	if err.Error() != want {
		t.Fatalf("error\n got %q\nwant %q", err.Error(), want)
	}
	if !crawl.IsPermanent(err) || !errors.Is(err, ErrDisallowed) || fe.Attempts != 0 {
		t.Fatalf("permanent=%v is=%v attempts=%d", crawl.IsPermanent(err), errors.Is(err, ErrDisallowed), fe.Attempts)
	}
	if got := s.requests.Load(); got != 0 {
		t.Fatalf("a disallowed URL reached the server (%d requests)", got)
	}

	resp, err := get(f, s.URL+"/public")
	if err != nil || string(resp.Body) != "public" {
		t.Fatalf("allowed URL: %v %q", err, resp.Body)
	}

	resp, err = f.Fetch(context.Background(), &crawl.Request{URL: s.URL + "/private/x", IgnoreRobots: true})
	if err != nil || string(resp.Body) != "secret" {
		t.Fatalf("IgnoreRobots: %v", err)
	}

	// A request's own User-Agent picks its group.
	_, err = f.Fetch(context.Background(), &crawl.Request{URL: s.URL + "/public", Header: http.Header{"User-Agent": {"OtherBot/2"}}})
	if !errors.Is(err, ErrDisallowed) || !strings.Contains(err.Error(), "for user-agent OtherBot/2 ") {
		t.Fatalf("OtherBot: %v", err)
	}

	if got := robotsReads.Load(); got != 1 {
		t.Fatalf("robots.txt read %d times, want once", got)
	}
}

func TestRobotsUnavailable(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "page")
	})
	_, err := get(New(fast()), s.URL+"/page")
	asError(t, err)
	if crawl.IsPermanent(err) || crawl.RetryDelay(err) <= 0 {
		t.Fatalf("permanent=%v delay=%v: %v", crawl.IsPermanent(err), crawl.RetryDelay(err), err)
	}
	if !strings.Contains(err.Error(), s.URL+"/robots.txt could not be read (HTTP 503 Service Unavailable)") {
		t.Fatalf("error %q", err)
	}
	if got := s.requests.Load(); got != 0 {
		t.Fatalf("the page was fetched (%d requests) while robots.txt was unavailable", got)
	}
}

func TestHostConcurrency(t *testing.T) {
	run := func(t *testing.T, o Options, reqLimit, want int) {
		var inflight, peak atomic.Int64
		s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			if robots404(w, r) {
				return
			}
			n := inflight.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(30 * time.Millisecond)
			inflight.Add(-1)
			_, _ = io.WriteString(w, "ok")
		})
		f := New(o)
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for i := range 10 {
			wg.Go(func() {
				_, err := f.Fetch(context.Background(), &crawl.Request{URL: fmt.Sprintf("%s/%d", s.URL, i), HostConcurrency: reqLimit})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := s.requests.Load(); got != 10 {
			t.Fatalf("server saw %d requests", got)
		}
		if p := peak.Load(); p > int64(want) {
			t.Fatalf("%d requests in flight at once, limit %d", p, want)
		}
	}
	t.Run("option", func(t *testing.T) {
		o := fast()
		o.HostConcurrency = 2
		run(t, o, 0, 2)
	})
	t.Run("request", func(t *testing.T) { run(t, fast(), 1, 1) })
}

func TestRateLimit(t *testing.T) {
	var mu sync.Mutex
	var times []time.Time
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	})
	f := New(fast())
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			_, err := f.Fetch(context.Background(), &crawl.Request{URL: fmt.Sprintf("%s/%d", s.URL, i), RateLimit: 10, IgnoreRobots: true})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(times) != 5 {
		t.Fatalf("server saw %d requests", len(times))
	}
	first, last := times[0], times[0]
	for _, ts := range times {
		if ts.Before(first) {
			first = ts
		}
		if ts.After(last) {
			last = ts
		}
	}
	if span := last.Sub(first); span < 350*time.Millisecond {
		t.Fatalf("5 requests at 10/s spanned %v; the limiter implies at least 400ms", span)
	}
}

func TestNetworkErrorIsRetryable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	f := New(Options{Timeout: time.Second, Retries: 1, Backoff: 10 * time.Millisecond, AllowPrivate: true})
	_, err = f.Fetch(context.Background(), &crawl.Request{URL: "http://" + addr + "/x", IgnoreRobots: true})
	fe := asError(t, err)
	if crawl.IsPermanent(err) || fe.Attempts != 2 || fe.Status != 0 || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("permanent=%v %+v: %v", crawl.IsPermanent(err), fe, err)
	}

	_, err = get(f, "ftp://example.com/x")
	if fe := asError(t, err); !crawl.IsPermanent(err) || fe.Attempts != 0 {
		t.Fatalf("bad scheme: %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"7", 7 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	} {
		got, ok := crawl.ParseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestRobotsOfUnresolvableHost: robots.txt of a host that does not resolve is a DNS
// failure, said as one: robots.txt is not to blame and robots: false would not help.
func TestRobotsOfUnresolvableHost(t *testing.T) {
	o := fast()
	o.Network = &Network{LookupIP: func(_ context.Context, host string) ([]netip.Addr, error) {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}}
	_, err := get(New(o), "http://feeds.example.org/feed")
	asError(t, err)
	if c := crawl.CauseOf(err); c != crawl.CauseDNS {
		t.Errorf("cause %q, want %q: %v", c, crawl.CauseDNS, err)
	}
	want := "GET http://feeds.example.org/feed: lookup feeds.example.org: no such host"
	if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "robots: false") {
		t.Errorf("error %q\nwant it to start %q, without suggesting robots: false", err, want)
	}
	if crawl.IsPermanent(err) {
		t.Errorf("a failed lookup is retried: %v", err)
	}
}
