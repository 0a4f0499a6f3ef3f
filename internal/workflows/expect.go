package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trawlerhq/trawler/crawl"
)

// RecentRunsActivity reads the step counts of a chain's last completed runs, for the
// expectations that compare a run with earlier ones.
const RecentRunsActivity = "RecentRuns"

// RecentRunsRequest asks for the last Last runs of a chain and tenant whose outcome was
// completed, newest first, leaving out the run asking.
type RecentRunsRequest struct {
	Chain  string `json:"chain"`
	Tenant string `json:"tenant"`
	RunID  string `json:"run_id"`
	Last   int    `json:"last"`
}

// PastRun is what an earlier run produced, per step id: items stored plus those dedup
// found unchanged.
type PastRun struct {
	RunID string         `json:"run_id"`
	Items map[string]int `json:"items"`
}

// Violation is one broken expectation: the step, the rule (min_items, coverage, type,
// value, max_failure_share, max_new_share), the field it is about (coverage, type and
// value rules), what the chain wanted and what the run got, and a line saying so.
type Violation struct {
	Step   string  `json:"step"`
	Rule   string  `json:"rule"`
	Field  string  `json:"field,omitempty"`
	Want   float64 `json:"want"`
	Got    float64 `json:"got"`
	Detail string  `json:"detail"`
	// Fail: the step's on_violation is fail, so the run fails.
	Fail bool `json:"fail,omitempty"`
}

// Judge checks the expectations of the plan's steps against the run's counters. past
// holds the chain's earlier completed runs, newest first; the rules that compare with
// them (a relative min_items, max_new_share) are judged only when final is set and an
// earlier run produced items in the step: a first run has nothing to be compared with.
// Before the run ends (final unset), min_items is not judged either: it may still be
// reached.
func Judge(plan *crawl.Plan, sum *Summary, past []PastRun, final bool) []Violation {
	var out []Violation
	for i, ps := range plan.Steps {
		e := ps.Expect
		if e == nil || i >= len(sum.Steps) {
			continue
		}
		st := sum.Steps[i]
		add := func(rule, field string, want, got float64, format string, args ...any) {
			out = append(out, Violation{Step: ps.ID, Rule: rule, Field: field, Want: want, Got: got, Detail: fmt.Sprintf(format, args...), Fail: e.Fail})
		}
		produced := st.Items + st.Unchanged
		seen := 0 // earlier runs that produced items in the step
		for _, r := range past {
			if r.Items[ps.ID] > 0 {
				seen++
			}
		}
		if final {
			switch {
			case e.OfLast > 0:
				n, sumPast := 0, 0
				for _, r := range past[:min(e.OfLast, len(past))] {
					if items, ok := r.Items[ps.ID]; ok {
						n++
						sumPast += items
					}
				}
				if n > 0 {
					mean := float64(sumPast) / float64(n)
					if want := e.MinFraction * mean; float64(produced) < want {
						add("min_items", "", want, float64(produced), "min_items: %d items < %.0f (%g of the mean %.1f of the last %d completed runs)", produced, want, e.MinFraction, mean, n)
					}
				}
			case e.MinItems > 0 && produced < e.MinItems:
				add("min_items", "", float64(e.MinItems), float64(produced), "min_items: %d items < %d", produced, e.MinItems)
			}
		}
		c := st.Expect
		if c != nil && c.Items > 0 {
			for k, r := range e.Fields {
				if k >= len(c.Fields) {
					break
				}
				fc := c.Fields[k]
				if cov := float64(fc.Present) / float64(c.Items); r.Coverage > 0 && cov < r.Coverage {
					add("coverage", r.Field, r.Coverage, cov, "coverage of %s %.2f < %.2f (%d of %d items have it)", r.Field, cov, r.Coverage, fc.Present, c.Items)
				}
				if fc.BadType > 0 {
					add("type", r.Field, 0, float64(fc.BadType), "type of %s: %d of %d values are not %s", r.Field, fc.BadType, fc.Present, article(r.Type))
				}
				if fc.BadValue > 0 {
					add("value", r.Field, 0, float64(fc.BadValue), "value of %s: %d of %d values are not %s", r.Field, fc.BadValue, fc.Present, valueRule(r))
				}
			}
			if e.MaxNewShare != nil && final && seen > 0 {
				if share := float64(c.New) / float64(c.Items); share > *e.MaxNewShare {
					add("max_new_share", "", *e.MaxNewShare, share, "new share %.2f > %.2f (%d of %d items new to dedup although an earlier run produced this step's items: did the key change?)", share, *e.MaxNewShare, c.New, c.Items)
				}
			}
		}
		if tried := st.Pages + st.Failed; e.MaxFailureShare != nil && tried > 0 {
			if share := float64(st.Failed) / float64(tried); share > *e.MaxFailureShare {
				add("max_failure_share", "", *e.MaxFailureShare, share, "failure share %.2f > %.2f (%d of %d inputs failed)", share, *e.MaxFailureShare, st.Failed, tried)
			}
		}
	}
	return out
}

func article(t string) string {
	switch t {
	case "int", "object":
		return "an " + t
	case "list":
		return "a list"
	}
	return "a " + t
}

// valueRule says what a field rule's values must be.
func valueRule(r crawl.FieldRule) string {
	var s string
	switch {
	case r.Min != nil && r.Max != nil:
		s = fmt.Sprintf("numbers from %g to %g", *r.Min, *r.Max)
	case r.Min != nil:
		s = fmt.Sprintf("numbers ≥ %g", *r.Min)
	case r.Max != nil:
		s = fmt.Sprintf("numbers ≤ %g", *r.Max)
	}
	if r.Match != "" {
		if s != "" {
			s += " and "
		}
		s += fmt.Sprintf("strings matching %s", r.Match)
	}
	return s
}

// historyLast is how many earlier runs the plan's expectations need (0: none).
func historyLast(p *crawl.Plan) int {
	n := 0
	for _, s := range p.Steps {
		if s.Expect.History() {
			n = max(n, s.Expect.OfLast, 1)
		}
	}
	return n
}

// judgeEnd judges the expectations of a run that ended, reading earlier runs first when
// a rule needs them; a run whose history cannot be read is judged without those rules.
func (r *runner) judgeEnd(ctx workflow.Context) {
	if !r.expectations || workflow.GetInfo(ctx).ParentWorkflowExecution != nil {
		return
	}
	var past []PastRun
	if n := historyLast(&r.plan); n > 0 {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: r.in.TaskQueue, StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3},
		})
		req := RecentRunsRequest{Chain: r.plan.Chain, Tenant: r.plan.TenantOrDefault(), RunID: r.in.RunID, Last: n}
		if err := workflow.ExecuteActivity(actx, RecentRunsActivity, req).Get(ctx, &past); err != nil {
			workflow.GetLogger(ctx).Warn("expectations: earlier runs not read; rules comparing with them are not judged", "err", err)
		}
	}
	r.sum.Violations = Judge(&r.plan, r.sum, past, true)
}
