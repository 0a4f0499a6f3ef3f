package crawl

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Plan is a validated chain compiled for the engine: defaults resolved, params typed,
// and each step's consumers listed, so neither the workflow nor an activity looks
// anything up. It travels through workflow history, so it holds no functions.
type Plan struct {
	Chain    string `json:"chain"`
	Tenant   string `json:"tenant"`
	Robots   bool   `json:"robots"`
	Priority int    `json:"priority,omitempty"`
	Quota    Quota  `json:"quota,omitzero"`
	// MaxOutage ends a run whose work has waited this long on one unreachable
	// dependency (a store, Redis, a pool); 0 waits for as long as it takes.
	MaxOutage time.Duration `json:"max_outage,omitempty"`
	Steps     []PlanStep    `json:"steps"`
	// Notify are the chain's webhooks: starting a run registers them for its events.
	Notify []Notify `json:"notify,omitempty"`
}

// PlanStep is one step with every setting resolved.
type PlanStep struct {
	ID   string `json:"id"`
	Task string `json:"task"`
	// Biz is what the step's records are stored under (StepBiz); Output their schema
	// when that is not the task's own (a config-driven step's `fields:`).
	Biz         string        `json:"biz,omitempty"`
	Output      []Field       `json:"output,omitempty"`
	Params      Params        `json:"params,omitempty"`
	Timeout     time.Duration `json:"timeout"`
	Retries     int           `json:"retries"`
	Batch       int           `json:"batch"`
	Concurrency int           `json:"concurrency"`
	Parallel    int           `json:"parallel"`
	Priority    int           `json:"priority,omitempty"` // 1 (most urgent) … 5; 0: the chain's
	Shared      time.Duration `json:"shared,omitempty"`   // a shared source: fetched once per interval
	Affinity    *Affinity     `json:"affinity,omitempty"` // probe URL with params expanded
	MaxDepth    int           `json:"max_depth,omitempty"`
	Store       []string      `json:"store,omitempty"`
	Dedup       string        `json:"dedup,omitempty"`
	// Changes is where the step's change events go (`changes: kafka`); "": nowhere.
	Changes string `json:"changes,omitempty"`
	Root    bool   `json:"root,omitempty"`
	// Seeds are a root step's start inputs, one per start URL, when its task declares
	// them (TaskSpec.Seeds): each is fetched, retried and failed on its own. Empty: the
	// step starts from one empty input.
	Seeds []Input `json:"seeds,omitempty"`
	// SeedDuplicates counts the start URLs dropped from Seeds because an earlier one
	// is the same page (SeenKey); the run counts them as duplicates skipped.
	SeedDuplicates int        `json:"seed_duplicates,omitempty"`
	Consumers      []Consumer `json:"consumers,omitempty"`
	// Middlewares wrap the step's fetcher: the chain's, then the step's own, outermost
	// first. Workers build them by name (RegisterMiddleware).
	Middlewares []MiddlewareRef `json:"middlewares,omitempty"`
	// Follow lets the batch of a step that feeds this one run the inputs it produces for
	// it, on the same worker, instead of handing them back to the workflow (`follow:
	// true` in the chain file).
	Follow bool `json:"follow,omitempty"`
	// Revisit lets the step fetch a URL (or an input without one) again within a run;
	// by default each is fetched at most once per run, however many pages lead to it
	// (`revisit: true` in the chain file).
	Revisit bool `json:"revisit,omitempty"`
	// Recrawl plans when each record of the step is visited again; nil: every input
	// the step gets is run.
	Recrawl *Recrawl `json:"recrawl,omitempty"`
	// Render renders the step's pages in a headless browser; nil: never. Its batches
	// go to the workers that have one (workflows.SiteQueueOf).
	Render *Render `json:"render,omitempty"`
	// Politeness is the step's per-host limits (PlanPoliteness); nil: the fetcher's
	// defaults and robots.txt alone.
	Politeness *Politeness `json:"politeness,omitempty"`
	// Expect is what the step's data must look like (`expect:`); nil: anything goes.
	Expect *Expect `json:"expect,omitempty"`
	// Archive keeps the raw HTTP exchanges of the step's pages as WARC files (the
	// step's `archive:`, else the chain default's); nil: none.
	Archive *Archive `json:"archive,omitempty"`
	// Reparse answers the step's requests from an archived run (`trawler reparse`);
	// nil: from the network.
	Reparse *Reparse `json:"reparse,omitempty"`
	// Needs are the pooled resources the step's requests borrow besides its task's.
	Needs []string `json:"needs,omitempty"`
	// PoolSite is the site whose pools the step leases from and stores into; "": its
	// task's site to lease, its records' biz site to store.
	PoolSite string `json:"pool_site,omitempty"`
}

