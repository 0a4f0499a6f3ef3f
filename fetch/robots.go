package fetch

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/temoto/robotstxt"

	"github.com/trawlerhq/trawler/crawl"
)

// Robots obeys each host's robots.txt unless the request sets IgnoreRobots. It
// guarantees:
//
//   - robots.txt is read once per host (scheme, host and port) through the rest of the
//     chain — so the read takes a politeness slot and token and passes the address
//     guard — with the headers of the request that needed it, and cached for an hour;
//     concurrent requests share one read;
//   - a missing robots.txt (any 4xx but 429) or one that does not parse allows
//     everything; one that cannot be read (429, 5xx, a network error) disallows the host
//     for a minute, with a retryable error asking the engine (crawl.RetryAfter) to come
//     back then;
//   - a URL the rules disallow for the request's User-Agent (else Options.UserAgent)
//     fails permanently with ErrDisallowed, and nothing is sent for it.
//
// It sits inside resource lending, so the leased proxy carries the robots.txt read and
// the leased User-Agent picks the rules, and outside Retry, so a refusal is never
// retried. Redirect hops are not re-checked.
func Robots(o Options) crawl.Middleware {
	o = o.withDefaults()
	cache := &robotsCache{entries: map[string]*robotsEntry{}, lastSweep: time.Now(), store: o.Robots}
	return func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			if r == nil || r.IgnoreRobots {
				return next.Fetch(ctx, r)
			}
			u, err := requestURL(r)
			if err != nil {
				return nil, err
			}
			if r.Politeness != nil && r.Politeness.ForHost(u.Hostname()).Robots == crawl.RobotsIgnore {
				return next.Fetch(ctx, r)
			}
			ua := o.UserAgent
			if v := r.Header.Get("User-Agent"); v != "" {
				ua = v
			}
			floor, err := cache.check(ctx, next, r, u, ua)
			if err != nil {
				return nil, err
			}
			return next.Fetch(withRobotsFloor(ctx, floor), r)
		})
	}
}

var allowAll = func() *robotsRules {
	data, _ := robotstxt.FromStatusAndBytes(http.StatusNotFound, nil)
	return &robotsRules{RobotsData: data}
}()

// robotsRules are a host's robots.txt rules and the Request-rate lines its parser
// leaves out.
type robotsRules struct {
	*robotstxt.RobotsData
	rates map[string]time.Duration // by user-agent token (lower case): least interval
}

// floor is the least interval between two requests the rules ask of userAgent: its
// group's Crawl-delay or Request-rate, whichever is slower.
func (r *robotsRules) floor(userAgent string) time.Duration {
	return max(r.FindGroup(userAgent).CrawlDelay, r.rate(userAgent))
}

// rate is the Request-rate of userAgent's group, matched as FindGroup matches: the
// longest agent token the user agent starts with, else *.
func (r *robotsRules) rate(userAgent string) time.Duration {
	userAgent = strings.ToLower(userAgent)
	best, d := 0, r.rates["*"]
	for a, rate := range r.rates {
		if a != "*" && len(a) > best && strings.HasPrefix(userAgent, a) {
			best, d = len(a), rate
		}
	}
	return d
}

// requestRates reads the `Request-rate: N/T` lines (N requests per T, in seconds
// unless T ends in s, m or h) of each user-agent group.
func requestRates(body []byte) map[string]time.Duration {
	var rates map[string]time.Duration
	var agents []string
	inAgents := false
	for line := range strings.Lines(string(body)) {
		line, _, _ = strings.Cut(line, "#")
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, val = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(val)
		switch key {
		case "user-agent":
			if !inAgents {
				agents = agents[:0]
			}
			agents, inAgents = append(agents, strings.ToLower(val)), true
			continue
		case "request-rate":
			if d := parseRequestRate(val); d > 0 {
				if rates == nil {
					rates = map[string]time.Duration{}
				}
				for _, a := range agents {
					rates[a] = d
				}
			}
		}
		inAgents = false
	}
	return rates
}

func parseRequestRate(v string) time.Duration {
	v, _, _ = strings.Cut(v, " ") // a time window after the rate is not kept
	num, per, ok := strings.Cut(v, "/")
	n, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || n <= 0 {
		return 0
	}
	unit := time.Second
	switch {
	case strings.HasSuffix(per, "s"):
		per = per[:len(per)-1]
	case strings.HasSuffix(per, "m"):
		per, unit = per[:len(per)-1], time.Minute
	case strings.HasSuffix(per, "h"):
		per, unit = per[:len(per)-1], time.Hour
	}
	t, err := strconv.ParseFloat(per, 64)
	if err != nil || t <= 0 {
		return 0
	}
	return min(time.Duration(t/n*float64(unit)), crawl.MaxPoliteDelay)
}

