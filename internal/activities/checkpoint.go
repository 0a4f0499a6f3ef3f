package activities

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/trawlerhq/trawler/crawl"
)

// checkpoint is what a batch heartbeats: what a retried attempt needs to resume without
// redoing a stored input, and no more. Finished inputs are index ranges; successes are
// summed per step, with only their outputs kept (the workflow still needs them);
// failures keep their causes. Its size grows with the batch's outputs, not with the
// square of the batch, and it is sent at most a few times per heartbeat timeout.
type checkpoint struct {
	Done [][2]int `json:"done,omitempty"` // finished inputs, inclusive ranges
	// Began are the inputs this attempt started and has not finished: if it dies, the
	// next attempt runs them again and counts them as retried.
	Began [][2]int       `json:"began,omitempty"`
	tally                // the batch's own step's
	Out   []crawl.Routed `json:"out,omitempty"`
	// Followed are the inputs the batch took over from its outputs (Batch.Follow),
	// numbered after the batch's own: a retried attempt runs those not yet done.
	Followed []followed `json:"followed,omitempty"`
	// Dups counts, per step of the plan by index, the inputs the run's seen-set kept
	// from being handed on (or run) again (BatchResult.Duplicates).
	Dups []int `json:"dups,omitempty"`
	// Down are the sums of the steps of Batch.Downstream, in order.
	Down []tally `json:"down,omitempty"`
	// Hold is the outage the batch is riding out right now, for status to show.
	Hold *crawl.Outage `json:"hold,omitempty"`
}

// tally is what a batch's finished inputs of one step add up to.
type tally struct {
	Pages        int            `json:"pages,omitempty"`
	Items        int            `json:"items,omitempty"`
	Skipped      int            `json:"skipped,omitempty"`
	Unchanged    int            `json:"unchanged,omitempty"`
	DepthLimited int            `json:"dl,omitempty"`
	OutOfScope   int            `json:"oos,omitempty"`
	Trapped      int            `json:"trap,omitempty"`
	TrapRules    map[string]int `json:"traps,omitempty"`
	Failed       []outcome      `json:"failed,omitempty"`
	// Retried counts inputs an attempt of the batch that died had begun, run again.
	Retried int `json:"retried,omitempty"`
	// Expect sums the inputs' counts for the step's expectations.
	Expect *crawl.ExpectCounts `json:"exp,omitempty"`
}

// followed is an input a batch took over from its outputs, for the step of its lane: 0
// the batch's own, k the k-th of Batch.Downstream. (A checkpoint written before
// downstream steps were followed reads as lane 0, which was all there was.)
type followed struct {
	crawl.Work
	Lane int `json:"lane,omitempty"`
}

// checkpointer keeps a batch's finished inputs (those of earlier attempts included) and
// heartbeats them.
type checkpointer struct {
	n     int
	done  map[int]bool
	unrun map[int]bool // left unrun by a budget
	sum   checkpoint   // Done is filled when heartbeating
	every time.Duration
	last  time.Time
	sent  *checkpoint // the last checkpoint sent, nil before the first
	// standing is the checkpoint Temporal holds before this attempt sends one: an
	// earlier attempt's, or none (empty) for a first attempt.
	standing checkpoint
	dirty    bool
	send     func(checkpoint) // activity.RecordHeartbeat in a batch
	claim    string           // the batch's seen-set claimer id; "" without a seen-set

	// began is written by the goroutines that run inputs, the rest by the one that
	// collects their outcomes.
	mu       sync.Mutex
	began    map[int]bool
	newBegun bool // began changed since the last heartbeat
}

