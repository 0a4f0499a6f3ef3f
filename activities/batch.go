// Package activities holds Trawler's Temporal activities. RunBatch runs one step's task
// over one batch of inputs: bounded concurrency, a timeout per input, an outcome per
// input (a failing input never fails the batch), items stored in the step's sinks, and
// heartbeats that let a retried batch skip what is already stored.
package activities

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"

	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"trawler/crawl"
	"trawler/dedup"
	"trawler/external"
	"trawler/internal/affinity"
	"trawler/internal/monitor"
	"trawler/internal/quota"
	"trawler/storage"
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
	// Sites registers the site queues of steps with an affinity; nil: no Redis.
	Sites *affinity.Registry
	// Sources serves steps marked `shared` from one fetch per interval; nil: every
	// step fetches for itself.
	Sources *SharedSources
	// Monitor records pages per minute for fleet-wide rates; nil: metrics only.
	Monitor *monitor.Recorder
	Log     *slog.Logger
	// FlushEvery is how many finished inputs are stored (and heartbeated) together
	// (default 10): smaller means less redone work after a crash, larger fewer writes.
	FlushEvery int
	once       sync.Once
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
	Out          []crawl.Routed `json:"out,omitempty"`
	Err          string         `json:"err,omitempty"`
	Class        crawl.Cause    `json:"cls,omitempty"`
	Permanent    bool           `json:"perm,omitempty"`
	RetryAfter   time.Duration  `json:"ra,omitempty"`
	waiting      error          // the input waits for a dependency (a pool item, Redis)
	back         bool           // a followed input handed back to the workflow unrun
	quota        string         // the input was not run: a budget ran out (why)
	input        crawl.Input
	result       crawl.Result // until stored
	// set once the item pipeline has judged the input's items (dedup verdicts, budget),
	// so a write retried during an outage neither leases nor judges them twice
	judged  bool
	kept    []crawl.Item
	stages  []string // see wrote
	dropped []string // keys of items the budget kept from being stored
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
	})
	task, ok := a.Registry.Get(b.Step.Task)
	if !ok {
		// A chain was validated against a registry this worker does not share: every
		// input fails with the reason instead of the batch failing forever.
		return a.failAll(ctx, b, fmt.Sprintf("task %s is not registered on this worker (it has: %v); deploy a worker that includes the site package", b.Step.Task, a.Registry.Names()))
	}
	// Resume: what an earlier attempt checkpointed is already stored, and the inputs it
	// took over from its own outputs are the batch's too.
	began := time.Now()
	cp := newCheckpointer(ctx, len(b.Work))
	own := len(b.Work)
	b.Work = append(slices.Clip(b.Work), cp.sum.Followed...)
	sinks := make([]storage.Sink, 0, len(b.Step.Store))
	for _, name := range b.Step.Store {
		s, err := a.Sinks.Get(name)
		if err != nil {
			return a.waitOut(ctx, b, cp, nil, nil, crawl.Dependency("store "+name, err))
		}
		sinks = append(sinks, s)
	}

	cost := startCost()
	defer running.Add(-1)
	fetcher, err := a.stepFetcher(task.Spec(), b)
	if err != nil {
		return a.failAll(ctx, b, err.Error())
	}
	fetcher.cost = cost
	env := &crawl.Env{
		Fetcher: fetcher, Log: a.Log.With("chain", b.Chain, "step", b.Step.ID, "run", b.RunID),
		Params: b.Step.Params, Chain: b.Chain, Step: b.Step.ID, RunID: b.RunID, Tenant: b.Tenant,
	}
	if p, ok := task.(crawl.Preparer); ok {
		// The task compiles its params once for the whole batch.
		prepared, err := p.Prepare(b.Step.Params)
		if err != nil {
			return a.failAll(ctx, b, err.Error())
		}
		env.Prepared = prepared
	}
	var budget *batchQuota
	if err := a.hold(ctx, b, cp, nil, func() (err error) {
		budget, err = a.quotaFor(ctx, b)
		return crawl.Dependency("redis (quota)", err)
	}); err != nil {
		return a.waitOut(ctx, b, cp, nil, nil, err)
	}
	defer budget.release(ctx, a.Log)
	// The inputs still to run are listed before anything starts: the checkpoint belongs
	// to the collecting loop below from here on.
	todo := cp.todo()
	// Stopping the run context stops admitting inputs and cancels those running: the
	// batch gives up on an outage and hands the rest back.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	// The queue holds the inputs to run: the batch's own, then those it follows. It
	// never blocks a send, so the collector below can feed it while it drains results.
	type queued struct {
		i int
		w crawl.Work
	}
	queue := make(chan queued, len(todo)+max(b.Follow-len(cp.sum.Followed), 0))
	for _, i := range todo {
		queue <- queued{i, b.Work[i]}
	}
	outstanding := len(todo) // queued or running, not yet collected
	queueOpen := true
	closeQueue := func() {
		if queueOpen {
			queueOpen = false
			close(queue)
		}
	}
	if outstanding == 0 {
		closeQueue()
	}
	results := make(chan outcome)
	run := b // the producer's view; the collector appends followed inputs to b.Work
	go func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, max(run.Step.Concurrency, 1))
		for q := range queue {
			if runCtx.Err() != nil {
				break
			}
			i, w := q.i, q.w
			if o, stop := budget.admit(runCtx, i); stop {
				if o.quota == "" && run.Outages {
					// Redis failed, not the input: it waits instead of spending a retry.
					o = outcome{Index: i, waiting: crawl.Dependency("redis (quota)", errors.New(o.Err))}
				}
				results <- o
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-runCtx.Done():
			}
			if runCtx.Err() != nil {
				break
			}
			if i >= own && time.Since(began) >= run.FollowFor {
				// A followed input that could not start within the follow window goes
				// back to the workflow, so the batch ends within its time limit.
				<-sem
				results <- outcome{Index: i, back: true, input: w.Input}
				continue
			}
			wg.Add(1)
			go func(i int, w crawl.Work) {
				defer func() { <-sem; wg.Done() }()
				began := time.Now()
				o := a.runOne(runCtx, task, env, run, i, w)
				cost.wall.Add(int64(time.Since(began)))
				results <- o
			}(i, w)
		}
		wg.Wait()
		close(results)
	}()

	// Store finished inputs in groups, then checkpoint them as done, with the outputs
	// for this very step that the batch follows itself moved into its work.
	var pending []outcome
	followed := len(cp.sum.Followed)
	following := func() bool {
		return followed < b.Follow && time.Since(began) < b.FollowFor && runCtx.Err() == nil &&
			(b.FollowHold <= 0 || len(cp.sum.Out) < b.FollowHold)
	}
	// follow takes an output for this step into the batch's own work, if the batch still
	// follows and has a free slot for it: a wider fan-out goes back to the workflow, so
	// the step's other batches share it.
	follow := func(in crawl.Input) bool {
		if !following() || outstanding >= max(b.Step.Concurrency, 1) {
			return false
		}
		w := crawl.Work{Input: in}
		b.Work = append(b.Work, w)
		queue <- queued{cp.follow(w), w}
		followed++
		outstanding++
		return true
	}
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		if err := a.store(ctx, b, sinks, pending, budget); err != nil {
			return err
		}
		for _, o := range pending {
			o.Out = slices.DeleteFunc(o.Out, func(r crawl.Routed) bool { return r.Step == b.StepIdx && follow(r.Input) })
			cp.finish(o)
		}
		pending = pending[:0]
		return nil
	}
	// flushHeld rides out a short outage of a store or Redis inside the batch; a long
	// one stops the batch so the run can wait it out (Batch.Outages) — unless some sink
	// already holds the group's items: giving up then would write them twice (an
	// appending sink keeps both copies), so the batch holds on until the group is
	// stored and recorded.
	committed := func() bool { return len(pending) > 0 && len(pending[0].stages) > 0 }
	flushHeld := func() error { return a.hold(ctx, b, cp, committed, flush) }
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var flushErr error
	var waiting []outcome
