package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// Status is a run's state and progress.
type Status struct {
	RunID    string             `json:"run_id"`
	State    string             `json:"state"` // running, completed, failed, canceled, terminated, timed_out
	Started  time.Time          `json:"started"`
	Closed   time.Time          `json:"closed,omitzero"`
	Progress *workflows.Summary `json:"progress,omitempty"`
	Error    string             `json:"error,omitempty"`
	// Paused says who paused a running run and since when (trawler pause); the state
	// stays "running", as the run is open and takes its in-flight batches in.
	Paused *workflows.Pause `json:"paused,omitempty"`
	// RerunOf is the run whose failed inputs this run re-runs (trawler rerun).
	RerunOf string `json:"rerun_of,omitempty"`
	// Failing lists the root workflow's batches that Temporal is retrying, each with
	// its attempt and last error, e.g. a store that is down:
	// "batch story/12, attempt 3, next in 4s: store 42 items of step story in kafka: …".
	Failing []string `json:"failing,omitempty"`
	// Waiting lists batches no worker has taken for a while, and why: those of a
	// step that renders pages wait for a worker with a browser.
	Waiting []string `json:"waiting,omitempty"`

	queue string   // the run's task queue
	tasks []string // the tasks of its pending batches
}

// WaitForWorkers adds to Waiting, for a running run, what no live worker of beats
// serves: its task queue when no worker polls it, and the task of each pending batch
// no worker of the queue announces.
func (st *Status) WaitForWorkers(beats []monitor.WorkerBeat) {
	if st.State != "running" {
		return
	}
	live := slices.ContainsFunc(beats, func(b monitor.WorkerBeat) bool { return b.TaskQueue == st.queue && b.AgeS <= liveBeat.Seconds() })
	if !live {
		st.Waiting = append(st.Waiting, fmt.Sprintf("no live worker polls queue %s: start one with `trawler worker --task-queue %s`", st.queue, st.queue))
		return
	}
	plan := &crawl.Plan{}
	for _, t := range st.tasks {
		plan.Steps = append(plan.Steps, crawl.PlanStep{Task: t})
	}
	st.Waiting = append(st.Waiting, Unserved(beats, plan, st.queue)...)
}

// ErrNoRun is the error Describe wraps when the namespace has no run with the id.
var ErrNoRun = errors.New("no run")

// Describe returns a run's state and its latest progress.
func Describe(ctx context.Context, c client.Client, runID string) (*Status, error) {
	d, err := c.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("%w %q on this Temporal namespace (list runs with `trawler status`)", ErrNoRun, runID)
		}
		return nil, err
	}
	info := d.GetWorkflowExecutionInfo()
	st := &Status{RunID: runID, State: stateName(info.GetStatus()), Started: info.GetStartTime().AsTime(), queue: info.GetTaskQueue()}
	for _, pa := range d.GetPendingActivities() {
		if t := pa.GetActivityType().GetName(); t != workflows.RunBatchActivity && strings.Contains(t, ".") && !slices.Contains(st.tasks, t) {
			st.tasks = append(st.tasks, t) // a batch, named after its task
		}
	}
	if info.GetCloseTime() != nil {
		st.Closed = info.GetCloseTime().AsTime()
	}
	st.RerunOf = MemoString(info.GetMemo(), MemoRerunOf)
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		st.Paused = PausedOf(info.GetMemo())
	}
	st.Failing = failingActivities(d.GetPendingActivities())
	st.Waiting = waitingForBrowser(d.GetPendingActivities(), MemoString(info.GetMemo(), "render_steps"))
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		v, err := c.QueryWorkflow(ctx, runID, "", workflows.ProgressQuery)
		if err == nil {
			var s workflows.Summary
			if v.Get(&s) == nil {
				st.Progress = &s
				s.Outages = heldOutages(d.GetPendingActivities(), s.Outages)
			}
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		var s workflows.Summary
		if err := c.GetWorkflow(ctx, runID, "").Get(ctx, &s); err == nil {
			s.Outcome = cmp.Or(s.Outcome, workflows.OutcomeOf(&s)) // runs of older builds say none
			st.Progress = &s
		}
	default:
		if err := c.GetWorkflow(ctx, runID, "").Get(ctx, nil); err != nil {
			st.Error = err.Error()
		}
	}
	redactStatus(st)
	return st, nil
}

