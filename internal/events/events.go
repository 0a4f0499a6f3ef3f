// Package events is Trawler's one event model: what happened to a run or a chain (a
// run started, finished, failed, was paused or resumed, broke an expectation; a
// dependency is down, a backlog or a failure rate crossed its threshold, a budget ran
// out), kept in one Redis stream and delivered from there to Kafka and webhooks.
//
// Anything that knows something happened calls Emit: the CLI, the console, an
// activity, the watcher. Emit only appends to the stream `trawler:events` (capped at
// MaxLen entries), so it costs one Redis round trip and never waits for a receiver. A
// Deliverer reads the stream through a consumer group and sends each event to the
// Kafka topic `trawler.events` and to the webhooks configured for its tenant or chain.
package events

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
)

// Event types. A type ending in _resolved says the condition of the type before it is
// over (the value is back under its threshold, the dependency answers again).
const (
	RunStarted          = "run_started"
	RunFinished         = "run_finished" // Detail: outcome, status, pages, items, failed
	RunFailed           = "run_failed"   // Detail: outcome (failed, canceled)
	RunPaused           = "run_paused"
	RunResumed          = "run_resumed"
	ExpectationBroken   = "expectation_broken" // Detail: violations
	Outage              = "outage"             // Detail: dependency, since, cause, waiting
	OutageResolved      = "outage_resolved"
	Backlog             = "backlog" // Detail: value, threshold
	BacklogResolved     = "backlog_resolved"
	FailureRate         = "failure_rate" // Detail: value, threshold
	FailureRateResolved = "failure_rate_resolved"
	QuotaExhausted      = "quota_exhausted"
)

// Types lists every event type, the constants above: the chain file's loader checks a
// webhook's `events:` against the same list.
var Types = crawl.EventTypes

// Stream is the Redis stream every event is appended to; DeadStream keeps the webhook
// deliveries that failed every attempt.
const (
	Stream     = "trawler:events"
	DeadStream = "trawler:events:dead"
	// MaxLen caps Stream (approximately: Redis trims whole nodes); the oldest go first.
	MaxLen = 100_000
	// MaxDead caps DeadStream.
	MaxDead = 10_000
)

// Event is one thing that happened. ID is the stream entry id, set by Emit: it orders
// events and lets a receiver drop one delivered twice.
type Event struct {
	ID     string         `json:"id"`
	Type   string         `json:"type"`
	At     time.Time      `json:"at"`
	Tenant string         `json:"tenant"`
	Chain  string         `json:"chain,omitempty"`
	RunID  string         `json:"run_id,omitempty"`
	Step   string         `json:"step,omitempty"`
	By     string         `json:"by,omitempty"` // who did it: a principal for pause/resume, else empty
	Detail map[string]any `json:"detail,omitempty"`
}

// Emit appends e to the event stream and returns it as stored (with its ID, time and
// tenant filled in). Strings in Detail pass through crawl.RedactText, so an error
// quoting a URL with a password stores it masked.
func Emit(ctx context.Context, rdb redis.UniversalClient, e Event) (Event, error) {
	if !slices.Contains(Types, e.Type) {
		return e, fmt.Errorf("event type %q is not one of %s", e.Type, strings.Join(Types, ", "))
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	e.At = e.At.UTC()
	e.Tenant = cmp.Or(e.Tenant, crawl.DefaultTenant)
	for k, v := range e.Detail {
		if s, ok := v.(string); ok {
			e.Detail[k] = crawl.RedactText(s)
		}
	}
	e.ID = ""
	body, err := json.Marshal(e)
	if err != nil {
		return e, fmt.Errorf("encode %s event: %w", e.Type, err)
	}
	id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: Stream, MaxLen: MaxLen, Approx: true,
		Values: []any{"event", body}}).Result()
	if err != nil {
		return e, fmt.Errorf("append %s event to Redis stream %s: %w", e.Type, Stream, err)
	}
	e.ID = id
	return e, nil
}

// decode reads an event from a stream entry.
func decode(m redis.XMessage) (Event, error) {
	var e Event
	s, _ := m.Values["event"].(string)
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return e, fmt.Errorf("event %s in %s: %w", m.ID, Stream, err)
	}
	e.ID = m.ID
	return e, nil
}

// Filter picks events: of one tenant, of some types; empty fields pick all.
type Filter struct {
	Tenant string
	Types  []string
}

func (f Filter) match(e Event) bool {
	return (f.Tenant == "" || e.Tenant == f.Tenant) && (len(f.Types) == 0 || slices.Contains(f.Types, e.Type))
}

// Last returns the newest n events that f picks, oldest first, looking at no more
// than the newest 10×n+1000 entries of the stream.
func Last(ctx context.Context, rdb redis.UniversalClient, f Filter, n int) ([]Event, error) {
	msgs, err := rdb.XRevRangeN(ctx, Stream, "+", "-", int64(10*n+1000)).Result()
	if err != nil {
		return nil, fmt.Errorf("read Redis stream %s: %w", Stream, err)
	}
	var out []Event
	for _, m := range msgs {
		e, err := decode(m)
		if err != nil || !f.match(e) {
			continue
		}
		out = append(out, e)
		if len(out) == n {
			break
		}
	}
	slices.Reverse(out)
	return out, nil
}

// Follow calls fn with every event f picks that is appended after the entry id after
// ("$": from now on), until ctx ends or fn returns an error.
func Follow(ctx context.Context, rdb redis.UniversalClient, f Filter, after string, fn func(Event) error) error {
	if after == "" {
		after = "$"
	}
	for {
		// Polled, not blocking: the embedded Redis of `trawler dev` serves no
		// blocking reads.
		res, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{Stream, after}, Block: -1, Count: 100}).Result()
		if ctx.Err() != nil {
			return nil
		}
		if err == redis.Nil || (err == nil && len(res) == 0) {
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("follow Redis stream %s: %w", Stream, err)
		}
		for _, s := range res {
			for _, m := range s.Messages {
				after = m.ID
				e, err := decode(m)
				if err != nil || !f.match(e) {
					continue
				}
				if err := fn(e); err != nil {
					return err
				}
			}
		}
	}
}