loop:
	for {
		select {
		case o, ok := <-results:
			if !ok {
				break loop
			}
			outstanding--
			switch {
			case o.waiting != nil:
				waiting = append(waiting, o)
			case o.quota != "":
				cp.unrun[o.Index] = true // left unrun; the result says how many and why
			case o.back:
				cp.handBack(o.Index, crawl.Routed{Step: b.StepIdx, Input: o.input})
			case flushErr != nil:
				// not stored: it goes back with the rest
			default:
				pending = append(pending, o)
				// An input with outputs the batch may follow is stored at once: its next
				// page is the critical path.
				hop := following() && len(o.result.Next) > 0
				if hop || len(pending) >= a.FlushEvery || outstanding == 0 {
					if flushErr = flushHeld(); flushErr != nil {
						stopRun()
					}
					cp.heartbeat(false)
				}
			}
			if outstanding == 0 || flushErr != nil {
				closeQueue() // nothing more will be followed
			}
		case <-tick.C:
			if flushErr == nil {
				if flushErr = flushHeld(); flushErr != nil {
					stopRun()
				}
			}
			cp.heartbeat(false)
		}
	}
	closeQueue()
	if flushErr == nil {
		flushErr = flushHeld()
	}
	if err := ctx.Err(); err != nil {
		return crawl.BatchResult{}, err
	}
	if flushErr != nil {
		return a.waitOut(ctx, b, cp, budget, waiting, flushErr)
	}
	if len(waiting) > 0 {
		return a.waitOut(ctx, b, cp, budget, waiting, waiting[0].waiting)
	}
	res, err := a.summarize(ctx, b, cp)
	res.Followed = followed
	budget.report(&res)
	if err == nil {
		a.observe(ctx, b, res)
	}
	a.recordCost(ctx, b.Step.Task, res.Pages, cost)
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
func (a *Activities) waitOut(ctx context.Context, b crawl.Batch, cp *checkpointer, budget *batchQuota, waiting []outcome, cause error) (crawl.BatchResult, error) {
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
	res, err := a.summarize(ctx, b, cp)
	if err != nil {
		return crawl.BatchResult{}, err
	}
	budget.report(&res)
	for i, w := range b.Work {
		if !cp.done[i] && !cp.unrun[i] {
			res.Waiting = append(res.Waiting, w)
		}
	}
	res.Outage = &crawl.Outage{Dependency: dep, Cause: cause.Error()}
	a.Log.Warn("batch waits for a dependency", "chain", b.Chain, "step", b.Step.ID, "dependency", dep, "waiting", len(res.Waiting), "err", cause)
	return res, nil
}

