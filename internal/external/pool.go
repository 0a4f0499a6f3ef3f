package external

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
)

// Pools are the resource pools of every tenant and site, kept in Redis. Each pool's keys
// share one hash tag, so its scripts run on one Redis Cluster node.
type Pools struct {
	rdb redis.UniversalClient
	log *slog.Logger
	now func() time.Time
	// MaxWait is the longest a lease waits in-process for an item that is busy or
	// cooling down (default 2s); a longer wait becomes a WaitError for the engine.
	MaxWait time.Duration
}

// NewPools returns the pools kept in rdb.
func NewPools(rdb redis.UniversalClient, log *slog.Logger) *Pools {
	if log == nil {
		log = slog.Default()
	}
	return &Pools{rdb: rdb, log: log, now: time.Now, MaxWait: 2 * time.Second}
}

// Shared is the site name of a tenant's pool that serves every site whose own pool of
// that kind is empty (proxies and user agents are rarely bound to one site).
const Shared = "*"

const registryKey = "ext:pools" // set of "tenant|site|kind"

type poolKeys struct {
	items, ready, inuse, expires, banned, counters, stat, conf string
}

func keysOf(tenant, site string, k Kind) poolKeys {
	p := "ext:{" + tenant + "|" + site + "|" + string(k) + "}:"
	return poolKeys{p + "items", p + "ready", p + "inuse", p + "expires", p + "banned", p + "counters", p + "stat", p + "conf"}
}

func (k poolKeys) script() []string {
	return []string{k.items, k.ready, k.inuse, k.expires, k.banned, k.counters, k.stat}
}

// Configure changes a pool's config: the non-zero fields of c replace the stored ones.
func (p *Pools) Configure(ctx context.Context, tenant, site string, k Kind, c Config) error {
	if err := c.Check(); err != nil {
		return err
	}
	f := c.fields()
	if len(f) == 0 {
		return nil
	}
	if err := p.rdb.HSet(ctx, keysOf(tenant, site, k).conf, f).Err(); err != nil {
		return err
	}
	return p.register(ctx, tenant, site, k)
}

// register lists a pool in the registry. The registry is one key for all pools, in
// another hash slot than the pool's own keys, so it is written after them, never in
// their MULTI block (a Redis Cluster refuses blocks that span slots); a pool listed
// late is only missing from listings for a moment.
func (p *Pools) register(ctx context.Context, tenant, site string, k Kind) error {
	return p.rdb.SAdd(ctx, registryKey, tenant+"|"+site+"|"+string(k)).Err()
}

// Config returns a pool's effective config: its stored settings over the kind's defaults.
func (p *Pools) Config(ctx context.Context, tenant, site string, k Kind) (Config, error) {
	h, err := p.rdb.HGetAll(ctx, keysOf(tenant, site, k).conf).Result()
	if err != nil {
		return Config{}, err
	}
	return DefaultConfig(k).merge(configFrom(h)), nil
}

// Add puts items into a pool, replacing items with the same id (a fresh login replaces
// the account's old cookie, with its bans forgotten). An item's id is its name (ID), or
// a short hash of its value (ItemID) when it has none or the name would give the value
// away. Items without an expiry get the pool's TTL.
func (p *Pools) Add(ctx context.Context, tenant, site string, k Kind, items ...Resource) error {
	if k == Sign {
		return errors.New("sign is not a pool: register a signer, or set the pool's signer with `trawler pool add sign --signer NAME|URL`")
	}
	cfg, err := p.Config(ctx, tenant, site, k)
	if err != nil {
		return err
	}
	keys := keysOf(tenant, site, k)
	now := p.now()
	pipe := p.rdb.TxPipeline()
	for _, r := range items {
		if r.Value == "" {
			return fmt.Errorf("pool %s: item %q has no value; give each item the proxy URL, cookie, device id or user agent it stands for", k, r.ID)
		}
		r.ID = idFor(r)
		if r.Added.IsZero() {
			r.Added = now
		}
		if r.Expires.IsZero() && cfg.TTL > 0 {
			r.Expires = now.Add(cfg.TTL)
		}
		b, _ := json.Marshal(r)
		pipe.HSet(ctx, keys.items, r.ID, b)
		pipe.ZAdd(ctx, keys.ready, redis.Z{Score: float64(now.UnixMilli()), Member: r.ID})
		pipe.ZRem(ctx, keys.banned, r.ID)
		pipe.HDel(ctx, keys.stat, statFields(r.ID)...)
		if r.Expires.IsZero() {
			pipe.ZRem(ctx, keys.expires, r.ID)
		} else {
			pipe.ZAdd(ctx, keys.expires, redis.Z{Score: float64(r.Expires.UnixMilli()), Member: r.ID})
		}
	}
	pipe.HIncrBy(ctx, keys.counters, "added", int64(len(items)))
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	return p.register(ctx, tenant, site, k)
}

