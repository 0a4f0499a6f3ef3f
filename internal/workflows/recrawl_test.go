package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/activity"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/dedup"
	"github.com/trawlerhq/trawler/internal/recrawl"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// A run of a chain with a recrawl step claims the step's due pages first; pages the
// listing finds again wait for their plan, so each is visited once per run at most, and
// a page not yet due is not visited at all.
func TestRecrawlRunVisitsDuePagesOnce(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	dd, err := dedup.Open(context.Background(), rdb, dedup.Config{Expected: 1000})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	planner := recrawl.New(rdb, func() time.Time { return now })
	// A harness per run: a test environment runs one workflow.
	newRun := func() *harness {
		h := newDedupHarness(t, nil, dd)
		h.acts.Recrawl = planner
		h.env.RegisterActivityWithOptions(h.acts.RecrawlDue, activity.RegisterOptions{Name: workflows.RecrawlDueActivity})
		return h
	}
	p := plan(t, `
name: rc
steps:
  - id: list
    task: synth.node
    params: {widths: [6]}
  - id: page
    task: synth.node
    from: list
    params: {widths: [6]}
    recrawl: {min: 10m, max: 1d}
`)
	runs := []struct {
		at        time.Duration
		due, page int
	}{
		{0, 0, 6},                // the listing finds six pages: all new
		{5 * time.Minute, 0, 0},  // before min: the listing finds them again, none is due
		{10 * time.Minute, 6, 6}, // at min: all six are due, each visited once
		{11 * time.Minute, 0, 0}, // just visited, unchanged: planned further out
	}
	for i, r := range runs {
		now = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(r.at)
		s := newRun().run(t, workflows.ChainInput{RunID: "rc-" + string(rune('a'+i)), Plan: *p})
		if st := s.Steps[1]; st.Due != r.due || st.Pages != r.page || s.Steps[0].Pages != 1 {
			t.Fatalf("run %d (+%s): page step had %d due and ran %d pages, list ran %d; want %d due, %d pages, 1 list page",
				i, r.at, st.Due, st.Pages, s.Steps[0].Pages, r.due, r.page)
		}
	}
	// A page the site says is gone (404) loses its plan: the listing finds it anew. In
	// the same run that is a second visit when the listing's batch routes its pages
	// after the plan was dropped, and none when before.
	now = now.Add(24 * time.Hour)
	p.Steps[1].Params["gone"] = []any{"3"}
	s := newRun().run(t, workflows.ChainInput{RunID: "rc-gone", Plan: *p})
	if st := s.Steps[1]; st.Due != 6 || st.Failed < 1 || st.Failed > 2 || st.Pages != 5 {
		t.Fatalf("a day later: %d due, %d pages, %d failed; want 6 due, 5 pages and page 3 failed (once, or again when the listing found it)", st.Due, st.Pages, st.Failed)
	}
	ns := p.Tenant + ":synth.node"
	if _, ok, err := planner.Lookup(context.Background(), ns, crawl.Input{Value: "3"}); ok || err != nil {
		t.Errorf("page 3 is gone but keeps its plan (%v)", err)
	}
	if _, ok, _ := planner.Lookup(context.Background(), ns, crawl.Input{Value: "2"}); !ok {
		t.Errorf("page 2 lost its plan")
	}
}
