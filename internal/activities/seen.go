package activities

import (
	"cmp"
	"errors"
	"strconv"
	"sync"

	"go.temporal.io/sdk/activity"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/seen"
)

// The run's seen-set (internal/seen): every input a step is handed is claimed when it is
// discovered, and one the run has handed that step already is not handed on again, but
// counted as a duplicate of the step. Steps with `revisit: true` take every input.
//
// A batch claims as itself: the workflow run and activity id, the same in every attempt,
// so an attempt that dies after claiming finds its claims its own on its retry. An input
// that leaves a batch unfinished (handed back unrun, retried, waiting out an outage)
// carries the batch's id (crawl.Input.Claim): an attempt that died may have run it and
// claimed its outputs, and whichever batch runs it next claims them as that batch. So
// does an output the batch finds claimed by itself already (seen.Claimer.Earlier): a
// dead attempt may have followed and run it. Start
// inputs are claimed by the run's seeds claimer when their batch runs them, so a start
// page that other pages link to is fetched once too.

// seenKey is an input's key in the run's seen-set for one step; ok is false for an
// input the seen-set does not hold (crawl.SeenKey).
func seenKey(step int, in crawl.Input) (key string, ok bool) {
	k, ok := crawl.SeenKey(in)
	return strconv.Itoa(step) + "\x00" + k, ok
}

// openClaims makes the batch's claimers, and marks as handed on what an earlier attempt
// checkpointed as handed on or followed.
func (r *batchRun) openClaims() {
	if r.a.Seen == nil {
		return
	}
	info := activity.GetInfo(r.ctx)
	r.cp.claim = crawl.ClaimID(info.WorkflowExecution.RunID, info.ActivityID)
	r.claims = r.a.Seen.Claimer(r.seenChain(), r.b.RunID, r.cp.claim)
	if info.Attempt <= 1 {
		r.claims.FirstAttempt()
	}
	r.seeds = r.a.Seen.Claimer(r.seenChain(), r.b.RunID, "seeds")
	r.claimQueue = &claimQueue{answer: r.claimAll}
	var keys []string
	for _, out := range r.cp.sum.Out {
		if k, ok := seenKey(out.Step, out.Input); ok {
			keys = append(keys, k)
		}
	}
	for _, f := range r.cp.sum.Followed {
		if k, ok := seenKey(laneBatch(r.b, f.Lane).StepIdx, f.Input); ok {
			keys = append(keys, k)
		}
	}
	r.claims.Mark(keys)
}

// seenChain names the batch's chain to the seen-set, which sizes a run's set from the
// runs of its chain before it.
func (r *batchRun) seenChain() string {
	return cmp.Or(r.b.Tenant, crawl.DefaultTenant) + "/" + r.b.Chain
}

// claimOutputs claims a routed group's outputs in the run's seen-set and returns what
// drops those the run has handed their step already and counts them on the outcome.
// Claiming only reads the group, so it may run while the group is stored; apply, which
// writes the outputs, runs after. Outputs are claimed as this batch, except those of an
// input another batch handed back (crawl.Input.Claim): they are claimed as that batch,
// which may have claimed them before it died. Most outputs were claimed ahead, as their
// page finished (claimAhead): only those that depend on the items the pipeline kept are
// claimed here. If Redis does not answer, all go on: a page fetched twice costs a fetch,
// never a record.
func (r *batchRun) claimOutputs(l *lane, group []outcome) (apply func()) {
	if r.claims == nil {
		return func() {}
	}
	revisit := map[int]bool{}
	for _, c := range l.b.Step.Consumers {
		revisit[c.Step] = c.Revisit
	}
	ahead := aheadSteps(l.b.Step)
	// verdict is what the claim decided for one output: whether it goes on, and the
	// claim it leaves with ("" for none).
	type verdict struct {
		goes  bool
		claim string
	}
	verdicts := make([][]verdict, len(group))
	type late struct{ p, j int }
	var lates []late
	asks := map[string]*claimAsk{}
	var order []string
	for p := range group {
		o := &group[p]
		if o.ahead != nil {
			<-o.ahead.done
		}
		vs := make([]verdict, len(o.Out))
		k := 0 // o.Out's outputs claimed ahead are those of o.ahead, in order
		for j, out := range o.Out {
			vs[j].goes = true
			if o.ahead != nil && ahead[out.Step] && k < len(o.ahead.keys) {
				vs[j] = verdict{goes: o.ahead.goes(k), claim: o.ahead.claimOf(k)}
				k++
				continue
			}
			if revisit[out.Step] {
				continue
			}
			key, ok := seenKey(out.Step, out.Input)
			if !ok {
				continue
			}
			id := o.input.Claim
			a := asks[id]
			if a == nil {
				a = &claimAsk{id: id}
				asks[id] = a
				order = append(order, id)
			}
			a.keys = append(a.keys, key)
			lates = append(lates, late{p, j})
		}
		verdicts[p] = vs
	}
	if len(lates) > 0 {
		for _, id := range order {
			r.claimQueue.ask(asks[id])
		}
		next := map[string]int{}
		for _, lt := range lates {
			a := asks[group[lt.p].input.Claim]
			<-a.done
			k := next[a.id]
			next[a.id]++
			verdicts[lt.p][lt.j] = verdict{goes: a.goes(k), claim: a.claimOf(k)}
		}
	}
	return func() {
		for p := range group {
			o, vs := &group[p], verdicts[p]
			kept := o.Out[:0]
			for j, out := range o.Out {
				switch {
				case !vs[j].goes:
					o.dups = append(o.dups, out.Step)
					continue
				case vs[j].claim != "":
					out.Input.Claim = vs[j].claim
				}
				kept = append(kept, out)
			}
			o.Out = kept
		}
	}
}