// SiteQueue is a site's task queue and the affinity that guards it. The workflow names
// the queue (workflows.SiteQueueOf); workers poll it while the affinity's probe passes.
type SiteQueue struct {
	Queue string `json:"queue"`
	Affinity
}

// expandProbe fills {param} placeholders of a probe URL from the step's params.
func expandProbe(a *Affinity, params Params) *Affinity {
	if a == nil {
		return nil
	}
	cp := *a
	for name, v := range params {
		cp.Probe = strings.ReplaceAll(cp.Probe, "{"+name+"}", fmt.Sprint(v))
	}
	return &cp
}

// TenantOrDefault is the tenant a run belongs to: the chain's, else "default".
func (p *Plan) TenantOrDefault() string {
	if p.Tenant == "" {
		return DefaultTenant
	}
	return p.Tenant
}

// Consumer is a step that takes another step's outputs.
type Consumer struct {
	Step     int    `json:"step"`
	ID       string `json:"id,omitempty"` // the consuming step's id
	Task     string `json:"task"`
	Biz      string `json:"biz,omitempty"` // what the consuming step stores under
	Each     string `json:"each,omitempty"`
	Self     bool   `json:"self,omitempty"`
	MaxDepth int    `json:"max_depth,omitempty"`
	// Recrawl: the consumer plans its records' visits, so an input it already plans
	// waits until it is due instead of running whenever this step emits it.
	Recrawl bool `json:"recrawl,omitempty"`
	// Revisit: the consumer fetches what it is handed even when the run has already
	// handed it the same input (PlanStep.Revisit).
	Revisit bool `json:"revisit,omitempty"`
}

