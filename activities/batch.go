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
	"net/url"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"trawler/affinity"
	"trawler/crawl"
	"trawler/dedup"
	"trawler/external"
	"trawler/monitor"
	"trawler/quota"
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

// outcome is what became of one input; stored outcomes are heartbeated so a retried
// batch reuses them.
type outcome struct {
	Index        int            `json:"i"`
	OK           bool           `json:"ok,omitempty"`
	Items        int            `json:"items,omitempty"`
	Skipped      int            `json:"skipped,omitempty"`
	Unchanged    int            `json:"unchanged,omitempty"`
	DepthLimited int            `json:"dl,omitempty"`
	Out          []crawl.Routed `json:"out,omitempty"`
	Err          string         `json:"err,omitempty"`
	Permanent    bool           `json:"perm,omitempty"`
	RetryAfter   time.Duration  `json:"ra,omitempty"`
	// Sending marks an input whose items were being written when the heartbeat was
	// recorded, with their ids by key: a retried batch runs the input again and gives
	// its items the same ids, so a sink that got part of the failed write (Kafka keeps
	// every copy) holds repeats that consumers drop by id, not new records.
	Sending bool             `json:"sending,omitempty"`
	IDs     map[string]int64 `json:"ids,omitempty"`
	waiting error            // the input waits for a pool item (external.WaitError)
	quota   string           // the input was not run: a budget ran out (why)
	input   crawl.Input
	result  crawl.Result // until stored
}

// RunBatch is the activity; its registered name is workflows.RunBatchActivity.
func (a *Activities) RunBatch(ctx context.Context, b crawl.Batch) (crawl.BatchResult, error) {
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
	sinks := make([]storage.Sink, 0, len(b.Step.Store))
	for _, name := range b.Step.Store {
		s, err := a.Sinks.Get(name)
		if err != nil {
			return crawl.BatchResult{}, err
		}
		sinks = append(sinks, s)
	}

	// Resume: outcomes heartbeated by an earlier attempt are already stored; inputs it
	// was still sending keep their item ids.
	done := map[int]outcome{}
	sending := map[int]outcome{}
	if activity.HasHeartbeatDetails(ctx) {
		var prev []outcome
		if err := activity.GetHeartbeatDetails(ctx, &prev); err == nil {
			for _, o := range prev {
				if o.Sending {
					sending[o.Index] = o
				} else {
					done[o.Index] = o
				}
			}
		}
	}
	reuse := make(map[int]map[string]int64, len(sending)) // read by the input goroutines
	for i, o := range sending {
		reuse[i] = o.IDs
	}
	// A sink that keeps every copy it is sent needs the ids recorded before each write,
	// the last one included.
	logSink := false
	for _, s := range sinks {
		if _, ok := s.(storage.AtLeastOnce); ok {
			logSink = true
		}
	}
	heartbeat := func() {
		details := sortedOutcomes(done)
		for _, o := range sortedOutcomes(sending) {
			if _, ok := done[o.Index]; !ok {
				details = append(details, o)
			}
		}
		activity.RecordHeartbeat(ctx, details)
	}

	cost := startCost()
	defer running.Add(-1)
	fetcher := a.stepFetcher(task.Spec(), b)
	fetcher.cost = cost
	env := &crawl.Env{
		Fetcher: fetcher, Log: a.Log.With("chain", b.Chain, "step", b.Step.ID, "run", b.RunID),
		Params: b.Step.Params, Chain: b.Chain, Step: b.Step.ID, RunID: b.RunID, Tenant: b.Tenant,
	}
	budget, err := a.quotaFor(ctx, b)
	if err != nil {
		return crawl.BatchResult{}, err
	}
	defer budget.release(ctx, a.Log)
	// The inputs still to run are listed before anything starts: `done` belongs to the
	// collecting loop below from here on.
	var todo []int
	for i := range b.Work {
		if _, ok := done[i]; !ok {
			todo = append(todo, i)
		}
	}
	results := make(chan outcome)
	go func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, max(b.Step.Concurrency, 1))
		for _, i := range todo {
			w := b.Work[i]
			if o, stop := budget.admit(ctx, i); stop {
				results <- o
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				break
			}
			wg.Add(1)
			go func(i int, w crawl.Work) {
				defer func() { <-sem; wg.Done() }()
				began := time.Now()
				o := a.runOne(ctx, task, env, b, i, w, reuse[i])
				cost.wall.Add(int64(time.Since(began)))
				results <- o
			}(i, w)
		}
		wg.Wait()
		close(results)
	}()

	// Store finished inputs in groups, then heartbeat them as done.
	var pending []outcome
	// The last flush does not heartbeat: the batch result follows at once and a
	// heartbeat would only add a round trip to the server.
	flush := func(last bool) error {
		if len(pending) == 0 {
			if !last {
				heartbeat() // still alive, nothing new
			}
			return nil
		}
		if !last || logSink {
			// The ids go out before the items: if the write fails, the retried batch
			// reuses them. Within the SDK's throttle window this costs no round trip.
			for _, o := range pending {
				if o.OK && len(o.result.Items) > 0 {
					ids := make(map[string]int64, len(o.result.Items))
					for _, it := range o.result.Items {
						ids[it.Key] = it.ID
					}
					sending[o.Index] = outcome{Index: o.Index, Sending: true, IDs: ids}
				}
			}
			heartbeat()
		}
		if err := a.store(ctx, b, sinks, pending, budget); err != nil {
			return err
		}
		for _, o := range pending {
			o.result = crawl.Result{}
			done[o.Index] = o
			delete(sending, o.Index)
		}
		pending = pending[:0]
		if !last {
			heartbeat()
		}
		return nil
	}
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
			if o.waiting != nil {
				waiting = append(waiting, o)
				continue
			}
			if o.quota != "" {
				continue // left unrun; the result says how many and why
			}
			pending = append(pending, o)
			if len(pending) >= a.FlushEvery && flushErr == nil {
				flushErr = flush(false)
			}
		case <-tick.C:
			if flushErr == nil {
				flushErr = flush(false)
			}
		}
	}
	if flushErr == nil {
		flushErr = flush(true)
	}
	if flushErr != nil {
		return crawl.BatchResult{}, flushErr // Temporal retries the batch; done outcomes are kept
	}
	if err := ctx.Err(); err != nil {
		return crawl.BatchResult{}, err
	}
	if len(waiting) > 0 {
		heartbeat() // what is done stays done when Temporal retries the batch
		return crawl.BatchResult{}, waitingFor(waiting, len(b.Work))
	}
	res, err := a.summarize(ctx, b, done)
	budget.report(&res)
	if err == nil {
		a.observe(ctx, b, res)
	}
	a.recordCost(ctx, b.Step.Task, res.Pages, cost)
	return res, err
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

