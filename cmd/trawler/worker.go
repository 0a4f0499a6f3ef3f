package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"trawler/engine"
	"trawler/storage"
	"trawler/storage/jsonl"
)

func openSinks(out string) (storage.Set, error) {
	js, err := jsonl.Open(out)
	if err != nil {
		return nil, err
	}
	return storage.Set{"jsonl": js}, nil
}

func workerCmd(s *settings) *cobra.Command {
	var maxBatches int
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker: executes chain workflows and batch activities until interrupted",
		Long: `Run a worker against a Temporal cluster (or a running ` + "`trawler dev`" + ` stack with --data).
Workers are stateless: start as many as you like on as many machines as you like; each
polls the task queue, runs batches, and stores items in the configured sinks. Killing a
worker costs only its in-flight batches, which Temporal retries elsewhere after their
heartbeat timeout and which resume from their last stored input.`,
		Example: `  trawler worker --data .data/dev
  TRAWLER_TEMPORAL=temporal.internal:7233 TRAWLER_NAMESPACE=crawl trawler worker --out /var/lib/trawler/out`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := s.resolve(); err != nil {
				return err
			}
			if s.out == "" {
				return fmt.Errorf("the worker needs --out DIR (or TRAWLER_OUT, or --data of a dev stack) for the jsonl sink")
			}
			c, err := s.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			w, err := engine.NewWorker(c, engine.WorkerOptions{TaskQueue: s.taskQueue, OutDir: s.out, MaxBatches: maxBatches, Redis: s.redis, Log: s.logger()})
			if err != nil {
				return err
			}
			if err := w.Start(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "worker polling task queue %q on %s (namespace %s); items → %s\n", s.taskQueue, s.temporal, s.namespace, s.out)
			<-cmd.Context().Done()
			w.Stop()
			return nil
		},
	}
	cmd.Flags().IntVar(&maxBatches, "max-batches", 16, "batch activities this worker runs at once")
	return cmd
}
