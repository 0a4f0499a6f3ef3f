package console

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/external"
)

const (
	fullToken = "full-secret-token"
	readToken = "read-secret"
)

// guarded is a console of the shared stack with both tokens, and its routes.
func guarded(t *testing.T, edit func(*Config)) (*Server, *httptest.Server) {
	t.Helper()
	cfg := stack.cfg
	cfg.Token, cfg.ReadToken = fullToken, readToken
	cfg.AuthFailLimit = 1000 // the route walks send many wrong tokens on purpose
	if edit != nil {
		edit(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	return srv, ts
}

// send makes one request with the Authorization header as given ("" for none) and
// returns the status and body.
func send(t *testing.T, method, url, auth, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}

var wildcard = regexp.MustCompile(`\{([a-z]+)(\.\.\.)?\}|\{\$\}`)

// paths expands a route pattern's path into the paths to call: each wildcard takes
// every value vals has for it ("x" when it has none).
func paths(pattern string, vals map[string][]string) []string {
	_, path, ok := strings.Cut(pattern, " ")
	if !ok {
		path = pattern
	}
	if strings.HasSuffix(path, "/") && !strings.Contains(path, "{") {
		path += "x" // a subtree pattern: any path under it
	}
	out := []string{""}
	rest := path
	for {
		loc := wildcard.FindStringSubmatchIndex(rest)
		if loc == nil {
			break
		}
		lit := rest[:loc[0]]
		var choices []string
		switch {
		case rest[loc[0]:loc[1]] == "{$}":
			choices = []string{""}
		default:
			choices = vals[rest[loc[2]:loc[3]]]
			if len(choices) == 0 {
				choices = []string{"x"}
			}
		}
		var next []string
		for _, o := range out {
			for _, c := range choices {
				next = append(next, o+lit+c)
			}
		}
		out, rest = next, rest[loc[1]:]
	}
	for i := range out {
		out[i] += rest
	}
	return out
}

// TestEveryRouteChecksTheToken walks the routes the console registers: every route but
// the pages and /healthz needs a token, and every route that changes something refuses
// the read-only token — so a route added later cannot slip past the check.
func TestEveryRouteChecksTheToken(t *testing.T) {
	srv, ts := guarded(t, nil)
	routes := srv.Routes()
	if len(routes) < 20 {
		t.Fatalf("only %d routes registered: %v", len(routes), routes)
	}
	writes := 0
	for _, rt := range routes {
		method := rt.Method()
		for _, path := range paths(rt.Pattern, nil) {
			if rt.Open {
				if method != http.MethodGet || strings.HasPrefix(path, "/api/") || path == "/metrics" {
					t.Errorf("route %s needs no token, but it is not a page", rt.Pattern)
				}
				continue
			}
			methods := []string{method}
			if method == "" {
				methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}
			}
			for _, m := range methods {
				status, body := send(t, m, ts.URL+path, "", "")
				if status != http.StatusUnauthorized || !strings.Contains(body, `"field":"Authorization"`) {
					t.Errorf("%s %s (route %s) without a token: %d %s, want 401", m, path, rt.Pattern, status, body)
				}
				if status, _ := send(t, m, ts.URL+path, "Bearer "+readToken+"x", ""); status != http.StatusUnauthorized {
					t.Errorf("%s %s with a wrong token: %d, want 401", m, path, status)
				}
				if adminRoutes[rt.Pattern] != "" {
					if status, body := send(t, m, ts.URL+path, "Bearer "+readToken, ""); status != http.StatusForbidden || !strings.Contains(body, "only an admin token") {
						t.Errorf("read token %s %s (admin only): %d %s, want 403", m, path, status, body)
					}
					continue
				}
				if m == http.MethodGet || m == http.MethodHead || readPOSTs[rt.Pattern] {
					if status, body := send(t, m, ts.URL+path, "Bearer "+readToken, ""); status == http.StatusUnauthorized || status == http.StatusForbidden {
						t.Errorf("read token %s %s: %d %s, want it let through", m, path, status, body)
					}
					continue
				}
				writes++
				status, body = send(t, m, ts.URL+path, "Bearer "+readToken, `{"chain":"demo"}`)
				if status != http.StatusForbidden || !strings.Contains(body, "read-only") {
					t.Errorf("read token %s %s (route %s): %d %s, want 403", m, path, rt.Pattern, status, body)
				}
			}
		}
	}
	if writes < 7 {
		t.Errorf("checked %d state-changing routes; the console has at least 7", writes)
	}
	// The documented read POSTs are routes the console has, so the exception is not stale.
	for p := range readPOSTs {
		found := false
		for _, rt := range routes {
			found = found || rt.Pattern == p
		}
		if !found {
			t.Errorf("read-allowed %s is not a route", p)
		}
	}
}

// A route that changes something, or serves data, cannot be registered without the
// token check.
func TestOpenRoutesArePagesOnly(t *testing.T) {
	srv, _ := guarded(t, nil)
	for _, pattern := range []string{"POST /chains", "DELETE /x", "GET /api/anything", "GET /metrics/x", "/everything"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("open(%q) was accepted", pattern)
				}
			}()
			srv.open(pattern, http.NotFoundHandler())
		}()
	}
}

