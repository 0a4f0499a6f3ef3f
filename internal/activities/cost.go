package activities

import (
	"sync/atomic"
	"syscall"
	"time"
)

// running counts the batches this process runs at once, to share out its CPU time.
var running atomic.Int64

// batchCost measures what a batch's inputs cost, for the task's learned needs: the time
// its inputs ran, the bytes they fetched and (an estimate) the CPU they used.
type batchCost struct {
	wall  atomic.Int64 // ns the task ran, summed over inputs
	bytes atomic.Int64
	start time.Time
	cpu0  time.Duration
	lanes int // steps the batch runs inputs of, which share its CPU time
}

// startCost starts measuring a step's inputs in a batch.
func startCost() *batchCost {
	return &batchCost{start: time.Now(), cpu0: processCPU(), lanes: 1}
}

// cpu is the process's CPU time since the batch started, divided between the batches
// that ran alongside it and the steps the batch ran.
func (c *batchCost) cpu() time.Duration {
	share := max(running.Load(), 1) * int64(max(c.lanes, 1))
	return (processCPU() - c.cpu0) / time.Duration(share)
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// recordCost adds a batch's cost to its task's running averages.
func (a *Activities) recordCost(task string, pages int, c *batchCost) {
	if a.tally == nil || pages == 0 {
		return
	}
	a.tally.Cost(task, pages, time.Duration(c.wall.Load()), c.cpu(), c.bytes.Load())
}
