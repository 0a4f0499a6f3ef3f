// Package activities holds Trawler's Temporal activities. RunBatch runs one step's task
// over one batch of inputs: bounded concurrency, a timeout per input, an outcome per
// input (a failing input never fails the batch), items stored in the step's sinks, and
// heartbeats that let a retried batch skip what is already stored.
package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"slices"

	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/affinity"
	"github.com/trawlerhq/trawler/internal/archive"
	"github.com/trawlerhq/trawler/internal/changes"
	"github.com/trawlerhq/trawler/internal/dedup"
	"github.com/trawlerhq/trawler/internal/external"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/quota"
	"github.com/trawlerhq/trawler/internal/recrawl"
	"github.com/trawlerhq/trawler/internal/seen"
	"github.com/trawlerhq/trawler/internal/storage"
)

// Activities carries what a worker's activities share.
type Activities struct {
	Registry *crawl.Registry
	Fetcher  crawl.Fetcher
	Sinks    storage.Set
	Failures storage.FailureLog // where given-up inputs are recorded; may be nil
	// Dedup decides which items are new or changed; nil stores every item.
	Dedup *dedup.Deduper
	// Pools lend the resources tasks declare in Needs; nil: tasks with needs fail.
	Pools *external.Pools
	// Quotas lease the cost budgets of runs, chains and tenants; nil: no budgets.
	Quotas *quota.Manager
	// Seen is the runs' seen-sets: each step is handed an input at most once per run
	// (seen.go); nil: no Redis, every input goes on.
	Seen *seen.Set
	// Recrawl plans the visits of steps with a recrawl policy; nil: no Redis.
	Recrawl *recrawl.Planner
	// Sites registers the site queues of steps with an affinity; nil: no Redis.
	Sites *affinity.Registry
	// Sources serves steps marked `shared` from one fetch per interval; nil: every
	// step fetches for itself.
	Sources *SharedSources
	// Monitor records pages per minute for fleet-wide rates; nil: metrics only.
	Monitor *monitor.Recorder
	tally   *monitor.Tally // what the worker's batches record for Monitor, sent in bulk
	// Services are what the worker shares with its tasks (see crawl.Services).
	Services crawl.Services
	Log      *slog.Logger
	// FlushEvery is how many finished inputs are stored (and heartbeated) together
	// (default 10): smaller means less redone work after a crash, larger fewer writes.
	FlushEvery int
	once       sync.Once

	// Render renders the pages of steps with `render:`; nil: the worker has no
	// browser and refuses their batches (render.go).
	Render *Rendering
	// Changes sends the change events of steps with `changes: kafka`; nil: the worker
	// has no Kafka, HBase or Redis and refuses their batches (changes.go).
	Changes *changes.Publisher
	// Archives write the WARC files of steps with `archive:` (archive.go); nil: the
	// worker refuses their batches.
	Archives *archive.Writers
	readers  readers // the archives of reparse steps (reparse.go)
}

// outcome is what became of one input. Finished outcomes are checkpointed through the
// batch's heartbeat, so a retried batch skips what is already stored.
type outcome struct {
	Index        int            `json:"i"`
	OK           bool           `json:"ok,omitempty"`
	Items        int            `json:"items,omitempty"`
	Skipped      int            `json:"skipped,omitempty"`
	Unchanged    int            `json:"unchanged,omitempty"`
	DepthLimited int            `json:"dl,omitempty"`
	OutOfScope   int            `json:"oos,omitempty"`
	Trapped      int            `json:"trap,omitempty"`
	TrapRules    map[string]int `json:"traps,omitempty"`
	Out          []crawl.Routed `json:"out,omitempty"`
	// Expect counts the input's items for the step's expectations.
	Expect     *crawl.ExpectCounts `json:"exp,omitempty"`
	dups       []int               // the steps of the outputs the seen-set dropped, one each
	Err        string              `json:"err,omitempty"`
	Class      crawl.Cause         `json:"cls,omitempty"`
	Permanent  bool                `json:"perm,omitempty"`
	RetryAfter time.Duration       `json:"ra,omitempty"`
	// Held: the host's politeness held the input back (crawl.HeldError); it runs again
	// after RetryAfter without spending an attempt.
	Held    bool      `json:"held,omitempty"`
	waiting error     // the input waits for a dependency (a pool item, Redis)
	ahead   *claimAsk // the claim of its outputs made as it finished (claimAhead)
	back    bool      // a followed input handed back to the workflow unrun
	lane    int       // the batch lane that ran it
	quota   string    // the input was not run: a budget ran out (why)
	input   crawl.Input
	result  crawl.Result // until stored
	// set once the item pipeline has judged the input's items (dedup verdicts, budget),
	// so a write retried during an outage neither leases nor judges them twice
	judged  bool
	kept    []crawl.Item
	changed map[string]bool // canonical keys of kept items dedup judged changed (`changes:` steps)
	stages  []string        // see wrote
	dropped []string        // keys of items the budget kept from being stored
}

