package fetch

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/temoto/robotstxt"

	"trawler/crawl"
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
	cache := &robotsCache{entries: map[string]*robotsEntry{}, lastSweep: time.Now()}
	return func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			if r == nil || r.IgnoreRobots {
				return next.Fetch(ctx, r)
			}
			u, err := requestURL(r)
			if err != nil {
				return nil, err
			}
			ua := o.UserAgent
			if v := r.Header.Get("User-Agent"); v != "" {
				ua = v
			}
			if err := cache.check(ctx, next, r, u, ua); err != nil {
				return nil, err
			}
			return next.Fetch(ctx, r)
		})
	}
}

var allowAll, _ = robotstxt.FromStatusAndBytes(http.StatusNotFound, nil)

func robotsURL(u *url.URL) string { return u.Scheme + "://" + u.Host + "/robots.txt" }

// robotsCache holds the robots.txt of every host a Robots middleware has seen.
type robotsCache struct {
	mu        sync.Mutex
	entries   map[string]*robotsEntry // by hostKey
	lastSweep time.Time
}

type robotsEntry struct {
	data    *robotstxt.RobotsData
	err     *robotsUnavailableError // set instead of data while robots.txt is unreadable
	expires time.Time
	loading chan struct{} // non-nil while one request reads robots.txt; closed when done
}

// check returns nil when the host's robots.txt lets userAgent fetch u.
func (c *robotsCache) check(ctx context.Context, next crawl.Fetcher, r *crawl.Request, u *url.URL, userAgent string) error {
	method := methodOf(r)
	data, unavailable, expires, err := c.rules(ctx, next, r, u)
	var be *blockedError
	if errors.As(err, &be) {
		return crawl.Permanent(&Error{Method: method, URL: r.URL, Err: be})
	}
	if err != nil {
		return &Error{Method: method, URL: r.URL, Err: err}
	}
	if unavailable != nil {
		wait := max(time.Until(expires), time.Second)
		return crawl.RetryAfter(&Error{Method: method, URL: r.URL, Err: unavailable}, wait)
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	if !data.TestAgent(path, userAgent) {
		return crawl.Permanent(&Error{Method: method, URL: r.URL, Err: &disallowedError{robotsURL(u), userAgent}})
	}
	return nil
}

// rules returns the host's robots.txt from the cache, reading it when the cache has none
// or it expired. Concurrent callers share one read. Exactly one of data and unavailable is
// set when err is nil; err is set only when ctx ended first or the guard refused the host.
func (c *robotsCache) rules(ctx context.Context, next crawl.Fetcher, r *crawl.Request, u *url.URL) (data *robotstxt.RobotsData, unavailable *robotsUnavailableError, expires time.Time, err error) {
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

		data, unavailable, ttl, err := loadRobots(ctx, next, r, u)

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

// loadRobots reads robots.txt for u's host through next. A 2xx is parsed, any other 4xx
// but 429 allows everything (as does a body that does not parse, or too many
// redirects), and a 429, a 5xx or a network error makes the host unavailable for
// robotsRetryTTL. err is set only when ctx ended, no slot or rate token of the host came
// before ctx's deadline, or the guard refused the host's address (a *blockedError).
func loadRobots(ctx context.Context, next crawl.Fetcher, page *crawl.Request, u *url.URL) (*robotstxt.RobotsData, *robotsUnavailableError, time.Duration, error) {
	where := robotsURL(u)
	resp, err := next.Fetch(ctx, &crawl.Request{
		Method: http.MethodGet, URL: where,
		// The page's headers: the site sees the same client (user agent, a leased
		// cookie, a header a middleware added) ask for its rules as for its pages.
		Header: page.Header.Clone(),
		// The page's limits, so the read counts against the host like any request.
		RateLimit: page.RateLimit, HostConcurrency: page.HostConcurrency,
		// Every status means something for the rules: none is retried in-process.
		Accept: func(int) bool { return true },
	})
	if err != nil {
		// Waiting for the host's slot or rate token is the page's wait too: it says so.
		var rw *rateWaitError
		var st *slotTimeoutError
		switch {
		case errors.As(err, &rw):
			return nil, nil, 0, rw
		case errors.As(err, &st):
			return nil, nil, 0, st
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
	code := resp.Status
	switch {
	case code >= 200 && code < 300:
		body := resp.Body
		if len(body) > robotsMaxBytes {
			body = body[:robotsMaxBytes]
		}
		data, err := robotstxt.FromBytes(body)
		if err != nil {
			return allowAll, nil, robotsTTL, nil
		}
		return data, nil, robotsTTL, nil
	case code == http.StatusTooManyRequests || code >= 500:
		return nil, &robotsUnavailableError{robotsURL: where, cause: statusLine(code)}, robotsRetryTTL, nil
	default:
		return allowAll, nil, robotsTTL, nil
	}
}