// runOne runs one input. ids are the item ids an earlier attempt of the batch gave this
// input's items (by key), if it was sending them when it failed.
func (a *Activities) runOne(ctx context.Context, task crawl.Task, env *crawl.Env, b crawl.Batch, i int, w crawl.Work, ids map[string]int64) (o outcome) {
	o.Index = i
	ictx, cancel := context.WithTimeout(ctx, b.Step.Timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			a.Log.Error("task panicked", "task", b.Step.Task, "input", w.Input.Describe(), "panic", p, "stack", string(debug.Stack()))
			o = outcome{Index: i, Err: fmt.Sprintf("task %s panicked: %v", b.Step.Task, p), Permanent: true}
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
		err = fmt.Errorf("timed out after %s", b.Step.Timeout)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w (step timeout %s)", err, b.Step.Timeout)
		}
		if external.IsWaiting(err) {
			return outcome{Index: i, waiting: err}
		}
		return outcome{Index: i, Err: fmt.Sprintf("%s: %v", w.Input.Describe(), err), Permanent: crawl.IsPermanent(err), RetryAfter: crawl.RetryDelay(err)}
	}
	now := time.Now().UTC()
	biz := b.Step.Task
	for k := range res.Items {
		it := &res.Items[k]
		if it.Key == "" {
			return outcome{Index: i, Err: fmt.Sprintf("%s: task %s returned an item without a key; set Item.Key to a stable natural id", w.Input.Describe(), b.Step.Task), Permanent: true}
		}
		if id, ok := ids[it.Key]; ok {
			it.ID = id
		} else {
			it.ID = itemID(b.RunID, it.Key)
		}
		it.Biz = biz
		it.TS = now
		it.Hash = contentHash(it.Data)
		it.Chain, it.RunID, it.Tenant = b.Chain, b.RunID, b.Tenant
	}
	return outcome{Index: i, OK: true, Skipped: res.Skipped, input: w.Input, result: res}
}