// newCheckpointer resumes from what an earlier attempt of the batch heartbeated.
func newCheckpointer(ctx context.Context, n int) *checkpointer {
	// The first checkpoint goes out an interval after the attempt starts, not at its
	// first flush: a batch of cheap pages often ends sooner, and a heartbeat costs the
	// server about what the batch's completion does. An attempt that dies before it
	// redoes under an interval of work, which its stores take once (they are idempotent).
	c := &checkpointer{n: n, done: map[int]bool{}, unrun: map[int]bool{}, began: map[int]bool{}, every: time.Second,
		last: time.Now(), send: func(p checkpoint) { activity.RecordHeartbeat(ctx, p) }}
	if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 {
		// Each heartbeat goes out well inside the timeout, however short it is set.
		c.every = min(max(c.every, hb/4), hb/2)
	}
	if activity.HasHeartbeatDetails(ctx) {
		var prev checkpoint
		if err := activity.GetHeartbeatDetails(ctx, &prev); err == nil {
			c.resume(prev)
			// A copy of its own, as resume shares prev's sums with the batch's.
			_ = activity.GetHeartbeatDetails(ctx, &c.standing)
		}
	}
	return c
}

// resume takes over what an earlier attempt checkpointed. The inputs it had begun and
// not finished run again: each counts as retried in its step.
func (c *checkpointer) resume(prev checkpoint) {
	c.n += len(prev.Followed)
	for _, r := range prev.Done {
		for i := max(r[0], 0); i <= r[1] && i < c.n; i++ {
			c.done[i] = true
		}
	}
	began := prev.Began
	prev.Done, prev.Began, prev.Hold = nil, nil, nil
	c.sum = prev
	for _, r := range began {
		for i := max(r[0], 0); i <= r[1] && i < c.n; i++ {
			if !c.done[i] {
				c.tally(c.lane(i)).Retried++
			}
		}
	}
}

// begin records that input i is about to run, for the next heartbeat.
func (c *checkpointer) begin(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.began == nil {
		c.began = map[int]bool{}
	}
	c.began[i], c.newBegun = true, true
}

// unbegin forgets that input i ran: it waits for a dependency, which a retried attempt
// does not count against it.
func (c *checkpointer) unbegin(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.began, i)
}

// todo lists the inputs no attempt has finished, in order.
func (c *checkpointer) todo() []int {
	var out []int
	for i := range c.n {
		if !c.done[i] {
			out = append(out, i)
		}
	}
	return out
}

// follow adds an input the batch took over from its outputs for the step of lane and
// returns its index.
func (c *checkpointer) follow(w crawl.Work, lane int) int {
	c.sum.Followed = append(c.sum.Followed, followed{w, lane})
	c.dirty = true
	c.n++
	return c.n - 1
}

// claimed stamps an input that leaves the batch unfinished with the batch's seen-set
// claim (crawl.Input.Claim): an earlier attempt may have run it and claimed its outputs.
func (c *checkpointer) claimed(in crawl.Input) crawl.Input {
	if in.Claim == "" {
		in.Claim = c.claim
	}
	return in
}

// handBack records a followed input the batch did not run: it returns to the workflow
// among the outputs, as if it had not been followed.
func (c *checkpointer) handBack(i int, r crawl.Routed) {
	c.done[i] = true
	c.dirty = true
	r.Input = c.claimed(r.Input)
	c.sum.Out = append(c.sum.Out, r)
}

// finish records a stored (or failed) input of the step of lane.
func (c *checkpointer) finish(o outcome, lane int) {
	c.done[o.Index] = true
	c.dirty = true
	c.unbegin(o.Index)
	t := c.tally(lane)
	if !o.OK {
		// The cause is shown in status, summaries and the failure log: no credential of
		// the input's URL or of a proxy goes there.
		t.Failed = append(t.Failed, outcome{Index: o.Index, Err: crawl.RedactText(o.Err), Class: o.Class, Permanent: o.Permanent, RetryAfter: o.RetryAfter, Held: o.Held})
		return
	}
	t.Pages++
	t.Items += o.Items
	t.Skipped += o.Skipped
	t.Unchanged += o.Unchanged
	t.DepthLimited += o.DepthLimited
	t.OutOfScope += o.OutOfScope
	t.Trapped += o.Trapped
	t.TrapRules = crawl.AddCounts(t.TrapRules, o.TrapRules)
	if o.Expect != nil {
		if t.Expect == nil {
			t.Expect = &crawl.ExpectCounts{}
		}
		t.Expect.Add(o.Expect)
	}
	c.sum.Out = append(c.sum.Out, o.Out...)
	for _, step := range o.dups {
		c.duplicate(step)
	}
}

