//go:build !production

package devcli

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/trawlerhq/trawler/internal/cli"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gocolly/colly/v2"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/devstack/redisproc"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/redisurl"
	"github.com/trawlerhq/trawler/internal/sites/demo"
	"github.com/trawlerhq/trawler/internal/storage"
)

// benchGoal is the throughput Trawler aims for, as a fraction of Colly's: in one process
// (trawler dev's layout), and with the worker in a process of its own and a real
// redis-server (production's), where the worker's CPU is its own.
const (
	benchGoal           = 0.6
	benchGoalProduction = 0.8
)

// goal is the bench's goal for a layout.
func (o benchOptions) goal() float64 {
	if o.workerProcess && o.redisServer {
		return benchGoalProduction
	}
	return benchGoal
}

func benchCmd(s *cli.Settings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Trawler against a plain in-process crawler",
		Long: `Benchmarks that put a number on what durability costs. ` + "`trawler bench crawl`" + ` crawls the
bundled demo site with Colly and with Trawler on embedded Temporal and compares pages/s.`,
	}
	cmd.AddCommand(benchCrawlCmd(s), benchScaleCmd(s), benchHopsCmd(s), benchRecrawlCmd(s), benchRenderCmd(s), benchCapacityCmd(s), benchPoliteCmd(s))
	return cmd
}

