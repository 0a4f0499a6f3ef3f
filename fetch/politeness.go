package fetch

import (
	"context"
	"errors"
	"fmt"

	"trawler/crawl"
)

// Politeness keeps each attempt within its host's limits. A host is a scheme, host and
// port (http://Example.com and http://example.com:80 are one). It guarantees:
//
//   - at most HostConcurrency requests to a host are in flight through this middleware,
//     and at most RateLimit start per second (a token bucket with a burst of one);
//   - a request's own non-zero RateLimit or HostConcurrency sets its host's limits once:
//     the first non-zero value seen wins, so every task hitting a host shares one limit;
//     a host unused for an hour is forgotten and set afresh;
//   - waiting for a slot or a token ends when ctx does, with an *Error that is not
//     retried; past ctx's deadline it is a timeout naming the host and its limit.
//
// It is the layer just outside Transport, so in-process retries and the robots.txt
// read each take their own slot and token, and a retry sleeping for its backoff holds
// neither.
func Politeness(o Options) crawl.Middleware {
	o = o.withDefaults()
	hosts := newHostTable(o.RateLimit, o.HostConcurrency)
	return func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			u, err := requestURL(r)
			if err != nil {
				return nil, err
			}
			h := hosts.acquire(hostKey(u), r.RateLimit, r.HostConcurrency)
			defer hosts.release(h)
			if err := h.takeSlot(ctx); err != nil {
				return nil, &Error{Method: methodOf(r), URL: r.URL, Err: err}
			}
			defer h.freeSlot()
			if err := waitToken(ctx, h); err != nil {
				return nil, &Error{Method: methodOf(r), URL: r.URL, Err: err}
			}
			return next.Fetch(ctx, r)
		})
	}
}

// waitToken takes one token from the host's rate limiter.
func waitToken(ctx context.Context, h *host) error {
	if err := h.lim.Wait(ctx); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return ctx.Err()
		}
		return &rateWaitError{host: h.key, limit: float64(h.lim.Limit())}
	}
	return nil
}

// rateWaitError: the host's rate limiter could not grant a token before ctx's deadline
// (the limiter says so at once when the wait would outlast it). It is a timeout.
type rateWaitError struct {
	host  string
	limit float64
}

func (e *rateWaitError) Error() string {
	return fmt.Sprintf("timed out waiting for the per-host rate limit of %s (%g requests a second; raise the task's RateLimit or the step's timeout)", e.host, e.limit)
}
func (e *rateWaitError) Unwrap() error { return context.DeadlineExceeded }
func (e *rateWaitError) Timeout() bool { return true }
