package console

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// AuthFailures counts refused bearer tokens by reason: malformed (not "Bearer TOKEN"),
// wrong_token (no such token), throttled (an address past its limit, refused unread).
var AuthFailures = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "trawler_console_auth_failures_total",
	Help: "Bearer tokens the console refused, by reason: malformed, wrong_token, throttled.",
}, []string{"reason"})

// DefaultAuthFailLimit is how many bad tokens an address may send in a window before
// the console answers it 429.
const DefaultAuthFailLimit = 10

// authWindow is the window bad tokens are counted in, and how long a quiet address
// takes to be forgiven.
const authWindow = 10 * time.Minute

// firstLockout is the first wait of an address past its limit; each further bad token
// doubles it.
const firstLockout = 5 * time.Second

// maxLockout caps the wait of an address that keeps guessing.
const maxLockout = 15 * time.Minute

// throttle slows down addresses that send bad tokens: past limit failures in a window,
// each further one doubles the wait (5 s, 10 s, 20 s … up to 15 min) during which the
// address is answered 429 with Retry-After, whatever token it sends. It is logged once
// per window per address, without the token.
type throttle struct {
	limit int
	log   *slog.Logger
	mu    sync.Mutex
	by    map[string]*failures
}

type failures struct {
	first  time.Time // of the window
	n      int
	until  time.Time // refused until then
	logged bool
}

func newThrottle(limit int, log *slog.Logger) *throttle {
	return &throttle{limit: limit, log: log, by: map[string]*failures{}}
}

// wait is how long addr is still refused.
func (t *throttle) wait(addr string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f := t.by[addr]; f != nil && now.Before(f.until) {
		return f.until.Sub(now)
	}
	return 0
}

// fail counts a bad token from addr.
func (t *throttle) fail(addr string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.by[addr]
	if f == nil || (now.Sub(f.first) > authWindow && !now.Before(f.until)) {
		if len(t.by) > 10_000 {
			t.forget(now)
		}
		f = &failures{first: now}
		t.by[addr] = f
	}
	f.n++
	if over := f.n - t.limit; over > 0 {
		f.until = now.Add(min(firstLockout<<min(over-1, 20), maxLockout))
		if !f.logged {
			f.logged = true
			t.log.Warn("console: bad bearer tokens from one address; answering it 429 with a growing wait", "address", addr, "failures", f.n, "window", authWindow.String())
		}
	}
}

// forget drops addresses that are neither waiting nor in their window.
func (t *throttle) forget(now time.Time) {
	for a, f := range t.by {
		if now.Sub(f.first) > authWindow && !now.Before(f.until) {
			delete(t.by, a)
		}
	}
}
