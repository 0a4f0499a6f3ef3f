// Package quota enforces cost budgets (pages and items, per run and per day, per chain
// and per tenant) across every worker that shares one Redis. Workers never ask Redis
// per page: a batch leases a block of units from each counter that applies to it and
// spends them locally. A counter no budget limits (none declared for the chain, none
// set for the tenant) is only counted: the batch adds what it spent to it in bulk,
// every SyncEvery and when it ends, with no script.
//
// Each budget has two parts in Redis: the counter of units spent, and the reservations
// of the leases running now (a hash, lease id → units and expiry). A Lua script grants
// a lease only what is left under the limit once the spent units and every live
// reservation are counted, so all workers together never spend more than the budget.
// A lease commits what it spent and renews its reservation every SyncEvery, and gives
// back what it did not spend when its batch ends; so the spent counter — what
// `trawler quota show`, status and the console read — counts only units really spent,
// never units a lease holds unused.
//
// A lease refused because other leases hold the rest of a budget waits for them to
// spend it or give it back; only a budget whose spent counter has reached the limit
// stops a batch. A lease of a worker that died expires after LeaseLife, and its
// reservation goes back to the budget.
package quota

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/redisops"
)

// DefaultBlock is how many units a lease takes from Redis at once.
const DefaultBlock = 25

const (
	// SyncEvery is how often a lease commits what it spent, renews its reservation and
	// reads the budgets again: a budget changed with `trawler quota set` applies to
	// every running batch within this interval, and to a new batch within it too (the
	// batches of a worker that start within SyncEvery share one read of the budgets).
	SyncEvery = 500 * time.Millisecond
	// LeaseLife is how long a reservation outlives its last renewal; the reservation of
	// a worker that died goes back to the budget after it.
	LeaseLife = 20 * time.Second
	// waitEvery is how often a lease refused while others hold the rest of a budget asks
	// again.
	waitEvery = 100 * time.Millisecond
)

// Tenant budgets live in this Redis hash, one per tenant (fields pages, items,
// pages_per_day, items_per_day; absent: unlimited), changed with `trawler quota set`.
func tenantKey(tenant string) string { return "trawler:quota:tenant:" + tenant }

// Budget is one of a tenant's budgets: its name (the `trawler quota set` flag) and the
// field of the tenant's hash that holds it.
type Budget struct {
	Name  string
	field string
	Unit  string // what the number counts, for help and errors
	Doc   string
}

// Budgets are the budgets a tenant may have.
var Budgets = []Budget{
	{Name: "pages", field: "pages", Unit: "pages", Doc: "pages per run of any chain of the tenant"},
	{Name: "items", field: "items", Unit: "items", Doc: "items stored per run"},
	{Name: "pages-per-day", field: "pages_per_day", Unit: "pages a day", Doc: "pages per UTC day, all runs of the tenant together"},
	{Name: "items-per-day", field: "items_per_day", Unit: "items a day", Doc: "items stored per UTC day, all runs together"},
}

// BudgetNames lists the budget names, for help and errors.
func BudgetNames() string {
	names := make([]string, len(Budgets))
	for i, b := range Budgets {
		names[i] = b.Name
	}
	return strings.Join(names, ", ")
}

// budgetNamed finds a budget by its name (or its field name).
func budgetNamed(name string) (Budget, error) {
	for _, b := range Budgets {
		if name == b.Name || name == b.field {
			return b, nil
		}
	}
	return Budget{}, fmt.Errorf("no such budget: use one of %s", BudgetNames())
}

// ParseLimit reads the value given for a budget: a whole number above 0. Removing a
// limit is Change.Clear (`--clear NAME`), not 0, so a typo never lifts a budget.
func ParseLimit(name, s string) (int, error) {
	b, err := budgetNamed(name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number: %s", s, b.fix())
	}
	return n, b.check(n)
}

func (b Budget) check(n int) error {
	switch {
	case n < 0:
		return fmt.Errorf("a budget cannot be negative: %s", b.fix())
	case n == 0:
		return fmt.Errorf("a budget of 0 would stop every run: %s", b.fix())
	}
	return nil
}