// observe counts a finished batch in the metrics and the fleet-wide rates.
func (a *Activities) observe(ctx context.Context, b crawl.Batch, res crawl.BatchResult) {
	monitor.Batch(b, res)
	if a.Monitor != nil {
		if err := a.Monitor.Pages(ctx, b.Tenant, b.Chain, res.Pages); err != nil {
			a.Log.Warn("record pages per minute", "err", err)
		}
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
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w (step timeout %s)", err, b.Step.Timeout)
		}
		if external.IsWaiting(err) {
			return outcome{Index: i, waiting: err}
		}
		return outcome{Index: i, Err: fmt.Sprintf("%s: %v", w.Input.Describe(), err), Class: crawl.CauseOf(err), Permanent: crawl.IsPermanent(err), RetryAfter: crawl.RetryDelay(err)}
	}
	now := time.Now().UTC()
	biz := b.Step.Task
	for k := range res.Items {
		it := &res.Items[k]
		if it.Key == "" {
			return outcome{Index: i, Err: fmt.Sprintf("%s: task %s returned an item without a key; set Item.Key to a stable natural id", w.Input.Describe(), b.Step.Task), Class: crawl.CauseParse, Permanent: true}
		}
		// The id is a hash of run and key: every attempt of the input gives its items
		// the same ids, so a copy a failed write left in a store is the same record.
		it.ID = itemID(b.RunID, it.Key)
		it.Biz = biz
		it.TS = now
		it.Hash = contentHash(it.Data)
		it.Chain, it.RunID, it.Tenant = b.Chain, b.RunID, b.Tenant
	}
	return outcome{Index: i, OK: true, Skipped: res.Skipped, input: w.Input, result: res}
}