var itemStats = []string{"uses", "ok", "failures", "strikes", "bans", "throttles", "health"}

func statFields(id string) []string {
	out := make([]string, len(itemStats))
	for i, f := range itemStats {
		out[i] = id + "|" + f
	}
	return out
}

// Remove takes items out of a pool and reports how many were there. Each item is named
// by its id, or by its value (what the operator has at hand), which finds the item
// whatever id it was stored under.
func (p *Pools) Remove(ctx context.Context, tenant, site string, k Kind, refs ...string) (int, error) {
	keys := keysOf(tenant, site, k)
	all, err := p.rdb.HGetAll(ctx, keys.items).Result()
	if err != nil {
		return 0, err
	}
	byValue := map[string][]string{}
	for id, raw := range all {
		var r Resource
		if json.Unmarshal([]byte(raw), &r) == nil {
			byValue[r.Value] = append(byValue[r.Value], id)
		}
	}
	var ids []string
	for _, ref := range refs {
		switch {
		case all[ref] != "":
			ids = append(ids, ref)
		case all[ItemID(ref)] != "":
			ids = append(ids, ItemID(ref))
		default:
			ids = append(ids, byValue[ref]...)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	n, err := p.rdb.HDel(ctx, keys.items, ids...).Result()
	if err != nil {
		return 0, err
	}
	pipe := p.rdb.TxPipeline()
	for _, id := range ids {
		pipe.ZRem(ctx, keys.ready, id)
		pipe.ZRem(ctx, keys.expires, id)
		pipe.ZRem(ctx, keys.banned, id)
		pipe.HDel(ctx, keys.inuse, id)
		pipe.HDel(ctx, keys.stat, statFields(id)...)
	}
	_, err = pipe.Exec(ctx)
	return int(n), err
}

// Clear removes a pool with its items, counters and config.
func (p *Pools) Clear(ctx context.Context, tenant, site string, k Kind) error {
	keys := keysOf(tenant, site, k)
	// One DEL: the pool's keys share a hash tag. The registry entry goes first, so a
	// pool is never listed without its keys.
	if err := p.rdb.SRem(ctx, registryKey, tenant+"|"+site+"|"+string(k)).Err(); err != nil {
		return err
	}
	return p.rdb.Del(ctx, keys.items, keys.ready, keys.inuse, keys.expires, keys.banned, keys.counters, keys.stat, keys.conf).Err()
}

// checkout takes the best free item, or says how long to wait for one.
var checkoutScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local gone = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
for _, id in ipairs(gone) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('ZREM', KEYS[5], id)
  redis.call('HINCRBY', KEYS[6], 'expired', 1)
end
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
local maxUses = tonumber(ARGV[2])
local cands = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 256)
local pick, best = nil, nil
for _, id in ipairs(cands) do
  local n = tonumber(redis.call('HGET', KEYS[3], id) or '0')
  if maxUses < 0 or n < maxUses then
    if ARGV[4] ~= 'health' then
      pick = id
      break
    end
    local h = tonumber(redis.call('HGET', KEYS[7], id .. '|health') or '1')
    if best == nil or h > best then
      pick, best = id, h
    end
  end
end
if not pick then
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  local nxt = 0
  if #first > 0 then nxt = tonumber(first[2]) end
  redis.call('HINCRBY', KEYS[6], 'waits', 1)
  redis.call('HSET', KEYS[6], 'last_wait_ms', now)
  return {'', redis.call('HLEN', KEYS[1]), nxt}
end
redis.call('HINCRBY', KEYS[3], pick, 1)
local interval = tonumber(ARGV[3])
if interval < 0 then interval = 0 end
redis.call('ZADD', KEYS[2], now + interval, pick)
redis.call('HINCRBY', KEYS[7], pick .. '|uses', 1)
redis.call('HINCRBY', KEYS[6], 'uses', 1)
return {pick, redis.call('HGET', KEYS[1], pick), 0}
`)

// checkout takes an item; with none free it returns a WaitError.
func (p *Pools) checkout(ctx context.Context, tenant, site string, k Kind, cfg Config) (*Resource, error) {
	now := p.now().UnixMilli()
	v, err := checkoutScript.Run(ctx, p.rdb, keysOf(tenant, site, k).script(), now, cfg.MaxUses, cfg.MinInterval.Milliseconds(), cfg.Rotation).Slice()
	if err != nil {
		return nil, fmt.Errorf("pool %s (tenant %s, site %s): %w", k, tenant, site, err)
	}
	if id, _ := v[0].(string); id == "" {
		size, _ := v[1].(int64)
		next, _ := v[2].(int64)
		w := &WaitError{Kind: k, Tenant: tenant, Site: site, Size: int(size)}
		if next > now {
			w.After = time.Duration(next-now) * time.Millisecond
		}
		return nil, w
	}
	var r Resource
	raw, _ := v[1].(string)
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, fmt.Errorf("pool %s (tenant %s, site %s): item %v is unreadable: %w", k, tenant, site, v[0], err)
	}
	return &r, nil
}

// release returns an item with the outcome of its use.
var releaseScript = redis.NewScript(`
local id = ARGV[1]
local now = tonumber(ARGV[2])
local out = ARGV[3]
local n = redis.call('HINCRBY', KEYS[3], id, -1)
if n <= 0 then redis.call('HDEL', KEYS[3], id) end
if redis.call('HEXISTS', KEYS[1], id) == 0 then return 'gone' end
local function health(v)
  local h = tonumber(redis.call('HGET', KEYS[7], id .. '|health') or '1')
  redis.call('HSET', KEYS[7], id .. '|health', tostring(h * 0.8 + v * 0.2))
end
local function ban()
  local bans = redis.call('HINCRBY', KEYS[7], id .. '|bans', 1)
  redis.call('HSET', KEYS[7], id .. '|strikes', 0)
  redis.call('HINCRBY', KEYS[6], 'bans', 1)
  local drop = tonumber(ARGV[6])
  if drop > 0 and bans >= drop then
    redis.call('HDEL', KEYS[1], id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    redis.call('ZREM', KEYS[4], id)
    redis.call('ZREM', KEYS[5], id)
    for _, f in ipairs({'uses', 'ok', 'failures', 'strikes', 'bans', 'throttles', 'health'}) do
      redis.call('HDEL', KEYS[7], id .. '|' .. f)
    end
    redis.call('HINCRBY', KEYS[6], 'dropped', 1)
    return 'dropped'
  end
  local untl = now + tonumber(ARGV[5])
  redis.call('ZADD', KEYS[2], untl, id)
  redis.call('ZADD', KEYS[5], untl, id)
  return 'banned'
end
if out == 'success' then
  redis.call('HSET', KEYS[7], id .. '|strikes', 0)
  redis.call('HINCRBY', KEYS[7], id .. '|ok', 1)
  redis.call('HINCRBY', KEYS[6], 'successes', 1)
  health(1)
  return 'ok'
elseif out == 'failed' then
  health(0)
  redis.call('HINCRBY', KEYS[6], 'failures', 1)
  redis.call('HINCRBY', KEYS[7], id .. '|failures', 1)
  local s = redis.call('HINCRBY', KEYS[7], id .. '|strikes', 1)
  local after = tonumber(ARGV[4])
  if after > 0 and s >= after then return ban() end
  return 'failed'
elseif out == 'banned' then
  health(0)
  return ban()
elseif out == 'throttled' then
  redis.call('HINCRBY', KEYS[7], id .. '|throttles', 1)
  redis.call('HINCRBY', KEYS[6], 'throttles', 1)
  local t = now + tonumber(ARGV[7])
  local cur = tonumber(redis.call('ZSCORE', KEYS[2], id) or '0')
  if t > cur then redis.call('ZADD', KEYS[2], t, id) end
  return 'throttled'
end
return 'released'
`)

// release returns an item with its outcome and reports what the pool did with it
// ("ok", "failed", "banned", "dropped", "throttled", "released" or "gone").
func (p *Pools) release(ctx context.Context, tenant, site string, k Kind, id string, o Outcome, wait time.Duration, cfg Config) (string, error) {
	if o == Banned && cfg.BanAfter < 0 {
		o = Released // this kind is never banned (a user agent)
	}
	if o == Throttled && wait <= 0 {
		wait = time.Second
	}
	return releaseScript.Run(ctx, p.rdb, keysOf(tenant, site, k).script(), id, p.now().UnixMilli(), o.String(),
		cfg.BanAfter, cfg.Cooldown.Milliseconds(), cfg.DropAfter, wait.Milliseconds()).Text()
}

// PoolStats describe one pool.
type PoolStats struct {
	Tenant   string           `json:"tenant"`
	Site     string           `json:"site"`
	Kind     Kind             `json:"kind"`
	Size     int              `json:"size"`   // items in the pool
	Usable   int              `json:"usable"` // not banned (what a target counts)
	Free     int              `json:"free"`   // can be checked out now
	InUse    int              `json:"in_use"` // checked out right now
	Banned   int              `json:"banned"` // cooling down after a ban
	Target   int              `json:"target,omitempty"`
	Config   Config           `json:"config"`
	Counts   map[string]int64 `json:"counts"`             // added, uses, successes, failures, bans, throttles, dropped, expired, waits
	LastWait time.Time        `json:"last_wait,omitzero"` // last check-out that found nothing free
	Items    []ItemStats      `json:"items,omitempty"`
	// Revealed is true when the items carry their values and the signer as stored
	// (Reveal); otherwise both are masked.
	Revealed bool `json:"revealed,omitempty"`
}

// ItemStats describe one item of a pool.
type ItemStats struct {
	Resource
	Uses      int64     `json:"uses"`
	OK        int64     `json:"ok"`
	Failures  int64     `json:"failures"`
	Bans      int64     `json:"bans"`
	Throttles int64     `json:"throttles"`
	Health    float64   `json:"health"` // 0..1, recent successes weigh most
	InUse     int64     `json:"in_use"`
	FreeAt    time.Time `json:"free_at,omitzero"` // resting (interval, throttle, ban) until then
	BannedTil time.Time `json:"banned_until,omitzero"`
}

// Stats reads one pool; with items, every item's counters too, with its value masked
// (Mask): what every list, status and API answer shows.
func (p *Pools) Stats(ctx context.Context, tenant, site string, k Kind, items bool) (*PoolStats, error) {
	return p.stats(ctx, tenant, site, k, items, false)
}

// Reveal reads one pool with every item's value and the signer as stored: for the
// operator who asked to see them (`trawler pool show --reveal`, the console's full
// token with ?reveal=1), never for a listing.
func (p *Pools) Reveal(ctx context.Context, tenant, site string, k Kind) (*PoolStats, error) {
	return p.stats(ctx, tenant, site, k, true, true)
}

func (p *Pools) stats(ctx context.Context, tenant, site string, k Kind, items, reveal bool) (*PoolStats, error) {
	keys := keysOf(tenant, site, k)
	cfg, err := p.Config(ctx, tenant, site, k)
	if err != nil {
		return nil, err
	}
	pipe := p.rdb.Pipeline()
	all := pipe.HGetAll(ctx, keys.items)
	ready := pipe.ZRangeWithScores(ctx, keys.ready, 0, -1)
	inuse := pipe.HGetAll(ctx, keys.inuse)
	banned := pipe.ZRangeWithScores(ctx, keys.banned, 0, -1)
	counters := pipe.HGetAll(ctx, keys.counters)
	stat := pipe.HGetAll(ctx, keys.stat)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	now := p.now()
	nowMS := float64(now.UnixMilli())
	st := &PoolStats{Tenant: tenant, Site: site, Kind: k, Target: cfg.Target, Config: cfg, Counts: map[string]int64{}}
	for name, v := range counters.Val() {
		n, _ := strconv.ParseInt(v, 10, 64)
		if name == "last_wait_ms" {
			st.LastWait = time.UnixMilli(n)
			continue
		}
		st.Counts[name] = n
	}
	readyAt := map[string]float64{}
	for _, z := range ready.Val() {
		readyAt[z.Member.(string)] = z.Score
	}
	bannedTil := map[string]float64{}
	for _, z := range banned.Val() {
		if z.Score > nowMS {
			bannedTil[z.Member.(string)] = z.Score
		}
	}
	use := map[string]int64{}
	for id, v := range inuse.Val() {
		use[id], _ = strconv.ParseInt(v, 10, 64)
	}
	if moved, err := p.moveLeakingIDs(ctx, keys, all.Val(), use); err != nil {
		return nil, err
	} else if moved {
		return p.stats(ctx, tenant, site, k, items, reveal) // read the pool as it is now
	}
	if !reveal {
		st.Config.Signer = crawl.RedactURL(st.Config.Signer)
	}
	st.Revealed = reveal
	sv := stat.Val()
	for id, raw := range all.Val() {
		var r Resource
		if json.Unmarshal([]byte(raw), &r) != nil {
			continue
		}
		if !reveal {
			r = r.masked(k)
		}
		if !r.Expires.IsZero() && !r.Expires.After(now) {
			continue // expired; the next check-out removes it
		}
		st.Size++
		_, isBanned := bannedTil[id]
		if isBanned {
			st.Banned++
		} else {
			st.Usable++
		}
		st.InUse += int(use[id])
		free := readyAt[id] <= nowMS && (cfg.MaxUses < 0 || use[id] < int64(cfg.MaxUses))
		if free {
			st.Free++
		}
		if !items {
			continue
		}
		num := func(f string) int64 { n, _ := strconv.ParseInt(sv[id+"|"+f], 10, 64); return n }
		h := 1.0
		if v, ok := sv[id+"|health"]; ok {
			h, _ = strconv.ParseFloat(v, 64)
		}
		is := ItemStats{Resource: r, Uses: num("uses"), OK: num("ok"), Failures: num("failures"), Bans: num("bans"),
			Throttles: num("throttles"), Health: float64(int(h*1000)) / 1000, InUse: use[id]}
		if readyAt[id] > nowMS {
			is.FreeAt = time.UnixMilli(int64(readyAt[id]))
		}
		if til, ok := bannedTil[id]; ok {
			is.BannedTil = time.UnixMilli(int64(til))
		}
		st.Items = append(st.Items, is)
	}
	sort.Slice(st.Items, func(i, j int) bool { return st.Items[i].ID < st.Items[j].ID })
	return st, nil
}

// Usable lists the ids of a pool's items that are not expired or banned (what a target
// counts), with the pool's target.
func (p *Pools) Usable(ctx context.Context, tenant, site string, k Kind) (ids []string, target int, err error) {
	st, err := p.Stats(ctx, tenant, site, k, true)
	if err != nil {
		return nil, 0, err
	}
	for _, it := range st.Items {
		if it.BannedTil.IsZero() {
			ids = append(ids, it.ID)
		}
	}
	return ids, st.Target, nil
}

// List describes every pool, or those of one tenant, sorted by tenant, site and kind.
func (p *Pools) List(ctx context.Context, tenant string) ([]*PoolStats, error) {
	names, err := p.rdb.SMembers(ctx, registryKey).Result()
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*PoolStats
	for _, n := range names {
		parts := strings.SplitN(n, "|", 3)
		if len(parts) != 3 || (tenant != "" && parts[0] != tenant) {
			continue
		}
		st, err := p.Stats(ctx, parts[0], parts[1], Kind(parts[2]), false)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
