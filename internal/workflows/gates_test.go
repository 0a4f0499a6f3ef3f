package workflows_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/workflow"

	"github.com/trawlerhq/trawler/internal/workflows"
)

// TestVersionGatesByName: a run reads one version marker per guarded change, in the
// order the changes were made, and a build from before a change reads exactly the
// markers of the changes made before it, whatever its place in the table.
func TestVersionGatesByName(t *testing.T) {
	all := workflows.Changes()
	if len(all) == 0 {
		t.Fatal("no guarded changes")
	}
	for i, c := range all {
		if slices.Index(all, c) != i {
			t.Fatalf("change %q is listed twice", c)
		}
	}
	cases := []struct {
		name string
		wf   func(workflow.Context, workflows.ChainInput) (*workflows.Summary, error)
		want []string
	}{
		{"current", workflows.ChainWorkflow, all},
		{"before " + all[0], workflows.WorkflowBefore(all[0]), nil},
		{"before " + workflows.ChangeFairPriority, workflows.WorkflowBefore(workflows.ChangeFairPriority), all[:slices.Index(all, workflows.ChangeFairPriority)]},
		{"before " + all[len(all)-1], workflows.WorkflowBefore(all[len(all)-1]), all[:len(all)-1]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.workflow = "gated"
			h.env.RegisterWorkflowWithOptions(tc.wf, workflow.RegisterOptions{Name: h.workflow})
			var asked []string
			for _, c := range all {
				v := workflows.ChangeVersion(c)
				h.env.OnGetVersion(c, workflow.DefaultVersion, v).Run(func(mock.Arguments) { asked = append(asked, c) }).Return(v).Maybe()
			}
			run := "gates"
			h.run(t, workflows.ChainInput{RunID: run, Plan: *plan(t, flatChain(run))})
			if fmt.Sprint(asked) != fmt.Sprint(tc.want) {
				t.Errorf("version markers read %v, want %v", asked, tc.want)
			}
			if got := len(h.stored(t, run)); got != 13 {
				t.Errorf("stored %d, want 13", got)
			}
		})
	}
}

// TestWorkflowBeforeUnknownChange: a misspelt change name must not quietly yield
// today's workflow in an upgrade test.
func TestWorkflowBeforeUnknownChange(t *testing.T) {
	defer func() {
		got := fmt.Sprint(recover())
		want := `workflows.WorkflowBefore: no guarded change "fair-prio"; guarded changes: downstream-first, step-activity-ids, fair-priority, seed-per-url, outlast-outages, task-activities, follow-own-step, follow-downstream, recrawl-due, expectations, cost-sized-batches, pause-resume`
		if got != want {
			t.Fatalf("panic %q, want %q", got, want)
		}
	}()
	workflows.WorkflowBefore("fair-prio")
}
