// Package quota enforces cost budgets (pages and items, per run and per day, per chain
// and per tenant) across every worker that shares one Redis. Workers never ask Redis
// per page: a batch leases a block of units from each counter that applies to it,
// spends them locally and gives back what it did not use when it ends. A Lua script
// grants at most what is left under the limit, so all workers together never spend
// more than the budget, and a counter always reads what was really spent once the
// batches holding leases are over.
package quota

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"trawler/crawl"
)

// DefaultBlock is how many units a lease takes from Redis at once.
const DefaultBlock = 25

// Tenant budgets live in this Redis hash, one per tenant (fields pages, items,
// pages_per_day, items_per_day; absent or 0: unlimited), set with `trawler quota set`.
func tenantKey(tenant string) string { return "trawler:quota:tenant:" + tenant }

// Manager leases quota for a worker's batches.
type Manager struct {
	rdb   *redis.Client
	block int
	now   func() time.Time

	mu      sync.Mutex
	tenants map[string]cachedTenant // tenant budgets, re-read every 10 s
	// spent remembers counters Redis refused to lease from, so every batch of this
	// process stops at once (pages too, when the item budget is gone) instead of each
	// fetching pages until its own lease runs dry. Re-checked after 10 s, so a raised
	// budget takes effect.
	spent map[string]spentCounter
}

type spentCounter struct {
	reason string
	at     time.Time
}

type cachedTenant struct {
	q    crawl.Quota
	read time.Time
}

// New returns a manager over rdb. block is the lease size (DefaultBlock when 0).
func New(rdb *redis.Client, block int) *Manager {
	if block <= 0 {
		block = DefaultBlock
	}
	return &Manager{rdb: rdb, block: block, now: time.Now, tenants: map[string]cachedTenant{}, spent: map[string]spentCounter{}}
}

// SetTenant stores a tenant's budgets; zero fields remove a limit.
func (m *Manager) SetTenant(ctx context.Context, tenant string, q crawl.Quota) error {
	if err := m.rdb.HSet(ctx, tenantKey(tenant), map[string]any{
		"pages": q.Pages, "items": q.Items, "pages_per_day": q.PagesPerDay, "items_per_day": q.ItemsPerDay,
	}).Err(); err != nil {
		return fmt.Errorf("store quota of tenant %s: %w", tenant, err)
	}
	m.mu.Lock()
	delete(m.tenants, tenant)
	m.mu.Unlock()
	return nil
}

// Tenant reads a tenant's budgets.
func (m *Manager) Tenant(ctx context.Context, tenant string) (crawl.Quota, error) {
	m.mu.Lock()
	c, ok := m.tenants[tenant]
	m.mu.Unlock()
	if ok && m.now().Sub(c.read) < 10*time.Second {
		return c.q, nil
	}
	v, err := m.rdb.HGetAll(ctx, tenantKey(tenant)).Result()
	if err != nil {
		return crawl.Quota{}, fmt.Errorf("read quota of tenant %s: %w", tenant, err)
	}
	num := func(k string) int { n, _ := strconv.Atoi(v[k]); return n }
	q := crawl.Quota{Pages: num("pages"), Items: num("items"), PagesPerDay: num("pages_per_day"), ItemsPerDay: num("items_per_day")}
	m.mu.Lock()
	m.tenants[tenant] = cachedTenant{q: q, read: m.now()}
	m.mu.Unlock()
	return q, nil
}

// Usage is what a tenant, a chain or a run has spent, read from the counters.
type Usage struct {
	Pages int `json:"pages"`
	Items int `json:"items"`
}

// counter is one Redis counter and the limit that applies to it.
type counter struct {
	key   string
	limit int    // 0: unlimited, counted for monitoring only
	what  string // names the budget in the reason a run stops
	ttl   time.Duration
}

func day(t time.Time) string { return t.UTC().Format("2006-01-02") }

func runKey(tenant, run, unit string) string {
	return fmt.Sprintf("trawler:quota:%s:run:%s:%s", tenant, run, unit)
}
func chainDayKey(tenant, chain, unit string, t time.Time) string {
	return fmt.Sprintf("trawler:quota:%s:chain:%s:%s:%s", tenant, chain, day(t), unit)
}
func tenantDayKey(tenant, unit string, t time.Time) string {
	return fmt.Sprintf("trawler:quota:%s:day:%s:%s", tenant, day(t), unit)
}

// RunUsage reads what a run has spent so far.
func (m *Manager) RunUsage(ctx context.Context, tenant, run string) (Usage, error) {
	return m.usage(ctx, runKey(tenant, run, "pages"), runKey(tenant, run, "items"))
}

// TenantUsage reads what a tenant has spent today (UTC).
func (m *Manager) TenantUsage(ctx context.Context, tenant string) (Usage, error) {
	now := m.now()
	return m.usage(ctx, tenantDayKey(tenant, "pages", now), tenantDayKey(tenant, "items", now))
}

// ChainUsage reads what a chain of a tenant has spent today (UTC).
func (m *Manager) ChainUsage(ctx context.Context, tenant, chain string) (Usage, error) {
	now := m.now()
	return m.usage(ctx, chainDayKey(tenant, chain, "pages", now), chainDayKey(tenant, chain, "items", now))
}

func (m *Manager) usage(ctx context.Context, pagesKey, itemsKey string) (Usage, error) {
	v, err := m.rdb.MGet(ctx, pagesKey, itemsKey).Result()
	if err != nil {
		return Usage{}, err
	}
	n := func(x any) int { s, _ := x.(string); i, _ := strconv.Atoi(s); return i }
	return Usage{Pages: n(v[0]), Items: n(v[1])}, nil
}

