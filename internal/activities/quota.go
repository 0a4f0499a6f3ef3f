package activities

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/quota"
)

// batchQuota is one batch's hold on its run's, chain's and tenant's budgets. A nil
// batchQuota (no Redis on this worker) admits everything.
type batchQuota struct {
	lease   *quota.Lease
	reason  atomic.Value // string: why a budget ran out
	skipped atomic.Int64 // inputs not run
	dropped atomic.Int64 // items not stored
}

// quotaFor leases the budgets that apply to a batch that runs about inputs pages (0: not
// known).
func (a *Activities) quotaFor(ctx context.Context, b crawl.Batch, inputs int) (*batchQuota, error) {
	if a.Quotas == nil {
		return nil, nil
	}
	l, err := a.Quotas.For(ctx, b.Tenant, b.Chain, b.RunID, b.Quota, inputs)
	if err != nil {
		return nil, err
	}
	return &batchQuota{lease: l}, nil
}

// shared is another step's hold on the same lease, with counts of its own; nil when q
// is.
func (q *batchQuota) shared() *batchQuota {
	if q == nil {
		return nil
	}
	return &batchQuota{lease: q.lease}
}

// admit spends one page on input i. When it may not run, stop is true and o says why:
// a budget ran out (the input is left unrun) or Redis failed (the input is retried).
// While other batches hold what is left of a budget, admit waits for them to spend it
// or give it back.
func (q *batchQuota) admit(ctx context.Context, i int) (o outcome, stop bool) {
	if q == nil {
		return outcome{}, false
	}
	ok, reason, err := q.lease.Page(ctx)
	switch {
	case err != nil:
		return outcome{Index: i, Err: err.Error()}, true
	case !ok:
		q.reason.Store(reason)
		q.skipped.Add(1)
		return outcome{Index: i, quota: reason}, true
	}
	return outcome{}, false
}

// keep spends one item of the budgets per item and returns the items it may store.
func (q *batchQuota) keep(ctx context.Context, items []crawl.Item) ([]crawl.Item, error) {
	if q == nil {
		return items, nil
	}
	for n := range items {
		ok, reason, err := q.lease.Item(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			q.reason.Store(reason)
			q.dropped.Add(int64(len(items) - n))
			return items[:n], nil
		}
	}
	return items, nil
}

// report adds what the budgets stopped to a batch result.
func (q *batchQuota) report(res *crawl.BatchResult) {
	if q == nil {
		return
	}
	if r, _ := q.reason.Load().(string); r != "" {
		res.Quota = r
		res.QuotaSkipped = int(q.skipped.Load())
		res.QuotaDropped = int(q.dropped.Load())
	}
}

// release gives the unspent part of the leases back.
func (q *batchQuota) release(ctx context.Context, log *slog.Logger) {
	if q == nil {
		return
	}
	if err := q.lease.Release(context.WithoutCancel(ctx)); err != nil {
		log.Warn("give back unspent quota", "err", fmt.Sprint(err))
	}
}
