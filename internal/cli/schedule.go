package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/engine"
)

const cronHelp = `A spec is five fields: minute hour day-of-month month day-of-week, read in UTC, or in
the zone --tz names (an IANA name such as Asia/Shanghai or America/New_York; Temporal
follows its daylight saving: "0 2 * * *" --tz Europe/Berlin fires at 02:00 Berlin time
in winter and summer; a local time the clocks skip does not fire, one they repeat fires
twice). Each field takes *, a value, a list (1,15), a range (9-17), a step (*/15, 0-30/10,
5/20 = from 5 to the end by 20); month takes JAN-DEC, day-of-week SUN-SAT (0 and 7 are
Sunday). When both day-of-month and day-of-week are given a day must match both
(Temporal's rule: "0 0 13 * FRI" is Friday the 13th), unlike classic cron. Or a
descriptor: @hourly, @daily (also @midnight), @weekly, @monthly, @yearly (also
@annually); or @every DURATION[/OFFSET], at least 1m, counted from the Unix epoch
(@every 6h fires at 00:00, 06:00 … UTC; @every 6h/30m at 00:30, 06:30 …; no --tz).
Seconds, years, TZ= prefixes and '#' are refused, and so is a spec that never fires
("0 0 31 2 *").`

const overlapHelp = `What a firing does while the previous run still goes (--overlap):
  skip             do not start it (default)
  buffer-one       start it when the previous run ends; at most one waits
  buffer-all       start every one, one after the other
  cancel-other     cancel the previous run, then start
  terminate-other  terminate the previous run, then start
  allow-all        start it alongside`

func scheduleCmd(s *Settings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Run chains on cron schedules (Temporal Schedules)",
		Long: `Schedules start a chain run on a cron spec, durably: Temporal keeps them, not the CLI,
so they fire whether or not this command runs. Each firing is a normal run; list them
with ` + "`trawler status`" + `. A schedule's overlap policy says what a firing does while the
previous run still goes (skip by default).

A schedule keeps the chain as it was when it was created: editing the file later changes
nothing until ` + "`trawler schedule update NAME FILE`" + `. The listing shows the version (a
hash of the file) each schedule runs, and warns when the file has changed since.

` + cronHelp,
		Example: `  trawler schedule create hn-hourly examples/hackernews.yaml --cron "0 * * * *" --data .data/dev
  trawler schedule list --data .data/dev
  trawler schedule update hn-hourly examples/hackernews.yaml --data .data/dev
  trawler schedule trigger hn-hourly --data .data/dev
  trawler schedule pause hn-hourly --note "site maintenance" --data .data/dev
  trawler schedule backfill hn-hourly --from 2026-03-01T00:00:00Z --to 2026-03-01T06:00:00Z --data .data/dev
  trawler schedule delete hn-hourly --data .data/dev`,
	}
	cmd.AddCommand(scheduleCreateCmd(s), scheduleUpdateCmd(s), scheduleListCmd(s), schedulePauseCmd(s, true), schedulePauseCmd(s, false),
		scheduleTriggerCmd(s), scheduleBackfillCmd(s), scheduleDeleteCmd(s))
	return cmd
}

// scheduledChain loads FILE as create and update send it: checked, with its path and
// the version of its content.
func (s *Settings) scheduledChain(ctx context.Context, file string, sets []string) (*crawl.Plan, engine.ChainSource, error) {
	if err := s.Resolve(); err != nil {
		return nil, engine.ChainSource{}, err
	}
	data, err := readChainFile(ctx, file)
	if err != nil {
		return nil, engine.ChainSource{}, err
	}
	plan, err := engine.LoadChainFile(file, data, sets, StackVars)
	if err != nil {
		return nil, engine.ChainSource{}, err
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, engine.ChainSource{}, err
	}
	return plan, engine.ChainSource{File: file, Path: abs, Version: engine.ChainVersion(data)}, nil
}

// fileChanged says whether the chain file a schedule was given now holds another
// version; a file that is gone or unreadable here (another machine) says nothing.
func fileChanged(r engine.ScheduleInfo) (now string, changed bool) {
	if r.Path == "" || r.Version == "" {
		return "", false
	}
	data, err := os.ReadFile(r.Path)
	if err != nil {
		return "", false
	}
	now = engine.ChainVersion(data)
	return now, now != r.Version
}

// scheduleErr prints a refused setting with its flag's name.
func scheduleErr(err error) error {
	var se *engine.ScheduleError
	if errors.As(err, &se) {
		return errors.New(se.FlagError())
	}
	return err
}

