package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/internal/engine"
)

// watchFlags are the monitoring settings of `trawler worker` and `trawler dev`.
type watchFlags struct {
	metrics string
	engine.WatchOptions
}

func (w *watchFlags) add(cmd *cobra.Command, metricsDefault string) {
	f := cmd.Flags()
	f.StringVar(&w.metrics, "metrics", metricsDefault, "serve Prometheus metrics at http://ADDR/metrics (pages, items per sink, dedup verdicts, failures by cause, per-host latency, backlog); empty: off")
	f.StringVar(&w.Webhook, "alert-webhook", "", "POST a JSON alert to this URL when a chain's backlog or failure rate crosses its threshold, and again when it recovers; and a run_ended alert with the outcome of every run that ends")
	f.IntVar(&w.MaxBacklog, "alert-backlog", 0, "alert when a chain's backlog (inputs queued or in flight) exceeds this; 0: off")
	f.Float64Var(&w.MaxFailureRate, "alert-failure-rate", 0, "alert when failures / attempts of a chain since the last look exceed this (0–1); 0: off")
	f.DurationVar(&w.Every, "watch-every", 15*time.Second, "how often the backlog gauge and the alerts look at the running chains")
	f.DurationVar(&w.Drain, "scale-drain", engine.DefaultDrain, "the autoscaling target: trawler_desired_workers counts the workers that drain each queue's backlog within this")
}

// start serves /metrics and runs the watcher (backlog gauge, alerts) until ctx ends.
func (w *watchFlags) start(ctx context.Context, s *settings, c client.Client) error {
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
	if w.metrics == "" && w.Webhook == "" {
		return nil
	}
	var rdb redis.UniversalClient
	if s.redis != "" {
		var err error
		if rdb, err = s.openRedis(0, false); err != nil {
			return err
		}
		go func() { <-ctx.Done(); rdb.Close() }()
	}
	w.Log = s.logger()
	go engine.Watch(ctx, c, rdb, w.WatchOptions)
	return nil
}
