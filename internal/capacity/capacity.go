// Package capacity turns what tasks really cost into where their batches run and how
// many workers a queue wants. It is pure: the worker (placement), `trawler status`,
// the metrics and the simulation behind `trawler bench capacity` share its arithmetic.
//
// A batch's expected need comes from its task's learned figures (internal/monitor: wall
// time, bytes and CPU time per page) and the batch's concurrency: the CPU it keeps busy
// (cores) and the memory it holds (MB). A worker takes a batch only while its free
// capacity covers that need. A batch that no live worker could take, even idle, has its
// need decayed step by step — each step halves the concurrency it runs at, which halves
// the per-page part of its need — until some live worker could, or it runs one page at
// a time; so work never starves, and a decayed batch still never asks more of a worker
// than the worker has.
package capacity

import (
	"fmt"
	"math"
	"time"
)

// Resources are CPU (cores) and memory (MB): what a worker has, or a batch takes.
type Resources struct {
	CPU   float64 `json:"cpu"`
	MemMB float64 `json:"mem_mb"`
}

// Covers reports whether r has room for n.
func (r Resources) Covers(n Resources) bool {
	return n.CPU <= r.CPU+1e-9 && n.MemMB <= r.MemMB+1e-9
}

// Add and Sub combine resources.
func (r Resources) Add(n Resources) Resources { return Resources{r.CPU + n.CPU, r.MemMB + n.MemMB} }
func (r Resources) Sub(n Resources) Resources { return Resources{r.CPU - n.CPU, r.MemMB - n.MemMB} }

func (r Resources) String() string { return fmt.Sprintf("%.2f cores, %.0f MB", r.CPU, r.MemMB) }

// Cost is what one page of a task costs, as learned: wall time, CPU time and bytes
// fetched per page.
type Cost struct {
	MSPerPage    float64 `json:"ms_per_page"`
	CPUMSPerPage float64 `json:"cpu_ms_per_page"`
	KBPerPage    float64 `json:"kb_per_page"`
}

const (
	// BatchBaseMB is what any batch holds whatever its pages: its inputs, the fetch
	// client, buffers for its items.
	BatchBaseMB = 8
	// PageMemFactor is the memory a page in flight holds per byte fetched: the body,
	// its parsed document (several times the HTML) and the items taken from it.
	PageMemFactor = 8
	// MaxDecay is the most steps a need decays: by then a batch runs one page at a time
	// (2^10 > any sane concurrency).
	MaxDecay = 10
)

// Need is what one batch of a task at the given concurrency takes while it runs: CPU is
// the share of wall time a page spends on the CPU, times the pages in flight; memory is
// the base plus each page in flight's bytes times PageMemFactor.
func Need(c Cost, concurrency int) Resources {
	conc := float64(max(concurrency, 1))
	cpu := 0.0
	if c.MSPerPage > 0 {
		cpu = conc * min(c.CPUMSPerPage/c.MSPerPage, 1)
	}
	return Resources{CPU: cpu, MemMB: BatchBaseMB + conc*c.KBPerPage*PageMemFactor/1024}
}

// Decayed is the concurrency a batch runs at after steps of decay: halved per step,
// never below 1.
func Decayed(concurrency, steps int) int {
	return max(concurrency>>min(steps, MaxDecay), 1)
}

// DecaySteps is how many steps a batch's need must decay before one of the workers
// could take it when idle (their whole capacity): 0 when one can as it is. With no
// worker at all it is 0 (nothing to decay for). When even one page at a time is too
// much for every worker it returns the steps to one page, and ok is false: no worker
// can run the task until a larger one joins.
func DecaySteps(c Cost, concurrency int, workers []Resources) (steps int, ok bool) {
	if len(workers) == 0 {
		return 0, true
	}
	for steps = 0; ; steps++ {
		conc := Decayed(concurrency, steps)
		need := Need(c, conc)
		for _, w := range workers {
			if w.Covers(need) {
				return steps, true
			}
		}
		if conc == 1 {
			return steps, false
		}
	}
}