func robotsURL(u *url.URL) string { return u.Scheme + "://" + u.Host + "/robots.txt" }

// robotsCache holds the robots.txt of every host a Robots middleware has seen.
type robotsCache struct {
	mu        sync.Mutex
	entries   map[string]*robotsEntry // by hostKey
	lastSweep time.Time
	store     RobotsStore // the fleet's copies; nil: this process reads its own
}

type robotsEntry struct {
	data    *robotsRules
	err     *robotsUnavailableError // set instead of data while robots.txt is unreadable
	expires time.Time
	loading chan struct{} // non-nil while one request reads robots.txt; closed when done
}

// check returns nil when the host's robots.txt lets userAgent fetch u, with the least
// interval between requests it asks for.
func (c *robotsCache) check(ctx context.Context, next crawl.Fetcher, r *crawl.Request, u *url.URL, userAgent string) (time.Duration, error) {
	method := methodOf(r)
	data, unavailable, expires, err := c.rules(ctx, next, r, u)
	var be *blockedError
	if errors.As(err, &be) {
		return 0, crawl.Permanent(&Error{Method: method, URL: r.URL, Err: be})
	}
	if err != nil {
		return 0, &Error{Method: method, URL: r.URL, Err: err}
	}
	if unavailable != nil {
		wait := max(time.Until(expires), time.Second)
		return 0, crawl.RetryAfter(&Error{Method: method, URL: r.URL, Err: unavailable}, wait)
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	if !data.TestAgent(path, userAgent) {
		return 0, crawl.Permanent(&Error{Method: method, URL: r.URL, Err: &disallowedError{robotsURL(u), userAgent}})
	}
	return data.floor(userAgent), nil
}

// rules returns the host's robots.txt from the cache, reading it when the cache has none
// or it expired. Concurrent callers share one read. Exactly one of data and unavailable is
// set when err is nil; err is set only when ctx ended first or the guard refused the host.
func (c *robotsCache) rules(ctx context.Context, next crawl.Fetcher, r *crawl.Request, u *url.URL) (data *robotsRules, unavailable *robotsUnavailableError, expires time.Time, err error) {
	key := hostKey(u)
	c.mu.Lock()
	c.sweep()
	for {
		e := c.entries[key]
		if e == nil {
			e = &robotsEntry{}
			c.entries[key] = e
		}
		if e.loading == nil && time.Now().Before(e.expires) {
			data, unavailable, expires = e.data, e.err, e.expires
			c.mu.Unlock()
			return data, unavailable, expires, nil
		}
		if e.loading != nil {
			loading := e.loading
			c.mu.Unlock()
			select {
			case <-loading:
			case <-ctx.Done():
				return nil, nil, time.Time{}, ctx.Err()
			}
			c.mu.Lock()
			continue
		}
		loading := make(chan struct{})
		e.loading = loading
		c.mu.Unlock()

		data, unavailable, ttl, err := loadRobots(ctx, next, c.store, r, u)

		c.mu.Lock()
		e.loading = nil
		close(loading)
		if err != nil {
			// This caller's ctx ended: nothing learnt, so nothing cached; a waiter
			// takes over.
			c.mu.Unlock()
			return nil, nil, time.Time{}, err
		}
		e.data, e.err, e.expires = data, unavailable, time.Now().Add(ttl)
	}
}

// sweep forgets expired entries now and then, so a long crawl over many hosts does not
// keep every robots.txt it ever read; c.mu must be held.
func (c *robotsCache) sweep() {
	now := time.Now()
	if now.Sub(c.lastSweep) < sweepEvery {
		return
	}
	c.lastSweep = now
	for k, e := range c.entries {
		if e.loading == nil && now.After(e.expires) {
			delete(c.entries, k)
		}
	}
}

// RobotsFile is a host's robots.txt as read: its status and body, or the cause it could
// not be read (Status 0).
type RobotsFile struct {
	Status  int       `json:"status"`
	Body    []byte    `json:"body,omitempty"`
	Expires time.Time `json:"expires"`
}

// RobotsStore shares the robots.txt files workers read, so each host's is read once per
// fleet per robotsTTL (internal/polite keeps them in Redis).
type RobotsStore interface {
	// Load returns the file stored for host (a hostKey), if any and not expired.
	Load(ctx context.Context, host string) (RobotsFile, bool)
	// Claim reports whether this worker should read host's robots.txt now: false while
	// another worker is reading it (then Load again shortly).
	Claim(ctx context.Context, host string) bool
	// Store keeps f for every worker until f.Expires.
	Store(ctx context.Context, host string, f RobotsFile)
}

// robotsClaimWait is how long a worker waits for another's read of a robots.txt before
// reading it itself.
const robotsClaimWait = 15 * time.Second

// loadRobots returns the rules for u's host: the fleet's copy from store when there is
// one, else read through next (and stored for the fleet).
func loadRobots(ctx context.Context, next crawl.Fetcher, store RobotsStore, page *crawl.Request, u *url.URL) (*robotsRules, *robotsUnavailableError, time.Duration, error) {
	if store == nil {
		return readRobots(ctx, next, nil, page, u)
	}
	key := hostKey(u)
	give := time.Now().Add(robotsClaimWait)
	for {
		if f, ok := store.Load(ctx, key); ok {
			data, unavailable := parseRobots(f, robotsURL(u))
			return data, unavailable, time.Until(f.Expires), nil
		}
		if time.Now().After(give) || store.Claim(ctx, key) {
			return readRobots(ctx, next, store, page, u)
		}
		if err := Sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, nil, 0, err
		}
	}
}

