package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/internal/events"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// Run controls: what ControlRun does to a run.
const (
	ActionPause  = "pause"
	ActionResume = "resume"
)

// RunControl is a pause or resume of a run: who asked and when. Taken is whether the
// run confirmed it (its memo shows it) within ConfirmWait; a run no worker serves takes
// it when a worker next runs it.
type RunControl struct {
	RunID  string    `json:"run_id"`
	Action string    `json:"action"` // ActionPause or ActionResume
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Taken  bool      `json:"taken"`
	// EventError says why the run_paused or run_resumed event could not be recorded.
	EventError string `json:"event_error,omitempty"`
}

// ConfirmWait is how long ControlRun waits for the run to confirm a pause or resume.
var ConfirmWait = 10 * time.Second

// RunStateError is a control refused because of the state the run is in (ended, not
// paused, already paused); the console answers it with 409.
type RunStateError struct{ msg string }

func (e *RunStateError) Error() string { return e.msg }

// PausedOf reads who paused a run, and since when, from its memo; nil when it is not
// paused.
func PausedOf(m *commonpb.Memo) *workflows.Pause {
	by := MemoString(m, workflows.MemoPausedBy)
	if by == "" {
		return nil
	}
	since, _ := time.Parse(time.RFC3339, MemoString(m, workflows.MemoPausedSince))
	return &workflows.Pause{By: by, Since: since}
}

// ControlRun pauses or resumes a running run on behalf of by: a paused run lets its
// running batches finish and starts none until it is resumed, where it stopped. Every
// pause and resume, from the CLI and the console, goes through here. With rdb (nil
// without Redis) it emits the run_paused or run_resumed event.
func ControlRun(ctx context.Context, c client.Client, rdb redis.UniversalClient, runID, action, by string) (RunControl, error) {
	rc := RunControl{RunID: runID, Action: action, By: by, At: time.Now().UTC()}
	d, err := c.DescribeWorkflowExecution(ctx, runID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return rc, fmt.Errorf("%w %q on this Temporal namespace (list runs with `trawler status`)", ErrNoRun, runID)
	}
	if err != nil {
		return rc, fmt.Errorf("%s run %s: %w", action, runID, err)
	}
	info := d.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return rc, &RunStateError{fmt.Sprintf("run %s has already ended (%s): only a running run can be %sd", runID, stateName(info.GetStatus()), action)}
	}
	paused := PausedOf(info.GetMemo())
	signal := workflows.PauseSignal
	switch {
	case action == ActionPause && paused != nil:
		return rc, &RunStateError{fmt.Sprintf("run %s is already paused (by %s since %s); resume it with `trawler resume %s`",
			runID, paused.By, paused.Since.Local().Format(time.DateTime), runID)}
	case action == ActionResume && paused == nil:
		return rc, &RunStateError{fmt.Sprintf("run %s is not paused, so there is nothing to resume; pause it with `trawler pause %s`", runID, runID)}
	case action == ActionResume:
		signal = workflows.ResumeSignal
	case action != ActionPause:
		return rc, fmt.Errorf("run control %q: want %s or %s", action, ActionPause, ActionResume)
	}
	if err := c.SignalWorkflow(ctx, runID, "", signal, workflows.PauseRequest{By: by}); err != nil {
		return rc, fmt.Errorf("%s run %s: %w", action, runID, err)
	}
	if rdb != nil {
		ev := events.Event{Type: events.RunPaused, Tenant: MemoString(info.GetMemo(), "tenant"),
			Chain: MemoString(info.GetMemo(), "chain"), RunID: runID, By: by}
		if action == ActionResume {
			ev.Type = events.RunResumed
		}
		if _, err := events.Emit(ctx, rdb, ev); err != nil {
			// The run took the signal all the same: say so, and that no one heard of it.
			rc.EventError = err.Error()
		}
	}
	rc.Taken = poll(ctx, ConfirmWait, func() bool {
		d, err := c.DescribeWorkflowExecution(ctx, runID, "")
		if err != nil {
			return false
		}
		p := PausedOf(d.GetWorkflowExecutionInfo().GetMemo())
		if p != nil && action == ActionPause {
			rc.At = p.Since
		}
		return (p != nil) == (action == ActionPause)
	})
	return rc, nil
}

// poll reports whether cond holds within limit, looking every 100 ms.
func poll(ctx context.Context, limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}
