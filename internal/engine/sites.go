package engine

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/trawlerhq/trawler/internal/activities"
	"github.com/trawlerhq/trawler/internal/affinity"
)

// siteWorkers polls the site queues of a worker's task queue whose sites the worker's
// probes find fast enough, and stops polling a site when its probe no longer is.
type siteWorkers struct {
	c        client.Client
	acts     *activities.Activities
	registry *affinity.Registry
	base     string // the worker's task queue
	identity string
	slots    int
	every    time.Duration
	log      *slog.Logger
	hc       *http.Client
	// place is the worker's placement: site queue batches share its capacity.
	place *placement

	mu      sync.Mutex
	polling map[string]worker.Worker // site queue → its worker
}

// run probes every `every` until ctx ends, then stops the site workers.
func (s *siteWorkers) run(ctx context.Context) {
	defer s.stopAll()
	for {
		s.probeAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.every):
		}
	}
}

func (s *siteWorkers) probeAll(ctx context.Context) {
	sites, err := s.registry.Sites(ctx, s.base)
	if err != nil {
		s.log.Warn("site queues", "err", err)
		return
	}
	for _, site := range sites {
		res := affinity.Probe(ctx, s.hc, site, s.identity)
		s.mu.Lock()
		w, on := s.polling[site.Queue]
		s.mu.Unlock()
		switch {
		case res.OK && !on:
			w = worker.New(s.c, site.Queue, worker.Options{
				MaxConcurrentActivityExecutionSize: s.slots, Identity: s.identity,
				DisableWorkflowWorker: true, WorkerStopTimeout: 5 * time.Second,
				Interceptors: []interceptor.WorkerInterceptor{&placementInterceptor{p: s.place}},
			})
			RegisterBatches(w, s.acts)
			if err := w.Start(); err != nil {
				s.log.Warn("poll site queue", "queue", site.Queue, "err", err)
				continue
			}
			s.mu.Lock()
			s.polling[site.Queue] = w
			s.mu.Unlock()
			s.log.Info("polling site queue: probe passed", "queue", site.Queue, "latency", res.Latency, "kbps", int(res.KBps))
		case !res.OK && on:
			s.mu.Lock()
			delete(s.polling, site.Queue)
			s.mu.Unlock()
			w.Stop() // running batches finish or resume elsewhere from their heartbeats
			s.log.Warn("stopped polling site queue", "queue", site.Queue, "reason", res.Reason)
		}
	}
}

func (s *siteWorkers) stopAll() {
	s.mu.Lock()
	ws := s.polling
	s.polling = map[string]worker.Worker{}
	s.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
}

// queues lists the site queues polled now.
func (s *siteWorkers) queues() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.polling))
	for q := range s.polling {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}
