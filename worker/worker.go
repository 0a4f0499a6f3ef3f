// Package worker runs a bare Trawler worker inside a program of your own, without the
// trawler command around it: it polls a Temporal task queue, runs the chain workflows
// and the batches of their steps, and stores items in the sinks Config names, exactly
// as `trawler worker` does.
//
//	err := worker.Run(ctx, worker.Config{Temporal: "temporal:7233", OutDir: "/var/lib/trawler/out", Redis: "redis:6379"},
//		acme.Feed, acme.Detail)
//
// Chains are started and watched as usual, with `trawler run` and `trawler status`. The
// worker runs the tasks it is given, the config-driven generic.* tasks, and every task
// registered in crawl.Default by the program's imports; a middleware is available to
// chain files once crawl.RegisterMiddleware registered it.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/engine"

	_ "github.com/trawlerhq/trawler/internal/sites/generic" // the config-driven tasks every worker runs
)

// Config says where the worker finds Temporal and where it stores items. Only OutDir is
// required; the zero value of every other field is the default `trawler worker` uses.
type Config struct {
	Temporal  string // Temporal frontend HOST:PORT; default 127.0.0.1:7233
	Namespace string // default "default"
	TaskQueue string // default "trawler", the queue `trawler run` starts chains on
	OutDir    string // directory of the jsonl sink and of failed inputs (required)

	// Redis holds dedup state, the seen-set, host budgets, quotas and pools, shared by
	// every worker (HOST:PORT or redis://…). Empty: dedup is off and host limits hold
	// per worker.
	Redis string
	Kafka []string // brokers of the kafka sink; none: no kafka sink
	Mongo string   // URI of the mongo sink
	ES    string   // URL of the es sink's Elasticsearch
	HBase string   // ZooKeeper quorum of the hbase sink

	// MaxBatches bounds the batches run at once (default 16).
	MaxBatches int
	// AllowPrivate lets tasks fetch loopback and private addresses (a site on the same
	// network); link-local and cloud metadata addresses stay refused.
	AllowPrivate bool
	Log          *slog.Logger // default slog.Default()
}

// Run adds tasks to the ones the program registered, connects to Temporal and works
// until ctx is done; then it stops polling, lets running batches end (their unfinished
// inputs are retried, by this or another worker) and returns nil. It returns an error
// when the config is incomplete, a task cannot be added (a name taken by another task),
// or Temporal or a store cannot be reached.
func Run(ctx context.Context, cfg Config, tasks ...crawl.Task) error {
	if cfg.OutDir == "" {
		return fmt.Errorf("worker.Config.OutDir is empty: name the directory of the jsonl sink, e.g. /var/lib/trawler/out")
	}
	if cfg.Temporal == "" {
		cfg.Temporal = "127.0.0.1:7233"
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	reg, err := registry(tasks)
	if err != nil {
		return err
	}
	opts := engine.ClientOptions(cfg.Temporal, cfg.Namespace, engine.TemporalAuth{})
	opts.Logger = sdklog.NewStructuredLogger(cfg.Log)
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := client.DialContext(dctx, opts)
	cancel()
	if err != nil {
		return fmt.Errorf("cannot reach Temporal at %s (namespace %s): %v; check worker.Config.Temporal", cfg.Temporal, cfg.Namespace, err)
	}
	defer c.Close()
	w, err := engine.NewWorker(c, engine.WorkerOptions{TaskQueue: cfg.TaskQueue, OutDir: cfg.OutDir, Registry: reg,
		MaxBatches: cfg.MaxBatches, Redis: cfg.Redis, Kafka: cfg.Kafka, Mongo: cfg.Mongo, ES: cfg.ES, HBase: cfg.HBase,
		Log: cfg.Log, Fetch: fetch.Options{AllowPrivate: cfg.AllowPrivate}})
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	w.Stop()
	return nil
}

// registry is crawl.Default's tasks and tasks, in a registry of this worker's own, so a
// program may run several workers with different tasks.
func registry(tasks []crawl.Task) (*crawl.Registry, error) {
	reg := crawl.NewRegistry()
	for _, name := range crawl.Default.Names() {
		t, _ := crawl.Default.Get(name)
		if err := reg.Add(t); err != nil {
			return nil, err
		}
	}
	if err := reg.Add(tasks...); err != nil {
		return nil, fmt.Errorf("worker.Run: %w", err)
	}
	return reg, nil
}
