//go:build !production

package devcli

import (
	"fmt"
	"github.com/trawlerhq/trawler/internal/cli"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/internal/capacity"
)

func benchCapacityCmd(s *cli.Settings) *cobra.Command {
	var drain time.Duration
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Simulate a fleet: placement from learned needs and the desired-worker signal over time",
		Long: `One machine cannot host a fleet, so this runs a deterministic simulation of one (no
servers, no clock: the same table every time) with the arithmetic the workers and
` + "`trawler status`" + ` use (internal/capacity):

  workers  big (8 cores, 4 GB), medium (4 cores, 2 GB) and small (1 core, 512 MB), always
           there (the big one away from 6:00 to 8:00), plus standard workers (2 cores, 1 GB)
           that an autoscaler adds and removes to follow the desired-worker signal, one
           sampling period (15 s) after it
  tasks    feed (small pages), detail (large documents) and render (a browser-rendering
           task needing 5.6 cores at its concurrency of 16: only the big worker qualifies)
  load     steady arrivals; at 2:00 a run adds 1,500 detail batches at once (a backlog
           step); at 4:00 the feed's arrivals double for good

Each batch goes to the live worker whose free CPU and memory cover its need most
tightly; a batch no live worker could take decays (its concurrency halves per step)
until one can. Every 15 s the queue is sampled and the signal computed to drain the
backlog within --drain. Columns: the backlog of each task (batches), batches running on
each fixed worker and on the standard ones, batches started decayed, the signal and the
workers live. The summary checks the goals: no worker over its memory, the small worker
running small tasks only, no task starving, the signal settled within 2 periods of each
step.`,
		Example: `  trawler bench capacity
  trawler bench capacity --drain 2m
  trawler bench capacity --json | tail -1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if drain < 15*time.Second {
				return fmt.Errorf("--drain %s: give a drain target of at least one sampling period, e.g. --drain 5m", drain)
			}
			sc := capacity.DefaultScenario()
			sc.Target.Drain = drain
			r := capacity.Simulate(sc)
			sum := map[string]any{"over_memory_ticks": r.OverMemory, "small_worker_batches": r.SmallByTask,
				"done": r.Done, "max_wait_s": waitSeconds(r.MaxWait), "settle_periods": settleByEvent(sc, r)}
			if s.JSON {
				for _, row := range r.Rows {
					if err := cli.PrintJSON(row); err != nil {
						return err
					}
				}
				return cli.PrintJSON(map[string]any{"summary": sum})
			}
			r.Print(os.Stdout, sc)
			fmt.Printf("\nworker-ticks over memory: %d   small worker ran: %v\n", r.OverMemory, r.SmallByTask)
			fmt.Printf("batches done: %v   longest wait: %v\n", r.Done, sum["max_wait_s"])
			for _, p := range slices.Sorted(maps.Keys(sc.Events)) {
				fmt.Printf("signal settled %d period(s) after %q (goal: at most 2)\n", r.Settle[p], sc.Events[p])
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&drain, "drain", 5*time.Minute, "the backlog drain target the signal sizes the fleet for")
	return cmd
}

func waitSeconds(ticks map[string]int) map[string]float64 {
	out := map[string]float64{}
	for k, n := range ticks {
		out[k] = (time.Duration(n) * capacity.Tick).Seconds()
	}
	return out
}

func settleByEvent(sc capacity.Scenario, r capacity.Result) map[string]int {
	out := map[string]int{}
	for p, ev := range sc.Events {
		out[ev] = r.Settle[p]
	}
	return out
}
