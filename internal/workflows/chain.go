// Package workflows holds Trawler's Temporal workflows. ChainWorkflow walks a chain's DAG:
// it cuts each step's inputs into batches, runs each batch as one activity, routes what
// the batch produced to the consuming steps, re-queues failed inputs with backoff, and
// keeps its own history bounded by handing large backlogs to child workflows and by
// continuing as new. Workflow code must stay deterministic: no I/O, no wall clock, no map
// iteration, no goroutines — only workflow.* primitives.
package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trawlerhq/trawler/crawl"
)

// Names under which the worker registers the workflow and the activities. A batch runs
// as an activity named after its step's task; runs started before ChangeTaskActivities
// name it RunBatchActivity.
const (
	ChainWorkflowName = "ChainWorkflow"
	RunBatchActivity  = "RunBatch"
	// RegisterSitesActivity tells the workers about the site queues of a run's steps
	// that have an affinity.
	RegisterSitesActivity = "RegisterSites"
	// RecrawlDueActivity claims the pages of a run's recrawl steps that are due.
	RecrawlDueActivity = "RecrawlDue"
	ProgressQuery      = "progress"
	DefaultTaskQueue   = "trawler"
	// PauseSignal and ResumeSignal pause and resume a run (PauseRequest); the root
	// passes them on to its partitions.
	PauseSignal  = "pause"
	ResumeSignal = "resume"
	// MemoPausedBy and MemoPausedSince are the memo fields a paused run shows who
	// paused it and since when (RFC 3339) in; both empty while it is not paused.
	MemoPausedBy    = "paused_by"
	MemoPausedSince = "paused_since"
)

// PauseRequest is the payload of PauseSignal and ResumeSignal: who asks.
type PauseRequest struct {
	By string `json:"by"`
}

// Pause says who paused a run and when.
type Pause struct {
	By    string    `json:"by"`
	Since time.Time `json:"since"`
}

// Tuning bounds a run's history and pacing. Zero values take the defaults; tests shrink
// them to exercise continue-as-new and partitioning quickly.
type Tuning struct {
	// ContinueAsNewAt is the history length at which a workflow drains its in-flight
	// work and continues as new (default 4000, well under the 10,000 events a history
	// may reach: draining adds a bounded number of events).
	ContinueAsNewAt int `json:"continue_as_new_at,omitempty"`
	// SplitAt is the queued-input count above which work moves to child workflows, in
	// partitions of PartitionSize inputs (defaults 2000 and 1000).
	SplitAt       int `json:"split_at,omitempty"`
	PartitionSize int `json:"partition_size,omitempty"`
	// MaxChildren bounds child workflows running at once per workflow (default 16).
	MaxChildren int `json:"max_children,omitempty"`
	// RetryBase is the first backoff of a failed input, doubling per attempt up to
	// RetryMax (defaults 2s and 5m); a Retry-After from the site wins when longer.
	RetryBase time.Duration `json:"retry_base,omitempty"`
	RetryMax  time.Duration `json:"retry_max,omitempty"`
	// HeartbeatTimeout is how long a silent batch activity may go before Temporal
	// declares its worker lost and retries it elsewhere (default 30s).
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`
	// FailureSample is how many failures a summary keeps with their causes (default 50).
	FailureSample int `json:"failure_sample,omitempty"`
	// AgingStep is how long a batch may wait for a worker before it gains one level of
	// priority (default 1m): it is withdrawn from the task queue and dispatched again
	// one level more urgent, so low-priority work behind a steady stream of urgent work
	// still runs.
	AgingStep time.Duration `json:"aging_step,omitempty"`
	// A batch that cannot reach a dependency (a store, Redis, a pool) first retries it
	// itself for OutageHold (default 30s); then its unfinished inputs go back to the
	// queue, not before OutageBase, doubling per batch that meets the same outage up to
	// OutageMax (defaults 5s and 10m). BatchAttempts bounds Temporal's own retries of a
	// batch whose worker died or that failed outright (default 10); after them its
	// inputs wait the same way. No outage ends a run unless the chain sets max_outage.
	OutageHold    time.Duration `json:"outage_hold,omitempty"`
	OutageBase    time.Duration `json:"outage_base,omitempty"`
	OutageMax     time.Duration `json:"outage_max,omitempty"`
	BatchAttempts int           `json:"batch_attempts,omitempty"`
	// A batch of a step that consumes its own outputs (a paged list, a comments page and
	// the next) runs those outputs itself, on the same worker, for up to FollowInputs
	// inputs or FollowFor (defaults 500 and 20s) instead of a round trip through the
	// server per hop; what is left comes back to the workflow as usual. A negative
	// FollowInputs switches following off.
	FollowInputs int           `json:"follow_inputs,omitempty"`
	FollowFor    time.Duration `json:"follow_for,omitempty"`
}

func (t Tuning) withDefaults() Tuning {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&t.ContinueAsNewAt, 4000)
	def(&t.SplitAt, 2000)
	def(&t.PartitionSize, 1000)
	def(&t.MaxChildren, 16)
	def(&t.FailureSample, 50)
	defd(&t.RetryBase, 2*time.Second)
	defd(&t.RetryMax, 5*time.Minute)
	defd(&t.HeartbeatTimeout, 30*time.Second)
	defd(&t.AgingStep, time.Minute)
	defd(&t.OutageHold, 30*time.Second)
	defd(&t.OutageBase, 5*time.Second)
	defd(&t.OutageMax, 10*time.Minute)
	def(&t.BatchAttempts, 10)
	if t.FollowInputs == 0 {
		t.FollowInputs = 500
	}
	defd(&t.FollowFor, 20*time.Second)
	return t
}

// ChainInput starts a chain run (root), a partition of one (child), or resumes either
// after continue-as-new.
type ChainInput struct {
	RunID     string     `json:"run_id"` // the root workflow id; stable for the whole run
	Plan      crawl.Plan `json:"plan"`
	TaskQueue string     `json:"task_queue,omitempty"`
	Tuning    Tuning     `json:"tuning,omitempty"`
	// Queue is the work to do. Empty on a fresh root run: the root steps are seeded.
	Queue  []Pending `json:"queue,omitempty"`
	Seeded bool      `json:"seeded,omitempty"`
	// Carry holds counters across continue-as-new.
	Carry *Summary `json:"carry,omitempty"`
	// NextChild numbers child workflows uniquely across continue-as-new.
	NextChild int `json:"next_child,omitempty"`
}

// RecordedRun names the workflow execution a recorded history belongs to; replaying
// needs it because partition ids derive from the workflow id.
type RecordedRun struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
}

// Pending is an input queued for a step, not to be tried before NotBefore. Since is
// when it started waiting; its age raises the priority of the batch it goes out in.
type Pending struct {
	Step      int        `json:"step"`
	Work      crawl.Work `json:"work"`
	NotBefore time.Time  `json:"not_before,omitzero"`
	Since     time.Time  `json:"since,omitzero"`
	// Dep is the dependency the input waits for, while it is down.
	Dep string `json:"dep,omitempty"`
}

// StepStats counts what happened in one step.
type StepStats struct {
	ID           string `json:"id"`
	Task         string `json:"task"`
	Pages        int    `json:"pages"`     // inputs processed successfully
	Items        int    `json:"items"`     // items stored
	Skipped      int    `json:"skipped"`   // records the task chose not to store
	Unchanged    int    `json:"unchanged"` // items dedup found already stored, unchanged
	Failed       int    `json:"failed"`    // inputs given up on (see Failures)
	Retried      int    `json:"retried"`   // attempts that failed and were run again: re-queued, or begun by a batch that died
	DepthLimited int    `json:"depth_limited,omitempty"`
	// DuplicatesSkipped counts the inputs the step was handed again in the run and did
	// not fetch again (the run's seen-set; `revisit: true` turns it off).
	DuplicatesSkipped int `json:"duplicates_skipped,omitempty"`
	// OutOfScope and TrapDropped count links the step's pages did not follow: out of its
	// scope (scope, include/exclude, max_pages), or dropped by a crawler trap rule.
	OutOfScope  int `json:"out_of_scope,omitempty"`
	TrapDropped int `json:"trap_dropped,omitempty"`
	// TrapRules counts TrapDropped by the rule that dropped each link.
	TrapRules map[string]int `json:"trap_rules,omitempty"`
	Aged      int            `json:"aged,omitempty"` // batches re-sent more urgently after waiting AgingStep
	// QuotaSkipped counts inputs never run because a budget ran out; QuotaDropped
	// items a budget kept from being stored.
	QuotaSkipped int `json:"quota_skipped,omitempty"`
	QuotaDropped int `json:"quota_dropped,omitempty"`
	// OutageSkipped counts inputs never run because the run ended on max_outage.
	OutageSkipped int `json:"outage_skipped,omitempty"`
	// Due counts the pages a recrawl step's plans had due when the run started.
	Due int `json:"due,omitempty"`
	// Expect is the counters the step's expectations are judged on (nil: it has none).
	Expect   *crawl.ExpectCounts `json:"expect,omitempty"`
	Queued   int                 `json:"queued"`    // live: waiting in this workflow
	InFlight int                 `json:"in_flight"` // live: inside running batch activities
}

// Summary is a run's (or a partition's) progress and, once done, its result.
type Summary struct {
	RunID         string          `json:"run_id"`
	Chain         string          `json:"chain"`
	Steps         []StepStats     `json:"steps"`
	Failures      []crawl.Failure `json:"failures,omitempty"`
	FailuresTotal int             `json:"failures_total"`
	Batches       int             `json:"batches"`
	Partitions    int             `json:"partitions"` // child workflows finished
	Running       int             `json:"running_children"`
	Continued     int             `json:"continued"` // continue-as-new count (this workflow)
	Done          bool            `json:"done"`
	// Status is how a finished run ended: "completed", or "quota_reached" when a budget
	// ran out (Quota says which) and the run stopped early.
	Status string `json:"status,omitempty"`
	Quota  string `json:"quota,omitempty"`
	// Outcome is how a finished run went for whoever relies on it: completed, partial
	// or failed (see OutcomeOf); canceled runs return no summary.
	Outcome string `json:"outcome,omitempty"`
	// Outages are the dependencies work is waiting for now; Reason says why a run
	// that ended on max_outage ended.
	Outages []Outage `json:"outages,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	// Retrying are, live, the queued inputs waiting to be tried again, each with its
	// attempts so far and the error and cause of its last one (up to FailureSample).
	Retrying []crawl.Failure `json:"retrying,omitempty"`
	// Violations are the steps' broken expectations (`expect:`): judged when the run
	// ends, and live, while it runs, from the shares so far (no min_items, no history).
	Violations []Violation `json:"violations,omitempty"`
	// Paused is set while the run is paused: its running batches finish, none starts
	// until it is resumed. It carries over continue-as-new with the counters.
	Paused *Pause `json:"paused,omitempty"`
}

