// Package engine connects the pieces a Trawler process runs: a Temporal worker with the
// chain workflow and the batch activity registered, and the client calls that start,
// watch and summarize chain runs. The CLI and the end-to-end tests both use it, so what
// the tests prove is what users run.
package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/fetch/render"
	"github.com/trawlerhq/trawler/internal/activities"
	"github.com/trawlerhq/trawler/internal/affinity"
	"github.com/trawlerhq/trawler/internal/capacity"
	"github.com/trawlerhq/trawler/internal/dedup"
	"github.com/trawlerhq/trawler/internal/external"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/polite"
	"github.com/trawlerhq/trawler/internal/quota"
	"github.com/trawlerhq/trawler/internal/recrawl"
	"github.com/trawlerhq/trawler/internal/redisurl"
	"github.com/trawlerhq/trawler/internal/seen"
	"github.com/trawlerhq/trawler/internal/storage"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/stream"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// WorkerOptions configure a worker process.
type WorkerOptions struct {
	TaskQueue string // default workflows.DefaultTaskQueue
	OutDir    string // where the jsonl sink writes
	Registry  *crawl.Registry
	Fetch     fetch.Options
	// MaxBatches bounds batch activities running at once in this process (default 16).
	MaxBatches int
	// Identity names the worker in run histories (default: pid@host).
	Identity string
	// ResourceTuned lets the worker's CPU and memory decide how many batches run at
	// once (1 to MaxBatches), aiming at TargetCPU and TargetMem (0.8 each by default).
	ResourceTuned        bool
	TargetCPU, TargetMem float64
	// Capacity is the CPU (cores) and memory (MB) this worker places batches in: it
	// takes a batch only while what is free covers the batch's need learned from its
	// task (see placement.go). Zero: the machine's cores and memory, placing by needs
	// only when ResourceTuned (else every batch is taken, as slots allow).
	Capacity capacity.Resources
	// ProbeEvery is how often the worker probes the sites of steps with an affinity
	// (default 5 s).
	ProbeEvery time.Duration
	// Clock is what recrawl plans are made against (default the wall clock); the
	// recrawl benchmark and its tests run a simulated one.
	Clock func() time.Time
	// Workflow replaces the chain workflow this worker runs (default
	// workflows.ChainWorkflow); upgrade tests run workflows.WorkflowBefore(change).
	Workflow func(workflow.Context, workflows.ChainInput) (*workflows.Summary, error)
	// Redis is the address dedup keeps its buckets in (host:port or any form
	// internal/redisurl reads: redis://, rediss://, Sentinel, Cluster); empty turns
	// dedup off for this worker (every item is stored), which it says when it starts.
	// RedisAuth carries the password and CA file that stay out of the address.
	Redis     string
	RedisAuth redisurl.Options
	// NoFrontier turns the run's seen-set off: with Redis, each step fetches a URL at most
	// once per run (docs/frontier.md); with this, every input handed to a step runs,
	// as if every step said `revisit: true`.
	NoFrontier bool
	// Kafka are the brokers of the kafka sink and Mongo the URI of the mongo sink;
	// empty leaves the sink off this worker (a step storing to it fails its batches
	// with the reason). Hot tunes both.
	Kafka []string
	Mongo string
	ES    string // URL of the es sink's Elasticsearch
	// Auth are the stores' credentials and TLS settings.
	Auth StoreAuth
	// HBase is the ZooKeeper quorum of the hbase sink (every item version); empty: no
	// hbase sink.
	HBase string
	// File configures the file sink; an empty Dir leaves it off.
	File FileOptions
	Hot  HotOptions
	Log  *slog.Logger

	// Browser gives the worker a pool of headless browsers for the steps that render
	// pages; nil: none, and the worker does not poll their queue
	// (workflows.RenderQueue).
	Browser *render.Options
}

// Worker is a running Temporal worker with Trawler's workflow and activities.
type Worker struct {
	worker.Worker
	Sinks storage.Set
	fleet *polite.Fleet // host budgets shared through Redis; nil without it
	JSONL *jsonl.Sink
	// Identity names the worker in histories and in `trawler status`.
	Identity  string
	monitor   *monitor.Recorder // nil without Redis
	sites     *siteWorkers      // nil without Redis
	taskQueue string
	stopLoops context.CancelFunc

	// renderer polls the render queue with the browser pool; nil without a browser.
	renderer worker.Worker
	browsers *render.Pool
	place    *placement
	slots    int
	registry *crawl.Registry // its tasks are announced in each heartbeat
}