// Compile turns a loaded chain into a Plan. The chain must have passed Load.
func (c *Chain) Compile(reg *Registry) (*Plan, error) {
	if reg == nil {
		reg = Default
	}
	p := &Plan{Chain: c.Name, Tenant: c.Tenant, Robots: c.Robots, Priority: c.Priority, Quota: c.Quota, MaxOutage: c.MaxOutage, Notify: c.Notify}
	index := map[string]int{}
	for i, s := range c.Steps {
		index[s.ID] = i
	}
	for _, s := range c.Steps {
		t, ok := reg.Get(s.Task)
		if !ok {
			return nil, fmt.Errorf("%s:%d: unknown task %q", c.File, s.Line, s.Task)
		}
		spec := t.Spec()
		params := Params{}
		for _, decl := range spec.Params {
			v, set := s.Params[decl.Name]
			if !set {
				v, set = c.Defaults.Params[decl.Name]
			}
			if !set {
				if decl.Default != nil {
					params[decl.Name] = decl.Default
				}
				continue
			}
			typed, err := checkType(decl.Type, v)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: step %q param `%s`: %v", c.File, s.Line, s.ID, decl.Name, err)
			}
			params[decl.Name] = typed
		}
		ps := PlanStep{
			ID: s.ID, Task: s.Task, Params: params, MaxDepth: s.MaxDepth, Root: onlyFromItself(s),
			Timeout:     firstDuration(s.Timeout, c.Defaults.Timeout, spec.Timeout, DefaultTimeout),
			Batch:       firstInt(s.Batch, c.Defaults.Batch, DefaultBatch),
			Concurrency: firstInt(s.Concurrency, c.Defaults.Concurrency, spec.HostConcurrency, DefaultConcurrency),
			Parallel:    firstInt(s.Parallel, c.Defaults.Parallel, DefaultParallel),
			Priority:    s.Priority,
			Shared:      s.Shared,
			Affinity:    expandProbe(s.Affinity, params),
			Store:       s.Store,
			Middlewares: append(slices.Clip(c.Middlewares), s.Middlewares...),
			Follow:      s.Follow,
			Revisit:     s.Revisit,
			Recrawl:     s.Recrawl,
			Changes:     s.Changes,
			Archive:     cmp.Or(s.Archive, c.Defaults.Archive),
			Needs:       s.Needs,
			PoolSite:    s.PoolSite,
		}
		if ps.Biz = StepBiz(c.Name, s, spec); ps.Biz != s.Task {
			ps.Output = spec.Output
			if spec.Schema != nil {
				ps.Output = spec.Schema(params)
			}
		}
		if s.Render.Renders() {
			ps.Render = s.Render
		}
		ps.Politeness = PlanPoliteness(s.Politeness, c.Defaults.Politeness, spec)
		if s.Expect != nil {
			e := *s.Expect
			e.Fail = cmp.Or(e.onViolation, c.OnViolation) == OnViolationFail
			ps.Expect = &e
		}
		if ps.Root && spec.Seeds != nil {
			ps.Seeds = spec.Seeds(params)
			if !ps.Revisit {
				ps.Seeds, ps.SeedDuplicates = dropDuplicateSeeds(ps.Seeds)
			}
		}
		switch {
		case s.Retries >= 0:
			ps.Retries = s.Retries
		case c.Defaults.Retries >= 0:
			ps.Retries = c.Defaults.Retries
		case spec.Retries > 0:
			ps.Retries = spec.Retries
		default:
			ps.Retries = DefaultRetries
		}
		if ps.Store == nil {
			ps.Store = c.Defaults.Store
		}
		ps.Dedup = s.Dedup
		if ps.Dedup == "" {
			ps.Dedup = c.Defaults.Dedup
		}
		if ps.Dedup == "" {
			ps.Dedup = DedupChanged
		}
		if ps.Store == nil && len(spec.Output) > 0 {
			ps.Store = []string{"jsonl"}
		}
		p.Steps = append(p.Steps, ps)
	}
	for i, s := range c.Steps {
		for _, from := range s.From {
			up := index[from]
			p.Steps[up].Consumers = append(p.Steps[up].Consumers, Consumer{
				Step: i, ID: s.ID, Task: s.Task, Biz: p.Steps[i].Biz, Each: s.Each, Self: up == i, MaxDepth: s.MaxDepth,
				Recrawl: s.Recrawl != nil, Revisit: s.Revisit,
			})
		}
	}
	if err := c.checkInputSize(p); err != nil {
		return nil, err
	}
	return p, nil
}

// MaxPlanBytes bounds a compiled chain: it is the input of the run's workflow, and
// Temporal refuses a payload over 2 MiB (its limit.blobSize.error), over 4 MiB already
// in transit.
const MaxPlanBytes = 2 << 20

// checkInputSize refuses a plan too large to start a run with, blaming the step whose
// params and start URLs take the most room: a long `urls` list, usually.
func (c *Chain) checkInputSize(p *Plan) error {
	all, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("%s: the chain cannot be encoded as a run's input: %v", c.File, err)
	}
	if len(all) <= MaxPlanBytes {
		return nil
	}
	biggest, most := 0, 0
	for i, s := range p.Steps {
		if b, _ := json.Marshal(s); len(b) > most {
			biggest, most = i, len(b)
		}
	}
	return Problems{{File: c.File, Line: c.Steps[biggest].Line, Msg: fmt.Sprintf(
		"step %q: its params and start URLs make the run's input %.1f MB, over Temporal's %d MiB limit on one payload; "+
			"put the URLs in a sitemap or CSV file a first step fetches (tasks generic.sitemap, generic.csv), or split them over several runs",
		p.Steps[biggest].ID, float64(len(all))/1e6, MaxPlanBytes>>20)}}
}

// onlyFromItself reports whether a step takes no other step's outputs: it is seeded with
// one empty input when the run starts.
func onlyFromItself(s Step) bool {
	for _, f := range s.From {
		if f != s.ID {
			return false
		}
	}
	return true
}