// RunBatch is the activity; its registered name is workflows.RunBatchActivity. A batch
// whose store, Redis or pool is down returns what it finished and the rest as waiting
// (runs that wait out outages set Batch.Outages); an error it still returns carries the
// dependency as an application error of type crawl.DependencyErrorType.
func (a *Activities) RunBatch(ctx context.Context, b crawl.Batch) (crawl.BatchResult, error) {
	res, err := a.runBatch(ctx, b)
	if dep, ok := crawl.DependencyOf(err); ok {
		return res, temporal.NewApplicationErrorWithOptions(err.Error(), crawl.DependencyErrorType, temporal.ApplicationErrorOptions{Details: []any{dep}, Cause: err})
	}
	return res, err
}

func (a *Activities) runBatch(ctx context.Context, b crawl.Batch) (crawl.BatchResult, error) {
	a.once.Do(func() {
		if a.Log == nil {
			a.Log = slog.Default()
		}
		if a.FlushEvery <= 0 {
			a.FlushEvery = 10
		}
		if a.Monitor != nil {
			a.tally = monitor.NewTally(a.Monitor)
		}
	})
	r, res, err := a.begin(ctx, b)
	if r == nil {
		return res, err
	}
	defer r.end()
	r.run()
	r.collect()
	return r.finish()
}

// batchRun is one attempt at one batch, in three parts: run executes the inputs of its
// lanes (each bounded by its step's concurrency, admitted by its budgets); collect
// stores what they yield through the item pipeline in groups, checkpoints it through
// the heartbeat and follows outputs for the batch's lanes back into them; finish turns
// the checkpoint into the batch's result.
type batchRun struct {
	a     *Activities
	ctx   context.Context
	b     crawl.Batch // b.Work grows as the batch follows outputs: every lane's inputs, by index
	own   int         // inputs the workflow handed over; the rest were followed
	lanes []*lane     // the batch's own step, then Batch.Downstream's (nil: not followed into)
	cp    *checkpointer
	began time.Time
	// claims claim the outputs the batch discovers in the run's seen-set, seeds its
	// start inputs (seen.go); nil without one.
	claims, seeds *seen.Claimer
	handedBack    map[string]*seen.Claimer // claimers of inputs other batches handed back, by id
	claimQueue    *claimQueue              // what uses the claimers, one round at a time

	// Stopping runCtx stops admitting inputs and cancels those running: the batch gives
	// up on an outage and hands the rest back.
	runCtx  context.Context
	stopRun context.CancelFunc
	// Each lane's queue holds the inputs to run: the batch's own, then those it follows.
	// It never blocks a send, so collect can feed it while it drains results.
	queueOpen   bool
	outstanding int // queued or running in any lane, not yet collected
	results     chan outcome
	followed    int

	waiting  []outcome // waiting for a dependency (a pool item, Redis)
	flushErr error     // the store failed for longer than the batch holds on
}

// lane is one step whose inputs a batch runs: its own step, or a step downstream that
// it follows its outputs into, run as one more batch of that step would be.
type lane struct {
	n      int
	b      crawl.Batch // the batch as this step's: its Step and StepIdx
	task   crawl.Task
	env    *crawl.Env
	sinks  []storage.Sink
	budget *batchQuota
	cost   *batchCost
	feeds  bool // the step feeds another lane: its outputs are stored at once
	queue  chan queued
	// queued or running, not yet collected; finished, not yet stored (collect's)
	outstanding int
	pending     []outcome
	// claimed counts the pending inputs whose outputs are claimed in the run's seen-set
	// (a prefix: inputs join at the end): each is claimed once, however often storing
	// its group is tried again.
	claimed int
}

type queued struct {
	i int
	w crawl.Work
}