// parseRobots turns a stored file into rules, or the reason the host is unavailable.
func parseRobots(f RobotsFile, where string) (*robotsRules, *robotsUnavailableError) {
	code := f.Status
	switch {
	case code >= 200 && code < 300:
		data, err := robotstxt.FromBytes(f.Body)
		if err != nil {
			return allowAll, nil
		}
		return &robotsRules{RobotsData: data, rates: requestRates(f.Body)}, nil
	case code == http.StatusTooManyRequests || code >= 500:
		return nil, &robotsUnavailableError{robotsURL: where, cause: statusLine(code)}
	default:
		return allowAll, nil
	}
}

// readRobots reads robots.txt for u's host through next. A 2xx is parsed, any other 4xx
// but 429 allows everything (as does a body that does not parse, or too many
// redirects), and a 429, a 5xx or a network error makes the host unavailable for
// robotsRetryTTL. What has a status goes to store for the fleet. err is set only when
// ctx ended, the host's budget held the read back, or the guard refused the host's
// address (a *blockedError).
func readRobots(ctx context.Context, next crawl.Fetcher, store RobotsStore, page *crawl.Request, u *url.URL) (*robotsRules, *robotsUnavailableError, time.Duration, error) {
	where := robotsURL(u)
	// robots.txt is the fetcher's, no page of the task's: it is not archived.
	resp, err := next.Fetch(withoutRecorder(ctx), &crawl.Request{
		Method: http.MethodGet, URL: where,
		// The page's headers: the site sees the same client (user agent, a leased
		// cookie, a header a middleware added) ask for its rules as for its pages.
		Header: page.Header.Clone(),
		// The page's limits, so the read counts against the host like any request.
		RateLimit: page.RateLimit, HostConcurrency: page.HostConcurrency, Politeness: page.Politeness,
		// Every status means something for the rules: none is retried in-process.
		Accept: func(int) bool { return true },
	})
	if err != nil {
		// Waiting for the host's budget is the page's wait too: it says so.
		var held *crawl.HeldError
		var dep *crawl.DependencyError
		switch {
		case errors.As(err, &held):
			return nil, nil, 0, held
		case errors.As(err, &dep):
			return nil, nil, 0, dep
		case ctx.Err() != nil:
			return nil, nil, 0, ctx.Err()
		}
		var rl *redirectLimitError
		if errors.As(err, &rl) {
			return allowAll, nil, robotsTTL, nil
		}
		// A refused address is not a robots.txt that may come back: the page itself
		// fails, permanently (nothing is cached, so the guard judges every request).
		var be *blockedError
		if errors.As(err, &be) {
			return nil, nil, 0, be
		}
		var fe *Error
		if !errors.As(err, &fe) || fe.Err == nil {
			return nil, &robotsUnavailableError{robotsURL: where, cause: err.Error(), err: err}, robotsRetryTTL, nil
		}
		return nil, &robotsUnavailableError{robotsURL: where, cause: fe.Err.Error(), err: fe.Err}, robotsRetryTTL, nil
	}
	f := RobotsFile{Status: resp.Status, Body: resp.Body}
	if len(f.Body) > robotsMaxBytes {
		f.Body = f.Body[:robotsMaxBytes]
	}
	if f.Status < 200 || f.Status >= 300 {
		f.Body = nil
	}
	ttl := robotsTTL
	if f.Status == http.StatusTooManyRequests || f.Status >= 500 {
		ttl = robotsRetryTTL
	}
	f.Expires = time.Now().Add(ttl)
	if store != nil {
		store.Store(ctx, hostKey(u), f)
	}
	data, unavailable := parseRobots(f, where)
	return data, unavailable, ttl, nil
}