// skip records an input of the batch's own step that is not run: the run's seen-set
// had it already.
func (c *checkpointer) skip(i, step int) {
	c.done[i] = true
	c.dirty = true
	c.duplicate(step)
}

// duplicate counts one input of step that the seen-set kept from going on.
func (c *checkpointer) duplicate(step int) {
	for len(c.sum.Dups) <= step {
		c.sum.Dups = append(c.sum.Dups, 0)
	}
	c.sum.Dups[step]++
}

// tally is the sums of the step of lane.
func (c *checkpointer) tally(lane int) *tally {
	if lane == 0 {
		return &c.sum.tally
	}
	for len(c.sum.Down) < lane {
		c.sum.Down = append(c.sum.Down, tally{})
	}
	return &c.sum.Down[lane-1]
}

// lane is the lane of input i: the batch's own inputs come first, then those it followed.
func (c *checkpointer) lane(i int) int {
	own := c.n - len(c.sum.Followed)
	if i < own {
		return 0
	}
	return c.sum.Followed[i-own].Lane
}

// heartbeat tells Temporal the batch is alive, with the checkpoint when it changed and
// the last one was sent long enough ago (or when forced, before the batch gives up).
// Between sends the previous checkpoint stands: a heartbeat without details would
// erase it.
func (c *checkpointer) heartbeat(force bool) {
	c.mu.Lock()
	c.dirty = c.dirty || c.newBegun
	c.newBegun = false
	c.mu.Unlock()
	if !force && (!c.dirty || time.Since(c.last) < c.every) {
		if time.Since(c.last) >= c.every {
			c.sendPayload()
		}
		return
	}
	c.sendPayload()
	c.dirty = false
}

// sendPayload heartbeats the checkpoint as it stands and keeps it as the one sent.
func (c *checkpointer) sendPayload() {
	p := c.payload()
	c.send(p)
	c.sent, c.last = &p, time.Now()
}

// payload is the checkpoint with the finished inputs as ranges. It is sent from another
// goroutine while the batch goes on (keepAlive), so it owns the sums of the steps
// downstream and the duplicates; appends to the other lists only write past its ends.
func (c *checkpointer) payload() checkpoint {
	p := c.sum
	p.Done = spans(c.done)
	c.mu.Lock()
	p.Began = spans(c.began)
	c.mu.Unlock()
	p.Down = slices.Clone(c.sum.Down)
	p.Dups = slices.Clone(c.sum.Dups)
	return p
}

// spans folds a set of indices into sorted inclusive ranges.
func spans(set map[int]bool) [][2]int {
	idx := make([]int, 0, len(set))
	for i := range set {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	var out [][2]int
	for _, i := range idx {
		if n := len(out); n > 0 && out[n-1][1] == i-1 {
			out[n-1][1] = i
		} else {
			out = append(out, [2]int{i, i})
		}
	}
	return out
}

// keepAlive runs fn (a write that may block for long on a store that is down) while
// heartbeating the checkpoint that stands, so the batch is not taken for lost: the one
// sent last, or before the first the one the attempt began from. That one stood before
// fn began: an attempt resumed from it runs again what finished since, which a retried
// batch does anyway. (Building a checkpoint here for each flush of a batch that has sent
// none cost more than the flush's own bookkeeping.)
func (c *checkpointer) keepAlive(fn func() error) error {
	snapshot := c.sent
	if snapshot == nil {
		snapshot = &c.standing
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(max(c.every/2, 100*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				c.send(*snapshot)
			}
		}
	}()
	err := fn()
	close(stop)
	wg.Wait()
	return err
}