func scheduleCreateCmd(s *Settings) *cobra.Command {
	var sets []string
	var cfg engine.ScheduleConfig
	var catchup, jitter string
	create := &cobra.Command{
		Use:   "create NAME FILE --cron SPEC",
		Short: "Create a schedule that runs FILE on a cron spec",
		Long: `Create a schedule that starts a run of the chain in FILE on a cron spec. Every setting is
checked before anything is sent to Temporal.

` + cronHelp + `

` + overlapHelp + `

--tz: the IANA time zone the cron fields are read in (default UTC); Temporal moves the
firings with its daylight saving.
--catchup-window: how late a firing missed while Temporal was down still starts (default
1 year; at least 10s). --pause-on-failure: pause the schedule when a run it started fails.
--jitter: start each firing up to this much later, at random (spreads many schedules).`,
		Example: `  trawler schedule create hn-hourly examples/hackernews.yaml --cron "0 * * * *" --data .data/dev
  trawler schedule create hn-nightly examples/hackernews.yaml --cron "0 2 * * *" --tz Asia/Shanghai
  trawler schedule create demo-5m examples/demo.yaml --cron "*/5 * * * *" --set feed.pages=2
  trawler schedule create demo-weekdays examples/demo.yaml --cron "30 6 * * MON-FRI" --overlap buffer-one --catchup-window 1h
  trawler schedule create demo-nightly examples/demo.yaml --cron @daily --jitter 10m --pause-on-failure --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, file := args[0], args[1]
			if err := engine.CheckScheduleID(name); err != nil {
				return scheduleErr(err)
			}
			if strings.TrimSpace(cfg.Cron) == "" {
				return fmt.Errorf("--cron is required, e.g. --cron \"0 * * * *\" for hourly; see trawler schedule create --help")
			}
			var err error
			if cfg.CatchupWindow, err = engine.ParseScheduleDuration("catchup_window", catchup); err != nil {
				return scheduleErr(err)
			}
			if cfg.Jitter, err = engine.ParseScheduleDuration("jitter", jitter); err != nil {
				return scheduleErr(err)
			}
			if err := cfg.Validate(); err != nil {
				return scheduleErr(err)
			}
			plan, src, err := s.scheduledChain(cmd.Context(), file, sets)
			if err != nil {
				return err
			}
			c, err := s.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			if err := engine.CreateScheduleWith(cmd.Context(), c, name, src, cfg, plan, engine.RunOptions{TaskQueue: s.TaskQueue}); err != nil {
				if strings.Contains(err.Error(), "already") {
					return fmt.Errorf("a schedule named %q exists already: delete it first (trawler schedule delete %s) or pick another name", name, name)
				}
				return scheduleErr(err)
			}
			overlap := cfg.Overlap
			if overlap == "" {
				overlap = "skip"
			}
			zone := strings.TrimSpace(cfg.TimeZone)
			if zone == "" || zone == "Etc/UTC" {
				zone = "UTC"
			}
			out := cmd.OutOrStdout()
			if s.JSON {
				res := map[string]any{"schedule": name, "cron": strings.TrimSpace(cfg.Cron), "chain": plan.Chain, "file": file, "version": src.Version, "overlap": overlap}
				if zone != "UTC" {
					res["time_zone"] = zone
				}
				return writeJSONTo(out, res)
			}
			fmt.Fprintf(out, "schedule %s runs chain %s (%s, version %s) on %q (%s), overlap %s\n", name, plan.Chain, file, src.Version, strings.TrimSpace(cfg.Cron), zone, overlap)
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&cfg.Cron, "cron", "", "cron spec: minute hour day-of-month month day-of-week (UTC, or --tz), or @hourly, @daily …, or @every DURATION")
	f.StringVar(&cfg.TimeZone, "tz", "", "IANA time zone `NAME` the cron fields are read in, e.g. Asia/Shanghai (default UTC; Temporal handles daylight saving)")
	f.StringArrayVar(&sets, "set", nil, "override a param: step.param=value or param=value (repeatable)")
	f.StringVar(&cfg.Overlap, "overlap", "skip", "while the previous run still goes: "+strings.Join(engine.OverlapPolicies, "|"))
	f.StringVar(&catchup, "catchup-window", "", "how late a missed firing still starts, e.g. 1h (default 1 year, at least 10s)")
	f.BoolVar(&cfg.PauseOnFailure, "pause-on-failure", false, "pause the schedule when a run it started fails")
	f.StringVar(&jitter, "jitter", "", "start each firing up to this much later, at random, e.g. 5m")
	f.StringVar(&cfg.Note, "note", "", "a note shown in the listing")
	return create
}

func scheduleUpdateCmd(s *Settings) *cobra.Command {
	var sets []string
	c := &cobra.Command{
		Use:   "update NAME FILE",
		Short: "Make a schedule run the chain in FILE as it is now",
		Long: `A schedule keeps the chain it was created with; editing the file changes nothing until
this command sends it again. FILE is checked as create checks it; the schedule's cron,
policies and paused state stay, and runs already going keep their chain.`,
		Example: `  trawler schedule update hn-hourly examples/hackernews.yaml --data .data/dev
  trawler schedule update demo-5m examples/demo.yaml --set feed.pages=2 --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, file := args[0], args[1]
			plan, src, err := s.scheduledChain(cmd.Context(), file, sets)
			if err != nil {
				return err
			}
			cl, err := s.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer cl.Close()
			before, err := engine.DescribeSchedule(cmd.Context(), cl, name)
			if err != nil {
				return err
			}
			if err := engine.UpdateScheduleChain(cmd.Context(), cl, name, src, plan, engine.RunOptions{TaskQueue: s.TaskQueue}); err != nil {
				return err
			}
			if s.JSON {
				return writeJSONTo(cmd.OutOrStdout(), map[string]string{"schedule": name, "chain": plan.Chain, "file": file, "version": src.Version, "was": before.Version})
			}
			was := ""
			if before.Version != "" {
				was = ", was " + before.Version
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s now runs chain %s (%s, version %s%s)\n", name, plan.Chain, file, src.Version, was)
			return nil
		},
	}
	c.Flags().StringArrayVar(&sets, "set", nil, "override a param: step.param=value or param=value (repeatable)")
	return c
}

