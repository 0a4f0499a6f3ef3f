package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/monitor"
)

// Politeness keeps each attempt within its host's budget, shared by every request that
// Options.Budgets serves (the whole fleet when they live in Redis). It guarantees:
//
//   - the budget is the request's crawl.Politeness for its host (a chain's
//     `politeness:`), else the request's RateLimit and HostConcurrency (a task's), else
//     Options.RateLimit and HostConcurrency; robots.txt's Crawl-delay and Request-rate
//     (set by the Robots layer) and AutoThrottle only ever slow it further;
//   - hosts share one budget when the politeness says `group: domain` (a registrable
//     domain) or `group: ip` (one address), else each scheme, host and port has its own;
//   - a 429 or 503 with a Retry-After pauses the host for every worker sharing the
//     budgets until then (at most maxPause); without one, the second such answer in a
//     row (or the third connection reset) pauses it for a second, doubling with each
//     more, up to maxPause; a host that keeps failing is shown as parked;
//   - a request the budget cannot start before its deadline, or that meets a pause,
//     fails with a *crawl.HeldError: the engine runs the input again later without
//     spending an attempt.
//
// It is the layer just outside Transport, so in-process retries and the robots.txt
// read each take their own slot and turn, and a retry sleeping for its backoff holds
// neither.
func Politeness(o Options) crawl.Middleware {
	o = o.withDefaults()
	p := &polite{o: o, budgets: o.Budgets, guard: newGuard(o), hosts: map[string]*hostState{}}
	if p.budgets == nil {
		p.budgets = LocalBudgets()
	}
	return func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			u, err := requestURL(r)
			if err != nil {
				return nil, err
			}
			b, lim := p.budget(ctx, r, u)
			began := time.Now()
			wctx, cancel := waitContext(ctx)
			release, err := p.budgets.Take(wctx, b)
			cancel()
			monitor.HostWaitSeconds.WithLabelValues(waitReason(err)).Observe(time.Since(began).Seconds())
			if err != nil {
				return nil, &Error{Method: methodOf(r), URL: r.URL, Err: err}
			}
			start := time.Now()
			resp, err := next.Fetch(ctx, r)
			release()
			p.observe(ctx, b, lim, resp, err, time.Since(start))
			return resp, err
		})
	}
}

type urgentKey struct{}

// Urgent marks the requests made with ctx as on their run's critical path: when their
// host has no slot free, they take the next one before the other requests of this
// process (Budget.Urgent). The engine marks the pages of a step that feeds itself (a
// paged list, a comments thread, a site's pages): every page of them waits on the one
// before, while the pages they lead to wait on nothing. The host's limits hold as
// before; only the order of those waiting changes.
func Urgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

func isUrgent(ctx context.Context) bool {
	u, _ := ctx.Value(urgentKey{}).(bool)
	return u
}

// waitContext bounds the wait for a budget so that the request still has time to run
// once it starts: waiting ends while a quarter of the time left (at most 5 s) remains,
// and the input is held back instead of starting too late to finish.
func waitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	headroom := min(time.Until(deadline)/4, 5*time.Second)
	return context.WithDeadline(ctx, deadline.Add(-headroom))
}

const (
	// maxPause caps a Retry-After and the backoff of a failing host: a host asking for
	// a day is asked again within the hour.
	maxPause = time.Hour
	// parkAfter failures in a row mark a host parked in status (its pause keeps doubling).
	parkAfter = 8
	// resetsBeforePause: one connection reset is noise; this many in a row pause the host.
	resetsBeforePause = 3
	leaseMargin       = 5 * time.Second
)

type polite struct {
	o       Options
	budgets Budgets
	guard   *guard

	mu    sync.Mutex
	hosts map[string]*hostState // by budget key; forgotten after hostIdle unused
	swept time.Time
}

// hostState is what this worker learns of one budget: its failures in a row and its
// AutoThrottle delay.
type hostState struct {
	used     time.Time
	failures int
	delay    time.Duration // AutoThrottle's; 0 until the first answer
	addr     netip.Addr    // for group: ip, looked up once a minute
	looked   time.Time
}

func (p *polite) state(key string) *hostState {
	now := time.Now()
	if now.Sub(p.swept) > sweepEvery {
		p.swept = now
		for k, h := range p.hosts {
			if now.Sub(h.used) > hostIdle {
				delete(p.hosts, k)
			}
		}
	}
	h := p.hosts[key]
	if h == nil {
		h = &hostState{}
		p.hosts[key] = h
	}
	h.used = now
	return h
}

// budget is the request's budget and the politeness it came from.
func (p *polite) budget(ctx context.Context, r *crawl.Request, u *url.URL) (Budget, crawl.Politeness) {
	lim := r.Politeness.ForHost(u.Hostname())
	// A request lives at most its attempt's timeout and its input's deadline: a slot a
	// dead worker held comes back a margin after that, not after the longest timeout.
	life := p.o.Timeout
	if d, ok := ctx.Deadline(); ok {
		life = min(life, time.Until(d))
	}
	b := Budget{Key: p.groupKey(ctx, u, lim.Group), Lease: max(life, 0) + leaseMargin, Jitter: lim.Jitter, PauseWait: p.o.MaxRetryWait, Urgent: isUrgent(ctx)}
	concSource := "default"
	switch {
	case lim.Concurrency > 0:
		b.Concurrency, concSource = lim.Concurrency, "declared"
	case r.HostConcurrency > 0:
		b.Concurrency, concSource = r.HostConcurrency, "task"
	default:
		b.Concurrency = p.o.HostConcurrency
	}
	raise := func(d time.Duration, source string) {
		if d > b.Interval {
			b.Interval, b.Source = d, source
		}
	}
	switch {
	case lim.Rate > 0:
		raise(time.Duration(float64(time.Second)/lim.Rate), "declared")
	case r.RateLimit > 0:
		raise(time.Duration(float64(time.Second)/r.RateLimit), "task")
	case p.o.RateLimit > 0:
		raise(time.Duration(float64(time.Second)/p.o.RateLimit), "default")
	}
	raise(lim.Delay, "declared")
	raise(robotsFloor(ctx), "robots")
	b.floor = b.Interval
	if lim.AutoThrottle != nil {
		p.mu.Lock()
		d := p.state(b.Key).delay
		p.mu.Unlock()
		raise(d, "autothrottle")
	}
	if b.Source == "" {
		b.Source = concSource
	}
	return b, lim
}