// begin resolves what the batch needs (its task, sinks, fetcher, prepared params and
// budget, for its own step and each step downstream it may follow into) and resumes
// from an earlier attempt's checkpoint. When the batch cannot start, it returns no
// batchRun and the batch's result.
func (a *Activities) begin(ctx context.Context, b crawl.Batch) (*batchRun, crawl.BatchResult, error) {
	fail := func(res crawl.BatchResult, err error) (*batchRun, crawl.BatchResult, error) { return nil, res, err }
	// Resume: what an earlier attempt checkpointed is already stored, and the inputs it
	// took over from its outputs are the batch's too.
	r := &batchRun{a: a, ctx: ctx, began: time.Now(), own: len(b.Work)}
	r.cp = newCheckpointer(ctx, len(b.Work))
	b.Work = slices.Clip(b.Work)
	for _, f := range r.cp.sum.Followed {
		b.Work = append(b.Work, f.Work)
	}
	// The stores `all` stands for, resolved once: sinks, metrics and checkpoints name them.
	b.Step.Store = a.storesOf(b.Step)
	b.Downstream = slices.Clone(b.Downstream)
	for k := range b.Downstream {
		b.Downstream[k].Step.Store = a.storesOf(b.Downstream[k].Step)
	}
	r.b = b
	task, ok := a.Registry.Get(b.Step.Task)
	if !ok {
		// A chain was validated against a registry this worker does not share: every
		// input fails with the reason instead of the batch failing forever.
		return fail(r.failAll(fmt.Sprintf("task %s is not registered on this worker (it has: %v); deploy a worker that includes the site package", b.Step.Task, a.Registry.Names())))
	}
	if _, err := a.rendering(task, b); err != nil {
		// A worker without a browser refuses the batch, so that Temporal hands it to
		// one that has one.
		return fail(crawl.BatchResult{}, err)
	}
	running.Add(1)
	own, err := a.openLane(b, 0, task)
	if err == nil {
		// The budget may be down for a moment: ride that out as a store's outage.
		err = a.hold(ctx, b, r.cp, nil, func() (err error) {
			own.budget, err = a.quotaFor(ctx, own.b, len(b.Work))
			return crawl.Dependency("redis (quota)", err)
		})
	}
	if err != nil {
		running.Add(-1)
		if _, dep := crawl.DependencyOf(err); dep {
			return fail(a.waitOut(ctx, b, r.cp, nil, nil, err))
		}
		return fail(r.failAll(err.Error()))
	}
	r.lanes = []*lane{own}
	for k := range b.Downstream {
		// A step downstream this worker cannot run (its task, a store or its budget is
		// missing) is not followed into: its inputs go back to the workflow, and a batch
		// of its own reports why.
		l, err := a.openLane(b, k+1, nil)
		if err == nil {
			// One lease for the whole batch: the budgets are the run's, chain's and
			// tenant's, whichever step spends them, and a second lease could wait for
			// what the first holds until the batch ends.
			l.budget = own.budget.shared()
		}
		if err != nil {
			l = nil
			a.Log.Warn("not following into a step", "chain", b.Chain, "step", b.Downstream[k].Step.ID, "err", err)
		}
		r.lanes = append(r.lanes, l)
	}
	for _, l := range r.lanes {
		if l != nil {
			l.feeds = r.feedsLane(l.b.Step)
			l.cost.lanes = r.openLanes()
		}
	}
	r.openClaims()
	r.runCtx, r.stopRun = context.WithCancel(ctx)
	return r, crawl.BatchResult{}, nil
}