// redactStatus masks the credentials in what a run's status shows (crawl.RedactText):
// its error, the batches being retried and its progress's failures and outages. A
// worker masks them before it records them; this covers runs recorded by older ones.
func redactStatus(st *Status) {
	st.Error = crawl.RedactText(st.Error)
	for i := range st.Failing {
		st.Failing[i] = crawl.RedactText(st.Failing[i])
	}
	if p := st.Progress; p != nil {
		for i := range p.Failures {
			p.Failures[i] = p.Failures[i].Redacted()
		}
		for i := range p.Outages {
			p.Outages[i].Cause = crawl.RedactText(p.Outages[i].Cause)
		}
		p.Reason = crawl.RedactText(p.Reason)
	}
}

// heldOutages adds to a run's outages those its running batches are riding out
// themselves (they heartbeat them), before any input has gone back to the run.
func heldOutages(pending []*workflowpb.PendingActivityInfo, outs []workflows.Outage) []workflows.Outage {
	for _, pa := range pending {
		if pa.GetHeartbeatDetails() == nil {
			continue
		}
		var cp struct {
			Hold *crawl.Outage `json:"hold"`
		}
		if converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &cp) != nil || cp.Hold == nil {
			continue
		}
		h := cp.Hold
		i := slices.IndexFunc(outs, func(o workflows.Outage) bool { return o.Dependency == h.Dependency })
		if i < 0 {
			outs = append(outs, workflows.Outage{Dependency: h.Dependency, Since: h.Since, Last: h.Since, Cause: h.Cause})
			i = len(outs) - 1
		}
		o := &outs[i]
		o.Waiting += h.Waiting
		if step, _, ok := strings.Cut(pa.GetActivityId(), "/"); ok && !slices.Contains(o.Steps, step) {
			o.Steps = append(o.Steps, step)
		}
		if h.Since.Before(o.Since) {
			o.Since = h.Since
		}
	}
	return outs
}

// failingActivities describes the pending activities whose last attempt failed.
func failingActivities(pending []*workflowpb.PendingActivityInfo) []string {
	var out []string
	for _, pa := range pending {
		f := pa.GetLastFailure()
		if f == nil {
			continue
		}
		msg := f.GetMessage()
		for c := f.GetCause(); c != nil && c.GetMessage() != "" && !strings.Contains(msg, c.GetMessage()); c = c.GetCause() {
			msg += ": " + c.GetMessage()
		}
		line := fmt.Sprintf("batch %s, attempt %d", pa.GetActivityId(), pa.GetAttempt())
		if next := pa.GetNextAttemptScheduleTime(); next != nil {
			if d := time.Until(next.AsTime()); d > 0 {
				line += fmt.Sprintf(", next in %s", d.Round(time.Second))
			}
		}
		out = append(out, line+": "+msg)
	}
	return out
}

// Wait blocks until the run ends, calling onProgress (if set) about twice a second.
func Wait(ctx context.Context, c client.Client, runID string, onProgress func(*workflows.Summary)) (*workflows.Summary, error) {
	run := c.GetWorkflow(ctx, runID, "")
	done := make(chan error, 1)
	var sum workflows.Summary
	go func() { done <- run.Get(ctx, &sum) }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", runID, err)
			}
			if onProgress != nil {
				onProgress(&sum)
			}
			return &sum, nil
		case <-tick.C:
			if onProgress == nil {
				continue
			}
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			v, err := c.QueryWorkflow(qctx, runID, "", workflows.ProgressQuery)
			cancel()
			if err == nil {
				var s workflows.Summary
				if v.Get(&s) == nil {
					onProgress(&s)
				}
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func stateName(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "running"
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "canceled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed_out"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued"
	}
	return "unknown"
}