// Outage is a dependency (a store, Redis, a pool, a worker) that batches could not
// reach, from the first batch that met it until a batch of the same steps succeeds.
type Outage struct {
	Dependency string    `json:"dependency"`
	Since      time.Time `json:"since"`
	Last       time.Time `json:"last"`    // when a batch last met it
	Cause      string    `json:"cause"`   // the last error
	Batches    int       `json:"batches"` // batches it sent back
	Waiting    int       `json:"waiting"` // inputs queued until it is back
	Steps      []string  `json:"steps"`
}

// Run end states in Summary.Status.
const (
	StatusCompleted    = "completed"
	StatusQuotaReached = "quota_reached"
	StatusOutage       = "outage"
)

// Run outcomes in Summary.Outcome, and the exit codes `trawler run --wait` ends with.
const (
	OutcomeCompleted = "completed" // every input succeeded (or was stopped by a budget)
	// OutcomeViolations: the run completed, and broke an expectation of its chain.
	OutcomeViolations = "completed_with_violations"
	OutcomePartial    = "partial"  // some inputs failed, or an outage left some unrun
	OutcomeFailed     = "failed"   // nothing was stored, or every input of a step failed
	OutcomeCanceled   = "canceled" // the run was canceled before it ended
)

// OutcomeOf judges a finished run from its counters. A run fails when it has failures
// and stored nothing (no item new or unchanged), or when a step saw inputs and every
// one of them failed: a chain whose only seed answers 404 has not done its job. A
// quota stop is the user's own budget and judged like a run that ended. A run that broke
// an expectation of a step whose on_violation is fail fails; one that broke others and
// would have completed completes with violations.
func OutcomeOf(s *Summary) string {
	if slices.ContainsFunc(s.Violations, func(v Violation) bool { return v.Fail }) {
		return OutcomeFailed
	}
	_, items, _, failed := s.Totals()
	unrun := 0
	for _, st := range s.Steps {
		if st.Failed > 0 && st.Pages == 0 {
			return OutcomeFailed
		}
		unrun += st.OutageSkipped
	}
	switch {
	case (failed > 0 || unrun > 0) && items+s.Unchanged() == 0:
		return OutcomeFailed
	case failed > 0 || unrun > 0:
		return OutcomePartial
	case len(s.Violations) > 0:
		return OutcomeViolations
	}
	return OutcomeCompleted
}

// Unchanged sums the items dedup did not store again.
func (s *Summary) Unchanged() int {
	n := 0
	for _, st := range s.Steps {
		n += st.Unchanged
	}
	return n
}

// Totals sums the per-step counters.
func (s *Summary) Totals() (pages, items, skipped, failed int) {
	for _, st := range s.Steps {
		pages += st.Pages
		items += st.Items
		skipped += st.Skipped
		failed += st.Failed
	}
	return
}

func (s *Summary) merge(o *Summary, sample int) {
	for i := range s.Steps {
		if i >= len(o.Steps) {
			break
		}
		a, b := &s.Steps[i], o.Steps[i]
		a.Pages += b.Pages
		a.Items += b.Items
		a.Skipped += b.Skipped
		a.Unchanged += b.Unchanged
		a.Failed += b.Failed
		a.Retried += b.Retried
		a.DepthLimited += b.DepthLimited
		a.DuplicatesSkipped += b.DuplicatesSkipped
		a.OutOfScope += b.OutOfScope
		a.TrapDropped += b.TrapDropped
		// Sums are the same in any order of the map walk.
		//workflowcheck:ignore
		a.TrapRules = crawl.AddCounts(a.TrapRules, b.TrapRules)
		a.Aged += b.Aged
		a.QuotaSkipped += b.QuotaSkipped
		a.QuotaDropped += b.QuotaDropped
		a.OutageSkipped += b.OutageSkipped
		if b.Expect != nil {
			if a.Expect == nil {
				a.Expect = &crawl.ExpectCounts{}
			}
			a.Expect.Add(b.Expect)
		}
	}
	s.Batches += o.Batches
	s.Partitions += o.Partitions
	s.FailuresTotal += o.FailuresTotal
	if s.Quota == "" {
		s.Quota = o.Quota
	}
	if s.Reason == "" {
		s.Reason = o.Reason
	}
	for _, f := range o.Failures {
		if len(s.Failures) < sample {
			s.Failures = append(s.Failures, f)
		}
	}
}