// TestReadTokenSeesNoPoolSecret walks every GET route with pools holding a cookie bound
// to a device, a proxy with a password and a signer with a key: no answer to the
// read-only token holds a secret, the full token sees them only with reveal=1, and the
// read-only token's reveal=1 is refused.
func TestReadTokenSeesNoPoolSecret(t *testing.T) {
	runID := demoRun(t)
	rdb := redis.NewClient(&redis.Options{Addr: stack.redis.Addr()})
	defer rdb.Close()
	p := external.NewPools(rdb, quiet)
	ctx := context.Background()
	const (
		tenant  = "secrets"
		cookie  = "sid=c00kie-v4lue-0123456789abcdef"
		proxy   = "http://bob:hunter2pw@127.0.0.1:3129"
		device  = "d3vice-t0ken-0123456789"
		signKey = "s1gner-k3y"
	)
	if err := p.Add(ctx, tenant, "demo", external.Cookie, external.Resource{ID: "reader1", Value: cookie, Attrs: map[string]string{"device_id": device}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(ctx, tenant, "demo", external.Proxy, external.Resource{Value: proxy}); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(ctx, tenant, "demo", external.DeviceID, external.Resource{Value: device}); err != nil {
		t.Fatal(err)
	}
	if err := p.Configure(ctx, tenant, "demo", external.Sign, external.Config{Signer: "https://sign.internal/sign?key=" + signKey}); err != nil {
		t.Fatal(err)
	}
	secrets := []string{"c00kie-v4lue", "hunter2pw", "d3vice-t0ken", signKey}
	leaked := func(body string) string {
		for _, s := range secrets {
			if strings.Contains(body, s) {
				return s
			}
		}
		return ""
	}

	srv, ts := guarded(t, nil)
	vals := map[string][]string{
		"id": {runID}, "tenant": {tenant}, "site": {"demo"}, "kind": {"cookie", "proxy", "device_id", "sign"},
		"biz": {"demo.story"}, "key": {"demo:story:1"}, "name": {"demo"},
	}
	gets := 0
	for _, rt := range srv.Routes() {
		if m := rt.Method(); m != http.MethodGet && m != "" {
			continue
		}
		for _, path := range paths(rt.Pattern, vals) {
			for _, q := range []string{"", "?tenant=" + tenant} {
				gets++
				for _, auth := range []string{"Bearer " + readToken, "Bearer " + fullToken} {
					status, body := send(t, http.MethodGet, ts.URL+path+q, auth, "")
					if s := leaked(body); s != "" {
						t.Errorf("GET %s%s (%s): %d shows %q: %.300s", path, q, auth[:12], status, s, body)
					}
				}
				status, body := send(t, http.MethodGet, ts.URL+path+q+map[bool]string{true: "&", false: "?"}[q != ""]+"reveal=1", "Bearer "+readToken, "")
				if s := leaked(body); s != "" {
					t.Errorf("GET %s reveal=1 (read token): %d shows %q", path, status, s)
				}
				if strings.HasPrefix(path, "/api/pools") && (status != http.StatusForbidden || !strings.Contains(body, `"field":"reveal"`) || !strings.Contains(body, "full-access token")) {
					t.Errorf("GET %s reveal=1 with the read token: %d %s, want 403 naming reveal", path, status, body)
				}
			}
		}
	}
	if gets < 20 {
		t.Errorf("walked only %d GET paths", gets)
	}

	// Masked, the items still say what they are.
	status, out := call(t, ts.URL, "GET", "/api/pools/"+tenant+"/demo/proxy", readToken, nil)
	if it := obj(list(out["items"])[0]); status != http.StatusOK || it["id"] != external.ItemID(proxy) || it["value"] != "http://bob:***@127.0.0.1:3129" {
		t.Errorf("masked proxy: %d %v", status, out)
	}
	status, out = call(t, ts.URL, "GET", "/api/pools/"+tenant+"/demo/cookie", readToken, nil)
	if it := obj(list(out["items"])[0]); status != http.StatusOK || it["id"] != "reader1" || !strings.HasPrefix(it["value"].(string), "sid=…") {
		t.Errorf("masked cookie: %d %v", status, out)
	}
	// The full token sees the values only when it asks.
	for kind, want := range map[string]string{"cookie": cookie, "proxy": proxy, "device_id": device} {
		status, body := send(t, http.MethodGet, ts.URL+"/api/pools/"+tenant+"/demo/"+kind+"?reveal=1", "Bearer "+fullToken, "")
		if status != http.StatusOK || !strings.Contains(body, want) || !strings.Contains(body, `"revealed":true`) {
			t.Errorf("full token reveal %s: %d %.300s", kind, status, body)
		}
	}
	status, body := send(t, http.MethodGet, ts.URL+"/api/pools?tenant="+tenant+"&reveal=1", "Bearer "+fullToken, "")
	if status != http.StatusOK || !strings.Contains(body, proxy) || !strings.Contains(body, signKey) {
		t.Errorf("full token reveal of every pool: %d %.300s", status, body)
	}
	if status, body := send(t, http.MethodGet, ts.URL+"/api/pools?reveal=yes", "Bearer "+fullToken, ""); status != http.StatusBadRequest || !strings.Contains(body, `"field":"reveal"`) {
		t.Errorf("reveal=yes: %d %s", status, body)
	}
}

// TestBodyLimit: a body past the limit is answered 413 naming the limit, whether it
// announces its length or is sent in chunks.
func TestBodyLimit(t *testing.T) {
	_, ts := guarded(t, func(c *Config) { c.MaxBody = 1 << 10 })
	big := `{"source":"` + strings.Repeat("x", 2<<10) + `"}`
	for _, path := range []string{"/api/runs", "/api/chains/validate", "/api/search", "/api/schedules"} {
		status, body := send(t, http.MethodPost, ts.URL+path, "Bearer "+fullToken, big)
		if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, `"field":"body"`) || !strings.Contains(body, "1 KiB") {
			t.Errorf("POST %s, 2 KiB: %d %s", path, status, body)
		}
		// Without a length: the read stops at the limit.
		req, _ := http.NewRequest(http.MethodPost, ts.URL+path, io.MultiReader(strings.NewReader(big)))
		req.Header.Set("Authorization", "Bearer "+fullToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), "1 KiB (1024 bytes)") {
			t.Errorf("POST %s, 2 KiB chunked: %d %s", path, res.StatusCode, raw)
		}
	}
	// Under the limit, a body is read as before.
	if status, body := send(t, http.MethodPost, ts.URL+"/api/chains/validate", "Bearer "+readToken, `{"source":"name: x\nsteps:\n  - id: a\n    task: demo.feed\n"}`); status != http.StatusOK {
		t.Errorf("small body: %d %s", status, body)
	}
	// The default is 1 MiB.
	status, body := send(t, http.MethodPost, stack.console.URL+"/api/chains/validate", "", `{"source":"`+strings.Repeat("x", 1<<20)+`"}`)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "1 MiB") {
		t.Errorf("default limit: %d %.200s", status, body)
	}
	cfg := stack.cfg
	cfg.MaxBody = -1
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "max body") {
		t.Errorf("negative limit: %v", err)
	}
}

