package engine

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// RerunOptions choose which failed inputs of a run Rerun runs again.
type RerunOptions struct {
	Steps  []string      // only failures of these step ids; none: every step
	Causes []crawl.Cause // only failures of these causes; none: every cause
	// FailureLog is the jsonl failure log the run's workers wrote
	// (<out>/_failures.jsonl); it completes the run's record, which keeps a sample
	// of its failures (tuning failure_sample). "" reads the record alone.
	FailureLog string
}

// RerunResult is the run Rerun started.
type RerunResult struct {
	RunID  string         `json:"run_id"`
	Of     string         `json:"rerun_of"`
	Chain  string         `json:"chain"`
	Inputs int            `json:"inputs"`
	Steps  map[string]int `json:"steps"` // inputs per step id
}

// Rerun starts a run of the same chain version (the plan the run was started with:
// its dedup, budgets and tuning) over the inputs the run gave up on, each at the step
// that failed it; what they lead to follows through the chain as usual. The new run
// names the old one in its memo (rerun_of).
func Rerun(ctx context.Context, c client.Client, runID string, o RerunOptions) (*RerunResult, error) {
	d, err := c.DescribeWorkflowExecution(ctx, runID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, fmt.Errorf("%w %q on this Temporal namespace (list runs with `trawler status`)", ErrNoRun, runID)
	}
	if err != nil {
		return nil, fmt.Errorf("rerun %s: %w", runID, err)
	}
	status := d.GetWorkflowExecutionInfo().GetStatus()
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, &RunStateError{fmt.Sprintf("run %s is still running: rerun its failures once it has ended (`trawler status %s` shows when)", runID, runID)}
	}
	in, err := startInput(ctx, c, runID)
	if err != nil {
		return nil, err
	}
	steps := map[string]int{}
	for i, s := range in.Plan.Steps {
		steps[s.ID] = i
	}
	for _, s := range o.Steps {
		if _, ok := steps[s]; !ok {
			return nil, fmt.Errorf("--step %q: run %s's chain %s has no such step; its steps are %s", s, runID, in.Plan.Chain, strings.Join(stepIDs(&in.Plan), ", "))
		}
	}
	for _, cs := range o.Causes {
		if !slices.Contains(crawl.Causes, cs) {
			names := make([]string, len(crawl.Causes))
			for i, k := range crawl.Causes {
				names[i] = string(k)
			}
			return nil, fmt.Errorf("--cause %q: no such cause; the causes are %s", cs, strings.Join(names, ", "))
		}
	}
	failed, err := failuresOf(ctx, c, runID, status, o.FailureLog)
	if err != nil {
		return nil, err
	}
	if len(failed) == 0 {
		return nil, &RunStateError{fmt.Sprintf("run %s has no failed inputs to re-run", runID)}
	}
	res := &RerunResult{Of: runID, Chain: in.Plan.Chain, Steps: map[string]int{}}
	var queue []workflows.Pending
	for _, f := range failed {
		if (len(o.Steps) > 0 && !slices.Contains(o.Steps, f.Step)) || (len(o.Causes) > 0 && !slices.Contains(o.Causes, f.Class)) {
			continue
		}
		i, ok := steps[f.Step]
		if !ok {
			continue // not a step of this plan: a record this run cannot have written
		}
		input := f.Input
		input.Claim = ""
		queue = append(queue, workflows.Pending{Step: i, Work: crawl.Work{Input: input}})
		res.Steps[f.Step]++
	}
	if len(queue) == 0 {
		return nil, &RunStateError{fmt.Sprintf("run %s has no failed inputs%s; its failures are %s", runID, filterText(o), failureCounts(failed))}
	}
	res.Inputs = len(queue)
	res.RunID, err = Start(ctx, c, &in.Plan, RunOptions{TaskQueue: in.TaskQueue, Tuning: in.Tuning, Queue: queue, RerunOf: runID})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// startInput reads the input a run was started with from the first event of its