// SiteQueues lists the site queues this worker polls now: those of steps with an
// affinity whose probe it passes, and the render queue when it has a browser.
func (w *Worker) SiteQueues() []string {
	var qs []string
	if w.renderer != nil {
		qs = append(qs, workflows.RenderQueue(w.taskQueue))
	}
	if w.sites != nil {
		qs = append(qs, w.sites.queues()...)
	}
	return qs
}

// Browsers is the worker's browser pool; nil when it has none.
func (w *Worker) Browsers() *render.Pool { return w.browsers }

// NewWorker builds (but does not start) a worker.
func NewWorker(c client.Client, o WorkerOptions) (*Worker, error) {
	if o.TaskQueue == "" {
		o.TaskQueue = workflows.DefaultTaskQueue
	}
	if o.Registry == nil {
		o.Registry = crawl.Default
	}
	if o.MaxBatches <= 0 {
		o.MaxBatches = 16
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = fmt.Sprintf("%d@%s", os.Getpid(), host)
	}
	setBuildID()
	if o.OutDir == "" {
		return nil, errors.New("worker needs an output directory for the jsonl sink (--out or --data)")
	}
	js, err := jsonl.Open(o.OutDir)
	if err != nil {
		return nil, err
	}
	sinks := storage.Set{"jsonl": js}
	if err := addHotSinks(sinks, SinkOptions{Kafka: o.Kafka, Mongo: o.Mongo, ES: o.ES, HBase: o.HBase, File: o.File, Auth: o.Auth, Registry: o.Registry, Hot: o.Hot, Log: o.Log}); err != nil {
		_ = sinks.Close()
		return nil, err
	}
	wo := worker.Options{
		MaxConcurrentActivityExecutionSize: o.MaxBatches,
		Identity:                           o.Identity,
		// More pollers than the SDK's two keep a freed slot from waiting on a poll
		// round trip when batches are short.
		MaxConcurrentActivityTaskPollers: 8,
		MaxConcurrentWorkflowTaskPollers: 4,
		// Workers may be killed at any moment; a short stop wait keeps restarts quick.
		WorkerStopTimeout: 5 * time.Second,
	}
	if o.ResourceTuned {
		t, err := resourceTuner(o.MaxBatches, cmp.Or(o.TargetCPU, 0.8), cmp.Or(o.TargetMem, 0.8))
		if err != nil {
			_ = sinks.Close()
			return nil, err
		}
		wo.Tuner, wo.MaxConcurrentActivityExecutionSize = t, 0
	}
	place := newPlacement(o.Identity, o.TaskQueue, o.Capacity, o.ResourceTuned, cmp.Or(o.TargetCPU, 0.8), cmp.Or(o.TargetMem, 0.8), o.Log)
	wo.Interceptors = append(wo.Interceptors, &placementInterceptor{p: place})
	w := worker.New(c, o.TaskQueue, wo)
	acts := &activities.Activities{Registry: o.Registry, Sinks: sinks, Failures: js, Log: o.Log}
	// One stream hub per worker: subscriptions of one source share its connection.
	hub := stream.NewHub()
	crawl.Provide(&acts.Services, stream.HubService, hub)
	var fleet *polite.Fleet
	if o.Redis != "" {
		rdb, err := redisurl.Open(o.Redis, o.RedisAuth)
		if err != nil {
			_ = sinks.Close()
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// Ping first: a refused password gets an error that says where it comes from.
		err = redisurl.Ping(ctx, rdb, o.Redis)
		var d *dedup.Deduper
		if err == nil {
			d, err = dedup.Open(ctx, rdb, dedup.Config{Log: o.Log})
		}
		if err == nil && !o.NoFrontier {
			acts.Seen, err = seen.Open(ctx, rdb, seen.Config{})
		}
		cancel()
		if err != nil {
			rdb.Close()
			_ = sinks.Close()
			return nil, err
		}
		acts.Dedup = d
		// Host budgets and robots.txt are the fleet's: every worker on this Redis
		// holds a host to one limit.
		fleet = polite.New(rdb, o.Identity)
		o.Fetch.Budgets, o.Fetch.Robots = fleet, polite.NewRobots(rdb)
		// Budgets are leased from the same Redis, shared by every worker, which also
		// keeps the fleet's rates and heartbeats.
		acts.Quotas = quota.New(rdb, 0)
		acts.Recrawl = recrawl.New(rdb, o.Clock)
		acts.Monitor = monitor.NewRecorder(rdb)
		place.rec = acts.Monitor
		hub.Record(rdb) // stream subscriptions, for `trawler status`
		acts.Sources = activities.NewSharedSources(rdb)
		acts.Sites = affinity.NewRegistry(rdb)
		// The same Redis keeps the resource pools tasks borrow from and farming fills.
		acts.Pools = external.NewPools(rdb, o.Log)
		for _, p := range acts.Pools.Sinks() {
			sinks[p.Name()] = p
		}
	} else {
		o.Log.Warn("no Redis configured (--redis / TRAWLER_REDIS): dedup is off on this worker, every item is stored, and host limits hold for this worker alone")
	}
	acts.Fetcher = fetch.New(o.Fetch)
	Register(w, acts, o.Workflow)
	ww := &Worker{fleet: fleet, taskQueue: o.TaskQueue, Worker: w, Sinks: sinks, JSONL: js, Identity: o.Identity, monitor: acts.Monitor, place: place, slots: o.MaxBatches, registry: o.Registry}
	if o.Browser != nil {
		if err := ww.addBrowser(c, acts, o); err != nil {
			_ = sinks.Close()
			return nil, err
		}
	}
	if acts.Sites != nil {
		ww.sites = &siteWorkers{c: c, acts: acts, registry: acts.Sites, base: o.TaskQueue, identity: o.Identity,
			slots: o.MaxBatches, every: cmp.Or(o.ProbeEvery, 5*time.Second), log: o.Log,
			hc: &http.Client{}, polling: map[string]worker.Worker{}, place: place}
	}
	return ww, nil
}

// Start starts polling, and beats every 5 s into Redis so `trawler status` shows the
// worker alive.
func (w *Worker) Start() error {
	if err := w.Worker.Start(); err != nil {
		return err
	}
	if w.renderer != nil {
		if err := w.renderer.Start(); err != nil {
			w.Worker.Stop()
			return err
		}
	}
	if w.monitor == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.stopLoops = cancel
	if w.sites != nil {
		go w.sites.run(ctx)
	}
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			_ = w.monitor.Beat(ctx, w.Identity, w.taskQueue, w.SiteQueues(), w.registry.Names(), &w.place.whole, w.slots)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// Register puts the chain workflow (wf, or workflows.ChainWorkflow when nil) and the
// batch activity on a worker.
func Register(w worker.Registry, acts *activities.Activities, wf func(workflow.Context, workflows.ChainInput) (*workflows.Summary, error)) {
	if wf == nil {
		wf = workflows.ChainWorkflow
	}
	w.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: workflows.ChainWorkflowName})
	RegisterBatches(w, acts)
	w.RegisterActivityWithOptions(acts.RegisterSites, activity.RegisterOptions{Name: workflows.RegisterSitesActivity})
	w.RegisterActivityWithOptions(acts.RecrawlDue, activity.RegisterOptions{Name: workflows.RecrawlDueActivity})
}

