package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/events"
	"github.com/trawlerhq/trawler/internal/external"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/storage"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// knownSinks are the sink names chain files may use.
var knownSinks = engine.KnownSinks

func LoadChain(file string, data []byte, sets []string) (*crawl.Plan, error) {
	return engine.LoadChainVars(file, data, sets, StackVars)
}

// stackVars are the running stack's addresses that chain files name as ${demo_site},
// ${redis} …: --data's endpoints.json, read by settings.resolve before any chain loads,
// or the stack `trawler demo` and the benchmarks start themselves.
var StackVars map[string]string

// loadChainFile reads, validates and compiles a chain file, with the stack's addresses
// of --data for its variables.
func (s *Settings) loadChainFile(ctx context.Context, path string, sets []string) (*crawl.Plan, error) {
	if err := s.Resolve(); err != nil {
		return nil, err
	}
	data, err := readChainFile(ctx, path)
	if err != nil {
		return nil, err
	}
	return engine.LoadChainFile(path, data, sets, StackVars)
}

// maxChainFile bounds what is read of a chain file. A chain is a few KB of YAML; more
// than this is a device, a log or a data file named by mistake (/dev/zero never ends).
const maxChainFile = 8 << 20

// readChainFile reads a chain file of at most maxChainFile bytes. It gives up when ctx
// ends (Ctrl-C, SIGTERM), also while a named pipe waits for a writer that never comes.
func readChainFile(ctx context.Context, path string) ([]byte, error) {
	type read struct {
		data []byte
		err  error
	}
	done := make(chan read, 1)
	go func() { // open and read block on a pipe; the command must not
		f, err := os.Open(path)
		if err != nil {
			done <- read{err: err}
			return
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxChainFile+1))
		done <- read{data, err}
	}()
	select {
	case r := <-done:
		if r.err == nil && len(r.data) > maxChainFile {
			return nil, fmt.Errorf("%s: more than %d MiB; a chain file is a few KB of YAML: name the chain file itself", path, maxChainFile>>20)
		}
		return r.data, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: stopped before the file was read (%v); a named pipe is read only once something writes to it", path, context.Cause(ctx))
	}
}

func runCmd(s *Settings) *cobra.Command {
	var sets []string
	var wait, allowPartial, noWorkerCheck bool
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Start a chain run on Temporal (and wait for it with --wait)",
		Long: `Start a chain run. Workers of the same task queue pick it up (` + "`trawler dev`" + ` runs one;
` + "`trawler worker`" + ` runs more). Without --wait it prints the run id and returns; follow it with
` + "`trawler status RUN_ID`" + `.

--set overrides a param for one run: step.param=value for one step, param=value for every
step whose task declares it. Values are YAML: numbers and booleans keep their type.

Before starting, run checks the workers' heartbeats (in the Redis of --redis or --data)
and refuses a chain with a task that no live worker serves on its queue, naming the
task, the queue and how to start such a worker; --no-worker-check starts it anyway.

With --wait, the exit code says how the run went, so cron jobs and CI can tell:
  0  completed: every input succeeded
  2  partial: some inputs failed (exit 0 with --allow-partial)
  3  failed: nothing was stored, or every input of a step failed
  4  canceled
  1  the run could not be started or followed`,
		Example: `  trawler run examples/demo.yaml --data .data/dev --wait
  trawler run examples/demo.yaml --data .data/dev --set feed.pages=10 --wait --json
  trawler run examples/hackernews.yaml --set feed.list=newstories --set feed.limit=5`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			given := *s
			plan, err := s.loadChainFile(cmd.Context(), args[0], sets)
			if err != nil {
				return err
			}
			if !noWorkerCheck {
				if err := s.checkWorkers(cmd.Context(), plan); err != nil {
					return err
				}
			}
			c, err := s.connect(cmd.Context())
			if err != nil {
				return err
			}
			if !wait {
				defer c.Close()
				if err := s.registerNotify(cmd.Context(), plan); err != nil {
					return err
				}
				id, err := engine.Start(cmd.Context(), c, plan, engine.RunOptions{TaskQueue: s.TaskQueue})
				if err != nil {
					return err
				}
				if s.JSON {
					return PrintJSON(map[string]string{"chain": plan.Chain, "run_id": id})
				}
				fmt.Printf("started %s\n  follow it: trawler status %s\n", id, id)
				return nil
			}
			f := &follower{given: given, s: s, c: c}
			defer func() { f.c.Close() }()
			sinks, err := openSinks(s)
			if err != nil {
				return err
			}
			defer func() { sinks.Close() }()
			opened := s.stores()
			res, err := StartAndWait(cmd.Context(), s, c, plan, f.wait)
			if err != nil {
				return err
			}
			if f.refresh(); s.stores() != opened { // the stack restarted on other ports
				sinks.Close()
				if sinks, err = openSinks(s); err != nil {
					return err
				}
			}
			if err := res.ReadBack(cmd.Context(), plan, sinks); err != nil {
				return err
			}
			if err := res.Print(s.JSON); err != nil {
				return err
			}
			return res.exit(allowPartial)
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override a param: step.param=value or param=value (repeatable)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the run to finish, showing progress, then print a summary; the exit code tells the outcome")
	cmd.Flags().BoolVar(&allowPartial, "allow-partial", false, "with --wait, exit 0 when some inputs failed (a partial run); a failed run still exits 3")
	cmd.Flags().BoolVar(&noWorkerCheck, "no-worker-check", false, "start even when no live worker serves a task of the chain")
	return cmd
}

