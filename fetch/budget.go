package fetch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// Budget is what one request's host is held to, and what shares it.
type Budget struct {
	// Key is what shares the budget: a host (scheme://host:port), "domain:example.com"
	// or "ip:192.0.2.1" (crawl.Politeness.Group).
	Key string
	// Concurrency is the most requests in flight at once.
	Concurrency int
	// Interval is the least time between two requests starting (from a rate, a delay,
	// robots.txt or AutoThrottle); Jitter adds up to that much more, at random.
	Interval time.Duration
	Jitter   time.Duration
	// Source says where the limit comes from: declared, task, robots, autothrottle or
	// default (for status).
	Source string
	// Lease is the longest a request may hold a slot: a slot a dead worker held comes
	// back after it.
	Lease time.Duration
	// PauseWait is the longest a request waits in-process for a pause to end; a longer
	// pause holds it back at once (crawl.HeldError), so the engine runs it again after.
	PauseWait time.Duration
	// Urgent requests (see Urgent) take a slot that comes free before the requests of
	// the same process that are not: the next page of a paged list goes before the
	// detail pages the list led to. A request yields to urgent ones for at most
	// UrgentYield, so a step whose pages are all urgent (a site crawl) starves nothing.
	Urgent bool

	floor time.Duration // Interval before AutoThrottle: the least it may set
}

// UrgentYield is the longest a request lets urgent requests go first (Budget.Urgent).
const UrgentYield = time.Second

// Budgets share the hosts' budgets between requests: those of one worker process
// (LocalBudgets), or of every worker of a fleet (internal/polite, in Redis).
type Budgets interface {
	// Take waits for a slot of b and for its turn to start, and returns the function
	// that gives the slot back. It fails with a *crawl.HeldError when the host is
	// paused for longer than b.PauseWait or no slot or turn comes before ctx's deadline, and with a
	// crawl.DependencyError when the budgets cannot be reached.
	Take(ctx context.Context, b Budget) (release func(), err error)
	// Pause stops every request to key from starting before until, for reason. A later
	// pause extends an earlier one, never shortens it.
	Pause(ctx context.Context, key string, until time.Time, reason string) error
}

// LocalBudgets are budgets shared by the requests of one process: the budgets of a
// worker without Redis (and of `trawler try`).
func LocalBudgets() Budgets {
	return &localBudgets{hosts: map[string]*localHost{}, lastSweep: time.Now()}
}

type localBudgets struct {
	mu        sync.Mutex
	hosts     map[string]*localHost
	lastSweep time.Time
}

type localHost struct {
	refs     int // guarded by localBudgets.mu
	lastUsed time.Time

	mu     sync.Mutex
	used   int
	urgent int           // urgent requests waiting for a slot
	wake   chan struct{} // closed and replaced whenever a slot frees
	next   time.Time     // the earliest the next request may start
	until  time.Time     // paused until
	reason string
}

func (l *localBudgets) host(key string) *localHost {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > sweepEvery {
		l.lastSweep = now
		for k, h := range l.hosts {
			if h.refs == 0 && now.Sub(h.lastUsed) > hostIdle {
				delete(l.hosts, k)
			}
		}
	}
	h := l.hosts[key]
	if h == nil {
		h = &localHost{wake: make(chan struct{})}
		l.hosts[key] = h
	}
	h.refs++
	h.lastUsed = now
	return h
}

func (l *localBudgets) done(h *localHost) {
	l.mu.Lock()
	h.refs--
	h.lastUsed = time.Now()
	l.mu.Unlock()
}

func (l *localBudgets) Take(ctx context.Context, b Budget) (func(), error) {
	h := l.host(b.Key)
	defer l.done(h)
	deadline, hasDeadline := ctx.Deadline()
	yieldUntil := time.Now().Add(UrgentYield)
	waits := false // counted in h.urgent
	defer func() {
		if waits {
			h.mu.Lock()
			h.stopWaiting()
			h.mu.Unlock()
		}
	}()
	for {
		h.mu.Lock()
		now := time.Now()
		if now.Before(h.until) {
			until, reason := h.until, h.reason
			h.mu.Unlock()
			if until.Sub(now) > b.PauseWait || hasDeadline && deadline.Before(until) {
				return nil, &crawl.HeldError{Host: b.Key, Wait: until.Sub(now), Reason: reason}
			}
			if err := Sleep(ctx, until.Sub(now)); err != nil {
				return nil, err
			}
			continue
		}
		if h.used >= b.Concurrency || !b.Urgent && h.urgent > 0 && now.Before(yieldUntil) {
			if b.Urgent && !waits {
				waits = true
				h.urgent++
			}
			wake := h.wake
			var yielded <-chan time.Time // when it stops yielding to urgent requests
			if h.used < b.Concurrency {
				yielded = time.After(time.Until(yieldUntil))
			}
			h.mu.Unlock()
			select {
			case <-wake:
				continue
			case <-yielded:
				continue
			case <-ctx.Done():
				return nil, b.Ended(ctx, fmt.Sprintf("no slot came free before the input's deadline (%d at a time)", b.Concurrency))
			}
		}
		start := now
		if h.next.After(start) {
			start = h.next
		}
		if hasDeadline && deadline.Before(start) {
			h.mu.Unlock()
			return nil, &crawl.HeldError{Host: b.Key, Wait: start.Sub(now), Reason: "its turn to start comes after the input's deadline (" + intervalText(b) + ")"}
		}
		h.used++
		if waits {
			waits = false
			h.stopWaiting()
		}
		if b.Interval > 0 {
			h.next = start.Add(b.Interval + b.DrawJitter())
		}
		h.mu.Unlock()
		release := func() {
			h.mu.Lock()
			h.used--
			close(h.wake)
			h.wake = make(chan struct{})
			h.mu.Unlock()
		}
		if err := Sleep(ctx, time.Until(start)); err != nil {
			release()
			return nil, err
		}
		// A pause that came while it waited for its turn holds this request too.
		h.mu.Lock()
		paused := time.Now().Before(h.until)
		h.mu.Unlock()
		if paused {
			release()
			continue
		}
		return release, nil
	}
}

// stopWaiting uncounts an urgent request that no longer waits and wakes the others,
// which it may have kept from a free slot; h.mu held.
func (h *localHost) stopWaiting() {
	h.urgent--
	close(h.wake)
	h.wake = make(chan struct{})
}

func (l *localBudgets) Pause(_ context.Context, key string, until time.Time, reason string) error {
	h := l.host(key)
	defer l.done(h)
	h.mu.Lock()
	if until.After(h.until) {
		h.until, h.reason = until, reason
	}
	h.mu.Unlock()
	return nil
}

// Ended is the error of a wait for b that ctx ended: canceled, or past its deadline a
// HeldError saying why, so the input runs again later without spending an attempt.
func (b Budget) Ended(ctx context.Context, why string) error {
	if ctx.Err() == context.Canceled {
		return ctx.Err()
	}
	return &crawl.HeldError{Host: b.Key, Wait: max(b.Interval, time.Second), Reason: why}
}

// DrawJitter is a random extra gap in [0, b.Jitter) before the next start.
func (b Budget) DrawJitter() time.Duration {
	if b.Jitter <= 0 {
		return 0
	}
	return rand.N(b.Jitter)
}

// intervalText describes a budget's pace for messages.
func intervalText(b Budget) string {
	if b.Interval <= 0 {
		return fmt.Sprintf("%d at a time", b.Concurrency)
	}
	return fmt.Sprintf("one start every %s, from %s", b.Interval.Round(time.Millisecond), b.Source)
}
