package crawl

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// FetcherFunc adapts a function into a Fetcher.
type FetcherFunc func(ctx context.Context, req *Request) (*Response, error)

// Fetch calls f.
func (f FetcherFunc) Fetch(ctx context.Context, req *Request) (*Response, error) { return f(ctx, req) }

// Middleware wraps a Fetcher in one concern — a header, a count, a signature, a retry —
// and returns the wrapped Fetcher. Inside the engine's chain every middleware gets the
// Response of every answer, whatever its status; only the outermost layer
// (fetch.StatusCheck) turns answers the request does not accept into errors. A
// middleware must be safe for concurrent use: one chain serves every task of a worker.
//
//	func TeamHeader(team string) crawl.Middleware {
//		return func(next crawl.Fetcher) crawl.Fetcher {
//			return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
//				cp := *r // requests are shared with the caller: change a copy
//				cp.Header = r.Header.Clone()
//				if cp.Header == nil {
//					cp.Header = http.Header{}
//				}
//				cp.Header.Set("X-Team", team)
//				return next.Fetch(ctx, &cp)
//			})
//		}
//	}
type Middleware func(next Fetcher) Fetcher

// Wrap puts f inside the middlewares: the first is the outermost, so it sees the request
// first and the answer last.
func Wrap(f Fetcher, mws ...Middleware) Fetcher {
	for i := len(mws) - 1; i >= 0; i-- {
		if mws[i] != nil {
			f = mws[i](f)
		}
	}
	return f
}

// MiddlewareFactory builds a middleware from the params a chain file gives it (nil when
// it gives none). It runs when a chain is validated and once per batch, so it only
// checks and compiles its params: an error names the param and the fix.
type MiddlewareFactory func(params map[string]any) (Middleware, error)

// MiddlewareRef names a registered middleware and its params, as a chain file lists it
// under `middlewares:`. It travels in plans through workflow history, so it holds data
// only.
type MiddlewareRef struct {
	Name   string         `json:"name"`
	Params map[string]any `json:"params,omitempty"`
	Line   int            `json:"-"`
}

var middlewares = struct {
	sync.RWMutex
	byName map[string]MiddlewareFactory
}{byName: map[string]MiddlewareFactory{}}

var middlewareName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// RegisterMiddleware makes a middleware available to chain files under name (lowercase
// letters, digits and _). Like Register, it panics on a bad or duplicate name: that is a
// programming error found the first time the binary starts.
func RegisterMiddleware(name string, f MiddlewareFactory) {
	if !middlewareName.MatchString(name) {
		panic(fmt.Sprintf("crawl: middleware name %q must be lowercase letters, digits and _", name))
	}
	middlewares.Lock()
	defer middlewares.Unlock()
	if _, dup := middlewares.byName[name]; dup {
		panic(fmt.Sprintf("crawl: middleware %q registered twice", name))
	}
	middlewares.byName[name] = f
}

// MiddlewareNames lists the registered middlewares, sorted.
func MiddlewareNames() []string {
	middlewares.RLock()
	defer middlewares.RUnlock()
	out := make([]string, 0, len(middlewares.byName))
	for n := range middlewares.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// BuildMiddlewares makes the middlewares refs name, in order. The error names the
// first unknown middleware (with the registered ones) or the first bad params.
func BuildMiddlewares(refs []MiddlewareRef) ([]Middleware, error) {
	out := make([]Middleware, 0, len(refs))
	for _, ref := range refs {
		mw, err := buildMiddleware(ref)
		if err != nil {
			return nil, err
		}
		out = append(out, mw)
	}
	return out, nil
}

func buildMiddleware(ref MiddlewareRef) (Middleware, error) {
	middlewares.RLock()
	f, ok := middlewares.byName[ref.Name]
	middlewares.RUnlock()
	if !ok {
		names := MiddlewareNames()
		known := "none are registered"
		if len(names) > 0 {
			known = "registered middlewares: " + strings.Join(names, ", ")
		}
		return nil, fmt.Errorf("unknown middleware %q%s; %s", ref.Name, Suggest(ref.Name, names), known)
	}
	mw, err := f(ref.Params)
	if err != nil {
		return nil, fmt.Errorf("middleware %s: %w", ref.Name, err)
	}
	if mw == nil {
		return nil, fmt.Errorf("middleware %s: its factory returned no middleware", ref.Name)
	}
	return mw, nil
}
