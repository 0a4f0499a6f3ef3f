package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/capacity"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// CapacityWaitType is the error type of a batch a worker passes on for lack of free CPU
// or memory; Temporal offers it again shortly, to whichever worker polls first.
const CapacityWaitType = "capacity"

// capacityWaitMark starts the message of such an error, so status can count the
// batches waiting for capacity from their last failure.
const capacityWaitMark = "waiting for capacity: task "

// liveBeat is how recent a worker's heartbeat must be for it to count as live (workers
// beat every 5 s; status calls one silent for more than 15 s SILENT).
const liveBeat = 15 * time.Second

// placement lets a worker take a batch only while its free CPU and memory cover the
// batch's expected need (internal/capacity, from the task's learned costs). A batch
// that no live worker could take whole has its need decayed — it runs fewer pages at
// once — until one can, so no task starves when its large workers are gone.
type placement struct {
	identity, queue string
	whole           capacity.Resources
	// on: the worker places by needs (it declared a capacity, or is resource-tuned);
	// otherwise it takes every batch, as slots allow, and only reports its capacity.
	on bool
	// machineFree, when set (--tune-resources), is the machine's own view of what is
	// free under the tuner's targets; a worker never takes more than it says.
	machineFree func() (capacity.Resources, bool)
	rec         *monitor.Recorder
	log         *slog.Logger

	mu   sync.Mutex
	used capacity.Resources
	// Learned costs and live workers, read from Redis at most every refresh.
	at    time.Time
	costs map[string]capacity.Cost
	live  []monitor.WorkerBeat
}

const placementRefresh = 2 * time.Second

// newPlacement places batches in whole when it is declared or the worker is tuned
// (the machine's cores and memory when zero); tuned adds the machine's own view of
// what is free under the resource tuner's targets.
func newPlacement(identity, queue string, whole capacity.Resources, tuned bool, targetCPU, targetMem float64, log *slog.Logger) *placement {
	declared := whole != (capacity.Resources{})
	if !declared {
		whole = MachineCapacity()
	}
	p := &placement{identity: identity, queue: queue, whole: whole, log: log, on: declared || tuned}
	if tuned {
		info := &procInfo{}
		machine := MachineCapacity()
		p.machineFree = func() (capacity.Resources, bool) {
			cpu, err1 := info.CpuUsage(nil)
			mem, err2 := info.MemoryUsage(nil)
			if err1 != nil || err2 != nil {
				return capacity.Resources{}, false
			}
			return capacity.Resources{CPU: machine.CPU * max(targetCPU-cpu, 0), MemMB: machine.MemMB * max(targetMem-mem, 0)}, true
		}
	}
	return p
}

// MachineCapacity is what a worker that declares none places batches in: the
// machine's cores and memory.
func MachineCapacity() capacity.Resources {
	total, _, err := meminfo()
	if err != nil {
		total = 0
	}
	return capacity.Resources{CPU: float64(runtime.NumCPU()), MemMB: total / 1024}
}

// refresh rereads the learned costs and the live workers when they are stale.
func (p *placement) refresh(ctx context.Context) {
	if p.rec == nil {
		return
	}
	p.mu.Lock()
	stale := time.Since(p.at) > placementRefresh
	p.mu.Unlock()
	if !stale {
		return
	}
	needs, err := p.rec.Needs(ctx)
	if err != nil {
		return // keep what was read last: Redis trouble shows elsewhere
	}
	beats, err := p.rec.Workers(ctx)
	if err != nil {
		return
	}
	costs := map[string]capacity.Cost{}
	for _, n := range needs {
		costs[n.Task] = costOf(n)
	}
	p.mu.Lock()
	p.costs, p.live, p.at = costs, liveOn(beats, p.queue), time.Now()
	p.mu.Unlock()
}

func costOf(n monitor.TaskNeeds) capacity.Cost {
	return capacity.Cost{MSPerPage: n.MSPerPage, CPUMSPerPage: n.CPUMSPage, KBPerPage: n.KBPerPage}
}

// liveOn lists the live workers of a task queue that say their capacity.
func liveOn(beats []monitor.WorkerBeat, queue string) []monitor.WorkerBeat {
	var out []monitor.WorkerBeat
	for _, b := range beats {
		if b.TaskQueue == queue && b.Capacity != nil && b.AgeS <= liveBeat.Seconds() {
			out = append(out, b)
		}
	}
	return out
}

// wholes are the capacities of the live workers, this one included even before its
// first beat is read back.
func (p *placement) wholes() []capacity.Resources {
	out := []capacity.Resources{p.whole}
	for _, b := range p.live {
		if b.Identity != p.identity {
			out = append(out, *b.Capacity)
		}
	}
	return out
}

