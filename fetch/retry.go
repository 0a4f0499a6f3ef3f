package fetch

import (
	"context"
	"errors"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// Retry retries in-process what another attempt may cure, and returns the last answer
// or error. It guarantees:
//
//   - an answer the request does not accept is retried when crawl.RetryableStatus says
//     a retry may help (408, 429, 5xx but 501 and 505); a network error or a timeout is
//     retried likewise; at most Retries retries, so Retries+1 attempts;
//   - between attempts it sleeps for the answer's Retry-After when that is at most
//     MaxRetryWait, else for Backoff doubling on each retry (capped at a minute). An
//     answer whose Retry-After is longer than MaxRetryWait is returned at once, so the
//     engine waits it out durably instead of this worker holding a slot;
//   - the returned Response or *Error counts every request sent in Attempts; waiting
//     ends when ctx does, with ctx's error and the last status seen.
//
// It sits inside robots.txt (a disallowed URL is never retried) and outside
// Politeness, so every attempt waits for its own host slot and rate token and a
// sleeping retry holds neither.
func Retry(o Options) crawl.Middleware {
	o = o.withDefaults()
	return func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			sent, lastStatus := 0, 0
			for attempt := 1; ; attempt++ {
				resp, err := next.Fetch(ctx, r)
				var fe *Error
				switch {
				case err != nil && errors.As(err, &fe):
					sent += fe.Attempts
					fe.Attempts, lastStatus = sent, fe.Status
					if !fe.retry || attempt > o.Retries || ctx.Err() != nil {
						return nil, err
					}
				case err != nil:
					return nil, err // not an exchange: nothing a retry here can change
				default:
					sent += resp.Attempts
					resp.Attempts = sent
					lastStatus = resp.Status
					if r.Accepts(resp.Status) || !crawl.RetryableStatus(resp.Status) || attempt > o.Retries {
						return resp, nil
					}
				}
				wait := o.backoff(attempt)
				if resp != nil {
					if d, ok := crawl.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok && d > 0 {
						if d > o.MaxRetryWait {
							return resp, nil
						}
						wait = d
					}
				}
				if err := Sleep(ctx, wait); err != nil {
					return nil, &Error{Method: methodOf(r), URL: r.URL, Status: lastStatus, Attempts: sent, Err: err}
				}
			}
		})
	}
}

// backoff is the pause after the attempt-th failed attempt without a Retry-After.
func (o Options) backoff(attempt int) time.Duration {
	d := o.Backoff
	for i := 1; i < attempt && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, max(maxBackoff, o.Backoff))
}

// Sleep waits d, or until ctx ends (with its error).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
