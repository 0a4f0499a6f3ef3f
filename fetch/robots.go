package fetch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/temoto/robotstxt"

	"trawler/crawl"
)

var allowAll, _ = robotstxt.FromStatusAndBytes(http.StatusNotFound, nil)

func robotsURL(u *url.URL) string { return u.Scheme + "://" + u.Host + "/robots.txt" }

// checkRobots returns nil when the host's robots.txt lets userAgent fetch u.
func (f *Fetcher) checkRobots(ctx context.Context, h *host, u *url.URL, userAgent, method, rawURL string) error {
	data, unavailable, expires, err := f.robots(ctx, h, u)
	var be *blockedError
	if errors.As(err, &be) {
		return crawl.Permanent(&Error{Method: method, URL: rawURL, Err: be})
	}
	if err != nil {
		return &Error{Method: method, URL: rawURL, Err: err}
	}
	if unavailable != nil {
		wait := max(time.Until(expires), time.Second)
		return crawl.RetryAfter(&Error{Method: method, URL: rawURL, Err: unavailable}, wait)
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	if !data.TestAgent(path, userAgent) {
		return crawl.Permanent(&Error{Method: method, URL: rawURL, Err: &disallowedError{robotsURL(u), userAgent}})
	}
	return nil
}

// robots returns the host's robots.txt from the cache, reading it when the cache has none
// or it expired. Concurrent callers share one read. Exactly one of data and unavailable is
// set when err is nil; err is set only when ctx ended first or the guard refused the host.
func (f *Fetcher) robots(ctx context.Context, h *host, u *url.URL) (data *robotstxt.RobotsData, unavailable *robotsUnavailableError, expires time.Time, err error) {
	h.mu.Lock()
	for {
		e := &h.robots
		if e.loading == nil && time.Now().Before(e.expires) {
			data, unavailable, expires = e.data, e.err, e.expires
			h.mu.Unlock()
			return data, unavailable, expires, nil
		}
		if e.loading != nil {
			loading := e.loading
			h.mu.Unlock()
			select {
			case <-loading:
			case <-ctx.Done():
				return nil, nil, time.Time{}, ctx.Err()
			}
			h.mu.Lock()
			continue
		}
		loading := make(chan struct{})
		e.loading = loading
		h.mu.Unlock()

		data, unavailable, ttl, err := f.loadRobots(ctx, h, u)

		h.mu.Lock()
		e.loading = nil
		close(loading)
		if err != nil {
			// This caller's ctx ended: nothing learnt, so nothing cached; a waiter
			// takes over.
			h.mu.Unlock()
			return nil, nil, time.Time{}, err
		}
		e.data, e.err, e.expires = data, unavailable, time.Now().Add(ttl)
	}
}

// loadRobots reads robots.txt for u's host. A 2xx is parsed, any other 4xx but 429 allows
// everything (as does a body that does not parse), and a 429, a 5xx or a network error
// makes the host unavailable for robotsRetryTTL. err is set only when ctx ended, the
// rate limiter cannot grant a token before ctx's deadline, or the guard refused the
// host's address (a *blockedError).
func (f *Fetcher) loadRobots(ctx context.Context, h *host, u *url.URL) (*robotstxt.RobotsData, *robotsUnavailableError, time.Duration, error) {
	where := robotsURL(u)
	if err := f.waitToken(ctx, h); err != nil {
		return nil, nil, 0, err
	}
	actx, cancel := context.WithTimeout(ctx, f.opt.Timeout)
	defer cancel()
	res, err := f.client.R().SetContext(actx).Execute(http.MethodGet, where)
	var raw *http.Response
	if res != nil {
		raw = res.RawResponse
	}
	if err != nil {
		if raw != nil && raw.Body != nil {
			raw.Body.Close()
		}
		if ctx.Err() != nil {
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
		cause, _, _ := f.classify(ctx, actx, err)
		return nil, &robotsUnavailableError{robotsURL: where, cause: cause.Error(), err: cause}, robotsRetryTTL, nil
	}
	if raw == nil || raw.Body == nil {
		return nil, &robotsUnavailableError{robotsURL: where, cause: "no response"}, robotsRetryTTL, nil
	}
	defer raw.Body.Close()

	code := raw.StatusCode
	switch {
	case code >= 200 && code < 300:
		body, err := io.ReadAll(io.LimitReader(raw.Body, robotsMaxBytes))
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, 0, ctx.Err()
			}
			cause, _, _ := f.classify(ctx, actx, err)
			return nil, &robotsUnavailableError{robotsURL: where, cause: cause.Error(), err: cause}, robotsRetryTTL, nil
		}
		data, err := robotstxt.FromBytes(body)
		if err != nil {
			return allowAll, nil, robotsTTL, nil
		}
		return data, nil, robotsTTL, nil
	case code == http.StatusTooManyRequests || code >= 500:
		_, _ = io.Copy(io.Discard, io.LimitReader(raw.Body, errorBodyDrain))
		return nil, &robotsUnavailableError{robotsURL: where, cause: statusLine(code)}, robotsRetryTTL, nil
	default:
		_, _ = io.Copy(io.Discard, io.LimitReader(raw.Body, errorBodyDrain))
		return allowAll, nil, robotsTTL, nil
	}
}
