package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/events"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/quota"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// scrape reads /metrics as Prometheus would and sums each metric's samples that carry
// label tenant="tenant", by metric name plus the other label given (e.g. cause).
func scrape(t *testing.T, tenant, by string) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(promhttp.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || !strings.Contains(line, `tenant="`+tenant+`"`) {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		labels, value, _ := strings.Cut(rest, "} ")
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		key := name
		if i := strings.Index(labels, by+`="`); by != "" && i >= 0 {
			val, _, _ := strings.Cut(labels[i+len(by)+2:], `"`)
			key += "/" + val
		}
		out[key] += v
	}
	return out
}

// The metrics a worker serves count exactly what a run did: pages, items per sink,
// dedup verdicts and failures by cause.
func TestMetricsCountWhatARunDid(t *testing.T) {
	o := demosite.Options{Pages: 2, Latency: 30 * time.Millisecond, Faults: map[int]demosite.Fault{3: demosite.FaultStatus500, 7: demosite.FaultStatus500}}
	site := startSite(t, o)
	// The needs of demo.story are learned from this run alone: other tests crawl it too,
	// from sites that answer at once.
	forget := redis.NewClient(&redis.Options{Addr: shared.redis.Addr()})
	defer forget.Close()
	if err := monitor.NewRecorder(forget).ForgetNeeds(context.Background(), "demo.story"); err != nil {
		t.Fatal(err)
	}
	p := plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=1")
	s := wait(t, start(t, p, taskQueue), 2*time.Minute)
	pages, items, _, failed := s.Totals()
	if failed != 2 {
		t.Fatalf("%d failures, want the 2 broken stories: %+v", failed, s.Failures)
	}
	m := scrape(t, p.Tenant, "sink")
	if got := m["trawler_pages_total"]; got != float64(pages) {
		t.Errorf("trawler_pages_total = %v, the run processed %d pages", got, pages)
	}
	if got := m["trawler_items_total/jsonl"]; got != float64(items) {
		t.Errorf("trawler_items_total{sink=jsonl} = %v, the run stored %d items", got, items)
	}
	if got := m["trawler_dedup_verdicts_total"]; got != float64(items+s.Unchanged()) {
		t.Errorf("dedup verdicts %v, want %d", got, items+s.Unchanged())
	}
	causes := scrape(t, p.Tenant, "cause")
	if got := causes["trawler_failures_total/http_5xx"]; got != 2 {
		t.Errorf("trawler_failures_total{cause=http_5xx} = %v, want 2 (all causes: %v)", got, causes)
	}
	if got := causes["trawler_retries_total/http_5xx"]; got < 2 {
		t.Errorf("trawler_retries_total{cause=http_5xx} = %v; the broken stories were retried", got)
	}

	// The tasks' learned needs: a story page of this site is a few KB and takes at
	// least the site's 30 ms to answer.
	rdb := redis.NewClient(&redis.Options{Addr: shared.redis.Addr()})
	defer rdb.Close()
	needs, err := monitor.NewRecorder(rdb).Needs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range needs {
		if n.Task == "demo.story" {
			found = true
			if n.MSPerPage < 30 || n.KBPerPage < 0.5 || n.Pages <= 0 {
				t.Errorf("demo.story needs %+v; want ≥ 30 ms and ≥ 0.5 KB a page", n)
			}
		}
	}
	if !found {
		t.Errorf("no learned needs for demo.story in %+v", needs)
	}
}

