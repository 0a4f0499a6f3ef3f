package recrawl

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/redisproc"
)

var policy = crawl.Recrawl{Min: 10 * time.Minute, Max: 7 * 24 * time.Hour, TargetMiss: 0.1, PerRun: 1000}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newPlanner(t *testing.T) (*Planner, *clock, *redis.Client) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	c := &clock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	return New(rdb, c.now), c, rdb
}

func url(i int) crawl.Input { return crawl.Input{URL: fmt.Sprintf("http://site.test/item/%d", i)} }

func TestPackedPlanRoundTrips(t *testing.T) {
	pl := Plan{Due: time.Date(2030, 5, 6, 7, 8, 0, 0, time.UTC), Leased: true, Changes: 13, Observed: 123456 * time.Minute}
	if got := Unpack(pl.score()); got != pl {
		t.Fatalf("Unpack(score) = %+v, want %+v", got, pl)
	}
	if s := pl.score(); s >= 1<<53 || s != float64(int64(s)) {
		t.Fatalf("score %v does not fit a double exactly", s)
	}
}

func TestIntervalFollowsChanges(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	pl := fresh(policy, now)
	if iv := pl.Interval(policy); iv != policy.Min {
		t.Fatalf("a new page is planned %s after its first visit, want min %s", iv, policy.Min)
	}
	// Never changing: the interval doubles or so per visit, up to max.
	static := pl
	var visits int
	for static.Interval(policy) < policy.Max {
		now = static.Due
		static = static.visited(policy, now, false)
		if visits++; visits > 20 {
			t.Fatalf("after 20 unchanged visits the interval is %s, not max", static.Interval(policy))
		}
	}
	// Changing at every visit: the interval stays at min.
	busy := fresh(policy, now)
	for range 30 {
		busy = busy.visited(policy, busy.Due, true)
		if iv := busy.Interval(policy); iv != policy.Min {
			t.Fatalf("a page changing at every visit is planned %s apart, want min", iv)
		}
	}
	// A change shortens, no change lengthens.
	mid := Plan{Due: now, Changes: 2, Observed: 48 * time.Hour}
	if a, b := mid.visited(policy, now, true).Interval(policy), mid.visited(policy, now, false).Interval(policy); a >= b {
		t.Errorf("after a change %s, after none %s: want the change to shorten the interval", a, b)
	}
}

// A day of ticks every 10 minutes over pages that change every 5 minutes, every 3 hours
// or never: fast pages are visited at every tick, static ones a handful of times, and
// the plan outlives the planner (a worker restart).
func TestSimulatedDay(t *testing.T) {
	p, c, rdb := newPlanner(t)
	ctx := context.Background()
	const ns = "default:site.page"
	every := map[int]time.Duration{}
	for i := range 30 {
		switch {
		case i < 3:
			every[i] = 5 * time.Minute
		case i < 6:
			every[i] = 3 * time.Hour
		}
	}
	start := c.t
	version := func(i int, at time.Time) int64 {
		if every[i] == 0 {
			return 0
		}
		return int64(at.Sub(start) / every[i])
	}
	seen := map[string]int64{}
	visits := map[int]int{}
	visit := func(ids []int) {
		var vs []Visit
		for _, i := range ids {
			visits[i]++
			v := version(i, c.t)
			old, ok := seen[url(i).URL]
			seen[url(i).URL] = v
			vs = append(vs, Visit{Input: url(i), Changed: !ok || old != v})
		}
		if err := p.Visited(ctx, ns, policy, vs); err != nil {
			t.Fatal(err)
		}
	}
	var all []int
	for i := range 30 {
		all = append(all, i)
	}
	visit(all) // the listing discovers every page
	for tick := 1; tick <= 144; tick++ {
		c.t = start.Add(time.Duration(tick) * 10 * time.Minute)
		if tick == 72 {
			p = New(rdb, c.now) // a restart: the plan is all in Redis
		}
		due, err := p.Claim(ctx, ns, policy, policy.PerRun)
		if err != nil {
			t.Fatal(err)
		}
		again, err := p.Claim(ctx, ns, policy, policy.PerRun)
		if err != nil {
			t.Fatal(err)
		}
		if len(again) != 0 {
			t.Fatalf("tick %d: a second claim got %d pages the first holds", tick, len(again))
		}
		var ids []int
		for _, in := range due {
			var i int
			fmt.Sscanf(in.URL, "http://site.test/item/%d", &i)
			ids = append(ids, i)
		}
		visit(ids)
	}
	fast, static := visits[0]+visits[1]+visits[2], 0
	for i := 6; i < 30; i++ {
		static += visits[i]
	}
	t.Logf("visits: fast %v, 3-hourly %v, static %v (per page, over 145 ticks)", []int{visits[0], visits[1], visits[2]}, []int{visits[3], visits[4], visits[5]}, float64(static)/24)
	if fast/3 < 140 {
		t.Errorf("fast pages visited %d times each on average, want at every tick (145)", fast/3)
	}
	if avg := float64(static) / 24; avg > 12 || float64(fast/3) < 10*avg {
		t.Errorf("static pages visited %.1f times each, fast %d: want static ones ≥10× less often", avg, fast/3)
	}
	sts, err := p.Stats(ctx)
	if err != nil || len(sts) != 1 {
		t.Fatalf("stats %v, %v", sts, err)
	}
	st := sts[0]
	if st.Pages != 30 || st.Leased != 0 || st.Intervals[0].Pages < 3 {
		t.Errorf("stats = %+v", st)
	}
}