// result is the summary a finished run prints; its JSON form is the last line of
// `trawler demo --json` and `trawler run --wait --json`.
type Result struct {
	Chain     string                `json:"chain"`
	RunID     string                `json:"run_id"`
	Pages     int                   `json:"pages"`
	Items     int                   `json:"items"`
	Skipped   int                   `json:"skipped"`
	Unchanged int                   `json:"unchanged"`
	Failed    int                   `json:"failed"`
	DurationS float64               `json:"duration_s"`
	Sinks     map[string]int        `json:"sinks"`
	Steps     []workflows.StepStats `json:"steps"`
	Failures  []crawl.Failure       `json:"failures,omitempty"`
	// Status is "completed", or "quota_reached" when a budget stopped the run (Quota),
	// or "outage" when a dependency outlasted max_outage.
	Status string `json:"status"`
	Quota  string `json:"quota,omitempty"`
	// Outcome is completed, completed_with_violations, partial, failed or canceled
	// (workflows.Outcome*); the exit code of `trawler run --wait` follows it.
	Outcome string `json:"outcome"`
	// Violations are the run's broken expectations (`expect:` in the chain).
	Violations []workflows.Violation `json:"violations,omitempty"`

	start time.Time // when the run was started: a log's part of it begins after
}

// sinceCounter is a sink that counts a run's records from a time on (Kafka).
type sinceCounter interface {
	CountSince(ctx context.Context, runID string, since time.Time) (int, error)
}

func RunAndWait(ctx context.Context, s *Settings, c client.Client, plan *crawl.Plan, sinks storage.Set) (*Result, error) {
	res, err := StartAndWait(ctx, s, c, plan, WaitOn(c))
	if err != nil {
		return nil, err
	}
	return res, res.ReadBack(ctx, plan, sinks)
}

// registerNotify makes the chain's notify: webhooks (and only them, of those its file
// configured) receive its events, when there is a Redis to keep them in.
func (s *Settings) registerNotify(ctx context.Context, plan *crawl.Plan) error {
	if s.Redis == "" {
		if len(plan.Notify) > 0 {
			return fmt.Errorf("chain %s has notify: webhooks, which are kept in Redis: pass --redis URL (or --data of a dev stack)", plan.Chain)
		}
		return nil
	}
	rdb, err := s.OpenRedis(0, false)
	if err != nil {
		return err
	}
	defer rdb.Close()
	ws := make([]events.Webhook, len(plan.Notify))
	for i, n := range plan.Notify {
		ws[i] = events.Webhook{URL: n.URL, SecretEnv: n.SecretEnv, Events: n.Events, Format: n.Format}
	}
	return events.SetChainWebhooks(ctx, rdb, plan.Tenant, plan.Chain, ws)
}

// waitFunc waits for a run to end, reporting its progress.
type waitFunc func(ctx context.Context, runID string, onProgress func(*workflows.Summary)) (*workflows.Summary, error)

// waitOn waits with the one client c, for a stack that stays where it is.
func WaitOn(c client.Client) waitFunc {
	return func(ctx context.Context, id string, onProgress func(*workflows.Summary)) (*workflows.Summary, error) {
		return engine.Wait(ctx, c, id, onProgress)
	}
}