func benchCrawlCmd(s *cli.Settings) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "crawl",
		Short: "Crawl the demo site (or its static copy) with Colly and with Trawler (durable) and compare pages/s",
		Long: `Crawl the bundled demo news site twice in this process and compare throughput:

  colly    github.com/gocolly/colly/v2, async, LimitRule{DomainGlob: "*", Parallelism: C},
           no URL revisits, its HTTP transport keeping as many idle connections per host
           as Trawler's fetcher does. It follows the list pages (More link) up to --list-pages,
           visits every story, extracts the fields demo.story stores (title, url, author,
           score, time, comments, text), follows every comments page and extracts every
           comment (id, author, text), writing each item as a JSON line through a buffered
           file writer. No durability: a crash loses the crawl.
  trawler  examples/demo.yaml run by an embedded Temporal server persisting to SQLite in
           a temp data dir, with one worker whose fetcher lets at most C requests hit the
           site at once (fetch HostConcurrency = C, as Colly's Parallelism). Every batch of
           inputs is a Temporal activity: scheduled, started, heartbeated and completed
           through the server and written to SQLite, and its items go to the jsonl sink.

Both sides must crawl the same pages and store the same items, and both must match what
the demo site says a full crawl stores; otherwise the command fails (the comparison
would not be fair).

What is measured: the site runs on loopback and answers at once, so this is pure
overhead, not network — HTML parsing, JSON encoding and, for Trawler, the price of
durability. Trawler does not pay it per page: a step's inputs travel in batches (up to
` + "`batch`" + ` inputs, 50 in the demo chain, ` + "`parallel`" + ` batches in flight per step), each batch
one Temporal activity, and the chain workflow routes a finished batch's outputs into new
batches in one workflow task; every activity and workflow task is a round trip through
the server and a write to SQLite. The list and comments pages link each to the next, a
chain of hops that would cost a round trip each; a batch follows such pages itself on its
worker (checkpointed in its heartbeat), so only a few hops go through the server. Over a
real network both sides wait on the site with at most C requests in flight, and the
overhead matters less; the goal is Trawler ≥ 0.6× Colly even here. The CPU column is
each side's process CPU per page over the timed span; Trawler's includes the embedded
Temporal server. Reading the stores back to check a run comes after the span.

With --site static the site's pages are rendered once, before either side starts, and
served from memory (the same pages and links): the site then costs a few µs a page, and
what remains is each crawler's own cost per page. The CPU rows list every process of
Trawler's side: this one (Temporal server, worker, sinks, the site and, with --redis,
the embedded Redis) and, with --redis --redis-server, the redis-server the bench starts;
with --redis the bench also counts the Redis commands per page (by command name on a
redis-server, whose INFO commandstats counts the commands scripts run too).

With --worker-process the worker runs as in production, in a process of its own: the
bench starts this binary as trawler worker on the same stack (task queue, jsonl output,
with --redis the same Redis, --allow-private, --host-concurrency C), waits until Temporal
sees it polling, and stops it (SIGTERM) at the end. Its CPU per page is a row of its own,
counted in Trawler's; its log is worker.log in the data dir. With --redis --redis-server
too (production's layout) the goal is Trawler ≥ 0.8× Colly.

Timing: Colly from its first request until its output file is flushed; Trawler from the
run's start until the workflow completes (as ` + "`duration_s`" + ` of ` + "`trawler run --wait`" + `),
excluding the start-up of Temporal and the worker. Neither side is timed cold: Colly
crawls the site once untimed first, and Trawler first runs a one-page chain so the first
workflow's costs are not charged. Colly runs before Temporal starts, so it has the
machine to itself. The machine's other work shows in the numbers (Trawler's more than
Colly's: it waits on many short round trips); --runs N times each side N times and
reports the medians. With --data DIR the Temporal database and both outputs stay in DIR;
otherwise they go to a temp dir that is removed.

--archive DIR measures the cost of archive: (WARC files, see docs/archive.md): each timed
Trawler run is followed by the same run with archive: {to: DIR, max_age: 2s} on every
step, and the bench prints the CPU per page of both and the bytes per page the archive
took on disk (WARC files and their indexes) — on the first archived run, whose pages are
all response records, and, with --runs 2 or more, on the later ones, which find the
site unchanged and write revisit records.`,
		Example: `  trawler bench crawl
  trawler bench crawl --list-pages 200 --per-page 20 --depth 3
  trawler bench crawl --list-pages 50 --concurrency 32
  trawler bench crawl --runs 5                      # medians of 5 timed runs
  trawler bench crawl --batch 100 --parallel 8     # try other batch settings
  trawler bench crawl --redis --runs 3             # with the seen-set and fleet budgets…
  trawler bench crawl --redis --revisit --runs 3   # …and without the seen-set
  trawler bench crawl --site static --list-pages 50 --runs 5 --redis --redis-server
  trawler bench crawl --site static --list-pages 50 --runs 3 --redis --redis-server --worker-process
  trawler bench crawl --site static --cpuprofile trawler.prof   # then: go tool pprof trawler.prof
  trawler bench crawl --archive /tmp/warc --runs 3  # CPU and bytes per page of archive:
  trawler bench crawl --json | tail -1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("pages") && !cmd.Flags().Changed("list-pages") {
				o.pages = o.legacyPages
			}
			if o.pages < 1 {
				return fmt.Errorf("--list-pages %d: use 1 or more list pages", o.pages)
			}
			if o.perPage < 1 {
				return fmt.Errorf("--per-page %d: use 1 or more detail links per list page", o.perPage)
			}
			if o.depth < 2 || o.depth > 3 {
				return fmt.Errorf("--depth %d: use 2 (list → detail) or 3 (list → detail → comments)", o.depth)
			}
			if o.concurrency < 1 {
				return fmt.Errorf("--concurrency %d: use 1 or more parallel requests", o.concurrency)
			}
			if o.runs < 1 {
				return fmt.Errorf("--runs %d: use 1 or more timed runs", o.runs)
			}
			if o.batch < 0 || o.parallel < 0 {
				return errors.New("--batch and --parallel take a positive number (0 keeps the chain's own)")
			}
			if o.revisit && !o.redis {
				return errors.New("--revisit turns the run's seen-set off, which only a worker with Redis has: add --redis")
			}
			if o.redisServer && !o.redis {
				return errors.New("--redis-server chooses the Redis the worker uses, and only a worker with --redis uses one: add --redis")
			}
			if o.archive != "" {
				abs, err := filepath.Abs(o.archive)
				if err != nil {
					return fmt.Errorf("--archive %q: %v", o.archive, err)
				}
				o.archive = abs
			}
			if o.site != "demo" && o.site != "static" {
				return fmt.Errorf("--site %q: use demo (pages rendered per request) or static (pre-rendered, served from memory)", o.site)
			}
			if !s.JSON {
				o.note = func(format string, args ...any) {
					fmt.Fprintf(os.Stderr, format+"\n", args...)
				}
			}
			res, err := benchCrawl(cmd.Context(), s, o)
			if err != nil {
				return err
			}
			return printResult(s, res)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.pages, "list-pages", 20, "list pages to crawl, each linking to the next (with the defaults, 20 = 1579 pages, 13,770 items)")
	f.IntVar(&o.legacyPages, "pages", 20, "the same as --list-pages")
	_ = f.MarkHidden("pages")
	f.IntVar(&o.perPage, "per-page", demosite.DefaultPerPage, "detail pages each list page links to")
	f.IntVar(&o.depth, "depth", 3, "chain depth: 2 is list → detail, 3 is list → detail → comments (every comments page of a detail page, each linking to the next)")
	f.IntVar(&o.concurrency, "concurrency", 16, "requests in flight to the site at once, on both sides")
	f.IntVar(&o.runs, "runs", 1, "timed runs per side; each side reports its median run (the machine's noise shows in the spread)")
	f.IntVar(&o.batch, "batch", 0, "Trawler: inputs per batch activity for every step (0: the chain's own, 50)")
	f.IntVar(&o.parallel, "parallel", 0, "Trawler: batches in flight per step (0: the chain's own, 4)")
	f.BoolVar(&o.redis, "redis", false, "Trawler: the worker uses the stack's Redis, as in production: the run's seen-set (each page fetched once) and the fleet's host budgets; dedup is off so every run stores every item")
	f.BoolVar(&o.revisit, "revisit", false, "with --redis: every step revisit: true, so the seen-set is off (compare with and without it)")
	f.BoolVar(&o.redisServer, "redis-server", false, "with --redis: the worker uses a real redis-server the bench starts (apt-get install redis-server) instead of the embedded one, whose CPU is then shown apart")
	f.StringVar(&o.site, "site", "demo", "the site's shape: demo (pages rendered per request) or static (the same pages and links rendered once and served from memory, a few µs each: what remains is each crawler's own cost per page)")
	f.StringVar(&o.archive, "archive", "", "Trawler: also time each run with archive: to this directory `DIR` on every step, and print the CPU and the bytes of WARC per page")
	f.BoolVar(&o.workerProcess, "worker-process", false, "Trawler: run the worker in a process of its own (this binary's trawler worker) on the same stack, as in production, and show its CPU apart")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process over Trawler's timed runs to this file (go tool pprof FILE); with --worker-process the worker is not in it, only the Temporal server and the site")
	return cmd
}

type benchOptions struct {
	pages       int // list pages
	legacyPages int // --pages, the former name of --list-pages
	perPage     int // detail links per list page; 0 is the demo site's default
	depth       int // 2: list → detail; 3: … → comments; 0 is 3
	concurrency int
	runs        int // timed runs per side; the median counts
	batch       int
	parallel    int
	redis       bool                             // the worker on the stack's Redis: seen-set and fleet budgets
	revisit     bool                             // with redis: the seen-set off
	redisServer bool                             // with redis: a real redis-server, not the embedded one
	site        string                           // "demo" (default) or "static"
	cpuProfile  string                           // file for a CPU profile of Trawler's timed runs
	archive     string                           // a directory: time each run archived there too
	note        func(format string, args ...any) // progress notes; nil for none

	// workerProcess runs the worker as `trawler worker` in a process of its own: the
	// binary workerBinary, or this one when empty (a test's binary is not trawler).
	workerProcess bool
	workerBinary  string
}

// benchSide is one crawler's measurement.
type benchSide struct {
	Pages     int     `json:"pages"`
	Items     int     `json:"items"`
	Seconds   float64 `json:"seconds"`
	PagesPerS float64 `json:"pages_per_s"`
	// CPUPerPageMS is the process's CPU time (user + system) over the run per page: for
	// Trawler it includes the embedded Temporal server and, unless WorkerProcessCPUPerPageMS
	// has them, the worker and the sinks, as they run in this process.
	CPUPerPageMS float64 `json:"cpu_per_page_ms"`
	// WorkerProcessCPUPerPageMS is the same for Trawler's worker process (with
	// --worker-process): the worker and its sinks.
	WorkerProcessCPUPerPageMS float64 `json:"worker_process_cpu_per_page_ms,omitempty"`
}

// trawlerCPUPerPageMS is the CPU per page of this process and of the worker process.
func (b benchSide) trawlerCPUPerPageMS() float64 {
	return b.CPUPerPageMS + b.WorkerProcessCPUPerPageMS
}

// verdict says whether a benchmark met its goal.
func verdict(met bool) string {
	if met {
		return "met"
	}
	return "NOT met"
}

// printResult prints a benchmark's result: its JSON with --json, else its text.
func printResult(s *cli.Settings, res interface{ print() }) error {
	if s.JSON {
		return cli.PrintJSON(res)
	}
	res.print()
	return nil
}

func newBenchSide(pages, items int, d, cpu time.Duration) benchSide {
	sec := d.Seconds()
	rate := 0.0
	if sec > 0 {
		rate = float64(pages) / sec
	}
	return benchSide{Pages: pages, Items: items, Seconds: cli.RoundTo(sec, 3), PagesPerS: cli.RoundTo(rate, 1), CPUPerPageMS: cpuPerPageMS(cpu, pages)}
}

// cpuPerPageMS is cpu per page in milliseconds, rounded to µs; 0 without pages.
func cpuPerPageMS(cpu time.Duration, pages int) float64 {
	if pages <= 0 {
		return 0
	}
	return cli.RoundTo(float64(cpu.Microseconds())/1000/float64(pages), 3)
}

// benchCPU is the CPU time (user + system) Trawler's processes used over a run: this
// process's and, with --worker-process, the worker process's.
type benchCPU struct{ here, worker time.Duration }

// trawlerSide is Trawler's measurement of the run res, which used cpu.
func trawlerSide(res *cli.Result, cpu benchCPU) benchSide {
	b := newBenchSide(res.Pages, res.Items, time.Duration(res.DurationS*float64(time.Second)), cpu.here)
	b.WorkerProcessCPUPerPageMS = cpuPerPageMS(cpu.worker, res.Pages)
	return b
}

// processCPU is the CPU time (user + system) this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchResult is what `trawler bench crawl --json` prints.
type benchResult struct {
	CollyPagesPerS   float64   `json:"colly_pages_per_s"`
	TrawlerPagesPerS float64   `json:"trawler_pages_per_s"`
	Ratio            float64   `json:"ratio"`
	Pages            int       `json:"pages"`
	Items            int       `json:"items"`
	Concurrency      int       `json:"concurrency"`
	FeedPages        int       `json:"feed_pages"` // list pages
	PerPage          int       `json:"per_page"`
	Depth            int       `json:"depth"`
	CPURatio         float64   `json:"cpu_per_page_ratio"` // Trawler's CPU per page over Colly's
	Batch            int       `json:"batch"`
	Parallel         int       `json:"parallel"`
	Goal             float64   `json:"goal"`
	GoalMet          bool      `json:"goal_met"`
	Colly            benchSide `json:"colly"`
	Trawler          benchSide `json:"trawler"`
	Runs             int       `json:"runs"`
	CollyRuns        []float64 `json:"colly_runs_pages_per_s"`
	TrawlerRuns      []float64 `json:"trawler_runs_pages_per_s"`
	TrawlerBatches   int       `json:"trawler_batches"`
	TrawlerRunID     string    `json:"trawler_run_id"`
	Site             string    `json:"site"` // demo or static
	// WorkerProcess says the worker ran in a process of its own (--worker-process).
	WorkerProcess bool `json:"worker_process,omitempty"`
	// Processes is the CPU per page of every process of Trawler's side in its median run:
	// the bench's own (Temporal server, the site, the worker and sinks unless
	// WorkerProcess, and the embedded Redis), with --worker-process the worker
	// process's and with --redis-server redis-server's.
	Processes []benchProcess `json:"processes"`
	// RedisCommandsPerPage is what the worker's Redis ran per page in the median run
	// (with --redis), counted as RedisCounted says.
	RedisCommandsPerPage *float64 `json:"redis_commands_per_page,omitempty"`
	RedisCounted         string   `json:"redis_counted,omitempty"`
	// RedisByCommand is the same per command (with --redis-server), most run first.
	RedisByCommand []benchCommand `json:"redis_by_command,omitempty"`
	// Archived is the same crawl with archive: on every step (with --archive).
	Archived *benchArchive `json:"archived,omitempty"`
}

// benchArchive is what archiving the crawl cost: Trawler's median archived run, its CPU
// per page over the median run without, and the archive's bytes on disk per page.
type benchArchive struct {
	Dir      string    `json:"dir"`
	Trawler  benchSide `json:"trawler"`
	Runs     []float64 `json:"runs_pages_per_s"`
	CPURatio float64   `json:"cpu_per_page_ratio"` // archived over not
	// BytesPerPage is the WARC files and indexes of the first archived run per page
	// (response records); RevisitBytesPerPage that of the later runs (revisit records:
	// the site did not change), 0 with one run.
	BytesPerPage        float64 `json:"bytes_per_page"`
	RevisitBytesPerPage float64 `json:"revisit_bytes_per_page,omitempty"`
}

// benchCommand is how often Redis ran one command per page.
type benchCommand struct {
	Name    string  `json:"name"`
	PerPage float64 `json:"per_page"`
}

// benchProcess is one process's CPU (user + system) per page.
type benchProcess struct {
	Name         string  `json:"name"`
	CPUPerPageMS float64 `json:"cpu_per_page_ms"`
}

// benchRedis is what the worker's Redis did over a span: commands run and, for a
// redis-server, its CPU.
type benchRedis struct {
	commands int64
	cpu      time.Duration
	byName   map[string]int64 // redis-server's commands by name
}

// redisCommands reads redis-server's count of each command it ran (INFO commandstats).
func redisCommands(ctx context.Context, rdb redis.UniversalClient) (map[string]int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("read redis-server's INFO: %w", err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if ok && strings.HasPrefix(strings.TrimSpace(line), "cmdstat_") {
			calls, _, _ := strings.Cut(stats, ",")
			out[name], _ = strconv.ParseInt(calls, 10, 64)
		}
	}
	return out, nil
}

func (r *benchResult) print() {
	shape := "list → detail"
	if r.Depth >= 3 {
		shape += " → comments"
	}
	site := "the demo site"
	if r.Site == "static" {
		site = "the static site (pre-rendered pages from memory)"
	}
	worker := ""
	if r.WorkerProcess {
		worker = ", worker in its own process"
	}
	fmt.Printf("\ncrawl of %s: %s, %d list pages × %d detail links, at most %d requests in flight (Trawler: batch %d, parallel %d%s)\n",
		site, shape, r.FeedPages, r.PerPage, r.Concurrency, r.Batch, r.Parallel, worker)
	fmt.Printf("  %-22s %8s %8s %9s %9s %13s\n", "", "pages", "items", "seconds", "pages/s", "CPU ms/page")
	row := func(name string, b benchSide) {
		fmt.Printf("  %-22s %8d %8d %9.2f %9.1f %13.3f\n", name, b.Pages, b.Items, b.Seconds, b.PagesPerS, b.CPUPerPageMS)
	}
	row("colly (in memory)", r.Colly)
	row("trawler (durable)", r.Trawler)
	if r.Runs > 1 {
		fmt.Printf("  median of %d timed runs each; pages/s per run: colly %v, trawler %v\n", r.Runs, r.CollyRuns, r.TrawlerRuns)
	}
	fmt.Printf("  ratio trawler/colly: %.2f×   goal ≥ %.1f× Colly: %s\n", r.Ratio, r.Goal, verdict(r.GoalMet))
	fmt.Printf("  CPU per page trawler/colly: %.2f× (Trawler's includes the embedded Temporal server and every process below)\n", r.CPURatio)
	width := 0
	for _, p := range r.Processes {
		width = max(width, len(p.Name))
	}
	for _, p := range r.Processes {
		fmt.Printf("    %-*s %.3f ms/page\n", width, p.Name, p.CPUPerPageMS)
	}
	if r.RedisCommandsPerPage != nil {
		fmt.Printf("  Redis commands per page: %.3f (%s)\n", *r.RedisCommandsPerPage, r.RedisCounted)
		for _, c := range r.RedisByCommand {
			fmt.Printf("    %-18s %.3f\n", c.Name, c.PerPage)
		}
	}
	if a := r.Archived; a != nil {
		row("trawler + archive", a.Trawler)
		if len(a.Runs) > 1 {
			fmt.Printf("  pages/s per archived run: %v\n", a.Runs)
		}
		fmt.Printf("  archive: CPU per page %.2f× without (goal ≤ 1.10×); on disk %.0f bytes per page (WARC files and indexes in %s)", a.CPURatio, a.BytesPerPage, a.Dir)
		if a.RevisitBytesPerPage > 0 {
			fmt.Printf(", %.0f on a rerun of the unchanged site (revisit records)", a.RevisitBytesPerPage)
		}
		fmt.Println()
	}
	fmt.Printf("  Trawler ran %d batch activities (%.1f pages each) for run %s\n",
		r.TrawlerBatches, float64(r.Trawler.Pages)/float64(max(r.TrawlerBatches, 1)), r.TrawlerRunID)
}

// benchCrawl runs the comparison: the demo site, Colly (warm-up, then timed), then the
// embedded Temporal stack with a worker, Trawler's warm-up run and its timed runs.
func benchCrawl(ctx context.Context, s *cli.Settings, o benchOptions) (*benchResult, error) {
	o.runs = max(o.runs, 1)
	note := o.note
	if note == nil {
		note = func(string, ...any) {}
	}
	o.depth = cmp.Or(o.depth, 3)
	siteOpts := demosite.Options{Pages: o.pages, PerPage: o.perPage}.WithDefaults()
	o.site = cmp.Or(o.site, "demo")
	startSite := demosite.Start
	if o.site == "static" {
		startSite = demosite.StartStatic
	}
	base, stopSite, err := startSite("127.0.0.1:0", siteOpts)
	if err != nil {
		return nil, fmt.Errorf("start the demo site: %w", err)
	}
	defer func() { _ = stopSite() }()
	wantPages, wantItems := demoCrawlSize(siteOpts, o.pages, o.depth)

	data := s.DataDir("")
	if data == "" {
		tmp, err := os.MkdirTemp("", "trawler-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		data = tmp
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}

	// Colly: once untimed, then timed, before Temporal starts.
	note("colly: crawling %s (%d feed pages, %d pages expected): warm-up, then %d timed run(s)…", base, o.pages, wantPages, o.runs)
	cOut := filepath.Join(data, "colly.jsonl")
	if _, err := collyCrawl(ctx, base, o.pages, o.depth, o.concurrency, cOut); err != nil {
		return nil, fmt.Errorf("colly warm-up: %w", err)
	}
	var collyRuns []benchSide
	for range o.runs {
		cs, err := collyCrawl(ctx, base, o.pages, o.depth, o.concurrency, cOut)
		if err != nil {
			return nil, fmt.Errorf("colly: %w", err)
		}
		if cs.Pages != wantPages || cs.Items != wantItems {
			return nil, fmt.Errorf("colly fetched %d pages and stored %d items, but the demo site holds %d pages and %d items for %d feed pages; the comparison would not be fair",
				cs.Pages, cs.Items, wantPages, wantItems, o.pages)
		}
		collyRuns = append(collyRuns, cs)
	}

	// Trawler: embedded Temporal on SQLite, one worker capped at C requests per host.
	if o.workerProcess {
		note("trawler: starting embedded Temporal (SQLite in %s) and a worker process (its log in %s)…", data, filepath.Join(data, "worker.log"))
	} else {
		note("trawler: starting embedded Temporal (SQLite in %s) and a worker…", data)
	}
	wo := engine.WorkerOptions{Fetch: fetch.Options{HostConcurrency: o.concurrency}}
	// redisNow reads what the worker's Redis has done so far; nil without --redis.
	var redisNow func() (benchRedis, error)
	counted := ""
	if o.redisServer {
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
		wo.Redis = rds.Addr
		counted = "redis-server's INFO commandstats, commands run inside scripts included"
		redisNow = func() (benchRedis, error) {
			by, err := redisCommands(ctx, rdb)
			if err != nil {
				return benchRedis{}, err
			}
			u, err := redisUsage(ctx, rdb)
			return benchRedis{commands: u.calls, cpu: u.cpu, byName: by}, err
		}
	}
	var (
		bs    *benchStack
		sinks storage.Set    // where a run's items are read back from
		wp    *workerProcess // with --worker-process
	)
	if o.workerProcess {
		bin := o.workerBinary
		if bin == "" {
			exe, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("--worker-process runs this binary as trawler worker, but its path is unknown (%v): leave --worker-process out", err)
			}
			bin = exe
		}
		if bs, err = startBenchServers(ctx, s, data); err != nil {
			return nil, err
		}
		defer bs.stop()
		wo = benchWorkerOptions(s, wo, o.redis)
		if wp, err = startWorkerProcess(ctx, bs.c, s, bin, wo, filepath.Join(data, "worker.log")); err != nil {
			return nil, err
		}
		defer wp.stop() // before the stack stops
		// A worker process that ends mid-run would leave the run waiting for a worker
		// forever: its end ends the wait, and says why.
		var endWait context.CancelCauseFunc
		ctx, endWait = context.WithCancelCause(ctx)
		defer endWait(nil)
		go func() {
			select {
			case <-wp.exited:
				endWait(wp.ended())
			case <-ctx.Done():
			}
		}()
		// The sinks the worker process writes, opened here to read each run back.
		if sinks, err = engine.OpenSinks(engine.SinkOptions{OutDir: wo.OutDir, Log: wo.Log}); err != nil {
			return nil, err
		}
		defer sinks.Close()
	} else {
		if bs, err = startBenchStack(ctx, s, data, wo, o.redis); err != nil {
			return nil, err
		}
		defer bs.stop()
		sinks = bs.w.Sinks
	}
	c := bs.c
	// workerCPU is the worker process's CPU so far; 0 without one, whose CPU is this
	// process's.
	workerCPU := func() (time.Duration, error) { return 0, nil }
	if wp != nil {
		workerCPU = wp.cpu
	}
	if o.redis && !o.redisServer {
		counted = "the embedded Redis's command count, commands run inside scripts included"
		redisNow = func() (benchRedis, error) { return benchRedis{commands: int64(bs.st.redis.CommandCount())}, nil }
	}

	src, err := examples.Files.ReadFile("demo.yaml")
	if err != nil {
		return nil, err
	}
	plan := func(pages int, archived bool) (*crawl.Plan, error) {
		p, err := cli.LoadChain("examples/demo.yaml", src, []string{"base_url=" + base, "feed.pages=" + strconv.Itoa(pages)})
		if err != nil {
			return nil, err
		}
		if o.depth < 3 {
			if err := dropLastStep(p, "comments"); err != nil {
				return nil, err
			}
		}
		for i := range p.Steps {
			if archived {
				// Files finish 2s after they start, so a run's are on disk soon after it ends.
				p.Steps[i].Archive = &crawl.Archive{To: o.archive, MaxAge: 2 * time.Second}
			}
			if o.batch > 0 {
				p.Steps[i].Batch = o.batch
			}
			if o.parallel > 0 {
				p.Steps[i].Parallel = o.parallel
			}
			if o.redis {
				// Every run stores every item, so each is checked against the site.
				p.Steps[i].Dedup = crawl.DedupOff
			}
			if o.revisit {
				p.Steps[i].Revisit = true
				for k := range p.Steps[i].Consumers {
					p.Steps[i].Consumers[k].Revisit = true
				}
			}
		}
		return p, nil
	}
	quiet := *s
	quiet.JSON = false // progress goes to a terminal's stderr only, never to stdout
	// trawl runs the chain over pages list pages and gives its result, the CPU Trawler's
	// processes spent until the run completed and what the worker's Redis did meanwhile:
	// reading the stores back to check the run comes after, as Colly's side is not
	// charged for checking its output either.
	trawl := func(pages int, archived bool) (*cli.Result, benchCPU, benchRedis, error) {
		var red0, red1 benchRedis
		var worker0 time.Duration
		p, err := plan(pages, archived)
		if err == nil && redisNow != nil {
			red0, err = redisNow()
		}
		if err == nil {
			worker0, err = workerCPU()
		}
		if err != nil {
			return nil, benchCPU{}, benchRedis{}, err
		}
		cpu0 := processCPU()
		res, err := cli.StartAndWait(ctx, &quiet, c, p, cli.WaitOn(c))
		if err != nil {
			if ctx.Err() != nil {
				err = context.Cause(ctx) // the worker process's end, say
			}
			return nil, benchCPU{}, benchRedis{}, err
		}
		cpu := benchCPU{here: processCPU() - cpu0}
		worker1, err := workerCPU()
		if err != nil {
			return nil, benchCPU{}, benchRedis{}, err
		}
		cpu.worker = worker1 - worker0
		if redisNow != nil {
			if red1, err = redisNow(); err != nil {
				return nil, benchCPU{}, benchRedis{}, err
			}
			if o.redisServer {
				// The counts of red1 include the second INFO that read red0 and the first
				// that read red1.
				red1.commands -= 2
				red1.byName["info"] -= 2
			}
		}
		if err := res.ReadBack(ctx, p, sinks); err != nil {
			return nil, benchCPU{}, benchRedis{}, err
		}
		if res.Failed > 0 {
			return nil, benchCPU{}, benchRedis{}, fmt.Errorf("%d inputs failed (first: %s)", res.Failed, firstFailure(res))
		}
		if n := res.Sinks["jsonl"]; n != res.Items {
			return nil, benchCPU{}, benchRedis{}, fmt.Errorf("run %s counted %d items but its jsonl sink holds %d", res.RunID, res.Items, n)
		}
		d := benchRedis{commands: red1.commands - red0.commands, cpu: red1.cpu - red0.cpu}
		for name, n := range red1.byName {
			if n -= red0.byName[name]; n > 0 {
				if d.byName == nil {
					d.byName = map[string]int64{}
				}
				d.byName[name] = n
			}
		}
		return res, cpu, d, nil
	}

	// The tenant the runs archive under, TENANT/RUN_ID/ in the archive.
	tenant := crawl.DefaultTenant
	if p, err := plan(1, false); err == nil {
		tenant = cmp.Or(p.Tenant, tenant)
	}
	note("trawler: warm-up run (1 feed page), then %d timed run(s)…", o.runs)
	if _, _, _, err := trawl(1, false); err != nil {
		return nil, fmt.Errorf("trawler warm-up: %w", err)
	}
	var (
		trawlerRuns   []benchSide
		runIDs        []string
		redisRuns     []benchRedis
		archivedRuns  []benchSide
		archivedSizes []int64 // bytes on disk of each archived run
	)
	if o.cpuProfile != "" {
		stopProfile, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return nil, err
		}
		defer stopProfile()
	}
	for range o.runs {
		res, cpu, red, err := trawl(o.pages, false)
		if err != nil {
			return nil, fmt.Errorf("trawler: %w", err)
		}
		if o.archive != "" {
			ares, acpu, _, err := trawl(o.pages, true)
			if err != nil {
				return nil, fmt.Errorf("trawler with archive: %w", err)
			}
			size, err := archivedBytes(ctx, filepath.Join(o.archive, tenant, ares.RunID))
			if err != nil {
				return nil, err
			}
			archivedRuns = append(archivedRuns, trawlerSide(ares, acpu))
			archivedSizes = append(archivedSizes, size)
		}
		ts := trawlerSide(res, cpu)
		// The comparison is only fair when both did the same, complete work.
		if ts.Pages != wantPages || ts.Items != wantItems {
			return nil, fmt.Errorf("the crawls differ: colly fetched %d pages and stored %d items (as the demo site holds), trawler %d pages and %d items (run %s); the comparison would not be fair",
				wantPages, wantItems, ts.Pages, ts.Items, res.RunID)
		}
		trawlerRuns = append(trawlerRuns, ts)
		runIDs = append(runIDs, res.RunID)
		redisRuns = append(redisRuns, red)
	}

	cs, _ := medianSide(collyRuns)
	ts, ti := medianSide(trawlerRuns)
	batches := 0
	if d, err := engine.Describe(ctx, c, runIDs[ti]); err == nil && d.Progress != nil {
		batches = d.Progress.Batches
	}
	full, err := plan(o.pages, false)
	if err != nil {
		return nil, err
	}
	out := &benchResult{
		CollyPagesPerS: cs.PagesPerS, TrawlerPagesPerS: ts.PagesPerS,
		Pages: cs.Pages, Items: cs.Items, Concurrency: o.concurrency, FeedPages: o.pages, PerPage: siteOpts.PerPage, Depth: o.depth,
		Batch: full.Steps[0].Batch, Parallel: full.Steps[0].Parallel, Goal: o.goal(), Runs: o.runs,
		Colly: cs, Trawler: ts, TrawlerBatches: batches, TrawlerRunID: runIDs[ti], Site: o.site, WorkerProcess: o.workerProcess,
	}
	red := redisRuns[ti]
	here := "this process: Temporal server, worker, sinks, the site"
	if o.workerProcess {
		here = "this process: Temporal server, the site"
	}
	if o.redis && !o.redisServer {
		here += ", the embedded Redis"
	}
	out.Processes = []benchProcess{{Name: here, CPUPerPageMS: ts.CPUPerPageMS}}
	if o.workerProcess {
		out.Processes = append(out.Processes, benchProcess{Name: "worker process: worker, sinks", CPUPerPageMS: ts.WorkerProcessCPUPerPageMS})
	}
	if o.redisServer {
		out.Processes = append(out.Processes, benchProcess{Name: "redis-server", CPUPerPageMS: cpuPerPageMS(red.cpu, ts.Pages)})
	}
	if redisNow != nil {
		n := cli.RoundTo(float64(red.commands)/float64(max(ts.Pages, 1)), 3)
		out.RedisCommandsPerPage, out.RedisCounted = &n, counted
		for name, calls := range red.byName {
			out.RedisByCommand = append(out.RedisByCommand, benchCommand{Name: name, PerPage: cli.RoundTo(float64(calls)/float64(max(ts.Pages, 1)), 3)})
		}
		slices.SortFunc(out.RedisByCommand, func(a, b benchCommand) int {
			return cmp.Or(cmp.Compare(b.PerPage, a.PerPage), strings.Compare(a.Name, b.Name))
		})
	}
	for i := range o.runs {
		out.CollyRuns = append(out.CollyRuns, collyRuns[i].PagesPerS)
		out.TrawlerRuns = append(out.TrawlerRuns, trawlerRuns[i].PagesPerS)
	}
	if cs.PagesPerS > 0 {
		out.Ratio = cli.RoundTo(ts.PagesPerS/cs.PagesPerS, 3)
	}
	if cs.CPUPerPageMS > 0 {
		all := 0.0
		for _, p := range out.Processes {
			all += p.CPUPerPageMS
		}
		out.CPURatio = cli.RoundTo(all/cs.CPUPerPageMS, 2)
	}
	out.GoalMet = out.Ratio >= out.Goal
	if len(archivedRuns) > 0 {
		as, _ := medianSide(archivedRuns)
		a := &benchArchive{Dir: o.archive, Trawler: as, BytesPerPage: cli.RoundTo(float64(archivedSizes[0])/float64(max(archivedRuns[0].Pages, 1)), 1)}
		for _, r := range archivedRuns {
			a.Runs = append(a.Runs, r.PagesPerS)
		}
		if ts.CPUPerPageMS > 0 {
			a.CPURatio = cli.RoundTo(as.trawlerCPUPerPageMS()/ts.trawlerCPUPerPageMS(), 3)
		}
		if len(archivedRuns) > 1 {
			var size int64
			pages := 0
			for i := 1; i < len(archivedRuns); i++ {
				size += archivedSizes[i]
				pages += archivedRuns[i].Pages
			}
			a.RevisitBytesPerPage = cli.RoundTo(float64(size)/float64(max(pages, 1)), 1)
		}
		out.Archived = a
	}
	return out, nil
}

// archivedBytes is the size of a run's WARC files and indexes in dir, once every file
// is finished: the files of a run finish at most max_age (2s) after it ends.
func archivedBytes(ctx context.Context, dir string) (int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var size int64
		writing, indexes := false, 0
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil || d.IsDir() {
				return err
			}
			size += info.Size()
			writing = writing || strings.HasSuffix(path, ".tmp")
			if strings.HasSuffix(path, ".cdxj") {
				indexes++
			}
			return nil
		})
		switch {
		case err == nil && !writing && indexes > 0:
			return size, nil
		case time.Now().After(deadline):
			return 0, fmt.Errorf("the archive of the run in %s is not finished 30s after the run (%v)", dir, err)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// startBenchTrawler starts an embedded Temporal server on SQLite in data and one worker
// whose fetcher lets at most concurrency requests hit a host at once; stop ends both.
func startBenchTrawler(ctx context.Context, s *cli.Settings, data string, concurrency int) (client.Client, *engine.Worker, func(), error) {
	return startBenchWorker(ctx, s, data, engine.WorkerOptions{Fetch: fetch.Options{HostConcurrency: concurrency}}, false)
}

// startBenchWorker starts an embedded Temporal server on SQLite in data and one worker
// with the options o (its task queue, output, log and loopback fetching filled in, and
// with withRedis the stack's Redis); stop ends both.
func startBenchWorker(ctx context.Context, s *cli.Settings, data string, o engine.WorkerOptions, withRedis bool) (client.Client, *engine.Worker, func(), error) {
	b, err := startBenchStack(ctx, s, data, o, withRedis)
	if err != nil {
		return nil, nil, nil, err
	}
	return b.c, b.w, b.stop, nil
}

// benchStack is the embedded stack of a benchmark and its one worker.
type benchStack struct {
	c    client.Client
	w    *engine.Worker // nil when the worker runs in a process of its own
	st   *stack
	stop func() // the worker stops before the client closes and the server stops
}

// startBenchStack is startBenchWorker, giving the stack too. With withRedis the worker
// uses o.Redis, or the stack's embedded Redis when o.Redis is empty.
func startBenchStack(ctx context.Context, s *cli.Settings, data string, o engine.WorkerOptions, withRedis bool) (*benchStack, error) {
	b, err := startBenchServers(ctx, s, data)
	if err != nil {
		return nil, err
	}
	w, err := engine.NewWorker(b.c, benchWorkerOptions(s, o, withRedis))
	if err == nil {
		err = w.Start()
	}
	if err != nil {
		b.stop()
		return nil, err
	}
	stopServers := b.stop
	b.w, b.stop = w, func() { w.Stop(); stopServers() }
	return b, nil
}

// startBenchServers starts the embedded stack in data and dials its Temporal server,
// without a worker; stop closes the client and stops the stack.
func startBenchServers(ctx context.Context, s *cli.Settings, data string) (*benchStack, error) {
	st, err := startStack(ctx, s, stackOptions{data: data, sitePages: 1})
	if err != nil {
		return nil, err
	}
	c, err := s.Dial(ctx)
	if err != nil {
		st.stop()
		return nil, err
	}
	return &benchStack{c: c, st: st, stop: func() { c.Close(); st.stop() }}, nil
}

// benchWorkerOptions completes o for a benchmark's worker on the stack s points at: its
// task queue, output and log, loopback fetching and, with withRedis, o.Redis or else the
// stack's embedded Redis.
func benchWorkerOptions(s *cli.Settings, o engine.WorkerOptions, withRedis bool) engine.WorkerOptions {
	o.TaskQueue, o.OutDir, o.Log = s.TaskQueue, s.Out, s.Logger()
	switch {
	case !withRedis:
		o.Redis = ""
	case o.Redis == "":
		o.Redis = s.Redis
	}
	o.Fetch.AllowPrivate = true // the benchmark site listens on loopback
	return o
}

// startCPUProfile profiles this process's CPU into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// medianSide returns the run with the median pages/s (the lower middle one for an even
// count) and its index.
func medianSide(runs []benchSide) (benchSide, int) {
	idx := make([]int, len(runs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return runs[idx[a]].PagesPerS < runs[idx[b]].PagesPerS })
	m := idx[(len(idx)-1)/2]
	return runs[m], m
}

func firstFailure(r *cli.Result) string {
	if len(r.Failures) == 0 {
		return "no cause recorded"
	}
	f := r.Failures[0]
	return fmt.Sprintf("[%s] %s", f.Step, f.Cause)
}

// demoCrawlSize is what a complete crawl of the first `feed` feed pages fetches and
// stores: every feed page, every story page and, at depth 3, every comments page of
// stories with comments; every story and, at depth 3, every comment.
func demoCrawlSize(o demosite.Options, feed, depth int) (pages, items int) {
	o = o.WithDefaults()
	feed = min(feed, o.Pages)
	stories, comments := demosite.Expected(o, feed)
	if depth < 3 {
		return feed + stories, stories
	}
	pages = feed
	for id := 1; id <= feed*o.PerPage; id++ {
		pages++
		if demosite.CommentCount(id) > 0 {
			pages += o.CommentPages(id)
		}
	}
	return pages, stories + comments
}

// dropLastStep removes a plan's last step, id, and every route to it: what its producers
// hand it is then dropped, so the chain ends one level earlier.
func dropLastStep(p *crawl.Plan, id string) error {
	last := len(p.Steps) - 1
	if last < 0 || p.Steps[last].ID != id {
		return fmt.Errorf("examples/demo.yaml: its last step is not %q, so --depth 2 cannot leave it out", id)
	}
	p.Steps = p.Steps[:last]
	for i := range p.Steps {
		p.Steps[i].Consumers = slices.DeleteFunc(p.Steps[i].Consumers, func(c crawl.Consumer) bool { return c.Step == last })
	}
	return nil
}

// jsonLines is a minimal item exporter: one JSON object per line through a buffered
// writer, safe for concurrent callbacks.
type jsonLines struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	n   int
	err error
}

func createJSONLines(path string) (*jsonLines, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &jsonLines{f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

func (j *jsonLines) write(v any) {
	b, err := json.Marshal(v)
	j.mu.Lock()
	defer j.mu.Unlock()
	if err != nil {
		j.err = errors.Join(j.err, err)
		return
	}
	if _, err := j.w.Write(append(b, '\n')); err != nil {
		j.err = errors.Join(j.err, err)
		return
	}
	j.n++
}

func (j *jsonLines) close() error {
	err := errors.Join(j.err, j.w.Flush(), j.f.Close())
	return err
}

// collyItem is one exported record.
type collyItem struct {
	Type string         `json:"type"`
	Key  string         `json:"key"`
	URL  string         `json:"url"`
	Data map[string]any `json:"data"`
}

var (
	collyStoryPath    = regexp.MustCompile(`^/item/(\d+)/?$`)
	collyCommentsPath = regexp.MustCompile(`^/item/(\d+)/comments/?$`)
)

// collyCrawl crawls the demo site the way the demo chain does, with Colly.
func collyCrawl(ctx context.Context, base string, feedPages, depth, parallelism int, outPath string) (benchSide, error) {
	out, err := createJSONLines(outPath)
	if err != nil {
		return benchSide{}, err
	}
	c := colly.NewCollector(colly.Async(true), colly.StdlibContext(ctx))
	c.AllowURLRevisit = false
	if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: parallelism}); err != nil {
		_ = out.close()
		return benchSide{}, err
	}
	c.WithTransport(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: max(parallelism, 16),
		IdleConnTimeout:     90 * time.Second,
	})

	var (
		pages    atomic.Int64
		errMu    sync.Mutex
		crawlErr error
	)
	fail := func(err error) {
		errMu.Lock()
		crawlErr = errors.Join(crawlErr, err)
		errMu.Unlock()
	}
	visit := func(e *colly.HTMLElement, href string) {
		var seen *colly.AlreadyVisitedError
		if err := e.Request.Visit(href); err != nil && !errors.As(err, &seen) {
			fail(fmt.Errorf("visit %s from %s: %w", href, e.Request.URL, err))
		}
	}
	c.OnResponse(func(r *colly.Response) { pages.Add(1) })
	c.OnError(func(r *colly.Response, err error) {
		fail(fmt.Errorf("GET %s: status %d: %w", r.Request.URL, r.StatusCode, err))
	})
	// One callback per page, dispatching on the page's path like the demo chain's three
	// tasks; measured a little cheaper than one callback per selector, since Colly parses
	// the page once either way but builds an element (with its text) per match.
	c.OnHTML("html", func(e *colly.HTMLElement) {
		u := e.Request.URL
		doc := e.DOM
		switch {
		case u.Path == "/news":
			page, _ := strconv.Atoi(u.Query().Get("p"))
			doc.Find("tr.athing span.titleline > a").Each(func(_ int, a *goquery.Selection) {
				visit(e, a.AttrOr("href", ""))
			})
			if page < feedPages {
				if href, ok := doc.Find("a.morelink").First().Attr("href"); ok {
					visit(e, href)
				}
			}
		case collyStoryPath.MatchString(u.Path):
			it, comments, err := collyStory(u, doc.Find("article.story").First())
			if err != nil {
				fail(err)
				return
			}
			out.write(it)
			if comments > 0 && depth >= 3 {
				if href, ok := doc.Find("article.story a.comments-link").First().Attr("href"); ok {
					visit(e, href)
				}
			}
		case collyCommentsPath.MatchString(u.Path):
			story, _ := strconv.Atoi(collyCommentsPath.FindStringSubmatch(u.Path)[1])
			doc.Find("div.comments div.comment").Each(func(_ int, cm *goquery.Selection) {
				id, err := strconv.Atoi(cm.AttrOr("data-id", ""))
				if err != nil {
					fail(fmt.Errorf("%s: comment without an id", u))
					return
				}
				out.write(collyItem{Type: "demo.comments", Key: "demo:comment:" + strconv.Itoa(id), URL: u.String() + "#c" + strconv.Itoa(id),
					Data: map[string]any{
						"id":     id,
						"story":  story,
						"author": strings.TrimSpace(cm.Find(".author").First().Text()),
						"text":   strings.TrimSpace(cm.Find("div.text").First().Text()),
					}})
			})
			if href, ok := doc.Find("a.morelink").First().Attr("href"); ok {
				visit(e, href)
			}
		}
	})

	start, cpu := time.Now(), processCPU()
	if err := c.Visit(base + "/news?p=1"); err != nil {
		_ = out.close()
		return benchSide{}, err
	}
	c.Wait()
	cerr := out.close()
	elapsed := time.Since(start)
	if err := errors.Join(crawlErr, cerr, ctx.Err()); err != nil {
		return benchSide{}, err
	}
	return newBenchSide(int(pages.Load()), out.n, elapsed, processCPU()-cpu), nil
}

// collyStory extracts a story's fields with the same parser demo.story uses, so both
// sides of the benchmark do the same work per page.
func collyStory(u *url.URL, art *goquery.Selection) (collyItem, int, error) {
	id, _ := strconv.Atoi(collyStoryPath.FindStringSubmatch(u.Path)[1])
	it, comments, err := demo.ParseStory(art, u.String(), id)
	if err != nil {
		return collyItem{}, 0, err
	}
	return collyItem{Type: demo.StoryTask, Key: it.Key, URL: it.URL, Data: it.Data}, comments, nil
}
