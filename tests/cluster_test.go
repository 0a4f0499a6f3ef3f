package tests

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/devstack/redisproc"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/external"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/quota"
	"github.com/trawlerhq/trawler/internal/redisurl"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// A worker pointed at a three-master Redis Cluster (redis-cluster://…) keeps dedup,
// pools, quotas, task needs, rates and heartbeats there exactly as on one Redis: a recrawl
// stores nothing, farming fills the pools to their targets, a budget stops its run at
// its exact end, and the keys spread over every master.
func TestRedisClusterRunsDedupPoolsAndQuotas(t *testing.T) {
	cl, err := redisproc.StartCluster(3)
	if err != nil {
		if errors.Is(err, redisproc.ErrNotInstalled) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop) // after the worker stops (cleanups run last first)
	queue := "cluster-" + tenantOf(t)
	testWorker(t, engine.WorkerOptions{TaskQueue: queue, MaxBatches: 4, Redis: cl.URL(), Identity: "cluster-worker"})
	rdb, err := redisurl.Open(cl.URL(), redisurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx := context.Background()
	out := shared.dir + "/" + queue

	t.Run("dedup", func(t *testing.T) {
		o := demosite.Options{Pages: 2}
		site := startSite(t, o)
		stories, comments := demosite.Expected(o, 2)
		run := func() (string, *workflows.Summary) {
			id := start(t, plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=2"), queue)
			return id, wait(t, id, 2*time.Minute)
		}
		id, first := run()
		if got := len(storedIn(t, out, id)); got != stories+comments || first.Unchanged() != 0 {
			t.Fatalf("first run stored %d (%d unchanged), want %d new", got, first.Unchanged(), stories+comments)
		}
		id, second := run()
		if got := len(storedIn(t, out, id)); got != 0 || second.Unchanged() != stories+comments {
			t.Fatalf("recrawl stored %d, %d unchanged; want 0 stored, %d unchanged", got, second.Unchanged(), stories+comments)
		}
		needs, err := monitor.NewRecorder(rdb).Needs(ctx)
		if err != nil || !hasTask(needs, "demo.story") {
			t.Errorf("task needs on the cluster: %v (%v); want demo.story learned", needs, err)
		}
	})

	t.Run("pools", func(t *testing.T) {
		site := startSite(t, demosite.Options{Pages: 1})
		p := external.NewPools(rdb, quiet)
		tenant := tenantOf(t)
		for k, n := range map[external.Kind]int{external.Cookie: 3, external.DeviceID: 2} {
			if err := p.Configure(ctx, tenant, "demo", k, external.Config{Target: n}); err != nil {
				t.Fatal(err)
			}
		}
		pl := plan(t, "farm.yaml", "", "base_url="+site, "captcha.users=[reader1, reader2, reader3, reader4, reader5]", "devices.count=5")
		s := wait(t, start(t, pl, queue), 2*time.Minute)
		for k, want := range map[external.Kind]int{external.Cookie: 3, external.DeviceID: 2} {
			st, err := p.Stats(ctx, tenant, "demo", k, false)
			if err != nil || st.Usable != want {
				t.Errorf("pool %s holds %v usable (%v) after farming, want the target %d (steps %+v)", k, usable(st), err, want, s.Steps)
			}
		}
		all, err := p.List(ctx, tenant)
		if err != nil || len(all) < 2 {
			t.Errorf("pool registry lists %d pools (%v); want both farmed pools", len(all), err)
		}
	})

	t.Run("quota", func(t *testing.T) {
		p := plan(t, "budget.yaml", fmt.Sprintf(quotaTree, 40, 0))
		id := startTuned(t, p, queue, fast)
		s := wait(t, id, 2*time.Minute)
		pages, items, _, failed := s.Totals()
		if s.Status != workflows.StatusQuotaReached || pages != 40 || items != 40 || failed != 0 {
			t.Fatalf("run %s: %d pages, %d items, %d failed; want quota_reached at exactly 40", s.Status, pages, items, failed)
		}
		if use, err := quota.New(rdb, 0).RunUsage(ctx, p.Tenant, id); err != nil || use != (quota.Usage{Pages: 40, Items: 40}) {
			t.Errorf("the run's counters on the cluster read %+v (%v); want 40 pages, 40 items", use, err)
		}
	})

	// The worker's heartbeat, with its capacity, is on the cluster too.
	beats, err := monitor.NewRecorder(rdb).Workers(ctx)
	if err != nil || !slices.ContainsFunc(beats, func(b monitor.WorkerBeat) bool { return b.Identity == "cluster-worker" && b.Capacity != nil }) {
		t.Errorf("heartbeats on the cluster: %+v (%v); want cluster-worker's, with its capacity", beats, err)
	}

	// Every master holds some of it: the cluster really spread the keys.
	cc := rdb.(*redis.ClusterClient)
	var sizes []int64
	var mu sync.Mutex // ForEachMaster calls in parallel
	_ = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n, err := c.DBSize(ctx).Result()
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			sizes = append(sizes, n)
		}
		return nil
	})
	for _, n := range sizes {
		if n == 0 || len(sizes) != 3 {
			t.Errorf("keys per master %v; want some on each of 3", sizes)
			break
		}
	}
	t.Logf("keys per master: %v", sizes)
}

func hasTask(needs []monitor.TaskNeeds, task string) bool {
	for _, n := range needs {
		if n.Task == task {
			return true
		}
	}
	return false
}

func usable(st *external.PoolStats) any {
	if st == nil {
		return nil
	}
	return st.Usable
}