// startAndWait starts a run of plan and waits for it with wait, showing progress.
func StartAndWait(ctx context.Context, s *Settings, c client.Client, plan *crawl.Plan, wait waitFunc) (*Result, error) {
	start := time.Now()
	if err := s.registerNotify(ctx, plan); err != nil {
		return nil, err
	}
	id, err := engine.Start(ctx, c, plan, engine.RunOptions{TaskQueue: s.TaskQueue})
	if err != nil {
		return nil, err
	}
	bar := newProgress(s.JSON, id)
	sum, err := wait(ctx, id, bar.update)
	bar.finish()
	if temporal.IsCanceledError(err) {
		return &Result{Chain: plan.Chain, RunID: id, DurationS: RoundTo(time.Since(start).Seconds(), 2), Sinks: map[string]int{},
			Status: workflows.OutcomeCanceled, Outcome: workflows.OutcomeCanceled, start: start}, nil
	}
	if err != nil {
		return nil, err
	}
	pages, items, skipped, failed := sum.Totals()
	res := &Result{Chain: plan.Chain, RunID: id, Pages: pages, Items: items, Skipped: skipped, Unchanged: sum.Unchanged(), Failed: failed,
		DurationS: RoundTo(time.Since(start).Seconds(), 2), Sinks: map[string]int{}, Steps: sum.Steps, Failures: sum.Failures,
		Status: cmp.Or(sum.Status, workflows.StatusCompleted), Quota: sum.Quota, Outcome: cmp.Or(sum.Outcome, workflows.OutcomeOf(sum)), Violations: sum.Violations, start: start}
	return res, nil
}

// readBack counts the records of the run in each store it wrote to (what the summary's
// sinks show: read from the store, not what the workers claim).
func (res *Result) ReadBack(ctx context.Context, plan *crawl.Plan, sinks storage.Set) error {
	used := map[string]bool{} // count the stores the run wrote to, not every one the worker has
	for _, st := range plan.Steps {
		for _, name := range st.Store {
			used[name] = true
			if name == crawl.StoreAll { // every store: read back each one this command has
				for _, n := range sinks.Names() {
					if !slices.Contains(external.SinkNames(), n) {
						used[n] = true
					}
				}
			}
		}
	}
	for _, name := range sinks.Names() {
		if !used[name] {
			continue
		}
		var n int
		var err error
		if sc, ok := sinks[name].(sinceCounter); ok { // a log holding every run: read this run's part
			n, err = sc.CountSince(ctx, res.RunID, res.start.Add(-10*time.Minute))
		} else {
			n, err = sinks[name].Count(ctx, res.RunID)
		}
		if err != nil {
			return fmt.Errorf("read back %s: %w", name, err)
		}
		res.Sinks[name] = n
	}
	return nil
}

// Exit codes of `trawler run --wait` per outcome (completed exits 0).
var outcomeExit = map[string]exitError{workflows.OutcomePartial: 2, workflows.OutcomeFailed: 3, workflows.OutcomeCanceled: 4, workflows.OutcomeViolations: 5}

// exit is the error that ends the command with the code of the run's outcome; nil for a
// completed run, and for a partial one when allowPartial.
func (r *Result) exit(allowPartial bool) error {
	code, ok := outcomeExit[r.Outcome]
	if !ok || allowPartial && r.Outcome == workflows.OutcomePartial {
		return nil
	}
	return code
}

func (r *Result) Print(asJSON bool) error {
	if asJSON {
		return PrintJSON(r)
	}
	if r.Outcome == workflows.OutcomeCanceled {
		fmt.Printf("\nrun %s of chain %s was canceled after %.1fs\n", r.RunID, r.Chain, r.DurationS)
		return nil
	}
	fmt.Printf("\nrun %s of chain %s finished in %.1fs: %s\n", r.RunID, r.Chain, r.DurationS, describeOutcome(r.Outcome, r.Violations))
	printViolations(r.Violations)
	if r.Status == workflows.StatusQuotaReached {
		skipped := 0
		for _, st := range r.Steps {
			skipped += st.QuotaSkipped
		}
		fmt.Printf("  stopped early, %s: %d inputs left unrun (raise the chain's `quota:` or `trawler quota set` for the tenant)\n", r.Quota, skipped)
	}
	fmt.Printf("  %-12s %8s %8s %9s %8s %10s %8s %8s\n", "step", "pages", "items", "unchanged", "skipped", "duplicates", "retried", "failed")
	dups := 0
	for _, st := range r.Steps {
		fmt.Printf("  %-12s %8d %8d %9d %8d %10d %8d %8d\n", st.ID, st.Pages, st.Items, st.Unchanged, st.Skipped, st.DuplicatesSkipped, st.Retried, st.Failed)
		dups += st.DuplicatesSkipped
	}
	fmt.Printf("  %-12s %8d %8d %9d %8d %10d %8s %8d\n", "total", r.Pages, r.Items, r.Unchanged, r.Skipped, dups, "", r.Failed)
	printLinksNotFollowed(r.Steps)
	names := make([]string, 0, len(r.Sinks))
	for n := range r.Sinks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Printf("  sink %s holds %d records of this run\n", n, r.Sinks[n])
	}
	if len(r.Failures) > 0 {
		fmt.Printf("  failures (%d shown of %d):\n", len(r.Failures), r.Failed)
		for _, f := range r.Failures {
			printFailure(os.Stdout, f)
		}
	}
	return nil
}

func PrintJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}

