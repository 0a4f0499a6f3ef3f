package engine

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/capacity"
	"github.com/trawlerhq/trawler/internal/monitor"
)

// TaskLoad is one task's work in the running chains of one task queue, sampled once.
type TaskLoad struct {
	Queue   string    `json:"queue"`
	Task    string    `json:"task"`
	Queued  int       `json:"queued"`
	Backlog int       `json:"backlog"` // queued or in flight
	Pages   int       `json:"pages"`   // done so far by the running runs
	Rate    float64   `json:"rate"`    // pages per second over the overview's sample; -1 unknown
	At      time.Time `json:"at"`
}

// taskLoadsOf sums the running workflows' steps by task queue and task.
func taskLoadsOf(first, second []runLoad, sample time.Duration) []TaskLoad {
	type key struct{ queue, task string }
	sum := func(rs []runLoad) map[key]*TaskLoad {
		out := map[key]*TaskLoad{}
		for _, r := range rs {
			if r.sum == nil {
				continue
			}
			for _, st := range r.sum.Steps {
				k := key{cmp.Or(r.queue, "?"), st.Task}
				if out[k] == nil {
					out[k] = &TaskLoad{Queue: k.queue, Task: k.task, Rate: -1, At: time.Now()}
				}
				out[k].Queued += st.Queued
				out[k].Backlog += st.Queued + st.InFlight
				out[k].Pages += st.Pages
			}
		}
		return out
	}
	a, b := sum(first), sum(second)
	var out []TaskLoad
	for k, l := range a {
		if l2, ok := b[k]; ok && sample > 0 {
			l2.Rate = math.Round(float64(max(l2.Pages-l.Pages, 0))/sample.Seconds()*10) / 10
			l = l2
		}
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Queue < out[j].Queue || (out[i].Queue == out[j].Queue && out[i].Task < out[j].Task)
	})
	return out
}

// CapacityReport is placement by learned needs and the autoscaling signal: per task
// queue the workers it wants, per task what it needs and who can run it.
type CapacityReport struct {
	Drain  string          `json:"drain"`
	Queues []QueueCapacity `json:"queues"`
	Tasks  []TaskPlacement `json:"tasks"`
}

// QueueCapacity is one task queue's backlog and the workers it wants (DesiredWorkers,
// also the trawler_desired_workers metric).
type QueueCapacity struct {
	Queue      string            `json:"queue"`
	Backlog    int               `json:"backlog"`
	Workers    int               `json:"workers"` // live workers polling it
	Desired    int               `json:"desired_workers"`
	Efficiency float64           `json:"efficiency"`
	Tasks      []capacity.Demand `json:"tasks"`
}

// TaskPlacement is what a batch of a task needs (at the default concurrency) and where
// it can run now.
type TaskPlacement struct {
	Task        string             `json:"task"`
	Cost        capacity.Cost      `json:"cost"`
	Concurrency int                `json:"concurrency"`
	Need        capacity.Resources `json:"need"`
	Qualify     []string           `json:"qualifying_workers"`
	// DecaySteps is how far the need decays before a live worker can take it (0: one
	// can as it is); DecayedConcurrency the pages at once it then runs at.
	DecaySteps         int `json:"decay_steps"`
	DecayedConcurrency int `json:"decayed_concurrency"`
	// Runnable is false when no live worker could take even one page at a time.
	Runnable bool `json:"runnable"`
	// Waiting counts its batches Temporal is offering again after a worker passed on
	// them for lack of free capacity.
	Waiting int `json:"waiting_for_capacity"`
}

// defaultWorker is the capacity assumed for a queue whose live workers do not say
// theirs (workers of earlier versions).
var defaultWorker = capacity.Resources{CPU: 2, MemMB: 2048}