func (b Budget) fix() string {
	return fmt.Sprintf("give a positive number of %s, e.g. --%s 5000, or remove the limit with --clear %s", b.Unit, b.Name, b.Name)
}

// Change names the budgets of a tenant to set and those to remove; the budgets it does
// not name stay as they are. Keys of Set and entries of Clear are budget names.
type Change struct {
	Set   map[string]int
	Clear []string
}

// ChangeTenant applies a change to a tenant's budgets and returns them as they are
// after it.
func (m *Manager) ChangeTenant(ctx context.Context, tenant string, c Change) (crawl.Quota, error) {
	if len(c.Set) == 0 && len(c.Clear) == 0 {
		return crawl.Quota{}, fmt.Errorf("nothing to change for tenant %s: set a budget (--%s N, …) or remove one (--clear NAME); budgets: %s",
			tenant, Budgets[0].Name, BudgetNames())
	}
	set := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(c.Set)) {
		b, err := budgetNamed(name)
		if err != nil {
			return crawl.Quota{}, fmt.Errorf("--%s: %w", name, err)
		}
		if err := b.check(c.Set[name]); err != nil {
			return crawl.Quota{}, fmt.Errorf("--%s %d: %w", b.Name, c.Set[name], err)
		}
		set[b.field] = c.Set[name]
	}
	var clear []string
	for _, name := range c.Clear {
		b, err := budgetNamed(name)
		if err != nil {
			return crawl.Quota{}, fmt.Errorf("--clear %s: %w", name, err)
		}
		if _, both := set[b.field]; both {
			return crawl.Quota{}, fmt.Errorf("--%s and --clear %s: set the budget or remove it, not both", b.Name, b.Name)
		}
		clear = append(clear, b.field)
	}
	pipe := m.rdb.TxPipeline()
	if len(set) > 0 {
		pipe.HSet(ctx, tenantKey(tenant), set)
	}
	if len(clear) > 0 {
		pipe.HDel(ctx, tenantKey(tenant), clear...)
	}
	after := pipe.HGetAll(ctx, tenantKey(tenant))
	if _, err := pipe.Exec(ctx); err != nil {
		return crawl.Quota{}, fmt.Errorf("change quota of tenant %s: %w", tenant, err)
	}
	return quotaOf(after.Val()), nil
}

// Tenant reads a tenant's budgets.
func (m *Manager) Tenant(ctx context.Context, tenant string) (crawl.Quota, error) {
	v, err := m.rdb.HGetAll(ctx, tenantKey(tenant)).Result()
	if err != nil {
		return crawl.Quota{}, fmt.Errorf("read quota of tenant %s: %w", tenant, err)
	}
	return quotaOf(v), nil
}

func quotaOf(v map[string]string) crawl.Quota {
	num := func(k string) int { n, _ := strconv.Atoi(v[k]); return max(n, 0) }
	return crawl.Quota{Pages: num("pages"), Items: num("items"), PagesPerDay: num("pages_per_day"), ItemsPerDay: num("items_per_day")}
}

// Manager leases quota for a worker's batches.
type Manager struct {
	rdb   redis.UniversalClient
	block int
	now   func() time.Time

	mu sync.Mutex
	// spent holds the counters found at their limit by any lease of this worker, so a
	// batch that finds the item budget spent stops the pages of the others at once
	// rather than at their next sync. Every answer about a counter from Redis sets or
	// clears its entry, so a raised budget clears it at the next sync of any lease.
	spent  map[string]spentMark
	pruned time.Time

	// budgets are the tenants' budgets as last read, for the leases that start within
	// SyncEvery of the read; expiring holds when this manager last set the expiry of an
	// unlimited counter, which it refreshes once per half its life.
	budgets  map[string]readBudgets
	expiring map[string]time.Time

	// live counts the leases not released yet. unsent holds units spent of counters no
	// budget limits, by counter, not yet added to them: see count.
	live   int
	unsent map[string]*unsent
	sentAt time.Time
}

type unsent struct {
	units int64
	ttl   time.Duration
}

// CountEvery is the longest that units spent of counters no budget limits wait in a
// worker while its batches run (see count).
const CountEvery = time.Second