// Lease is one batch's hold on its budgets. It is safe for concurrent use by the
// batch's input goroutines. Release it when the batch ends.
type Lease struct {
	m     *Manager
	pages []*held
	items []*held
	mu    sync.Mutex
}

type held struct {
	counter
	left int // leased from Redis, not yet spent
}

// For returns the lease of a batch of a run of chain, owned by tenant, under the
// chain's own budgets and the tenant's.
func (m *Manager) For(ctx context.Context, tenant, chain, run string, chainQ crawl.Quota) (*Lease, error) {
	tq, err := m.Tenant(ctx, tenant)
	if err != nil {
		return nil, err
	}
	now := m.now()
	perRun := func(a, b int) int { // the tighter of two limits, 0 meaning none
		if a == 0 || (b != 0 && b < a) {
			return b
		}
		return a
	}
	l := &Lease{m: m}
	for _, unit := range []string{"pages", "items"} {
		chainRun, tenantRun, chainDay, tenantDay := chainQ.Pages, tq.Pages, chainQ.PagesPerDay, tq.PagesPerDay
		if unit == "items" {
			chainRun, tenantRun, chainDay, tenantDay = chainQ.Items, tq.Items, chainQ.ItemsPerDay, tq.ItemsPerDay
		}
		runWhat := fmt.Sprintf("%s per run of chain %s", unit, chain)
		if tenantRun != 0 && (chainRun == 0 || tenantRun < chainRun) {
			runWhat = fmt.Sprintf("%s per run of tenant %s", unit, tenant)
		}
		cs := []*held{
			{counter: counter{key: runKey(tenant, run, unit), limit: perRun(chainRun, tenantRun), what: runWhat, ttl: 7 * 24 * time.Hour}},
			{counter: counter{key: chainDayKey(tenant, chain, unit, now), limit: chainDay, what: fmt.Sprintf("%s per day of chain %s", unit, chain), ttl: 48 * time.Hour}},
			{counter: counter{key: tenantDayKey(tenant, unit, now), limit: tenantDay, what: fmt.Sprintf("%s per day of tenant %s", unit, tenant), ttl: 48 * time.Hour}},
		}
		if unit == "pages" {
			l.pages = cs
		} else {
			l.items = cs
		}
	}
	return l, nil
}

// grant leases up to want units of a counter, never past its limit, and returns how
// many it got. The counter always holds what has been granted (and not given back).
var grant = redis.NewScript(`
local want = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local n = redis.call('INCRBY', KEYS[1], want)
if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
if limit <= 0 or n <= limit then return want end
local got = want - (n - limit)
if got < 0 then got = 0 end
redis.call('DECRBY', KEYS[1], want - got)
return got
`)

// Page spends one page of every budget; ok is false once one is exhausted, with the
// reason ("quota reached: 500 pages per run of chain demo").
func (l *Lease) Page(ctx context.Context) (ok bool, reason string, err error) {
	// A page whose items could not be stored is not worth fetching: a spent item
	// budget stops pages too.
	return l.take(ctx, l.pages, append(append([]*held(nil), l.pages...), l.items...))
}

// Item spends one item of every budget, like Page.
// A page already fetched keeps its items when the page budget runs out meanwhile:
// only a spent item budget refuses them.
func (l *Lease) Item(ctx context.Context) (ok bool, reason string, err error) {
	return l.take(ctx, l.items, l.items)
}

// take spends one unit of every counter in hs, unless one of `stop` is known spent.
func (l *Lease) take(ctx context.Context, hs, stop []*held) (bool, string, error) {
	const n = 1
	l.mu.Lock()
	defer l.mu.Unlock()
	if reason := l.m.knownSpent(stop); reason != "" {
		return false, reason, nil
	}
	for _, h := range hs {
		if h.left >= n {
			continue
		}
		got, err := grant.Run(ctx, l.m.rdb, []string{h.key}, l.m.block, h.limit, int(h.ttl.Seconds())).Int()
		if err != nil {
			return false, "", fmt.Errorf("lease quota %s: %w", h.what, err)
		}
		h.left += got
		if h.left < n {
			reason := fmt.Sprintf("quota reached: %d %s", h.limit, h.what)
			l.m.markSpent(h.key, reason)
			return false, reason, nil
		}
	}
	for _, h := range hs {
		h.left -= n
	}
	return true, "", nil
}

func (m *Manager) markSpent(key, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, sc := range m.spent { // keep the map to the counters spent lately
		if m.now().Sub(sc.at) >= 10*time.Second {
			delete(m.spent, k)
		}
	}
	m.spent[key] = spentCounter{reason: reason, at: m.now()}
}

// knownSpent returns why one of the counters is known to be spent, or "".
func (m *Manager) knownSpent(hs []*held) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range hs {
		if sc, ok := m.spent[h.key]; ok {
			if m.now().Sub(sc.at) < 10*time.Second {
				return sc.reason
			}
			delete(m.spent, h.key)
		}
	}
	return ""
}

// Release gives back what the lease holds unspent, so counters read what was spent.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	pipe := l.m.rdb.Pipeline()
	for _, h := range append(append([]*held(nil), l.pages...), l.items...) {
		if h.left > 0 {
			pipe.DecrBy(ctx, h.key, int64(h.left))
			h.left = 0
		}
	}
	if pipe.Len() == 0 {
		return nil
	}
	_, err := pipe.Exec(ctx)
	return err
}
