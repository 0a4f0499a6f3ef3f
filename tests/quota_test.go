package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/quota"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/workflows"
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

// pageBudgetRun runs the tree under a chain budget of pages on two workers, and checks
// that it stopped on that budget.
func pageBudgetRun(t *testing.T, pages int) (queue string, p *crawl.Plan, id string, s *workflows.Summary) {
	t.Helper()
	queue = quotaWorkers(t, 2)
	p = plan(t, "budget.yaml", fmt.Sprintf(quotaTree, pages, 0))
	id = startTuned(t, p, queue, fast)
	s = wait(t, id, 2*time.Minute)
	if want := fmt.Sprintf("quota reached: %d pages per run of chain budget", pages); s.Status != workflows.StatusQuotaReached || s.Quota != want {
		t.Errorf("status %q, quota %q; want quota_reached, %q", s.Status, s.Quota, want)
	}
	return queue, p, id, s
}

// Two workers spend one run's page budget together: the run stops with
// quota_reached, never past the budget, and the shared counter reads what was spent.
func TestQuotaSharedByTwoWorkers(t *testing.T) {
	queue, p, id, s := pageBudgetRun(t, 300)
	pages, items, _, failed := s.Totals()
	if pages != 300 || failed != 0 {
		t.Errorf("%d pages run (%d failed) under a budget of 300; leases hold nothing back, so exactly 300", pages, failed)
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
	if _, err := m.ChangeTenant(context.Background(), p.Tenant, quota.Change{Set: map[string]int{"items-per-day": 120}}); err != nil {
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
	if items != 120 || more != 0 || second.Status != workflows.StatusQuotaReached {
		t.Errorf("two runs stored %d + %d items (second: %s) under a daily budget of 120; want 120 + 0", items, more, second.Status)
	}
	use, err := m.TenantUsage(context.Background(), p.Tenant)
	if err != nil || use.Items != items+more {
		t.Errorf("the tenant's item counter reads %d (%v); %d items were stored", use.Items, err, items+more)
	}
	t.Logf("first run stored %d items, the second %d; the tenant spent %d pages", items, more, use.Pages)
}

// A chain budget that is not a multiple of the lease block (25), spent by parallel
// batches of 10 on two workers: the run does exactly 40 pages, not fewer because
// leases held units when it stopped, and every counter — the run's, the chain's today
// as `trawler quota show` prints it — reads the 40 pages and 40 items stored.
func TestChainBudgetRunsToItsExactEnd(t *testing.T) {
	queue, p, id, s := pageBudgetRun(t, 40)
	pages, items, _, failed := s.Totals()
	stored := len(storedIn(t, shared.dir+"/"+queue, id))
	if pages != 40 || items != 40 || stored != 40 || failed != 0 {
		t.Fatalf("the run did %d pages (%d failed) and %d items, %d stored, under a budget of 40 pages", pages, failed, items, stored)
	}
	rdb := redis.NewClient(&redis.Options{Addr: shared.redis.Addr()})
	defer rdb.Close()
	if use, err := quota.New(rdb, 0).RunUsage(context.Background(), p.Tenant, id); err != nil || use != (quota.Usage{Pages: 40, Items: 40}) {
		t.Errorf("the run's counters read %+v (%v); want 40 pages, 40 items", use, err)
	}
	out, stderr, code := trawler(t, "quota", "show", p.Tenant, "--chain", "budget", "--redis", shared.redis.Addr(), "--json")
	var show struct {
		Today      quota.Usage `json:"today"`
		ChainToday quota.Usage `json:"chain_today"`
	}
	if err := json.Unmarshal([]byte(lastLine(out)), &show); err != nil || code != 0 {
		t.Fatalf("quota show: exit %d, %v: %s%s", code, err, out, stderr)
	}
	if show.ChainToday != (quota.Usage{Pages: 40, Items: 40}) || show.Today != show.ChainToday {
		t.Errorf("quota show says chain budget spent %+v today, the tenant %+v; the run did 40 pages, 40 items", show.ChainToday, show.Today)
	}
}

// `trawler quota set` changes only the budgets it names, refuses what is not a budget
// with the flag and the fix, and a limit it removes no longer stops the next run.
func TestQuotaSetChangesOnlyWhatItNames(t *testing.T) {
	queue := quotaWorkers(t, 1)
	p := plan(t, "budget.yaml", strings.Replace(fmt.Sprintf(quotaTree, 0, 0), "[40, 40]", "[5, 5]", 1)) // 31 pages
	set := func(args ...string) (crawl.Quota, string, int) {
		t.Helper()
		out, stderr, code := trawler(t, append([]string{"quota", "set", p.Tenant, "--redis", shared.redis.Addr(), "--json"}, args...)...)
		var res struct{ Quota crawl.Quota }
		if code == 0 {
			if err := json.Unmarshal([]byte(lastLine(out)), &res); err != nil {
				t.Fatalf("quota set %v: %v: %s", args, err, out)
			}
		}
		return res.Quota, stderr, code
	}
	if q, stderr, code := set("--pages", "20", "--items-per-day", "500"); code != 0 || q != (crawl.Quota{Pages: 20, ItemsPerDay: 500}) {
		t.Fatalf("set --pages 20 --items-per-day 500: exit %d, %+v %s", code, q, stderr)
	}
	if q, stderr, code := set("--pages-per-day", "1000"); code != 0 || q != (crawl.Quota{Pages: 20, PagesPerDay: 1000, ItemsPerDay: 500}) {
		t.Fatalf("set --pages-per-day 1000 changed other budgets: exit %d, %+v %s", code, q, stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pages", "-5"}, `trawler: invalid argument "-5" for "--pages" flag: a budget cannot be negative: give a positive number of pages, e.g. --pages 5000, or remove the limit with --clear pages`},
		{[]string{"--items", "lots"}, `trawler: invalid argument "lots" for "--items" flag: "lots" is not a whole number: give a positive number of items, e.g. --items 5000, or remove the limit with --clear items`},
		{[]string{"--clear", "page"}, `trawler: --clear page: no such budget: use one of pages, items, pages-per-day, items-per-day`},
	} {
		if _, stderr, code := set(c.args...); code != 1 || strings.TrimSpace(stderr) != c.want {
			t.Errorf("quota set %v: exit %d, stderr %q\nwant %q", c.args, code, stderr, c.want)
		}
	}
	first := wait(t, startTuned(t, p, queue, fast), 2*time.Minute)
	if pages, _, _, _ := first.Totals(); pages != 20 || first.Status != workflows.StatusQuotaReached {
		t.Fatalf("first run: %s after %d pages; want quota_reached after 20", first.Status, pages)
	}
	if q, stderr, code := set("--clear", "pages"); code != 0 || q != (crawl.Quota{PagesPerDay: 1000, ItemsPerDay: 500}) {
		t.Fatalf("set --clear pages: exit %d, %+v %s", code, q, stderr)
	}
	// At once, not after a cache expires: the next run's batches read the budgets anew.
	second := wait(t, startTuned(t, p, queue, fast), 2*time.Minute)
	if pages, _, _, _ := second.Totals(); pages != 31 || second.Status != workflows.StatusCompleted {
		t.Fatalf("the run after the page limit was removed: %s after %d pages (%s); want completed, 31 pages", second.Status, pages, second.Quota)
	}
}