// RateOf is the pages per second one worker of capacity w does of a task with
// slots batches of concurrency pages: as many batches as fit at once (by slots, whole
// cores and memory; a batch too large for the worker runs decayed until it fits), times
// their pages in flight over the wall time of a page. 0 when the task cannot run there.
func RateOf(c Cost, w Resources, slots, concurrency int) float64 {
	if c.MSPerPage <= 0 {
		return 0
	}
	steps, ok := DecaySteps(c, concurrency, []Resources{w})
	if !ok {
		return 0
	}
	conc := Decayed(concurrency, steps)
	need := Need(c, conc)
	batches := float64(slots)
	if need.CPU > 0 {
		batches = min(batches, math.Floor(w.CPU/need.CPU+1e-9))
	}
	if need.MemMB > 0 {
		batches = min(batches, math.Floor(w.MemMB/need.MemMB+1e-9))
	}
	return batches * float64(conc) * 1000 / c.MSPerPage
}

// Demand is one task's share of a queue's load: its backlog (inputs queued or in
// flight), the inputs that arrived per second lately, the inputs done per second
// lately, and what one worker does of it per second by the learned needs.
type Demand struct {
	Task      string  `json:"task"`
	Backlog   float64 `json:"backlog"`
	Inflow    float64 `json:"inflow_per_s"`
	Done      float64 `json:"done_per_s"`
	PerWorker float64 `json:"per_worker_per_s"`
}

// Target is what the fleet should achieve: drain any backlog within Drain while keeping
// up with arrivals, with between Min and Max workers (Max 0: no cap).
type Target struct {
	Drain    time.Duration `json:"drain"`
	Min, Max int
}

// Efficiency is the share of the learned rates the fleet of workers really delivered
// lately: the worker-seconds its finished pages stand for over the workers there were,
// between 0.25 and 1. The learned rates assume batches pack workers perfectly; a mix of
// batches that leaves cores idle, politeness waits or a slow store do worse, and the
// measured rates correct for it. It is 1 with nothing measured.
func Efficiency(ds []Demand, workers int) float64 {
	delivered := 0.0
	for _, d := range ds {
		if d.PerWorker > 0 {
			delivered += d.Done / d.PerWorker
		}
	}
	if workers <= 0 || delivered <= 0 {
		return 1
	}
	return min(max(delivered/float64(workers), 0.25), 1)
}

// DesiredWorkers is the workers a queue wants: the worker-seconds per second its tasks
// need — each task's arrivals plus its backlog spread over the drain time, over what a
// worker does of it — divided by the fleet's efficiency, rounded up and held within the
// target's bounds. A task whose rate is unknown yet (never ran) counts as one worker
// while it has a backlog.
func DesiredWorkers(ds []Demand, efficiency float64, t Target) int {
	drain := t.Drain.Seconds()
	if drain <= 0 {
		drain = 600
	}
	work := 0.0
	for _, d := range ds {
		if d.Backlog <= 0 && d.Inflow <= 0 {
			continue
		}
		if d.PerWorker <= 0 {
			work += 1
			continue
		}
		work += (d.Inflow + d.Backlog/drain) / d.PerWorker
	}
	if efficiency > 0 && efficiency < 1 {
		work /= efficiency
	}
	n := int(math.Ceil(work - 1e-9))
	n = max(n, t.Min)
	if t.Max > 0 {
		n = min(n, t.Max)
	}
	return n
}

// Inflow estimates a task's lasting arrivals per second from its last two sampling
// periods: the lower of the two, so a one-time step (a run that starts with thousands
// of inputs) is read as backlog to drain, not as a flow to keep up with, while a flow
// that really rose is followed within two periods.
func Inflow(last, before float64) float64 { return max(min(last, before), 0) }
