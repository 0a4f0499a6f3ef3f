package fetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/external"
)

// maxSwitches bounds how many leases one request tries when the site refuses them.
const maxSwitches = 4

type lendingKey struct{}

type lending struct {
	lender external.Lender
	scope  external.Scope
}

// WithResources makes requests under ctx borrow what scope needs from lender (the
// Resources middleware does the borrowing).
func WithResources(ctx context.Context, lender external.Lender, scope external.Scope) context.Context {
	if lender == nil || len(scope.Needs) == 0 {
		return ctx
	}
	return context.WithValue(ctx, lendingKey{}, lending{lender, scope})
}

// Resources lends a task what it declares in Needs (proxy, user_agent, cookie,
// device_id, sign), per request, when the request's context carries a lender
// (WithResources); other requests pass through untouched. It guarantees:
//
//   - the request goes out with an item of each kind checked out of its pool: the
//     Cookie, User-Agent and device-id headers set and the signature applied
//     (external.Lease.Prepare), through the leased proxy;
//   - every item goes back with the verdict the answer means — the site's ban rule
//     (external.RegisterBanRule) reads the Response's status and headers as they came
//     back through the chain, whatever the status; no answer at all is a strike
//     against the proxy;
//   - a ban or throttle is retried at once with other items, up to 4 leases; when
//     every one was refused the request fails with an *Error that the engine retries
//     later, once the pools have moved on;
//   - a rejected signature fails permanently with the ban rule's cause, and an empty
//     pool fails with an external.WaitError wrapped in crawl.RetryAfter, which the
//     engine waits out without counting it against the input.
//
// It sits outside robots.txt and Retry, so one lease covers its request's robots.txt
// read and in-process retries, and the verdict is about the last answer.
func Resources() crawl.Middleware {
	return func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			l, ok := ctx.Value(lendingKey{}).(lending)
			if !ok || r == nil {
				return next.Fetch(ctx, r)
			}
			return l.fetch(ctx, next, r)
		})
	}
}

type pinnedKey struct{}

// Pin borrows what ctx's scope needs once, for every request made under the returned
// context: a page a browser renders is one visit, with one session, device and proxy
// for the document and all it loads. done gives the items back with the verdict of
// the page's own answer. Without a lender in ctx, lease is nil and done does nothing.
func Pin(ctx context.Context) (pinned context.Context, lease *external.Lease, done func(*crawl.Response, error), err error) {
	l, ok := ctx.Value(lendingKey{}).(lending)
	if !ok {
		return ctx, nil, func(*crawl.Response, error) {}, nil
	}
	lease, err = l.lender.Lend(ctx, l.scope)
	if err != nil {
		var w *external.WaitError
		if errors.As(err, &w) {
			err = crawl.RetryAfter(err, w.After)
		}
		return ctx, nil, nil, err
	}
	done = func(resp *crawl.Response, err error) {
		status, header := answerOf(resp, err)
		lease.Return(context.WithoutCancel(ctx), lease.Judge(status, header, err))
	}
	return context.WithValue(ctx, pinnedKey{}, lease), lease, done, nil
}

func (l lending) fetch(ctx context.Context, next crawl.Fetcher, r *crawl.Request) (*crawl.Response, error) {
	if lease, ok := ctx.Value(pinnedKey{}).(*external.Lease); ok {
		req, err := lease.Prepare(ctx, r)
		if err != nil {
			return nil, crawl.Permanent(err)
		}
		if lease.Proxy != "" {
			ctx = context.WithValue(ctx, proxyKey{}, lease.Proxy)
		}
		return next.Fetch(ctx, req)
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
		lctx := ctx
		if lease.Proxy != "" {
			lctx = context.WithValue(ctx, proxyKey{}, lease.Proxy)
		}
		resp, err := next.Fetch(lctx, req)
		status, header := answerOf(resp, err)
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
	return nil, &Error{Method: methodOf(r), URL: r.URL, Attempts: len(refused),
		Err: fmt.Errorf("refused with %d different leases: %v", len(refused), refused)}
}

// answerOf is the status and headers the site answered with: the response's, else the
// status an *Error kept (a body too large, too many redirects), else none.
func answerOf(resp *crawl.Response, err error) (int, http.Header) {
	if resp != nil {
		return resp.Status, resp.Header
	}
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Status, nil
	}
	return 0, nil
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
