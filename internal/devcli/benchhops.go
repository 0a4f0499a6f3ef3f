//go:build !production

package devcli

import (
	"context"
	"fmt"
	"github.com/trawlerhq/trawler/internal/cli"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// hopGoal is the most a hop through the server may cost on the embedded stack.
const hopGoal = 15 * time.Millisecond

func benchHopsCmd(s *cli.Settings) *cobra.Command {
	var hops, runs int
	cmd := &cobra.Command{
		Use:   "hops",
		Short: "Measure what one hop of a chain costs when it goes through the Temporal server",
		Long: `Crawl a chain of list pages, each linking to the next (the demo feed), so that every
page waits for the one before it: the crawl's critical path is its hops.

  through the server   following off: every page is one batch activity and one workflow
                       task (schedule, dispatch, complete, route the output into the next
                       batch), each written to SQLite
  on the worker        following on (the default): a batch runs the pages it produces for
                       itself, checkpointed in its heartbeat

The site answers at once on loopback, so the time per page is the price of a hop. The goal
for a hop through the server is ` + hopGoal.String() + ` on the embedded stack.`,
		Example: `  trawler bench hops
  trawler bench hops --hops 500 --runs 3 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if hops < 2 || runs < 1 {
				return fmt.Errorf("--hops %d --runs %d: use at least 2 hops and 1 run", hops, runs)
			}
			res, err := benchHops(cmd.Context(), s, hops, runs)
			if err != nil {
				return err
			}
			if s.JSON {
				return cli.PrintJSON(res)
			}
			fmt.Printf("%d hops (list pages, each linking to the next), median of %d run(s):\n", res.Hops, runs)
			fmt.Printf("  through the server  %6.2f ms a hop  (goal ≤ %.0f ms: %s)\n", res.ServerMS, float64(hopGoal.Milliseconds()), map[bool]string{true: "met", false: "not met"}[res.GoalMet])
			for _, ph := range hopPhaseNames {
				fmt.Printf("      %-34s %6.2f ms\n", ph, res.Phases[ph])
			}
			fmt.Printf("  on the worker       %6.2f ms a hop  (%d activities for %d pages)\n", res.WorkerMS, res.WorkerBatches, res.Hops)
			return nil
		},
	}
	cmd.Flags().IntVar(&hops, "hops", 200, "list pages, each linking to the next")
	cmd.Flags().IntVar(&runs, "runs", 1, "timed runs of each kind; the median counts")
	return cmd
}

type hopsResult struct {
	Hops          int       `json:"hops"`
	ServerMS      float64   `json:"server_ms_per_hop"`
	WorkerMS      float64   `json:"worker_ms_per_hop"`
	ServerRunsMS  []float64 `json:"server_runs_ms_per_hop"`
	WorkerRunsMS  []float64 `json:"worker_runs_ms_per_hop"`
	ServerBatches int       `json:"server_batches"`
	WorkerBatches int       `json:"worker_batches"`
	// Phases is where a hop through the server goes, from the run's history (the last
	// run): mean milliseconds per hop in each phase.
	Phases  map[string]float64 `json:"server_phases_ms"`
	GoalMS  float64            `json:"goal_ms"`
	GoalMet bool               `json:"goal_met"`
}

func benchHops(ctx context.Context, s *cli.Settings, hops, runs int) (*hopsResult, error) {
	base, stopSite, err := demosite.Start("127.0.0.1:0", demosite.Options{Pages: hops}.WithDefaults())
	if err != nil {
		return nil, fmt.Errorf("start the demo site: %w", err)
	}
	defer func() { _ = stopSite() }()
	data, err := os.MkdirTemp("", "trawler-bench-hops-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(data)
	c, _, stop, err := startBenchTrawler(ctx, s, data, 16)
	if err != nil {
		return nil, err
	}
	defer stop()
	src, err := examples.Files.ReadFile("demo.yaml")
	if err != nil {
		return nil, err
	}
	// The feed step alone: the stories it finds go nowhere.
	plan, err := cli.LoadChain("examples/demo.yaml", src, []string{"base_url=" + base, "feed.pages=" + strconv.Itoa(hops)})
	if err != nil {
		return nil, err
	}
	for _, id := range []string{"comments", "story"} {
		if err := dropLastStep(plan, id); err != nil {
			return nil, err
		}
	}
	var lastID string
	crawlOnce := func(follow int) (time.Duration, int, error) {
		start := time.Now()
		id, err := engine.Start(ctx, c, plan, engine.RunOptions{TaskQueue: s.TaskQueue, Tuning: workflows.Tuning{FollowInputs: follow}})
		if err != nil {
			return 0, 0, err
		}
		sum, err := engine.Wait(ctx, c, id, nil)
		if err != nil {
			return 0, 0, err
		}
		if pages, _, _, failed := sum.Totals(); pages != hops || failed > 0 {
			return 0, 0, fmt.Errorf("run %s crawled %d of %d pages (%d failed)", id, pages, hops, failed)
		}
		lastID = id
		return time.Since(start), sum.Batches, nil
	}
	if _, _, err := crawlOnce(-1); err != nil { // warm-up
		return nil, err
	}
	res := &hopsResult{Hops: hops, GoalMS: float64(hopGoal.Milliseconds())}
	for range runs {
		d, batches, err := crawlOnce(-1)
		if err != nil {
			return nil, err
		}
		res.ServerBatches = batches
		res.ServerRunsMS = append(res.ServerRunsMS, cli.RoundTo(float64(d.Microseconds())/1000/float64(hops), 2))
		if res.Phases, err = hopPhases(ctx, c, lastID); err != nil {
			return nil, err
		}
		d, batches, err = crawlOnce(0)
		if err != nil {
			return nil, err
		}
		res.WorkerRunsMS = append(res.WorkerRunsMS, cli.RoundTo(float64(d.Microseconds())/1000/float64(hops), 2))
		res.WorkerBatches = batches
	}
	res.ServerMS, res.WorkerMS = median(res.ServerRunsMS), median(res.WorkerRunsMS)
	res.GoalMet = res.ServerMS <= res.GoalMS
	return res, nil
}

// median is the middle value (the lower middle one for an even count).
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// The phases of a hop through the server, in order, as its workflow history shows them.
var hopPhaseNames = []string{
	"activity scheduled → started",
	"activity running (fetch, store)",
	"activity completed → workflow task",
	"workflow task (route, schedule next)",
}

// hopPhases reads a run's history and averages, over its batches, the time between the
// events of one hop: the batch's activity scheduled, started and completed, and the
// workflow task that takes its result and schedules the next.
func hopPhases(ctx context.Context, c client.Client, runID string) (map[string]float64, error) {
	var scheduled, started, completed, wftStarted time.Time
	sums := map[string]time.Duration{}
	n := 0
	it := c.GetWorkflowHistory(ctx, runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read the history of %s: %w", runID, err)
		}
		t := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled = t
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started = t
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			completed = t
			sums[hopPhaseNames[0]] += started.Sub(scheduled)
			sums[hopPhaseNames[1]] += completed.Sub(started)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			wftStarted = t
			if !completed.IsZero() {
				sums[hopPhaseNames[2]] += t.Sub(completed)
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if !completed.IsZero() {
				sums[hopPhaseNames[3]] += t.Sub(wftStarted)
				completed = time.Time{}
				n++
			}
		}
	}
	out := map[string]float64{}
	for _, ph := range hopPhaseNames {
		out[ph] = cli.RoundTo(float64(sums[ph].Microseconds())/1000/float64(max(n, 1)), 2)
	}
	return out, nil
}