// TestAuthScheme: the scheme is read case-insensitively; anything else is refused.
func TestAuthScheme(t *testing.T) {
	_, ts := guarded(t, nil)
	for _, auth := range []string{"Bearer " + fullToken, "bearer " + fullToken, "BEARER " + fullToken, "Bearer   " + fullToken + " "} {
		if status, body := send(t, http.MethodGet, ts.URL+"/api/schedules", auth, ""); status != http.StatusOK {
			t.Errorf("%q: %d %s", auth, status, body)
		}
	}
	if status, _ := send(t, http.MethodDelete, ts.URL+"/api/schedules/none", "bearer "+readToken, ""); status != http.StatusForbidden {
		t.Errorf("lower-case scheme with the read token, DELETE: %d, want 403", status)
	}
	for _, auth := range []string{"Basic " + fullToken, "Bearer", "Bearer ", fullToken, "Token " + fullToken, "Bearer " + fullToken[:5]} {
		status, body := send(t, http.MethodGet, ts.URL+"/api/schedules", auth, "")
		if status != http.StatusUnauthorized || !strings.Contains(body, `"field":"Authorization"`) {
			t.Errorf("%q: %d %s, want 401", auth, status, body)
		}
	}
	if !equal("abc", "abc") || equal("abc", "abcd") || equal("", "x") || equal("abd", "abc") {
		t.Error("equal compares wrong")
	}
}

