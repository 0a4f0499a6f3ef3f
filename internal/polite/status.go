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

// Hosts lists the budgets used most recently, newest first, at most limit of them (0:
// every budget the index keeps, up to maxHosts). It reads them in one round trip, so a
// console that polls it costs Redis one pipeline, not two calls per host.
func Hosts(ctx context.Context, rdb redis.UniversalClient, limit int) ([]Host, error) {
	keys, err := rdb.ZRevRangeWithScores(ctx, hostsKey, 0, int64(limit)-1).Result()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	pipe := rdb.Pipeline()
	states := make([]*redis.MapStringStringCmd, len(keys))
	inFlight := make([]*redis.IntCmd, len(keys))
	for i, z := range keys {
		key, _ := z.Member.(string)
		slots, state := keysOf(key)
		states[i] = pipe.HGetAll(ctx, state)
		inFlight[i] = pipe.ZCount(ctx, slots, strconv.FormatInt(now.UnixMicro(), 10), "+inf")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var out []Host
	for i, z := range keys {
		st := states[i].Val()
		if len(st) == 0 {
			continue // expired: unused for a day
		}
		key, _ := z.Member.(string)
		h := Host{Key: key, InFlight: inFlight[i].Val(), Source: st["src"], Reason: st["reason"], Busy: st["busy"], SeenAt: time.UnixMilli(int64(z.Score)).UTC()}
		h.Concurrency, _ = strconv.Atoi(st["conc"])
		if us, err := strconv.ParseFloat(st["ival"], 64); err == nil {
			h.Interval = time.Duration(us) * time.Microsecond
		}
		rate, _ := strconv.ParseFloat(st["rate"], 64)
		at := micros(st["rate_at"])
		// To 0.01/s (36/h): the count decays without end, and a host idle for an hour
		// has started nothing, not 1e-150 requests a second.
		h.Rate = math.Round(rate*math.Exp(-now.Sub(at).Seconds()/10)*100) / 100
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
