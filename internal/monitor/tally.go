package monitor

import (
	"context"
	"errors"
	"sync"
	"time"
)

// SendEvery is the longest a Tally holds what a worker's batches recorded while other
// batches of the worker still run.
const SendEvery = time.Second

// Tally gathers what a worker's batches record for monitoring — pages per minute and
// task costs — and sends it to the Recorder in a few commands for all of them rather
// than a few per batch: when the batch that ends is the only one running in the worker
// (so a run's figures are whole when its last batch ends), and every SendEvery while
// batches run. Sums of one task are added as one: the running averages decay per send.
type Tally struct {
	rec *Recorder

	mu     sync.Mutex
	pages  map[[2]string]int // tenant, chain → pages
	costs  map[string]*taskSums
	sentAt time.Time
	later  *time.Timer // sends what a batch left while others ran on, if none ends first
}

type taskSums struct {
	pages     int
	wall, cpu time.Duration
	bytes     int64
}

// NewTally returns a Tally that sends to rec.
func NewTally(rec *Recorder) *Tally {
	return &Tally{rec: rec, pages: map[[2]string]int{}, costs: map[string]*taskSums{}}
}

// Pages adds a batch's pages to its chain's per-minute rate.
func (t *Tally) Pages(tenant, chain string, pages int) {
	if pages == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pages[[2]string{tenant, chain}] += pages
}

// Cost adds what a batch's pages of a task cost to the task's learned needs.
func (t *Tally) Cost(task string, pages int, wall, cpu time.Duration, bytes int64) {
	if pages == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.costs[task]
	if s == nil {
		s = &taskSums{}
		t.costs[task] = s
	}
	s.pages += pages
	s.wall += wall
	s.cpu += cpu
	s.bytes += bytes
}

// Send sends what the Tally holds when due: when last is set (the batch ending is the
// only one running) or SendEvery after the last send. What Redis did not take is kept
// for the next send.
func (t *Tally) Send(ctx context.Context, last bool) error {
	t.mu.Lock()
	now := t.rec.now()
	if len(t.pages)+len(t.costs) == 0 {
		t.mu.Unlock()
		return nil
	}
	if !last && now.Sub(t.sentAt) < SendEvery {
		if t.later == nil {
			t.later = time.AfterFunc(SendEvery, func() {
				_ = t.Send(context.Background(), true) // what fails is kept for the next send
			})
		}
		t.mu.Unlock()
		return nil
	}
	if t.later != nil {
		t.later.Stop()
		t.later = nil
	}
	pages, costs := t.pages, t.costs
	t.pages, t.costs, t.sentAt = map[[2]string]int{}, map[string]*taskSums{}, now
	t.mu.Unlock()
	var errs []error
	for k, n := range pages {
		if err := t.rec.Pages(ctx, k[0], k[1], n); err != nil {
			errs = append(errs, err)
			t.Pages(k[0], k[1], n)
		}
	}
	for task, s := range costs {
		if err := t.rec.TaskCost(ctx, task, s.pages, s.wall, s.cpu, s.bytes); err != nil {
			errs = append(errs, err)
			t.Cost(task, s.pages, s.wall, s.cpu, s.bytes)
		}
	}
	return errors.Join(errs...)
}
