package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/external"
)

// resources are what a step's fetcher lends its task's requests: the pools of the
// batch's tenant and the step's pool site (its `pool_site:`, else the task's site), for
// the kinds the task declares in Needs and the step in `needs:`.
type resources struct {
	pools *external.Pools
	scope external.Scope
	err   error // the task declares needs this worker cannot meet
}

func (a *Activities) stepFetcher(spec crawl.TaskSpec, b crawl.Batch) (stepFetcher, error) {
	base := a.Fetcher
	if b.Step.Reparse != nil {
		var err error
		if base, err = a.reparseFetcher(b); err != nil {
			return stepFetcher{}, err
		}
	}
	f, err := withStepMiddlewares(base, b.Step)
	if err != nil {
		return stepFetcher{}, err
	}
	s := stepFetcher{f: f, spec: spec, ignoreRobots: !b.Robots, politeness: b.Step.Politeness}
	s.pools = a.Pools
	needs := append(slices.Clone(spec.Needs), b.Step.Needs...)
	slices.Sort(needs)
	needs = slices.Compact(needs)
	s.scope, s.err = external.ScopeOf(b.Tenant, cmp.Or(b.Step.PoolSite, spec.Site()), needs)
	if s.err == nil && len(s.scope.Needs) > 0 && a.Pools == nil {
		s.err = fmt.Errorf("step %s needs %s, but this worker has no resource pools: give it Redis (--redis)", b.Step.ID, strings.Join(needs, ", "))
	}
	return s, nil
}

// withStepMiddlewares puts the middlewares the chain file names for the step (the
// chain's, then the step's) into the worker's fetcher. The engine's fetcher takes them
// in their place in its chain (fetch.Fetcher.With), where they see every answer as a
// Response; around any other fetcher they only see what it returns.
func withStepMiddlewares(f crawl.Fetcher, step crawl.PlanStep) (crawl.Fetcher, error) {
	if len(step.Middlewares) == 0 || f == nil {
		return f, nil
	}
	mws, err := crawl.BuildMiddlewares(step.Middlewares)
	if err != nil {
		// The chain was validated against a worker that registers other middlewares.
		return nil, fmt.Errorf("step %s: %v; deploy a worker that registers it (crawl.RegisterMiddleware)", step.ID, err)
	}
	if ff, ok := f.(*fetch.Fetcher); ok {
		return ff.With(mws...), nil
	}
	return crawl.Wrap(f, mws...), nil
}

// lend marks ctx so the fetcher borrows what the task needs for each request.
func (r resources) lend(ctx context.Context) (context.Context, error) {
	if r.err != nil {
		return ctx, r.err
	}
	if r.pools == nil {
		return ctx, nil
	}
	return fetch.WithResources(ctx, r.pools, r.scope), nil
}

// PoolUsable tells a farming task how full its site's pool is (external.Wanted).
func (r resources) PoolUsable(ctx context.Context, k external.Kind) (ids []string, target int, err error) {
	if r.pools == nil {
		return nil, 0, errors.New("this worker has no resource pools: give it Redis (--redis)")
	}
	return r.pools.Usable(ctx, r.scope.Tenant, r.scope.Site, k)
}

// waitingFor is the error a batch returns while some of its inputs wait for a pool
// item: Temporal retries the batch with backoff (the inputs already done are kept
// through the heartbeat), and `trawler status` shows this text as the retry reason.
func waitingFor(waiting []outcome, total int) error {
	var w *external.WaitError
	if errors.As(waiting[0].waiting, &w) {
		return fmt.Errorf("%d of %d inputs %v", len(waiting), total, w)
	}
	return fmt.Errorf("%d of %d inputs %v", len(waiting), total, waiting[0].waiting)
}
