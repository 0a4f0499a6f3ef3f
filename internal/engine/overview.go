package engine

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/events"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/quota"
	"github.com/trawlerhq/trawler/internal/recrawl"
	"github.com/trawlerhq/trawler/internal/stream"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// ChainLoad is what one chain of one tenant is doing now, over all its running runs.
type ChainLoad struct {
	Tenant string `json:"tenant"`
	Chain  string `json:"chain"`
	Runs   int    `json:"runs"` // running
	// Silent counts running workflows that did not answer the progress query in time:
	// no worker polls their task queue, or the workers are overloaded.
	Silent  int `json:"silent,omitempty"`
	Backlog int `json:"backlog"` // inputs queued or in flight, partitions included
	Pages   int `json:"pages"`   // processed so far by the running runs
	// Pages per second over the last second (sampled) and the last full minute (from
	// the counters every worker keeps in Redis).
	Rate1s float64 `json:"rate_1s"`
	Rate1m float64 `json:"rate_1m"`
	// Failures of the running runs, and their causes counted over the failures the
	// runs keep as samples.
	Failures        int            `json:"failures"`
	FailuresByCause map[string]int `json:"failures_by_cause,omitempty"`
	// Retrying lists batches Temporal is retrying, with their last error.
	Retrying []string `json:"retrying,omitempty"`
	// Outages are the dependencies (stores, Redis, pools) the running runs wait for:
	// since when, the last error, and the inputs waiting, summed over the runs.
	Outages []workflows.Outage `json:"outages,omitempty"`
	// Today is what the chain spent today (UTC) against its budgets.
	Today quota.Usage `json:"today"`
}

// TenantLoad is a tenant's budgets and what it spent today (UTC).
type TenantLoad struct {
	Tenant string      `json:"tenant"`
	Quota  crawl.Quota `json:"quota"`
	Today  quota.Usage `json:"today"`
}

// Overview is the fleet at a glance: `trawler status` without a run id.
type Overview struct {
	Chains  []ChainLoad          `json:"chains"`
	Tenants []TenantLoad         `json:"tenants,omitempty"`
	Workers []monitor.WorkerBeat `json:"workers,omitempty"`
	// Tasks are the learned needs of every task that ran: per page, its wall time,
	// bytes fetched and CPU time, as running averages over recent batches.
	Tasks []monitor.TaskNeeds `json:"tasks,omitempty"`
	// Subscriptions are the streaming sources' subscriptions: received/limit and the
	// upstream connection each rides on.
	Subscriptions []stream.Status `json:"subscriptions,omitempty"`
	// Recrawl is, per recrawl step (tenant:task), its pages with a plan, how many are
	// due, the spread of their intervals and the estimated share of changes seen late.
	Recrawl []recrawl.Stats `json:"recrawl,omitempty"`
	// Capacity is placement and autoscaling by learned needs (PlanCapacity).
	Capacity  *CapacityReport `json:"capacity,omitempty"`
	taskLoads []TaskLoad
}

// loadKey names one chain of one tenant.
type loadKey struct{ tenant, chain string }

// runLoad is one running workflow (a root or a partition) sampled once.
type runLoad struct {
	root, tenant, chain string
	queue               string
	sum                 *workflows.Summary
	failing             []string
}

