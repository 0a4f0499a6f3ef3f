package activities

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/testsuite"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/quota"
	"github.com/trawlerhq/trawler/internal/storage"
)

type page struct {
	Title string `css:"h1" required:"true"`
}

// titleTask stores a page's <h1>; a page without one is a parse failure.
var titleTask = crawl.HTMLTask("causes.title", func(p *crawl.Page, out *crawl.Out[page]) error {
	out.Item("causes:"+p.URL, out.Scan(p))
	return nil
})

// causeSite answers each path with one kind of failure.
func causeSite(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			w.Write([]byte("User-agent: *\nDisallow: /private\n"))
		case "/404":
			http.NotFound(w, r)
		case "/503":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/hang":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		case "/untitled":
			w.Write([]byte("<p>no title here</p>"))
		default:
			fmt.Fprintf(w, "<h1>%s</h1>", r.URL.Path)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// scrape reads the worker's /metrics as Prometheus serves it: one value per series.
func scrape(t *testing.T) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	out := map[string]float64{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			v, _ := strconv.ParseFloat(line[i+1:], 64)
			out[line[:i]] = v
		}
	}
	return out
}

// runBatchActivity runs RunBatch as Temporal runs an activity (heartbeats included).
func runBatchActivity(t testing.TB, a *Activities, b crawl.Batch) (crawl.BatchResult, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a.RunBatch)
	v, err := env.ExecuteActivity(a.RunBatch, b)
	if err != nil {
		return crawl.BatchResult{}, err
	}
	var res crawl.BatchResult
	if err := v.Get(&res); err != nil {
		t.Fatal(err)
	}
	return res, nil
}

