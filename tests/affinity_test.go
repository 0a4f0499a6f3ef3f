package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/workflows"
)

const affinityTree = `
name: near
defaults: {batch: 5, concurrency: 4, parallel: 4}
steps:
  - id: node
    task: synth.node
    from: node
    max_depth: 3
    params: {widths: [12]}
    affinity: {probe: "%s/probe", max_latency: 250ms}
`

// A site's probe is slow for some workers: those receive none of its batches, and a
// worker whose probe recovers gets them again.
func TestAffinityFollowsTheProbe(t *testing.T) {
	var mu sync.Mutex
	slow := map[string]bool{"far-a": false, "far-b": true}
	probe := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		s := slow[r.Header.Get("X-Trawler-Worker")]
		mu.Unlock()
		if s {
			time.Sleep(400 * time.Millisecond) // the slow network the probe measures
		}
		fmt.Fprintln(w, "ok")
	}))
	defer probe.Close()
	queue := "aff-" + tenantOf(t)
	workers := map[string]*engine.Worker{}
	for _, id := range []string{"far-a", "far-b"} {
		workers[id] = testWorker(t, engine.WorkerOptions{TaskQueue: queue, MaxBatches: 4, Redis: shared.redis.Addr(), Identity: id, ProbeEvery: 200 * time.Millisecond})
	}
	site := queue + "@synth"
	// waitPolling waits until exactly the named worker polls the site queue.
	waitPolling := func(who string) {
		t.Helper()
		if !poll(30*time.Second, func() bool {
			ok := true
			for id, w := range workers {
				ok = ok && slices.Contains(w.SiteQueues(), site) == (id == who)
			}
			return ok
		}) {
			t.Fatalf("site queue %s: polled by a %v, b %v; want only %s", site, workers["far-a"].SiteQueues(), workers["far-b"].SiteQueues(), who)
		}
	}
	runOn := func(want string) string {
		t.Helper()
		id := start(t, plan(t, "near.yaml", fmt.Sprintf(affinityTree, probe.URL)), queue)
		s := wait(t, id, 2*time.Minute)
		if pages, _, _, failed := s.Totals(); pages != 13 || failed != 0 {
			t.Fatalf("%d pages, %d failed; want 13, 0", pages, failed)
		}
		batches := 0
		for who, n := range batchWorkers(t, id) {
			if who != want {
				t.Errorf("%d batches ran on %s; the site's probe is too slow there", n, who)
			}
			batches += n
		}
		if batches == 0 {
			t.Errorf("no batches in the history of %s", id)
		}
		return id
	}
	// The run registers the site queue; until then no worker knows the site.
	keepHistories(t, "affinity", runOn("far-a"))
	waitPolling("far-a")
	// trawler status shows which worker polls the site, from the workers' heartbeats.
	rdb := redis.NewClient(&redis.Options{Addr: shared.redis.Addr()})
	defer rdb.Close()
	if !poll(15*time.Second, func() bool {
		beats, err := monitor.NewRecorder(rdb).Workers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(beats, func(b monitor.WorkerBeat) bool { return b.Identity == "far-a" && slices.Contains(b.Sites, site) })
	}) {
		t.Error("the heartbeats never showed far-a polling the site queue")
	}

	mu.Lock()
	slow["far-a"], slow["far-b"] = true, false // a's network degrades, b's recovers
	mu.Unlock()
	waitPolling("far-b")
	runOn("far-b")
}

// batchWorkers counts a run's batch activities by the identity of the worker that ran them.
func batchWorkers(t *testing.T, runID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	batch := map[int64]bool{} // scheduled event id → a RunBatch activity
	it := shared.client.GetWorkflowHistory(context.Background(), runID, "", false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && workflows.IsBatchActivity(a.GetActivityType().GetName()) {
			batch[ev.GetEventId()] = true
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && batch[a.GetScheduledEventId()] {
			out[a.GetIdentity()]++
		}
	}
	return out
}