func scheduleListCmd(s *Settings) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List schedules: cron, chain, state, next and last run, overlap",
		Long: `List every schedule: its cron spec (followed by its time zone unless UTC), the chain it
runs (name, file and the version it keeps), whether it is paused, when it fires next (UTC), its last run with
that run's state (running, completed, failed, canceled, terminated), and its overlap
policy. --json prints one array with every setting (time_zone when not UTC,
catchup_window, pause_on_failure, jitter, note, runs, skipped, running, recent_runs too).
A schedule whose file has changed since it was created or updated gets a warning: it
still runs the version it keeps until ` + "`trawler schedule update`" + `.`,
		Example: `  trawler schedule list --data .data/dev
  trawler schedule list --json | jq '.[] | select(.last.state == "failed") | .id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			rows, err := engine.ListSchedules(cmd.Context(), c)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if s.JSON {
				return writeJSONTo(out, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(out, "no schedules; create one with `trawler schedule create NAME FILE --cron SPEC`")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCRON\tCHAIN\tVERSION\tSTATE\tNEXT (UTC)\tLAST RUN (UTC)\tOVERLAP")
			var warnings []string
			for _, r := range rows {
				chain := r.Chain
				if r.File != "" {
					chain += " (" + r.File + ")"
				}
				version := r.Version
				if version == "" {
					version = "-"
				}
				if now, changed := fileChanged(r); changed {
					version += " (file changed)"
					warnings = append(warnings, fmt.Sprintf("warning: %s has changed since schedule %s took it (version %s, now %s); the schedule still runs %s: trawler schedule update %s %s",
						r.File, r.ID, r.Version, now, r.Version, r.ID, r.File))
				}
				state := "active"
				if r.Paused {
					state = "paused"
					if r.Note != "" && r.Note != "paused" {
						state += ": " + r.Note
					}
				}
				next, last := "-", "never"
				if r.Next != nil {
					next = r.Next.UTC().Format("2006-01-02 15:04")
				}
				if r.Last != nil {
					last = r.Last.At.UTC().Format("2006-01-02 15:04") + " " + r.Last.State + " " + r.Last.RunID
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Spec(), chain, version, state, next, last, r.Overlap)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), w)
			}
			return nil
		},
	}
}

func schedulePauseCmd(s *Settings, pause bool) *cobra.Command {
	var note string
	done := "paused"
	c := &cobra.Command{
		Use:   "pause NAME [--note TEXT]",
		Short: "Stop a schedule firing until it is unpaused (runs already going keep going)",
		Example: `  trawler schedule pause hn-hourly --note "site maintenance until Monday" --data .data/dev
  trawler schedule pause hn-hourly --json`,
	}
	if !pause {
		done = "unpaused"
		c.Use = "unpause NAME"
		c.Short = "Let a paused schedule fire again (missed firings are not made up; backfill does that)"
		c.Example = `  trawler schedule unpause hn-hourly --data .data/dev`
	}
	c.Args = cobra.ExactArgs(1)
	c.RunE = func(cmd *cobra.Command, args []string) error {
		cl, err := s.connect(cmd.Context())
		if err != nil {
			return err
		}
		defer cl.Close()
		if pause {
			err = engine.PauseSchedule(cmd.Context(), cl, args[0], note)
		} else {
			err = engine.UnpauseSchedule(cmd.Context(), cl, args[0], note)
		}
		if err != nil {
			return err
		}
		if s.JSON {
			return writeJSONTo(cmd.OutOrStdout(), map[string]string{"schedule": args[0], "done": done})
		}
		fmt.Fprintf(cmd.OutOrStdout(), "schedule %s %s\n", args[0], done)
		return nil
	}
	c.Flags().StringVar(&note, "note", "", "why, shown in the listing")
	return c
}

func scheduleTriggerCmd(s *Settings) *cobra.Command {
	var wait time.Duration
	var force bool
	c := &cobra.Command{
		Use:   "trigger NAME",
		Short: "Fire a schedule now, under its overlap policy",
		Long: `Fire a schedule now, as if its spec had come due: its overlap policy applies, so with