// RegisterBatches puts the batch activity on a worker under the name of every task the
// worker knows (runs name a step's batches after its task, so Temporal's UI and
// metrics show demo.story rather than one generic activity), and under RunBatch for runs
// started before that.
func RegisterBatches(w worker.ActivityRegistry, acts *activities.Activities) {
	w.RegisterActivityWithOptions(acts.RunBatch, activity.RegisterOptions{Name: workflows.RunBatchActivity})
	for _, name := range acts.Registry.Names() {
		w.RegisterActivityWithOptions(acts.RunBatch, activity.RegisterOptions{Name: name})
	}
}

// RunOptions configure one chain run.
type RunOptions struct {
	TaskQueue string
	ID        string // workflow id; default <chain>-<time>-<random>
	Tuning    workflows.Tuning
}

// Start starts a chain run and returns its run id (the root workflow id).
func Start(ctx context.Context, c client.Client, plan *crawl.Plan, o RunOptions) (string, error) {
	if o.TaskQueue == "" {
		o.TaskQueue = workflows.DefaultTaskQueue
	}
	id := o.ID
	if id == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		id = fmt.Sprintf("%s-%s-%s", plan.Chain, time.Now().UTC().Format("20060102-150405"), hex.EncodeToString(b[:]))
	}
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                o.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionTimeout: 0,
		Memo:                     runMemo(plan),
	}, workflows.ChainWorkflowName, workflows.ChainInput{RunID: id, Plan: *plan, TaskQueue: o.TaskQueue, Tuning: o.Tuning})
	if err != nil {
		return "", fmt.Errorf("start chain %s on Temporal: %w", plan.Chain, err)
	}
	return id, nil
}

