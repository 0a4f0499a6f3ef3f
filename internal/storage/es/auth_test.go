package es_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/credentials/credtest"
	"github.com/trawlerhq/trawler/internal/devstack/eslite"
	"github.com/trawlerhq/trawler/internal/storage/es"
)

// guarded serves eslite over TLS (a private CA's certificate) behind a check of the
// Authorization header, as a secured Elasticsearch answers: 401 without the right
// credentials.
func guarded(t *testing.T, want string) (addr string, ca []byte) {
	t.Helper()
	target, stop, err := eslite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Elasticsearch reads the scheme in any case (the client sends "APIKey").
		gotScheme, gotToken, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		wantScheme, wantToken, _ := strings.Cut(want, " ")
		if !strings.EqualFold(gotScheme, wantScheme) || gotToken != wantToken {
			w.Header().Set("WWW-Authenticate", `Basic realm="security"`)
			http.Error(w, `{"error":"security_exception"}`, http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	pki := credtest.New(t)
	srv.TLS = pki.ServerTLS(t, false)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca, err = os.ReadFile(pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, ca
}

func TestBasicAuthAPIKeyAndCA(t *testing.T) {
	ctx := context.Background()
	// "elastic:pw s3cret" in base64, as Elasticsearch reads basic auth.
	addr, ca := guarded(t, "Basic ZWxhc3RpYzpwdyBzM2NyZXQ=")
	s, err := es.Open(ctx, es.Options{Addresses: []string{addr}, Auth: es.Auth{Username: "elastic", Password: "pw s3cret", CACert: ca}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, []crawl.Item{story("k1", "r1", 3)}); err != nil {
		t.Fatal(err)
	}
	// The same credentials in the URL.
	withUser := strings.Replace(addr, "https://", "https://elastic:pw%20s3cret@", 1)
	if _, err := es.Open(ctx, es.Options{Addresses: []string{withUser}, Auth: es.Auth{CACert: ca}}); err != nil {
		t.Fatal(err)
	}
	// A wrong password: the error says what to check and never shows the password.
	_, err = es.Open(ctx, es.Options{Addresses: []string{strings.Replace(addr, "https://", "https://elastic:wrong-s3cret@", 1)}, Retries: 1, Auth: es.Auth{CACert: ca}})
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "--es-password-file") || strings.Contains(err.Error(), "wrong-s3cret") {
		t.Fatalf("wrong password: %v", err)
	}
	// Without the CA file the private certificate is refused.
	if _, err := es.Open(ctx, es.Options{Addresses: []string{addr}, Retries: 1, Auth: es.Auth{Username: "elastic", Password: "pw s3cret"}}); err == nil {
		t.Fatal("an untrusted certificate was accepted")
	}

	keyAddr, ca := guarded(t, "ApiKey aWQ6c2VjcmV0LWtleQ==")
	if _, err := es.Open(ctx, es.Options{Addresses: []string{keyAddr}, Auth: es.Auth{APIKey: "aWQ6c2VjcmV0LWtleQ==", CACert: ca}}); err != nil {
		t.Fatal(err)
	}
}
