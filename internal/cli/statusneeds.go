package cli

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/capacity"
	"github.com/trawlerhq/trawler/internal/engine"
)

// printNeeds is `trawler status --needs`: per learned task, what a batch needs, the
// live workers that qualify, how far its need decays when none does, and its batches
// waiting for capacity; then per task queue the workers it wants.
func printNeeds(rep *engine.CapacityReport) {
	if rep == nil || len(rep.Tasks) == 0 {
		fmt.Println("no task needs learned yet: they are learned from the batches workers run (needs --redis or --data)")
	} else {
		fmt.Printf("%-22s %8s %8s %8s %7s %8s  %-8s %7s  %s\n", "task", "ms/page", "CPU ms", "KB", "cores", "MB", "decay", "waiting", "workers that qualify")
		for _, t := range rep.Tasks {
			decay := "none"
			switch {
			case !t.Runnable:
				decay = "NO WORKER"
			case t.DecaySteps > 0:
				decay = fmt.Sprintf("%d→%d", t.Concurrency, t.DecayedConcurrency)
			}
			qualify := strings.Join(t.Qualify, ", ")
			if qualify == "" {
				qualify = "none live"
			}
			fmt.Printf("%-22s %8.1f %8.1f %8.1f %7.2f %8.0f  %-8s %7d  %s\n", t.Task, t.Cost.MSPerPage, t.Cost.CPUMSPerPage, t.Cost.KBPerPage,
				t.Need.CPU, t.Need.MemMB, decay, t.Waiting, qualify)
		}
		fmt.Printf("(a batch's need at %d pages at once; decay: the pages at once it runs at because no live worker has room for it whole)\n", crawl.DefaultConcurrency)
	}
	printDesired(rep)
}

// printDesired shows each task queue's backlog and the workers it wants.
func printDesired(rep *engine.CapacityReport) {
	if rep == nil {
		return
	}
	for _, q := range rep.Queues {
		fmt.Printf("queue %-14s backlog %7d  workers %3d  wants %3d to drain it within %s (efficiency %.2f)\n",
			q.Queue, q.Backlog, q.Workers, q.Desired, rep.Drain, q.Efficiency)
	}
}

// checkDrain refuses a drain target shorter than a sampling period.
func checkDrain(flag string, d time.Duration) error {
	if d < 15*time.Second {
		return fmt.Errorf("--%s %s: give the time a backlog should drain within, at least 15s (e.g. --%s 10m)", flag, d, flag)
	}
	return nil
}

// capacityFlags declare the CPU and memory a worker places batches in.
type capacityFlags struct{ cpus, memMB float64 }

func (c *capacityFlags) add(cmd *cobra.Command) {
	cmd.Flags().Float64Var(&c.cpus, "cpus", 0, "cores this worker places batches in: it takes a batch only while the learned needs of the batches it runs leave room for it (default: the machine's, and placement by needs only with --tune-resources)")
	cmd.Flags().Float64Var(&c.memMB, "memory-mb", 0, "memory (MB) this worker places batches in, like --cpus (default: the machine's)")
}

// resources is the declared capacity; a side not given is the machine's.
func (c *capacityFlags) resources() (capacity.Resources, error) {
	if c.cpus < 0 || c.memMB < 0 {
		return capacity.Resources{}, fmt.Errorf("--cpus %g --memory-mb %g: give positive numbers (e.g. --cpus 4 --memory-mb 8192), or leave them out for the machine's", c.cpus, c.memMB)
	}
	if c.cpus == 0 && c.memMB == 0 {
		return capacity.Resources{}, nil
	}
	m := engine.MachineCapacity()
	return capacity.Resources{CPU: cmp.Or(c.cpus, m.CPU), MemMB: cmp.Or(c.memMB, m.MemMB)}, nil
}
