package quota

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/redisproc"
)

var realRedis *redisproc.Server

func TestMain(m *testing.M) {
	var err error
	if realRedis, err = redisproc.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	realRedis.Stop()
	os.Exit(code)
}

// onBoth runs a test against a real redis-server (flushed first) and against miniredis:
// the lease script must behave the same on both. connect gives each worker of the test
// its own client.
func onBoth(t *testing.T, fn func(t *testing.T, connect func() *redis.Client)) {
	for _, name := range []string{"redis-server", "miniredis"} {
		t.Run(name, func(t *testing.T) {
			addr := realRedis.Addr
			if name == "miniredis" {
				addr = miniredis.RunT(t).Addr()
			}
			connect := func() *redis.Client {
				rdb := redis.NewClient(&redis.Options{Addr: addr})
				t.Cleanup(func() { rdb.Close() })
				return rdb
			}
			if err := connect().FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			fn(t, connect)
		})
	}
}

// leaseFor starts a batch's lease; it is released when the test ends, if not before.
func leaseFor(t *testing.T, m *Manager, tenant, chain, run string, q crawl.Quota) *Lease {
	t.Helper()
	l, err := m.For(context.Background(), tenant, chain, run, q, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

// syncNow does what a lease does every SyncEvery.
func syncNow(t *testing.T, l *Lease) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.sync(context.Background(), false); err != nil {
		t.Fatal(err)
	}
}

// spend takes pages from a lease until it is refused and returns how many it got and
// why it stopped.
func spend(t *testing.T, l *Lease, most int) (int, string) {
	t.Helper()
	n := 0
	for most <= 0 || n < most {
		ok, reason, err := l.Page(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return n, reason
		}
		n++
	}
	return n, ""
}

// Many batches on several workers (managers) spend one run budget at once: together
// they run exactly the budget, and once every lease is released the counter reads it.
func TestConcurrentLeasesSpendExactlyTheBudget(t *testing.T) {
	onBoth(t, func(t *testing.T, connect func() *redis.Client) {
		var spent atomic.Int64
		var wg sync.WaitGroup
		ctx := context.Background()
		for w := range 3 {
			m := New(connect(), 7)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, err := m.For(ctx, "t", "c", "run1", crawl.Quota{Pages: 500}, 0)
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
		use, err := New(connect(), 0).RunUsage(ctx, "t", "run1")
		if spent.Load() != 500 || use.Pages != 500 || err != nil {
			t.Fatalf("12 leases spent %d pages of a 500 budget; the counter reads %d (%v)", spent.Load(), use.Pages, err)
		}
	})
}

// A budget that is not a multiple of the lease block (25): one lease spends it to the
// exact end, and the spent counter never counts units leased but not spent.
func TestGrantStopsAtALimitOffTheBlock(t *testing.T) {
	onBoth(t, func(t *testing.T, connect func() *redis.Client) {
		ctx := context.Background()
		m := New(connect(), 0)
		l := leaseFor(t, m, "t", "c", "r", crawl.Quota{Pages: 40})
		if n, _ := spend(t, l, 3); n != 3 {
			t.Fatalf("spent %d of the first 3 pages", n)
		}
		syncNow(t, l)
		use, _ := m.RunUsage(ctx, "t", "r")
		chain, _ := m.ChainUsage(ctx, "t", "c")
		if use.Pages != 3 || chain.Pages != 3 {
			t.Fatalf("3 pages spent from a lease of 25: run counter %d, chain counter %d; want 3", use.Pages, chain.Pages)
		}
		n, reason := spend(t, l, 0)
		if n != 37 || reason != "quota reached: 40 pages per run of chain c" {
			t.Fatalf("after 3 pages one lease spent %d more of a 40 budget (%q); want 37", n, reason)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if use, _ := m.RunUsage(ctx, "t", "r"); use.Pages != 40 {
			t.Fatalf("counter %d after the lease spent 40", use.Pages)
		}
	})
}

// A lease refused while another lease holds the rest of the budget waits for it to
// be spent or given back, instead of stopping its batch with the budget unspent.
func TestLeaseWaitsForUnitsHeldElsewhere(t *testing.T) {
	onBoth(t, func(t *testing.T, connect func() *redis.Client) {
		ctx := context.Background()
		a := leaseFor(t, New(connect(), 0), "t", "c", "r", crawl.Quota{Pages: 40})
		if n, _ := spend(t, a, 5); n != 5 { // a holds 25, 20 of them unspent
			t.Fatalf("a spent %d of 5", n)
		}
		b := leaseFor(t, New(connect(), 0), "t", "c", "r", crawl.Quota{Pages: 40})
		got := make(chan int)
		go func() {
			n, reason := spend(t, b, 0)
			if reason != "quota reached: 40 pages per run of chain c" {
				t.Errorf("b stopped: %q", reason)
			}
			got <- n
		}()
		// a spends 10 more and ends, giving back its last 10.
		if n, _ := spend(t, a, 10); n != 10 {
			t.Fatalf("a spent %d of 10 more", n)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := <-got; n != 25 {
			t.Fatalf("b spent %d pages; a spent 15 of the 40, so b should have the other 25", n)
		}
	})
}

// A changed budget reaches a running lease within SyncEvery: lowered, the lease stops
// at the new limit even though it holds units leased under the old one; removed, the
// lease and the next run go on.
func TestBudgetChangeReachesRunningLeases(t *testing.T) {
	onBoth(t, func(t *testing.T, connect func() *redis.Client) {
		ctx := context.Background()
		m := New(connect(), 0)
		if _, err := m.ChangeTenant(ctx, "acme", Change{Set: map[string]int{"pages": 100}}); err != nil {
			t.Fatal(err)
		}
		l := leaseFor(t, m, "acme", "news", "r1", crawl.Quota{})
		if n, _ := spend(t, l, 5); n != 5 { // 20 more leased, unspent
			t.Fatalf("spent %d of 5", n)
		}
		other := New(connect(), 0) // `trawler quota set` on another machine
		if _, err := other.ChangeTenant(ctx, "acme", Change{Set: map[string]int{"pages": 12}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * SyncEvery)
		n, reason := spend(t, l, 0)
		if n != 7 || reason != "quota reached: 12 pages per run of tenant acme" {
			t.Fatalf("after the budget went from 100 to 12 the lease spent %d more (%q); want 7", n, reason)
		}
		if _, err := other.ChangeTenant(ctx, "acme", Change{Clear: []string{"pages"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * SyncEvery)
		if n, reason := spend(t, l, 30); n != 30 {
			t.Fatalf("after the limit was removed the lease spent %d of 30 (%q)", n, reason)
		}
		next := leaseFor(t, m, "acme", "news", "r1", crawl.Quota{})
		if n, reason := spend(t, next, 30); n != 30 {
			t.Fatalf("a batch started after the limit was removed spent %d of 30 (%q)", n, reason)
		}
	})
}

// Budgets change while two workers lease: a change names one budget and leaves the
// others as they were, so the page budget set before holds to the last page.
func TestConcurrentChangeKeepsOtherBudgets(t *testing.T) {
	onBoth(t, func(t *testing.T, connect func() *redis.Client) {
		ctx := context.Background()
		admin := New(connect(), 0)
		if _, err := admin.ChangeTenant(ctx, "acme", Change{Set: map[string]int{"pages": 300}}); err != nil {
			t.Fatal(err)
		}
		var spent atomic.Int64
		var wg sync.WaitGroup
		for range 2 {
			m := New(connect(), 0)
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, err := m.For(ctx, "acme", "news", "r", crawl.Quota{}, 0)
					if err != nil {
						t.Error(err)
						return
					}
					defer l.Release(ctx)
					// Each stops at 300 on its own too: a change that lifted the budget
					// fails the test instead of spending forever.
					for range 300 {
						ok, _, err := l.Page(ctx)
						if err != nil || !ok {
							return
						}
						spent.Add(1)
						time.Sleep(time.Millisecond) // long enough for the changes to interleave
					}
				}()
			}
		}
		for i := range 20 {
			c := Change{Set: map[string]int{"items-per-day": 1000 + i}}
			if i%2 == 1 {
				c = Change{Clear: []string{"items"}}
			}
			if _, err := admin.ChangeTenant(ctx, "acme", c); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		wg.Wait()
		q, err := admin.Tenant(ctx, "acme")
		if err != nil || q != (crawl.Quota{Pages: 300, ItemsPerDay: 1018}) {
			t.Errorf("budgets after the changes: %+v (%v); want pages 300, items per day 1018", q, err)
		}
		if use, _ := admin.RunUsage(ctx, "acme", "r"); spent.Load() != 300 || use.Pages != 300 {
			t.Fatalf("4 leases spent %d pages under a budget of 300 changed beside them; counter %d", spent.Load(), use.Pages)
		}
	})
}

// The reservation of a worker that died goes back to the budget after LeaseLife.
func TestDeadWorkersLeaseExpires(t *testing.T) {
	onBoth(t, func(t *testing.T, connect func() *redis.Client) {
		dead := leaseFor(t, New(connect(), 0), "t", "c", "r", crawl.Quota{Pages: 30})
		if n, _ := spend(t, dead, 3); n != 3 {
			t.Fatalf("spent %d of 3", n)
		}
		syncNow(t, dead)                          // its last sync: 3 spent, 22 held
		dead.once.Do(func() { close(dead.stop) }) // it never syncs again, nor releases
		<-dead.stopped

		later := New(connect(), 0)
		later.now = func() time.Time { return time.Now().Add(LeaseLife + time.Second) }
		l := leaseFor(t, later, "t", "c", "r", crawl.Quota{Pages: 30})
		if n, reason := spend(t, l, 0); n != 27 {
			t.Fatalf("after the dead worker's lease expired another spent %d of the 27 left (%q)", n, reason)
		}
	})
}

// Unlimited budgets still count, for monitoring, and tenant budgets apply to any chain.
func TestTenantBudgetAndUsage(t *testing.T) {
	onBoth(t, func(t *testing.T, connect func() *redis.Client) {
		ctx := context.Background()
		m := New(connect(), 5)
		if _, err := m.ChangeTenant(ctx, "acme", Change{Set: map[string]int{"pages": 12}}); err != nil {
			t.Fatal(err)
		}
		l := leaseFor(t, m, "acme", "news", "r1", crawl.Quota{Pages: 20})
		n, reason := spend(t, l, 0)
		if reason != "quota reached: 12 pages per run of tenant acme" {
			t.Errorf("reason %q", reason)
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
	})
}

// A spent item budget stops pages too (their items could not be stored), once the
// lease holds no items of it.
func TestSpentItemBudgetStopsPages(t *testing.T) {
	onBoth(t, func(t *testing.T, connect func() *redis.Client) {
		ctx := context.Background()
		m := New(connect(), 0)
		l := leaseFor(t, m, "t", "c", "r", crawl.Quota{Items: 3})
		for i := range 3 {
			if ok, reason, err := l.Item(ctx); !ok || err != nil {
				t.Fatalf("item %d refused: %q %v", i, reason, err)
			}
		}
		if ok, reason, _ := l.Item(ctx); ok || reason != "quota reached: 3 items per run of chain c" {
			t.Fatalf("4th item of 3: ok %v, %q", ok, reason)
		}
		if ok, reason, _ := l.Page(ctx); ok || reason != "quota reached: 3 items per run of chain c" {
			t.Fatalf("a page after the item budget was spent: ok %v, %q", ok, reason)
		}
	})
}

// What a user may type to `trawler quota set`, and what it is told.
func TestChangeTenantRefusesBadBudgets(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	defer rdb.Close()
	m := New(rdb, 0)
	ctx := context.Background()
	if _, err := m.ChangeTenant(ctx, "acme", Change{Set: map[string]int{"pages": 50, "items-per-day": 900}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		change Change
		want   string
	}{
		{Change{Set: map[string]int{"pages": -5}}, "--pages -5: a budget cannot be negative: give a positive number of pages, e.g. --pages 5000, or remove the limit with --clear pages"},
		{Change{Set: map[string]int{"items-per-day": 0}}, "--items-per-day 0: a budget of 0 would stop every run: give a positive number of items a day, e.g. --items-per-day 5000, or remove the limit with --clear items-per-day"},
		{Change{Clear: []string{"pagez"}}, `--clear pagez: no such budget: use one of pages, items, pages-per-day, items-per-day`},
		{Change{Set: map[string]int{"items": 5}, Clear: []string{"items"}}, "--items and --clear items: set the budget or remove it, not both"},
		{Change{}, "nothing to change for tenant acme: set a budget (--pages N, …) or remove one (--clear NAME); budgets: pages, items, pages-per-day, items-per-day"},
	} {
		_, err := m.ChangeTenant(ctx, "acme", c.change)
		if err == nil || err.Error() != c.want {
			t.Errorf("%+v: %v\nwant %s", c.change, err, c.want)
		}
	}
	if _, err := ParseLimit("pages", "abc"); err == nil || err.Error() != `"abc" is not a whole number: give a positive number of pages, e.g. --pages 5000, or remove the limit with --clear pages` {
		t.Errorf("--pages abc: %v", err)
	}
	if q, _ := m.Tenant(ctx, "acme"); q != (crawl.Quota{Pages: 50, ItemsPerDay: 900}) {
		t.Errorf("refused changes changed the budgets: %+v", q)
	}
}

// commandCounter counts the commands a client sends, those of pipelines one by one.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// countedManager is a Manager on a new client whose commands count counts.
func countedManager(connect func() *redis.Client) (*Manager, *redis.Client, *commandCounter) {
	rdb := connect()
	count := &commandCounter{}
	rdb.AddHook(count)
	return New(rdb, 0), rdb, count
}

// With no budget declared, spending costs no Redis command per page or item: a batch
// learns at its start that nothing limits it and writes what it spent in bulk, so the
// counters `trawler quota show` reads are exact once it ends.
func TestNoBudgetSpendsWithoutRedisPerPage(t *testing.T) {
	onBoth(t, func(t *testing.T, connect func() *redis.Client) {
		ctx := context.Background()
		m, rdb, count := countedManager(connect)
		for batch := range 2 {
			before := count.n.Load()
			l, err := m.For(ctx, "acme", "news", "r1", crawl.Quota{}, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 1000 {
				if ok, reason, err := l.Page(ctx); !ok || err != nil {
					t.Fatalf("page %d refused with no budget: %q %v", i, reason, err)
				}
				if ok, reason, err := l.Item(ctx); !ok || err != nil {
					t.Fatalf("item %d refused with no budget: %q %v", i, reason, err)
				}
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// At most: the budgets read, and each of the 6 counters added to once and its
			// expiry set (a sync on the way may add its own).
			if n := count.n.Load() - before; n > 26 {
				t.Errorf("batch %d: 1000 pages and 1000 items with no budget cost %d Redis commands; want no command per page", batch+1, n)
			}
		}
		run, _ := m.RunUsage(ctx, "acme", "r1")
		chain, _ := m.ChainUsage(ctx, "acme", "news")
		day, _ := m.TenantUsage(ctx, "acme")
		want := Usage{Pages: 2000, Items: 2000}
		if run != want || chain != want || day != want {
			t.Fatalf("after 2 batches of 1000 pages and items: run %+v, chain today %+v, tenant today %+v; want %+v each", run, chain, day, want)
		}
		if ttl := rdb.TTL(ctx, runKey("acme", "r1", "pages")).Val(); ttl <= 0 {
			t.Errorf("the run's page counter never expires (TTL %v)", ttl)
		}
	})
}

// With no budget declared, a worker's batches that end while others run leave what they
// spent to the last of them, which adds it all in one round trip: the counters are exact
// when the worker's last batch ends, at a few commands for all its batches.
func TestNoBudgetCountsSentByTheLastBatchToEnd(t *testing.T) {
	onBoth(t, func(t *testing.T, connect func() *redis.Client) {
		ctx := context.Background()
		m, _, count := countedManager(connect)
		var leases []*Lease
		for range 5 {
			l, err := m.For(ctx, "acme", "news", "r1", crawl.Quota{}, 100)
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, l)
		}
		for _, l := range leases {
			for range 100 {
				if ok, reason, err := l.Page(ctx); !ok || err != nil {
					t.Fatalf("page refused with no budget: %q %v", reason, err)
				}
			}
		}
		m.sentAt = time.Now() // as if the worker had just sent: the next send is a second away
		before := count.n.Load()
		for _, l := range leases[:4] {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := count.n.Load() - before; n > 0 {
			t.Errorf("four of five batches ended while the fifth ran and sent %d Redis commands; want none", n)
		}
		if run, _ := m.RunUsage(ctx, "acme", "r1"); run.Pages != 0 {
			t.Errorf("four of five batches ended and the run's counter reads %d pages; the last batch to end sends them", run.Pages)
		}
		before = count.n.Load()
		if err := leases[4].Release(ctx); err != nil {
			t.Fatal(err)
		}
		// 3 INCRBY and 3 EXPIRE (the run's, the chain's and the tenant's page counters),
		// and the 3 of a new connection's handshake.
		if n := count.n.Load() - before; n > 9 {
			t.Errorf("the last of 5 batches to end sent %d Redis commands; want the 3 counters sent once", n)
		}
		run, _ := m.RunUsage(ctx, "acme", "r1")
		chain, _ := m.ChainUsage(ctx, "acme", "news")
		day, _ := m.TenantUsage(ctx, "acme")
		if want := (Usage{Pages: 500}); run != want || chain != want || day != want {
			t.Fatalf("after 5 batches of 100 pages: run %+v, chain today %+v, tenant today %+v; want %+v each", run, chain, day, want)
		}
	})
}

// A budget declared while a batch with none runs reaches it within SyncEvery or two.
func TestBudgetSetReachesALeaseStartedWithout(t *testing.T) {
	onBoth(t, func(t *testing.T, connect func() *redis.Client) {
		ctx := context.Background()
		m := New(connect(), 0)
		l := leaseFor(t, m, "acme", "news", "r1", crawl.Quota{})
		if n, _ := spend(t, l, 5); n != 5 {
			t.Fatalf("spent %d of 5", n)
		}
		if _, err := New(connect(), 0).ChangeTenant(ctx, "acme", Change{Set: map[string]int{"pages": 12}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * SyncEvery)
		n, reason := spend(t, l, 0)
		if n != 7 || reason != "quota reached: 12 pages per run of tenant acme" {
			t.Fatalf("after a budget of 12 was set the lease that had spent 5 spent %d more (%q); want 7", n, reason)
		}
	})
}