// groupKey is what shares the request's budget.
func (p *polite) groupKey(ctx context.Context, u *url.URL, group string) string {
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	switch group {
	case crawl.GroupDomain:
		if _, err := netip.ParseAddr(host); err != nil {
			if d, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
				return "domain:" + d
			}
		}
		return "domain:" + host
	case crawl.GroupIP:
		if a, err := netip.ParseAddr(host); err == nil {
			return "ip:" + a.Unmap().String()
		}
		p.mu.Lock()
		h := p.state("name:" + host)
		addr, fresh := h.addr, time.Since(h.looked) < time.Minute
		p.mu.Unlock()
		if !fresh {
			if addrs, err := p.guard.resolve(ctx, host); err == nil && len(addrs) > 0 {
				addr = addrs[0].Unmap()
				p.mu.Lock()
				h.addr, h.looked = addr, time.Now()
				p.mu.Unlock()
			}
		}
		if addr.IsValid() {
			return "ip:" + addr.String()
		}
		return "ip:" + host // unresolved: the transport will say why
	}
	return hostKey(u)
}

// observe learns from an answer: pauses the host for a 429 or 503 (and runs of
// resets), and moves its AutoThrottle delay.
func (p *polite) observe(ctx context.Context, b Budget, lim crawl.Politeness, resp *crawl.Response, err error, took time.Duration) {
	status := 0
	if resp != nil {
		status = resp.Status
	}
	busy := status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
	reset := err != nil && crawl.CauseOf(err) == crawl.CauseConnection && ctx.Err() == nil
	p.mu.Lock()
	h := p.state(b.Key)
	switch {
	case busy || reset:
		h.failures++
	case err == nil:
		h.failures = 0
	}
	failures := h.failures
	if lim.AutoThrottle != nil && (err == nil || reset) {
		h.delay = throttle(h.delay, b, lim.AutoThrottle, took, busy || reset || status >= 500)
	}
	p.mu.Unlock()

	var pause time.Duration
	var reason string
	switch {
	case busy:
		if d, ok := crawl.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok && d > 0 {
			pause = min(d, maxPause)
			reason = fmt.Sprintf("HTTP %d with Retry-After %s", status, d.Round(time.Millisecond))
		} else if failures >= 2 {
			// One busy answer without a time may be a blip; a second in a row is not.
			pause = backoffPause(failures - 1)
			reason = fmt.Sprintf("HTTP %d without Retry-After, %d in a row", status, failures)
		} else {
			return
		}
		monitor.HostBackoffs.WithLabelValues(fmt.Sprint(status)).Inc()
	case reset && failures >= resetsBeforePause:
		pause = backoffPause(failures - resetsBeforePause + 1)
		reason = fmt.Sprintf("%d connection failures in a row", failures)
		monitor.HostBackoffs.WithLabelValues("connection").Inc()
	default:
		return
	}
	if failures >= parkAfter {
		reason = "parked: " + reason
	}
	// The pause must reach the budgets even when this request's own time ran out.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if perr := p.budgets.Pause(pctx, b.Key, time.Now().Add(pause), reason); perr != nil {
		slog.Warn("could not pause a host for every worker", "host", b.Key, "for", pause, "reason", reason, "err", perr)
	}
}

// backoffPause is the pause after n busy answers in a row without a Retry-After: a
// second, doubling, at most maxPause.
func backoffPause(n int) time.Duration {
	d := time.Second
	for i := 1; i < n && d < maxPause; i++ {
		d *= 2
	}
	return min(d, maxPause)
}

// throttle is Scrapy's AutoThrottle step: the delay moves half way toward latency /
// target; an error answer never lowers it (it doubles); it stays between the budget's
// other floor and the throttle's maximum.
func throttle(prev time.Duration, b Budget, a *crawl.AutoThrottle, latency time.Duration, failed bool) time.Duration {
	floor := b.floor
	if prev == 0 {
		prev = max(floor, time.Second) // the first answers start from a cautious second
	}
	target := time.Duration(float64(latency) / a.Target)
	next := (prev + target) / 2
	if failed {
		next = max(prev*2, next)
	}
	return min(max(next, floor), a.Max)
}

// waitReason labels the host wait metric: a closed set, so hosts never become labels.
func waitReason(err error) string {
	var dep *crawl.DependencyError
	switch {
	case err == nil:
		return "granted"
	case errors.As(err, &dep):
		return "unavailable"
	}
	if _, held := crawl.HeldFor(err); held {
		return "held"
	}
	return "canceled"
}

type robotsFloorKey struct{}

// withRobotsFloor carries the least interval the host's robots.txt asks for to the
// Politeness layer below Robots.
func withRobotsFloor(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	return context.WithValue(ctx, robotsFloorKey{}, d)
}

func robotsFloor(ctx context.Context) time.Duration {
	d, _ := ctx.Value(robotsFloorKey{}).(time.Duration)
	return d
}