// sampleRunning queries every running chain workflow, partitions included.
func sampleRunning(ctx context.Context, c client.Client) ([]runLoad, error) {
	var out []runLoad
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:    fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.ChainWorkflowName),
			PageSize: 1000, NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list running runs: %w", err)
		}
		execs := resp.GetExecutions()
		loads := make([]runLoad, len(execs))
		// A run answers its progress query through a worker; one whose workers are all
		// gone would hold the whole overview up, so each gets a few seconds, and eight
		// are asked at a time.
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for i, e := range execs {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				id := e.GetExecution().GetWorkflowId()
				root, _, _ := strings.Cut(id, "/")
				rl := runLoad{root: root, tenant: MemoString(e.GetMemo(), "tenant"), chain: MemoString(e.GetMemo(), "chain"), queue: e.GetTaskQueue()}
				qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				if v, err := c.QueryWorkflow(qctx, id, "", workflows.ProgressQuery); err == nil {
					var s workflows.Summary
					if v.Get(&s) == nil {
						rl.sum = &s
						if rl.chain == "" {
							rl.chain = s.Chain
						}
					}
				}
				if d, err := c.DescribeWorkflowExecution(qctx, id, ""); err == nil {
					rl.failing = failingActivities(d.GetPendingActivities())
					if rl.sum != nil {
						rl.sum.Outages = heldOutages(d.GetPendingActivities(), rl.sum.Outages)
					}
				}
				loads[i] = rl
			}()
		}
		wg.Wait()
		out = append(out, loads...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// GetOverview samples the running chains twice, `sample` apart (the 1 s rate; 0 skips
// it), and reads rates, budgets and worker heartbeats from Redis when rdb is set.
func GetOverview(ctx context.Context, c client.Client, rdb redis.UniversalClient, sample time.Duration) (*Overview, error) {
	first, err := sampleRunning(ctx, c)
	if err != nil {
		return nil, err
	}
	var second []runLoad
	if sample > 0 {
		select {
		case <-time.After(sample):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if second, err = sampleRunning(ctx, c); err != nil {
			return nil, err
		}
	}
	loads := map[loadKey]*ChainLoad{}
	roots := map[loadKey]map[string]bool{}
	rootTenant := map[string]string{} // partitions carry no memo: they take their root's
	for _, r := range first {
		if r.tenant != "" {
			rootTenant[r.root] = r.tenant
		}
	}
	get := func(r runLoad) (*ChainLoad, loadKey) {
		t := cmp.Or(r.tenant, rootTenant[r.root], crawl.DefaultTenant)
		k := loadKey{t, r.chain}
		if loads[k] == nil {
			loads[k] = &ChainLoad{Tenant: t, Chain: r.chain, FailuresByCause: map[string]int{}}
			roots[k] = map[string]bool{}
		}
		return loads[k], k
	}
	pagesOf := func(rs []runLoad) map[loadKey]int {
		out := map[loadKey]int{}
		for _, r := range rs {
			if r.sum != nil {
				_, k := get(r)
				p, _, _, _ := r.sum.Totals()
				out[k] += p
			}
		}
		return out
	}
	for _, r := range first {
		l, k := get(r)
		roots[k][r.root] = true
		l.Retrying = append(l.Retrying, r.failing...)
		if r.sum == nil {
			l.Silent++
			continue
		}
		for _, st := range r.sum.Steps {
			l.Backlog += st.Queued + st.InFlight
		}
		l.Failures += r.sum.FailuresTotal
		l.Outages = addOutages(l.Outages, r.sum.Outages)
		for _, f := range r.sum.Failures {
			l.FailuresByCause[string(cmp.Or(f.Class, crawl.CauseOther))]++
		}
	}
	before := pagesOf(first)
	after := pagesOf(second)
	for k, l := range loads {
		l.Runs = len(roots[k])
		l.Pages = before[k]
		if a, still := after[k]; sample > 0 && still { // a run that ended in between has no rate
			l.Pages = a
			l.Rate1s = math.Round(float64(max(a-before[k], 0))/sample.Seconds()*10) / 10
		}
	}
	ov := &Overview{taskLoads: taskLoadsOf(first, second, sample)}
	if rdb != nil {
		if err := ov.fromRedis(ctx, rdb, loads); err != nil {
			return nil, err
		}
	}
	for _, l := range loads {
		ov.Chains = append(ov.Chains, *l)
	}
	sort.Slice(ov.Chains, func(i, j int) bool {
		a, b := ov.Chains[i], ov.Chains[j]
		return a.Tenant < b.Tenant || (a.Tenant == b.Tenant && a.Chain < b.Chain)
	})
	return ov, nil
}

// fromRedis adds the 1 min rates, today's spending and budgets, and the workers.
func (ov *Overview) fromRedis(ctx context.Context, rdb redis.UniversalClient, loads map[loadKey]*ChainLoad) error {
	rec := monitor.NewRecorder(rdb)
	q := quota.New(rdb, 0)
	tenants := map[string]bool{}
	for _, l := range loads {
		n, err := rec.PerMinute(ctx, l.Tenant, l.Chain)
		if err != nil {
			return fmt.Errorf("read rates from Redis: %w", err)
		}
		l.Rate1m = math.Round(float64(n)/60*10) / 10
		if l.Today, err = q.ChainUsage(ctx, l.Tenant, l.Chain); err != nil {
			return err
		}
		tenants[l.Tenant] = true
	}
	for _, t := range slices.Sorted(maps.Keys(tenants)) {
		budgets, err := q.Tenant(ctx, t)
		if err != nil {
			return err
		}
		today, err := q.TenantUsage(ctx, t)
		if err != nil {
			return err
		}
		ov.Tenants = append(ov.Tenants, TenantLoad{Tenant: t, Quota: budgets, Today: today})
	}
	var err error
	if ov.Workers, err = rec.Workers(ctx); err != nil {
		return err
	}
	if ov.Tasks, err = rec.Needs(ctx); err != nil {
		return err
	}
	if ov.Subscriptions, err = stream.Subscriptions(ctx, rdb); err != nil {
		return err
	}
	ov.Recrawl, err = recrawl.New(rdb, nil).Stats(ctx)
	return err
}

// addOutages merges a run's outages into a chain's: one entry per dependency, from the
// earliest start, with the waiting inputs summed.
func addOutages(into, from []workflows.Outage) []workflows.Outage {
	for _, o := range from {
		i := slices.IndexFunc(into, func(x workflows.Outage) bool { return x.Dependency == o.Dependency })
		if i < 0 {
			into = append(into, o)
			continue
		}
		m := &into[i]
		if o.Since.Before(m.Since) {
			m.Since = o.Since
		}
		if o.Last.After(m.Last) {
			m.Last, m.Cause = o.Last, o.Cause
		}
		m.Waiting += o.Waiting
		m.Batches += o.Batches
		for _, st := range o.Steps {
			if !slices.Contains(m.Steps, st) {
				m.Steps = append(m.Steps, st)
			}
		}
	}
	return into
}

// WatchOptions configure Watch. Zero thresholds turn their event off.
type WatchOptions struct {
	Every          time.Duration // how often to look (default 15 s)
	MaxBacklog     int           // a backlog event when a chain's backlog exceeds this
	MaxFailureRate float64       // a failure_rate event when failures / (pages + failures) since the last look exceed this (0–1)
	// Drain is the autoscaling target: trawler_desired_workers counts the workers that
	// drain each task queue's backlog within it (default 10 min).
	Drain time.Duration
	Log   *slog.Logger
}

// condition is a threshold Watch follows: an event when the value crosses it, and the
// type's _resolved event when it is back under it.
type condition struct {
	typ, tenant, chain string
	dependency         string // of an outage
	value, threshold   float64
	detail             map[string]any
}

// Watch keeps the backlog gauge current and, with Redis, emits the events of the
// running chains (events.Emit) until ctx ends: backlog, failure_rate and outage when
// they start and end, and every run's end.
func Watch(ctx context.Context, c client.Client, rdb redis.UniversalClient, o WatchOptions) {
	if o.Every <= 0 {
		o.Every = 15 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	firing := map[string]bool{}
	last := map[string][2]int{} // tenant/chain → pages, failures at the last look
	var history []*Overview     // the last two looks, newest first (desired workers)
	ended := runsEnded{since: time.Now()}
	for {
		if rdb != nil {
			ended.look(ctx, c, rdb, o)
		}
		ov, err := GetOverview(ctx, c, rdb, 0)
		if err != nil {
			o.Log.Warn("watch: overview", "err", err)
		} else {
			history = watchCapacity(ov, o.Drain, history)
			monitor.Backlog.Reset()
			seen := map[string]bool{}
			down := map[string]bool{} // outage ids checked in this look
			for _, l := range ov.Chains {
				seen[l.Tenant+"/"+l.Chain] = true
				monitor.Backlog.WithLabelValues(l.Tenant, l.Chain).Set(float64(l.Backlog))
				id := l.Tenant + "/" + l.Chain
				if o.MaxBacklog > 0 {
					o.check(ctx, rdb, firing, condition{typ: events.Backlog, tenant: l.Tenant, chain: l.Chain, value: float64(l.Backlog), threshold: float64(o.MaxBacklog)})
				}
				for _, out := range l.Outages {
					a := condition{typ: events.Outage, tenant: l.Tenant, chain: l.Chain, dependency: out.Dependency, value: float64(max(out.Waiting, 1)),
						detail: map[string]any{"since": out.Since.UTC().Format(time.RFC3339Nano), "cause": out.Cause}}
					down[a.id()] = true
					o.check(ctx, rdb, firing, a)
				}
				prev, seen := last[id]
				last[id] = [2]int{l.Pages, l.Failures}
				if o.MaxFailureRate > 0 && seen {
					dp, df := l.Pages-prev[0], l.Failures-prev[1]
					if dp+df > 0 {
						o.check(ctx, rdb, firing, condition{typ: events.FailureRate, tenant: l.Tenant, chain: l.Chain, value: float64(df) / float64(dp+df), threshold: o.MaxFailureRate})
					}
				}
			}
			// A chain with nothing running any more has no backlog and no failures; a
			// dependency no run waits for any more is back.
			for id, on := range firing {
				kind, tc, _ := strings.Cut(id, "/")
				if kind == events.Outage {
					if on && !down[id] {
						tenant, rest, _ := strings.Cut(tc, "/")
						chain, dep, _ := strings.Cut(rest, "/")
						o.check(ctx, rdb, firing, condition{typ: kind, tenant: tenant, chain: chain, dependency: dep})
					}
					continue
				}
				tenant, chain, _ := strings.Cut(tc, "/")
				if on && !seen[tc] {
					o.check(ctx, rdb, firing, condition{typ: kind, tenant: tenant, chain: chain})
				}
				if !seen[tc] {
					delete(last, tc)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(o.Every):
		}
	}
}

// visibilityLag is how late a closed run may show in Temporal's listing: each look
// lists the runs closed since this long before the previous look.
const visibilityLag = 30 * time.Second

// endedOnce is the Redis key that makes one run's end one event, whichever of the
// watchers (one per worker) sees it first; it outlives the visibility window.
func endedOnce(runID string) string { return "trawler:events:ended:" + runID }

// runsEnded emits the end of each chain run that closes while Watch runs.
type runsEnded struct {
	since  time.Time            // the previous look; runs closed before Watch started are not replayed
	start  time.Time            // when Watch started
	posted map[string]time.Time // run id → close time, of runs emitted inside the window
}

// look lists the runs closed since the previous look (less the visibility lag) and
// emits those not emitted yet; it forgets the runs that fell out of the window.
func (r *runsEnded) look(ctx context.Context, c client.Client, rdb redis.UniversalClient, o WatchOptions) {
	if r.posted == nil {
		r.start, r.posted = r.since, map[string]time.Time{}
	}
	now := time.Now()
	from := r.since.Add(-visibilityLag)
	if from.Before(r.start) {
		from = r.start
	}
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus != 'Running' AND ExecutionStatus != 'ContinuedAsNew' AND CloseTime > '%s'",
		workflows.ChainWorkflowName, from.UTC().Format(time.RFC3339Nano))
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 1000, NextPageToken: token})
		if err != nil {
			o.Log.Warn("watch: list ended runs", "err", err)
			return // the window stays, so the next look tries again
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			if _, done := r.posted[id]; done || strings.Contains(id, "/") || e.GetParentExecution() != nil { // partitions of a run
				continue
			}
			ev := events.Event{Type: events.RunFailed, Tenant: cmp.Or(MemoString(e.GetMemo(), "tenant"), crawl.DefaultTenant),
				Chain: MemoString(e.GetMemo(), "chain"), RunID: id, Detail: map[string]any{"outcome": workflows.OutcomeFailed}}
			var sum *workflows.Summary
			switch e.GetStatus() {
			case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
				var s workflows.Summary
				if err := c.GetWorkflow(ctx, id, e.GetExecution().GetRunId()).Get(ctx, &s); err != nil {
					o.Log.Warn("watch: read an ended run's summary", "run", id, "err", err)
					continue // not emitted: the next look tries again
				}
				sum = &s
				ev.Chain = cmp.Or(ev.Chain, s.Chain)
				ev.Detail = runDetail(&s)
				if outcome := ev.Detail["outcome"]; outcome != workflows.OutcomeFailed {
					ev.Type = events.RunFinished
				}
			case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
				ev.Detail["outcome"] = workflows.OutcomeCanceled
			}
			first, err := rdb.SetNX(ctx, endedOnce(id), 1, 7*24*time.Hour).Result()
			if err != nil {
				o.Log.Warn("watch: mark a run's end", "run", id, "err", err)
				continue // the next look tries again
			}
			r.posted[id] = e.GetCloseTime().AsTime()
			if !first {
				continue // another watcher emitted it
			}
			for _, ev := range endEvents(ev, sum) {
				if _, err := events.Emit(ctx, rdb, ev); err != nil {
					o.Log.Warn("watch: emit", "event", ev.Type, "run", id, "err", err)
				}
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	for id, closed := range r.posted {
		if !closed.After(from) {
			delete(r.posted, id)
		}
	}
	r.since = now
}

// runDetail is what a run's end event says of it: its outcome and status, and its
// pages, items and failed inputs.
func runDetail(s *workflows.Summary) map[string]any {
	pages, items, _, failed := s.Totals()
	return map[string]any{"outcome": cmp.Or(s.Outcome, workflows.OutcomeOf(s)), "status": s.Status,
		"pages": pages, "items": items, "failed": failed}
}

// endEvents are the events of a run's end: the end itself, quota_exhausted when a
// budget stopped it, and expectation_broken when it ended with violations.
func endEvents(end events.Event, s *workflows.Summary) []events.Event {
	out := []events.Event{end}
	if s == nil {
		return out
	}
	if s.Status == workflows.StatusQuotaReached {
		out = append(out, events.Event{Type: events.QuotaExhausted, Tenant: end.Tenant, Chain: end.Chain, RunID: end.RunID})
	}
	if broken := expectationBroken(end, s); broken != nil {
		out = append(out, *broken)
	}
	return out
}

// expectationBroken is the expectation_broken event of a run that ended with broken
// expectations (the outcome completed_with_violations, or failed by on_violation: fail),
// listing them, or nil.
func expectationBroken(end events.Event, s *workflows.Summary) *events.Event {
	if len(s.Violations) == 0 {
		return nil
	}
	return &events.Event{Type: events.ExpectationBroken, Tenant: end.Tenant, Chain: end.Chain, RunID: end.RunID,
		Detail: map[string]any{"outcome": end.Detail["outcome"], "violations": s.Violations}}
}

// id names what a condition is about: its type, tenant and chain (tenant and chain
// names have no slash), and the dependency of an outage.
func (a condition) id() string {
	id := a.typ + "/" + a.tenant + "/" + a.chain
	if a.dependency != "" {
		id += "/" + a.dependency
	}
	return id
}

// check emits an event when a value crosses its threshold, and the _resolved event
// when it falls back under it; nothing while it stays on one side.
func (o WatchOptions) check(ctx context.Context, rdb redis.UniversalClient, firing map[string]bool, a condition) {
	id := a.id()
	over := a.value > a.threshold
	if over == firing[id] {
		return
	}
	firing[id] = over
	if rdb == nil {
		return
	}
	e := events.Event{Type: a.typ, Tenant: a.tenant, Chain: a.chain, Detail: map[string]any{"value": a.value, "threshold": a.threshold}}
	if !over {
		e.Type += "_resolved"
	}
	if a.dependency != "" {
		e.Detail["dependency"] = a.dependency
	}
	maps.Copy(e.Detail, a.detail)
	if _, err := events.Emit(ctx, rdb, e); err != nil {
		o.Log.Warn("watch: emit", "event", e.Type, "err", err)
	}
}
