package fetch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/external"
)

// Each middleware on its own, over the bare transport, against a real server.

// statusServer answers /status/N with status N and a body naming it; /ok with 200.
func statusServer(t *testing.T) *server {
	return newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		if code, ok := strings.CutPrefix(r.URL.Path, "/status/"); ok {
			n, _ := strconv.Atoi(code)
			if ra := r.URL.Query().Get("retry_after"); ra != "" {
				w.Header().Set("Retry-After", ra)
			}
			w.WriteHeader(n)
			_, _ = io.WriteString(w, "status "+code)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
}

func fetchURL(f crawl.Fetcher, u string) (*crawl.Response, error) {
	return f.Fetch(context.Background(), &crawl.Request{URL: u, IgnoreRobots: true})
}

func TestTransportReturnsEveryStatus(t *testing.T) {
	s := statusServer(t)
	tr := Transport(fast())
	for _, code := range []int{404, 500, 503, 403} {
		resp, err := fetchURL(tr, s.URL+"/status/"+strconv.Itoa(code))
		if err != nil {
			t.Fatalf("%d: %v", code, err)
		}
		if resp.Status != code || string(resp.Body) != "status "+strconv.Itoa(code) || resp.Attempts != 1 {
			t.Fatalf("%d: status %d body %q attempts %d", code, resp.Status, resp.Body, resp.Attempts)
		}
	}
	if got := s.requests.Load(); got != 4 {
		t.Fatalf("server saw %d requests, want one each: the transport never retries", got)
	}

	// The body of an answer the request does not accept only explains it: a huge one is
	// cut, not a too_large failure.
	big := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write(make([]byte, 1<<20))
	})
	o := fast()
	o.MaxBody = 100 << 10
	resp, err := fetchURL(Transport(o), big.URL+"/x")
	if err != nil || resp.Status != http.StatusBadGateway || len(resp.Body) != errorBodyDrain {
		t.Fatalf("big 502: %v, status %v, %d body bytes, want %d", err, resp.Status, len(resp.Body), errorBodyDrain)
	}
	// The same body in an accepted answer is over MaxBody: permanent, too large.
	_, err = Transport(o).Fetch(context.Background(), &crawl.Request{URL: big.URL + "/x", Accept: func(int) bool { return true }})
	if !errors.Is(err, ErrBodyTooLarge) || !crawl.IsPermanent(err) {
		t.Fatalf("accepted big 502: %v, want a permanent body-too-large error", err)
	}
}

func TestStatusCheckDecidesByAccept(t *testing.T) {
	s := statusServer(t)
	f := crawl.Wrap(Transport(fast()), StatusCheck())

	_, err := fetchURL(f, s.URL+"/status/404")
	fe := asError(t, err)
	if !crawl.IsPermanent(err) || fe.Status != 404 || fe.Attempts != 1 || crawl.CauseOf(err) != crawl.CauseHTTP404 {
		t.Fatalf("404: permanent=%v %+v cause %s", crawl.IsPermanent(err), fe, crawl.CauseOf(err))
	}
	if want := "GET " + s.URL + "/status/404: HTTP 404 Not Found (1 attempt)"; err.Error() != want {
		t.Fatalf("error\n got %q\nwant %q", err, want)
	}

	_, err = fetchURL(f, s.URL+"/status/503?retry_after=7")
	if crawl.IsPermanent(err) || crawl.RetryDelay(err) != 7*time.Second || crawl.CauseOf(err) != crawl.CauseHTTP5xx {
		t.Fatalf("503: permanent=%v delay=%v cause %s", crawl.IsPermanent(err), crawl.RetryDelay(err), crawl.CauseOf(err))
	}
	for code, permanent := range map[int]bool{501: true, 505: true, 408: false, 429: false, 410: true, 302: true} {
		_, err = f.Fetch(context.Background(), &crawl.Request{URL: s.URL + "/status/" + strconv.Itoa(code), IgnoreRobots: true})
		if err == nil || crawl.IsPermanent(err) != permanent {
			t.Errorf("%d: %v, want permanent=%v", code, err, permanent)
		}
	}

	// A request that accepts 404 gets it as its answer, body included; a 304 and a 2xx
	// are accepted by default.
	resp, err := f.Fetch(context.Background(), &crawl.Request{URL: s.URL + "/status/404", IgnoreRobots: true,
		Accept: func(code int) bool { return code == 404 }})
	if err != nil || resp.Status != 404 || string(resp.Body) != "status 404" {
		t.Fatalf("accepted 404: %v %+v", err, resp)
	}
	if resp, err := fetchURL(f, s.URL+"/status/304"); err != nil || resp.Status != 304 {
		t.Fatalf("304: %v %+v", err, resp)
	}
}

