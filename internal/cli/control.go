package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
)

// controlCmd is `trawler pause` (pause) or `trawler resume`.
func controlCmd(s *Settings, action string) *cobra.Command {
	c := &cobra.Command{
		Use:   "pause RUN_ID",
		Short: "Pause a running run: its running batches finish, no new one starts until it is resumed",
		Long: `Pauses a running run. The batches it is running finish and are taken in (their
items stored, their checkpoints kept); no batch or partition starts after them, so the
run fetches nothing and leases no budget while paused. The run stays open, shows
"paused" with who paused it and since when in trawler status and the console, and
survives worker and Temporal restarts paused. trawler resume RUN_ID goes on where it
stopped. A schedule's next firing while its run is paused follows the schedule's
overlap policy: with the default (skip) the firing is skipped.`,
		Example: `  trawler pause demo-20261122-101500-a1b2c3 --data .data/dev
  trawler pause demo-20261122-101500-a1b2c3 --json`,
	}
	if action == engine.ActionResume {
		c.Use = "resume RUN_ID"
		c.Short = "Resume a paused run where it stopped"
		c.Long = `Resumes a run paused with trawler pause: it starts batches again from the inputs it
had queued when it was paused, after any worker or Temporal restart in between.`
		c.Example = `  trawler resume demo-20261122-101500-a1b2c3 --data .data/dev`
	}
	c.Args = cobra.ExactArgs(1)
	c.RunE = func(cmd *cobra.Command, args []string) error {
		cl, err := s.connect(cmd.Context())
		if err != nil {
			return err
		}
		defer cl.Close()
		// The event goes where the events are kept, when this command knows a Redis.
		var rdb redis.UniversalClient
		if s.Resolve() == nil && s.Redis != "" {
			if rdb, err = s.OpenRedis(0, false); err != nil {
				return err
			}
			defer rdb.Close()
		}
		rc, err := engine.ControlRun(cmd.Context(), cl, rdb, args[0], action, operatorName())
		if err != nil {
			return err
		}
		if rc.EventError != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: the %s event was not recorded: %s\n", action, rc.EventError)
		}
		if s.JSON {
			return writeJSONTo(cmd.OutOrStdout(), rc)
		}
		out := cmd.OutOrStdout()
		switch {
		case !rc.Taken:
			fmt.Fprintf(out, "%s of run %s sent; the run takes it when a worker next runs it (none did within %s): check `trawler status %s`\n",
				action, rc.RunID, engine.ConfirmWait, rc.RunID)
		case action == engine.ActionPause:
			fmt.Fprintf(out, "run %s paused by %s at %s; its running batches finish, `trawler resume %s` goes on\n",
				rc.RunID, rc.By, rc.At.Local().Format(time.DateTime), rc.RunID)
		default:
			fmt.Fprintf(out, "run %s resumed by %s\n", rc.RunID, rc.By)
		}
		return nil
	}
	return c
}

func rerunCmd(s *Settings) *cobra.Command {
	var steps, causes []string
	c := &cobra.Command{
		Use:   "rerun RUN_ID [--step S] [--cause http_5xx,timeout]",
		Short: "Start a run over the inputs a finished run gave up on",
		Long: `Starts a new run of the same chain version — the plan the run was started with,
so the same dedup, budgets and tuning — over the inputs the run gave up on, each at the
step that failed it; what they lead to follows through the chain as usual. The failed
inputs come from the run's record and from the failure log its workers wrote
(<out>/_failures.jsonl, --out); the record keeps the first failure_sample of them, so a
run with more failures needs the log. --step and --cause narrow them. The new run names
the old one (rerun_of) in trawler status and the console.`,
		Example: `  trawler rerun demo-20261122-101500-a1b2c3 --data .data/dev
  trawler rerun demo-20261122-101500-a1b2c3 --step story --cause http_5xx,timeout --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := engine.RerunOptions{Steps: steps}
			if s.Out != "" {
				o.FailureLog = filepath.Join(s.Out, jsonl.FailuresFile)
			}
			for _, c := range causes {
				o.Causes = append(o.Causes, crawl.Cause(strings.TrimSpace(c)))
			}
			cl, err := s.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer cl.Close()
			res, err := engine.Rerun(cmd.Context(), cl, args[0], o)
			if err != nil {
				return err
			}
			if s.JSON {
				return writeJSONTo(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "started run %s: %d failed input(s) of run %s again\n", res.RunID, res.Inputs, res.Of)
			return nil
		},
	}
	c.Flags().StringSliceVar(&steps, "step", nil, "re-run only the failures of these step ids")
	c.Flags().StringSliceVar(&causes, "cause", nil, "re-run only the failures of these causes, e.g. http_5xx,timeout")
	return c
}