// Status is a run's state and progress.
type Status struct {
	RunID    string             `json:"run_id"`
	State    string             `json:"state"` // running, completed, failed, canceled, terminated, timed_out
	Started  time.Time          `json:"started"`
	Closed   time.Time          `json:"closed,omitzero"`
	Progress *workflows.Summary `json:"progress,omitempty"`
	Error    string             `json:"error,omitempty"`
	// Failing lists the root workflow's batches that Temporal is retrying, each with
	// its attempt and last error, e.g. a store that is down:
	// "batch story/12, attempt 3, next in 4s: store 42 items of step story in kafka: …".
	Failing []string `json:"failing,omitempty"`
	// Waiting lists batches no worker has taken for a while, and why: those of a
	// step that renders pages wait for a worker with a browser.
	Waiting []string `json:"waiting,omitempty"`

	queue string   // the run's task queue
	tasks []string // the tasks of its pending batches
}

// WaitForWorkers adds to Waiting, for a running run, what no live worker of beats
// serves: its task queue when no worker polls it, and the task of each pending batch
// no worker of the queue announces.
func (st *Status) WaitForWorkers(beats []monitor.WorkerBeat) {
	if st.State != "running" {
		return
	}
	live := slices.ContainsFunc(beats, func(b monitor.WorkerBeat) bool { return b.TaskQueue == st.queue && b.AgeS <= liveBeat.Seconds() })
	if !live {
		st.Waiting = append(st.Waiting, fmt.Sprintf("no live worker polls queue %s: start one with `trawler worker --task-queue %s`", st.queue, st.queue))
		return
	}
	plan := &crawl.Plan{}
	for _, t := range st.tasks {
		plan.Steps = append(plan.Steps, crawl.PlanStep{Task: t})
	}
	st.Waiting = append(st.Waiting, Unserved(beats, plan, st.queue)...)
}

// ErrNoRun is the error Describe wraps when the namespace has no run with the id.
var ErrNoRun = errors.New("no run")

// Describe returns a run's state and its latest progress.
func Describe(ctx context.Context, c client.Client, runID string) (*Status, error) {
	d, err := c.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("%w %q on this Temporal namespace (list runs with `trawler status`)", ErrNoRun, runID)
		}
		return nil, err
	}
	info := d.GetWorkflowExecutionInfo()
	st := &Status{RunID: runID, State: stateName(info.GetStatus()), Started: info.GetStartTime().AsTime(), queue: info.GetTaskQueue()}
	for _, pa := range d.GetPendingActivities() {
		if t := pa.GetActivityType().GetName(); t != workflows.RunBatchActivity && strings.Contains(t, ".") && !slices.Contains(st.tasks, t) {
			st.tasks = append(st.tasks, t) // a batch, named after its task
		}
	}
	if info.GetCloseTime() != nil {
		st.Closed = info.GetCloseTime().AsTime()
	}
	st.Failing = failingActivities(d.GetPendingActivities())
	st.Waiting = waitingForBrowser(d.GetPendingActivities(), MemoString(info.GetMemo(), "render_steps"))
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		v, err := c.QueryWorkflow(ctx, runID, "", workflows.ProgressQuery)
		if err == nil {
			var s workflows.Summary
			if v.Get(&s) == nil {
				st.Progress = &s
				s.Outages = heldOutages(d.GetPendingActivities(), s.Outages)
			}
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		var s workflows.Summary
		if err := c.GetWorkflow(ctx, runID, "").Get(ctx, &s); err == nil {
			s.Outcome = cmp.Or(s.Outcome, workflows.OutcomeOf(&s)) // runs of older builds say none
			st.Progress = &s
		}
	default:
		if err := c.GetWorkflow(ctx, runID, "").Get(ctx, nil); err != nil {
			st.Error = err.Error()
		}
	}
	redactStatus(st)
	return st, nil
}