// The failure-cause table: each cause produced for real by a batch — statuses, a hang,
// robots.txt, a name that does not resolve (through the fetcher's resolver hook), a
// page the task cannot read, a spent budget and a store that is down — is seen with its
// cause in the batch's summary and on /metrics.
func TestFailureCausesReachSummaryAndMetrics(t *testing.T) {
	srv := causeSite(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	network := &fetch.Network{LookupIP: func(ctx context.Context, name string) ([]netip.Addr, error) {
		if name == "gone.example" {
			return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
		}
		return net.DefaultResolver.LookupNetIP(ctx, "ip", name)
	}}
	reg := crawl.NewRegistry()
	reg.Register(titleTask)
	js := newFlaky(t, "jsonl")
	a := &Activities{
		Registry: reg, Sinks: storage.Set{"jsonl": js},
		Fetcher: fetch.New(fetch.Options{AllowPrivate: true, Retries: -1, MaxRetryWait: -1, Network: network}),
	}
	chain := fmt.Sprintf("causes-%d", time.Now().UnixNano())
	step := crawl.PlanStep{ID: "page", Task: titleTask.Spec().Name, Timeout: 300 * time.Millisecond, Concurrency: 4, Store: []string{"jsonl"}}
	work := func(paths ...string) []crawl.Work {
		var ws []crawl.Work
		for _, p := range paths {
			u := srv.URL + p
			if strings.HasPrefix(p, "http") {
				u = p
			}
			ws = append(ws, crawl.Work{Input: crawl.Input{URL: u}})
		}
		return ws
	}
	before := scrape(t)
	res, err := runBatchActivity(t, a, crawl.Batch{Chain: chain, Tenant: "t", RunID: "r1", Robots: true, Step: step,
		Work: work("/ok", "/404", "/503", "/hang", "/private/x", "/untitled", "http://gone.example:"+strings.Split(host, ":")[1]+"/")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]crawl.Cause{
		"/404": crawl.CauseHTTP404, "/503": crawl.CauseHTTP5xx, "/hang": crawl.CauseTimeout,
		"/private/x": crawl.CauseRobots, "/untitled": crawl.CauseParse, "gone.example": crawl.CauseDNS,
	}
	if res.Pages != 1 || res.Items != 1 || len(res.Failed) != len(want) {
		t.Fatalf("pages %d items %d failed %d (%+v); want 1, 1 and %d", res.Pages, res.Items, len(res.Failed), res.Failed, len(want))
	}
	for _, f := range res.Failed {
		u := f.Input.URL
		var w crawl.Cause
		for suffix, c := range want {
			if strings.HasSuffix(u, suffix) || strings.Contains(u, suffix) {
				w = c
			}
		}
		if f.Class != w {
			t.Errorf("%s: cause %q in the summary, want %q (%s)", u, f.Class, w, f.Cause)
		}
	}
	after := scrape(t)
	for _, c := range want {
		series := fmt.Sprintf(`trawler_failures_total{cause=%q,chain=%q,tenant="t"}`, c, chain)
		if got := after[series] - before[series]; got != 1 {
			t.Errorf("/metrics %s went up by %v, want 1", series, got)
		}
	}

	// A spent budget: of three pages with a run budget of two, one is left unrun.
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	defer rdb.Close()
	a.Quotas = quota.New(rdb, 0)
	step.Concurrency = 1
	res, err = runBatchActivity(t, a, crawl.Batch{Chain: chain, Tenant: "t", RunID: "r2", Robots: true, Step: step, Quota: crawl.Quota{Pages: 2}, Work: work("/a", "/b", "/c")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pages != 2 || res.QuotaSkipped != 1 || !strings.Contains(res.Quota, "pages") {
		t.Errorf("budget of 2 pages over 3: pages %d, skipped %d, reason %q", res.Pages, res.QuotaSkipped, res.Quota)
	}
	series := fmt.Sprintf(`trawler_quota_skipped_total{chain=%q,tenant="t"}`, chain)
	if got := scrape(t)[series]; got != 1 {
		t.Errorf("/metrics %s = %v, want 1", series, got)
	}
	a.Quotas = nil

	// A store that is down: the batch hands its inputs back waiting for it, naming it.
	js.down = true
	res, err = runBatchActivity(t, a, crawl.Batch{Chain: chain, Tenant: "t", RunID: "r3", Robots: true, Step: step, Outages: true, OutageHold: 200 * time.Millisecond, Work: work("/d", "/e")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outage == nil || res.Outage.Dependency != "store jsonl" || len(res.Waiting) != 2 || res.Pages != 0 {
		t.Fatalf("store down: outage %+v, %d waiting, %d pages; want store jsonl with both inputs waiting", res.Outage, len(res.Waiting), res.Pages)
	}
	if c := crawl.CauseOf(crawl.Dependency(res.Outage.Dependency, fmt.Errorf("%s", res.Outage.Cause))); c != crawl.CauseStore {
		t.Errorf("store outage cause %q, want %q", c, crawl.CauseStore)
	}
}

// failureOf runs one input through a batch of titleTask on fetcher f and returns its
// failure as the run summary shows it.
func failureOf(t *testing.T, f *fetch.Fetcher, timeout time.Duration, url string) crawl.Failure {
	t.Helper()
	reg := crawl.NewRegistry()
	reg.Register(titleTask)
	a := &Activities{Registry: reg, Sinks: storage.Set{"jsonl": newFlaky(t, "jsonl")}, Fetcher: f}
	step := crawl.PlanStep{ID: "page", Task: titleTask.Spec().Name, Timeout: timeout, Concurrency: 1, Store: []string{"jsonl"}}
	res, err := runBatchActivity(t, a, crawl.Batch{Chain: "causes", Tenant: "t", RunID: "r", Step: step, Work: []crawl.Work{{Input: crawl.Input{URL: url}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 1 {
		t.Fatalf("%s: %d pages, failures %+v; want one failure", url, res.Pages, res.Failed)
	}
	t.Logf("%s: %s", res.Failed[0].Class, res.Failed[0].Cause)
	return res.Failed[0]
}

// Each failure is named for what happened, in its cause and in its text: a redirect to
// a file:// URL is refused (blocked), a body that trickles in past the timeout is a
// timeout whichever deadline ends it, an input that never got one of its host's
// slots says so, and a page nested too deep for the HTML parser names the limit.
func TestCausesSayWhatHappened(t *testing.T) {
	held := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/trickle":
			// One byte every 300 ms: the answer starts at once, the body never ends.
			w.Write([]byte("<h1>"))
			for {
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(300 * time.Millisecond):
				}
				w.Write([]byte("x"))
			}
		case "/hold":
			held <- struct{}{}
			<-r.Context().Done()
		case "/deep":
			w.Write([]byte("<html><body>" + strings.Repeat("<div>", 600) + "<h1>deep</h1>" + strings.Repeat("</div>", 600) + "</body></html>"))
		default:
			fmt.Fprintf(w, "<h1>%s</h1>", r.URL.Path)
		}
	}))
	t.Cleanup(srv.Close)
	opts := fetch.Options{AllowPrivate: true, Retries: -1, MaxRetryWait: -1}

	t.Run("redirect to file", func(t *testing.T) {
		f := failureOf(t, fetch.New(opts), 5*time.Second, srv.URL+"/to-file")
		if f.Class != crawl.CauseBlocked || !strings.Contains(f.Cause, "redirect to file:///etc/passwd refused") || !strings.Contains(f.Cause, "only http and https") {
			t.Errorf("cause %q: %s; want blocked, naming the refused redirect and the schemes fetched", f.Class, f.Cause)
		}
	})
	t.Run("trickle past the fetch timeout", func(t *testing.T) {
		o := opts
		o.Timeout = time.Second
		f := failureOf(t, fetch.New(o), 10*time.Second, srv.URL+"/trickle")
		if f.Class != crawl.CauseTimeout || !strings.Contains(f.Cause, "read timeout after 1s") {
			t.Errorf("cause %q: %s; want timeout, read timeout after 1s", f.Class, f.Cause)
		}
	})
	t.Run("trickle past the step timeout", func(t *testing.T) {
		f := failureOf(t, fetch.New(opts), time.Second, srv.URL+"/trickle")
		if f.Class != crawl.CauseTimeout || !strings.Contains(f.Cause, "step timeout 1s") {
			t.Errorf("cause %q: %s; want timeout, naming the step timeout", f.Class, f.Cause)
		}
	})
	t.Run("no host slot in time", func(t *testing.T) {
		o := opts
		o.HostConcurrency = 1
		fetcher := fetch.New(o)
		// Another request holds the host's only slot until the test ends.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); fetcher.Fetch(ctx, &crawl.Request{URL: srv.URL + "/hold"}) }()
		defer func() { cancel(); <-done }()
		<-held
		// The input is held back, not failed: it runs again later with its attempts.
		reg := crawl.NewRegistry()
		reg.Register(titleTask)
		a := &Activities{Registry: reg, Sinks: storage.Set{"jsonl": newFlaky(t, "jsonl")}, Fetcher: fetcher}
		step := crawl.PlanStep{ID: "page", Task: titleTask.Spec().Name, Timeout: 300 * time.Millisecond, Concurrency: 1, Retries: 3, Store: []string{"jsonl"}}
		res, err := runBatchActivity(t, a, crawl.Batch{Chain: "causes", Tenant: "t", RunID: "r", Step: step, Work: []crawl.Work{{Input: crawl.Input{URL: srv.URL + "/waits"}, Attempt: 2}}})
		if err != nil {
			t.Fatal(err)
		}
		want := "held back by the politeness of " + srv.URL
		if len(res.Failed) != 0 || len(res.Retry) != 1 || res.Retry[0].Attempt != 2 || !strings.Contains(res.Retry[0].Cause, want) ||
			!strings.Contains(res.Retry[0].Cause, "no slot came free before the input's deadline (1 at a time)") || res.RetryAfter < time.Second {
			t.Errorf("failed %+v, retry %+v after %s; want the input back with its 2 attempts, %q and why", res.Failed, res.Retry, res.RetryAfter, want)
		}
	})
	t.Run("nested too deep", func(t *testing.T) {
		f := failureOf(t, fetch.New(opts), 5*time.Second, srv.URL+"/deep")
		want := "the page nests elements deeper than 512 levels (the HTML parser's limit)"
		if f.Class != crawl.CauseParse || !strings.Contains(f.Cause, want) || !strings.Contains(f.Cause, "JSON") {
			t.Errorf("cause %q: %s; want parse, %q and what to do", f.Class, f.Cause, want)
		}
	})
}