// store runs the item pipeline over a group of finished inputs: judge (dedup verdicts,
// the item budget, routing the outputs), write each sink, record the dedup entries.
// Dedup entries are recorded only after the items are stored, so a crash in between
// makes them new again rather than lost. When a step fails part-way, calling store again
// with the same group resumes where it stopped: judged inputs keep their verdicts and
// budget, sinks already written are not written twice.
func (a *Activities) store(ctx context.Context, b crawl.Batch, sinks []storage.Sink, group []outcome, budget *batchQuota) error {
	dd := a.Dedup != nil && b.Step.Dedup != crawl.DedupOff
	ns := b.Tenant + ":" + b.Step.Task
	if err := a.judge(ctx, b, dd, ns, sinks, group, budget); err != nil {
		return err
	}
	var items []crawl.Item
	for _, o := range group {
		items = append(items, o.kept...)
	}
	if len(items) > 0 {
		for _, s := range sinks {
			if group[0].wrote(s.Name()) {
				continue
			}
			if err := s.Write(ctx, items); err != nil {
				return crawl.Dependency("store "+s.Name(), fmt.Errorf("store %d items of step %s in %s: %w", len(items), b.Step.ID, s.Name(), err))
			}
			group[0].markWritten(s.Name())
		}
	}
	if !dd || group[0].wrote(recordedMark) {
		return nil
	}
	// Every item judged is recorded as seen (unchanged ones move their last-seen time),
	// except those over budget: they were not stored.
	var entries []dedup.Entry
	for _, o := range group {
		for _, it := range o.result.Items {
			if !slices.Contains(o.dropped, it.Key) {
				entries = append(entries, dedup.Entry{Key: it.Key, Content: it.Hash})
			}
		}
	}
	if len(entries) > 0 {
		if err := a.Dedup.Record(ctx, ns, entries); err != nil {
			return crawl.Dependency("redis (dedup)", err)
		}
	}
	group[0].markWritten(recordedMark)
	return nil
}

// recordedMark is the stage name of the dedup record in a group's written set.
const recordedMark = "\x00dedup"

// judge decides, once per input, which of its items are stored: dedup drops unchanged
// ones (and changed ones when the step stores only new items), a key twice in one group
// is stored once, and the item budget keeps what it can pay for. Then it routes the
// input's outputs to the consuming steps.
func (a *Activities) judge(ctx context.Context, b crawl.Batch, dd bool, ns string, sinks []storage.Sink, group []outcome, budget *batchQuota) error {
	var entries []dedup.Entry
	if dd {
		for _, o := range group {
			for _, it := range o.result.Items {
				entries = append(entries, dedup.Entry{Key: it.Key, Content: it.Hash})
			}
		}
	}
	var verdicts []dedup.Verdict
	if len(entries) > 0 && !group[len(group)-1].judged {
		var err error
		if verdicts, err = a.Dedup.Lookup(ctx, ns, entries); err != nil {
			return crawl.Dependency("redis (dedup)", err)
		}
	}
	seen := map[string]bool{} // a key twice in one group is stored once
	k := 0
	for p := range group {
		o := &group[p]
		if o.judged {
			k += len(o.result.Items)
			for _, it := range o.result.Items {
				seen[it.Key] = true
			}
			continue
		}
		var kept []crawl.Item
		unchanged := 0
		for _, it := range o.result.Items {
			keep := !seen[it.Key]
			if dd {
				switch verdicts[k].State {
				case dedup.Unchanged:
					keep = false
				case dedup.Changed:
					keep = keep && b.Step.Dedup == crawl.DedupChanged
				}
				k++
			}
			seen[it.Key] = true
			if keep {
				kept = append(kept, it)
			} else {
				unchanged++
			}
		}
		if len(sinks) > 0 {
			allowed, err := budget.keep(ctx, kept)
			if err != nil {
				return crawl.Dependency("redis (quota)", err)
			}
			// Items over budget are not stored, so they are not recorded as seen either.
			for _, it := range kept[len(allowed):] {
				o.dropped = append(o.dropped, it.Key)
			}
			kept = allowed
		}
		o.kept, o.Unchanged, o.Items = kept, unchanged, len(kept)
		o.Out, o.DepthLimited = b.Step.Route(o.input, crawl.Result{Items: kept, Next: o.result.Next})
		o.judged = true
	}
	return nil
}

