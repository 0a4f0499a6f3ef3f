package es

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// Client is go-elasticsearch's REST API (its esapi package) over its transport: what
// the sink, `trawler search`, `trawler export` and the console speak. It is built here
// rather than with the module's root package, which also compiles the typed API: some
// 3,700 generated files that nothing here uses, a minute of CPU on every first build.
type Client = esapi.API

// NewClient connects a Client to addresses with the auth. As go-elasticsearch's own
// client does, it takes user:password@ from the first address and, on the first answer
// that succeeds, checks that Elasticsearch sent it. The transport's retries are off:
// callers retry with their own backoff. transport may be nil (http.DefaultTransport).
func (a Auth) NewClient(addresses []string, transport http.RoundTripper) (*Client, error) {
	if len(addresses) == 0 {
		return nil, errors.New("no Elasticsearch address")
	}
	var urls []*url.URL
	for _, addr := range addresses {
		u, err := url.Parse(strings.TrimRight(addr, "/"))
		if err != nil {
			return nil, fmt.Errorf("cannot parse Elasticsearch address: %v", err)
		}
		urls = append(urls, u)
	}
	if u := urls[0].User; u != nil && a.Username == "" && a.APIKey == "" {
		a.Username = u.Username()
		a.Password, _ = u.Password()
	}
	tp, err := elastictransport.NewClient(
		elastictransport.WithURLs(urls...), elastictransport.WithBasicAuth(a.Username, a.Password),
		elastictransport.WithAPIKey(a.APIKey), elastictransport.WithCACert(a.CACert),
		elastictransport.WithTransport(transport), elastictransport.WithDisableRetry(),
	)
	if err != nil {
		return nil, err
	}
	return esapi.New(&productChecked{Transport: tp}), nil
}

// productChecked refuses answers from a server that is not Elasticsearch (a proxy's
// page, another service on the port) until one carries Elasticsearch's header.
type productChecked struct {
	esapi.Transport
	ok atomic.Bool
}

func (p *productChecked) Perform(req *http.Request) (*http.Response, error) {
	res, err := p.Transport.Perform(req)
	if err != nil || p.ok.Load() || res.StatusCode < 200 || res.StatusCode >= 300 {
		return res, err
	}
	if res.Header.Get("X-Elastic-Product") != "Elasticsearch" {
		res.Body.Close()
		return nil, fmt.Errorf("the server at %s did not answer as Elasticsearch (no X-Elastic-Product: Elasticsearch header); check the address", req.URL.Host)
	}
	p.ok.Store(true)
	return res, nil
}