type readBudgets struct {
	q  crawl.Quota
	at time.Time
}

type spentMark struct {
	reason string
	at     time.Time
}

// New returns a manager over rdb. block is the lease size (DefaultBlock when 0).
func New(rdb redis.UniversalClient, block int) *Manager {
	if block <= 0 {
		block = DefaultBlock
	}
	return &Manager{rdb: rdb, block: block, now: time.Now, spent: map[string]spentMark{},
		budgets: map[string]readBudgets{}, expiring: map[string]time.Time{}, unsent: map[string]*unsent{}}
}

// note records whether a counter is spent ("" when not).
func (m *Manager) note(key, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if reason == "" {
		delete(m.spent, key)
	} else {
		m.spent[key] = spentMark{reason: reason, at: now}
	}
	// Entries no lease refreshed for a minute belong to runs and days that are over.
	if now.Sub(m.pruned) > time.Minute {
		for k, sm := range m.spent {
			if now.Sub(sm.at) > time.Minute {
				delete(m.spent, k)
			}
		}
		m.pruned = now
	}
}

// spentReason says why a counter is spent, or "".
func (m *Manager) spentReason(key string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spent[key].reason
}

// Usage is what a tenant, a chain or a run has spent, read from the counters.
type Usage struct {
	Pages int `json:"pages"`
	Items int `json:"items"`
}

func day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// A lease's script reads a counter, its reservations and the tenant's budgets together,
// so on a Redis Cluster they must share a hash slot: every counter of a tenant carries
// its budget key as hash tag ("{trawler:quota:tenant:acme}:run:…"), and that key, which
// has no braces, hashes as its tag does. A tenant's budgets thus sit on one node; the
// tenants spread over the cluster.
func counterKey(tenant, rest string) string { return "{" + tenantKey(tenant) + "}:" + rest }

func runKey(tenant, run, unit string) string {
	return counterKey(tenant, fmt.Sprintf("run:%s:%s", run, unit))
}
func chainDayKey(tenant, chain, unit string, t time.Time) string {
	return counterKey(tenant, fmt.Sprintf("chain:%s:%s:%s", chain, day(t), unit))
}
func tenantDayKey(tenant, unit string, t time.Time) string {
	return counterKey(tenant, fmt.Sprintf("day:%s:%s", day(t), unit))
}

// RunUsage reads what a run has spent so far (what running batches spent in the last
// SyncEvery may not be in yet).
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
	m      *Manager
	id     string
	tenant string
	pages  []*held
	items  []*held
	mu     sync.Mutex

	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// held is one counter as a lease sees it.
type held struct {
	key        string
	chainLimit int       // the chain's own limit (0: none)
	field      string    // the tenant's budget that applies too ("" for none)
	what       [2]string // the budget, named for a stop reason: [0] the chain's, [1] the tenant's
	ttl        time.Duration
	most       int  // units this lease ever needs (0: unknown)
	free       bool // no budget limits the counter: spent units are only counted

	left  int // reserved in Redis, not yet spent
	used  int // spent, not yet added to the counter
	taken int // spent by this lease in all
}

// For returns the lease of a batch of a run of chain, owned by tenant, under the
// chain's own budgets and the tenant's. inputs is how many inputs the batch has: a
// page lease never takes more than that, so a small batch does not hold pages another
// batch could run (0: unknown).
func (m *Manager) For(ctx context.Context, tenant, chain, run string, chainQ crawl.Quota, inputs int) (*Lease, error) {
	now := m.now()
	id := make([]byte, 12)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	l := &Lease{m: m, id: hex.EncodeToString(id), tenant: tenant, stop: make(chan struct{}), stopped: make(chan struct{})}
	for _, unit := range []string{"pages", "items"} {
		chainRun, chainDay := chainQ.Pages, chainQ.PagesPerDay
		most := inputs
		if unit == "items" {
			chainRun, chainDay, most = chainQ.Items, chainQ.ItemsPerDay, 0
		}
		cs := []*held{
			{key: runKey(tenant, run, unit), chainLimit: chainRun, field: unit, ttl: 7 * 24 * time.Hour, most: most,
				what: [2]string{unit + " per run of chain " + chain, unit + " per run of tenant " + tenant}},
			{key: chainDayKey(tenant, chain, unit, now), chainLimit: chainDay, ttl: 48 * time.Hour, most: most,
				what: [2]string{unit + " per day of chain " + chain}},
			{key: tenantDayKey(tenant, unit, now), field: unit + "_per_day", ttl: 48 * time.Hour, most: most,
				what: [2]string{"", unit + " per day of tenant " + tenant}},
		}
		if unit == "pages" {
			l.pages = cs
		} else {
			l.items = cs
		}
	}
	budgets, err := m.tenantBudgets(ctx, tenant, true)
	if err != nil {
		return nil, err
	}
	l.limit(budgets, true)
	// Learn at once which budgets are already spent, so a batch of a spent run stops
	// before its first page.
	if err := l.sync(ctx, false); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.live++
	m.mu.Unlock()
	go l.keepSynced()
	return l, nil
}

