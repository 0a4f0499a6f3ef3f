package external

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/storage"
)

// SinkPrefix starts the `store:` names of pool sinks: pool:cookie, pool:device_id,
// pool:proxy, pool:user_agent.
const SinkPrefix = "pool:"

// Sinks returns a sink per pooled kind, so a farming chain's step can store into a pool.
func (p *Pools) Sinks() []storage.Sink {
	out := make([]storage.Sink, len(Pooled))
	for i, k := range Pooled {
		out[i] = &poolSink{pools: p, kind: k}
	}
	return out
}

// poolSink adds items to the pool of their tenant and site: the step's pool site when
// the write's context names one (WithPoolSite), else the site part of the item's biz. An item's `value` field is the resource; `expires` (RFC 3339) its expiry;
// its other text fields become attributes (a cookie's user_agent and device_id bind them
// to it). The item key is the resource id, so storing a fresh login of the same account
// replaces its old cookie.
type poolSink struct {
	pools *Pools
	kind  Kind
}

func (s *poolSink) Name() string { return SinkPrefix + string(s.kind) }

func (s *poolSink) Write(ctx context.Context, items []crawl.Item) error {
	type pool struct{ tenant, site string }
	groups := map[pool][]Resource{}
	for _, it := range items {
		r, ok := resourceOf(it)
		if !ok {
			s.pools.log.Warn("item has no `value` field to put in a pool; skipped", "pool", s.Name(), "key", it.Key, "biz", it.Biz)
			continue
		}
		site, ok := ctx.Value(poolSiteKey{}).(string)
		if !ok {
			site, _, _ = strings.Cut(it.Biz, ".")
		}
		g := pool{it.Tenant, site}
		groups[g] = append(groups[g], r)
	}
	for g, rs := range groups {
		if err := s.pools.Add(ctx, g.tenant, g.site, s.kind, rs...); err != nil {
			return fmt.Errorf("add %d items to pool %s (tenant %s, site %s): %w", len(rs), s.kind, g.tenant, g.site, err)
		}
	}
	return nil
}

type poolSiteKey struct{}

// WithPoolSite makes the pool sinks written under ctx add their items to site's pools
// (a step's `pool_site:`), whatever their biz.
func WithPoolSite(ctx context.Context, site string) context.Context {
	return context.WithValue(ctx, poolSiteKey{}, site)
}

func resourceOf(it crawl.Item) (Resource, bool) {
	v, ok := it.Data["value"].(string)
	if !ok || v == "" {
		return Resource{}, false
	}
	r := Resource{ID: it.Key, Value: v, Attrs: map[string]string{"run_id": it.RunID}}
	for k, f := range it.Data {
		switch k {
		case "value":
		case "expires":
			if t, err := time.Parse(time.RFC3339, fmt.Sprint(f)); err == nil {
				r.Expires = t
			}
		default:
			if str, ok := f.(string); ok && str != "" {
				r.Attrs[k] = str
			}
		}
	}
	return r, true
}

// Count reads back how many items of a run this kind's pools hold.
func (s *poolSink) Count(ctx context.Context, runID string) (int, error) {
	names, err := s.pools.rdb.SMembers(ctx, registryKey).Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		parts := strings.SplitN(name, "|", 3)
		if len(parts) != 3 || Kind(parts[2]) != s.kind {
			continue
		}
		all, err := s.pools.rdb.HGetAll(ctx, keysOf(parts[0], parts[1], s.kind).items).Result()
		if err != nil {
			return 0, err
		}
		for _, raw := range all {
			var r Resource
			if json.Unmarshal([]byte(raw), &r) == nil && r.Attrs["run_id"] == runID {
				n++
			}
		}
	}
	return n, nil
}

func (s *poolSink) Close() error { return nil }

// PoolView is what a step's fetcher tells a farming task about its site's pools.
type PoolView interface {
	// PoolUsable lists the ids of the usable items of the pool of kind k, with its target.
	PoolUsable(ctx context.Context, k Kind) (ids []string, target int, err error)
}

// Wanted is how many items a farming task should add to its site's pool of kind k: the
// pool's target minus its usable items, at most limit. Without a target it is limit. A
// farming step whose pool is at its target gets 0 and stops early.
func Wanted(ctx context.Context, env *crawl.Env, k Kind, limit int) (int, error) {
	missing, err := Missing(ctx, env, k, make([]string, limit))
	return len(missing), err
}

// Missing picks, of the resource ids a farming task could obtain (say one session per
// account), those not in its site's pool of kind k yet, no more than the pool's target
// still lacks. Without a target it picks every candidate not in the pool.
func Missing(ctx context.Context, env *crawl.Env, k Kind, candidates []string) ([]string, error) {
	v, ok := env.Fetcher.(PoolView)
	if !ok {
		return candidates, nil
	}
	ids, target, err := v.PoolUsable(ctx, k)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, id := range ids {
		have[id] = true
	}
	var out []string
	for _, c := range candidates {
		if target > 0 && len(ids)+len(out) >= target {
			break
		}
		if c == "" || !have[c] {
			out = append(out, c)
		}
	}
	return out, nil
}

// SinkNames lists the pool sinks' names, as chain files write them.
func SinkNames() []string {
	out := make([]string, len(Pooled))
	for i, k := range Pooled {
		out[i] = SinkPrefix + string(k)
	}
	return out
}
