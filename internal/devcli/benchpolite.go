//go:build !production

package devcli

import (
	"context"
	"errors"
	"fmt"
	"github.com/trawlerhq/trawler/internal/cli"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/devstack/redisproc"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/polite"
	"github.com/trawlerhq/trawler/internal/redisurl"
)

// Goals of fleet-wide politeness.
const (
	politeGoalRateMin = 0.9  // achieved / declared at least this …
	politeGoalRateMax = 1.0  // … and never above the declared rate
	politeGoalCost    = 0.05 // fleet budgets cost at most this much more CPU per page
	politeWorkers     = 3
)

func benchPoliteCmd(s *cli.Settings) *cobra.Command {
	var (
		o    politeOptions
		rate string
	)
	cmd := &cobra.Command{
		Use:   "polite",
		Short: "Check that three workers hold a host to its declared rate, and measure what shared budgets cost per page",
		Long: `Measure the fleet's host budgets (internal/polite) on a real redis-server (the Debian
package; ` + "`apt-get install redis-server`" + `), in two parts.

  rate  Three workers in this process, each with its own fetcher and its own lease of
        the budgets in the one Redis (as three ` + "`trawler worker`" + ` processes would have),
        run examples/demo.yaml (list → detail, dedup off) on embedded Temporal against a
        local demo site, with ` + "`politeness: {rate: R}`" + ` (--rate) added to the chain's
        defaults. The site logs when each request arrives; the achieved rate is the
        requests it saw over the time from the first to the last (so the start-up of the
        stack and the workflow's last steps are not counted), and the busiest 1-second
        window is the most requests it saw in any second. Goal: achieved / declared
        between 0.9 and 1.0 (two places), never above. Redis spaces the starts evenly;
        a start that leaves late (a busy machine, the network) arrives closer to the
        next one, which the busiest window and the shortest gap between two arrivals
        show.

  cost  The same crawl of --pages cheap pages from one host, fetched --concurrency at a
        time through the worker's fetcher (fetch.New) with a generous limit that the
        crawl stays under (` + "`politeness: {concurrency: L}`" + ` from --limit, no rate), twice: with the fleet's budgets in
        Redis (what a worker with --redis uses) and with LocalBudgets, the budgets of one
        process (what a worker without Redis uses: no sharing). The rest of a batch
        activity (Temporal, parsing, sinks) is the same either way and left out, so the
        difference is the budgets' own. CPU per page is this process's CPU time (user +
        system) over the crawl; the site answers from this process too (a constant
        small page, the same for both), while redis-server's CPU is its own process's
        and shown apart, with the Redis calls per page (INFO commandstats). Each side
        crawls once untimed first; then --rounds rounds alternate which goes first
        (local, fleet, fleet, local, …) so the machine's drift is shared. Goal: fleet
        budgets at most 5% more CPU per page than local ones.

The cost part runs first, before the Temporal stack starts, so the stack's idle work
does not land in either side's CPU. Other work on the machine shows in the numbers; run
with --rounds 4 or more where it is busy.`,
		Example: `  trawler bench polite
  trawler bench polite --rate 5/s --feed-pages 2 --per-page 20
  trawler bench polite --pages 10000 --rounds 4 --concurrency 64
  trawler bench polite --json | tail -1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := crawl.ParseRate(rate)
			if err != nil || r <= 0 {
				return fmt.Errorf("--rate %q: give a rate like 20/s, 600/m or 5/s", rate)
			}
			o.rate = r
			if o.feedPages < 1 || o.perPage < 1 {
				return fmt.Errorf("--feed-pages %d --per-page %d: use 1 or more of each", o.feedPages, o.perPage)
			}
			if o.pages < 1 || o.concurrency < 1 || o.rounds < 1 {
				return fmt.Errorf("--pages %d --concurrency %d --rounds %d: use 1 or more of each", o.pages, o.concurrency, o.rounds)
			}
			if o.limit < o.concurrency {
				return fmt.Errorf("--limit %d is below --concurrency %d: the cost part measures a host whose limit the crawl stays under; raise --limit", o.limit, o.concurrency)
			}
			if !s.JSON {
				o.note = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
			}
			res, err := benchPolite(cmd.Context(), s, o)
			if err != nil {
				return err
			}
			return printResult(s, res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&rate, "rate", "20/s", "rate part: the rate the chain declares for the site (n/s, n/m or n/h)")
	f.IntVar(&o.feedPages, "feed-pages", 10, "rate part: demo feed pages to crawl, each with --per-page detail pages (10 × 30 = 310 requests, about 16 s at 20/s)")
	f.IntVar(&o.perPage, "per-page", demosite.DefaultPerPage, "rate part: detail pages each feed page links to")
	f.IntVar(&o.pages, "pages", 3000, "cost part: pages each side crawls per round")
	f.IntVar(&o.concurrency, "concurrency", 32, "cost part: requests in flight at once")
	f.IntVar(&o.limit, "limit", 64, "cost part: the host's declared concurrency, across the fleet")
	f.IntVar(&o.rounds, "rounds", 2, "cost part: timed rounds per side, alternating which side goes first")
	return cmd
}

type politeOptions struct {
	rate               float64 // requests per second declared (rate part)
	feedPages, perPage int
	pages, concurrency int // cost part
	limit              int // the host's declared concurrency in the cost part
	rounds             int
	note               func(format string, args ...any) // progress; nil for none
}

// politeRate is what the site saw of three workers crawling it at a declared rate.
type politeRate struct {
	Workers  int     `json:"workers"`
	Declared float64 `json:"declared_per_s"`
	Requests int     `json:"requests"` // every request the site saw, robots.txt too
	Seconds  float64 `json:"seconds"`  // from the first request to the last
	Achieved float64 `json:"achieved_per_s"`
	// Ratio is achieved / declared, rounded to three places.
	Ratio       float64 `json:"ratio"`
	Busiest1s   int     `json:"busiest_1s"`    // most requests in any 1-second window
	MaxInFlight int     `json:"max_in_flight"` // most requests the site served at once
	// ShortestGapMS is the least time between two arrivals: the budget spaces starts
	// evenly, so a shorter gap is a start delayed on its way (a busy machine, the network).
	ShortestGapMS float64 `json:"shortest_gap_ms"`
	GoalMet       bool    `json:"goal_met"`
	RunID         string  `json:"run_id"`
}

// politeCostSide is one way of keeping budgets over the cost part's timed rounds.
type politeCostSide struct {
	Pages             int       `json:"pages"`
	Seconds           float64   `json:"seconds"`
	PagesPerS         float64   `json:"pages_per_s"`
	CPUPerPageUS      float64   `json:"cpu_per_page_us"`       // this process
	RedisCallsPerPage float64   `json:"redis_calls_per_page"`  // commands redis-server ran
	RedisCPUPerPageUS float64   `json:"redis_cpu_per_page_us"` // redis-server's own CPU
	RoundsCPUUS       []float64 `json:"rounds_cpu_per_page_us"`
}

type politeCost struct {
	Pages       int            `json:"pages"` // per side and round
	Concurrency int            `json:"concurrency"`
	Limit       int            `json:"limit"`
	Rounds      int            `json:"rounds"`
	Local       politeCostSide `json:"local"`
	Fleet       politeCostSide `json:"fleet"`
	// Overhead is the fleet's extra CPU per page over the local budgets', as a fraction.
	Overhead    float64 `json:"overhead"`
	ExtraUSPage float64 `json:"extra_cpu_per_page_us"`
	Goal        float64 `json:"goal"`
	GoalMet     bool    `json:"goal_met"`
}

type politeResult struct {
	Redis string     `json:"redis"`
	Rate  politeRate `json:"rate"`
	Cost  politeCost `json:"cost"`
}

func (r *politeResult) print() {
	fmt.Printf("\nfleet politeness on %s\n", r.Redis)
	rt := r.Rate
	fmt.Printf("  rate: %d workers, declared %s; the site saw %d requests in %.2f s from first to last\n",
		rt.Workers, crawl.FormatRate(rt.Declared), rt.Requests, rt.Seconds)
	fmt.Printf("    achieved %.2f/s, declared %.2f/s: ratio %.3f (goal %.1f–%.1f, never above: %s)\n",
		rt.Achieved, rt.Declared, rt.Ratio, politeGoalRateMin, politeGoalRateMax, verdict(rt.GoalMet))
	fmt.Printf("    busiest 1 s window: %d requests; shortest gap %.1f ms (even spacing: %.1f ms); at most %d in flight (run %s)\n",
		rt.Busiest1s, rt.ShortestGapMS, 1000/rt.Declared, rt.MaxInFlight, rt.RunID)
	c := r.Cost
	fmt.Printf("  cost: %d pages per side and round, %d rounds, %d in flight, the host's limit %d at a time, no rate\n", c.Pages, c.Rounds, c.Concurrency, c.Limit)
	fmt.Printf("    %-28s %12s %12s %16s %12s\n", "", "CPU µs/page", "pages/s", "Redis calls/page", "Redis µs/page")
	row := func(name string, sd politeCostSide) {
		fmt.Printf("    %-28s %12.1f %12.0f %16.3f %12.1f\n", name, sd.CPUPerPageUS, sd.PagesPerS, sd.RedisCallsPerPage, sd.RedisCPUPerPageUS)
	}
	row("local budgets (no sharing)", c.Local)
	row("fleet budgets (Redis)", c.Fleet)
	fmt.Printf("    fleet over local: %+.1f%% CPU per page (%+.1f µs) (goal ≤ %.0f%%: %s); per round: local %v, fleet %v µs\n",
		100*c.Overhead, c.ExtraUSPage, 100*c.Goal, verdict(c.GoalMet), c.Local.RoundsCPUUS, c.Fleet.RoundsCPUUS)
}

// benchPolite starts a redis-server, runs the cost part and then the rate part.
func benchPolite(ctx context.Context, s *cli.Settings, o politeOptions) (*politeResult, error) {
	note := o.note
	if note == nil {
		note = func(string, ...any) {}
	}
	rds, err := redisproc.Start()
	if err != nil {
		return nil, err
	}
	defer rds.Stop()
	rdb, err := redisurl.Open(rds.Addr, redisurl.Options{})
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	version := "redis-server"
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		version += " " + infoField(info, "redis_version")
	}
	res := &politeResult{Redis: version}
	if res.Cost, err = politeCostPart(ctx, rdb, o, note); err != nil {
		return nil, fmt.Errorf("cost part: %w", err)
	}
	if res.Rate, err = politeRatePart(ctx, s, rds.Addr, o, note); err != nil {
		return nil, fmt.Errorf("rate part: %w", err)
	}
	return res, nil
}

// arrivals is a site's log of when requests arrived and how many it served at once.
type arrivals struct {
	mu       sync.Mutex
	at       []time.Time
	inFlight atomic.Int64
	most     atomic.Int64
}

func (a *arrivals) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.at = append(a.at, time.Now())
		a.mu.Unlock()
		n := a.inFlight.Add(1)
		for m := a.most.Load(); n > m && !a.most.CompareAndSwap(m, n); m = a.most.Load() {
		}
		defer a.inFlight.Add(-1)
		h.ServeHTTP(w, r)
	})
}

// busiest is the most arrivals in any window [t, t+w), the time from the first to the
// last and the shortest time between two.
func (a *arrivals) busiest(w time.Duration) (most int, span, gap time.Duration) {
	a.mu.Lock()
	at := slices.Clone(a.at)
	a.mu.Unlock()
	slices.SortFunc(at, func(x, y time.Time) int { return x.Compare(y) })
	if len(at) < 2 {
		return len(at), 0, 0
	}
	j, gap := 0, at[1].Sub(at[0])
	for i := range at {
		for at[i].Sub(at[j]) >= w {
			j++
		}
		most = max(most, i-j+1)
		if i > 0 {
			gap = min(gap, at[i].Sub(at[i-1]))
		}
	}
	return most, at[len(at)-1].Sub(at[0]), gap
}

// serveLocal serves h on a free loopback port until stop.
func serveLocal(h http.Handler) (base string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

func politeRatePart(ctx context.Context, s *cli.Settings, redisAddr string, o politeOptions, note func(string, ...any)) (politeRate, error) {
	out := politeRate{Workers: politeWorkers, Declared: o.rate}
	log := &arrivals{}
	base, stopSite, err := serveLocal(log.wrap(demosite.Handler(demosite.Options{Pages: o.feedPages, PerPage: o.perPage})))
	if err != nil {
		return out, err
	}
	defer stopSite()
	data, err := os.MkdirTemp("", "trawler-bench-polite-")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(data)
	note("rate: starting embedded Temporal and %d workers sharing %s…", politeWorkers, redisAddr)
	st, err := startStack(ctx, s, stackOptions{data: data, sitePages: 1})
	if err != nil {
		return out, err
	}
	defer st.stop()
	c, err := s.Dial(ctx)
	if err != nil {
		return out, err
	}
	defer c.Close()
	for i := range politeWorkers {
		w, err := engine.NewWorker(c, engine.WorkerOptions{
			TaskQueue: s.TaskQueue, OutDir: filepath.Join(data, fmt.Sprintf("out-%d", i+1)), Log: s.Logger(),
			Identity: fmt.Sprintf("bench-polite-%d", i+1), Redis: redisAddr,
			Fetch: fetch.Options{AllowPrivate: true}, // the site listens on loopback
		})
		if err == nil {
			err = w.Start()
		}
		if err != nil {
			return out, fmt.Errorf("worker %d: %w", i+1, err)
		}
		defer w.Stop()
	}

	// The demo chain as a user would write it, with the rate in its defaults.
	src, err := examples.Files.ReadFile("demo.yaml")
	if err != nil {
		return out, err
	}
	head, tail, found := strings.Cut(string(src), "\ndefaults:")
	if !found {
		return out, errors.New("examples/demo.yaml has no `defaults:` block to declare the rate in")
	}
	eol := strings.IndexByte(tail, '\n')
	chain := head + "\ndefaults:" + tail[:eol+1] + "  politeness: {rate: " + crawl.FormatRate(o.rate) + "}\n" + tail[eol+1:]
	p, err := cli.LoadChain("examples/demo.yaml", []byte(chain), []string{"base_url=" + base, "feed.pages=" + strconv.Itoa(o.feedPages)})
	if err != nil {
		return out, err
	}
	if err := dropLastStep(p, "comments"); err != nil {
		return out, err
	}
	for i := range p.Steps {
		p.Steps[i].Dedup = "off" // every run fetches every page
	}
	want := o.feedPages * (1 + o.perPage)
	note("rate: crawling %d pages at a declared %s (about %.0f s)…", want, crawl.FormatRate(o.rate), float64(want)/o.rate)
	quiet := *s
	quiet.JSON = false // progress goes to a terminal's stderr only, never to stdout
	run, err := cli.StartAndWait(ctx, &quiet, c, p, cli.WaitOn(c))
	if err != nil {
		return out, err
	}
	out.RunID = run.RunID
	if run.Failed > 0 || run.Pages != want {
		return out, fmt.Errorf("run %s fetched %d pages with %d failures (first: %s); the demo site holds %d", run.RunID, run.Pages, run.Failed, firstFailure(run), want)
	}
	most, span, gap := log.busiest(time.Second)
	log.mu.Lock()
	out.Requests = len(log.at)
	log.mu.Unlock()
	out.Busiest1s, out.MaxInFlight, out.Seconds = most, int(log.most.Load()), cli.RoundTo(span.Seconds(), 3)
	out.ShortestGapMS = cli.RoundTo(float64(gap.Microseconds())/1000, 1)
	if span > 0 {
		achieved := float64(out.Requests-1) / span.Seconds()
		out.Achieved, out.Ratio = cli.RoundTo(achieved, 2), cli.RoundTo(achieved/o.rate, 3)
	}
	r2 := cli.RoundTo(out.Ratio, 2)
	out.GoalMet = r2 >= politeGoalRateMin && r2 <= politeGoalRateMax
	return out, nil
}

// politeCostPart crawls the cheap site with fleet and with local budgets, alternating.
func politeCostPart(ctx context.Context, rdb redis.UniversalClient, o politeOptions, note func(string, ...any)) (politeCost, error) {
	out := politeCost{Pages: o.pages, Concurrency: o.concurrency, Limit: o.limit, Rounds: o.rounds, Goal: politeGoalCost}
	page := []byte("<!doctype html><html><head><title>page</title></head><body>" + strings.Repeat("<p>cheap page</p>", 100) + "</body></html>")
	base, stopSite, err := serveLocal(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			_, _ = w.Write([]byte("User-agent: *\nAllow: /\n"))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	}))
	if err != nil {
		return out, err
	}
	defer stopSite()
	fleet := polite.New(rdb, "bench-polite-cost")
	defer fleet.Close()
	sides := []struct {
		name string
		f    *fetch.Fetcher
		sum  *politeCostSide
		cpu  time.Duration
		wall time.Duration
		red  redisUse
	}{
		{name: "local", f: fetch.New(fetch.Options{AllowPrivate: true, Budgets: fetch.LocalBudgets()}), sum: &out.Local},
		{name: "fleet", f: fetch.New(fetch.Options{AllowPrivate: true, Budgets: fleet, Robots: polite.NewRobots(rdb)}), sum: &out.Fleet},
	}
	pol := &crawl.Politeness{Concurrency: o.limit}
	next := 0 // pages get distinct paths across rounds
	crawlPages := func(f *fetch.Fetcher, n int) error {
		from := next
		next += n
		return politeCrawl(ctx, f, base, pol, from, n, o.concurrency)
	}
	note("cost: warming up both sides (%d pages each)…", min(o.pages, 500))
	for _, sd := range sides {
		if err := crawlPages(sd.f, min(o.pages, 500)); err != nil {
			return out, fmt.Errorf("%s budgets: %w", sd.name, err)
		}
	}
	for round := range o.rounds {
		order := []int{0, 1}
		if round%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			sd := &sides[i]
			note("cost: round %d/%d, %s budgets: %d pages, %d in flight…", round+1, o.rounds, sd.name, o.pages, o.concurrency)
			// The slots the fleet side still holds go back to Redis within idleHold of
			// its last page: let that happen before the next side's span begins.
			time.Sleep(200 * time.Millisecond)
			r0, err := redisUsage(ctx, rdb)
			if err != nil {
				return out, err
			}
			cpu, began := processCPU(), time.Now()
			if err := crawlPages(sd.f, o.pages); err != nil {
				return out, fmt.Errorf("%s budgets: %w", sd.name, err)
			}
			cpu, wall := processCPU()-cpu, time.Since(began)
			r1, err := redisUsage(ctx, rdb)
			if err != nil {
				return out, err
			}
			sd.cpu += cpu
			sd.wall += wall
			sd.red.calls += r1.calls - r0.calls - 1 // less the INFO that read r0
			sd.red.cpu += r1.cpu - r0.cpu
			sd.sum.RoundsCPUUS = append(sd.sum.RoundsCPUUS, cli.RoundTo(float64(cpu.Nanoseconds())/1e3/float64(o.pages), 1))
		}
	}
	for _, sd := range sides {
		n := float64(o.pages * o.rounds)
		*sd.sum = politeCostSide{
			Pages: o.pages * o.rounds, Seconds: cli.RoundTo(sd.wall.Seconds(), 3), PagesPerS: cli.RoundTo(n/sd.wall.Seconds(), 1),
			CPUPerPageUS:      cli.RoundTo(float64(sd.cpu.Nanoseconds())/1e3/n, 1),
			RedisCallsPerPage: cli.RoundTo(float64(sd.red.calls)/n, 3),
			RedisCPUPerPageUS: cli.RoundTo(float64(sd.red.cpu.Nanoseconds())/1e3/n, 1),
			RoundsCPUUS:       sd.sum.RoundsCPUUS,
		}
	}
	if out.Local.CPUPerPageUS > 0 {
		out.Overhead = cli.RoundTo(out.Fleet.CPUPerPageUS/out.Local.CPUPerPageUS-1, 4)
	}
	out.ExtraUSPage = cli.RoundTo(out.Fleet.CPUPerPageUS-out.Local.CPUPerPageUS, 1)
	out.GoalMet = out.Overhead <= out.Goal
	return out, nil
}

// politeCrawl fetches n pages (paths from..from+n) with conc requests at a time.
func politeCrawl(ctx context.Context, f *fetch.Fetcher, base string, pol *crawl.Politeness, from, n, conc int) error {
	var (
		mu    sync.Mutex
		first error
		done  sync.WaitGroup
		idx   atomic.Int64
	)
	idx.Store(int64(from))
	for range conc {
		done.Add(1)
		go func() {
			defer done.Done()
			for {
				i := int(idx.Add(1)) - 1
				if i >= from+n {
					return
				}
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := f.Fetch(rctx, &crawl.Request{URL: base + "/page/" + strconv.Itoa(i), Politeness: pol})
				cancel()
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	done.Wait()
	return first
}

// redisUse is what redis-server has done: commands run and CPU used.
type redisUse struct {
	calls int64
	cpu   time.Duration
}

func redisUsage(ctx context.Context, rdb redis.UniversalClient) (redisUse, error) {
	info, err := rdb.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return redisUse{}, fmt.Errorf("read redis-server's INFO: %w", err)
	}
	var u redisUse
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "cmdstat_"); ok {
			_, stats, _ := strings.Cut(rest, ":")
			for _, kv := range strings.Split(stats, ",") {
				if v, ok := strings.CutPrefix(kv, "calls="); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					u.calls += n
				}
			}
		}
	}
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		sec, _ := strconv.ParseFloat(infoField(info, f), 64)
		u.cpu += time.Duration(sec * float64(time.Second))
	}
	return u, nil
}

// infoField is a field of redis-server's INFO text.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