// ConsumesItself reports whether the step takes its own outputs (a paged list, a
// comments page and the next one).
func (s PlanStep) ConsumesItself() bool {
	for _, c := range s.Consumers {
		if c.Self {
			return true
		}
	}
	return false
}

// Routed is an input addressed to a step.
type Routed struct {
	Step  int   `json:"step"`
	Input Input `json:"in"`
}

// Route hands what one input of a step produced to the step's consumers: emitted inputs
// go to consumers whose task they name (or to all when they name none), and a consumer
// with `each` gets one input per element of that list field of every stored item. Inputs
// a self-consuming step would take beyond its max_depth are dropped and counted.
func (s PlanStep) Route(in Input, res Result) (out []Routed, depthLimited int) {
	for _, c := range s.Consumers {
		depth := 0
		if c.Self {
			depth = in.Depth + 1
		}
		add := func(next Input) {
			if c.Self && depth > c.MaxDepth {
				depthLimited++
				return
			}
			next.Depth = depth
			next.Task = ""
			next.Claim = "" // a task that copied its input does not pass its claim on
			out = append(out, Routed{Step: c.Step, Input: next})
		}
		if c.Each != "" {
			for _, it := range res.Items {
				for _, v := range listValues(it.Data[c.Each]) {
					add(Input{Value: v, Parent: it.Key})
				}
			}
			continue
		}
		for _, next := range res.Next {
			// An input names its consumer by task or, from an SDK task's Follow, by
			// step id.
			if next.Task == "" || next.Task == c.Task || (c.ID != "" && next.Task == c.ID) {
				add(next)
			}
		}
	}
	return out, depthLimited
}

