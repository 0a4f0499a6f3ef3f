package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/events"
	"github.com/trawlerhq/trawler/internal/storage/kafka"
)

// watchFlags are the monitoring settings of `trawler worker`.
type watchFlags struct {
	metrics string
	webhook string // --alert-webhook: receives every event, as the alert JSON it always had
	events  bool
	engine.WatchOptions
}

func (w *watchFlags) add(cmd *cobra.Command, metricsDefault string) {
	f := cmd.Flags()
	f.StringVar(&w.metrics, "metrics", metricsDefault, "serve Prometheus metrics at http://ADDR/metrics (pages, items per sink, dedup verdicts, failures by cause, per-host latency, backlog); empty: off")
	f.StringVar(&w.webhook, "alert-webhook", "", "with --redis: POST every event (run ends, backlog, failure rate, outages and their recoveries …) of every tenant to this `URL`, in the JSON alerts it posted before events (alert, resolved, run_ended with the outcome); implies --events")
	f.BoolVar(&w.events, "events", false, "with --redis: watch the running chains and emit their events (run ends, thresholds, outages); one or two workers with it suffice")
	f.IntVar(&w.MaxBacklog, "alert-backlog", 0, "a backlog event when a chain's backlog (inputs queued or in flight) exceeds this; 0: off")
	f.Float64Var(&w.MaxFailureRate, "alert-failure-rate", 0, "a failure_rate event when failures / attempts of a chain since the last look exceed this (0–1); 0: off")
	f.DurationVar(&w.Every, "watch-every", 15*time.Second, "how often the backlog gauge and the alerts look at the running chains")
	f.DurationVar(&w.Drain, "scale-drain", engine.DefaultDrain, "the autoscaling target: trawler_desired_workers counts the workers that drain each queue's backlog within this")
}

// start serves /metrics, runs the watcher (backlog gauge, events) and, with Redis,
// the event deliverer until ctx ends.
func (w *watchFlags) start(ctx context.Context, s *Settings, c client.Client) error {
	if err := checkDrain("scale-drain", w.Drain); err != nil {
		return err
	}
	if w.metrics != "" {
		ln, err := net.Listen("tcp", w.metrics)
		if err != nil {
			return fmt.Errorf("--metrics %s: %w (pick a free port, or --metrics '' to turn metrics off)", w.metrics, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.Handler())
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintln(os.Stderr, "metrics server:", err)
			}
		}()
		go func() { <-ctx.Done(); _ = srv.Close() }()
		fmt.Fprintf(os.Stderr, "metrics at http://%s/metrics\n", ln.Addr())
	}
	if s.Redis == "" {
		if w.webhook != "" || w.events {
			return fmt.Errorf("--alert-webhook and --events need Redis, where events are kept: set --redis URL (or TRAWLER_REDIS, or --data of a dev stack)")
		}
		if w.metrics != "" {
			w.Log = s.Logger()
			go engine.Watch(ctx, c, nil, w.WatchOptions)
		}
		return nil
	}
	rdb, err := s.OpenRedis(0, false)
	if err != nil {
		return err
	}
	w.Log = s.Logger()
	var static []events.Webhook
	if w.webhook != "" {
		hook := events.Webhook{URL: w.webhook, Format: events.FormatAlert, Source: "flag"}
		if bad := hook.Check(); len(bad) > 0 {
			rdb.Close()
			return fmt.Errorf("--alert-webhook: %s", strings.Join(bad, "; "))
		}
		static = []events.Webhook{hook}
	}
	stopDeliver, err := DeliverEvents(ctx, s, rdb, static)
	if err != nil {
		rdb.Close()
		return err
	}
	if w.metrics != "" || w.webhook != "" || w.events {
		go engine.Watch(ctx, c, rdb, w.WatchOptions)
	}
	go func() { <-ctx.Done(); stopDeliver(); rdb.Close() }()
	return nil
}

// deliverEvents runs an event deliverer (to the Kafka topic trawler.events when Kafka
// is configured, and to the webhooks) until ctx ends; stop waits for it.
func DeliverEvents(ctx context.Context, s *Settings, rdb redis.UniversalClient, static []events.Webhook) (stop func(), err error) {
	d := &events.Deliverer{Redis: rdb, Static: static, Log: s.Logger()}
	var sink *kafka.Sink
	if brokers := s.KafkaBrokers(); len(brokers) > 0 {
		auth, err := s.kafkaAuth()
		if err != nil {
			return nil, err
		}
		if sink, err = kafka.Open(kafka.Config{Brokers: brokers, Auth: auth}); err != nil {
			return nil, err
		}
		d.Kafka = sink
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.Run(ctx); err != nil {
			s.Logger().Warn("events: deliverer stopped", "err", err)
		}
		if sink != nil {
			_ = sink.Close()
		}
	}()
	return func() { <-done }, nil
}
