package activities

import (
	"cmp"
	"strconv"

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
// which may have claimed them before it died. If Redis does not answer, all go on: a
// page fetched twice costs a fetch, never a record.
func (r *batchRun) claimOutputs(l *lane, group []outcome) (apply func()) {
	if r.claims == nil {
		return func() {}
	}
	revisit := map[int]bool{}
	for _, c := range l.b.Step.Consumers {
		revisit[c.Step] = c.Revisit
	}
	// keys are the outputs' keys in the seen-set, "" for those it does not hold:
	// canonicalizing a URL is the costly part of a claim, done once per output.
	keys := map[*outcome][]string{}
	for p := range group {
		o := &group[p]
		ks := make([]string, len(o.Out))
		for j, out := range o.Out {
			if !revisit[out.Step] {
				if k, ok := seenKey(out.Step, out.Input); ok {
					ks[j] = k
				}
			}
		}
		keys[o] = ks
	}
	// verdict is what the claim decided for one output: whether it goes on, and the
	// claim it leaves with ("" for none).
	type verdict struct {
		goes  bool
		claim string
	}
	verdicts := map[*outcome][]verdict{}
	var order []string
	by := map[string][]*outcome{}
	for p := range group {
		id := group[p].input.Claim
		if by[id] == nil {
			order = append(order, id)
		}
		by[id] = append(by[id], &group[p])
	}
	for _, id := range order {
		var claiming []string
		for _, o := range by[id] {
			for _, k := range keys[o] {
				if k != "" {
					claiming = append(claiming, k)
				}
			}
		}
		if len(claiming) == 0 {
			continue
		}
		c := r.claimer(id)
		goes, err := c.Claim(r.ctx, claiming)
		if err != nil {
			r.a.Log.Warn("seen-set: cannot tell seen inputs from new ones; handing all on", "chain", r.b.Chain, "step", l.b.Step.ID, "err", err)
			continue
		}
		k := 0
		for _, o := range by[id] {
			vs := make([]verdict, len(o.Out))
			for j, key := range keys[o] {
				vs[j].goes = true
				if key != "" {
					k++
					vs[j].goes = goes[k-1]
					// An output an attempt that died had claimed may have been run by
					// it (followed), claiming what it led to: it leaves with the claim,
					// so the batch that runs it claims those as its own.
					if vs[j].goes && c.Earlier(key) {
						vs[j].claim = cmp.Or(id, r.cp.claim)
					}
				}
			}
			verdicts[o] = vs
		}
	}
	return func() {
		for o, vs := range verdicts {
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
