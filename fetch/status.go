package fetch

import (
	"context"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// StatusCheck is where a status gets its meaning, and the only place: an answer the
// request accepts (crawl.Request.Accept; 2xx and 304 by default) is returned as the
// Response, and any other fails the request with an *Error naming the method, the URL,
// the status and the attempts, e.g. `GET http://site/item/3: HTTP 500 Internal Server
// Error (3 attempts)`. The error is
//
//   - retryable when crawl.RetryableStatus says so (408, 429, 5xx but 501 and 505), and
//     then carries the answer's Retry-After to the engine with crawl.RetryAfter;
//   - crawl.Permanent otherwise (other 3xx, 4xx, 501, 505);
//   - of the cause crawl.HTTPCause(status) in the run's failures (http_404, http_5xx …).
//
// It is the outermost layer of fetch.New's chain, so every middleware inside it —
// user middlewares, resource lending and ban rules, Retry — sees every answer as a
// Response, whatever its status.
func StatusCheck() crawl.Middleware {
	return func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			resp, err := next.Fetch(ctx, r)
			if err != nil || r.Accepts(resp.Status) {
				return resp, err
			}
			return nil, statusError(r, resp)
		})
	}
}

// statusError is the error of an answer the request does not accept.
func statusError(r *crawl.Request, resp *crawl.Response) error {
	e := &Error{Method: methodOf(r), URL: r.URL, Status: resp.Status, Attempts: resp.Attempts}
	if !crawl.RetryableStatus(resp.Status) {
		return crawl.Permanent(e)
	}
	if d, ok := crawl.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok && d > 0 {
		return crawl.RetryAfter(e, d)
	}
	return e
}
