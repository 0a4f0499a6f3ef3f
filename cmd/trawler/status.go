package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"trawler/crawl"
	"trawler/engine"
)

func statusCmd(s *settings) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "status [RUN_ID]",
		Short: "Show one run's progress, or list recent runs",
		Long: `With a RUN_ID: the run's state and per-step counts (pages, items, skipped, retried,
failed, queued), live while it runs, with the first failures and their causes, and the
batches Temporal is retrying with their last error (e.g. a store that is down).
Without: the most recent chain runs, newest first.`,
		Example: `  trawler status --data .data/dev
  trawler status demo-20261122-101500-a1b2c3 --data .data/dev --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			if len(args) == 1 {
				st, err := engine.Describe(cmd.Context(), c, args[0])
				if err != nil {
					return err
				}
				if s.json {
					return printJSON(st)
				}
				printStatus(st)
				return nil
			}
			rows, err := engine.ListRuns(cmd.Context(), c, engine.ListOptions{Limit: limit})
			if err != nil {
				return err
			}
			if s.json {
				return printJSON(rows)
			}
			if len(rows) == 0 {
				fmt.Println("no runs yet; start one with `trawler run FILE`")
			}
			for _, r := range rows {
				fmt.Printf("%-44s %-10s %s\n", r.RunID, r.State, r.Started.Local().Format(time.DateTime))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many runs to list")
	return cmd
}

func printStatus(st *engine.Status) {
	fmt.Printf("run %s: %s (started %s)\n", st.RunID, st.State, st.Started.Local().Format(time.DateTime))
	if st.Error != "" {
		fmt.Printf("  error: %s\n", st.Error)
	}
	if len(st.Failing) > 0 {
		// Batches Temporal is retrying: usually a store that is down or slow. The run
		// goes on once it answers again.
		fmt.Printf("  retrying %d batch(es):\n", len(st.Failing))
		for _, f := range st.Failing {
			fmt.Printf("    %s\n", f)
		}
	}
	p := st.Progress
	if p == nil {
		return
	}
	fmt.Printf("  %-12s %8s %8s %9s %8s %8s %8s %8s\n", "step", "pages", "items", "unchanged", "skipped", "retried", "failed", "queued")
	for _, s := range p.Steps {
		fmt.Printf("  %-12s %8d %8d %9d %8d %8d %8d %8d\n", s.ID, s.Pages, s.Items, s.Unchanged, s.Skipped, s.Retried, s.Failed, s.Queued+s.InFlight)
	}
	fmt.Printf("  batches %d, partitions finished %d, running %d\n", p.Batches, p.Partitions, p.Running)
	printFailures(os.Stdout, p.Failures, p.FailuresTotal)
}

func printFailures(w *os.File, fs []crawl.Failure, total int) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(w, "  failures (%d shown of %d):\n", len(fs), total)
	for _, f := range fs {
		fmt.Fprintf(w, "    [%s] after %d attempt(s): %s\n", f.Step, f.Attempts, f.Cause)
	}
}
