package activities

import (
	"context"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"

	"trawler/crawl"
)

// checkpoint is what a batch heartbeats: what a retried attempt needs to resume without
// redoing a stored input, and no more. Finished inputs are index ranges; successes are
// summed, with only their outputs kept (the workflow still needs them); failures keep
// their causes. Its size grows with the batch's outputs, not with the square of the
// batch, and it is sent at most a few times per heartbeat timeout.
type checkpoint struct {
	Done         [][2]int       `json:"done,omitempty"` // finished inputs, inclusive ranges
	Pages        int            `json:"pages,omitempty"`
	Items        int            `json:"items,omitempty"`
	Skipped      int            `json:"skipped,omitempty"`
	Unchanged    int            `json:"unchanged,omitempty"`
	DepthLimited int            `json:"dl,omitempty"`
	Out          []crawl.Routed `json:"out,omitempty"`
	Failed       []outcome      `json:"failed,omitempty"`
}

// checkpointer keeps a batch's finished inputs (those of earlier attempts included) and
// heartbeats them.
type checkpointer struct {
	ctx   context.Context
	n     int
	done  map[int]bool
	unrun map[int]bool // left unrun by a budget
	sum   checkpoint   // Done is filled when heartbeating
	every time.Duration
	last  time.Time
	dirty bool
}

// newCheckpointer resumes from what an earlier attempt of the batch heartbeated.
func newCheckpointer(ctx context.Context, n int) *checkpointer {
	c := &checkpointer{ctx: ctx, n: n, done: map[int]bool{}, unrun: map[int]bool{}, every: time.Second}
	if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb/4 > c.every {
		c.every = hb / 4
	}
	if activity.HasHeartbeatDetails(ctx) {
		var prev checkpoint
		if err := activity.GetHeartbeatDetails(ctx, &prev); err == nil {
			for _, r := range prev.Done {
				for i := r[0]; i <= r[1] && i < n; i++ {
					c.done[i] = true
				}
			}
			prev.Done = nil
			c.sum = prev
		}
	}
	return c
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

// finish records a stored (or failed) input.
func (c *checkpointer) finish(o outcome) {
	c.done[o.Index] = true
	c.dirty = true
	if !o.OK {
		c.sum.Failed = append(c.sum.Failed, outcome{Index: o.Index, Err: o.Err, Permanent: o.Permanent, RetryAfter: o.RetryAfter})
		return
	}
	c.sum.Pages++
	c.sum.Items += o.Items
	c.sum.Skipped += o.Skipped
	c.sum.Unchanged += o.Unchanged
	c.sum.DepthLimited += o.DepthLimited
	c.sum.Out = append(c.sum.Out, o.Out...)
}

// heartbeat tells Temporal the batch is alive, with the checkpoint when it changed and
// the last one was sent long enough ago (or when forced, before the batch gives up).
// Between sends the previous checkpoint stands: a heartbeat without details would
// erase it.
func (c *checkpointer) heartbeat(force bool) {
	if !force && (!c.dirty || time.Since(c.last) < c.every) {
		if time.Since(c.last) >= c.every {
			activity.RecordHeartbeat(c.ctx, c.payload())
			c.last = time.Now()
		}
		return
	}
	activity.RecordHeartbeat(c.ctx, c.payload())
	c.last, c.dirty = time.Now(), false
}

// payload is the checkpoint with the finished inputs as ranges.
func (c *checkpointer) payload() checkpoint {
	p := c.sum
	p.Done = spans(c.done)
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