func TestRetryReturnsTheLastAnswer(t *testing.T) {
	var n atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flaky":
			if n.Add(1) < 3 {
				http.Error(w, "boom", http.StatusInternalServerError)
				return
			}
			_, _ = io.WriteString(w, "ok")
		case "/501":
			w.WriteHeader(http.StatusNotImplemented)
		case "/503":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/later":
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	f := crawl.Wrap(Transport(fast()), Retry(fast()))

	resp, err := fetchURL(f, s.URL+"/flaky")
	if err != nil || resp.Status != 200 || resp.Attempts != 3 || s.requests.Load() != 3 {
		t.Fatalf("flaky: %v, status %v, attempts %v, %d requests; want 200 after 3", err, resp.Status, resp.Attempts, s.requests.Load())
	}
	s.requests.Store(0)
	resp, err = fetchURL(f, s.URL+"/503")
	if err != nil || resp.Status != 503 || resp.Attempts != 3 || s.requests.Load() != 3 {
		t.Fatalf("503: %v, %+v, %d requests; want the last 503 after 3 attempts, as a response", err, resp, s.requests.Load())
	}
	s.requests.Store(0)
	if resp, _ := fetchURL(f, s.URL+"/501"); resp.Status != 501 || s.requests.Load() != 1 {
		t.Fatalf("501 was retried: %d requests", s.requests.Load())
	}
	s.requests.Store(0)
	resp, _ = f.Fetch(context.Background(), &crawl.Request{URL: s.URL + "/503", IgnoreRobots: true, Accept: func(int) bool { return true }})
	if resp.Status != 503 || s.requests.Load() != 1 {
		t.Fatalf("an accepted 503 was retried: %d requests", s.requests.Load())
	}
	s.requests.Store(0)
	if resp, _ := fetchURL(f, s.URL+"/later"); resp.Status != 429 || s.requests.Load() != 1 {
		t.Fatalf("a long Retry-After was slept on: %d requests", s.requests.Load())
	}
}

func TestPolitenessLimitsEachAttempt(t *testing.T) {
	var inflight, peak atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		inflight.Add(-1)
	})
	f := crawl.Wrap(Transport(fast()), Politeness(fast()))
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if _, err := f.Fetch(context.Background(), &crawl.Request{URL: s.URL + "/", HostConcurrency: 2}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 2 || s.requests.Load() != 6 {
		t.Fatalf("%d in flight at once (limit 2), %d requests", p, s.requests.Load())
	}
}

