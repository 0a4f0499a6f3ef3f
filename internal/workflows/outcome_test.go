package workflows_test

import (
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// TestOutcomes: a run says how it went. A chain whose only seed answers 404 failed; one
// whose detail pages all fail failed, though its list page was stored; one that lost
// some inputs is partial.
func TestOutcomes(t *testing.T) {
	const listDetail = `
name: ld
steps:
  - id: list
    task: synth.node
    params: {widths: [3]}
  - id: detail
    task: synth.node
    from: list
    params: {gone: [0, 1, 2]}
`
	for _, c := range []struct {
		name string
		plan *crawl.Plan
		want string
	}{
		{"every node stored", plan(t, tree), workflows.OutcomeCompleted},
		{"one node 404", plan(t, tree, "node.gone=[2]"), workflows.OutcomePartial},
		{"only seed 404", plan(t, tree, "node.gone=[r]"), workflows.OutcomeFailed},
		{"every detail 404", plan(t, listDetail), workflows.OutcomeFailed},
	} {
		h := newHarness(t, nil)
		s := h.run(t, workflows.ChainInput{RunID: "outcome", Plan: *c.plan})
		if s.Outcome != c.want || workflows.OutcomeOf(s) != c.want {
			_, items, _, failed := s.Totals()
			t.Errorf("%s: outcome %q (items %d, failed %d), want %q", c.name, s.Outcome, items, failed, c.want)
		}
		if s.Status != workflows.StatusCompleted {
			t.Errorf("%s: status %q, want %q", c.name, s.Status, workflows.StatusCompleted)
		}
	}
}

// TestProgressShowsRetryingInputs: while an input waits out its backoff, the run's
// progress names it with the error of its last attempt and that error's cause.
func TestProgressShowsRetryingInputs(t *testing.T) {
	h := newHarness(t, nil)
	p := plan(t, tree, "node.broken=[2]")
	var seen *workflows.Summary
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(workflows.ProgressQuery)
		if err != nil {
			t.Error(err)
			return
		}
		var s workflows.Summary
		if err := v.Get(&s); err != nil {
			t.Error(err)
		}
		seen = &s
	}, time.Second)
	s := h.run(t, workflows.ChainInput{RunID: "retrying", Plan: *p})
	if seen == nil {
		t.Fatal("query callback did not run")
	}
	if len(seen.Retrying) != 1 {
		t.Fatalf("mid-run retrying %+v, want node 2", seen.Retrying)
	}
	r := seen.Retrying[0]
	if r.Step != "node" || r.Attempts != 1 || r.Class != crawl.CauseOther || !strings.Contains(r.Cause, "node 2 is broken") {
		t.Errorf("retrying %+v, want step node, 1 attempt, cause other: node 2 is broken", r)
	}
	if len(s.Retrying) != 0 || s.Outcome != workflows.OutcomePartial {
		t.Errorf("finished run: retrying %+v outcome %q, want none and partial", s.Retrying, s.Outcome)
	}
}