// Changes to workflow code that alter the commands a run issues are guarded with
// workflow.GetVersion, so a run started by an older build finishes on a newer one; the
// recorded histories in testdata prove it for every build (see README, "Changing
// workflow code").
const (
	// ChangeDownstreamFirst: batches of later steps are dispatched before earlier ones,
	// so a run finishes what it has started (stories before more feed pages) and its
	// queues stay short. Runs started before it dispatch in plan order.
	ChangeDownstreamFirst = "downstream-first"
	// ChangeStepActivityIDs: batch activities are named "<step>/<n>" instead of Temporal's
	// running number, so a change that reorders batches of different steps is caught by
	// replay (the ids no longer match) instead of handing a result to the wrong step.
	ChangeStepActivityIDs = "step-activity-ids"
	// ChangeFairPriority: batches carry the tenant as Temporal fairness key and a
	// priority that gains a level for paging steps and for every AgingStep of waiting;
	// a batch no worker took within AgingStep is withdrawn and dispatched again.
	ChangeFairPriority = "fair-priority"
	// ChangeSeedPerURL: a root step whose task splits its start URLs (TaskSpec.Seeds)
	// starts from one input per URL instead of one input fetching them all, so one bad
	// URL no longer takes its siblings down with it.
	ChangeSeedPerURL = "seed-per-url"
	// ChangeOutlastOutages: a batch that cannot reach a dependency hands its unfinished
	// inputs back (BatchResult.Waiting) and the run waits the outage out with a growing
	// backoff, shown in its progress, instead of failing after the batch's retries; a
	// batch that fails outright after BatchAttempts waits the same way.
	ChangeOutlastOutages = "outlast-outages"
	// ChangeTaskActivities: a step's batches run as an activity named after its task
	// (demo.story) instead of the generic RunBatch, so the Temporal UI and its metrics
	// show the tasks the chain names.
	ChangeTaskActivities = "task-activities"
	// ChangeFollowOwnStep: a batch of a self-consuming step follows its own outputs on
	// its worker (Batch.Follow), so a paged list costs one activity per FollowInputs
	// pages instead of one per page; its time limit grows by the follow window.
	ChangeFollowOwnStep = "follow-own-step"
	// ChangeFollowDownstream: a batch also follows its outputs into the steps it feeds
	// that allow it (`follow: true`), each as one more batch of that step holding one of
	// its `parallel` slots, so detail → comments → next comments page costs no round
	// trip through the server per hop either.
	ChangeFollowDownstream = "follow-downstream"
	// ChangeRecrawlDue: a fresh run of a chain with recrawl steps starts by claiming
	// their due pages (RecrawlDueActivity), which become those steps' first inputs.
	ChangeRecrawlDue = "recrawl-due"
	// ChangeExpectations: a run whose steps have `expect:` judges them when it ends,
	// reading its chain's earlier runs first (RecentRunsActivity) when a rule compares
	// with them, and lists what broke in its summary.
	ChangeExpectations = "expectations"
	// ChangeCostSizedBatches: a step whose pages prove cheap takes larger batches (up to
	// four times its `batch`, about batchTarget of work each), so a crawl of cheap pages
	// pays for fewer activities. Version 2: such a step also gathers its inputs into
	// full batches while batches that feed it are in flight (runner.gathering).
	ChangeCostSizedBatches = "cost-sized-batches"
	// ChangePauseResume: a run takes PauseSignal and ResumeSignal; while paused it
	// starts no batch and no partition, lets running batches finish, records who paused
	// it in its memo and passes the signals on to its running partitions.
	ChangePauseResume = "pause-resume"
)

// gates is the table of guarded changes, in the order they were made: each change's name
// and the newest version of it this build runs. A run records one version marker per
// gate, and each call site asks for its change by name (gateSet.version), so adding a
// row shifts no other change. Retiring a change is the only way a row leaves the table;
// see README, "Changing workflow code".
var gates = []gate{
	{change: ChangeDownstreamFirst, version: 1},
	{change: ChangeStepActivityIDs, version: 1},
	{change: ChangeFairPriority, version: 1},
	{change: ChangeSeedPerURL, version: 1},
	{change: ChangeOutlastOutages, version: 1},
	{change: ChangeTaskActivities, version: 1},
	{change: ChangeFollowOwnStep, version: 1},
	{change: ChangeFollowDownstream, version: 1},
	{change: ChangeRecrawlDue, version: 1},
	{change: ChangeExpectations, version: 1},
	{change: ChangeCostSizedBatches, version: 2},
	{change: ChangePauseResume, version: 1},
}

// gate is one guarded change: the newest version of it this build runs, and whether its
// old path is retired (a history without its marker is then refused, not replayed).
type gate struct {
	change  string
	version workflow.Version
	retired bool
}

// gateSet holds the gates a build knows by name; a change it lacks is one that build
// predates, so it runs the old path and writes no marker.
type gateSet map[string]gate

// version is the version of change this run follows: the one its history recorded, or
// the newest this build runs on a fresh run; DefaultVersion when the build predates it.
func (g gateSet) version(ctx workflow.Context, change string) workflow.Version {
	c, ok := g[change]
	if !ok {
		return workflow.DefaultVersion
	}
	oldest := workflow.DefaultVersion
	if c.retired {
		oldest = 1
	}
	return workflow.GetVersion(ctx, change, oldest, c.version)
}

// gatesBefore is the table as the build made just before gates[n] saw it.
func gatesBefore(n int) gateSet {
	g := make(gateSet, n)
	for _, c := range gates[:n] {
		g[c.change] = c
	}
	return g
}

// IsBatchActivity reports whether an activity type runs a batch (RunBatch, or a task's
// name: every name but the site registration's and the recrawl claim's).
func IsBatchActivity(name string) bool {
	return name != RegisterSitesActivity && name != RecrawlDueActivity && name != RecentRunsActivity
}

// Changes returns the guarded changes, oldest first; a run started by this build records
// one version marker for each.
func Changes() []string {
	names := make([]string, len(gates))
	for i, g := range gates {
		names[i] = g.change
	}
	return names
}

// ChainWorkflow runs a chain (or one partition of it) to completion.
func ChainWorkflow(ctx workflow.Context, in ChainInput) (*Summary, error) {
	return chainWorkflow(ctx, in, gatesBefore(len(gates)))
}

// WorkflowBefore returns the chain workflow as a build made before `change` ran it: the
// guarded changes from that one on are off and their version markers are not written.
// Upgrade tests run it on an "old" worker and switch to ChainWorkflow mid-run. It panics
// on a name that is not in the table, so a test cannot silently run today's workflow.
func WorkflowBefore(change string) func(workflow.Context, ChainInput) (*Summary, error) {
	n := slices.IndexFunc(gates, func(g gate) bool { return g.change == change })
	if n < 0 {
		panic(fmt.Sprintf("workflows.WorkflowBefore: no guarded change %q; guarded changes: %s", change, strings.Join(Changes(), ", ")))
	}
	g := gatesBefore(n)
	return func(ctx workflow.Context, in ChainInput) (*Summary, error) { return chainWorkflow(ctx, in, g) }
}

