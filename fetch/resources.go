package fetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"trawler/crawl"
	"trawler/external"
)

// A task that declares Needs (proxy, user_agent, cookie, device_id, sign) gets them
// injected here, per request: the items are checked out of their pools, put into the
// request (Cookie, User-Agent and device-id headers, the proxy, the signature), and
// returned with the outcome the site's answer implies — success, ban, throttle or a
// strike. A ban or throttle is retried at once with other items, up to maxSwitches
// times; an empty pool fails the request with an external.WaitError, which the engine
// retries later without counting it against the input.

// maxSwitches bounds how many leases one request tries when the site refuses them.
const maxSwitches = 4

type lendingKey struct{}

type lending struct {
	lender external.Lender
	scope  external.Scope
}

// WithResources makes requests under ctx borrow what scope needs from lender.
func WithResources(ctx context.Context, lender external.Lender, scope external.Scope) context.Context {
	if lender == nil || len(scope.Needs) == 0 {
		return ctx
	}
	return context.WithValue(ctx, lendingKey{}, lending{lender, scope})
}

// Fetch performs r and returns the fully read response of a 2xx (or 304) answer, with
// the resources its context asks for (WithResources). See the package documentation
// for what it guarantees; every error but an external.WaitError is an *Error.
func (f *Fetcher) Fetch(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
	l, ok := ctx.Value(lendingKey{}).(lending)
	if !ok || r == nil {
		return f.fetch(ctx, r)
	}
	var refused []string
	for range maxSwitches {
		lease, err := l.lender.Lend(ctx, l.scope)
		if err != nil {
			var w *external.WaitError
			if errors.As(err, &w) {
				return nil, crawl.RetryAfter(err, w.After)
			}
			return nil, err
		}
		req, err := lease.Prepare(ctx, r)
		if err != nil {
			lease.Return(context.WithoutCancel(ctx), external.Verdict{Outcome: external.Released})
			return nil, crawl.Permanent(err)
		}
		ans := &answer{}
		actx := context.WithValue(ctx, answerKey{}, ans)
		if lease.Proxy != "" {
			actx = context.WithValue(actx, proxyKey{}, lease.Proxy)
		}
		resp, err := f.fetch(actx, req)
		status, header := ans.last()
		v := lease.Judge(status, header, err)
		what := lease.Return(context.WithoutCancel(ctx), v)
		switch {
		case v.Err != nil:
			return nil, crawl.Permanent(fmt.Errorf("%s %s: %w", req.Method, crawl.RedactURL(r.URL), v.Err))
		case (v.Outcome == external.Banned || v.Outcome == external.Throttled) && what != "" && ctx.Err() == nil:
			refused = append(refused, fmt.Sprintf("%s (%s)", statusLine(status), what))
			continue
		}
		return resp, err
	}
	// Every lease was refused: the input is retried later, when bans and throttles have
	// moved the pools on.
	return nil, &Error{Method: r.Method, URL: r.URL, Attempts: len(refused),
		Err: fmt.Errorf("refused with %d different leases: %v", len(refused), refused)}
}

// answer records the status and headers of the last answer a request got, for the
// site's ban rule (the fetcher turns non-2xx answers into errors without them).
type answer struct {
	mu     sync.Mutex
	status int
	header http.Header
}

type answerKey struct{}

func (a *answer) last() (int, http.Header) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status, a.header
}

// observe records an answer for the request's lease, if it has one.
func observe(ctx context.Context, status int, header http.Header) {
	if a, ok := ctx.Value(answerKey{}).(*answer); ok {
		a.mu.Lock()
		a.status, a.header = status, header.Clone()
		a.mu.Unlock()
	}
}

type proxyKey struct{}

// proxyFor sends a request through its lease's proxy, else the environment's.
func proxyFor(req *http.Request) (*url.URL, error) {
	if p, ok := req.Context().Value(proxyKey{}).(string); ok {
		u, err := url.Parse(p)
		if err != nil {
			// url.Parse quotes the whole URL, password included: say only what is wrong.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, fmt.Errorf("proxy %s from the pool is not a URL: %v (fix or remove it with trawler pool remove)", crawl.RedactURL(p), err)
		}
		return u, nil
	}
	return http.ProxyFromEnvironment(req)
}