skip (the default) nothing starts while its previous run still goes. Prints the run it
started, or that the firing was skipped, or pending (a buffering policy holds it until
the previous run ends). A paused schedule is refused unless --force runs it once anyway
(it stays paused).`,
		Example: `  trawler schedule trigger hn-hourly --data .data/dev
  trawler schedule trigger hn-hourly --force
  trawler schedule trigger hn-hourly --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := s.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer cl.Close()
			res, err := engine.TriggerSchedule(cmd.Context(), cl, args[0], force, wait)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if s.JSON {
				return writeJSONTo(out, res)
			}
			switch res.Outcome {
			case "started":
				fmt.Fprintf(out, "schedule %s started run %s; follow it with trawler status %s\n", res.ID, res.RunID, res.RunID)
			case "skipped":
				fmt.Fprintf(out, "schedule %s: firing skipped, its previous run still goes (overlap %s)\n", res.ID, res.Overlap)
			default:
				fmt.Fprintf(out, "schedule %s triggered; no run seen starting yet (overlap %s may hold it until the previous run ends); trawler schedule list shows its last run\n", res.ID, res.Overlap)
			}
			return nil
		},
	}
	c.Flags().DurationVar(&wait, "wait", 10*time.Second, "how long to wait to see the run start or be skipped")
	c.Flags().BoolVar(&force, "force", false, "run a paused schedule once anyway (it stays paused)")
	return c
}

func scheduleBackfillCmd(s *Settings) *cobra.Command {
	var from, to, overlap string
	c := &cobra.Command{
		Use:   "backfill NAME --from TIME --to TIME",
		Short: "Start the runs a schedule would have started between two past times",
		Long: `Start, now, the runs a schedule would have started between --from and --to (RFC 3339
times, both in the past, --to after --from), e.g. after it was paused or created late.
The range must hold at least one firing of the spec and at most 1000. The schedule's
overlap policy applies unless --overlap says otherwise: with skip, firings that come
while the first backfilled run still goes are skipped; buffer-all runs them one after
another.`,
		Example: `  trawler schedule backfill hn-hourly --from 2026-03-01T00:00:00Z --to 2026-03-01T06:00:00Z --data .data/dev
  trawler schedule backfill hn-hourly --from 2026-03-01T00:00:00+01:00 --to 2026-03-02T00:00:00+01:00 --overlap buffer-all --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := engine.ParseBackfillTime("from", from)
			if err != nil {
				return scheduleErr(err)
			}
			t, err := engine.ParseBackfillTime("to", to)
			if err != nil {
				return scheduleErr(err)
			}
			cl, err := s.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer cl.Close()
			res, err := engine.BackfillSchedule(cmd.Context(), cl, args[0], f, t, overlap)
			if err != nil {
				return scheduleErr(err)
			}
			if s.JSON {
				return writeJSONTo(cmd.OutOrStdout(), res)
			}
			spec := fmt.Sprintf("%q", res.Schedule)
			if res.TimeZone != "" {
				spec += " (" + res.TimeZone + ")"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s backfills %d firings of %s from %s to %s (overlap %s)\n",
				res.ID, res.Firings, spec, res.From.Format(time.RFC3339), res.To.Format(time.RFC3339), res.Overlap)
			return nil
		},
	}
	c.Flags().StringVar(&from, "from", "", "start of the range, RFC 3339, e.g. 2026-03-01T00:00:00Z")
	c.Flags().StringVar(&to, "to", "", "end of the range (inclusive), RFC 3339")
	c.Flags().StringVar(&overlap, "overlap", "", "overlap policy of the backfilled firings (default the schedule's): "+strings.Join(engine.OverlapPolicies, "|"))
	return c
}

func scheduleDeleteCmd(s *Settings) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a schedule (runs it already started keep going)",
		Example: `  trawler schedule delete hn-hourly --data .data/dev
  trawler schedule delete hn-hourly --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			if err := engine.DeleteSchedule(cmd.Context(), c, args[0]); err != nil {
				return err
			}
			if s.JSON {
				return writeJSONTo(cmd.OutOrStdout(), map[string]string{"deleted": args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted schedule %s\n", args[0])
			return nil
		},
	}
}