// chainWorkflow runs a chain with the guarded changes in g. The version markers are read
// in the order the changes were made, once, at the start of the run: a run's history
// holds them in that order.
func chainWorkflow(ctx workflow.Context, in ChainInput, g gateSet) (*Summary, error) {
	r := newRunner(ctx, in)
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (*Summary, error) {
		return r.progress(), nil
	}); err != nil {
		return nil, err
	}
	r.downstreamFirst = g.version(ctx, ChangeDownstreamFirst) >= 1
	r.stepActivityIDs = g.version(ctx, ChangeStepActivityIDs) >= 1
	r.fairPriority = g.version(ctx, ChangeFairPriority) >= 1
	seedPerURL := g.version(ctx, ChangeSeedPerURL) >= 1
	r.outages = g.version(ctx, ChangeOutlastOutages) >= 1
	r.taskActivities = g.version(ctx, ChangeTaskActivities) >= 1
	r.follow = g.version(ctx, ChangeFollowOwnStep) >= 1
	r.followDown = g.version(ctx, ChangeFollowDownstream) >= 1
	recrawlDue := g.version(ctx, ChangeRecrawlDue) >= 1
	r.expectations = g.version(ctx, ChangeExpectations) >= 1
	costSized := g.version(ctx, ChangeCostSizedBatches)
	r.costSized, r.gather = costSized >= 1, costSized >= 2
	if g.version(ctx, ChangePauseResume) >= 1 {
		r.takeSignals(ctx)
	}
	if recrawlDue {
		r.seedDue(ctx)
	}
	r.seed(ctx, seedPerURL)
	return r.run(ctx)
}

type runner struct {
	in              ChainInput
	downstreamFirst bool // ChangeDownstreamFirst is on for this run
	stepActivityIDs bool // ChangeStepActivityIDs is on for this run
	fairPriority    bool // ChangeFairPriority is on for this run
	outages         bool // ChangeOutlastOutages is on for this run
	taskActivities  bool // ChangeTaskActivities is on for this run
	follow          bool // ChangeFollowOwnStep is on for this run
	followDown      bool // ChangeFollowDownstream is on for this run
	expectations    bool // ChangeExpectations is on for this run
	costSized       bool // ChangeCostSizedBatches is on for this run
	gather          bool // ChangeCostSizedBatches is at version 2 or later for this run
	// pageCost is each step's observed batch time per page (a moving average), from
	// which costSized sizes its batches; zero until a batch of the step has ended.
	pageCost  []time.Duration
	tune      Tuning
	plan      crawl.Plan
	queues    [][]Pending // per step, FIFO
	inFlight  []int       // per step: batches running
	inputsIn  []int       // per step: inputs inside running batches
	children  int
	running   []workflow.ChildWorkflowFuture // partitions started and not yet ended
	sum       *Summary
	seq       int64
	nextChild int
	selector  workflow.Selector
	timerAt   time.Time // the pending wake-up timer, zero when none
	err       error
}

func newRunner(ctx workflow.Context, in ChainInput) *runner {
	if in.RunID == "" { // started by a schedule: each firing is its own run
		in.RunID = workflow.GetInfo(ctx).WorkflowExecution.ID
	}
	r := &runner{in: in, tune: in.Tuning.withDefaults(), plan: in.Plan, nextChild: in.NextChild}
	n := len(in.Plan.Steps)
	r.queues = make([][]Pending, n)
	r.inFlight = make([]int, n)
	r.inputsIn = make([]int, n)
	r.pageCost = make([]time.Duration, n)
	if in.Carry != nil {
		r.sum = in.Carry
	} else {
		r.sum = &Summary{RunID: in.RunID, Chain: in.Plan.Chain, Steps: make([]StepStats, n)}
		for i, s := range in.Plan.Steps {
			r.sum.Steps[i].ID, r.sum.Steps[i].Task = s.ID, s.Task
		}
	}
	for _, p := range in.Queue {
		r.queues[p.Step] = append(r.queues[p.Step], p)
	}
	r.selector = workflow.NewSelector(ctx)
	return r
}

// seed queues the root steps' start inputs on a fresh run: one per start URL where the
// step's task splits them (perURL), else one empty input.
func (r *runner) seed(ctx workflow.Context, perURL bool) {
	if r.in.Seeded {
		return
	}
	now := workflow.Now(ctx)
	for i, s := range r.plan.Steps {
		if !s.Root {
			continue
		}
		if perURL && len(s.Seeds) > 0 {
			r.sum.Steps[i].DuplicatesSkipped += s.SeedDuplicates // start URLs listed twice
			for _, in := range s.Seeds {
				r.queues[i] = append(r.queues[i], Pending{Step: i, Work: crawl.Work{Input: in}, Since: now})
			}
			continue
		}
		r.queues[i] = append(r.queues[i], Pending{Step: i, Since: now})
	}
}

func (r *runner) progress() *Summary {
	s := *r.sum
	s.Steps = append([]StepStats(nil), r.sum.Steps...)
	for i := range s.Steps {
		s.Steps[i].Queued = len(r.queues[i])
		s.Steps[i].InFlight = r.inputsIn[i]
	}
	s.Outages = append([]Outage(nil), r.sum.Outages...)
	for k := range s.Outages {
		o := &s.Outages[k]
		o.Waiting = 0
		for _, q := range r.queues {
			for _, p := range q {
				if p.Dep == o.Dependency {
					o.Waiting++
				}
			}
		}
	}
	s.Running = r.children
	if !s.Done && r.expectations {
		s.Violations = Judge(&r.plan, &s, nil, false)
	}
	s.Retrying = nil
	for _, q := range r.queues {
		for _, p := range q {
			if p.Work.Cause != "" && len(s.Retrying) < r.tune.FailureSample {
				s.Retrying = append(s.Retrying, crawl.Failure{Step: r.plan.Steps[p.Step].ID, Input: p.Work.Input,
					Attempts: p.Work.Attempt, Cause: p.Work.Cause, Class: p.Work.Class}.Redacted())
			}
		}
	}
	return &s
}

func (r *runner) queued() int {
	n := 0
	for _, q := range r.queues {
		n += len(q)
	}
	return n
}

func (r *runner) busy() bool {
	for _, n := range r.inFlight {
		if n > 0 {
			return true
		}
	}
	return r.children > 0
}

func (r *runner) run(ctx workflow.Context) (*Summary, error) {
	r.registerSites(ctx)
	for {
		if r.err != nil {
			return nil, r.err
		}
		if r.sum.Quota != "" {
			// A budget ran out: start nothing new, let running batches and partitions
			// finish (they meet the same budget), and count what was left unrun.
			if !r.busy() {
				return r.stopForQuota(), nil
			}
			r.selector.Select(ctx)
			continue
		}
		if r.sum.Reason != "" || r.outageTooLong(ctx) {
			// An outage outlasted the chain's max_outage: end the run the same way.
			if !r.busy() {
				return r.stopForOutage(), nil
			}
			r.selector.Select(ctx)
			continue
		}
		draining := workflow.GetInfo(ctx).GetCurrentHistoryLength() >= r.tune.ContinueAsNewAt
		paused := r.sum.Paused != nil
		if draining {
			if !r.busy() {
				return nil, r.continueAsNew(ctx)
			}
		} else if !paused {
			r.split(ctx)
			r.dispatch(ctx)
		}
		if !r.busy() {
			if r.queued() == 0 {
				r.sum.Done = true
				r.sum.Status = StatusCompleted
				r.judgeEnd(ctx)
				r.sum.Outcome = OutcomeOf(r.sum)
				return r.progress(), nil
			}
			if !draining && !paused {
				r.wakeAtEarliest(ctx)
			}
		}
		r.selector.Select(ctx)
	}
}

