package quota

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"trawler/crawl"
)

// Many batches on several workers (managers) spend one run budget at once: together
// they run exactly the budget, and once every lease is released the counter reads it.
func TestConcurrentLeasesNeverOverspend(t *testing.T) {
	mr := miniredis.RunT(t)
	var spent atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	for w := range 3 {
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer rdb.Close()
		m := New(rdb, 7)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := m.For(ctx, "t", "c", "run1", crawl.Quota{Pages: 500})
				if err != nil {
					t.Error(err)
					return
				}
				defer l.Release(ctx)
				for {
					ok, reason, err := l.Page(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if !ok {
						if reason != "quota reached: 500 pages per run of chain c" {
							t.Errorf("worker %d: reason %q", w, reason)
						}
						return
					}
					spent.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	if spent.Load() > 500 {
		t.Fatalf("spent %d pages of a 500 budget", spent.Load())
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	use, err := New(rdb, 0).RunUsage(ctx, "t", "run1")
	if err != nil || int64(use.Pages) != spent.Load() {
		t.Fatalf("counter %d (%v), spent %d", use.Pages, err, spent.Load())
	}
}

// Unlimited budgets still count, for monitoring, and tenant budgets apply to any chain.
func TestTenantBudgetAndUsage(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	m := New(rdb, 5)
	if err := m.SetTenant(ctx, "acme", crawl.Quota{Pages: 12}); err != nil {
		t.Fatal(err)
	}
	l, _ := m.For(ctx, "acme", "news", "r1", crawl.Quota{Pages: 20})
	n := 0
	for {
		ok, reason, err := l.Page(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if reason != "quota reached: 12 pages per run of tenant acme" {
				t.Errorf("reason %q", reason)
			}
			break
		}
		n++
	}
	// The items of pages already fetched are still stored; only an item budget stops them.
	if ok, _, _ := l.Item(ctx); !ok {
		t.Error("an item of a fetched page was refused because the page budget ran out")
	}
	_ = l.Release(ctx)
	day, _ := m.TenantUsage(ctx, "acme")
	chain, _ := m.ChainUsage(ctx, "acme", "news")
	if n != 12 || day.Pages != 12 || chain.Pages != 12 || day.Items != 1 {
		t.Fatalf("ran %d pages; tenant today %+v, chain today %+v", n, day, chain)
	}
}