func RoundTo(v float64, digits int) float64 {
	p := 1.0
	for i := 0; i < digits; i++ {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}

// progress shows a run's progress: a bar on a terminal, JSON lines with --json, and
// nothing when stderr is not a terminal (logs stay clean).
type progress struct {
	json  bool
	tty   bool
	runID string
	start time.Time
	last  string
	shown map[string]bool // retrying lines already printed
}

func newProgress(asJSON bool, runID string) *progress {
	fi, err := os.Stderr.Stat()
	tty := err == nil && fi.Mode()&os.ModeCharDevice != 0
	return &progress{json: asJSON, tty: tty, runID: runID, start: time.Now(), shown: map[string]bool{}}
}

func (p *progress) update(s *workflows.Summary) {
	pages, items, _, failed := s.Totals()
	queued := 0
	for _, st := range s.Steps {
		queued += st.Queued + st.InFlight
	}
	elapsed := time.Since(p.start).Seconds()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(pages) / elapsed
	}
	if p.json {
		_ = PrintJSON(map[string]any{"progress": map[string]any{"run_id": p.runID, "pages": pages, "items": items,
			"failed": failed, "queued": queued, "partitions_running": s.Running, "pages_per_s": RoundTo(rate, 1), "done": s.Done,
			"retrying": s.Retrying}})
		return
	}
	p.retrying(s.Retrying)
	if !p.tty {
		return
	}
	const width = 24
	frac := 1.0
	if total := pages + failed + queued; total > 0 && !s.Done {
		frac = float64(pages+failed) / float64(total)
	}
	filled := int(frac * width)
	var steps []string
	for _, st := range s.Steps {
		steps = append(steps, fmt.Sprintf("%s %d", st.ID, st.Pages))
	}
	line := fmt.Sprintf("\r[%s%s] %s | items %d failed %d queued %d | %.0f pages/s ",
		strings.Repeat("#", filled), strings.Repeat(" ", width-filled), strings.Join(steps, " · "), items, failed, queued, rate)
	if line != p.last {
		fmt.Fprint(os.Stderr, line)
		p.last = line
	}
}

// retrying prints each input waiting to be retried, once per attempt, with the error
// of its last attempt: a run that only retries shows why, on a terminal or in a log.
func (p *progress) retrying(rs []crawl.Failure) {
	for _, f := range rs {
		line := fmt.Sprintf("retrying [%s] %s after %d attempt(s): %s", f.Step, cmp.Or(f.Class, crawl.CauseOther), f.Attempts, f.Cause)
		if p.shown[line] {
			continue
		}
		p.shown[line] = true
		if p.tty && p.last != "" {
			fmt.Fprint(os.Stderr, "\r\033[K") // the bar is drawn again below
			p.last = ""
		}
		fmt.Fprintln(os.Stderr, line)
	}
}

func (p *progress) finish() {
	if p.tty && !p.json && p.last != "" {
		fmt.Fprintln(os.Stderr)
	}
}

// checkWorkers refuses a run that no live worker can serve, from the heartbeats in the
// workers' Redis; without a Redis there are no heartbeats to read and nothing is checked.
func (s *Settings) checkWorkers(ctx context.Context, plan *crawl.Plan) error {
	if s.Redis == "" {
		return nil
	}
	rdb, err := s.OpenRedis(0, false)
	if err != nil {
		return err
	}
	defer rdb.Close()
	beats, err := monitor.NewRecorder(rdb).Workers(ctx)
	if err != nil {
		return fmt.Errorf("check the workers' heartbeats in Redis (--no-worker-check to start anyway): %w", err)
	}
	missing := engine.Unserved(beats, plan, cmp.Or(s.TaskQueue, workflows.DefaultTaskQueue))
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("chain %s would wait for workers:\n  %s\n(--no-worker-check starts it anyway)", plan.Chain, strings.Join(missing, "\n  "))
}

// describeOutcome says in words how a finished run went.
func describeOutcome(outcome string, violations []workflows.Violation) string {
	switch outcome {
	case workflows.OutcomePartial:
		return "PARTIAL, some inputs failed"
	case workflows.OutcomeFailed:
		if slices.ContainsFunc(violations, func(v workflows.Violation) bool { return v.Fail }) {
			return "FAILED, it broke an expectation whose on_violation is fail"
		}
		return "FAILED, nothing was stored or every input of a step failed"
	case workflows.OutcomeViolations:
		return "COMPLETED WITH VIOLATIONS, its data broke the chain's expectations"
	}
	return outcome
}

// printViolations lists a run's broken expectations, one a line.
func printViolations(vs []workflows.Violation) {
	if len(vs) == 0 {
		return
	}
	fmt.Printf("  broken expectations:\n")
	for _, v := range vs {
		fmt.Printf("    step %s: %s\n", v.Step, v.Detail)
	}
}
