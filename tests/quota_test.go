package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"trawler/crawl"
	"trawler/engine"
	"trawler/quota"
	"trawler/storage/jsonl"
	"trawler/workflows"
)

// quotaWorkers starts n workers on one queue, all leasing budgets from the shared Redis.
func quotaWorkers(t *testing.T, n int) string {
	t.Helper()
	queue := "quota-" + tenantOf(t)
	for i := range n {
		testWorker(t, engine.WorkerOptions{TaskQueue: queue, MaxBatches: 4, Redis: shared.redis.Addr(), Identity: fmt.Sprintf("quota-worker-%d", i)})
	}
	return queue
}

// storedIn reads the jsonl directory dir back: key → records of the run.
func storedIn(t *testing.T, dir, runID string) map[string]int {
	t.Helper()
	js, err := jsonl.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	return runRecords(t, js, runID)
}

// workersIn lists the identities of the workers that ran a run's batches.
func workersIn(t *testing.T, runID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	it := shared.client.GetWorkflowHistory(context.Background(), runID, "", false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			out[a.GetIdentity()]++
		}
	}
	return out
}

const quotaTree = `
name: budget
quota: {pages: %d, items: %d}
defaults: {batch: 10, concurrency: 4, parallel: 4}
steps:
  - id: node
    task: synth.node
    from: node
    max_depth: 3
    params: {widths: [40, 40], sleep_ms: 2}
`

// Two workers spend one run's page budget together: the run stops with
// quota_reached, never past the budget, and the shared counter reads what was spent.
func TestQuotaSharedByTwoWorkers(t *testing.T) {
	queue := quotaWorkers(t, 2)
	p := plan(t, "budget.yaml", fmt.Sprintf(quotaTree, 300, 0))
	id := startTuned(t, p, queue, fast)
	s := wait(t, id, 2*time.Minute)
	pages, items, _, failed := s.Totals()
	if s.Status != workflows.StatusQuotaReached || s.Quota != "quota reached: 300 pages per run of chain budget" {
		t.Errorf("status %q, quota %q; want quota_reached for 300 pages per run", s.Status, s.Quota)
	}
	if pages > 300 || failed != 0 {
		t.Errorf("%d pages run (%d failed) under a budget of 300", pages, failed)
	}
	skipped := 0
	for _, st := range s.Steps {
		skipped += st.QuotaSkipped
	}
	if pages+skipped > 1641 || skipped == 0 {
		t.Errorf("%d pages run and %d reported skipped of 1641", pages, skipped)
	}
	if n := len(storedIn(t, shared.dir+"/"+queue, id)); n != items || n != pages {
		t.Errorf("jsonl holds %d items, the summary says %d items for %d pages", n, items, pages)
	}
	rdb := redis.NewClient(&redis.Options{Addr: shared.redis.Addr()})
	defer rdb.Close()
	use, err := quota.New(rdb, 0).RunUsage(context.Background(), p.Tenant, id)
	if err != nil || use.Pages != pages {
		t.Errorf("the run's page counter reads %d (%v); %d pages ran", use.Pages, err, pages)
	}
	if w := workersIn(t, id); len(w) != 2 {
		t.Errorf("batches ran on %v; want both workers", w)
	}
	t.Logf("%d pages run, %d left unrun, counter %d", pages, skipped, use.Pages)
}

// A tenant's daily item budget, set once for the tenant, stops its chain's run: no
// more items are stored than the budget, and the next run of the day stops at once.
func TestTenantDailyItemBudget(t *testing.T) {
	queue := quotaWorkers(t, 1)
	rdb := redis.NewClient(&redis.Options{Addr: shared.redis.Addr()})
	defer rdb.Close()
	m := quota.New(rdb, 0)
	p := plan(t, "budget.yaml", fmt.Sprintf(quotaTree, 0, 0))
	if err := m.SetTenant(context.Background(), p.Tenant, crawl.Quota{ItemsPerDay: 120}); err != nil {
		t.Fatal(err)
	}
	first := wait(t, startTuned(t, p, queue, fast), 2*time.Minute)
	want := "quota reached: 120 items per day of tenant " + p.Tenant
	if first.Status != workflows.StatusQuotaReached || first.Quota != want {
		t.Errorf("status %q, quota %q; want quota_reached, %q", first.Status, first.Quota, want)
	}
	_, items, _, _ := first.Totals()
	second := wait(t, startTuned(t, p, queue, fast), 2*time.Minute)
	_, more, _, _ := second.Totals()
	if items+more > 120 || second.Status != workflows.StatusQuotaReached {
		t.Errorf("two runs stored %d + %d items (second: %s) under a daily budget of 120", items, more, second.Status)
	}
	use, err := m.TenantUsage(context.Background(), p.Tenant)
	if err != nil || use.Items != items+more {
		t.Errorf("the tenant's item counter reads %d (%v); %d items were stored", use.Items, err, items+more)
	}
	t.Logf("first run stored %d items, the second %d; the tenant spent %d pages", items, more, use.Pages)
}