// tenantBudgets reads a tenant's budgets, or with recent takes those this manager read
// less than SyncEvery ago.
func (m *Manager) tenantBudgets(ctx context.Context, tenant string, recent bool) (crawl.Quota, error) {
	m.mu.Lock()
	b, ok := m.budgets[tenant]
	m.mu.Unlock()
	now := m.now()
	if recent && ok && now.Sub(b.at) < SyncEvery {
		return b.q, nil
	}
	q, err := m.Tenant(ctx, tenant)
	if err != nil {
		return crawl.Quota{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.budgets[tenant] = readBudgets{q: q, at: now}
	for t, b := range m.budgets {
		if now.Sub(b.at) > time.Minute {
			delete(m.budgets, t)
		}
	}
	return q, nil
}

// limit marks the counters no budget limits as free, given the tenant's budgets; at
// the start of the lease also those no longer free. A counter a budget came to limit
// goes over to leased units at its next take; one a limit was lifted from stays
// leased until the batch ends, as the script finds no limit to stop it.
func (l *Lease) limit(tenant crawl.Quota, start bool) {
	budget := map[string]int{"pages": tenant.Pages, "items": tenant.Items, "pages_per_day": tenant.PagesPerDay, "items_per_day": tenant.ItemsPerDay}
	for _, h := range l.all() {
		free := h.chainLimit <= 0 && (h.field == "" || budget[h.field] <= 0)
		if start || !free {
			h.free = free
		}
	}
}

func (l *Lease) all() []*held { return append(slices.Clip(l.pages), l.items...) }

// lease runs on one counter: it adds what the lease spent (ARGV[2]) to the counter,
// gives back ARGV[3] units of its reservation, grants up to ARGV[4] more under the
// limit, and renews the reservation (or deletes it when it is empty). The limit is the
// tighter of the chain's (ARGV[5]) and the tenant's budget field (ARGV[6]) read here,
// so a changed budget applies to the very next grant. Reservations past their expiry
// are dropped. A tightened budget trims the lease's reservation to what still fits.
// Returns {granted, reserved, spent, limit, limit is the tenant's (1/0)}.
var lease = redis.NewScript(`
local id = ARGV[1]
local used, give, want = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local limit, tenant = tonumber(ARGV[5]), 0
if ARGV[6] ~= '' then
  local t = tonumber(redis.call('HGET', KEYS[3], ARGV[6]) or '0') or 0
  if t > 0 and (limit <= 0 or t < limit) then limit, tenant = t, 1 end
end
local ttl, now, life = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local spent
if used > 0 then
  spent = redis.call('INCRBY', KEYS[1], used)
  if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ttl) end
else
  spent = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
end
local mine, others = 0, 0
local r = redis.call('HGETALL', KEYS[2])
for i = 1, #r, 2 do
  local units, exp = string.match(r[i+1], '^(%d+):(%d+)$')
  units, exp = tonumber(units) or 0, tonumber(exp) or 0
  if exp < now then
    redis.call('HDEL', KEYS[2], r[i])
  elseif r[i] == id then
    mine = units
  else
    others = others + units
  end
end
mine = math.max(mine - used - give, 0)
local got = want
if limit > 0 then
  mine = math.min(mine, math.max(limit - spent - others, 0))
  got = math.max(math.min(want, limit - spent - others - mine), 0)
end
mine = mine + got
if mine > 0 then
  redis.call('HSET', KEYS[2], id, mine .. ':' .. (now + life))
  redis.call('EXPIRE', KEYS[2], ttl)
else
  redis.call('HDEL', KEYS[2], id)
end
return {got, mine, spent, limit, tenant}
`)

// call runs the lease script for one counter.
func (l *Lease) call(ctx context.Context, h *held, give, want int) *redis.Cmd {
	keys, args := l.args(h, give, want)
	return lease.Run(ctx, l.m.rdb, keys, args...)
}

func (l *Lease) args(h *held, give, want int) ([]string, []any) {
	return []string{h.key, h.key + ":held", tenantKey(l.tenant)},
		[]any{l.id, h.used, give, want, h.chainLimit, h.field, int(h.ttl.Seconds()), l.m.now().UnixMilli(), LeaseLife.Milliseconds()}
}

// apply takes a script's answer about h and returns how many units it granted and,
// when the counter is at its limit, why.
func (l *Lease) apply(h *held, cmd *redis.Cmd) (got int, spent string, err error) {
	v, err := cmd.Int64Slice()
	if err != nil || len(v) != 5 {
		return 0, "", cmp.Or(err, fmt.Errorf("unexpected answer %v", cmd.Val()))
	}
	got, mine, total, limit, byTenant := int(v[0]), int(v[1]), int(v[2]), int(v[3]), v[4]
	h.left, h.used = mine, 0
	if limit > 0 && total >= limit {
		spent = fmt.Sprintf("quota reached: %d %s", limit, h.what[byTenant])
	}
	l.m.note(h.key, spent)
	return got, spent, nil
}

// sync commits what the lease spent, renews its reservations and reads which budgets
// are spent; giveBack returns every unspent unit too. The caller holds l.mu, or no
// one else has the lease yet.
func (l *Lease) sync(ctx context.Context, giveBack bool) error {
	var hs, free []*held
	for _, h := range l.all() {
		if h.free {
			free = append(free, h)
		} else {
			hs = append(hs, h)
		}
	}
	give := func(h *held) int {
		if giveBack {
			return h.left
		}
		return 0
	}
	calls := make([]redisops.Call, len(hs))
	for i, h := range hs {
		keys, args := l.args(h, give(h), 0)
		calls[i] = redisops.Call{Keys: keys, Args: args}
	}
	var errs []error
	if len(calls) > 0 {
		cmds := redisops.EvalEach(ctx, l.m.rdb, lease, calls)
		for i, h := range hs {
			if _, _, err := l.apply(h, cmds[i]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, l.count(ctx, free, giveBack))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sync quota of tenant %s: %w", l.tenant, err)
	}
	return nil
}

// count moves what the lease spent of free counters to the manager's unsent units, and
// adds those of every lease to the counters in one round trip when due: when the lease
// ends and no other lease of the manager is live (the last batch of a worker to end
// sends what all of them spent, so a run's counters are whole when its last batch
// ends), and CountEvery after the last send while batches run. No budget limits these
// counters, so no script needs to weigh the spending against one, and a worker's
// batches share their commands: a batch no longer costs one INCRBY per counter.
func (l *Lease) count(ctx context.Context, free []*held, ending bool) error {
	m := l.m
	now := m.now()
	m.mu.Lock()
	for _, h := range free {
		if h.used == 0 {
			continue
		}
		u := m.unsent[h.key]
		if u == nil {
			u = &unsent{ttl: h.ttl}
			m.unsent[h.key] = u
		}
		u.units += int64(h.used)
		h.used = 0
	}
	if len(m.unsent) == 0 || !(ending && m.live <= 1) && now.Sub(m.sentAt) < CountEvery {
		m.mu.Unlock()
		return nil
	}
	sending := m.unsent
	m.unsent, m.sentAt = map[string]*unsent{}, now
	pipe := m.rdb.Pipeline()
	for key, u := range sending {
		pipe.IncrBy(ctx, key, u.units)
		if at, ok := m.expiring[key]; !ok || now.Sub(at) > u.ttl/2 {
			pipe.Expire(ctx, key, u.ttl)
			m.expiring[key] = now
		}
	}
	for k, at := range m.expiring {
		if now.Sub(at) > 24*time.Hour {
			delete(m.expiring, k)
		}
	}
	m.mu.Unlock()
	if _, err := pipe.Exec(ctx); err != nil {
		// Kept for the next send, with their expiry set again.
		m.mu.Lock()
		for key, u := range sending {
			delete(m.expiring, key)
			if v := m.unsent[key]; v != nil {
				v.units += u.units
			} else {
				m.unsent[key] = u
			}
		}
		m.mu.Unlock()
		return err
	}
	return nil
}

// keepSynced syncs the lease every SyncEvery until it is released, so a changed budget
// reaches a running batch, the counters follow what was spent, and the reservation
// does not expire while the batch runs.
func (l *Lease) keepSynced() {
	defer close(l.stopped)
	t := time.NewTicker(SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			// The budgets are read before the lock is taken, not to hold up the pages.
			budgets, err := l.m.tenantBudgets(context.Background(), l.tenant, false)
			l.mu.Lock()
			if err == nil {
				l.limit(budgets, false)
			}
			// A failed sync is tried again on the next tick; a grant reports Redis errors.
			_ = l.sync(context.Background(), false)
			l.mu.Unlock()
		}
	}
}

// Page spends one page of every budget; ok is false once one is spent, with the
// reason ("quota reached: 500 pages per run of chain demo").
func (l *Lease) Page(ctx context.Context) (ok bool, reason string, err error) {
	// A page whose items could not be stored is not worth fetching: a spent item
	// budget stops pages too.
	return l.take(ctx, l.pages, l.all())
}

// Item spends one item of every budget, like Page.
// A page already fetched keeps its items when the page budget runs out meanwhile:
// only a spent item budget refuses them.
func (l *Lease) Item(ctx context.Context) (ok bool, reason string, err error) {
	return l.take(ctx, l.items, l.items)
}

// take spends one unit of every counter in hs, unless one of stop is spent. While
// other leases hold what is left of a budget, it waits for them to spend it or give
// it back.
func (l *Lease) take(ctx context.Context, hs, stop []*held) (bool, string, error) {
	for {
		ok, reason, wait, err := l.tryTake(ctx, hs, stop)
		if !wait {
			return ok, reason, err
		}
		select {
		case <-ctx.Done():
			return false, "", ctx.Err()
		case <-time.After(waitEvery):
		}
	}
}

func (l *Lease) tryTake(ctx context.Context, hs, stop []*held) (ok bool, reason string, wait bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range stop {
		if h.free {
			continue
		}
		if reason := l.m.spentReason(h.key); h.left == 0 && reason != "" {
			return false, reason, false, nil
		}
	}
	for _, h := range hs {
		if h.free || h.left > 0 {
			continue
		}
		want := l.m.block
		if h.most > 0 {
			want = max(min(want, h.most-h.taken), 1)
		}
		got, spent, err := l.apply(h, l.call(ctx, h, 0, want))
		if err != nil {
			return false, "", false, fmt.Errorf("lease quota %s: %w", h.key, err)
		}
		if got > 0 {
			continue
		}
		if spent != "" {
			return false, spent, false, nil
		}
		// Other leases hold the rest of this budget. Give back all this lease holds, so
		// no lease ever waits for units held by another that waits too.
		if err := l.sync(ctx, true); err != nil {
			return false, "", false, err
		}
		return false, "", true, nil
	}
	for _, h := range hs {
		if !h.free {
			h.left--
		}
		h.used++
		h.taken++
	}
	return true, "", false, nil
}

// Release commits what the lease spent and gives back what it holds unspent, so the
// counters read what was spent.
func (l *Lease) Release(ctx context.Context) error {
	l.once.Do(func() { close(l.stop) })
	<-l.stopped
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.sync(ctx, true)
	l.m.mu.Lock()
	l.m.live--
	l.m.mu.Unlock()
	return err
}