// Status shows a running chain's backlog and rate, the worker's heartbeat and, once the
// run is over, what the chain spent today; the alert webhook hears of a backlog over its
// threshold and of its end.
func TestStatusAndAlertsFollowARun(t *testing.T) {
	o := demosite.Options{Pages: 6, Latency: 100 * time.Millisecond}
	site := startSite(t, o)
	p := plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=6")

	rdb := redis.NewClient(&redis.Options{Addr: shared.redis.Addr()})
	defer rdb.Close()
	received := watchAlerts(t, rdb, p.Tenant, 20)

	// Monitoring is under test: every feed page goes through the server, so the stories
	// it finds queue up as a backlog at once.
	noFollow := fast
	noFollow.FollowInputs = -1
	id := startTuned(t, p, taskQueue, noFollow)
	waitPages(t, id, 10)
	var seen *engine.ChainLoad
	eventually(t, time.Minute, "status showing the running chain with a backlog and a rate", func() bool {
		ov, err := engine.GetOverview(context.Background(), shared.client, rdb, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ov.Chains {
			if l.Tenant == p.Tenant && l.Chain == "demo" && l.Backlog > 0 && l.Rate1s > 0 {
				seen = &l
			}
		}
		alive := false
		for _, w := range ov.Workers {
			alive = alive || (w.Identity == shared.worker.Identity && w.AgeS < 10 && w.TaskQueue == taskQueue)
		}
		if !alive {
			t.Errorf("the shared worker is missing from the heartbeats: %+v", ov.Workers)
		}
		return seen != nil
	})
	t.Logf("while running: %d runs, backlog %d, %.1f pages/s", seen.Runs, seen.Backlog, seen.Rate1s)
	s := wait(t, id, 2*time.Minute)
	pages, _, _, _ := s.Totals()

	use, err := quotaUsage(rdb, p.Tenant, "demo")
	if err != nil || use != pages {
		t.Errorf("the chain spent %d pages today (%v); the run processed %d", use, err, pages)
	}
	// The watcher looks every 200 ms: give it a look after the run ended. The backlog
	// may dip under the threshold and rise again while the run goes on, so the alerts
	// alternate: over the threshold, resolved, …, ending resolved.
	var alerts []events.Alert
	poll(10*time.Second, func() bool {
		alerts = slices.DeleteFunc(received(), func(a events.Alert) bool { return a.Alert == "run_ended" })
		return len(alerts) >= 2 && alerts[len(alerts)-1].Resolved
	})
	if len(alerts) < 2 || !alerts[len(alerts)-1].Resolved {
		t.Fatalf("alerts %+v; want a backlog alert over 20, then its resolution", alerts)
	}
	for i, a := range alerts {
		firing := i%2 == 0
		if a.Alert != "backlog" || a.Resolved == firing || (firing && a.Value <= 20) {
			t.Errorf("alert %d: %+v; want alternating backlog alerts over 20 and resolutions", i, a)
		}
	}
}

// The webhook hears once of every run that ends, whatever its outcome, with the run's
// id, chain and failures, so a script can tell a completed run from a failed one.
func TestAlertWebhookHearsEachRunEnd(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: shared.redis.Addr()})
	defer rdb.Close()
	received := watchAlerts(t, rdb, tenantOf(t), 0)

	code, done := runWait(t, listChain(t, listSite(t, "/a", "/b"), "/list", 0))
	if code != 0 || done.Outcome != workflows.OutcomeCompleted {
		t.Fatalf("clean chain: exit %d, outcome %q; want 0, completed", code, done.Outcome)
	}
	code, lost := runWait(t, listChain(t, listSite(t), "/missing", 0))
	if code != 3 || lost.Outcome != workflows.OutcomeFailed {
		t.Fatalf("only seed answers 404: exit %d, outcome %q; want 3, failed", code, lost.Outcome)
	}
	want := map[string]events.Alert{
		done.RunID: {Alert: "run_ended", Tenant: tenantOf(t), Chain: "outcome", RunID: done.RunID, Outcome: workflows.OutcomeCompleted, Value: 0},
		lost.RunID: {Alert: "run_ended", Tenant: tenantOf(t), Chain: "outcome", RunID: lost.RunID, Outcome: workflows.OutcomeFailed, Value: 1},
	}
	poll(10*time.Second, func() bool { return len(received()) >= len(want) })
	// The watcher looks every 200 ms: a quiet second, five more looks, is what shows no
	// run is posted twice, so it is waited out, not awaited.
	time.Sleep(time.Second)
	got := received()
	if len(got) != len(want) {
		t.Fatalf("webhook received %+v; want one run_ended alert for each of %s and %s", got, done.RunID, lost.RunID)
	}
	for _, a := range got {
		w, ok := want[a.RunID]
		if a.At.IsZero() {
			t.Errorf("alert %+v has no time", a)
		}
		a.At = time.Time{}
		if !ok || !reflect.DeepEqual(a, w) {
			t.Errorf("alert %+v; want %+v", a, w)
		}
		delete(want, a.RunID)
	}
}

// quotaUsage is the pages a tenant's chain spent today, from the shared counters.
func quotaUsage(rdb *redis.Client, tenant, chain string) (int, error) {
	u, err := quota.New(rdb, 0).ChainUsage(context.Background(), tenant, chain)
	return u.Pages, err
}

// watchAlerts runs the watcher (every 200 ms, backlog threshold maxBacklog) and an
// event deliverer with a webhook in the alert format of --alert-webhook that keeps the
// alerts of one tenant, until the test ends; received returns them so far, in order.
func watchAlerts(t *testing.T, rdb *redis.Client, tenant string, maxBacklog int) (received func() []events.Alert) {
	t.Helper()
	var mu sync.Mutex
	var alerts []events.Alert
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a events.Alert
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
			t.Errorf("alert body: %v", err)
		}
		if a.Tenant == tenant {
			mu.Lock()
			alerts = append(alerts, a)
			mu.Unlock()
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); hook.Close() })
	go engine.Watch(ctx, shared.client, rdb, engine.WatchOptions{Every: 200 * time.Millisecond, MaxBacklog: maxBacklog, Log: quiet})
	d := &events.Deliverer{Redis: rdb, Static: []events.Webhook{{URL: hook.URL, Format: events.FormatAlert}},
		Group: "test-" + t.Name(), Poll: 50 * time.Millisecond, Log: quiet}
	go func() { _ = d.Run(ctx) }()
	return func() []events.Alert {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(alerts)
	}
}
