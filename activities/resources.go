package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"trawler/crawl"
	"trawler/external"
	"trawler/fetch"
)

// resources are what a step's fetcher lends its task's requests: the pools of the
// batch's tenant and the task's site, for the kinds the task declares in Needs.
type resources struct {
	pools *external.Pools
	scope external.Scope
	err   error // the task declares needs this worker cannot meet
}

func (a *Activities) stepFetcher(spec crawl.TaskSpec, b crawl.Batch) stepFetcher {
	s := stepFetcher{f: a.Fetcher, spec: spec, ignoreRobots: !b.Robots}
	s.pools = a.Pools
	s.scope, s.err = external.ScopeOf(b.Tenant, spec.Site(), spec.Needs)
	if s.err == nil && len(s.scope.Needs) > 0 && a.Pools == nil {
		s.err = fmt.Errorf("task %s needs %s, but this worker has no resource pools: give it Redis (--redis)", spec.Name, strings.Join(spec.Needs, ", "))
	}
	return s
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