// takeSignals lets the run be paused and resumed (ChangePauseResume). A pause takes
// effect at the next turn of the run loop: running batches and partitions go on, and
// their results are taken in, but nothing new starts until a resume.
func (r *runner) takeSignals(ctx workflow.Context) {
	pause := workflow.GetSignalChannel(ctx, PauseSignal)
	resume := workflow.GetSignalChannel(ctx, ResumeSignal)
	r.selector.AddReceive(pause, func(c workflow.ReceiveChannel, _ bool) {
		var req PauseRequest
		c.Receive(ctx, &req)
		if r.sum.Paused == nil {
			r.setPaused(ctx, &Pause{By: req.By, Since: workflow.Now(ctx)})
		}
		r.forward(ctx, PauseSignal, req)
	})
	r.selector.AddReceive(resume, func(c workflow.ReceiveChannel, _ bool) {
		var req PauseRequest
		c.Receive(ctx, &req)
		if r.sum.Paused != nil {
			r.setPaused(ctx, nil)
		}
		r.forward(ctx, ResumeSignal, req)
	})
}

// setPaused records the run's pause (nil: resumed) in its progress and, for the root,
// in its memo, where status and listings read it without asking a worker.
func (r *runner) setPaused(ctx workflow.Context, p *Pause) {
	r.sum.Paused = p
	if workflow.GetInfo(ctx).ParentWorkflowExecution != nil {
		return
	}
	memo := map[string]any{MemoPausedBy: "", MemoPausedSince: ""}
	if p != nil {
		memo[MemoPausedBy], memo[MemoPausedSince] = p.By, p.Since.UTC().Format(time.RFC3339)
	}
	if err := workflow.UpsertMemo(ctx, memo); err != nil {
		workflow.GetLogger(ctx).Warn("pause not recorded in the memo", "err", err)
	}
}

// forward passes a pause or resume on to the running partitions, each in its own
// coroutine: a partition not started yet is signalled once it is.
func (r *runner) forward(ctx workflow.Context, signal string, req PauseRequest) {
	for _, c := range r.running {
		workflow.Go(ctx, func(ctx workflow.Context) {
			if err := c.SignalChildWorkflow(ctx, signal, req).Get(ctx, nil); err != nil {
				// A partition that ended meanwhile has nothing to pause.
				workflow.GetLogger(ctx).Info("partition not signalled", "signal", signal, "err", err)
			}
		})
	}
}

// registerSites tells the workers about the site queues of steps with an affinity, once
// per workflow run (each continue-as-new renews the registration). Plans without such
// steps, and so every run recorded before affinities existed, issue nothing here.
func (r *runner) registerSites(ctx workflow.Context) {
	sites := siteQueues(&r.plan, r.in.TaskQueue)
	if len(sites) == 0 || workflow.GetInfo(ctx).ParentWorkflowExecution != nil {
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: r.in.TaskQueue, StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	if err := workflow.ExecuteActivity(actx, RegisterSitesActivity, sites).Get(ctx, nil); err != nil {
		// Workers started with the site queues configured still serve them; say why
		// the others may not.
		workflow.GetLogger(ctx).Warn("site queues not registered", "err", err)
	}
}

// stopForQuota ends a run whose budget ran out, counting its queued inputs as skipped.
func (r *runner) stopForQuota() *Summary {
	return r.stopEarly(StatusQuotaReached, func(st *StepStats) *int { return &st.QuotaSkipped })
}

// stopEarly ends a run before its work is done, counting each step's queued inputs in
// the counter skipped picks.
func (r *runner) stopEarly(status string, skipped func(*StepStats) *int) *Summary {
	for i, q := range r.queues {
		*skipped(&r.sum.Steps[i]) += len(q)
		r.queues[i] = nil
	}
	r.sum.Done = true
	r.sum.Status = status
	r.sum.Outcome = OutcomeOf(r.sum)
	return r.progress()
}

// outageTooLong reports whether a dependency has been down for longer than the chain's
// max_outage, and if so records why the run ends.
func (r *runner) outageTooLong(ctx workflow.Context) bool {
	if !r.outages || r.plan.MaxOutage <= 0 {
		return false
	}
	now := workflow.Now(ctx)
	for _, o := range r.sum.Outages {
		if now.Sub(o.Since) >= r.plan.MaxOutage {
			r.sum.Reason = fmt.Sprintf("%s unreachable since %s, longer than max_outage %s: %s",
				o.Dependency, o.Since.UTC().Format(time.RFC3339), r.plan.MaxOutage, o.Cause)
			return true
		}
	}
	return false
}

// stopForOutage ends a run that waited too long for a dependency, counting its queued
// inputs as skipped.
func (r *runner) stopForOutage() *Summary {
	return r.stopEarly(StatusOutage, func(st *StepStats) *int { return &st.OutageSkipped })
}

// split hands queued work beyond SplitAt to child workflows, so no single history grows
// with the size of the crawl.
func (r *runner) split(ctx workflow.Context) {
	for r.queued() > r.tune.SplitAt && r.children < r.tune.MaxChildren {
		// Take the partition from the longest queue, from its tail: the head is what
		// this workflow dispatches next.
		longest := 0
		for i := range r.queues {
			if len(r.queues[i]) > len(r.queues[longest]) {
				longest = i
			}
		}
		q := r.queues[longest]
		n := min(r.tune.PartitionSize, len(q))
		part := append([]Pending(nil), q[len(q)-n:]...)
		r.queues[longest] = q[:len(q)-n]
		r.startChild(ctx, part)
	}
}

func (r *runner) startChild(ctx workflow.Context, part []Pending) {
	r.nextChild++
	id := fmt.Sprintf("%s/p%d", workflow.GetInfo(ctx).WorkflowExecution.ID, r.nextChild)
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: id,
		TaskQueue:  r.in.TaskQueue,
	})
	child := ChainInput{RunID: r.in.RunID, Plan: r.plan, TaskQueue: r.in.TaskQueue, Tuning: r.in.Tuning, Queue: part, Seeded: true}
	r.children++
	f := workflow.ExecuteChildWorkflow(cctx, ChainWorkflowName, child)
	r.running = append(r.running, f)
	r.selector.AddFuture(f, func(f workflow.Future) {
		r.children--
		r.running = slices.DeleteFunc(r.running, func(c workflow.ChildWorkflowFuture) bool { return c == f })
		var res Summary
		if err := f.Get(ctx, &res); err != nil {
			if r.outages && !temporal.IsCanceledError(err) {
				// A partition only fails when its workflow does (a bug, a terminate):
				// its work goes back to the queue rather than ending the run.
				r.requeueWaiting(ctx, part, "partition", err.Error())
				return
			}
			r.err = fmt.Errorf("partition %s failed: %w", id, err)
			return
		}
		res.Partitions++
		r.sum.merge(&res, r.tune.FailureSample)
	})
}

// dispatch starts batches while steps have ready inputs and free slots.
func (r *runner) dispatch(ctx workflow.Context) {
	now := workflow.Now(ctx)
	n := len(r.plan.Steps)
	for k := range n {
		i := k
		if r.downstreamFirst {
			i = n - 1 - k
		}
		step := r.plan.Steps[i]
		for r.inFlight[i] < step.Parallel && !r.gathering(i, now) {
			batch := r.takeReady(i, r.batchSize(i), now)
			if len(batch) == 0 {
				break
			}
			r.startBatch(ctx, i, batch, now)
		}
	}
}

