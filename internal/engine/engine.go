// Package engine connects the pieces a Trawler process runs: a Temporal worker with the
// chain workflow and the batch activity registered, and the client calls that start,
// watch and summarize chain runs. The CLI and the end-to-end tests both use it, so what
// the tests prove is what users run.
//
// Its files by job:
//   - the worker process: engine.go (NewWorker, Start, Stop, Register), sinks.go (the
//     stores it writes), sites.go and placement.go (site queues, and which worker takes
//     a batch), render.go (browsers), tuner.go (batch slots), buildid.go;
//   - runs: runs.go (load a chain, start and list runs), status.go (a run's state:
//     Describe, Wait), overview.go and capacity.go (what every tenant and chain is
//     doing, alerts, the workers the load needs);
//   - schedules: schedules.go (create, describe, trigger, backfill), cron.go (specs);
//   - shared: connect.go (dialing Temporal), ids.go (run and schedule ids).
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/fetch/render"
	"github.com/trawlerhq/trawler/internal/activities"
	"github.com/trawlerhq/trawler/internal/affinity"
	"github.com/trawlerhq/trawler/internal/archive"
	"github.com/trawlerhq/trawler/internal/capacity"
	"github.com/trawlerhq/trawler/internal/changes"
	"github.com/trawlerhq/trawler/internal/dedup"
	"github.com/trawlerhq/trawler/internal/external"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/polite"
	"github.com/trawlerhq/trawler/internal/quota"
	"github.com/trawlerhq/trawler/internal/recrawl"
	"github.com/trawlerhq/trawler/internal/redisurl"
	"github.com/trawlerhq/trawler/internal/seen"
	"github.com/trawlerhq/trawler/internal/storage"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/storage/kafka"
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
	// DedupExpected is the number of items a dedup namespace this worker is the first to
	// use is sized for (0: dedup.DefaultExpected, ten million). Buckets are fixed when a
	// namespace is made, and its stats (trawler dedup stats, the console) read each one.
	DedupExpected int64
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
	archives *archive.Writers
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
	acts := &activities.Activities{Registry: o.Registry, Sinks: sinks, Failures: js, Log: o.Log, Archives: archive.NewWriters(o.Log)}
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
			d, err = dedup.Open(ctx, rdb, dedup.Config{Expected: o.DedupExpected, Log: o.Log})
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
		// Change events read old versions from HBase and go to Kafka: a worker with both
		// can run the steps with `changes: kafka`.
		k, hasKafka := sinks["kafka"].(*kafka.Sink)
		h, hasHBase := sinks["hbase"].(*hbase.Sink)
		if hasKafka && hasHBase {
			acts.Changes = &changes.Publisher{Versions: h, Kafka: k, Pages: rdb, Now: o.Clock}
		}
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
	w.RegisterActivityWithOptions(recentRuns(c), activity.RegisterOptions{Name: workflows.RecentRunsActivity})
	ww := &Worker{fleet: fleet, taskQueue: o.TaskQueue, Worker: w, Sinks: sinks, JSONL: js, Identity: o.Identity, monitor: acts.Monitor, place: place, slots: o.MaxBatches, registry: o.Registry, archives: acts.Archives}
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

// Stop stops the Temporal worker, then closes its sinks.
func (w *Worker) Stop() {
	if w.sites != nil {
		w.sites.stopAll() // batches on site queues finish before the sinks close
	}
	if w.stopLoops != nil {
		w.stopLoops()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = w.monitor.Forget(ctx, w.Identity, w.taskQueue)
		cancel()
	}
	if w.renderer != nil {
		w.renderer.Stop() // its batches finish (or fail) before the browsers go
		w.browsers.Close()
	}
	w.Worker.Stop()
	// Its batches are done: the WARC files they wrote are finished and indexed (a
	// file that cannot be is logged).
	_ = w.archives.Close()
	if w.fleet != nil {
		w.fleet.Close()
	}
	_ = w.Sinks.Close()
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