// claim takes room for a batch, or says why not. A batch of a task with learned costs
// gets its decayed concurrency when no live worker could take it whole. A worker that
// could take the batch but is busy waits a moment for room (placementWait) before it
// passes the batch on: each pass costs the batch one of Temporal's attempts.
func (p *placement) claim(ctx context.Context, b *crawl.Batch) (release func(), err error) {
	if !p.on {
		return func() {}, nil
	}
	p.refresh(ctx)
	p.mu.Lock()
	cost, known := p.costs[b.Step.Task]
	conc := max(b.Step.Concurrency, 1)
	steps, ok := capacity.DecaySteps(cost, conc, p.wholes())
	need := capacity.Need(cost, capacity.Decayed(conc, steps))
	// A batch too large for every worker even one page at a time runs on an idle
	// largest worker rather than never.
	fitsWhole := p.whole.Covers(need) || (!ok && p.isLargest())
	p.mu.Unlock()
	if !known {
		return func() {}, nil // nothing learned yet: running it is how it is learned
	}
	deadline := time.Now().Add(placementWait)
	for {
		p.mu.Lock()
		free := p.free()
		if free.Covers(need) || (fitsWhole && p.used == (capacity.Resources{})) {
			p.used = p.used.Add(need)
			p.mu.Unlock()
			break
		}
		p.mu.Unlock()
		if !fitsWhole || time.Now().After(deadline) {
			monitor.CapacityWaits.WithLabelValues(b.Step.Task).Inc()
			msg := fmt.Sprintf("%s%s needs %s at %d pages at once; worker %s has %s free of %s; live workers that could take it: %s",
				capacityWaitMark, b.Step.Task, need, capacity.Decayed(conc, steps), p.identity, free, p.whole, p.qualifying(need))
			return nil, temporal.NewApplicationErrorWithOptions(msg, CapacityWaitType, temporal.ApplicationErrorOptions{NextRetryDelay: 500 * time.Millisecond,
				// Benign: passing a batch on is placement at work, not a failure to log as one.
				Category: temporal.ApplicationErrorCategoryBenign})
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if steps > 0 {
		monitor.DecayedBatches.WithLabelValues(b.Step.Task).Inc()
		p.log.Info("batch need decayed: no live worker has room for it whole",
			"task", b.Step.Task, "concurrency", conc, "decayed_to", capacity.Decayed(conc, steps), "steps", steps, "need", need.String())
		b.Step.Concurrency = capacity.Decayed(conc, steps)
	}
	return func() {
		p.mu.Lock()
		p.used = p.used.Sub(need)
		p.mu.Unlock()
	}, nil
}

// placementWait is how long a worker that could take a batch waits for room before
// passing it on.
const placementWait = time.Second

// free is what this worker has free now; the caller holds p.mu.
func (p *placement) free() capacity.Resources {
	free := p.whole.Sub(p.used)
	if p.machineFree != nil {
		if m, ok := p.machineFree(); ok {
			free = capacity.Resources{CPU: min(free.CPU, m.CPU), MemMB: min(free.MemMB, m.MemMB)}
		}
	}
	return free
}

func (p *placement) isLargest() bool {
	for _, w := range p.wholes() {
		if w.CPU > p.whole.CPU || w.MemMB > p.whole.MemMB {
			return false
		}
	}
	return true
}

// qualifying names the live workers whose whole capacity covers need.
func (p *placement) qualifying(need capacity.Resources) string {
	names := qualifyingWorkers(p.live, need)
	if p.whole.Covers(need) && !slices.Contains(names, p.identity) {
		names = append(names, p.identity)
	}
	if len(names) == 0 {
		return "none"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// qualifyingWorkers lists the workers whose whole capacity covers need.
func qualifyingWorkers(live []monitor.WorkerBeat, need capacity.Resources) []string {
	var out []string
	for _, b := range live {
		if b.Capacity != nil && b.Capacity.Covers(need) {
			out = append(out, b.Identity)
		}
	}
	return out
}

// placementInterceptor runs claim before every batch activity of the worker.
type placementInterceptor struct {
	interceptor.WorkerInterceptorBase
	p *placement
}

func (i *placementInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &placementActivity{p: i.p}
	a.Next = next
	return a
}

type placementActivity struct {
	interceptor.ActivityInboundInterceptorBase
	p *placement
}

func (a *placementActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if len(in.Args) == 1 {
		if b, ok := in.Args[0].(crawl.Batch); ok {
			release, err := a.p.claim(ctx, &b)
			if err != nil {
				return nil, err
			}
			defer release()
			in.Args[0] = b
		}
	}
	return a.Next.ExecuteActivity(ctx, in)
}

// Unserved lists the steps of plan that no live worker of queue can run: none
// announces the step's task (workers that list no tasks run any), or, for a step that
// renders, none polls the render queue. Each line names the task, the queue and how to
// start such a worker. Affinity site queues are not checked: workers of queue start
// polling them once the run registers them.
func Unserved(beats []monitor.WorkerBeat, plan *crawl.Plan, queue string) []string {
	var out []string
	for _, st := range plan.Steps {
		q := workflows.SiteQueueOf(st, queue)
		render := q == workflows.RenderQueue(queue)
		if slices.ContainsFunc(beats, func(b monitor.WorkerBeat) bool {
			return b.TaskQueue == queue && b.AgeS <= liveBeat.Seconds() &&
				(len(b.Tasks) == 0 || slices.Contains(b.Tasks, st.Task)) && (!render || slices.Contains(b.Sites, q))
		}) {
			continue
		}
		how := fmt.Sprintf("start one with `trawler worker --task-queue %s`", queue)
		if render {
			how += " and a browser (see docs/rendering.md)"
			q = queue + " (render queue " + workflows.RenderQueue(queue) + ")"
		}
		step := ""
		if st.ID != "" {
			step = " (step " + st.ID + ")"
		}
		out = append(out, fmt.Sprintf("no live worker serves task %s%s on queue %s: %s", st.Task, step, q, how))
	}
	return out
}
