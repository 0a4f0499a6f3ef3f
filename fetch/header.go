package fetch

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	"github.com/trawlerhq/trawler/crawl"
)

// SetHeaders sets each of h's headers on every request, replacing what the task set
// under the same name. It changes a copy: the task's request is left as it made it.
// Registered for chain files as `header`:
//
//	middlewares:
//	  - header: {X-Team: news, Accept-Language: en}
//
// Inside the chain it sits outside resource lending, so a leased cookie or user agent
// still overrides a header of the same name, and a signer signs the final request.
func SetHeaders(h http.Header) crawl.Middleware {
	h = h.Clone()
	return func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			if r == nil || len(h) == 0 {
				return next.Fetch(ctx, r)
			}
			cp := *r
			cp.Header = r.Header.Clone()
			if cp.Header == nil {
				cp.Header = http.Header{}
			}
			for k, vs := range h {
				cp.Header[k] = append([]string(nil), vs...)
			}
			return next.Fetch(ctx, &cp)
		})
	}
}

// headerParams reads the `header` middleware's params: header name → text value.
func headerParams(params map[string]any) (http.Header, error) {
	if len(params) == 0 {
		return nil, fmt.Errorf("give the headers to set, e.g. header: {X-Team: news}")
	}
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	sort.Strings(names)
	h := http.Header{}
	for _, k := range names {
		switch v := params[k].(type) {
		case string, int, int64, float64, bool:
			if err := crawl.CheckHeader(k, fmt.Sprint(v)); err != nil {
				return nil, err
			}
			h.Set(k, fmt.Sprint(v))
		default:
			return nil, fmt.Errorf("header %s: want a text value, got %v (%T); quote it", k, v, v)
		}
	}
	return h, nil
}

func init() {
	crawl.RegisterMiddleware("header", func(params map[string]any) (crawl.Middleware, error) {
		h, err := headerParams(params)
		if err != nil {
			return nil, err
		}
		return SetHeaders(h), nil
	})
}