// PlanCapacity fills ov.Capacity: per task queue the workers it wants to drain its
// backlog within target.Drain, and per learned task its needs and placement. history
// holds earlier overviews of the same fleet, newest first (Watch keeps two): with them
// the lasting arrivals count too (capacity.Inflow); without, the backlog and the rates
// of this overview's sample alone.
func (ov *Overview) PlanCapacity(target capacity.Target, history ...*Overview) {
	rep := &CapacityReport{Drain: target.Drain.String()}
	costs := map[string]capacity.Cost{}
	for _, n := range ov.Tasks {
		costs[n.Task] = costOf(n)
	}
	var live []monitor.WorkerBeat
	for _, b := range ov.Workers {
		if b.AgeS <= liveBeat.Seconds() {
			live = append(live, b)
		}
	}
	byQueue := map[string][]TaskLoad{}
	for _, l := range ov.taskLoads {
		byQueue[l.Queue] = append(byQueue[l.Queue], l)
	}
	for _, q := range slices.Sorted(maps.Keys(byQueue)) {
		onQueue := workersOn(live, q)
		typical, slots := typicalWorker(onQueue)
		qc := QueueCapacity{Queue: q, Workers: len(onQueue)}
		queued := 0
		for _, l := range byQueue[q] {
			d := capacity.Demand{Task: l.Task, Backlog: float64(l.Backlog), Done: max(l.Rate, 0)}
			if c, ok := costs[l.Task]; ok {
				d.PerWorker = capacity.RateOf(c, typical, slots, crawl.DefaultConcurrency)
			}
			if len(history) > 0 {
				last, ok1 := flowOf(l, history[0])
				before := 0.0
				if len(history) > 1 {
					if p, ok2 := loadOf(history[0], l.Queue, l.Task); ok2 {
						before, _ = flowOf(p, history[1])
					}
				}
				if ok1 {
					d.Inflow = capacity.Inflow(last, before)
				}
				if l.Rate < 0 {
					if p, ok := loadOf(history[0], l.Queue, l.Task); ok && l.At.After(p.At) {
						d.Done = float64(max(l.Pages-p.Pages, 0)) / l.At.Sub(p.At).Seconds()
					}
				}
			}
			qc.Backlog += l.Backlog
			queued += l.Queued
			qc.Tasks = append(qc.Tasks, d)
		}
		qc.Efficiency = 1
		if queued > 0 {
			qc.Efficiency = math.Round(capacity.Efficiency(qc.Tasks, len(onQueue))*100) / 100
		}
		qc.Desired = capacity.DesiredWorkers(qc.Tasks, qc.Efficiency, target)
		rep.Queues = append(rep.Queues, qc)
	}
	var retrying []string
	for _, l := range ov.Chains {
		retrying = append(retrying, l.Retrying...)
	}
	wholes := make([]capacity.Resources, 0, len(live))
	for _, b := range live {
		if b.Capacity != nil {
			wholes = append(wholes, *b.Capacity)
		}
	}
	for _, n := range ov.Tasks {
		c := costOf(n)
		tp := TaskPlacement{Task: n.Task, Cost: c, Concurrency: crawl.DefaultConcurrency, Need: capacity.Need(c, crawl.DefaultConcurrency)}
		tp.Qualify = qualifyingWorkers(live, tp.Need)
		tp.DecaySteps, tp.Runnable = capacity.DecaySteps(c, tp.Concurrency, wholes)
		tp.DecayedConcurrency = capacity.Decayed(tp.Concurrency, tp.DecaySteps)
		for _, r := range retrying {
			if strings.Contains(r, capacityWaitMark+n.Task+" ") {
				tp.Waiting++
			}
		}
		rep.Tasks = append(rep.Tasks, tp)
	}
	ov.Capacity = rep
}

// flowOf is the inputs that arrived per second at a task between an earlier overview
// and l: what its backlog grew by plus what was done.
func flowOf(l TaskLoad, earlier *Overview) (float64, bool) {
	p, ok := loadOf(earlier, l.Queue, l.Task)
	if !ok || !l.At.After(p.At) {
		return 0, false
	}
	grew := float64(l.Backlog-p.Backlog) + float64(max(l.Pages-p.Pages, 0))
	return max(grew, 0) / l.At.Sub(p.At).Seconds(), true
}

func loadOf(ov *Overview, queue, task string) (TaskLoad, bool) {
	if ov == nil {
		return TaskLoad{}, false
	}
	for _, l := range ov.taskLoads {
		if l.Queue == queue && l.Task == task {
			return l, true
		}
	}
	return TaskLoad{}, false
}

func workersOn(live []monitor.WorkerBeat, queue string) []monitor.WorkerBeat {
	var out []monitor.WorkerBeat
	for _, b := range live {
		if b.TaskQueue == queue {
			out = append(out, b)
		}
	}
	return out
}

// typicalWorker is the median capacity and slots of a queue's workers: the kind an
// autoscaler adds.
func typicalWorker(ws []monitor.WorkerBeat) (capacity.Resources, int) {
	var caps []capacity.Resources
	var slots []int
	for _, b := range ws {
		if b.Capacity != nil {
			caps = append(caps, *b.Capacity)
			slots = append(slots, cmp.Or(b.Slots, 16))
		}
	}
	if len(caps) == 0 {
		return defaultWorker, 16
	}
	sort.Slice(caps, func(i, j int) bool { return caps[i].MemMB < caps[j].MemMB })
	slices.Sort(slots)
	return caps[len(caps)/2], slots[len(slots)/2]
}

// DefaultDrain is the autoscaling target when none is given: drain a backlog within
// ten minutes.
const DefaultDrain = 10 * time.Minute

// watchCapacity plans ov's capacity against the last looks, sets the
// trawler_desired_workers gauge per task queue, and returns the looks to keep.
func watchCapacity(ov *Overview, drain time.Duration, history []*Overview) []*Overview {
	ov.PlanCapacity(capacity.Target{Drain: cmp.Or(drain, DefaultDrain), Min: 1}, history...)
	monitor.DesiredWorkers.Reset()
	for _, q := range ov.Capacity.Queues {
		monitor.DesiredWorkers.WithLabelValues(q.Queue).Set(float64(q.Desired))
	}
	return append([]*Overview{ov}, history[:min(len(history), 1)]...)
}