// aheadSteps are the consumers of a step whose inputs are claimed as soon as the page
// that leads to them finishes (claimAhead): those a task hands on itself (Result.Next),
// which do not depend on what the item pipeline keeps. Inputs taken from items (each:)
// and those a recrawl plan may hold back are claimed when their group is stored;
// revisit: consumers are not claimed at all.
func aheadSteps(step crawl.PlanStep) map[int]bool {
	ahead := map[int]bool{}
	for _, c := range step.Consumers {
		ahead[c.Step] = claimedAhead(c)
	}
	return ahead
}

// claimedAhead reports whether a consumer's inputs are claimed ahead (see aheadSteps).
func claimedAhead(c crawl.Consumer) bool { return c.Each == "" && !c.Recrawl && !c.Revisit }

// claimAhead claims, as soon as a page finished, the inputs it hands its consumers
// itself: the claim's round trip runs while the outcome travels to collect and is
// judged, rather than after, which matters most on the run's critical path (the next
// list page waits for its claim). The verdicts wait on the outcome until its group is
// stored (claimOutputs), whose routing yields the same outputs in the same order.
func (r *batchRun) claimAhead(l *lane, o *outcome) {
	if r.claims == nil || !o.OK || len(o.result.Next) == 0 {
		return
	}
	ahead := aheadSteps(l.b.Step)
	outs, _ := l.b.Step.Route(o.input, crawl.Result{Next: o.result.Next})
	a := &claimAsk{id: o.input.Claim}
	for _, out := range outs {
		if ahead[out.Step] {
			key, ok := seenKey(out.Step, out.Input)
			if !ok {
				key = "" // an input the seen-set does not hold
			}
			a.keys = append(a.keys, key)
		}
	}
	if len(a.keys) > 0 {
		o.ahead = a
		r.claimQueue.ask(a)
	}
}

// answeredAhead reports whether every output of a group was claimed ahead and the
// claims are answered: claimOutputs then has no round trip left to make.
func answeredAhead(l *lane, group []outcome) bool {
	for _, c := range l.b.Step.Consumers {
		if !c.Revisit && !claimedAhead(c) { // claimed when the group is stored
			return false
		}
	}
	for _, o := range group {
		if o.ahead != nil {
			select {
			case <-o.ahead.done:
			default:
				return false
			}
		}
	}
	return true
}

// claimAsk is one request to claim keys as one claimer (a batch's id, "" for this
// batch), answered by the batch's claimQueue. A key "" is one the seen-set does not
// hold: it always goes on.
type claimAsk struct {
	id   string
	keys []string
	done chan struct{} // closed once answered
	// went and earlier are, per key, whether it goes on and whether an attempt of the
	// claimer that died had claimed it (seen.Claimer.Earlier); err, when set, means no
	// claim was made and every key goes on.
	went, earlier []bool
	err           error
	claimer       string // the claim id an output that was claimed earlier leaves with
}

// goes reports whether the k-th key goes on, and claimOf the claim it leaves with: an
// output an attempt that died had claimed may have been run by it (followed), claiming
// what it led to, so it leaves with the claim and the batch that runs it claims those as
// its own. When the claim failed, every key goes on with none.
func (a *claimAsk) goes(k int) bool { return a.err != nil || a.went[k] }

func (a *claimAsk) claimOf(k int) string {
	if a.err == nil && a.went[k] && a.earlier[k] {
		return a.claimer
	}
	return ""
}

// errBatchEnded answers a claim asked once its batch has ended: every key goes on.
var errBatchEnded = errors.New("the batch has ended")