// TestTokenFile: a token may come from a file; the errors name the file and the flag.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("token", "s3cret\n")
	if tok, err := Token("", good, "--token", "--token-file"); err != nil || tok != "s3cret" {
		t.Errorf("token file: %q %v", tok, err)
	}
	if tok, err := Token("given", "", "--token", "--token-file"); err != nil || tok != "given" {
		t.Errorf("token value: %q %v", tok, err)
	}
	for _, c := range []struct{ value, file, want string }{
		{"", filepath.Join(dir, "missing"), "--token-file " + filepath.Join(dir, "missing") + ": cannot read"},
		{"", write("empty", "\n"), "is empty"},
		{"", write("two", "a\nb\n"), "more than one line"},
		{"", write("spaced", " tok\n"), "spaces"},
		{"x", good, "--token and --token-file both give the token"},
	} {
		if _, err := Token(c.value, c.file, "--token", "--token-file"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Token(%q, %q): %v, want %q", c.value, c.file, err, c.want)
		}
	}
	if _, err := Token("", filepath.Join(dir, "nope"), "TRAWLER_TOKEN", "TRAWLER_TOKEN_FILE"); err == nil || !strings.Contains(err.Error(), "TRAWLER_TOKEN_FILE") {
		t.Errorf("env file error: %v", err)
	}
	// A console given the token read from the file accepts it.
	tok, _ := Token("", good, "--token", "--token-file")
	_, ts := guarded(t, func(c *Config) { c.Token, c.ReadToken = tok, "" })
	if status, body := send(t, http.MethodGet, ts.URL+"/api/schedules", "Bearer s3cret", ""); status != http.StatusOK {
		t.Errorf("token from the file: %d %s", status, body)
	}
}
