package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

const (
	// A host nobody has used for this long is forgotten (its limiter and slots); the
	// next request for it starts afresh.
	hostIdle   = time.Hour
	sweepEvery = 5 * time.Minute
)

// hostKey is scheme://host:port, lower-cased, with the default port made explicit, so
// that http://Example.com and http://example.com:80 share limits and robots.txt.
func hostKey(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		default:
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// host is the politeness state of one scheme+host+port.
type host struct {
	key string

	// guarded by hostTable.mu
	refs     int
	lastUsed time.Time

	mu       sync.Mutex
	slots    int           // concurrency limit
	used     int           // slots taken
	wake     chan struct{} // closed and replaced whenever a slot frees or the limit changes
	slotsSet bool          // slots came from a request (first non-zero wins)
	rateSet  bool          // limiter rate came from a request (first non-zero wins)

	lim *rate.Limiter // safe for concurrent use on its own
}

type hostTable struct {
	mu        sync.Mutex
	hosts     map[string]*host
	lastSweep time.Time
	rate      float64
	slots     int
}

func newHostTable(defaultRate float64, defaultSlots int) *hostTable {
	return &hostTable{hosts: map[string]*host{}, lastSweep: time.Now(), rate: defaultRate, slots: defaultSlots}
}

func limitOf(rps float64) rate.Limit {
	if rps <= 0 {
		return rate.Inf
	}
	return rate.Limit(rps)
}

// acquire returns the host's state with a reference held; call release when done.
// Non-zero reqRate/reqSlots set the host's limits if no earlier request did.
func (t *hostTable) acquire(key string, reqRate float64, reqSlots int) *host {
	now := time.Now()
	t.mu.Lock()
	if now.Sub(t.lastSweep) > sweepEvery {
		t.lastSweep = now
		for k, h := range t.hosts {
			if h.refs == 0 && now.Sub(h.lastUsed) > hostIdle {
				delete(t.hosts, k)
			}
		}
	}
	h := t.hosts[key]
	if h == nil {
		h = &host{
			key:   key,
			slots: t.slots,
			wake:  make(chan struct{}),
			lim:   rate.NewLimiter(limitOf(t.rate), 1),
		}
		t.hosts[key] = h
	}
	h.refs++
	h.lastUsed = now
	t.mu.Unlock()

	if reqRate > 0 || reqSlots > 0 {
		h.mu.Lock()
		if reqRate > 0 && !h.rateSet {
			h.rateSet = true
			h.lim.SetLimit(limitOf(reqRate))
		}
		if reqSlots > 0 && !h.slotsSet {
			h.slotsSet = true
			h.slots = reqSlots
			h.broadcast()
		}
		h.mu.Unlock()
	}
	return h
}

func (t *hostTable) release(h *host) {
	t.mu.Lock()
	h.refs--
	h.lastUsed = time.Now()
	t.mu.Unlock()
}

// broadcast wakes every goroutine waiting for a slot; h.mu must be held.
func (h *host) broadcast() {
	close(h.wake)
	h.wake = make(chan struct{})
}

// takeSlot waits for one of the host's concurrency slots, or for ctx to end: canceled,
// or past its deadline with a slotTimeoutError naming the host and its limit.
func (h *host) takeSlot(ctx context.Context) error {
	for {
		h.mu.Lock()
		if h.used < h.slots {
			h.used++
			h.mu.Unlock()
			return nil
		}
		wake, slots := h.wake, h.slots
		h.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return &slotTimeoutError{host: h.key, slots: slots}
			}
			return ctx.Err()
		}
	}
}

// slotTimeoutError: the request's time ran out before one of its host's slots came
// free. It is a timeout (of the step's deadline), and says it never reached the host.
type slotTimeoutError struct {
	host  string
	slots int
}

func (e *slotTimeoutError) Error() string {
	return fmt.Sprintf("timed out waiting for a per-host politeness slot for %s (%d at a time, all taken by this worker's other requests to it; lower the step's concurrency, raise the task's HostConcurrency or the step's timeout)",
		e.host, e.slots)
}
func (e *slotTimeoutError) Unwrap() error { return context.DeadlineExceeded }
func (e *slotTimeoutError) Timeout() bool { return true }

func (h *host) freeSlot() {
	h.mu.Lock()
	h.used--
	h.broadcast()
	h.mu.Unlock()
}