// batchTarget is about how long a batch of cheap pages is sized to last under
// ChangeCostSizedBatches: long enough that the activity's own cost (scheduling, a
// history event, a heartbeat, a result) is small beside its pages, short enough that a
// batch's checkpoints and retries stay cheap.
const batchTarget = 5 * time.Second

// batchSize is how many inputs step i's next batch takes: its `batch`; under
// ChangeCostSizedBatches, once the step's batches have shown what a page costs, as many
// as fill batchTarget, up to four times `batch`, but never more than a fair share of
// the queued inputs among its free batch slots, so parallel batches are not starved and
// a run's last inputs are not left to one long batch.
func (r *runner) batchSize(i int) int {
	step := r.plan.Steps[i]
	if !r.costSized || r.pageCost[i] <= 0 {
		return step.Batch
	}
	n := min(int(batchTarget/r.pageCost[i]), 4*step.Batch)
	free := max(step.Parallel-r.inFlight[i], 1)
	share := (len(r.queues[i]) + free - 1) / free
	return max(step.Batch, min(n, share))
}

// gatherWithin is how long a full batch (`batch` inputs) of a step lasts at most for
// its pages to count as cheap enough to gather, and how long gathering holds its inputs
// back at most (runner.gathering).
const gatherWithin = time.Second

// gathering reports whether step i holds its ready inputs back instead of starting a
// batch of fewer than its `batch` now (ChangeCostSizedBatches version 2): its pages are
// cheap, and a batch in flight of the step or of a step feeding it, whose pages are
// cheap too, will hand it more when it ends — soon, and every batch's end dispatches
// again. A cheap crawl's fan-outs and hand-backs (the 3 comments pages left over here,
// the 7 there) then travel in a few full batches instead of many of a handful of
// inputs, each an activity's round trips through the server. Pages not measured yet, a
// feeder that may run long, or inputs ready for gatherWithin already never wait (a
// feeder following its outputs for long lets them go at the next batch's end).
func (r *runner) gathering(i int, now time.Time) bool {
	if !r.gather || !r.cheap(i) {
		return false
	}
	if n, oldest := r.ready(i, now, r.plan.Steps[i].Batch); n >= r.plan.Steps[i].Batch || now.Sub(oldest) >= gatherWithin {
		return false
	}
	waitFor := false
	for j, n := range r.inFlight {
		if n == 0 || (j != i && !feeds(r.plan.Steps[j], i)) {
			continue
		}
		if !r.cheap(j) {
			return false
		}
		waitFor = true
	}
	return waitFor
}

// cheap reports whether a full batch of step i's pages lasts under gatherWithin, by
// the page cost its batches have shown.
func (r *runner) cheap(i int) bool {
	return r.pageCost[i] > 0 && r.pageCost[i]*time.Duration(r.plan.Steps[i].Batch) <= gatherWithin
}

// feeds reports whether step s hands its outputs to step i.
func feeds(s crawl.PlanStep, i int) bool {
	return slices.ContainsFunc(s.Consumers, func(c crawl.Consumer) bool { return c.Step == i })
}

// ready counts step i's queued inputs whose NotBefore has passed, up to limit, and
// says since when the first of them is queued.
func (r *runner) ready(i int, now time.Time, limit int) (n int, oldest time.Time) {
	for _, p := range r.queues[i] {
		if n == limit {
			break
		}
		if !p.NotBefore.After(now) {
			if n == 0 || p.Since.Before(oldest) {
				oldest = p.Since
			}
			n++
		}
	}
	return n, oldest
}

// notePageCost averages into step i's page cost the time a batch that ran took per page
// (its own and those it followed into other steps).
func (r *runner) notePageCost(s sentBatch, res crawl.BatchResult, now time.Time) {
	pages := res.Pages + len(res.Failed)
	for _, d := range res.Downstream {
		pages += d.Pages + len(d.Failed)
	}
	if !r.costSized || pages == 0 || s.started.IsZero() {
		return
	}
	cost := now.Sub(s.started) / time.Duration(pages)
	if r.pageCost[s.step] == 0 {
		r.pageCost[s.step] = cost
	} else {
		r.pageCost[s.step] = (r.pageCost[s.step] + cost) / 2
	}
}

// takeReady removes up to n inputs whose NotBefore has passed, keeping queue order.
func (r *runner) takeReady(step, n int, now time.Time) []Pending {
	var out []Pending
	q := r.queues[step]
	kept := q[:0]
	for _, p := range q {
		if len(out) < n && !p.NotBefore.After(now) {
			out = append(out, p)
		} else {
			kept = append(kept, p)
		}
	}
	r.queues[step] = kept
	return out
}

// startBatch sends pending inputs of step i to a worker as one batch activity; batchDone
// handles its result. Each named step below decides one part of the batch, so a guarded
// change touches one of them.
func (r *runner) startBatch(ctx workflow.Context, i int, pending []Pending, now time.Time) {
	b := r.newBatch(i, pending)
	opts := r.batchOptions(&b)
	downstream := r.followInto(i)
	r.planFollow(&b, &opts, downstream)
	if r.stepActivityIDs {
		opts.ActivityID = fmt.Sprintf("%s/%d", b.Step.ID, b.Sequence)
	}
	r.prioritize(&opts, i, pending, now)
	sent := sentBatch{step: i, pending: pending, work: b.Work, downstream: downstream, activityID: opts.ActivityID, started: now}
	r.hold(sent, 1)
	activityName := RunBatchActivity
	if r.taskActivities {
		activityName = b.Step.Task
	}
	f := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), activityName, b)
	r.selector.AddFuture(f, func(f workflow.Future) { r.batchDone(ctx, sent, f) })
}

// sentBatch is what the run remembers of a batch it started, to settle it when it ends.
type sentBatch struct {
	step       int
	pending    []Pending    // as taken from the queue, with their age
	work       []crawl.Work // the batch's inputs
	downstream []int        // steps it follows into, one batch slot of each held
	activityID string       // "" before ChangeStepActivityIDs
	started    time.Time    // when it was sent
}

// newBatch builds the batch of step i holding pending's inputs, numbered in run order.
func (r *runner) newBatch(i int, pending []Pending) crawl.Batch {
	work := make([]crawl.Work, len(pending))
	for k, p := range pending {
		work[k] = p.Work
	}
	r.seq++
	return crawl.Batch{
		RunID: r.in.RunID, Chain: r.plan.Chain, Tenant: r.plan.Tenant, Robots: r.plan.Robots, Quota: r.plan.Quota,
		StepIdx: i, Step: r.plan.Steps[i], Work: work, Sequence: r.seq,
	}
}

// batchOptions chooses the activity's queue, time limits and retries for b, and how b
// meets an outage.
func (r *runner) batchOptions(b *crawl.Batch) workflow.ActivityOptions {
	step := b.Step
	// A batch runs its inputs `concurrency` at a time, each within the step timeout;
	// the activity's own limit leaves room for that plus storing the items.
	rounds := (len(b.Work) + step.Concurrency - 1) / max(step.Concurrency, 1)
	opts := workflow.ActivityOptions{
		TaskQueue:           SiteQueueOf(step, r.in.TaskQueue),
		StartToCloseTimeout: time.Duration(rounds+1)*step.Timeout + time.Minute,
		HeartbeatTimeout:    r.tune.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			// Per-input failures never fail the activity; an activity error means the
			// worker or a store is in trouble, which is worth waiting out.
			MaximumAttempts: 20,
		},
	}
	if r.outages {
		// Outages are waited out by the run (requeueWaiting); Temporal's retries are
		// left for batches whose worker died.
		b.Outages, b.OutageHold, b.MaxOutage = true, r.tune.OutageHold, r.plan.MaxOutage
		opts.RetryPolicy.MaximumAttempts = int32(r.tune.BatchAttempts)
		// A batch whose items some store already holds rides the outage out itself
		// (see activities' hold); its heartbeat still catches a dead worker.
		opts.StartToCloseTimeout += r.tune.OutageHold + cmp.Or(r.plan.MaxOutage, 24*time.Hour)
	}
	return opts
}

