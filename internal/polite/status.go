package polite

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Host is one budget as `trawler status` and the console show it.
type Host struct {
	Key         string        `json:"host"`
	Concurrency int           `json:"concurrency"`
	Interval    time.Duration `json:"interval_ns,omitempty"` // least time between starts
	Source      string        `json:"source"`                // declared, task, robots, autothrottle, default
	Rate        float64       `json:"rate"`                  // starts a second, over the last ~10 s
	InFlight    int64         `json:"in_flight"`
	PausedUntil time.Time     `json:"paused_until,omitzero"`
	Reason      string        `json:"reason,omitempty"` // why it is paused
	LastBusy    time.Time     `json:"last_busy,omitzero"`
	Busy        string        `json:"busy,omitempty"` // what the last 429/503 (or run of failures) said
	SeenAt      time.Time     `json:"seen_at"`
}

// Hosts lists the budgets used most recently, newest first, at most limit of them.
func Hosts(ctx context.Context, rdb redis.UniversalClient, limit int) ([]Host, error) {
	keys, err := rdb.ZRevRangeWithScores(ctx, hostsKey, 0, int64(limit)-1).Result()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []Host
	for _, z := range keys {
		key, _ := z.Member.(string)
		slots, state := keysOf(key)
		st, err := rdb.HGetAll(ctx, state).Result()
		if err != nil {
			return nil, err
		}
		if len(st) == 0 {
			continue // expired: unused for a day
		}
		n, err := rdb.ZCount(ctx, slots, strconv.FormatInt(now.UnixMicro(), 10), "+inf").Result()
		if err != nil {
			return nil, err
		}
		h := Host{Key: key, InFlight: n, Source: st["src"], Reason: st["reason"], Busy: st["busy"], SeenAt: time.UnixMilli(int64(z.Score)).UTC()}
		h.Concurrency, _ = strconv.Atoi(st["conc"])
		if us, err := strconv.ParseFloat(st["ival"], 64); err == nil {
			h.Interval = time.Duration(us) * time.Microsecond
		}
		rate, _ := strconv.ParseFloat(st["rate"], 64)
		at := micros(st["rate_at"])
		h.Rate = rate * math.Exp(-now.Sub(at).Seconds()/10)
		if p := micros(st["paused"]); p.After(now) {
			h.PausedUntil = p.UTC()
		} else {
			h.Reason = ""
		}
		if b := micros(st["busy_at"]); !b.IsZero() {
			h.LastBusy = b.UTC()
		}
		out = append(out, h)
	}
	return out, nil
}

func micros(s string) time.Time {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(int64(f))
}
