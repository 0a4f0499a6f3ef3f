package polite_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/budgettest"
	"github.com/trawlerhq/trawler/internal/devstack/redisproc"
	"github.com/trawlerhq/trawler/internal/polite"
)

var server *redisproc.Server

func TestMain(m *testing.M) {
	s, err := redisproc.Start()
	if err != nil {
		if errors.Is(err, redisproc.ErrNotInstalled) {
			println(err.Error())
			os.Exit(1) // .ci/run installs redis-server: a missing one is a broken machine
		}
		panic(err)
	}
	server = s
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

// fleet returns n workers' budgets on the test Redis.
func fleet(t *testing.T, n int) []*polite.Fleet {
	t.Helper()
	var out []*polite.Fleet
	for i := range n {
		rdb := redis.NewClient(&redis.Options{Addr: server.Addr})
		f := polite.New(rdb, "w"+string(rune('a'+i)))
		t.Cleanup(func() { f.Close(); rdb.Close() })
		out = append(out, f)
	}
	return out
}

func budget(t *testing.T) fetch.Budget {
	return fetch.Budget{Key: "http://" + strings.ToLower(t.Name()) + ".test:80", Concurrency: 2, Lease: 30 * time.Second, PauseWait: 5 * time.Second, Source: "declared"}
}

// Three workers with many requests each never have more in flight at one host than
// its budget allows, counted where the requests would run.
func TestConcurrencyHoldsAcrossWorkers(t *testing.T) {
	b := budget(t)
	b.Concurrency = 3
	var inflight, peak, done atomic.Int64
	var wg sync.WaitGroup
	for _, f := range fleet(t, 3) {
		for range 12 {
			wg.Go(func() {
				for range 5 {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					release, err := f.Take(ctx, b)
					cancel()
					if err != nil {
						t.Error(err)
						return
					}
					n := inflight.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(5 * time.Millisecond)
					inflight.Add(-1)
					release()
					done.Add(1)
				}
			})
		}
	}
	wg.Wait()
	if done.Load() != 3*12*5 {
		t.Fatalf("%d requests ran, want %d", done.Load(), 3*12*5)
	}
	if p := peak.Load(); p > 3 || p < 2 {
		t.Fatalf("%d requests in flight at once across three workers; the budget is 3", p)
	}
}

// A pace holds across workers: starts are at least the interval apart, whichever
// worker makes them.
func TestIntervalHoldsAcrossWorkers(t *testing.T) {
	b := budget(t)
	b.Concurrency, b.Interval = 8, 40*time.Millisecond
	var mu sync.Mutex
	var starts []time.Time
	var wg sync.WaitGroup
	for _, f := range fleet(t, 3) {
		for range 4 {
			wg.Go(func() {
				for range 2 {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					release, err := f.Take(ctx, b)
					cancel()
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					starts = append(starts, time.Now())
					mu.Unlock()
					release()
				}
			})
		}
	}
	wg.Wait()
	if len(starts) != 24 {
		t.Fatalf("%d starts, want 24", len(starts))
	}
	first, last := starts[0], starts[0]
	for _, s := range starts {
		first, last = minTime(first, s), maxTime(last, s)
	}
	// 24 starts one interval apart span 23 intervals; a few ms of scheduling slack.
	if span := last.Sub(first); span < 23*b.Interval-20*time.Millisecond {
		t.Fatalf("24 starts at one every %s spanned %s; they must span at least %s", b.Interval, span, 23*b.Interval)
	}
}

// A pause one worker learns of (a 429) holds every worker back: those that may wait
// that long wait it out, those that may not are held with the reason, and nothing
// starts before it ends.
func TestPauseReachesEveryWorker(t *testing.T) {
	fs := fleet(t, 2)
	b := budget(t)
	// The second worker has just used the host: it keeps the slot idle for its next
	// request, which must not start on it once the pause is published.
	release, err := fs[1].Take(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if err := fs[0].Pause(context.Background(), b.Key, time.Now().Add(600*time.Millisecond), "HTTP 429 with Retry-After 600ms"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the published pause travels
	short := b
	short.PauseWait = 100 * time.Millisecond
	_, err = fs[1].Take(context.Background(), short)
	wait, held := crawl.HeldFor(err)
	if !held || wait < 400*time.Millisecond || !strings.Contains(err.Error(), "HTTP 429 with Retry-After 600ms") {
		t.Fatalf("Take during a 600ms pause with 100ms to wait: %v (held %v for %s); want held, naming the 429", err, held, wait)
	}
	began := time.Now()
	release, err = fs[1].Take(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if waited := time.Since(began); waited < 400*time.Millisecond {
		t.Fatalf("the second worker started after %s of a 600ms pause", waited)
	}
}

// A worker that dies holding slots holds them only until their leases end.
func TestDeadWorkersSlotsComeBack(t *testing.T) {
	fs := fleet(t, 2)
	b := budget(t)
	b.Concurrency, b.Lease = 1, 500*time.Millisecond
	if _, err := fs[0].Take(context.Background(), b); err != nil { // never released: the worker died
		t.Fatal(err)
	}
	fs[0].Close()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	release, err := fs[1].Take(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if waited := time.Since(began); waited < 300*time.Millisecond || waited > 3*time.Second {
		t.Fatalf("the slot came back after %s; its lease was %s", waited, b.Lease)
	}
}

// A turn that comes after the input's deadline holds the input back at once, and is
// not reserved: the next request gets it.
func TestTurnPastDeadlineIsHeld(t *testing.T) {
	f := fleet(t, 1)[0]
	b := budget(t)
	b.Interval = 2 * time.Second
	release, err := f.Take(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	release()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err = f.Take(ctx, b)
	if wait, held := crawl.HeldFor(err); !held || wait < time.Second || time.Since(began) > 300*time.Millisecond {
		t.Fatalf("Take whose turn is ~2s away with 500ms left: %v after %s; want held at once", err, time.Since(began))
	}
	began = time.Now()
	release, err = f.Take(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if waited := time.Since(began); waited > 2500*time.Millisecond {
		t.Fatalf("the next request waited %s: the held one reserved a turn", waited)
	}
}

// Without Redis, Take says which dependency is down, so the run waits the outage out.
func TestUnreachableRedisIsAnOutage(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	f := polite.New(rdb, "w")
	defer f.Close()
	_, err := f.Take(context.Background(), budget(t))
	if dep, ok := crawl.DependencyOf(err); !ok || dep != "redis (politeness)" {
		t.Fatalf("Take with Redis down: %v; want an outage of redis (politeness)", err)
	}
}

// The hosts index shows what status reads: the limit, its source, what is in flight
// and the pause with its reason.
func TestHostsShowLimitsAndPauses(t *testing.T) {
	f := fleet(t, 1)[0]
	b := budget(t)
	b.Interval, b.Source = 250*time.Millisecond, "robots"
	release, err := f.Take(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Pause(context.Background(), b.Key, time.Now().Add(time.Minute), "HTTP 503 with Retry-After 1m0s"); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: server.Addr})
	defer rdb.Close()
	var got *polite.Host
	for deadline := time.Now().Add(5 * time.Second); got == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		hosts, err := polite.Hosts(context.Background(), rdb, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hosts {
			if h.Key == b.Key {
				got = &h
			}
		}
	}
	release()
	if got == nil {
		t.Fatalf("%s is not listed", b.Key)
	}
	if got.Concurrency != 2 || got.Interval != 250*time.Millisecond || got.Source != "robots" || got.InFlight != 1 ||
		got.Reason != "HTTP 503 with Retry-After 1m0s" || time.Until(got.PausedUntil) < 50*time.Second || got.Busy != got.Reason || got.Rate <= 0 {
		t.Fatalf("listed as %+v", *got)
	}
}

// One worker reads a host's robots.txt for the fleet; the others load its copy.
func TestRobotsSharedByTheFleet(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: server.Addr})
	defer rdb.Close()
	r := polite.NewRobots(rdb)
	ctx := context.Background()
	host := "http://robots.test:80"
	if _, ok := r.Load(ctx, host); ok {
		t.Fatal("a copy before anyone read it")
	}
	if !r.Claim(ctx, host) || r.Claim(ctx, host) {
		t.Fatal("two workers both claimed the read")
	}
	r.Store(ctx, host, fetch.RobotsFile{Status: 200, Body: []byte("User-agent: *\nCrawl-delay: 2\n"), Expires: time.Now().Add(time.Hour)})
	f, ok := r.Load(ctx, host)
	if !ok || f.Status != 200 || !strings.Contains(string(f.Body), "Crawl-delay: 2") {
		t.Fatalf("loaded %+v, %v", f, ok)
	}
	if !r.Claim(ctx, host) {
		t.Fatal("the claim outlived the stored copy")
	}
}

// Three workers' fetchers crawling one host read its robots.txt once between them, and
// all of them keep its Crawl-delay.
func TestRobotsReadOncePerFleet(t *testing.T) {
	var robotsReads atomic.Int64
	var mu sync.Mutex
	var pages []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			robotsReads.Add(1)
			time.Sleep(50 * time.Millisecond) // long enough for the others to ask meanwhile
			_, _ = io.WriteString(w, "User-agent: *\nCrawl-delay: 0.1\n")
			return
		}
		mu.Lock()
		pages = append(pages, time.Now())
		mu.Unlock()
	}))
	defer srv.Close()
	var wg sync.WaitGroup
	for i, budgets := range fleet(t, 3) {
		rdb := redis.NewClient(&redis.Options{Addr: server.Addr})
		defer rdb.Close()
		f := fetch.New(fetch.Options{AllowPrivate: true, Budgets: budgets, Robots: polite.NewRobots(rdb)})
		for j := range 3 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if _, err := f.Fetch(ctx, &crawl.Request{URL: fmt.Sprintf("%s/%d/%d", srv.URL, i, j)}); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if n := robotsReads.Load(); n != 1 {
		t.Errorf("robots.txt was read %d times by three workers; once is enough", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pages) != 9 {
		t.Fatalf("%d pages fetched, want 9", len(pages))
	}
	slices.SortFunc(pages, func(a, b time.Time) int { return a.Compare(b) })
	if span := pages[8].Sub(pages[0]); span < 750*time.Millisecond {
		t.Errorf("9 pages at a Crawl-delay of 100ms came within %s; across the fleet they take 800ms", span)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// The fleet's budgets order urgent requests as the process's do.
func TestUrgentRequestsGoFirst(t *testing.T) {
	b := budget(t)
	b.Concurrency = 1
	budgettest.UrgentGoesFirst(t, fleet(t, 1)[0], b)
}

func TestUrgentRequestsDoNotStarveTheRest(t *testing.T) {
	b := budget(t)
	b.Concurrency = 1
	budgettest.UrgentDoesNotStarve(t, fleet(t, 1)[0], b)
}

// A worker that holds every slot of a budget waits for one of its own to come free
// rather than asking Redis again and again for one that cannot be there.
func TestWorkerHoldingEverySlotDoesNotPollRedis(t *testing.T) {
	f := fleet(t, 1)[0]
	b := budget(t) // two slots
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var releases []func()
	for range 2 {
		release, err := f.Take(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	rdb := redis.NewClient(&redis.Options{Addr: server.Addr})
	defer rdb.Close()
	scripts := func() int {
		info, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls="); ok {
				var n int
				fmt.Sscanf(rest, "%d", &n)
				return n
			}
		}
		return 0
	}
	before := scripts()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			release, err := f.Take(ctx, b)
			if err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
			release()
		})
	}
	time.Sleep(300 * time.Millisecond) // the three wait
	if n := scripts() - before; n > 0 {
		t.Errorf("%d scripts ran in Redis while the worker held both slots and three requests waited; want none", n)
	}
	for _, release := range releases {
		release()
	}
	wg.Wait()
}

// The request that asks Redis takes a slot for every request of its worker waiting
// for one, in one call, within the budget; a paced budget's slots come one at a time.
func TestOneCallTakesSlotsForEveryWaitingRequest(t *testing.T) {
	f := fleet(t, 1)[0]
	ctx := context.Background()
	b := budget(t)
	b.Concurrency = 5
	taken := 0
	for _, c := range []struct {
		want, granted int
	}{{3, 3}, {4, 2}, {1, 0}} {
		n, err := f.TakeSlots(ctx, b, c.want)
		if err != nil || n != c.granted {
			t.Fatalf("asked for %d slots of 5 with %d taken: granted %d, %v; want %d", c.want, taken, n, err, c.granted)
		}
		taken += n
	}
	paced := budget(t)
	paced.Key += "/paced"
	paced.Interval = time.Millisecond
	if n, err := f.TakeSlots(ctx, paced, 4); err != nil || n != 1 {
		t.Fatalf("a paced budget granted %d slots at once (%v); want 1", n, err)
	}
}