// openLane resolves what a batch needs to run inputs of lane k's step: its task (nil:
// look it up), sinks, fetcher and prepared params.
func (a *Activities) openLane(b crawl.Batch, k int, task crawl.Task) (*lane, error) {
	lb := laneBatch(b, k)
	if task == nil {
		t, ok := a.Registry.Get(lb.Step.Task)
		if !ok {
			return nil, fmt.Errorf("task %s is not registered on this worker", lb.Step.Task)
		}
		task = t
	}
	l := &lane{n: k, b: lb, task: task}
	for _, name := range lb.Step.Store {
		s, err := a.Sinks.Get(name)
		if err != nil {
			return nil, crawl.Dependency("store "+name, err)
		}
		l.sinks = append(l.sinks, s)
	}
	if err := a.checkChanges(lb.Step); err != nil {
		return nil, err
	}
	fetcher, err := a.stepFetcher(task.Spec(), lb)
	if err != nil {
		return nil, err
	}
	if fetcher.archive, err = a.archiveOf(lb); err != nil {
		return nil, err
	}
	l.cost = startCost()
	fetcher.cost = l.cost
	l.env = &crawl.Env{
		Fetcher: fetcher, Log: a.Log.With("chain", lb.Chain, "step", lb.Step.ID, "run", lb.RunID),
		Params: lb.Step.Params, Chain: lb.Chain, Step: lb.Step.ID, RunID: lb.RunID, Tenant: lb.Tenant,
		Services: a.Services,
	}
	if l.task, err = a.rendering(task, lb); err != nil {
		return nil, err
	}
	if p, ok := task.(crawl.Preparer); ok {
		// The task compiles its params once for the whole batch.
		if l.env.Prepared, err = p.Prepare(lb.Step.Params); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// laneBatch is the batch as lane k's step sees it: lane 0 is the batch's own step, lane
// k the k-th of Batch.Downstream. Its Work stays the whole batch's, by index.
func laneBatch(b crawl.Batch, k int) crawl.Batch {
	lb := b
	if k > 0 {
		d := b.Downstream[k-1]
		lb.Step, lb.StepIdx, lb.Follow, lb.Downstream = d.Step, d.StepIdx, 0, nil
	}
	return lb
}

// feedsLane reports whether a step hands inputs to another of the batch's lanes (its
// own next pages are known by the outputs of each input).
func (r *batchRun) feedsLane(step crawl.PlanStep) bool {
	for _, c := range step.Consumers {
		if !c.Self && r.laneOf(c.Step) != nil {
			return true
		}
	}
	return false
}

// laneOf is the open lane that runs inputs of step idx, or nil.
func (r *batchRun) laneOf(idx int) *lane {
	for _, l := range r.lanes {
		if l != nil && l.b.StepIdx == idx {
			return l
		}
	}
	return nil
}

func (r *batchRun) openLanes() int {
	n := 0
	for _, l := range r.lanes {
		if l != nil {
			n++
		}
	}
	return n
}

// storesOf is the sinks a step writes to: those it names, or for `store: [all]` every
// store of this worker (not its resource pools).
func (a *Activities) storesOf(step crawl.PlanStep) []string {
	if !slices.Contains(step.Store, crawl.StoreAll) {
		return step.Store
	}
	stores := slices.DeleteFunc(a.Sinks.Names(), func(name string) bool { return slices.Contains(external.SinkNames(), name) })
	for _, name := range step.Store { // a plan changed in code may name others beside all
		if name != crawl.StoreAll && !slices.Contains(stores, name) {
			stores = append(stores, name)
		}
	}
	return stores
}

// end gives back what the batch holds: unspent budget, its share of the CPU.
func (r *batchRun) end() {
	r.stopRun()
	if r.claimQueue != nil {
		r.claimQueue.close()
	}
	r.lanes[0].budget.release(r.ctx, r.a.Log)
	running.Add(-1)
}

// run queues the inputs still to run in their lanes and starts executing them. The
// inputs are listed before anything starts: the checkpoint belongs to collect from here
// on. A followed input whose step this attempt does not follow into goes back to the
// workflow.
func (r *batchRun) run() {
	// A start input the run has already fetched (another page led to it) is not run.
	for _, i := range r.claimSeeds(r.cp.todo()) {
		r.cp.skip(i, r.b.StepIdx)
	}
	todo := map[*lane][]int{}
	for _, i := range r.cp.todo() {
		k := r.cp.lane(i)
		if l := r.lanes[k]; l != nil {
			todo[l] = append(todo[l], i)
			continue
		}
		r.cp.handBack(i, crawl.Routed{Step: r.b.Downstream[k-1].StepIdx, Input: r.b.Work[i].Input})
	}
	r.followed = len(r.cp.sum.Followed)
	room := max(r.b.Follow-r.followed, 0)
	r.results = make(chan outcome)
	var wg sync.WaitGroup
	for _, l := range r.lanes {
		if l == nil {
			continue
		}
		l.queue = make(chan queued, len(todo[l])+room)
		for _, i := range todo[l] {
			l.queue <- queued{i, r.b.Work[i]}
		}
		l.outstanding = len(todo[l])
		r.outstanding += l.outstanding
		wg.Add(1)
		go func() { defer wg.Done(); r.execute(l) }()
	}
	r.queueOpen = true
	if r.outstanding == 0 {
		r.closeQueue()
	}
	go func() { wg.Wait(); close(r.results) }()
}

// execute runs the queued inputs of one lane, at most its step's concurrency at once,
// until the queue closes or the run stops, and sends every outcome to results.
func (r *batchRun) execute(l *lane) {
	b := l.b
	sem := make(chan struct{}, max(b.Step.Concurrency, 1))
	send := func(o outcome) { o.lane = l.n; r.results <- o }
	// The inputs run on up to cap(sem) goroutines that live as long as the lane: a page's
	// fetch and parse grow a goroutine's stack deep, and a goroutine per input paid for
	// that growth again on every page.
	jobs := make(chan queued)
	var wg sync.WaitGroup
	defer func() { close(jobs); wg.Wait() }()
	runners := 0
	// The pages of a step that feeds itself are the run's critical path (each waits
	// on the one before): they go first when their host is busy.
	ctx := r.runCtx
	if b.Step.ConsumesItself() {
		ctx = fetch.Urgent(ctx)
	}
	for q := range l.queue {
		if r.runCtx.Err() != nil {
			break
		}
		i, w := q.i, q.w
		if o, stop := l.budget.admit(r.runCtx, i); stop {
			if o.quota == "" && b.Outages {
				// Redis failed, not the input: it waits instead of spending a retry.
				o = outcome{Index: i, waiting: crawl.Dependency("redis (quota)", errors.New(o.Err))}
			}
			send(o)
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-r.runCtx.Done():
		}
		if r.runCtx.Err() != nil {
			break
		}
		if i >= r.own && time.Since(r.began) >= r.b.FollowFor {
			// A followed input that could not start within the follow window goes back
			// to the workflow, so the batch ends within its time limit.
			<-sem
			send(outcome{Index: i, back: true, input: w.Input})
			continue
		}
		r.cp.begin(i)
		if runners < cap(sem) {
			runners++
			wg.Go(func() {
				for q := range jobs {
					began := time.Now()
					o := r.a.runOne(ctx, l.task, l.env, b, q.i, q.w)
					l.cost.wall.Add(int64(time.Since(began)))
					r.claimAhead(l, &o)
					send(o)
					<-sem
				}
			})
		}
		jobs <- q
	}
}

func (r *batchRun) closeQueue() {
	if r.queueOpen {
		r.queueOpen = false
		for _, l := range r.lanes {
			if l != nil {
				close(l.queue)
			}
		}
	}
}

// collect takes every outcome as it comes: it stores finished inputs in groups (at once
// when the batch follows their outputs: the next page is the critical path),
// checkpoints them, and sets aside what waits for a dependency. Outcomes that finished
// while a flush ran are waiting to be sent: collect takes them all before it flushes
// (group commit), so one round trip to the stores and the seen-set serves every page
// that finished meanwhile, rather than one each, and the lanes' workers do not queue
// behind the collector.
func (r *batchRun) collect() {
	// The tick stores what a slow stream of pages finished and heartbeats a batch whose
	// pages all take long, inside the heartbeat timeout.
	tick := time.NewTicker(min(2*time.Second, r.cp.every))
	defer tick.Stop()
	for {
		select {
		case o, ok := <-r.results:
			due := false
			for ok {
				due = r.take(o) || due
				select {
				case o, ok = <-r.results:
					continue
				default:
				}
				break
			}
			if !ok {
				r.closeQueue()
				if r.flushErr == nil {
					r.flushErr = r.flushHeld()
				}
				return
			}
			if due {
				r.flushOrStop()
				r.cp.heartbeat(false)
			}
			if r.outstanding == 0 || r.flushErr != nil {
				r.closeQueue() // nothing more will be followed
			}
		case <-tick.C:
			if r.flushErr == nil {
				r.flushOrStop()
			}
			r.cp.heartbeat(false)
		}
	}
}

// take sets one outcome where it belongs: with the lane's pending group to store, back
// to the workflow, or waiting; it reports whether the pending groups are due to be
// stored now.
func (r *batchRun) take(o outcome) (due bool) {
	l := r.lanes[o.lane]
	r.outstanding--
	l.outstanding--
	switch {
	case o.waiting != nil:
		r.cp.unbegin(o.Index)
		r.waiting = append(r.waiting, o)
	case o.quota != "":
		r.cp.unrun[o.Index] = true // left unrun; the result says how many and why
	case o.back:
		r.cp.handBack(o.Index, crawl.Routed{Step: l.b.StepIdx, Input: o.input})
	case r.flushErr != nil:
		// not stored: it goes back with the rest
	default:
		l.pending = append(l.pending, o)
		hop := r.following() && (len(o.result.Next) > 0 || l.feeds)
		return hop || r.held() >= r.a.FlushEvery || r.outstanding == 0
	}
	return false
}

// held counts the finished inputs not stored yet, in every lane.
func (r *batchRun) held() int {
	n := 0
	for _, l := range r.lanes {
		if l != nil {
			n += len(l.pending)
		}
	}
	return n
}

// flushOrStop stores the pending groups; when that fails for good, the run stops.
func (r *batchRun) flushOrStop() {
	if r.flushErr = r.flushHeld(); r.flushErr != nil {
		r.stopRun()
	}
}

// flushHeld rides out a short outage of a store or Redis inside the batch; a long one
// stops the batch so the run can wait it out (Batch.Outages) — unless some sink already
// holds a group's items: giving up then would write them twice (an appending sink
// keeps both copies), so the batch holds on until the group is stored and recorded.
func (r *batchRun) flushHeld() error {
	committed := func() bool {
		return slices.ContainsFunc(r.lanes, func(l *lane) bool { return l != nil && len(l.pending) > 0 && len(l.pending[0].stages) > 0 })
	}
	return r.a.hold(r.ctx, r.b, r.cp, committed, r.flush)
}

// flush stores each lane's pending group, then checkpoints each input as done, with the
// outputs that the batch follows itself moved into its lanes.
func (r *batchRun) flush() error {
	for _, l := range r.lanes {
		if l == nil || len(l.pending) == 0 {
			continue
		}
		if err := r.a.judge(r.ctx, l.b, r.a.dedupOn(l.b.Step), l.sinks, l.pending, l.budget); err != nil {
			return err
		}
		// Only outputs the run has not handed their step yet go on, to be followed here
		// or handed back to the workflow. Their claim, a Redis round trip, runs while the
		// items are written and recorded (round trips of their own).
		var claiming chan func()
		if l.claimed < len(l.pending) {
			claiming = make(chan func(), 1)
			group := l.pending[l.claimed:]
			if answeredAhead(l, group) {
				claiming <- r.claimOutputs(l, group) // no round trip left to overlap
			} else {
				go func() { claiming <- r.claimOutputs(l, group) }()
			}
			l.claimed = len(l.pending)
		}
		err := r.a.store(r.ctx, l.b, l.sinks, l.pending, l.budget)
		if claiming != nil {
			(<-claiming)()
		}
		if err != nil {
			return err
		}
		for _, o := range l.pending {
			o.Out = slices.DeleteFunc(o.Out, r.follow)
			r.cp.finish(o, l.n)
		}
		l.pending, l.claimed = l.pending[:0], 0
	}
	return nil
}

// following reports whether the batch still takes outputs into its lanes: within its
// input and time bounds, and until it holds a full load for the steps it feeds.
func (r *batchRun) following() bool {
	b := r.b
	return r.followed < b.Follow && time.Since(r.began) < b.FollowFor && r.runCtx.Err() == nil &&
		(b.FollowHold <= 0 || len(r.cp.sum.Out) < b.FollowHold)
}

// follow takes an output into the lane of its step, if the batch has one, still follows
// and the lane has room: its `concurrency` running and one round queued behind them. An
// output handed back waits for the batch to end and a round trip through the server
// (about 8 ms and an activity), where one queued starts the moment a page ends; a wider
// fan-out goes back to the workflow, so the step's other batches share it.
func (r *batchRun) follow(out crawl.Routed) bool {
	l := r.laneOf(out.Step)
	if l == nil || !r.queueOpen || !r.following() || l.outstanding >= 2*max(l.b.Step.Concurrency, 1) {
		return false
	}
	w := crawl.Work{Input: out.Input}
	r.b.Work = append(r.b.Work, w)
	l.queue <- queued{r.cp.follow(w, l.n), w}
	r.followed++
	r.outstanding++
	l.outstanding++
	return true
}

// finish is the batch's result: what it finished, what it hands back waiting for a
// dependency, and its failures decided between retry and give up, for its own step and
// each step it followed into.
func (r *batchRun) finish() (crawl.BatchResult, error) {
	a, ctx, b := r.a, r.ctx, r.b
	if err := ctx.Err(); err != nil {
		return crawl.BatchResult{}, err
	}
	budgets := make([]*batchQuota, len(r.lanes))
	for k, l := range r.lanes {
		if l != nil {
			budgets[k] = l.budget
		}
	}
	if r.flushErr != nil {
		return a.waitOut(ctx, b, r.cp, budgets, r.waiting, r.flushErr)
	}
	if len(r.waiting) > 0 {
		return a.waitOut(ctx, b, r.cp, budgets, r.waiting, r.waiting[0].waiting)
	}
	res, err := a.summarize(ctx, b, r.cp, budgets, nil)
	res.Followed = r.followed
	if err == nil {
		a.observe(ctx, b, res)
		for _, d := range res.Downstream {
			k := slices.IndexFunc(b.Downstream, func(s crawl.DownstreamStep) bool { return s.StepIdx == d.StepIdx })
			a.observe(ctx, laneBatch(b, k+1), d)
		}
	}
	for _, l := range r.lanes {
		if l != nil {
			a.recordCost(l.b.Step.Task, r.cp.tally(l.n).Pages, l.cost)
		}
	}
	if a.tally != nil {
		// The batch is still counted as running: when it is the only one, it sends
		// what every batch of the worker recorded.
		if err := a.tally.Send(ctx, running.Load() <= 1); err != nil {
			a.Log.Warn("record pages per minute and task costs", "err", err)
		}
	}
	return res, err
}

// hold runs fn until it succeeds; while it fails for a dependency, it retries with a
// growing pause for up to the batch's OutageHold, or for as long as committed reports
// work that must not be dropped half-done (bounded by the chain's max_outage), and
// heartbeats the outage so status shows it. Other errors, and runs that do not wait out
// outages, return at once.
func (a *Activities) hold(ctx context.Context, b crawl.Batch, cp *checkpointer, committed func() bool, fn func() error) error {
	err := cp.keepAlive(fn)
	if err == nil || !b.Outages {
		return err
	}
	if _, ok := crawl.DependencyOf(err); !ok {
		return err
	}
	dep, _ := crawl.DependencyOf(err)
	cp.sum.Hold = &crawl.Outage{Dependency: dep, Cause: err.Error(), Since: time.Now().UTC(), Waiting: cp.n - len(cp.done) - len(cp.unrun)}
	defer func() { cp.sum.Hold = nil }()
	began := time.Now()
	pause := 200 * time.Millisecond
	for {
		cp.heartbeat(true)
		held := time.Since(began)
		mustFinish := committed != nil && committed() && (b.MaxOutage <= 0 || held < b.MaxOutage)
		if held >= b.OutageHold && !mustFinish {
			return err
		}
		// Sleep no longer than a heartbeat interval: a silent batch is taken for lost
		// and run again elsewhere, which is what holding on avoids.
		wait := min(pause, cp.every)
		if !mustFinish {
			wait = min(wait, b.OutageHold-held)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		if err = cp.keepAlive(fn); err == nil {
			return nil
		}
		cp.sum.Hold.Cause = err.Error()
		pause = min(2*pause, 5*time.Second)
	}
}

// waitOut ends a batch whose dependency is down. Runs that wait out outages get what
// the batch finished, with every other input back as waiting; older runs get the error,
// and Temporal retries the batch from its checkpoint.
func (a *Activities) waitOut(ctx context.Context, b crawl.Batch, cp *checkpointer, budgets []*batchQuota, waiting []outcome, cause error) (crawl.BatchResult, error) {
	dep, isDep := crawl.DependencyOf(cause)
	if w := (*external.WaitError)(nil); errors.As(cause, &w) {
		dep, isDep = fmt.Sprintf("pool %s/%s/%s", w.Tenant, w.Site, w.Kind), true
		if !b.Outages {
			cp.heartbeat(true) // what is done stays done when Temporal retries the batch
			return crawl.BatchResult{}, waitingFor(waiting, len(b.Work))
		}
	}
	if !b.Outages || !isDep {
		cp.heartbeat(true)
		return crawl.BatchResult{}, cause
	}
	outage := &crawl.Outage{Dependency: dep, Cause: cause.Error()}
	res, err := a.summarize(ctx, b, cp, budgets, outage)
	if err != nil {
		return crawl.BatchResult{}, err
	}
	a.Log.Warn("batch waits for a dependency", "chain", b.Chain, "step", b.Step.ID, "dependency", dep, "waiting", len(res.Waiting), "err", cause)
	return res, nil
}

// observe counts a finished batch in the metrics and the fleet-wide rates.
func (a *Activities) observe(ctx context.Context, b crawl.Batch, res crawl.BatchResult) {
	monitor.Batch(b, res)
	if a.tally != nil {
		a.tally.Pages(b.Tenant, b.Chain, res.Pages)
	}
}

// runOne runs one input.
func (a *Activities) runOne(ctx context.Context, task crawl.Task, env *crawl.Env, b crawl.Batch, i int, w crawl.Work) (o outcome) {
	o.Index = i
	ictx, cancel := context.WithTimeout(ctx, b.Step.Timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			a.Log.Error("task panicked", "task", b.Step.Task, "input", w.Input.Describe(), "panic", p, "stack", string(debug.Stack()))
			o = outcome{Index: i, Err: fmt.Sprintf("task %s panicked: %v", b.Step.Task, p), Class: crawl.CausePanic, Permanent: true}
		}
	}()
	var res crawl.Result
	var err error
	if b.Step.Shared > 0 && a.Sources != nil {
		res, err = a.Sources.Run(ictx, b.Step, w.Input, func() (crawl.Result, error) { return task.Run(ictx, env, w.Input) })
	} else {
		res, err = task.Run(ictx, env, w.Input)
	}
	if err == nil && ictx.Err() != nil && ctx.Err() == nil {
		err = crawl.WithCause(fmt.Errorf("timed out after %s", b.Step.Timeout), crawl.CauseTimeout)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ictx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w (step timeout %s)", err, b.Step.Timeout)
		}
		if _, dep := crawl.DependencyOf(err); external.IsWaiting(err) || dep {
			return outcome{Index: i, waiting: err}
		}
		if wait, held := crawl.HeldFor(err); held {
			return outcome{Index: i, Err: fmt.Sprintf("%s: %v", w.Input.Describe(), err), Class: crawl.CauseOf(err), Held: true, RetryAfter: wait}
		}
		return outcome{Index: i, Err: fmt.Sprintf("%s: %v", w.Input.Describe(), err), Class: crawl.CauseOf(err), Permanent: crawl.IsPermanent(err), RetryAfter: crawl.RetryDelay(err)}
	}
	if len(res.Notes) > 0 {
		a.Log.Warn("stored with notes", "chain", b.Chain, "step", b.Step.ID, "input", w.Input.Describe(), "notes", res.Notes)
	}
	if err := stamp(b, res.Items, time.Now().UTC()); err != nil {
		return outcome{Index: i, Err: fmt.Sprintf("%s: %v", w.Input.Describe(), err), Class: crawl.CauseParse, Permanent: true}
	}
	return outcome{Index: i, OK: true, Skipped: res.Skipped, OutOfScope: res.OutOfScope, Trapped: res.Trapped, TrapRules: res.TrapRules, input: w.Input, result: res}
}

// summarize turns a batch's checkpoint into its result: its own step's, and one in
// Downstream for each step it followed into, each with its failures decided between
// retry and give up (and recorded) and what its budgets stopped. With an outage, every
// input not finished goes back as waiting for it.
func (a *Activities) summarize(ctx context.Context, b crawl.Batch, cp *checkpointer, budgets []*batchQuota, outage *crawl.Outage) (crawl.BatchResult, error) {
	var res crawl.BatchResult
	for k := range len(b.Downstream) + 1 {
		lb := laneBatch(b, k)
		lr, err := a.summarizeStep(ctx, lb, cp.tally(k), cp.claimed)
		if err != nil {
			return crawl.BatchResult{}, err
		}
		if k < len(budgets) {
			budgets[k].report(&lr)
		}
		if outage != nil {
			for i, w := range b.Work {
				if !cp.done[i] && !cp.unrun[i] && cp.lane(i) == k {
					lr.Waiting = append(lr.Waiting, crawl.Work{Input: cp.claimed(w.Input), Attempt: w.Attempt, Cause: w.Cause, Class: w.Class})
				}
			}
			if k == 0 || len(lr.Waiting) > 0 {
				lr.Outage = outage
			}
		}
		switch {
		case k == 0:
			res = lr
		case !reflect.ValueOf(lr).IsZero():
			lr.StepIdx = lb.StepIdx
			res.Downstream = append(res.Downstream, lr)
		}
	}
	res.Out = cp.sum.Out
	res.Duplicates = slices.Clone(cp.sum.Dups)
	return res, nil
}

// summarizeStep is the result of one step's finished inputs.
// Inputs to be retried leave the batch stamped by claimed.
func (a *Activities) summarizeStep(ctx context.Context, b crawl.Batch, s *tally, claimed func(crawl.Input) crawl.Input) (crawl.BatchResult, error) {
	res := crawl.BatchResult{Pages: s.Pages, Items: s.Items, Skipped: s.Skipped, Unchanged: s.Unchanged, DepthLimited: s.DepthLimited, OutOfScope: s.OutOfScope, Trapped: s.Trapped, TrapRules: s.TrapRules, Retried: s.Retried, Expect: s.Expect}
	var gone []crawl.Input // pages the site says are gone: a recrawl step forgets them
	var removed []changes.Gone
	failed := slices.Clone(s.Failed)
	slices.SortFunc(failed, func(x, y outcome) int { return x.Index - y.Index })
	for _, o := range failed {
		w := b.Work[o.Index]
		if o.Held {
			res.Retry = append(res.Retry, crawl.Work{Input: claimed(w.Input), Attempt: w.Attempt, Cause: o.Err, Class: o.Class})
			res.RetryAfter = max(res.RetryAfter, o.RetryAfter)
			continue
		}
		attempts := w.Attempt + 1
		if o.Permanent || attempts > b.Step.Retries {
			res.Failed = append(res.Failed, crawl.Failure{Step: b.Step.ID, Input: w.Input, Attempts: attempts, Cause: o.Err, Class: o.Class}.Redacted())
			if isGone(o.Class) {
				gone = append(gone, w.Input)
				removed = append(removed, changes.Gone{Input: w.Input, Status: goneStatus(o.Class)})
			}
			continue
		}
		res.Retry = append(res.Retry, crawl.Work{Input: claimed(w.Input), Attempt: attempts, Cause: o.Err, Class: o.Class})
		res.RetryAfter = max(res.RetryAfter, o.RetryAfter)
	}
	a.forgetGone(ctx, b, gone)
	if err := a.publishRemoved(ctx, b, removed); err != nil {
		return crawl.BatchResult{}, err
	}
	if len(res.Failed) > 0 && a.Failures != nil {
		if err := a.Failures.WriteFailures(ctx, b.RunID, res.Failed); err != nil {
			return crawl.BatchResult{}, crawl.Dependency("failure log", fmt.Errorf("record %d failures of step %s: %w", len(res.Failed), b.Step.ID, err))
		}
	}
	return res, nil
}

// failAll fails every input the batch was handed and no attempt finished, with one
// cause; inputs an earlier attempt followed go back to the workflow unrun.
func (r *batchRun) failAll(cause string) (crawl.BatchResult, error) {
	for _, i := range r.cp.todo() {
		if k := r.cp.lane(i); i >= r.own {
			step := r.b.StepIdx
			if k > 0 {
				step = r.b.Downstream[k-1].StepIdx
			}
			r.cp.handBack(i, crawl.Routed{Step: step, Input: r.b.Work[i].Input})
			continue
		}
		r.cp.finish(outcome{Index: i, Err: cause, Class: crawl.CauseConfig, Permanent: true}, 0)
	}
	return r.a.summarize(r.ctx, r.b, r.cp, nil, nil)
}

// stepFetcher applies what the chain and the task declared to every request a task
// makes: the chain's `robots: false` and `middlewares:`, the step's `politeness:` and
// the task's per-host rate and concurrency limits, and the resources it needs (see resources.go).
type stepFetcher struct {
	cost         *batchCost // bytes fetched, for the task's learned needs
	f            crawl.Fetcher
	spec         crawl.TaskSpec
	ignoreRobots bool
	politeness   *crawl.Politeness // the step's (with the task's limits as defaults)
	archive      fetch.Recorder    // keeps the step's exchanges (`archive:`); nil: none
	resources
}

func (s stepFetcher) Fetch(ctx context.Context, req *crawl.Request) (*crawl.Response, error) {
	if s.f == nil {
		return nil, errors.New("this worker has no HTTP fetcher configured")
	}
	cp := *req
	cp.IgnoreRobots = cp.IgnoreRobots || s.ignoreRobots
	if cp.RateLimit == 0 {
		cp.RateLimit = s.spec.RateLimit
	}
	if cp.HostConcurrency == 0 {
		cp.HostConcurrency = s.spec.HostConcurrency
	}
	if cp.Politeness == nil {
		cp.Politeness = s.politeness
	}
	ctx, err := s.lend(ctx)
	if err != nil {
		return nil, err
	}
	if s.archive != nil {
		ctx = fetch.WithRecorder(ctx, s.archive)
	}
	resp, err := s.f.Fetch(ctx, &cp)
	if resp != nil && s.cost != nil {
		s.cost.bytes.Add(int64(len(resp.Body)))
	}
	return resp, err
}