// store writes the items of finished inputs to the step's sinks — only the new or
// changed ones when the step deduplicates — and routes each input's outputs to the
// consuming steps. Dedup entries are recorded only after the items are stored, so a
// crash in between makes them new again rather than lost.
func (a *Activities) store(ctx context.Context, b crawl.Batch, sinks []storage.Sink, pending []outcome, budget *batchQuota) error {
	dd := a.Dedup != nil && b.Step.Dedup != crawl.DedupOff
	var entries []dedup.Entry
	if dd {
		for _, o := range pending {
			for _, it := range o.result.Items {
				entries = append(entries, dedup.Entry{Key: it.Key, Content: it.Hash})
			}
		}
	}
	ns := b.Tenant + ":" + b.Step.Task
	var verdicts []dedup.Verdict
	if len(entries) > 0 {
		var err error
		if verdicts, err = a.Dedup.Lookup(ctx, ns, entries); err != nil {
			return err
		}
	}
	var items []crawl.Item
	seen := map[string]bool{}    // a key twice in one group is stored once
	dropped := map[string]bool{} // over budget: not stored, so not recorded as seen
	k := 0
	for p := range pending {
		o := &pending[p]
		var kept []crawl.Item
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
				o.Unchanged++
			}
		}
		if len(sinks) > 0 {
			allowed, err := budget.keep(ctx, kept)
			if err != nil {
				return err
			}
			for _, it := range kept[len(allowed):] {
				dropped[it.Key] = true
			}
			kept = allowed
		}
		o.Items = len(kept)
		o.Out, o.DepthLimited = b.Step.Route(o.input, crawl.Result{Items: kept, Next: o.result.Next})
		items = append(items, kept...)
	}
	if len(items) > 0 {
		for _, s := range sinks {
			if err := s.Write(ctx, items); err != nil {
				return fmt.Errorf("store %d items of step %s in %s: %w", len(items), b.Step.ID, s.Name(), err)
			}
		}
	}
	if len(dropped) > 0 {
		entries = slices.DeleteFunc(entries, func(e dedup.Entry) bool { return dropped[e.Key] })
	}
	if len(entries) > 0 {
		if err := a.Dedup.Record(ctx, ns, entries); err != nil {
			return err
		}
	}
	return nil
}

// summarize turns per-input outcomes into the batch result, deciding for each failure
// whether it is retried or given up on (and recorded).
func (a *Activities) summarize(ctx context.Context, b crawl.Batch, done map[int]outcome) (crawl.BatchResult, error) {
	var res crawl.BatchResult
	for _, o := range sortedOutcomes(done) {
		w := b.Work[o.Index]
		if o.OK {
			res.Pages++
			res.Items += o.Items
			res.Skipped += o.Skipped
			res.Unchanged += o.Unchanged
			res.DepthLimited += o.DepthLimited
			res.Out = append(res.Out, o.Out...)
			continue
		}
		attempts := w.Attempt + 1
		if o.Permanent || attempts > b.Step.Retries {
			res.Failed = append(res.Failed, crawl.Failure{Step: b.Step.ID, Input: w.Input, Attempts: attempts, Cause: o.Err})
			continue
		}
		res.Retry = append(res.Retry, crawl.Work{Input: w.Input, Attempt: attempts, Cause: o.Err})
		res.RetryAfter = max(res.RetryAfter, o.RetryAfter)
	}
	if len(res.Failed) > 0 && a.Failures != nil {
		if err := a.Failures.WriteFailures(ctx, b.RunID, res.Failed); err != nil {
			return crawl.BatchResult{}, fmt.Errorf("record %d failures of step %s: %w", len(res.Failed), b.Step.ID, err)
		}
	}
	return res, nil
}

func (a *Activities) failAll(ctx context.Context, b crawl.Batch, cause string) (crawl.BatchResult, error) {
	done := map[int]outcome{}
	for i := range b.Work {
		done[i] = outcome{Index: i, Err: cause, Permanent: true}
	}
	return a.summarize(ctx, b, done)
}

func sortedOutcomes(m map[int]outcome) []outcome {
	out := make([]outcome, 0, len(m))
	for _, o := range m {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// contentHash is a short, stable hash of an item's fields (encoding/json sorts map keys).
func contentHash(data map[string]any) string {
	b, _ := json.Marshal(data)
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:8])
}

// stepFetcher applies what the chain and the task declared to every request a task
// makes: the chain's `robots: false`, the task's per-host rate and concurrency limits,
// and the resources it needs (see resources.go).
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
	start := time.Now()
	resp, err := s.f.Fetch(ctx, &cp)
	if resp != nil && s.cost != nil {
		s.cost.bytes.Add(int64(len(resp.Body)))
	}
	if u, perr := url.Parse(cp.URL); perr == nil && u.Host != "" {
		monitor.FetchSeconds.WithLabelValues(u.Host).Observe(time.Since(start).Seconds())
	}
	return resp, err
}
