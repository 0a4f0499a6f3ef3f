package tests

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/devstack/redisproc"
	"github.com/trawlerhq/trawler/internal/redisurl"
	"github.com/trawlerhq/trawler/internal/workflows"

	_ "github.com/trawlerhq/trawler/internal/sites/generic"
)

// The politeness tests run real `trawler worker` processes on a real redis-server and
// let the sites measure: each logs when every request arrived and ended, so the limits
// checked are the ones a site sees, not the ones Trawler thinks it keeps.

// politeSite is an HTML site of list pages (/list?p=N, perPage story links each, a
// "More" link to the next) and story pages (/item/N), with a robots.txt. It logs every
// request, and can answer one chosen path once with 429 and a Retry-After.
type politeSite struct {
	URL            string
	pages, perPage int
	robots         string
	latency        time.Duration // of story pages
	busyPath       string        // answered once with 429 …
	retryAfter     string        // … and this Retry-After

	mu     sync.Mutex
	visits []visit
	busyAt time.Time // when the 429 went out
}

// visit is one request as the site saw it: from its arrival to the end of its answer.
type visit struct {
	site, path string
	start, end time.Time
}

func newPoliteSite(t *testing.T, pages, perPage int, latency time.Duration, robots string) *politeSite {
	t.Helper()
	s := &politeSite{pages: pages, perPage: perPage, latency: latency, robots: robots}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *politeSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v := visit{site: s.URL, path: r.URL.RequestURI(), start: time.Now()}
	defer func() {
		v.end = time.Now()
		s.mu.Lock()
		s.visits = append(s.visits, v)
		s.mu.Unlock()
	}()
	s.mu.Lock()
	busy := s.busyPath != "" && v.path == s.busyPath && s.busyAt.IsZero()
	if busy {
		s.busyAt = time.Now()
	}
	s.mu.Unlock()
	if busy {
		w.Header().Set("Retry-After", s.retryAfter)
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	}
	switch {
	case r.URL.Path == "/robots.txt":
		fmt.Fprint(w, s.robots)
	case r.URL.Path == "/list":
		p, _ := strconv.Atoi(r.URL.Query().Get("p"))
		fmt.Fprint(w, "<html><body><table>")
		for i := (p-1)*s.perPage + 1; i <= p*s.perPage; i++ {
			fmt.Fprintf(w, `<tr class="athing"><td><span class="titleline"><a href="/item/%d">Story %d</a></span></td></tr>`, i, i)
		}
		fmt.Fprint(w, "</table>")
		if p < s.pages {
			fmt.Fprintf(w, `<a class="morelink" href="/list?p=%d">More</a>`, p+1)
		}
		fmt.Fprint(w, "</body></html>")
	case strings.HasPrefix(r.URL.Path, "/item/"):
		// A request its client gave up on (its input's time ran out) is no longer in
		// flight: the client freed its slot.
		select {
		case <-time.After(s.latency):
		case <-r.Context().Done():
			return
		}
		id := strings.TrimPrefix(r.URL.Path, "/item/")
		fmt.Fprintf(w, `<html><body><article class="story" data-id="%s"><h1 class="title">Story %s</h1></article></body></html>`, id, id)
	default:
		http.NotFound(w, r)
	}
}

func (s *politeSite) log() []visit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.visits)
}

// keys are the story URLs a crawl of the site stores.
func (s *politeSite) keys() []string {
	var out []string
	for i := 1; i <= s.pages*s.perPage; i++ {
		out = append(out, fmt.Sprintf("%s/item/%d", s.URL, i))
	}
	return out
}

const allowAll = "User-agent: *\nAllow: /\n"

// politeChain is politeChainTimeout with inputs of 20 s.
func politeChain(politeness string, retries int, sites ...*politeSite) string {
	return politeChainTimeout(politeness, "20s", retries, sites...)
}

// politeChainTimeout lists the sites' first list pages and fetches every story they link,
// 3 stories a batch so the batches spread over the fleet, 16 at once in a batch and 8
// batches in flight: the fleet would hit a host far harder than its limit.
func politeChainTimeout(politeness, timeout string, retries int, sites ...*politeSite) string {
	var urls []string
	for _, s := range sites {
		urls = append(urls, "'"+s.URL+"/list?p=1'")
	}
	block := ""
	if politeness != "" {
		block = "\n  politeness: " + politeness
	}
	return fmt.Sprintf(`name: polite
defaults:
  timeout: %s
  retries: %d
  batch: 3
  concurrency: 16
  parallel: 8%s
steps:
  - id: list
    task: generic.html_list
    from: list
    max_depth: 100
    params:
      urls: [%s]
      items: tr.athing
      fields:
        link: {css: span.titleline > a, attr: href, type: url}
      detail: link
      next: a.morelink
      max_pages: 100
  - id: story
    task: generic.html_detail
    from: list
    params:
      fields:
        id: {css: article.story, attr: data-id, type: int, required: true}
        title: {css: h1.title, required: true}
`, timeout, retries, block, strings.Join(urls, ", "))
}