// listValues returns the elements of any slice value ([]any, []int64, []string …).
func listValues(v any) []any {
	if v == nil {
		return nil
	}
	if l, ok := v.([]any); ok {
		return l
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return []any{v}
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out
}

func firstInt(vs ...int) int {
	for _, v := range vs {
		if v > 0 {
			return v
		}
	}
	return 0
}

func firstDuration(vs ...time.Duration) time.Duration {
	for _, v := range vs {
		if v > 0 {
			return v
		}
	}
	return 0
}

// Work is an input waiting for (another) attempt.
type Work struct {
	Input   Input  `json:"in"`
	Attempt int    `json:"attempt,omitempty"` // attempts already made
	Cause   string `json:"cause,omitempty"`   // why the last attempt failed
	Class   Cause  `json:"class,omitempty"`   // and that reason's cause
}

// Failure is an input that will not be retried: its retries are exhausted or its error
// is permanent. It is reported in the run summary and written to the failure log.
type Failure struct {
	Step     string `json:"step"`
	Input    Input  `json:"input"`
	Attempts int    `json:"attempts"`
	Cause    string `json:"cause"`           // the error, as the user reads it
	Class    Cause  `json:"class,omitempty"` // its cause, from a closed set (see CauseOf)
}

// Batch is the input of one activity: one step's task over up to Batch inputs.
type Batch struct {
	RunID  string `json:"run_id"`
	Chain  string `json:"chain"`
	Tenant string `json:"tenant"`
	Robots bool   `json:"robots"`
	Quota  Quota  `json:"quota,omitzero"`
	// Outages is set by runs that wait out dependency outages: a store, Redis or pool
	// failure then ends the batch with what it finished and the rest in
	// BatchResult.Waiting, instead of failing the activity. OutageHold is how long the
	// batch first keeps retrying a failed write itself.
	Outages    bool          `json:"outages,omitempty"`
	OutageHold time.Duration `json:"outage_hold,omitempty"`
	MaxOutage  time.Duration `json:"max_outage,omitempty"` // the chain's; 0: none
	StepIdx    int           `json:"step_idx"`
	Step       PlanStep      `json:"step"`
	Work       []Work        `json:"work"`
	Sequence   int64         `json:"seq"` // unique per batch within a run, for logs
	// Follow lets the batch run up to Follow inputs it produced for its own step itself,
	// admitting them for FollowFor after it started, instead of returning them in Out:
	// a paged list then costs no round trip through the server per page. 0: off.
	Follow    int           `json:"follow,omitempty"`
	FollowFor time.Duration `json:"follow_for,omitempty"`
	// FollowHold stops following once the batch holds that many outputs for other
	// steps, so they are not kept waiting; 0: no such limit.
	FollowHold int `json:"follow_hold,omitempty"`
	// Downstream are steps fed by this one (with `follow: true`) whose inputs the batch
	// may run itself, within Follow and FollowFor, each as one more batch of that step:
	// its task, sinks, dedup, budget and concurrency. Their results come back in
	// BatchResult.Downstream.
	Downstream []DownstreamStep `json:"downstream,omitempty"`
}

// DownstreamStep is a step a batch may follow its outputs into.
type DownstreamStep struct {
	StepIdx int      `json:"step_idx"`
	Step    PlanStep `json:"step"`
}

// BatchResult is what one batch produced.
type BatchResult struct {
	Pages        int `json:"pages"`     // inputs processed successfully
	Items        int `json:"items"`     // items handed to the sinks
	Skipped      int `json:"skipped"`   // records the task chose not to store
	Unchanged    int `json:"unchanged"` // items dedup found already stored
	DepthLimited int `json:"depth_limited,omitempty"`
	OutOfScope   int `json:"out_of_scope,omitempty"` // links not followed: out of the step's scope
	Trapped      int `json:"trapped,omitempty"`      // links a crawler trap rule dropped
	// TrapRules counts Trapped by rule.
	TrapRules map[string]int `json:"trap_rules,omitempty"`
	// Retried counts inputs an earlier attempt of the batch began and did not finish
	// (its worker died, or its store failed it), which this one ran again.
	Retried int `json:"retried,omitempty"`
	// Duplicates counts, per step of the plan by index, the inputs for that step the
	// batch did not hand on (or, for a root step, did not run) because the run's
	// seen-set had them already: the step's duplicates skipped.
	Duplicates []int         `json:"duplicates,omitempty"`
	Out        []Routed      `json:"out,omitempty"`
	Retry      []Work        `json:"retry,omitempty"`
	Failed     []Failure     `json:"failed,omitempty"`
	RetryAfter time.Duration `json:"retry_after,omitempty"` // the longest delay a failure asked for
	// Quota is set when a budget ran out during the batch: why, e.g. "quota reached:
	// 500 pages per run of chain demo". QuotaSkipped counts the inputs it left unrun
	// and QuotaDropped the items it did not store.
	Quota        string `json:"quota,omitempty"`
	QuotaSkipped int    `json:"quota_skipped,omitempty"`
	QuotaDropped int    `json:"quota_dropped,omitempty"`
	// Waiting are inputs the batch did not finish because a dependency is down (see
	// Outage): they go back to the queue with their attempts unchanged.
	Waiting []Work  `json:"waiting,omitempty"`
	Outage  *Outage `json:"outage,omitempty"`
	// Followed counts the inputs the batch took over from its own outputs (Batch.Follow);
	// their pages, items and failures are in the counts above, or, for a downstream
	// step's, in that step's result.
	Followed int `json:"followed,omitempty"`
	// Downstream are the results of the inputs the batch ran for the steps of
	// Batch.Downstream, one per step that ran any, each counted as a batch of that step.
	Downstream []BatchResult `json:"downstream,omitempty"`
	// StepIdx names the step of a Downstream result.
	StepIdx int `json:"step_idx,omitempty"`
	// Expect counts the batch's items for the step's expectations (nil: it has none).
	Expect *ExpectCounts `json:"expect,omitempty"`
}

// Outage is a dependency a batch could not reach, and the error it got. A batch that
// is still retrying it heartbeats one too, with since when and how many of its inputs
// wait, so status shows an outage before the batch hands its inputs back.
type Outage struct {
	Dependency string    `json:"dependency"`
	Cause      string    `json:"cause"`
	Since      time.Time `json:"since,omitzero"`
	Waiting    int       `json:"waiting,omitempty"`
}

// AddCounts adds the counts of from to those of to, making to when it is nil, and
// returns it.
func AddCounts(to, from map[string]int) map[string]int {
	for k, n := range from {
		if to == nil {
			to = map[string]int{}
		}
		to[k] += n
	}
	return to
}