// claimQueue runs a batch's claims one round at a time, so that a Claimer is only ever
// used by one goroutine, and each round takes every claim asked while the one before
// was in flight: claims of pages finishing at once share a round trip. A claim asked
// while none is in flight is answered by the goroutine that asks, with no hand-over to
// another: on the run's critical path (a list page whose next page waits for its claim)
// a goroutine's wake-up costs as much as the round trip on a busy worker.
type claimQueue struct {
	mu      sync.Mutex
	asks    []*claimAsk
	running bool // a round is in flight
	closed  bool
	answer  func([]*claimAsk)
}

// ask queues a claim; its done closes once it is answered.
func (q *claimQueue) ask(a *claimAsk) {
	a.done = make(chan struct{})
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		a.err = errBatchEnded
		close(a.done)
		return
	}
	q.asks = append(q.asks, a)
	if q.running {
		q.mu.Unlock()
		return
	}
	q.running = true
	asks := q.asks
	q.asks = nil
	q.mu.Unlock()
	q.answer(asks)
	q.next()
}

// next answers, in a goroutine of its own, what was asked while the last round ran: the
// goroutine that asked first goes on with its page.
func (q *claimQueue) next() {
	q.mu.Lock()
	asks := q.asks
	q.asks = nil
	q.running = len(asks) > 0
	q.mu.Unlock()
	if len(asks) > 0 {
		go func() { q.answer(asks); q.next() }()
	}
}

// close answers what is still queued with an error and refuses later asks.
func (q *claimQueue) close() {
	q.mu.Lock()
	asks := q.asks
	q.asks, q.closed = nil, true
	q.mu.Unlock()
	for _, a := range asks {
		a.err = errBatchEnded
		close(a.done)
	}
}

// claimAll answers asks with one Claim per claimer among them.
func (r *batchRun) claimAll(asks []*claimAsk) {
	var order []string
	by := map[string][]*claimAsk{}
	for _, a := range asks {
		if by[a.id] == nil {
			order = append(order, a.id)
		}
		by[a.id] = append(by[a.id], a)
	}
	for _, id := range order {
		var keys []string
		for _, a := range by[id] {
			for _, key := range a.keys {
				if key != "" {
					keys = append(keys, key)
				}
			}
		}
		c := r.claimer(id)
		goes, err := c.Claim(r.ctx, keys)
		if err != nil {
			r.a.Log.Warn("seen-set: cannot tell seen inputs from new ones; handing all on", "chain", r.b.Chain, "step", r.b.Step.ID, "err", err)
		}
		k := 0
		for _, a := range by[id] {
			a.err, a.claimer = err, cmp.Or(id, r.cp.claim)
			a.went, a.earlier = make([]bool, len(a.keys)), make([]bool, len(a.keys))
			for j, key := range a.keys {
				switch {
				case key == "":
					a.went[j] = true
				case err == nil:
					a.went[j], a.earlier[j] = goes[k], c.Earlier(key)
					k++
				}
			}
			close(a.done)
		}
	}
}

// claimer is the batch's claimer for id "" and the claimer of the batch that handed an
// input back for any other id.
func (r *batchRun) claimer(id string) *seen.Claimer {
	if id == "" || id == r.cp.claim {
		return r.claims
	}
	c := r.handedBack[id]
	if c == nil {
		if r.handedBack == nil {
			r.handedBack = map[string]*seen.Claimer{}
		}
		c = r.a.Seen.Claimer(r.seenChain(), r.b.RunID, id)
		r.handedBack[id] = c
	}
	return c
}

// claimSeeds claims the start inputs among the inputs of the batch's own step that are
// about to run for the first time, and returns those another batch had claimed (or
// that discovery claimed first): they are not run.
func (r *batchRun) claimSeeds(todo []int) (dup []int) {
	if r.seeds == nil || !r.b.Step.Root || r.b.Step.Revisit {
		return nil
	}
	var idx []int
	var keys []string
	for _, i := range todo {
		// A root step takes only its own outputs, one hop deeper each; at depth 0 it has
		// its start inputs (and a recrawl step's due pages). Retries are not claimed again.
		w := r.b.Work[i]
		if i >= r.own || w.Attempt > 0 || w.Input.Depth > 0 {
			continue
		}
		if k, ok := seenKey(r.b.StepIdx, w.Input); ok {
			idx = append(idx, i)
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	goes, err := r.seeds.Claim(r.ctx, keys)
	if err != nil {
		r.a.Log.Warn("seen-set: cannot claim start inputs; running all", "chain", r.b.Chain, "step", r.b.Step.ID, "err", err)
		return nil
	}
	for k, i := range idx {
		if !goes[k] {
			dup = append(dup, i)
		}
	}
	return dup
}
