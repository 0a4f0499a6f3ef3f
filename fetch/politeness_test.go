package fetch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// arrivals records when each page request reached a test server.
type arrivals struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *arrivals) add() {
	a.mu.Lock()
	a.times = append(a.times, time.Now())
	a.mu.Unlock()
}

// span is the time from the first arrival to the last: n requests paced one interval
// apart span (n-1) intervals, however the network delays each one.
func (a *arrivals) span() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.times) == 0 {
		return 0
	}
	return a.times[len(a.times)-1].Sub(a.times[0])
}

func fetchAll(t *testing.T, f *Fetcher, reqs ...*crawl.Request) []error {
	t.Helper()
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, errs[i] = f.Fetch(ctx, r)
		})
	}
	wg.Wait()
	return errs
}

// robots.txt's Crawl-delay (and Request-rate, whichever is slower) spaces the host's
// requests even when the task asks for many at once; `robots: ignore` lifts it.
func TestRobotsCrawlDelayIsAFloor(t *testing.T) {
	for _, tc := range []struct{ robots, politeness string }{
		{"User-agent: *\nCrawl-delay: 0.2\n", ""},
		{"User-agent: other\nDisallow: /\n\nUser-agent: trawler\nRequest-rate: 5/1s\nCrawl-delay: 0.05\n", ""},
		{"User-agent: *\nCrawl-delay: 5\n", crawl.RobotsIgnore},
	} {
		var seen arrivals
		s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				_, _ = io.WriteString(w, tc.robots)
				return
			}
			seen.add()
			_, _ = io.WriteString(w, "ok")
		})
		f := New(fast())
		var reqs []*crawl.Request
		for i := range 5 {
			reqs = append(reqs, &crawl.Request{URL: fmt.Sprintf("%s/%d", s.URL, i), Politeness: &crawl.Politeness{Robots: tc.politeness}})
		}
		for _, err := range fetchAll(t, f, reqs...) {
			if err != nil {
				t.Fatal(err)
			}
		}
		span := seen.span()
		switch {
		case tc.politeness == crawl.RobotsIgnore && span > 5*time.Second:
			t.Errorf("robots: ignore still spread 5 requests over %s", span)
		case tc.politeness == "" && span < 750*time.Millisecond:
			t.Errorf("robots.txt %q: 5 requests within %s; one every 200ms takes 800ms", tc.robots, span)
		}
	}
}

// 503s in a row without Retry-After pause the host for every request of the worker:
// from the second, a second and doubling; a success ends the run of failures. A pause longer than the
// request may wait holds the input back (it keeps its attempts).
func TestBusyAnswersPauseTheHost(t *testing.T) {
	var seen arrivals
	var busy atomic.Int32
	busy.Store(3)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		seen.add()
		if busy.Add(-1) >= 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	o := fast()
	o.Retries = 3
	f := New(o)
	began := time.Now()
	if _, err := get(f, s.URL+"/a"); err != nil {
		t.Fatal(err)
	}
	// Three 503s in a row: no pause after the first, then 1 s, then 2 s.
	if took := time.Since(began); took < 2900*time.Millisecond {
		t.Fatalf("four attempts after three 503s took %s; the pauses are 1s and 2s", took)
	}

	// Retry-After beyond what a request may wait: the next input is held, not failed.
	s2 := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	_, err := get(f, s2.URL+"/first")
	if err == nil {
		t.Fatal("a 429 was accepted")
	}
	_, err = get(f, s2.URL+"/second")
	wait, held := crawl.HeldFor(err)
	if !held || wait < 25*time.Second || !strings.Contains(err.Error(), "HTTP 429 with Retry-After 30s") {
		t.Fatalf("a request to a host paused for 30s: %v (held %v, %s)", err, held, wait)
	}
	if got := s2.requests.Load(); got != 1 {
		t.Fatalf("the paused host got %d requests; only the first may reach it", got)
	}
}

// AutoThrottle slows a host toward latency / target: with 1 in flight targeted and
// pages taking 150 ms, requests end up about 150 ms apart even when many are asked at once.
func TestAutoThrottleFollowsLatency(t *testing.T) {
	var seen arrivals
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		seen.add()
		time.Sleep(150 * time.Millisecond)
		_, _ = io.WriteString(w, "ok")
	})
	f := New(fast())
	p := &crawl.Politeness{Concurrency: 8, AutoThrottle: &crawl.AutoThrottle{Target: 1, Max: 10 * time.Second}}
	var reqs []*crawl.Request
	for i := range 6 {
		reqs = append(reqs, &crawl.Request{URL: fmt.Sprintf("%s/%d", s.URL, i), Politeness: p})
	}
	// The first answer sets the delay (from a cautious second toward 150ms).
	if _, err := f.Fetch(context.Background(), reqs[0]); err != nil {
		t.Fatal(err)
	}
	seen.mu.Lock()
	seen.times = nil
	seen.mu.Unlock()
	for _, err := range fetchAll(t, f, reqs[1:]...) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if span := seen.span(); span < 550*time.Millisecond {
		t.Fatalf("with AutoThrottle, 5 requests to a 150ms host came within %s; at least 150ms apart takes 600ms", span)
	}
}

// group: ip makes hosts on one address share a budget: localhost and 127.0.0.1 on
// two ports never have more than the budget in flight together.
func TestGroupIPSharesABudget(t *testing.T) {
	var inflight, peak atomic.Int64
	h := func(w http.ResponseWriter, r *http.Request) {
		if robots404(w, r) {
			return
		}
		n := inflight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(30 * time.Millisecond)
		inflight.Add(-1)
	}
	a, b := newServer(t, h), newServer(t, h)
	other := strings.Replace(b.URL, "127.0.0.1", "localhost", 1)
	for _, group := range []string{crawl.GroupIP, crawl.GroupHost} {
		peak.Store(0)
		f := New(fast())
		p := &crawl.Politeness{Concurrency: 1, Group: group}
		var reqs []*crawl.Request
		for i := range 4 {
			reqs = append(reqs, &crawl.Request{URL: fmt.Sprintf("%s/%d", a.URL, i), Politeness: p}, &crawl.Request{URL: fmt.Sprintf("%s/%d", other, i), Politeness: p})
		}
		for _, err := range fetchAll(t, f, reqs...) {
			if err != nil {
				t.Fatal(err)
			}
		}
		want := int64(1)
		if group == crawl.GroupHost {
			want = 2
		}
		if got := peak.Load(); got != want {
			t.Errorf("group %s: %d in flight at once across the two hosts, want %d", group, got, want)
		}
	}
}