// planFollow lets b follow its outputs on its worker, into its own step and into the
// downstream steps it holds a slot of, and gives it the time that takes.
func (r *runner) planFollow(b *crawl.Batch, opts *workflow.ActivityOptions, downstream []int) {
	step := b.Step
	if !r.follow || r.tune.FollowInputs <= 0 || (!step.ConsumesItself() && len(downstream) == 0) {
		return
	}
	b.Follow, b.FollowFor = r.tune.FollowInputs, r.tune.FollowFor
	lanes := []int{b.StepIdx}
	timeout := step.Timeout
	for _, d := range downstream {
		b.Downstream = append(b.Downstream, crawl.DownstreamStep{StepIdx: d, Step: r.plan.Steps[d]})
		lanes = append(lanes, d)
		timeout = max(timeout, r.plan.Steps[d].Timeout)
	}
	// Following stops once the batch holds a full load for the steps it feeds and
	// does not follow into (every batch slot of theirs), so they never idle while it
	// pages on.
	for _, l := range lanes {
		for _, c := range r.plan.Steps[l].Consumers {
			if !slices.Contains(lanes, c.Step) {
				cs := r.plan.Steps[c.Step]
				b.FollowHold += max(cs.Batch, 1) * max(cs.Parallel, 1)
			}
		}
	}
	// The batch admits followed inputs for FollowFor; each of those still running
	// then gets its step timeout.
	opts.StartToCloseTimeout += r.tune.FollowFor + timeout
}

// prioritize sets the batch's priority and fairness key: the run's priority, or under
// ChangeFairPriority one that ages with the inputs' wait (see priority).
func (r *runner) prioritize(opts *workflow.ActivityOptions, i int, pending []Pending, now time.Time) {
	switch {
	case r.fairPriority:
		prio := r.priority(i, pending, now)
		opts.Priority = temporal.Priority{PriorityKey: prio, FairnessKey: r.plan.TenantOrDefault()}
		// Eager dispatch hands a batch straight to the worker that scheduled it, past
		// everything waiting in the queue: right for urgent work, wrong for work below
		// the default priority.
		opts.DisableEagerExecution = prio > crawl.DefaultPriority
		if prio > 1 { // nothing to gain from waiting at the top level
			opts.ScheduleToStartTimeout = r.tune.AgingStep
		}
	case r.plan.Priority > 0:
		opts.Priority = temporal.Priority{PriorityKey: r.plan.Priority}
	}
}

// hold counts a batch into (n = 1) or out of (n = -1) the batch slots and in-flight
// inputs of its step, and the slots of the steps it follows into.
func (r *runner) hold(s sentBatch, n int) {
	r.inFlight[s.step] += n
	r.inputsIn[s.step] += n * len(s.work)
	for _, d := range s.downstream {
		r.inFlight[d] += n // the batch is one of that step's batches too
	}
}

// batchDone settles a batch that ended: its inputs go back to the queue when no worker
// took it in time or it failed through an outage, its counts and outputs are taken in
// when it ran.
func (r *runner) batchDone(ctx workflow.Context, s sentBatch, f workflow.Future) {
	r.hold(s, -1)
	var res crawl.BatchResult
	err := f.Get(ctx, &res)
	switch {
	case waitedTooLong(err):
		// No worker took the batch within AgingStep: queue its inputs again at the
		// head, keeping their age, so the next dispatch sends them more urgently.
		r.queues[s.step] = append(append([]Pending(nil), s.pending...), r.queues[s.step]...)
		r.sum.Steps[s.step].Aged++
	case err != nil && r.outages && !temporal.IsCanceledError(err):
		r.requeueFailed(ctx, s, err)
	case err != nil:
		r.err = fmt.Errorf("step %s: batch of %d inputs failed after all activity retries: %w", r.plan.Steps[s.step].ID, len(s.work), err)
	default:
		r.notePageCost(s, res, workflow.Now(ctx))
		r.takeResult(ctx, s.step, res)
	}
}

// requeueFailed puts back the inputs of a batch that failed even after its own retries:
// its worker keeps dying, or something it needs is missing. They wait and try again later.
func (r *runner) requeueFailed(ctx workflow.Context, s sentBatch, err error) {
	dep, cause := dependencyOf(err)
	waiting := pendingOf(s.step, s.work)
	if s.activityID != "" {
		// Its attempts may have claimed outputs in the run's seen-set: the batch
		// that runs these inputs next claims them as this one (activities/seen.go).
		claim := crawl.ClaimID(workflow.GetInfo(ctx).WorkflowExecution.RunID, s.activityID)
		for k := range waiting {
			if waiting[k].Work.Input.Claim == "" {
				waiting[k].Work.Input.Claim = claim
			}
		}
	}
	r.requeueWaiting(ctx, waiting, dep, cause)
}

// takeResult takes in a batch of step i that ran: its counts and outputs, those of the
// steps it followed into, and what an outage kept it from finishing.
func (r *runner) takeResult(ctx workflow.Context, i int, res crawl.BatchResult) {
	r.sum.Batches++
	r.absorb(ctx, i, res)
	for _, d := range res.Downstream {
		r.absorb(ctx, d.StepIdx, d)
	}
	if !r.outages {
		return
	}
	if res.Outage != nil {
		r.requeueWaiting(ctx, pendingOf(i, res.Waiting), res.Outage.Dependency, res.Outage.Cause)
	} else {
		r.outageOver(ctx, i)
	}
	for _, d := range res.Downstream {
		if d.Outage != nil {
			r.requeueWaiting(ctx, pendingOf(d.StepIdx, d.Waiting), d.Outage.Dependency, d.Outage.Cause)
		}
	}
}

// followInto lists the steps a batch of step i may follow its outputs into: those it
// feeds that allow it (`follow: true`), serve the same task queue and have a batch slot
// free, which the batch then holds.
func (r *runner) followInto(i int) []int {
	if !r.followDown || r.tune.FollowInputs <= 0 {
		return nil
	}
	step := r.plan.Steps[i]
	var out []int
	for _, c := range step.Consumers {
		d := r.plan.Steps[c.Step]
		if c.Self || !d.Follow || slices.Contains(out, c.Step) || r.inFlight[c.Step] >= d.Parallel ||
			SiteQueueOf(d, r.in.TaskQueue) != SiteQueueOf(step, r.in.TaskQueue) {
			continue
		}
		out = append(out, c.Step)
	}
	return out
}

