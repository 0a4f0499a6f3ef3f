package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
)

// statusKey is the Redis hash of every worker's subscriptions, by subscription id, which
// `trawler status` reads.
const statusKey = "trawler:stream:subs"

// stale is how old a record may be before status leaves it out (its worker died
// without removing it).
const stale = 10 * time.Minute

// Status is one subscription as `trawler status` shows it.
type Status struct {
	Sub      string    `json:"sub"`
	Chain    string    `json:"chain"`
	Run      string    `json:"run"`
	Tenant   string    `json:"tenant"`
	Step     string    `json:"step"`
	Source   string    `json:"source"`
	Keywords []string  `json:"keywords,omitempty"`
	Received int       `json:"received"`
	Limit    int       `json:"limit,omitempty"` // 0: none
	Conn     string    `json:"conn"`            // the upstream connection it rides on
	Query    []string  `json:"query,omitempty"` // that connection's keywords (none: everything)
	Subs     int       `json:"subs"`            // subscriptions riding that connection
	Reading  bool      `json:"reading"`         // a window is reading it now
	Error    string    `json:"error,omitempty"` // the connection's last error
	Updated  time.Time `json:"updated"`
}

// recorder writes subscription records to Redis off the hub's lock.
type recorder struct {
	rdb redis.UniversalClient
	ch  chan func(context.Context)
}

// Record makes the hub keep its subscriptions in rdb for `trawler status`.
func (h *Hub) Record(rdb redis.UniversalClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rec != nil || rdb == nil {
		return
	}
	r := &recorder{rdb: rdb, ch: make(chan func(context.Context), 1024)}
	h.rec = r
	go func() {
		for f := range r.ch {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			f(ctx)
			cancel()
		}
	}()
}

func (r *recorder) do(f func(context.Context)) {
	select {
	case r.ch <- f:
	default: // Redis is slow: status lags rather than the stream
	}
}

func (r *recorder) forget(id string) {
	r.do(func(ctx context.Context) { r.rdb.HDel(ctx, statusKey, id) })
}

// recordLocked snapshots a subscription for status.
func (h *Hub) recordLocked(s *Sub) {
	if h.rec == nil {
		return
	}
	c := s.conn
	st := Status{Sub: s.id, Chain: s.info.Chain, Run: s.info.Run, Tenant: s.info.Tenant, Step: s.info.Step,
		Source: s.src.URL, Keywords: s.filter.terms(), Received: s.received, Limit: s.info.Limit,
		Conn: c.id, Subs: len(c.subs), Reading: s.attached, Error: c.err, Updated: time.Now().UTC()}
	st.Query, _ = c.union()
	b, err := json.Marshal(st)
	if err != nil {
		return
	}
	h.rec.do(func(ctx context.Context) { h.rec.rdb.HSet(ctx, statusKey, s.id, b) })
}

// Subscriptions reads every worker's current subscriptions, by tenant, chain and step.
func Subscriptions(ctx context.Context, rdb redis.UniversalClient) ([]Status, error) {
	all, err := rdb.HGetAll(ctx, statusKey).Result()
	if err != nil {
		return nil, fmt.Errorf("read stream subscriptions from Redis: %w", err)
	}
	var out []Status
	for id, raw := range all {
		var st Status
		if json.Unmarshal([]byte(raw), &st) != nil || time.Since(st.Updated) > stale {
			rdb.HDel(ctx, statusKey, id)
			continue
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		if a.Chain != b.Chain {
			return a.Chain < b.Chain
		}
		return a.Sub < b.Sub
	})
	return out, nil
}