func TestRobotsReadsThroughTheChainBelow(t *testing.T) {
	var robotsReads atomic.Int64
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			robotsReads.Add(1)
			_, _ = io.WriteString(w, "User-agent: *\nDisallow: /private\n")
			return
		}
		_, _ = io.WriteString(w, "page")
	})
	var below atomic.Int64 // requests the layer below Robots was asked for
	counting := func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			below.Add(1)
			return next.Fetch(ctx, r)
		})
	}
	f := crawl.Wrap(Transport(fast()), Robots(fast()), counting)
	for range 3 {
		if _, err := f.Fetch(context.Background(), &crawl.Request{URL: s.URL + "/public"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := f.Fetch(context.Background(), &crawl.Request{URL: s.URL + "/private/x"})
	if !errors.Is(err, ErrDisallowed) || !crawl.IsPermanent(err) || crawl.CauseOf(err) != crawl.CauseRobots {
		t.Fatalf("disallowed: %v", err)
	}
	if robotsReads.Load() != 1 || below.Load() != 4 || s.requests.Load() != 3 {
		t.Fatalf("robots.txt read %d times, %d requests below, %d pages; want 1 read through the chain, 3 pages",
			robotsReads.Load(), below.Load(), s.requests.Load())
	}
}

// The resource layer judges a ban from the Response it gets back: a 403 bans the
// cookie that earned it and the request goes out again with another one.
func TestResourcesJudgeBansFromTheResponse(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Cookie"), "s=bad") {
			http.Error(w, "go away", http.StatusForbidden)
			return
		}
		_, _ = io.WriteString(w, "welcome "+r.Header.Get("Cookie"))
	})
	pools := lruPool(t, external.Cookie, external.Resource{Value: "s=bad"}, external.Resource{Value: "s=good"})
	ctx := context.Background()
	rctx := WithResources(ctx, pools, external.Scope{Tenant: "t", Site: "s", Needs: []external.Kind{external.Cookie}})
	f := crawl.Wrap(Transport(fast()), Resources())
	for range 2 {
		resp, err := f.Fetch(rctx, &crawl.Request{URL: s.URL + "/members", IgnoreRobots: true})
		if err != nil || resp.Status != 200 || string(resp.Body) != "welcome s=good" {
			t.Fatalf("%v %+v, want the good cookie's page", err, resp)
		}
	}
	st, err := pools.Stats(ctx, "t", "s", external.Cookie, true)
	if err != nil {
		t.Fatal(err)
	}
	var bans, ok int64
	for _, it := range st.Items {
		bans, ok = bans+it.Bans, ok+it.OK
	}
	if bans != 1 || ok != 2 {
		t.Fatalf("%d bans and %d successes, want the bad cookie banned once and the good one used twice", bans, ok)
	}
}

func TestSetHeaders(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Header.Get("X-Team")+"|"+r.Header.Get("X-Task"))
	})
	f := crawl.Wrap(Transport(fast()), SetHeaders(http.Header{"X-Team": {"news"}}))
	req := &crawl.Request{URL: s.URL + "/", IgnoreRobots: true, Header: http.Header{"X-Task": {"t"}, "X-Team": {"old"}}}
	resp, err := f.Fetch(context.Background(), req)
	if err != nil || string(resp.Body) != "news|t" {
		t.Fatalf("%v %q", err, resp.Body)
	}
	if req.Header.Get("X-Team") != "old" {
		t.Fatal("the task's own request was changed")
	}
	for params, want := range map[string]string{
		"":    "give the headers to set, e.g. header: {X-Team: news}",
		"bad": "header X-List: want a text value, got [a b] ([]interface {}); quote it",
	} {
		p := map[string]any{}
		if params == "bad" {
			p["X-List"] = []any{"a", "b"}
		}
		if _, err := headerParams(p); err == nil || err.Error() != want {
			t.Errorf("params %v: %v, want %q", p, err, want)
		}
	}
}

// A worker's own middleware, and one added for a step with With, sit inside the status
// check: they see a 403 as a Response, and the task still gets the permanent error.
func TestUserMiddlewaresSeeEveryStatus(t *testing.T) {
	s := statusServer(t)
	var forbidden, seen atomic.Int64
	count403 := func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			resp, err := next.Fetch(ctx, r)
			if resp != nil && resp.Status == http.StatusForbidden {
				forbidden.Add(1)
			}
			return resp, err
		})
	}
	countAll := func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			seen.Add(1)
			return next.Fetch(ctx, r)
		})
	}
	o := fast()
	o.Middlewares = []crawl.Middleware{count403}
	f := New(o)
	step := f.With(countAll)

	_, err := get(step, s.URL+"/status/403")
	if fe := asError(t, err); !crawl.IsPermanent(err) || fe.Status != 403 || crawl.CauseOf(err) != crawl.CauseHTTP403 {
		t.Fatalf("403: %v", err)
	}
	if _, err := get(f, s.URL+"/status/403"); err == nil {
		t.Fatal("403 accepted")
	}
	if _, err := get(f, s.URL+"/ok"); err != nil {
		t.Fatal(err)
	}
	if forbidden.Load() != 2 || seen.Load() != 1 {
		t.Fatalf("worker middleware counted %d 403s (want 2), step middleware saw %d requests (want 1, only its own)", forbidden.Load(), seen.Load())
	}
}
