package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/trawlerhq/trawler/crawl"
)

// testFetcher is a minimal crawl.Fetcher over net/http: no retries, no politeness, a
// body size limit.
type testFetcher struct {
	client *http.Client
	limit  int64
}

var errTooLarge = errors.New("response body too large")

func newTestFetcher() *testFetcher {
	return &testFetcher{client: &http.Client{}, limit: 4 << 20}
}

func (f *testFetcher) Fetch(ctx context.Context, req *crawl.Request) (*crawl.Response, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	r, err := http.NewRequestWithContext(ctx, method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return nil, err
	}
	for k, vs := range req.Header {
		r.Header[k] = vs
	}
	resp, err := f.client.Do(r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > f.limit {
		return nil, fmt.Errorf("%s: %w (over %d bytes)", req.URL, errTooLarge, f.limit)
	}
	return &crawl.Response{
		URL:    resp.Request.URL.String(),
		Status: resp.StatusCode,
		Header: resp.Header,
		Body:   body,
	}, nil
}
