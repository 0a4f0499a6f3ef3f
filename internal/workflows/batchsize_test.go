package workflows

import (
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// A step whose pages prove cheap takes batches of up to four times its `batch`, as many
// pages as fill batchTarget, but never more than a fair share of its queue among its
// free slots; a run from before the change, or a step not measured yet, keeps `batch`.
func TestBatchesSizedByPageCost(t *testing.T) {
	queued := func(n int) []Pending { return make([]Pending, n) }
	cases := []struct {
		name      string
		costSized bool
		cost      time.Duration
		queue     int
		inFlight  int
		want      int
	}{
		{"before the change", false, time.Millisecond, 1000, 0, 50},
		{"no batch ended yet", true, 0, 1000, 0, 50},
		{"cheap pages, deep queue: four times batch", true, time.Millisecond, 1000, 0, 200},
		{"pages costing 40ms: batchTarget's worth", true, 40 * time.Millisecond, 1000, 0, 125},
		{"costly pages: batch", true, time.Second, 1000, 0, 50},
		{"cheap pages, short queue: a fair share of four slots", true, time.Millisecond, 360, 0, 90},
		{"cheap pages, one slot free: its share is the queue", true, time.Millisecond, 120, 3, 120},
		{"cheap pages, a run's last inputs: batch", true, time.Millisecond, 30, 0, 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &runner{
				plan:      crawl.Plan{Steps: []crawl.PlanStep{{ID: "detail", Batch: 50, Parallel: 4}}},
				costSized: tc.costSized,
				pageCost:  []time.Duration{tc.cost},
				queues:    [][]Pending{queued(tc.queue)},
				inFlight:  []int{tc.inFlight},
			}
			if got := r.batchSize(0); got != tc.want {
				t.Errorf("batch of %d inputs, want %d", got, tc.want)
			}
		})
	}
}

// A step whose pages prove cheap gathers its ready inputs into a full batch while a
// batch that may hand it more is in flight (one of its own, or of a step feeding it),
// when that batch's pages are cheap too, for a second at most; otherwise it starts a
// batch at once.
func TestCheapStepsGatherFullBatches(t *testing.T) {
	const ms = time.Millisecond
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	steps := []crawl.PlanStep{
		{ID: "list", Batch: 50, Parallel: 4, Consumers: []crawl.Consumer{{Step: 0, Self: true}, {Step: 1}}},
		{ID: "detail", Batch: 50, Parallel: 4, Consumers: []crawl.Consumer{{Step: 2}}},
		{ID: "comments", Batch: 50, Parallel: 4, Consumers: []crawl.Consumer{{Step: 2, Self: true}}},
	}
	cheap := []time.Duration{2 * ms, 2 * ms, 2 * ms}
	queue := func(due, later int) []Pending {
		q := make([]Pending, due+later)
		for k := range q {
			q[k].Since = now.Add(-100 * ms)
		}
		for k := due; k < len(q); k++ {
			q[k].NotBefore = now.Add(time.Minute)
		}
		return q
	}
	waited := queue(3, 0)
	waited[1].Since = now.Add(-gatherWithin)
	cases := []struct {
		name     string
		gather   bool
		cost     []time.Duration
		queue    []Pending
		inFlight []int
		want     bool
	}{
		{"before version 2", false, cheap, queue(3, 0), []int{0, 1, 0}, false},
		{"cheap, a detail batch in flight", true, cheap, queue(3, 0), []int{0, 1, 0}, true},
		{"cheap, a comments batch in flight", true, cheap, queue(3, 0), []int{0, 0, 1}, true},
		{"cheap, only the list in flight: it does not feed comments", true, cheap, queue(3, 0), []int{1, 0, 0}, false},
		{"cheap, nothing in flight", true, cheap, queue(3, 0), []int{0, 0, 0}, false},
		{"cheap, a full batch ready", true, cheap, queue(50, 0), []int{0, 1, 1}, false},
		{"cheap, inputs not due yet do not count", true, cheap, queue(3, 60), []int{0, 1, 0}, true},
		{"cheap, but one ready input has waited a second", true, cheap, waited, []int{0, 1, 0}, false},
		{"comments not measured yet", true, []time.Duration{2 * ms, 2 * ms, 0}, queue(3, 0), []int{0, 1, 0}, false},
		{"comments costly: a batch lasts 2s", true, []time.Duration{2 * ms, 2 * ms, 40 * ms}, queue(3, 0), []int{0, 1, 0}, false},
		{"the detail batch in flight may run long", true, []time.Duration{2 * ms, 40 * ms, 2 * ms}, queue(3, 0), []int{0, 1, 1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &runner{
				plan:      crawl.Plan{Steps: steps},
				costSized: true,
				gather:    tc.gather,
				pageCost:  tc.cost,
				queues:    [][]Pending{nil, nil, tc.queue},
				inFlight:  tc.inFlight,
			}
			if got := r.gathering(2, now); got != tc.want {
				t.Errorf("gathering = %v, want %v", got, tc.want)
			}
		})
	}
}