// wrote and markWritten keep, on a group's first outcome, the pipeline stages (sinks,
// the dedup record) the group has passed, so a retried write skips them.
func (o *outcome) wrote(stage string) bool  { return slices.Contains(o.stages, stage) }
func (o *outcome) markWritten(stage string) { o.stages = append(o.stages, stage) }

// summarize turns a batch's finished inputs into its result, deciding for each failure
// whether it is retried or given up on (and recorded).
func (a *Activities) summarize(ctx context.Context, b crawl.Batch, cp *checkpointer) (crawl.BatchResult, error) {
	s := cp.sum
	res := crawl.BatchResult{Pages: s.Pages, Items: s.Items, Skipped: s.Skipped, Unchanged: s.Unchanged, DepthLimited: s.DepthLimited, Out: s.Out}
	failed := slices.Clone(s.Failed)
	slices.SortFunc(failed, func(x, y outcome) int { return x.Index - y.Index })
	for _, o := range failed {
		w := b.Work[o.Index]
		attempts := w.Attempt + 1
		if o.Permanent || attempts > b.Step.Retries {
			res.Failed = append(res.Failed, crawl.Failure{Step: b.Step.ID, Input: w.Input, Attempts: attempts, Cause: o.Err, Class: o.Class}.Redacted())
			continue
		}
		res.Retry = append(res.Retry, crawl.Work{Input: w.Input, Attempt: attempts, Cause: o.Err, Class: o.Class})
		res.RetryAfter = max(res.RetryAfter, o.RetryAfter)
	}
	if len(res.Failed) > 0 && a.Failures != nil {
		if err := a.Failures.WriteFailures(ctx, b.RunID, res.Failed); err != nil {
			return crawl.BatchResult{}, crawl.Dependency("failure log", fmt.Errorf("record %d failures of step %s: %w", len(res.Failed), b.Step.ID, err))
		}
	}
	return res, nil
}

func (a *Activities) failAll(ctx context.Context, b crawl.Batch, cause string) (crawl.BatchResult, error) {
	cp := &checkpointer{n: len(b.Work), done: map[int]bool{}}
	for i := range b.Work {
		cp.finish(outcome{Index: i, Err: cause, Class: crawl.CauseConfig, Permanent: true})
	}
	return a.summarize(ctx, b, cp)
}

// contentHash is a short, stable hash of an item's fields (encoding/json sorts map keys).
func contentHash(data map[string]any) string {
	b, _ := json.Marshal(data)
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:8])
}

// stepFetcher applies what the chain and the task declared to every request a task
// makes: the chain's `robots: false` and `middlewares:`, the task's per-host rate and
// concurrency limits, and the resources it needs (see resources.go).
type stepFetcher struct {
	cost         *batchCost // bytes fetched, for the task's learned needs
	f            crawl.Fetcher
	spec         crawl.TaskSpec
	ignoreRobots bool
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
	ctx, err := s.lend(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.f.Fetch(ctx, &cp)
	if resp != nil && s.cost != nil {
		s.cost.bytes.Add(int64(len(resp.Body)))
	}
	return resp, err
}