func TestUnvisitedClaimIsDueAgainAfterItsLease(t *testing.T) {
	p, c, _ := newPlanner(t)
	ctx := context.Background()
	const ns = "default:site.page"
	if err := p.Visited(ctx, ns, policy, []Visit{{Input: url(1)}, {Input: url(2)}}); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(policy.Min)
	got, err := p.Claim(ctx, ns, policy, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %v; want one page (per_run 1)", got, err)
	}
	rest, _ := p.Claim(ctx, ns, policy, 10)
	if len(rest) != 1 || rest[0].URL == got[0].URL {
		t.Fatalf("second claim %v: want the other page", rest)
	}
	c.t = c.t.Add(lease(policy) - time.Minute)
	if again, _ := p.Claim(ctx, ns, policy, 10); len(again) != 0 {
		t.Fatalf("claimed %v again inside the lease", again)
	}
	c.t = c.t.Add(time.Minute)
	if again, _ := p.Claim(ctx, ns, policy, 10); len(again) != 2 {
		t.Fatalf("after the lease claimed %v, want both pages again", again)
	}
}

func TestMemberKeepsWhatAnInputCarries(t *testing.T) {
	for _, in := range []crawl.Input{
		{URL: "http://a.test/x?p=1"},
		{Value: 8863.0},
		{URL: "http://a.test/c", Vars: map[string]any{"page": 2.0}},
	} {
		got := InputOf(Member(in))
		if fmt.Sprint(got) != fmt.Sprint(in) {
			t.Errorf("InputOf(Member(%v)) = %v", in, got)
		}
	}
	if m := Member(crawl.Input{URL: "http://a.test/x", Parent: "k", Depth: 2, Task: "t"}); m != "http://a.test/x" {
		t.Errorf("member %q: want the URL alone, routing hints dropped", m)
	}
}

// A plan is the page's, however its URL is spelt: a visit under one spelling is known
// under another. A plan kept under a URL as given, before members were canonical, keeps
// its schedule: the next visit moves it to the canonical member instead of starting a
// second plan.
func TestPlansAreKeptByCanonicalURL(t *testing.T) {
	p, c, rdb := newPlanner(t)
	ctx := context.Background()
	const ns = "default:site.page"
	if err := p.Visited(ctx, ns, policy, []Visit{{Input: crawl.Input{URL: "http://A.test/x?b=1&a=2&utm_source=feed"}}}); err != nil {
		t.Fatal(err)
	}
	known, err := p.Known(ctx, ns, []crawl.Input{{URL: "http://a.test/x?a=2&b=1"}, {URL: "http://a.test/y"}})
	if err != nil || fmt.Sprint(known) != "[true false]" {
		t.Fatalf("known %v, %v; want the other spelling known and another page not", known, err)
	}

	old := "http://a.test/old?z=1&a=1"
	before := fresh(policy, c.t).score()
	if err := rdb.ZAdd(ctx, DueKey(ns), redis.Z{Score: float64(before), Member: old}).Err(); err != nil {
		t.Fatal(err)
	}
	if known, err := p.Known(ctx, ns, []crawl.Input{{URL: old}}); err != nil || !known[0] {
		t.Fatalf("a plan kept as given: known %v, %v; want known", known, err)
	}
	members, err := rdb.ZRange(ctx, DueKey(ns), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(members) != "[http://a.test/old?a=1&z=1 http://a.test/x?a=2&b=1]" {
		t.Fatalf("members %v; want each page once, under its canonical URL", members)
	}
	if pl, ok, err := p.Lookup(ctx, ns, crawl.Input{URL: old}); err != nil || !ok || pl.score() != before {
		t.Fatalf("the moved plan: %+v, %v, %v; want its schedule kept", pl, ok, err)
	}
}

// TestBytesPerPage measures a plan's memory on a real redis-server.
func TestBytesPerPage(t *testing.T) {
	srv, err := redisproc.Start()
	if err != nil {
		t.Skip(err)
	}
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	p := New(rdb, nil)
	const n = 20000
	const ns = "default:demo.story"
	var vs []Visit
	for i := range n {
		vs = append(vs, Visit{Input: crawl.Input{URL: fmt.Sprintf("http://127.0.0.1:8089/item/%d", i+1)}})
		if len(vs) == 1000 {
			if err := p.Visited(ctx, ns, policy, vs); err != nil {
				t.Fatal(err)
			}
			vs = vs[:0]
		}
	}
	b, err := p.Bytes(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	per := float64(b) / n
	t.Logf("%d pages (URL ~30 bytes): %d bytes, %.1f bytes per page", n, b, per)
	if per > 150 {
		t.Errorf("%.1f bytes per page, want at most 150", per)
	}
}