// redactStatus masks the credentials in what a run's status shows (crawl.RedactText):
// its error, the batches being retried and its progress's failures and outages. A
// worker masks them before it records them; this covers runs recorded by older ones.
func redactStatus(st *Status) {
	st.Error = crawl.RedactText(st.Error)
	for i := range st.Failing {
		st.Failing[i] = crawl.RedactText(st.Failing[i])
	}
	if p := st.Progress; p != nil {
		for i := range p.Failures {
			p.Failures[i] = p.Failures[i].Redacted()
		}
		for i := range p.Outages {
			p.Outages[i].Cause = crawl.RedactText(p.Outages[i].Cause)
		}
		p.Reason = crawl.RedactText(p.Reason)
	}
}

// heldOutages adds to a run's outages those its running batches are riding out
// themselves (they heartbeat them), before any input has gone back to the run.
func heldOutages(pending []*workflowpb.PendingActivityInfo, outs []workflows.Outage) []workflows.Outage {
	for _, pa := range pending {
		if pa.GetHeartbeatDetails() == nil {
			continue
		}
		var cp struct {
			Hold *crawl.Outage `json:"hold"`
		}
		if converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &cp) != nil || cp.Hold == nil {
			continue
		}
		h := cp.Hold
		i := slices.IndexFunc(outs, func(o workflows.Outage) bool { return o.Dependency == h.Dependency })
		if i < 0 {
			outs = append(outs, workflows.Outage{Dependency: h.Dependency, Since: h.Since, Last: h.Since, Cause: h.Cause})
			i = len(outs) - 1
		}
		o := &outs[i]
		o.Waiting += h.Waiting
		if step, _, ok := strings.Cut(pa.GetActivityId(), "/"); ok && !slices.Contains(o.Steps, step) {
			o.Steps = append(o.Steps, step)
		}
		if h.Since.Before(o.Since) {
			o.Since = h.Since
		}
	}
	return outs
}

// failingActivities describes the pending activities whose last attempt failed.
func failingActivities(pending []*workflowpb.PendingActivityInfo) []string {
	var out []string
	for _, pa := range pending {
		f := pa.GetLastFailure()
		if f == nil {
			continue
		}
		msg := f.GetMessage()
		for c := f.GetCause(); c != nil && c.GetMessage() != "" && !strings.Contains(msg, c.GetMessage()); c = c.GetCause() {
			msg += ": " + c.GetMessage()
		}
		line := fmt.Sprintf("batch %s, attempt %d", pa.GetActivityId(), pa.GetAttempt())
		if next := pa.GetNextAttemptScheduleTime(); next != nil {
			if d := time.Until(next.AsTime()); d > 0 {
				line += fmt.Sprintf(", next in %s", d.Round(time.Second))
			}
		}
		out = append(out, line+": "+msg)
	}
	return out
}

// Wait blocks until the run ends, calling onProgress (if set) about twice a second.
func Wait(ctx context.Context, c client.Client, runID string, onProgress func(*workflows.Summary)) (*workflows.Summary, error) {
	run := c.GetWorkflow(ctx, runID, "")
	done := make(chan error, 1)
	var sum workflows.Summary
	go func() { done <- run.Get(ctx, &sum) }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", runID, err)
			}
			if onProgress != nil {
				onProgress(&sum)
			}
			return &sum, nil
		case <-tick.C:
			if onProgress == nil {
				continue
			}
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			v, err := c.QueryWorkflow(qctx, runID, "", workflows.ProgressQuery)
			cancel()
			if err == nil {
				var s workflows.Summary
				if v.Get(&s) == nil {
					onProgress(&s)
				}
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func stateName(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "running"
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "canceled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed_out"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued"
	}
	return "unknown"
}
