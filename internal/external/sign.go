package external

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// Signer signs a request just before it is sent, after the leased cookie, user agent
// and device id are in its headers: it may rewrite the URL (a signature parameter) and
// set headers.
type Signer interface {
	Sign(ctx context.Context, r *crawl.Request) error
}

// SignerFunc adapts a function into a Signer.
type SignerFunc func(ctx context.Context, r *crawl.Request) error

// Sign calls f.
func (f SignerFunc) Sign(ctx context.Context, r *crawl.Request) error { return f(ctx, r) }

var registry = struct {
	sync.RWMutex
	signers  map[string]Signer
	solvers  map[string]Solver
	banRules map[string]BanRule
}{signers: map[string]Signer{}, solvers: map[string]Solver{}, banRules: map[string]BanRule{}}

// RegisterSigner names a signer. A site registers its own under the site's name (a task
// of site "demo" that needs sign uses "demo"); a pool config may pick another by name.
func RegisterSigner(name string, s Signer) {
	registry.Lock()
	defer registry.Unlock()
	registry.signers[name] = s
}

// RegisterBanRule sets how a site's answers are read for bans and throttles.
func RegisterBanRule(site string, r BanRule) {
	registry.Lock()
	defer registry.Unlock()
	registry.banRules[site] = r
}

func banRule(site string) BanRule {
	registry.RLock()
	defer registry.RUnlock()
	return registry.banRules[site]
}

// signerFor finds the scope's signer: the one its sign pool config names (a registered
// name or an HTTP service URL), else the one the site registered.
func (p *Pools) signerFor(ctx context.Context, s Scope) (Signer, string, error) {
	cfg, err := p.Config(ctx, s.Tenant, s.Site, Sign)
	if err != nil {
		return nil, "", err
	}
	name := cfg.Signer
	if name == "" {
		name = s.Site
	}
	if strings.HasPrefix(name, "http://") || strings.HasPrefix(name, "https://") {
		return HTTPSigner(name), name, nil
	}
	registry.RLock()
	signer, ok := registry.signers[name]
	registry.RUnlock()
	if !ok {
		return nil, "", crawl.Permanentf("the task needs sign but no signer %q is registered (tenant %s, site %s): a site registers one with external.RegisterSigner, or point the tenant at a signing service with `trawler pool add sign --site %s --signer URL`", name, s.Tenant, s.Site, s.Site)
	}
	return signer, name, nil
}

// SignRequest is what an HTTP signing service receives (POST, JSON).
type SignRequest struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    []byte            `json:"body,omitempty"` // base64 in JSON
}

// SignResponse is what it answers: the URL to request and headers to set.
type SignResponse struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// HTTPSigner signs through a signing service: it posts a SignRequest to url and applies
// the SignResponse.
func HTTPSigner(url string) Signer {
	return SignerFunc(func(ctx context.Context, r *crawl.Request) error {
		in := SignRequest{Method: r.Method, URL: r.URL, Headers: map[string]string{}, Body: r.Body}
		for k := range r.Header {
			in.Headers[k] = r.Header.Get(k)
		}
		var out SignResponse
		if err := postJSON(ctx, url, in, &out); err != nil {
			return fmt.Errorf("signing service: %w", err)
		}
		if out.URL == "" {
			return fmt.Errorf("signing service %s answered without a url", url)
		}
		r.URL = out.URL
		for k, v := range out.Headers {
			r.Header.Set(k, v)
		}
		return nil
	})
}

var serviceClient = &http.Client{Timeout: 15 * time.Second}

// postJSON posts in to a service and decodes its JSON answer into out.
func postJSON(ctx context.Context, url string, in, out any) error {
	b, _ := json.Marshal(in)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := serviceClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: HTTP %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("POST %s: unreadable answer: %w", url, err)
	}
	return nil
}

// QuerySignature is the HMAC-SHA256 (hex) of a URL path and its query parameters —
// sorted, without "sig" — that sites like the demo use to sign API requests.
func QuerySignature(secret []byte, path string, q url.Values) string {
	c := url.Values{}
	for k, v := range q {
		if k != "sig" {
			c[k] = v
		}
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(path + "?" + c.Encode()))
	return hex.EncodeToString(m.Sum(nil))
}

// HMACSigner signs a request's query: it sets "ts" (Unix seconds) and "sig"
// (QuerySignature with secret).
func HMACSigner(secret []byte) Signer {
	return SignerFunc(func(ctx context.Context, r *crawl.Request) error {
		u, err := url.Parse(r.URL)
		if err != nil {
			return err
		}
		q := u.Query()
		q.Set("ts", strconv.FormatInt(time.Now().Unix(), 10))
		q.Set("sig", QuerySignature(secret, u.Path, q))
		u.RawQuery = q.Encode()
		r.URL = u.String()
		return nil
	})
}
