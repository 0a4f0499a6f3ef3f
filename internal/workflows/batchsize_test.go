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
