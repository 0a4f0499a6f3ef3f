package external

import (
	"fmt"
	"strconv"
	"time"
)

// Config is how a pool treats its items. Zero fields take the kind's default
// (DefaultConfig); -1 turns a limit off. A pool's config is kept in Redis next to it,
// so every worker applies the same rules.
type Config struct {
	// Target is the size farming fills the pool to; a farming step stops early once
	// the pool holds that many usable items. 0: no target.
	Target int `json:"target,omitempty"`
	// MaxUses bounds the requests one item serves at once (check-out/return), so one
	// cookie is not used by too many workers together. -1: unlimited.
	MaxUses int `json:"max_uses,omitempty"`
	// MinInterval is the least time between two uses of one item: the rate per cookie
	// the site tolerates. -1: none.
	MinInterval time.Duration `json:"min_interval,omitempty"`
	// BanAfter strikes in a row (failed requests) ban an item; a site's refusal bans it
	// at once. -1: never.
	BanAfter int `json:"ban_after,omitempty"`
	// Cooldown is how long a banned item rests before it is tried again.
	Cooldown time.Duration `json:"cooldown,omitempty"`
	// DropAfter bans remove an item from the pool for good. -1: never.
	DropAfter int `json:"drop_after,omitempty"`
	// TTL is how long an added item lives when it brings no expiry of its own. -1: forever.
	TTL time.Duration `json:"ttl,omitempty"`
	// Rotation picks among free items: "lru" (least recently used first) or "health"
	// (best health score first, for proxies).
	Rotation string `json:"rotation,omitempty"`
	// Signer, for the sign resource only: the name of a registered signer or the URL of
	// an HTTP signing service to use instead of the one the site registered.
	Signer string `json:"signer,omitempty"`
}

// Settings reads the config as a person would: limits that are off say so instead of
// showing -1.
func (c Config) Settings() string {
	count := func(n int, off string) string {
		if n < 0 {
			return off
		}
		return fmt.Sprint(n)
	}
	dur := func(d time.Duration, off string) string {
		if d < 0 {
			return off
		}
		return d.String()
	}
	return fmt.Sprintf("max_uses %s, min_interval %s, ban_after %s, cooldown %s, drop_after %s, ttl %s, rotation %s",
		count(c.MaxUses, "unlimited"), dur(c.MinInterval, "none"), count(c.BanAfter, "never"), c.Cooldown,
		count(c.DropAfter, "never"), dur(c.TTL, "forever"), c.Rotation)
}

// Rotation policies.
const (
	RotateLRU    = "lru"
	RotateHealth = "health"
)

// DefaultConfig is the config of a kind's pools before anyone changes it.
func DefaultConfig(k Kind) Config {
	switch k {
	case Proxy:
		return Config{MaxUses: -1, MinInterval: -1, BanAfter: 3, Cooldown: 5 * time.Minute, DropAfter: -1, TTL: -1, Rotation: RotateHealth}
	case Cookie:
		return Config{MaxUses: 2, MinInterval: 300 * time.Millisecond, BanAfter: 1, Cooldown: 10 * time.Minute, DropAfter: 2, TTL: -1, Rotation: RotateLRU}
	case DeviceID:
		return Config{MaxUses: 4, MinInterval: -1, BanAfter: 1, Cooldown: 10 * time.Minute, DropAfter: 2, TTL: -1, Rotation: RotateLRU}
	}
	return Config{MaxUses: -1, MinInterval: -1, BanAfter: -1, Cooldown: time.Minute, DropAfter: -1, TTL: -1, Rotation: RotateLRU}
}

// merge returns c with the non-zero fields of o applied.
func (c Config) merge(o Config) Config {
	if o.Target != 0 {
		c.Target = o.Target
	}
	if o.MaxUses != 0 {
		c.MaxUses = o.MaxUses
	}
	if o.MinInterval != 0 {
		c.MinInterval = o.MinInterval
	}
	if o.BanAfter != 0 {
		c.BanAfter = o.BanAfter
	}
	if o.Cooldown != 0 {
		c.Cooldown = o.Cooldown
	}
	if o.DropAfter != 0 {
		c.DropAfter = o.DropAfter
	}
	if o.TTL != 0 {
		c.TTL = o.TTL
	}
	if o.Rotation != "" {
		c.Rotation = o.Rotation
	}
	if o.Signer != "" {
		c.Signer = o.Signer
	}
	return c
}

// Check names the first invalid field.
func (c Config) Check() error {
	if c.Rotation != "" && c.Rotation != RotateLRU && c.Rotation != RotateHealth {
		return fmt.Errorf("rotation %q: use %s or %s", c.Rotation, RotateLRU, RotateHealth)
	}
	if c.Target < 0 {
		return fmt.Errorf("target %d: use 0 (none) or more", c.Target)
	}
	if c.Cooldown < 0 {
		return fmt.Errorf("cooldown %s: use a positive duration", c.Cooldown)
	}
	return nil
}

// fields encodes the non-zero fields for a Redis hash.
func (c Config) fields() map[string]any {
	m := map[string]any{}
	put := func(name string, v int64) {
		if v != 0 {
			m[name] = v
		}
	}
	ms := func(d time.Duration) int64 { // -1 (off) stays -1
		if d < 0 {
			return -1
		}
		return max(d.Milliseconds(), 1)
	}
	put("target", int64(c.Target))
	put("max_uses", int64(c.MaxUses))
	put("ban_after", int64(c.BanAfter))
	put("drop_after", int64(c.DropAfter))
	if c.MinInterval != 0 {
		put("min_interval_ms", ms(c.MinInterval))
	}
	if c.Cooldown != 0 {
		put("cooldown_ms", ms(c.Cooldown))
	}
	if c.TTL != 0 {
		put("ttl_ms", ms(c.TTL))
	}
	if c.Rotation != "" {
		m["rotation"] = c.Rotation
	}
	if c.Signer != "" {
		m["signer"] = c.Signer
	}
	return m
}

func configFrom(h map[string]string) Config {
	num := func(name string) int64 { n, _ := strconv.ParseInt(h[name], 10, 64); return n }
	ms := func(name string) time.Duration {
		n := num(name)
		if n < 0 {
			return -1
		}
		return time.Duration(n) * time.Millisecond
	}
	return Config{
		Target: int(num("target")), MaxUses: int(num("max_uses")), MinInterval: ms("min_interval_ms"),
		BanAfter: int(num("ban_after")), Cooldown: ms("cooldown_ms"), DropAfter: int(num("drop_after")),
		TTL: ms("ttl_ms"), Rotation: h["rotation"], Signer: h["signer"],
	}
}
