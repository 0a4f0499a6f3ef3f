package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/events"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// requestLog puts a counter of every request in front of the site at target.
func requestLog(t *testing.T, target string) (string, func() int64) {
	t.Helper()
	var n atomic.Int64
	return inFrontOf(t, target, func(w http.ResponseWriter, r *http.Request, site http.Handler) {
		n.Add(1)
		site.ServeHTTP(w, r)
	}), n.Load
}

// controlFlags point the CLI at the shared stack, whatever queue the run uses.
func controlFlags() []string {
	return []string{"--temporal", shared.stack.Endpoints.Temporal, "--namespace", shared.stack.Endpoints.Namespace}
}

// A paused run fetches nothing, not across a killed worker and a restarted Temporal
// server either, and once resumed it stores every item exactly once.
func TestPauseHoldsAcrossRestartsAndResumeStoresOnce(t *testing.T) {
	bin := buildTrawler(t)
	// Twenty list pages: more stories than the step's batches in flight hold, so the
	// pause has work left to hold back once they finish (each follows its outputs for
	// up to a second, see below).
	o := demosite.Options{Pages: 20, Latency: 40 * time.Millisecond}
	site, requests := requestLog(t, startSite(t, o))
	const queue = "pause-test"
	out := filepath.Join(shared.dir, "pause-out")
	pids := map[int]func(){}
	for range 3 {
		w := workerProcess(t, bin, queue, out)
		pids[w.Process.Pid] = func() { _ = w.Process.Signal(syscall.SIGKILL); _ = w.Wait() }
	}
	tune := fast
	tune.FollowFor = time.Second // a batch paging on its worker stops following within a second
	id, err := engine.Start(context.Background(), shared.client, plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=20"),
		engine.RunOptions{TaskQueue: queue, Tuning: tune})
	if err != nil {
		t.Fatal(err)
	}
	waitPages(t, id, 30)

	_, stderr, code := trawler(t, append([]string{"resume", id}, controlFlags()...)...)
	if want := fmt.Sprintf("run %s is not paused, so there is nothing to resume; pause it with `trawler pause %s`", id, id); code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("resume of a running run: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	// With a Redis, pause and resume are events too (trawler events tail).
	evRedis := miniredis.RunT(t)
	stdout, stderr, code := trawler(t, append([]string{"pause", id, "--redis", evRedis.Addr()}, controlFlags()...)...)
	if code != 0 || !strings.Contains(stdout, "run "+id+" paused by ") {
		t.Fatalf("pause: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	_, stderr, code = trawler(t, append([]string{"pause", id}, controlFlags()...)...)
	if want := fmt.Sprintf("run %s is already paused (by ", id); code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("second pause: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	// In-flight batches finish and are taken in; then nothing runs.
	eventually(t, time.Minute, "the paused run's batches to finish", func() bool {
		d, err := shared.client.DescribeWorkflowExecution(context.Background(), id, "")
		return err == nil && len(d.GetPendingActivities()) == 0
	})
	before := requests()
	st, err := engine.Describe(context.Background(), shared.client, id)
	if err != nil || st.State != "running" || st.Paused == nil || st.Paused.By == "" || st.Paused.Since.IsZero() {
		t.Fatalf("status of the paused run: %+v, %v; want running, paused with who and since", st, err)
	}
	pagesAtPause, _, _, _ := st.Progress.Totals()

	// One worker dies, the server restarts; the run stays paused.
	for pid, kill := range pids {
		kill()
		delete(pids, pid)
		break
	}
	port := shared.port
	stopShared()
	if err := startShared(port); err != nil {
		t.Fatalf("restart on the same data dir: %v", err)
	}
	eventually(t, time.Minute, "the paused run's progress after the restart", func() bool {
		st, err = engine.Describe(context.Background(), shared.client, id)
		return err == nil && st.Progress != nil
	})
	if st.Progress.Paused == nil || st.Paused == nil {
		t.Fatalf("after the restart the run is not paused: %+v", st)
	}
	stdout, _, _ = trawler(t, append([]string{"status", id}, controlFlags()...)...)
	if !strings.Contains(stdout, "run "+id+": paused by "+st.Paused.By+" since ") {
		t.Errorf("trawler status of the paused run:\n%s", stdout)
	}
	var js struct {
		State  string           `json:"state"`
		Paused *workflows.Pause `json:"paused"`
	}
	stdout, _, _ = trawler(t, append([]string{"status", id, "--json"}, controlFlags()...)...)
	if err := json.Unmarshal([]byte(lastLine(stdout)), &js); err != nil || js.Paused == nil || js.Paused.By != st.Paused.By {
		t.Errorf("trawler status --json of the paused run: %v\n%s", err, stdout)
	}
	time.Sleep(2 * time.Second) // long enough for the workers to run batches, were any started
	if after := requests(); after != before {
		t.Fatalf("the site served %d requests while the run was paused", after-before)
	}

	stdout, stderr, code = trawler(t, append([]string{"resume", id, "--redis", evRedis.Addr()}, controlFlags()...)...)
	if code != 0 || !strings.Contains(stdout, "run "+id+" resumed by ") {
		t.Fatalf("resume: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	rdb := redis.NewClient(&redis.Options{Addr: evRedis.Addr()})
	defer rdb.Close()
	evs, err := rdb.XRange(context.Background(), events.Stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		var ev events.Event
		if err := json.Unmarshal([]byte(fmt.Sprint(e.Values["event"])), &ev); err != nil {
			t.Fatalf("event %v: %v", e.Values, err)
		}
		got = append(got, ev.Type+" "+ev.RunID+" by "+ev.By)
	}
	if want := []string{"run_paused " + id + " by " + st.Paused.By, "run_resumed " + id + " by " + st.Paused.By}; !slices.Equal(got, want) {
		t.Errorf("events of the pause and resume: %q, want %q", got, want)
	}
	s := wait(t, id, 3*time.Minute)
	if pages, _, _, failed := s.Totals(); failed != 0 || pages <= pagesAtPause || s.Paused != nil {
		t.Errorf("resumed run: pages %d (had %d at the pause), failed %d, paused %+v", pages, pagesAtPause, failed, s.Paused)
	}
	sink, err := jsonl.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	assertDemoStored(t, runRecords(t, sink, id), o, 20)

	_, stderr, code = trawler(t, append([]string{"pause", id}, controlFlags()...)...)
	if want := fmt.Sprintf("run %s has already ended (completed): only a running run can be paused", id); code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("pause of a finished run: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	_, stderr, code = trawler(t, append([]string{"pause", "no-such-run"}, controlFlags()...)...)
	if want := "no run \"no-such-run\" on this Temporal namespace (list runs with `trawler status`)"; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("pause of an unknown run: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
}

// flakySite serves /list linking to /p/1 … /p/100; the pages in failing answer 500
// until heal, then like the others.
type flakySite struct {
	mu      sync.Mutex
	failing map[int]bool
	healed  bool
	served  map[string]int
}

func (s *flakySite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served[r.URL.Path]++
	if r.URL.Path == "/list" {
		fmt.Fprint(w, "<html><body><ul>")
		for i := 1; i <= 100; i++ {
			fmt.Fprintf(w, `<li><a href="/p/%d">%d</a></li>`, i, i)
		}
		fmt.Fprint(w, "</ul></body></html>")
		return
	}
	n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
	switch {
	case err != nil || n < 1 || n > 100:
		http.NotFound(w, r)
	case s.failing[n] && !s.healed:
		http.Error(w, "internal error", http.StatusInternalServerError)
	default:
		fmt.Fprintf(w, "<html><body><h1>page %d</h1></body></html>", n)
	}
}

// detailFetches counts the requests for detail pages.
func (s *flakySite) detailFetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p, c := range s.served {
		if strings.HasPrefix(p, "/p/") {
			n += c
		}
	}
	return n
}

// A rerun fetches and stores exactly the inputs its run gave up on, and says which
// run it re-runs.
func TestRerunFetchesOnlyWhatFailed(t *testing.T) {
	site := &flakySite{failing: map[int]bool{}, served: map[string]int{}}
	for i := 7; i <= 97; i += 10 {
		site.failing[i] = true
	}
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	p := plan(t, "flaky.yaml", fmt.Sprintf(`name: flaky
robots: false
defaults: {timeout: 5s, retries: 0, params: {base_url: '%s'}}
steps:
  - id: list
    task: generic.html_list
    params: {urls: ['/list'], items: li, fields: {link: {css: a, attr: href, type: url}}, detail: link}
  - id: detail
    task: generic.html_detail
    from: list
    store: [jsonl]
    params: {fields: {title: {css: h1, required: true}}}
`, srv.URL))
	orig := start(t, p, taskQueue)
	s := wait(t, orig, 2*time.Minute)
	if st := stepStats(s, "detail"); st.Failed != 10 || st.Items != 90 {
		t.Fatalf("first run: detail failed %d, stored %d; want 10 and 90", st.Failed, st.Items)
	}
	_, stderr, code := trawler(t, append([]string{"rerun", orig, "--step", "nope"}, stackFlags()...)...)
	if want := fmt.Sprintf(`--step "nope": run %s's chain flaky has no such step; its steps are list, detail`, orig); code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("rerun --step nope: exit %d, stderr %q; want %q", code, stderr, want)
	}
	_, stderr, code = trawler(t, append([]string{"rerun", orig, "--cause", "http_404"}, stackFlags()...)...)
	if want := fmt.Sprintf(`run %s has no failed inputs with cause http_404; its failures are detail http_5xx 10`, orig); code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("rerun --cause http_404: exit %d, stderr %q; want %q", code, stderr, want)
	}
	_, stderr, code = trawler(t, append([]string{"rerun", orig, "--cause", "http_5x"}, stackFlags()...)...)
	if want := `--cause "http_5x": no such cause; the causes are http_401, `; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("rerun --cause http_5x: exit %d, stderr %q; want %q", code, stderr, want)
	}

	site.mu.Lock()
	site.healed = true
	site.mu.Unlock()
	before := site.detailFetches()
	stdout, stderr, code := trawler(t, append([]string{"rerun", orig, "--step", "detail", "--cause", "http_5xx,timeout", "--json"}, stackFlags()...)...)
	var res engine.RerunResult
	if code != 0 || json.Unmarshal([]byte(lastLine(stdout)), &res) != nil {
		t.Fatalf("rerun: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if res.Inputs != 10 || res.Of != orig || res.Steps["detail"] != 10 {
		t.Fatalf("rerun started %+v; want 10 inputs of step detail", res)
	}
	rs := wait(t, res.RunID, 2*time.Minute)
	if got := site.detailFetches() - before; got != 10 {
		t.Errorf("the rerun fetched %d detail pages, want the 10 that failed", got)
	}
	if st := stepStats(rs, "detail"); st.Items != 10 || st.Failed != 0 || stepStats(rs, "list").Pages != 0 {
		t.Errorf("rerun: %+v; want 10 detail items, no failures, the list not fetched", rs.Steps)
	}
	if keys := stored(t, res.RunID); len(keys) != 10 {
		t.Errorf("the rerun stored %d records, want 10", len(keys))
	}
	st, _ := runStatus(t, res.RunID)
	var link struct {
		RerunOf string `json:"rerun_of"`
	}
	stdout, _, _ = trawler(t, append([]string{"status", res.RunID, "--json"}, stackFlags()...)...)
	if err := json.Unmarshal([]byte(lastLine(stdout)), &link); err != nil || link.RerunOf != orig || st.State != "completed" {
		t.Errorf("status of the rerun: rerun_of %q, state %q; want %s, completed", link.RerunOf, st.State, orig)
	}
	_, stderr, code = trawler(t, append([]string{"rerun", res.RunID}, stackFlags()...)...)
	if want := fmt.Sprintf("run %s has no failed inputs to re-run", res.RunID); code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("rerun of a run without failures: exit %d, stderr %q; want %q", code, stderr, want)
	}
}
