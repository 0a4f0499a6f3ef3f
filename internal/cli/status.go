package cli

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/capacity"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/polite"
	"github.com/trawlerhq/trawler/internal/recrawl"
	"github.com/trawlerhq/trawler/internal/stream"
	"github.com/trawlerhq/trawler/internal/workflows"
)

func statusCmd(s *Settings) *cobra.Command {
	var limit, hosts int
	var needs bool
	var drain time.Duration
	cmd := &cobra.Command{
		Use:   "status [RUN_ID]",
		Short: "Show one run's progress, or the whole fleet: backlog, rates, failures, budgets, workers",
		Long: `With a RUN_ID: the run's state and per-step counts (pages, items, skipped, retried,
failed, queued), live while it runs, with the first failures and their causes, and the
batches Temporal is retrying with their last error, and the dependencies (a store,
Redis, a resource pool) the run is waiting for: since when, how many inputs wait, and
the last error. A paused run (trawler pause) shows who paused it and since when, a
rerun (trawler rerun) the run whose failures it re-runs. A run never fails because a dependency is down: it waits, retrying with
a backoff that grows to 10 minutes, until it answers again (or until the chain's
max_outage, if it sets one).

Without: per tenant and chain, what the running runs are doing — backlog (inputs queued
or in flight, partitions included), pages per second over the last second and the last
minute, failures by cause, batches being retried, and pages and items spent today
against the budgets (trawler quota); then each worker with the age of its last
heartbeat (a worker silent for more than ~15 s is stuck or gone); per recrawl step
(tenant:task), its planned pages, how many are due now or claimed by a run, how many are
planned how far apart, and the estimated share of changes seen later than the policy's
min; then per host budget used in the last hour (newest first, --hosts of them) the
requests in flight of the concurrency allowed, the pace in force and where it comes from
(declared in the chain, the task's, robots.txt, autothrottle or the default), the
current rate, a fleet-wide pause (until when, and why), and the last 429/503; then the
most recent runs, newest first. --json lists every host budget Redis keeps. Rates,
budgets, hosts and workers need the Redis the workers share (--redis, or --data of a dev
stack).

Each task queue also shows the workers it wants: enough to drain its backlog within
--drain at the rates its tasks' learned needs give a typical worker of the queue (the
trawler_desired_workers metric an autoscaler reads; see docs/tenants.md, Capacity and
autoscaling). --needs lists per task what a batch needs (cores, MB), the live workers
whose capacity covers it, how far it decays when none does, and its batches waiting
for capacity.`,
		Example: `  trawler status --data .data/dev
  trawler status --needs --data .data/dev
  trawler status --json --drain 5m --data .data/dev | jq '.capacity.queues'
  trawler status demo-20261122-101500-a1b2c3 --data .data/dev --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkDrain("drain", drain); err != nil {
				return err
			}
			if hosts < 1 {
				return fmt.Errorf("--hosts %d: give how many host budgets to list, at least 1 (e.g. --hosts 50); --json lists them all", hosts)
			}
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
				if s.Redis != "" {
					rdb, err := s.OpenRedis(0, false)
					if err != nil {
						return err
					}
					beats, err := monitor.NewRecorder(rdb).Workers(cmd.Context())
					rdb.Close()
					if err == nil { // no heartbeats to read: the rest of the status still shows
						st.WaitForWorkers(beats)
					}
				}
				if s.JSON {
					return PrintJSON(st)
				}
				printStatus(st)
				return nil
			}
			var rdb redis.UniversalClient
			if s.Redis != "" {
				// No ping: the overview shows what it can read when Redis is down.
				if rdb, err = s.OpenRedis(0, false); err != nil {
					return err
				}
				defer rdb.Close()
			}
			ov, err := engine.GetOverview(cmd.Context(), c, rdb, time.Second)
			if err != nil {
				return err
			}
			ov.PlanCapacity(capacity.Target{Drain: drain, Min: 1})
			if needs && !s.JSON {
				printNeeds(ov.Capacity)
				return nil
			}
			rows, err := engine.ListRuns(cmd.Context(), c, engine.ListOptions{Limit: limit})
			if err != nil {
				return err
			}
			var budgets []polite.Host
			if rdb != nil {
				if budgets, err = polite.Hosts(cmd.Context(), rdb, 0); err != nil {
					return fmt.Errorf("read host budgets from Redis: %w", err)
				}
			}
			if s.JSON {
				return PrintJSON(map[string]any{"chains": ov.Chains, "tenants": ov.Tenants, "workers": ov.Workers, "tasks": ov.Tasks, "recrawl": ov.Recrawl, "capacity": ov.Capacity, "hosts": budgets, "runs": rows})
			}
			printOverview(ov, rdb != nil)
			printHosts(budgets, hosts, time.Now())
			printDesired(ov.Capacity)
			if len(rows) == 0 {
				fmt.Println("no runs yet; start one with `trawler run FILE`")
			} else {
				fmt.Println("recent runs:")
			}
			for _, r := range rows {
				state := r.State
				if r.Paused != nil {
					state = "paused"
				}
				line := fmt.Sprintf("%-44s %-10s %s", r.RunID, state, r.Started.Local().Format(time.DateTime))
				if r.RerunOf != "" {
					line += "  rerun of " + r.RerunOf
				}
				fmt.Println(line)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many runs to list")
	cmd.Flags().IntVar(&hosts, "hosts", 20, "how many host budgets used in the last hour to list (--json lists all)")
	cmd.Flags().BoolVar(&needs, "needs", false, "list per task its learned needs, the workers that qualify, its decay and batches waiting for capacity")
	cmd.Flags().DurationVar(&drain, "drain", engine.DefaultDrain, "the autoscaling target: workers wanted to drain each queue's backlog within this")
	return cmd
}

func printOverview(ov *engine.Overview, withRedis bool) {
	if len(ov.Chains) == 0 {
		fmt.Println("nothing running")
	} else {
		fmt.Printf("%-12s %-14s %4s %8s %8s %8s %8s %8s  %s\n", "tenant", "chain", "runs", "backlog", "pages/s", "/s 1min", "failed", "today", "failures by cause")
		for _, l := range ov.Chains {
			causes := make([]string, 0, len(l.FailuresByCause))
			for c, n := range l.FailuresByCause {
				causes = append(causes, fmt.Sprintf("%s %d", c, n))
			}
			sort.Strings(causes)
			fmt.Printf("%-12s %-14s %4d %8d %8.1f %8.1f %8d %8d  %s\n", l.Tenant, l.Chain, l.Runs, l.Backlog, l.Rate1s, l.Rate1m, l.Failures, l.Today.Pages, strings.Join(causes, ", "))
			if l.Silent > 0 {
				fmt.Printf("    %d workflow(s) did not answer in 3 s: no worker polls their task queue, or the workers are overloaded\n", l.Silent)
			}
			for _, r := range l.Retrying {
				fmt.Printf("    retrying %s\n", r)
			}
			printOutages(l.Outages)
		}
	}
	for _, t := range ov.Tenants {
		fmt.Printf("tenant %s today: %d pages, %d items (%s)\n", t.Tenant, t.Today.Pages, t.Today.Items, describeQuota(t.Quota))
	}
	if !withRedis {
		fmt.Println("(no Redis: pass --redis or --data for 1-minute rates, budgets and worker heartbeats)")
		return
	}
	if len(ov.Tasks) > 0 {
		fmt.Printf("%-24s %10s %10s %12s  (per page, running averages)\n", "task", "ms", "KB", "CPU ms")
		for _, n := range ov.Tasks {
			fmt.Printf("%-24s %10.1f %10.1f %12.1f\n", n.Task, n.MSPerPage, n.KBPerPage, n.CPUMSPage)
		}
	}
	printSubscriptions(ov.Subscriptions)
	printRecrawl(ov.Recrawl)
	if len(ov.Workers) == 0 {
		fmt.Println("no worker has reported in; start one with `trawler worker`")
	}
	for _, w := range ov.Workers {
		state := "alive"
		if w.AgeS > 15 {
			state = "SILENT"
		}
		sites := ""
		if len(w.Sites) > 0 {
			sites = "  polls " + strings.Join(w.Sites, ", ")
		}
		fmt.Printf("worker %-28s queue %-12s last heartbeat %5.1fs ago  %s%s\n", w.Identity, w.TaskQueue, w.AgeS, state, sites)
	}
}

// printSubscriptions shows each stream subscription's received/limit and the shared
// upstream connection it rides on.
func printSubscriptions(subs []stream.Status) {
	if len(subs) == 0 {
		return
	}
	fmt.Printf("%-12s %-14s %-10s %14s  %-15s %s\n", "tenant", "chain", "step", "received/limit", "state", "connection (its query, subscriptions)")
	for _, s := range subs {
		limit, state, query := "-", "between windows", "everything"
		if s.Limit > 0 {
			limit = fmt.Sprint(s.Limit)
		}
		if s.Reading {
			state = "reading"
		}
		if len(s.Query) > 0 {
			query = strings.Join(s.Query, ",")
		}
		fmt.Printf("%-12s %-14s %-10s %14s  %-15s %s (q=%s, %d subs) %s\n", s.Tenant, s.Chain, s.Step,
			fmt.Sprintf("%d/%s", s.Received, limit), state, s.Conn, query, s.Subs, s.Source)
		if s.Error != "" {
			fmt.Printf("    connection error: %s\n", s.Error)
		}
	}
}

// printRecrawl shows, per recrawl step, its planned pages, how many are due, how far
// apart their visits are planned and the estimated share of changes seen late.
func printRecrawl(sts []recrawl.Stats) {
	if len(sts) == 0 {
		return
	}
	head := make([]string, len(recrawl.IntervalBounds)+1)
	for i, b := range recrawl.IntervalBounds {
		head[i] = "≤" + crawl.FormatDuration(b)
	}
	head[len(head)-1] = ">" + crawl.FormatDuration(recrawl.IntervalBounds[len(recrawl.IntervalBounds)-1])
	fmt.Printf("%-28s %7s %6s %6s  %-30s %9s %8s\n", "recrawl (tenant:task)", "pages", "due", "leased", "intervals "+strings.Join(head, " "), "est. late", "visits/h")
	for _, st := range sts {
		counts := make([]string, len(st.Intervals))
		for i, iv := range st.Intervals {
			counts[i] = fmt.Sprint(iv.Pages)
		}
		fmt.Printf("%-28s %7d %6d %6d  %-30s %8.1f%% %8.1f\n", st.Namespace, st.Pages, st.Due, st.Leased, strings.Join(counts, " "), 100*st.Late, st.VisitsPerHour)
	}
}

// printHosts shows the host budgets used in the last hour, newest first, at most rows of
// them: requests in flight of the concurrency allowed, the pace in force (as a chain
// writes a rate) and its source, the current rate, and a pause or the last 429/503.
func printHosts(hosts []polite.Host, rows int, now time.Time) {
	recent := slices.DeleteFunc(slices.Clone(hosts), func(h polite.Host) bool { return now.Sub(h.SeenAt) > time.Hour })
	if len(recent) == 0 {
		return
	}
	fmt.Printf("%-32s %9s %8s %-12s %8s  %s\n", "host (budget)", "in flight", "limit", "from", "rate", "paused · last 429/503")
	for _, h := range recent[:min(rows, len(recent))] {
		limit := "-"
		if h.Interval > 0 {
			limit = crawl.FormatRate(float64(time.Second) / float64(h.Interval))
		}
		rate := "0/s"
		if h.Rate > 0 {
			rate = crawl.FormatRate(h.Rate)
		}
		var trouble []string
		if !h.PausedUntil.IsZero() {
			trouble = append(trouble, fmt.Sprintf("PAUSED until %s (%s more): %s", h.PausedUntil.Local().Format(time.TimeOnly), crawl.ShortDuration(h.PausedUntil.Sub(now).Round(time.Second)), h.Reason))
		}
		if !h.LastBusy.IsZero() && (h.PausedUntil.IsZero() || h.Busy != h.Reason) {
			trouble = append(trouble, fmt.Sprintf("last 429/503 %s ago: %s", crawl.ShortDuration(now.Sub(h.LastBusy).Round(time.Second)), h.Busy))
		}
		row := fmt.Sprintf("%-32s %9s %8s %-12s %8s  %s", h.Key, fmt.Sprintf("%d/%d", h.InFlight, h.Concurrency), limit, h.Source, rate, strings.Join(trouble, "; "))
		fmt.Println(strings.TrimRight(row, " "))
	}
	if more := len(recent) - rows; more > 0 {
		fmt.Printf("… %d more (--hosts %d)\n", more, len(recent))
	}
}

func printStatus(st *engine.Status) {
	state := st.State
	if p := st.Progress; p != nil && p.Done && p.Outcome != workflows.OutcomeCompleted {
		state += ", " + describeOutcome(p.Outcome, p.Violations)
	}
	if st.Paused != nil {
		state = fmt.Sprintf("paused by %s since %s (%s ago); `trawler resume %s` goes on", st.Paused.By,
			st.Paused.Since.Local().Format(time.DateTime), time.Since(st.Paused.Since).Round(time.Second), st.RunID)
	}
	fmt.Printf("run %s: %s (started %s)\n", st.RunID, state, st.Started.Local().Format(time.DateTime))
	if st.RerunOf != "" {
		fmt.Printf("  rerun of %s: its failed inputs, run again\n", st.RerunOf)
	}
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
	if len(st.Waiting) > 0 {
		fmt.Printf("  waiting for a worker: %d batch(es):\n", len(st.Waiting))
		for _, w := range st.Waiting {
			fmt.Printf("    %s\n", w)
		}
	}
	p := st.Progress
	if p == nil {
		return
	}
	// duplicates: inputs handed to the step again in the run and not fetched again
	fmt.Printf("  %-12s %8s %8s %9s %8s %10s %8s %8s %8s %8s\n", "step", "pages", "items", "unchanged", "skipped", "duplicates", "retried", "failed", "queued", "due")
	for _, s := range p.Steps {
		fmt.Printf("  %-12s %8d %8d %9d %8d %10d %8d %8d %8d %8d\n", s.ID, s.Pages, s.Items, s.Unchanged, s.Skipped, s.DuplicatesSkipped, s.Retried, s.Failed, s.Queued+s.InFlight, s.Due)
	}
	printLinksNotFollowed(p.Steps)
	fmt.Printf("  batches %d, partitions finished %d, running %d\n", p.Batches, p.Partitions, p.Running)
	if p.Reason != "" {
		fmt.Printf("  ended: %s\n", p.Reason)
	}
	printOutages(p.Outages)
	printViolations(p.Violations)
	if len(p.Retrying) > 0 {
		fmt.Printf("  retrying %d input(s), last error of each:\n", len(p.Retrying))
		for _, f := range p.Retrying {
			printFailure(os.Stdout, f)
		}
	}
	printFailures(os.Stdout, p.Failures, p.FailuresTotal)
}

// printOutages names each dependency work waits for, since when, how many inputs wait,
// and its last error. The run goes on by itself once the dependency answers again.
func printOutages(outs []workflows.Outage) {
	for _, o := range outs {
		fmt.Printf("    WAITING for %s: down since %s (%s), %d input(s) waiting, steps %s\n      last error: %s\n",
			o.Dependency, o.Since.Local().Format(time.DateTime), time.Since(o.Since).Round(time.Second), o.Waiting,
			strings.Join(o.Steps, ", "), o.Cause)
	}
}

func printFailures(w *os.File, fs []crawl.Failure, total int) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(w, "  failures (%d shown of %d):\n", len(fs), total)
	for _, f := range fs {
		printFailure(w, f)
	}
}

// printFailure is one given-up input: its step, its cause from the closed set, the
// attempts made and the error.
func printFailure(w *os.File, f crawl.Failure) {
	fmt.Fprintf(w, "    [%s] %s after %d attempt(s): %s\n", f.Step, cmp.Or(f.Class, crawl.CauseOther), f.Attempts, f.Cause)
}

// printLinksNotFollowed says, for the steps whose pages left links unfollowed (a
// generic.site crawl), how many were out of scope and how many fell into traps.
func printLinksNotFollowed(steps []workflows.StepStats) {
	for _, s := range steps {
		if s.OutOfScope+s.TrapDropped > 0 {
			fmt.Printf("  %s: links not followed: %d out of scope, %d dropped as crawler traps%s\n", s.ID, s.OutOfScope, s.TrapDropped, byRule(s.TrapRules))
		}
	}
}

// byRule is " (calendar 10, repeat 2)": counts by rule, most first, for a line of status.
func byRule(counts map[string]int) string {
	if len(counts) == 0 {
		return ""
	}
	rules := slices.Collect(maps.Keys(counts))
	slices.SortFunc(rules, func(a, b string) int { return cmp.Or(counts[b]-counts[a], strings.Compare(a, b)) })
	parts := make([]string, len(rules))
	for i, r := range rules {
		parts[i] = fmt.Sprintf("%s %d", r, counts[r])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