// absorb records the counts of a batch of step i (or of the inputs a batch followed into
// step i) and queues what it produced.
func (r *runner) absorb(ctx workflow.Context, i int, res crawl.BatchResult) {
	now := workflow.Now(ctx)
	st := &r.sum.Steps[i]
	st.Pages += res.Pages
	st.Items += res.Items
	st.Skipped += res.Skipped
	st.Unchanged += res.Unchanged
	st.DepthLimited += res.DepthLimited
	st.OutOfScope += res.OutOfScope
	st.TrapDropped += res.Trapped
	// Sums are the same in any order of the map walk.
	//workflowcheck:ignore
	st.TrapRules = crawl.AddCounts(st.TrapRules, res.TrapRules)
	for s, n := range res.Duplicates { // by step index: the steps the batch's outputs go to
		if s < len(r.sum.Steps) {
			r.sum.Steps[s].DuplicatesSkipped += n
		}
	}
	st.Retried += res.Retried
	st.Failed += len(res.Failed)
	st.QuotaSkipped += res.QuotaSkipped
	st.QuotaDropped += res.QuotaDropped
	if res.Expect != nil {
		if st.Expect == nil {
			st.Expect = &crawl.ExpectCounts{}
		}
		st.Expect.Add(res.Expect)
	}
	if res.Quota != "" && r.sum.Quota == "" {
		r.sum.Quota = res.Quota
	}
	r.sum.FailuresTotal += len(res.Failed)
	for _, f := range res.Failed {
		if len(r.sum.Failures) < r.tune.FailureSample {
			r.sum.Failures = append(r.sum.Failures, f)
		}
	}
	for _, o := range res.Out {
		r.queues[o.Step] = append(r.queues[o.Step], Pending{Step: o.Step, Work: crawl.Work{Input: o.Input}, Since: now})
	}
	for _, w := range res.Retry {
		st.Retried++
		delay := r.backoff(w.Attempt)
		if res.RetryAfter > delay {
			delay = res.RetryAfter
		}
		r.queues[i] = append(r.queues[i], Pending{Step: i, Work: w, NotBefore: now.Add(delay), Since: now.Add(delay)})
	}
}

// requeueWaiting queues inputs that wait for a dependency, not before the outage's
// backoff, and records the outage for the run's progress. Their attempts are unchanged:
// the inputs were not at fault.
func (r *runner) requeueWaiting(ctx workflow.Context, pend []Pending, dep, cause string) {
	if len(pend) == 0 {
		return
	}
	o := r.meetOutage(ctx, pend[0].Step, dep, cause)
	now := workflow.Now(ctx)
	delay := r.tune.OutageBase
	for k := 1; k < o.Batches && delay < r.tune.OutageMax; k++ {
		delay *= 2
	}
	at := now.Add(min(delay, r.tune.OutageMax))
	if r.plan.MaxOutage > 0 {
		// Wake by the deadline at the latest, so the run ends on time.
		at = minTime(at, o.Since.Add(r.plan.MaxOutage))
	}
	for _, p := range pend {
		p.NotBefore, p.Since, p.Dep = at, at, dep
		r.queues[p.Step] = append(r.queues[p.Step], p)
	}
}

func pendingOf(step int, work []crawl.Work) []Pending {
	out := make([]Pending, len(work))
	for k, w := range work {
		out[k] = Pending{Step: step, Work: w}
	}
	return out
}

// meetOutage records that a batch of step i met the outage of dep.
func (r *runner) meetOutage(ctx workflow.Context, i int, dep, cause string) *Outage {
	now := workflow.Now(ctx)
	o := r.findOutage(dep)
	if o == nil {
		r.sum.Outages = append(r.sum.Outages, Outage{Dependency: dep, Since: now})
		o = &r.sum.Outages[len(r.sum.Outages)-1]
	}
	o.Last, o.Cause = now, cause
	o.Batches++
	if id := r.plan.Steps[i].ID; !slices.Contains(o.Steps, id) {
		o.Steps = append(o.Steps, id)
	}
	return o
}

func (r *runner) findOutage(dep string) *Outage {
	for k := range r.sum.Outages {
		if r.sum.Outages[k].Dependency == dep {
			return &r.sum.Outages[k]
		}
	}
	return nil
}

// outageOver ends the outages a batch of step i met before: the batch got through, so
// what it depends on is back. Inputs waiting for them are released at once.
func (r *runner) outageOver(ctx workflow.Context, i int) {
	id := r.plan.Steps[i].ID
	now := workflow.Now(ctx)
	kept := r.sum.Outages[:0]
	for _, o := range r.sum.Outages {
		if !slices.Contains(o.Steps, id) {
			kept = append(kept, o)
			continue
		}
		for s := range r.queues {
			for k := range r.queues[s] {
				if p := &r.queues[s][k]; p.Dep == o.Dependency {
					p.Dep, p.NotBefore, p.Since = "", now, now
				}
			}
		}
	}
	r.sum.Outages = kept
}

// dependencyOf names what a failed batch could not reach: the dependency its activity
// reported, or its worker when the batch failed in another way.
func dependencyOf(err error) (dep, cause string) {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == crawl.DependencyErrorType && ae.HasDetails() {
		if ae.Details(&dep) == nil && dep != "" {
			return dep, crawl.RedactText(ae.Error())
		}
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return "worker", "batch timed out (" + te.TimeoutType().String() + "): " + crawl.RedactText(err.Error())
	}
	return "worker", crawl.RedactText(err.Error())
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (r *runner) backoff(attempt int) time.Duration {
	d := r.tune.RetryBase
	for k := 1; k < attempt && d < r.tune.RetryMax; k++ {
		d *= 2
	}
	return min(d, r.tune.RetryMax)
}

// wakeAtEarliest sets a timer for the earliest delayed input when nothing else will
// wake the loop.
func (r *runner) wakeAtEarliest(ctx workflow.Context) {
	var earliest time.Time
	for _, q := range r.queues {
		for _, p := range q {
			if earliest.IsZero() || p.NotBefore.Before(earliest) {
				earliest = p.NotBefore
			}
		}
	}
	if !r.timerAt.IsZero() && !r.timerAt.After(earliest) {
		return // a timer at or before that time is already pending
	}
	d := earliest.Sub(workflow.Now(ctx))
	if d < time.Millisecond {
		d = time.Millisecond
	}
	r.timerAt = earliest
	r.selector.AddFuture(workflow.NewTimer(ctx, d), func(workflow.Future) { r.timerAt = time.Time{} })
}

func (r *runner) continueAsNew(ctx workflow.Context) error {
	var queue []Pending
	for _, q := range r.queues {
		queue = append(queue, q...)
	}
	sort.SliceStable(queue, func(a, b int) bool { return queue[a].Step < queue[b].Step })
	carry := r.progress()
	carry.Continued++
	for i := range carry.Steps {
		carry.Steps[i].Queued, carry.Steps[i].InFlight = 0, 0
	}
	next := r.in
	next.Queue, next.Seeded, next.Carry, next.NextChild = queue, true, carry, r.nextChild
	return workflow.NewContinueAsNewError(ctx, ChainWorkflowName, next)
}

// priority is the Temporal priority key (1 most urgent … 5) of a batch: the step's or
// the chain's priority (3 when neither sets one), one level more urgent for a step that
// pages through its own outputs (each of its hops gates all the work behind it), and one
// more level for every AgingStep its oldest input has waited.
func (r *runner) priority(i int, pending []Pending, now time.Time) int {
	step := r.plan.Steps[i]
	prio := cmp.Or(step.Priority, r.plan.Priority, crawl.DefaultPriority)
	for _, c := range step.Consumers {
		if c.Self {
			prio--
			break
		}
	}
	oldest := now
	for _, p := range pending {
		if !p.Since.IsZero() && p.Since.Before(oldest) {
			oldest = p.Since
		}
	}
	prio -= int(now.Sub(oldest) / r.tune.AgingStep)
	return max(prio, 1)
}

// waitedTooLong reports whether an activity ended because no worker started it within
// its schedule-to-start timeout.
func waitedTooLong(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}
