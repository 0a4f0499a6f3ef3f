package workflows

import (
	"reflect"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

// The counters a batch adds up, and what the workflow makes of them: each rule reads
// sums only, a rule comparing with earlier runs waits for one, and min_items waits
// for the run's end.
func TestJudgeCountedExpectations(t *testing.T) {
	one, half := 1.0, 0.5
	e := &crawl.Expect{MinItems: 5, MaxFailureShare: &half, MaxNewShare: &half, Fields: []crawl.FieldRule{
		{Field: "price", Coverage: 0.9, Type: "number", Min: &one},
		{Field: "url", Match: "^https://"},
	}}
	items := []crawl.Item{
		{Data: map[string]any{"price": 2.5, "url": "https://a"}},
		{Data: map[string]any{"price": 0.5, "url": "http://b"}},
		{Data: map[string]any{"price": "n/a", "url": ""}},
		{Data: map[string]any{"price": nil}},
	}
	c := crawl.NewCounter(e).Count(items)
	c.New = 3
	want := &crawl.ExpectCounts{Items: 4, New: 3, Fields: []crawl.FieldCount{
		{Field: "price", Present: 3, BadType: 1, BadValue: 1},
		{Field: "url", Present: 2, BadValue: 1},
	}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("counts %+v\nwant %+v", c, want)
	}
	sum := &Summary{Steps: []StepStats{{ID: "p", Pages: 1, Failed: 3, Items: 4, Expect: c}}}
	plan := &crawl.Plan{Steps: []crawl.PlanStep{{ID: "p", Expect: e}}}
	details := func(vs []Violation) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Rule+": "+v.Detail)
		}
		return out
	}
	live := []string{
		"coverage: coverage of price 0.75 < 0.90 (3 of 4 items have it)",
		"type: type of price: 1 of 3 values are not a number",
		"value: value of price: 1 of 3 values are not numbers ≥ 1",
		"value: value of url: 1 of 2 values are not strings matching ^https://",
		"max_failure_share: failure share 0.75 > 0.50 (3 of 4 inputs failed)",
	}
	if got := details(Judge(plan, sum, nil, false)); !reflect.DeepEqual(got, live) {
		t.Fatalf("while running:\n%q\nwant\n%q", got, live)
	}
	end := append([]string{"min_items: min_items: 4 items < 5"}, live[:4]...)
	end = append(end, "max_new_share: new share 0.75 > 0.50 (3 of 4 items new to dedup although an earlier run produced this step's items: did the key change?)", live[4])
	got := details(Judge(plan, sum, []PastRun{{RunID: "r1", Items: map[string]int{"p": 4}}}, true))
	if !reflect.DeepEqual(got, end) {
		t.Fatalf("at the end:\n%q\nwant\n%q", got, end)
	}
	if OutcomeOf(&Summary{Steps: []StepStats{{Pages: 1, Items: 1}}, Violations: []Violation{{Rule: "coverage"}}}) != OutcomeViolations {
		t.Fatal("a clean run with a violation is not completed_with_violations")
	}
	if OutcomeOf(&Summary{Steps: []StepStats{{Pages: 1, Items: 1}}, Violations: []Violation{{Rule: "coverage", Fail: true}}}) != OutcomeFailed {
		t.Fatal("on_violation: fail does not fail the run")
	}
}
