//go:build !production

package devcli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/internal/cli"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/workflows"
)

func benchScaleCmd(s *cli.Settings) *cobra.Command {
	var workersFlag string
	var pages, perPage, slots, concurrency, batch int
	var latency time.Duration
	cmd := &cobra.Command{
		Use:   "scale [--workers 1,2,3]",
		Short: "Crawl one slow local site with 1, 2, 3 worker processes and print the speed-up",
		Long: `Measure horizontal scaling. One embedded stack (Temporal on SQLite, Redis, the demo site)
runs in this process, like ` + "`trawler dev --no-worker`" + `; for each worker count it starts that
many ` + "`trawler worker --data DIR`" + ` processes, runs examples/demo.yaml over --pages feed pages,
and times the run.

The demo site answers every page after --latency (50 ms by default), so the crawl waits
on the site as it would on a real one instead of being bound by this machine's CPU.
Each worker takes --slots batch activities at a time with --concurrency pages each, so
a worker is a fixed amount of crawling capacity and more workers should mean
proportionally more pages per second. Dedup is off so every run does the same work.
Politeness is fleet-wide (every worker on the stack's Redis holds a host to one limit),
so the workers are started with --host-concurrency high enough for all of them at once:
the site's limit would otherwise cap the crawl whatever the number of workers.`,
		Example: `  trawler bench scale
  trawler bench scale --workers 1,3 --pages 20 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var counts []int
			for _, f := range strings.Split(workersFlag, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || n < 1 {
					return fmt.Errorf("--workers %q: give worker counts like 1,2,3", workersFlag)
				}
				counts = append(counts, n)
			}
			return runBenchScale(cmd.Context(), s, "", counts, scaleSite{pages, perPage, latency}, slots, concurrency, batch)
		},
	}
	cmd.Flags().StringVar(&workersFlag, "workers", "1,2,3", "worker process counts to measure")
	cmd.Flags().IntVar(&pages, "pages", 10, "feed pages of the demo site to crawl")
	cmd.Flags().IntVar(&perPage, "per-page", 100, "stories per feed page (each with its comment pages)")
	cmd.Flags().IntVar(&slots, "slots", 2, "batch activities each worker runs at once")
	cmd.Flags().IntVar(&concurrency, "concurrency", 4, "pages fetched at once inside one batch")
	cmd.Flags().IntVar(&batch, "batch", 16, "inputs per batch activity")
	cmd.Flags().DurationVar(&latency, "latency", 50*time.Millisecond, "how long the demo site takes to answer each page")
	return cmd
}

type scalePoint struct {
	Workers    int     `json:"workers"`
	Pages      int     `json:"pages"`
	Seconds    float64 `json:"seconds"`
	PagesPerS  float64 `json:"pages_per_s"`
	SpeedUp    float64 `json:"speedup"`
	Efficiency float64 `json:"efficiency"`
}

// scaleSite is the demo site the scale bench crawls.
type scaleSite struct {
	pages, perPage int
	latency        time.Duration
}

// runBenchScale runs the scale bench with worker processes of the trawler binary bin
// ("": this one).
func runBenchScale(ctx context.Context, s *cli.Settings, bin string, counts []int, site scaleSite, slots, concurrency, batch int) error {
	pages, latency := site.pages, site.latency
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return err
		}
	}
	data, err := os.MkdirTemp("", "trawler-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	say := func(format string, args ...any) {
		if !s.JSON {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}
	}
	say("starting the embedded stack in %s…", data)
	st, err := startStack(ctx, s, stackOptions{data: data, sitePages: pages})
	if err != nil {
		return err
	}
	defer st.stop()
	// The stack's own demo site answers at once; this one takes `latency` a page.
	siteURL, stopSite, err := demosite.Start("127.0.0.1:0", demosite.Options{Pages: pages, PerPage: site.perPage, Latency: latency})
	if err != nil {
		return err
	}
	defer stopSite()
	c, err := s.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	src, _ := examples.Files.ReadFile("demo.yaml")
	var points []scalePoint
	hostLimit := slices.Max(counts) * slots * concurrency
	for _, n := range counts {
		queue := fmt.Sprintf("scale-%d-%d", n, time.Now().UnixNano())
		plan, err := cli.LoadChain("examples/demo.yaml", src, []string{"base_url=" + siteURL, "feed.pages=" + strconv.Itoa(pages)})
		if err != nil {
			return err
		}
		for i := range plan.Steps {
			plan.Steps[i].Concurrency = concurrency
			plan.Steps[i].Batch = batch
			plan.Steps[i].Dedup = "off"
			plan.Steps[i].Parallel = max(plan.Steps[i].Parallel, slots*n)
		}
		say("%d worker(s): crawling %d feed pages at %s a page…", n, pages, latency)
		sum, id, elapsed, err := scaleRun(ctx, c, plan, bin, data, queue, n,
			"--max-batches", strconv.Itoa(slots), "--host-concurrency", strconv.Itoa(hostLimit))
		if err != nil {
			return err
		}
		total, _, _, failed := sum.Totals()
		if failed > 0 {
			return fmt.Errorf("run %s with %d workers had %d failures: %+v", id, n, failed, sum.Failures)
		}
		pt := scalePoint{Workers: n, Pages: total, Seconds: cli.RoundTo(elapsed, 2), PagesPerS: cli.RoundTo(float64(total)/elapsed, 1)}
		points = append(points, pt)
	}
	base := points[0].PagesPerS / float64(points[0].Workers)
	for i := range points {
		points[i].SpeedUp = cli.RoundTo(points[i].PagesPerS/points[0].PagesPerS, 2)
		points[i].Efficiency = cli.RoundTo(points[i].PagesPerS/(base*float64(points[i].Workers)), 2)
	}
	if s.JSON {
		return cli.PrintJSON(map[string]any{"latency_ms": latency.Milliseconds(), "slots": slots, "concurrency": concurrency, "batch": batch, "points": points})
	}
	fmt.Printf("\ndemo site, %d feed pages of %d stories, %s per page; each worker: %d batches x %d pages at once\n", pages, site.perPage, latency, slots, concurrency)
	fmt.Printf("  %-8s %8s %9s %10s %9s\n", "workers", "pages", "seconds", "pages/s", "speed-up")
	for _, p := range points {
		fmt.Printf("  %-8d %8d %9.2f %10.1f %8.2fx\n", p.Workers, p.Pages, p.Seconds, p.PagesPerS, p.SpeedUp)
	}
	return nil
}

// scaleRun starts n worker processes of bin on the stack in data, polling queue (args
// are flags of theirs), waits until Temporal sees each poll, then runs plan and times
// it. A worker that ends before the run does fails it at once, with its log's end,
// rather than leaving the run waiting for a worker that is gone.
func scaleRun(ctx context.Context, c client.Client, plan *crawl.Plan, bin, data, queue string, n int, args ...string) (*workflows.Summary, string, float64, error) {
	var procs []*workerProcess
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	for i := range n {
		// --allow-private: the slow demo site is on loopback, and it is not the stack's
		// own site, the one address --data lets a worker reach there.
		cmd := exec.Command(bin, append([]string{"worker", "--data", data, "--task-queue", queue,
			"--out", filepath.Join(data, "out"), "--allow-private"}, args...)...)
		p, err := startWorker(ctx, c, "bench scale", cmd, queue, filepath.Join(data, fmt.Sprintf("%s-worker-%d.log", queue, i+1)))
		if err != nil {
			return nil, "", 0, err
		}
		procs = append(procs, p)
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	for _, p := range procs {
		go func() {
			select {
			case <-p.exited:
				cancel(p.exitError("during the run"))
			case <-runCtx.Done():
			}
		}()
	}
	start := time.Now()
	id, err := engine.Start(runCtx, c, plan, engine.RunOptions{TaskQueue: queue})
	if err == nil {
		var sum *workflows.Summary
		if sum, err = engine.Wait(runCtx, c, id, nil); err == nil {
			return sum, id, time.Since(start).Seconds(), nil
		}
	}
	if cause := context.Cause(runCtx); cause != nil && ctx.Err() == nil {
		return nil, id, 0, cause
	}
	return nil, id, 0, err
}
