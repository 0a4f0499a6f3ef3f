package external

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
)

// Pool items are secrets: a cookie is a logged-in session, a proxy URL may carry its
// password, a device id is what a site trusts a client by. So an item's id is never its
// value: it is the name it was given (a farming item's key, `pool add --name`) or a
// short hash of the value, and everything that lists, counts or logs items shows the id
// and a masked value (Mask). Only Reveal hands the values out, for the operator who
// asks for them.

// ItemID is the id of an item added without a name: a short hash of its value. It is
// stable, so adding the same value again replaces the item, and `pool remove` can find
// it from the value too.
func ItemID(value string) string {
	sum := sha256.Sum256([]byte(value))
	return "h-" + hex.EncodeToString(sum[:6])
}

// leaks reports whether an id gives its item's value away: items stored before ids were
// hashes used the value itself, and a farming task may key an item by its value
// (demo:device:<id>). Very short values are left alone, since a name may contain them by
// chance.
func leaks(id, value string) bool {
	return value != "" && (id == value || (len(value) >= 6 && strings.Contains(id, value)))
}

// idFor is the id an item is stored under.
func idFor(r Resource) string {
	if r.ID == "" || leaks(r.ID, r.Value) {
		return ItemID(r.Value)
	}
	return r.ID
}

// shownID is an item's id as it may be printed, also for an item stored under its value
// that has not been moved to its hashed id yet.
func (r Resource) shownID() string {
	if leaks(r.ID, r.Value) {
		return ItemID(r.Value)
	}
	return r.ID
}

// label names an item in messages: its id, and for a proxy its address with the
// password masked, which says more to the reader than a hash.
func (r Resource) label(k Kind) string {
	if k == Proxy {
		return r.shownID() + " (" + Mask(k, r.Value) + ")"
	}
	return r.shownID()
}

// Mask is how a value of kind k is shown to anyone who did not ask to see it: a proxy
// with its password masked (http://bob:***@host:3129), a cookie as its names and length
// (sid=…; theme=… (52 bytes)), a device id or any other token as a short prefix and its
// length. User agents are public strings and are shown whole.
func Mask(k Kind, value string) string {
	if value == "" {
		return ""
	}
	switch k {
	case UserAgent:
		return value
	case Proxy:
		if strings.Contains(value, "://") {
			return crawl.RedactURL(value)
		}
		// host:port or user:pw@host:port without a scheme: mask it as a URL would be.
		return strings.TrimPrefix(crawl.RedactURL("x://"+value), "x://")
	case Cookie:
		var names []string
		for part := range strings.SplitSeq(value, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if name != "" {
				names = append(names, name+"=…")
			}
		}
		return fmt.Sprintf("%s (%d bytes)", strings.Join(names, "; "), len(value))
	}
	return maskToken(value)
}

// maskToken keeps a prefix of a long token (enough to tell two apart, far too little to
// use one) and the length.
func maskToken(v string) string {
	if len(v) < 16 {
		return fmt.Sprintf("…(%d bytes)", len(v))
	}
	return fmt.Sprintf("%s…(%d bytes)", v[:4], len(v))
}

// secretAttr reports whether an item's attribute holds a secret: the device id a cookie
// is bound to, or anything named like a credential.
func secretAttr(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"device_id", "token", "secret", "password", "passwd", "key", "cookie", "session", "auth"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// masked is r as it may be listed: its id as shown, its value masked and its secret
// attributes masked.
func (r Resource) masked(k Kind) Resource {
	r.ID = r.shownID()
	r.Value = Mask(k, r.Value)
	if len(r.Attrs) > 0 {
		attrs := make(map[string]string, len(r.Attrs))
		for name, v := range r.Attrs {
			if secretAttr(name) {
				v = maskToken(v)
			}
			attrs[name] = v
		}
		r.Attrs = attrs
	}
	return r
}

// moveScript moves items from an id that gives their value away to their hashed id,
// with their schedule, ban, expiry and counters. ARGV holds quadruples (old id, new id,
// the item as read, the item under its new id); an item that changed since it was read
// or is checked out right now stays where it is (its return names the old id), and a
// later read moves it. When the new id exists already (the value was added again), the
// old copy is dropped.
var moveScript = redis.NewScript(`
local moved = 0
for i = 1, #ARGV, 4 do
  local old, new = ARGV[i], ARGV[i + 1]
  local busy = tonumber(redis.call('HGET', KEYS[3], old) or '0') > 0
  if not busy and redis.call('HGET', KEYS[1], old) == ARGV[i + 2] then
    local fresh = redis.call('HEXISTS', KEYS[1], new) == 0
    redis.call('HDEL', KEYS[1], old)
    redis.call('HDEL', KEYS[3], old)
    if fresh then redis.call('HSET', KEYS[1], new, ARGV[i + 3]) end
    for _, z in ipairs({2, 4, 5}) do
      local score = redis.call('ZSCORE', KEYS[z], old)
      redis.call('ZREM', KEYS[z], old)
      if score and fresh then redis.call('ZADD', KEYS[z], score, new) end
    end
    for _, f in ipairs({'uses', 'ok', 'failures', 'strikes', 'bans', 'throttles', 'health'}) do
      local v = redis.call('HGET', KEYS[7], old .. '|' .. f)
      redis.call('HDEL', KEYS[7], old .. '|' .. f)
      if v and fresh then redis.call('HSET', KEYS[7], new .. '|' .. f, v) end
    end
    moved = moved + 1
  end
end
return moved
`)

// moveLeakingIDs moves the items of a pool (as read: id → JSON) whose id gives their
// value away to their hashed id, so pools filled before ids were hashes keep working
// and stop showing their secrets. It reports whether any moved.
func (p *Pools) moveLeakingIDs(ctx context.Context, keys poolKeys, items map[string]string, inUse map[string]int64) (bool, error) {
	var args []any
	for id, raw := range items {
		var r Resource
		if json.Unmarshal([]byte(raw), &r) != nil || !leaks(id, r.Value) || inUse[id] > 0 {
			continue
		}
		r.ID = ItemID(r.Value)
		b, _ := json.Marshal(r)
		args = append(args, id, r.ID, raw, string(b))
	}
	if len(args) == 0 {
		return false, nil
	}
	n, err := moveScript.Run(ctx, p.rdb, keys.script(), args...).Int()
	if err != nil {
		return false, fmt.Errorf("move pool items to ids that hide their values: %w", err)
	}
	if n > 0 {
		p.log.Info("pool items moved from ids that were their values to hashed ids", "items", n, "pool", keys.items)
	}
	return n > 0, nil
}