// busiestSecond is the most requests that arrived within one second (a sliding window).
func busiestSecond(vs []visit) int {
	starts := make([]time.Time, len(vs))
	for i, v := range vs {
		starts[i] = v.start
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i, j := 0, 0; j < len(starts); j++ {
		for starts[j].Sub(starts[i]) >= time.Second {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}

// peakInFlight is the most requests the sites were answering at once.
func peakInFlight(vs []visit) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, v := range vs {
		edges = append(edges, edge{v.start, 1}, edge{v.end, -1})
	}
	// An answer that ended when another arrived was no longer in flight.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// politeFleet is three worker processes on one task queue and one Redis.
type politeFleet struct {
	bin, redisURL, queue, out string
	rdb                       redis.UniversalClient
	workers                   map[int]*exec.Cmd
}

func newPoliteFleet(t *testing.T, redisURL string) *politeFleet {
	t.Helper()
	f := &politeFleet{bin: buildTrawler(t), redisURL: redisURL, queue: "polite-" + tenantOf(t), workers: map[int]*exec.Cmd{}}
	f.out = shared.dir + "/" + f.queue
	rdb, err := redisurl.Open(redisURL, redisurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	f.rdb = rdb
	for range 3 {
		w := workerProcessOn(t, f.bin, redisURL, f.queue, f.out, "--browser", "none")
		f.workers[w.Process.Pid] = w
	}
	return f
}

// crawl runs the chain on the fleet, checks that it failed nothing and stored every
// story of the sites exactly once, and returns the run's summary.
func (f *politeFleet) crawl(t *testing.T, chain string, sites ...*politeSite) *workflows.Summary {
	t.Helper()
	id := start(t, plan(t, "polite.yaml", chain), f.queue)
	return f.check(t, id, sites...)
}

func (f *politeFleet) check(t *testing.T, id string, sites ...*politeSite) *workflows.Summary {
	t.Helper()
	s := wait(t, id, 2*time.Minute)
	noFailures(t, s)
	got := storedIn(t, f.out, id)
	var want []string
	for _, site := range sites {
		want = append(want, site.keys()...)
	}
	for _, k := range want {
		if got[k] != 1 {
			t.Errorf("%s stored %d times, want exactly once", k, got[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("stored %d keys, want the %d stories", len(got), len(want))
	}
	return s
}

// declaredLimit: a chain's `politeness: {rate: 10/s, concurrency: 2}` is what the site
// sees from the whole fleet.
func declaredLimit(t *testing.T, f *politeFleet) {
	site := newPoliteSite(t, 4, 10, 150*time.Millisecond, allowAll)
	f.crawl(t, politeChain("{rate: 10/s, concurrency: 2}", 3, site), site)
	vs := site.log()
	if n, peak := busiestSecond(vs), peakInFlight(vs); n > 11 || peak > 2 {
		t.Errorf("the site saw %d requests in its busiest second and %d at once; declared 10/s, 2 at once", n, peak)
	}
	t.Logf("%d requests; busiest second %d, peak in flight %d", len(vs), busiestSecond(vs), peakInFlight(vs))
}

func startRedis(t *testing.T) *redisproc.Server {
	t.Helper()
	srv, err := redisproc.Start()
	if err != nil {
		if errors.Is(err, redisproc.ErrNotInstalled) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop) // after the workers stop (cleanups run last first)
	return srv
}

func TestPoliteFleet(t *testing.T) {
	srv := startRedis(t)
	f := newPoliteFleet(t, srv.Addr)

	// The fleet's last two tests kill one of its workers and restart its Redis.
	defer t.Run("redis_outage", func(t *testing.T) { redisOutage(t, f, srv) })
	defer t.Run("killed_worker", func(t *testing.T) { killedWorker(t, f) })

	t.Run("robots_crawl_delay", func(t *testing.T) {
		site := newPoliteSite(t, 3, 8, 0, "User-agent: *\nCrawl-delay: 0.25\n")
		f.crawl(t, politeChain("", 3, site), site)
		vs := site.log()
		if n := busiestSecond(vs); n > 5 {
			t.Errorf("the site saw %d requests in its busiest second; its robots.txt asks for one every 0.25 s", n)
		}
		t.Logf("%d requests; busiest second %d", len(vs), busiestSecond(vs))
	})

	t.Run("declared_limit", func(t *testing.T) { declaredLimit(t, f) })

	t.Run("retry_after", func(t *testing.T) {
		a := newPoliteSite(t, 3, 10, 20*time.Millisecond, allowAll)
		a.busyPath, a.retryAfter = "/item/5", "2"
		b := newPoliteSite(t, 4, 10, 20*time.Millisecond, allowAll)
		// No retries: an input held back by the pause that spent an attempt would fail.
		f.crawl(t, politeChain("{rate: 10/s}", 0, a, b), a, b)
		if during := pausedVisits(a, 2*time.Second); len(during) > 0 {
			t.Errorf("the paused host got %d requests in the 2 s after its 429 with Retry-After: 2: %v", len(during), during)
		}
		a.mu.Lock()
		busyAt := a.busyAt
		a.mu.Unlock()
		other := 0
		for _, v := range b.log() {
			if v.start.After(busyAt) && v.start.Before(busyAt.Add(2*time.Second)) {
				other++
			}
		}
		if other == 0 {
			t.Error("the other host got nothing while the first was paused; it has its own budget")
		}
		t.Logf("the other host got %d requests in the 2 s pause", other)
	})

	// A Retry-After longer than a worker waits in-process (5 s) holds the host's inputs
	// back: the run re-runs them after the pause without spending their attempts. With
	// no retries, any that spent one would fail; only the input answered 429 does, its
	// answer having spent its one attempt (the run waits out such an answer as a retry).
	t.Run("long_retry_after", func(t *testing.T) {
		site := newPoliteSite(t, 1, 10, 20*time.Millisecond, allowAll)
		site.busyPath, site.retryAfter = "/item/3", "6"
		id := start(t, plan(t, "polite.yaml", politeChain("{rate: 10/s}", 0, site)), f.queue)
		s := wait(t, id, 2*time.Minute)
		busy := site.URL + "/item/3"
		if len(s.Failures) != 1 || s.Failures[0].Input.URL != busy || !strings.Contains(s.Failures[0].Cause, "HTTP 429") {
			t.Errorf("failures %+v; want only %s, answered 429", s.Failures, busy)
		}
		got := storedIn(t, f.out, id)
		for _, k := range site.keys() {
			want := 1
			if k == busy {
				want = 0
			}
			if got[k] != want {
				t.Errorf("%s stored %d times, want %d", k, got[k], want)
			}
		}
		if len(got) != len(site.keys())-1 {
			t.Errorf("stored %d keys, want the %d stories but %s", len(got), len(site.keys())-1, busy)
		}
		if during := pausedVisits(site, 6*time.Second); len(during) > 0 {
			t.Errorf("the paused host got %d requests in the 6 s after its 429 with Retry-After: 6: %v", len(during), during)
		}
	})

	t.Run("group_ip", func(t *testing.T) {
		for _, tc := range []struct {
			politeness string
			peak       func(int) bool
			want       string
		}{
			{"{concurrency: 1, group: ip}", func(n int) bool { return n == 1 }, "1: both hosts are on 127.0.0.1 and share its budget"},
			{"{concurrency: 1}", func(n int) bool { return n == 2 }, "2: each host has its own budget of 1"},
		} {
			a := newPoliteSite(t, 1, 12, 100*time.Millisecond, allowAll)
			b := newPoliteSite(t, 1, 12, 100*time.Millisecond, allowAll)
			f.crawl(t, politeChain(tc.politeness, 3, a, b), a, b)
			if peak := peakInFlight(append(a.log(), b.log()...)); !tc.peak(peak) {
				t.Errorf("politeness %s: the two hosts had %d requests in flight at once, want %s", tc.politeness, peak, tc.want)
			}
		}
	})
}

// pausedVisits lists the requests the site got in the pause after its 429. Requests
// that arrived within 50 ms of the 429 going out were already on their way before any
// worker read it, so they do not count.
func pausedVisits(s *politeSite, pause time.Duration) []string {
	s.mu.Lock()
	busyAt := s.busyAt
	s.mu.Unlock()
	if busyAt.IsZero() {
		return []string{"none: the site never answered 429"}
	}
	var during []string
	for _, v := range s.log() {
		if v.start.After(busyAt.Add(50*time.Millisecond)) && v.start.Before(busyAt.Add(pause)) {
			during = append(during, fmt.Sprintf("%s at +%s", v.path, v.start.Sub(busyAt).Round(time.Millisecond)))
		}
	}
	return during
}

// killedWorker SIGKILLs a worker while it holds one of a host's two slots: the slot
// comes back when its lease ends (the input's 4 s timeout, a 5 s margin and the 1 s a
// worker may reuse a slot), not after the worker's 30 s fetch timeout, and the crawl
// finishes without the worker.
func killedWorker(t *testing.T, f *politeFleet) {
	site := newPoliteSite(t, 1, 12, time.Second, allowAll)
	id := start(t, plan(t, "polite.yaml", politeChainTimeout("{concurrency: 2}", "4s", 3, site)), f.queue)
	const lease = 4*time.Second + 5*time.Second + time.Second
	slots := "trawler:polite:{" + site.URL + "}:slots"
	ctx := context.Background()
	holder := func(token string) int {
		pid, _ := strconv.Atoi(strings.SplitN(token, "@", 2)[0]) // the identity is pid@host
		return pid
	}
	var victim int
	var ends []redis.Z // the victim's slots, scored by when their leases end (µs)
	eventually(t, time.Minute, "a worker taking a slot of the site", func() bool {
		held, _ := f.rdb.ZRangeWithScores(ctx, slots, 0, -1).Result()
		for _, z := range held {
			if pid := holder(z.Member.(string)); f.workers[pid] != nil && (victim == 0 || pid == victim) {
				victim = pid
				ends = append(ends, z)
			}
		}
		return victim != 0
	})
	if err := f.workers[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = f.workers[victim].Wait()
	delete(f.workers, victim)
	now, err := f.rdb.Time(ctx).Result() // leases are on Redis's clock
	if err != nil {
		t.Fatal(err)
	}
	for _, z := range ends {
		if left := time.Duration(z.Score)*time.Microsecond - time.Duration(now.UnixMicro())*time.Microsecond; left > lease {
			t.Errorf("the killed worker %d's slot %s comes back %s after it died; a lease is %s", victim, z.Member, left.Round(time.Millisecond), lease)
		}
	}
	f.check(t, id, site)
	if peak := peakInFlight(site.log()); peak > 2 {
		t.Errorf("the site had %d requests in flight at once; declared 2", peak)
		for _, v := range site.log() {
			t.Logf("%s %s – %s", v.path, v.start.Format("15:04:05.000"), v.end.Format("15:04:05.000"))
		}
	}
}

// redisOutage stops the fleet's Redis mid-crawl and starts it again, empty, 3 s later:
// the limited host waits meanwhile, never sees more than its limit, and the run finishes
// once Redis is back.
func redisOutage(t *testing.T, f *politeFleet, srv *redisproc.Server) {
	site := newPoliteSite(t, 3, 10, 50*time.Millisecond, allowAll)
	id := start(t, plan(t, "polite.yaml", politeChain("{rate: 10/s, concurrency: 2}", 3, site)), f.queue)
	eventually(t, time.Minute, "the crawl making 12 requests", func() bool { return len(site.log()) >= 12 })
	srv.Stop()
	stopped := time.Now()
	// The outage under test: the host must wait it out.
	time.Sleep(3 * time.Second)
	back := time.Now() // the new server may answer before Restart returns
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	f.check(t, id, site)
	// A request whose turn Redis granted just before it stopped starts within a turn
	// (100 ms) or two; after that the host waits for Redis.
	var during []string
	for _, v := range site.log() {
		if v.start.After(stopped.Add(300*time.Millisecond)) && v.start.Before(back) {
			during = append(during, fmt.Sprintf("%s at +%s", v.path, v.start.Sub(stopped).Round(time.Millisecond)))
		}
	}
	if len(during) > 0 {
		t.Errorf("the limited host got %d requests while Redis was down: %v", len(during), during)
	}
	vs := site.log()
	if n, peak := busiestSecond(vs), peakInFlight(vs); n > 11 || peak > 2 {
		t.Errorf("the site saw %d requests in its busiest second and %d at once; declared 10/s, 2 at once", n, peak)
	}
}

// On a three-master Redis Cluster the declared limit holds as on one Redis.
func TestPoliteRedisCluster(t *testing.T) {
	cl, err := redisproc.StartCluster(3)
	if err != nil {
		if errors.Is(err, redisproc.ErrNotInstalled) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop) // after the workers stop (cleanups run last first)
	declaredLimit(t, newPoliteFleet(t, cl.URL()))
}
