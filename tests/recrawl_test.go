package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/devstack/hbaselite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/recrawl"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
)

// TestRecrawlVisitsWhatChanges runs examples/recrawl.yaml once per simulated
// 10-minute tick over 60 live demo stories for eight hours (the last tick fired by a
// Temporal schedule): each run visits exactly the stories due, stories that change every
// few minutes are visited many times more often than those that never change, every
// change a visit found is a new HBase version, and restarting the worker, Temporal and
// HBase midway keeps every plan.
func TestRecrawlVisitsWhatChanges(t *testing.T) {
	dir := t.TempDir()
	zk, stopHBase, err := hbaselite.Start(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stopHBase() }()
	begin := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := demosite.NewClock(begin) // the site and the worker's recrawl plans read it
	live := &demosite.Live{Seed: 3, Start: begin, Now: clock.Now}
	o := demosite.Options{Pages: 2, Live: live}
	site := startSite(t, o)
	queue := "recrawl-" + fmt.Sprint(time.Now().UnixNano())
	startWorker := func() *engine.Worker {
		w, err := engine.NewWorker(shared.client, engine.WorkerOptions{
			TaskQueue: queue, OutDir: dir + "/out", Log: quiet, Redis: shared.redis.Addr(), HBase: zk,
			Fetch: fastFetch, Clock: clock.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := startWorker()
	defer func() { w.Stop() }()
	p := plan(t, "recrawl.yaml", "", "base_url="+site, "feed.pages=2")
	ns := p.Tenant + ":demo.story"
	rdb := redis.NewClient(&redis.Options{Addr: shared.redis.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	plans := func() []redis.Z {
		zs, err := rdb.ZRangeWithScores(ctx, recrawl.DueKey(ns), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		return zs
	}

	const ticks = 48
	for tick := 0; tick <= ticks; tick++ {
		clock.Set(begin.Add(time.Duration(tick) * 10 * time.Minute))
		if tick == ticks/2 {
			// Restart: the worker, Temporal and HBase go down and come back; the plans
			// are in Redis, which keeps its data as a production Redis does.
			before := plans()
			w.Stop()
			stopHBase()
			stopShared()
			if err := startShared(shared.port); err != nil {
				t.Fatal(err)
			}
			if zk, stopHBase, err = hbaselite.Start(dir, "127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			w = startWorker()
			if after := plans(); !slices.Equal(before, after) {
				t.Fatalf("plans changed across the restart:\nbefore %v\nafter  %v", before, after)
			}
		}
		due := 0
		for _, z := range plans() {
			if pl := recrawl.Unpack(z.Score); !pl.Due.After(clock.Now()) {
				due++
			}
		}
		visited := totalVisits(live, 60)
		id := ""
		if tick == ticks {
			id = triggerSchedule(t, p, queue) // the last tick comes from a cron schedule
		} else {
			id = start(t, p, queue)
		}
		s := wait(t, id, 2*time.Minute)
		story := s.Steps[1]
		if tick > 0 && (story.Due != due || story.Pages != due || totalVisits(live, 60)-visited != due) {
			t.Fatalf("tick %d: %d pages due, the run claimed %d, ran %d story pages and the site served %d", tick, due, story.Due, story.Pages, totalVisits(live, 60)-visited)
		}
		if tick == 0 && story.Pages != 60 {
			t.Fatalf("first run visited %d stories, want all 60", story.Pages)
		}
	}

	var fast, static []int
	for id := 1; id <= 60; id++ {
		switch every := live.Every(id); {
		case every == 0:
			static = append(static, len(live.Visits(id)))
		case every < time.Hour:
			fast = append(fast, len(live.Visits(id)))
		}
	}
	avg := func(xs []int) float64 {
		n := 0
		for _, x := range xs {
			n += x
		}
		return float64(n) / float64(len(xs))
	}
	t.Logf("visits over %d ticks: fast-changing stories %v, never-changing ones %.1f on average", ticks+1, fast, avg(static))
	if len(fast) == 0 || avg(fast) < 5*avg(static) {
		t.Errorf("fast-changing stories visited %.1f times on average, static ones %.1f: want ≥5× as often", avg(fast), avg(static))
	}

	// Every change a visit found is a version in HBase: one per distinct state seen.
	sink := w.Sinks["hbase"].(*hbase.Sink)
	for id := 1; id <= 60; id++ {
		states := 0
		last := -1
		for _, v := range live.Visits(id) {
			if n := live.Changes(id, v); n != last {
				states, last = states+1, n
			}
		}
		rec, err := sink.History(ctx, p.Tenant, "demo.story", fmt.Sprintf("demo:story:%d", id), 0)
		if err != nil {
			t.Fatal(err)
		}
		still, _ := demosite.Options{Pages: 2}.Story(id)
		var score int
		json.Unmarshal(rec.Versions[0].Fields["score"], &score)
		if len(rec.Versions) != states || score != still.Score+last {
			t.Errorf("story %d: %d versions, newest score %d; want %d (one per state visits found), score %d", id, len(rec.Versions), score, states, still.Score+last)
		}
	}
	r := live.Report(60, 10*time.Minute, clock.Now(), nil)
	t.Logf("%d changes, %d seen later than 10m; %d story visits against %d for visiting all every tick", r.Changes, r.Late, r.Visits, 60*(ticks+1))

	// What a user sees: status lists the plans, history a record's next visit.
	fast1 := 0
	for id := 1; id <= 60 && fast1 == 0; id++ {
		if every := live.Every(id); every > 0 && every < time.Hour {
			fast1 = id
		}
	}
	stdout, stderr, code := trawler(t, "status", "--temporal", shared.stack.Endpoints.Temporal, "--namespace", shared.stack.Endpoints.Namespace, "--redis", shared.redis.Addr(), "--json")
	var ov struct {
		Recrawl []recrawl.Stats `json:"recrawl"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &ov) != nil {
		t.Fatalf("trawler status --json: exit %d: %s %s", code, stdout, stderr)
	}
	i := slices.IndexFunc(ov.Recrawl, func(st recrawl.Stats) bool { return st.Namespace == ns })
	if i < 0 || ov.Recrawl[i].Pages != 60 || ov.Recrawl[i].Intervals[0].Pages < len(fast) {
		t.Errorf("status lists recrawl %+v; want %s with 60 pages, at least %d planned ≤15m apart", ov.Recrawl, ns, len(fast))
	}
	key := fmt.Sprintf("demo:story:%d", fast1)
	stdout, stderr, code = trawler(t, "history", key, "--tenant", p.Tenant, "--hbase", zk, "--redis", shared.redis.Addr())
	pl, _, _ := recrawl.New(rdb, nil).Lookup(ctx, ns, crawl.Input{URL: fmt.Sprintf("%s/item/%d", site, fast1)})
	want := "next visit " + pl.Due.UTC().Format("2006-01-02 15:04 MST")
	if code != 0 || !strings.Contains(stdout, want) || !strings.Contains(stdout, "[recrawl "+ns+"]") || !strings.Contains(stdout, "every 10m:") {
		t.Errorf("trawler history %s: exit %d, want %q and every 10m in:\n%s%s", key, code, want, stdout, stderr)
	}
}

// triggerSchedule creates a Temporal schedule of p, fires it once and returns the run it
// started.
func triggerSchedule(t *testing.T, p *crawl.Plan, queue string) string {
	t.Helper()
	ctx := context.Background()
	name := "recrawl-" + fmt.Sprint(time.Now().UnixNano())
	if err := engine.CreateSchedule(ctx, shared.client, name, "*/10 * * * *", p, engine.RunOptions{TaskQueue: queue, Tuning: fast}); err != nil {
		t.Fatal(err)
	}
	h := shared.client.ScheduleClient().GetHandle(ctx, name)
	t.Cleanup(func() { _ = h.Delete(ctx) })
	if err := h.Pause(ctx, client.SchedulePauseOptions{Note: "fired by hand"}); err != nil {
		t.Fatal(err)
	}
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	return firedRun(t, h, 1)
}

func totalVisits(live *demosite.Live, n int) int {
	v := 0
	for id := 1; id <= n; id++ {
		v += len(live.Visits(id))
	}
	return v
}