// history (after continue-as-new, that of its latest execution: the same plan).
func startInput(ctx context.Context, c client.Client, runID string) (*workflows.ChainInput, error) {
	it := c.GetWorkflowHistory(ctx, runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return nil, fmt.Errorf("%w %q on this Temporal namespace (list runs with `trawler status`)", ErrNoRun, runID)
	}
	ev, err := it.Next()
	if err != nil {
		return nil, fmt.Errorf("read the history of run %s: %w", runID, err)
	}
	var in workflows.ChainInput
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil || converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &in) != nil || len(in.Plan.Steps) == 0 {
		return nil, fmt.Errorf("run %q is not a chain run: its history does not start with a chain's plan", runID)
	}
	return &in, nil
}

// Failures are the inputs a finished run gave up on, from its record and from the jsonl
// failure log at log ("": none), each once.
func Failures(ctx context.Context, c client.Client, runID, log string) ([]crawl.Failure, error) {
	return failuresOf(ctx, c, runID, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, log)
}

// failuresOf gathers the inputs a run gave up on: those its result records and those
// of the failure log, each once. A run that recorded more failures than both hold is
// refused rather than re-run in part.
func failuresOf(ctx context.Context, c client.Client, runID string, status enumspb.WorkflowExecutionStatus, log string) ([]crawl.Failure, error) {
	var out []crawl.Failure
	seen := map[string]bool{}
	add := func(f crawl.Failure) {
		in, _ := json.Marshal(f.Redacted().Input) // the log holds inputs redacted
		k := f.Step + "\x00" + string(in)
		if !seen[k] {
			seen[k] = true
			out = append(out, f)
		}
	}
	total, recorded := -1, 0
	if status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		var sum workflows.Summary
		if err := c.GetWorkflow(ctx, runID, "").Get(ctx, &sum); err != nil {
			return nil, fmt.Errorf("read the result of run %s: %w", runID, err)
		}
		total, recorded = sum.FailuresTotal, len(sum.Failures)
		for _, f := range sum.Failures {
			add(f)
		}
	}
	inLog := 0
	if log != "" {
		n, err := readFailureLog(log, runID, add)
		if err != nil {
			return nil, err
		}
		inLog = n
	}
	if total > len(out) {
		return nil, fmt.Errorf("run %s gave up on %d inputs, but its record keeps %d and %s holds %d of them: give --out the directory its workers wrote %s to, so all of them are re-run",
			runID, total, recorded, cmp.Or(log, "no failure log"), inLog, "_failures.jsonl")
	}
	return out, nil
}

// readFailureLog calls add with each failure of the run in the jsonl failure log at
// path and returns how many there were; a missing log holds none.
func readFailureLog(path, runID string, add func(crawl.Failure)) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the failure log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		var rec struct {
			RunID string `json:"run_id"`
			crawl.Failure
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			continue // a torn last line of a killed writer
		}
		if rec.RunID == runID {
			add(rec.Failure)
			n++
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read the failure log %s: %w", path, err)
	}
	return n, nil
}

func stepIDs(p *crawl.Plan) []string {
	ids := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		ids[i] = s.ID
	}
	return ids
}

// filterText says which failures a rerun asked for.
func filterText(o RerunOptions) string {
	var parts []string
	if len(o.Steps) > 0 {
		parts = append(parts, "of step "+strings.Join(o.Steps, " or "))
	}
	if len(o.Causes) > 0 {
		cs := make([]string, len(o.Causes))
		for i, c := range o.Causes {
			cs[i] = string(c)
		}
		parts = append(parts, "with cause "+strings.Join(cs, " or "))
	}
	return " " + strings.Join(parts, " ")
}

// failureCounts sums failures by step and cause: "story http_5xx 10, feed timeout 1".
func failureCounts(fs []crawl.Failure) string {
	n := map[string]int{}
	for _, f := range fs {
		n[f.Step+" "+string(cmp.Or(f.Class, crawl.CauseOther))]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, n[k])
	}
	return strings.Join(parts, ", ")
}
