package fetch

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/external"
)

// lruPool returns pools on a fresh miniredis holding items in tenant t's pool of kind k
// for site s, rotated least recently used first.
func lruPool(t *testing.T, k external.Kind, items ...external.Resource) *external.Pools {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	pools := external.NewPools(rdb, nil)
	ctx := context.Background()
	if err := pools.Configure(ctx, "t", "s", k, external.Config{Rotation: external.RotateLRU}); err != nil {
		t.Fatal(err)
	}
	if err := pools.Add(ctx, "t", "s", k, items...); err != nil {
		t.Fatal(err)
	}
	return pools
}

// A request that needs a proxy goes through the leased one; a proxy that cannot be
// reached takes strikes until it is banned, and requests move on to the working one.
func TestLeasedProxyIsUsedAndADeadOneBanned(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ua="+r.UserAgent())
	}))
	defer site.Close()
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1) // a forward proxy gets the absolute URL
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	defer proxy.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()

	pools := lruPool(t, external.Proxy, external.Resource{Value: dead}, external.Resource{Value: proxy.URL})
	ctx := context.Background()
	_ = pools.Add(ctx, "t", "s", external.UserAgent, external.Resource{Value: "PooledAgent/1"})
	f := New(Options{Retries: -1, ConnectTimeout: time.Second, AllowPrivate: true})
	scope := external.Scope{Tenant: "t", Site: "s", Needs: []external.Kind{external.Proxy, external.UserAgent}}
	rctx := WithResources(ctx, pools, scope)
	ok := 0
	// Rotation takes the least recently used proxy; two requests in the same instant may
	// take the same one, so ask until the dead proxy has had its three strikes (a few
	// more than six requests at most).
	deadBanned := func() bool {
		st, err := pools.Stats(ctx, "t", "s", external.Proxy, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range st.Items {
			if it.Value == dead {
				return it.Bans > 0
			}
		}
		return false
	}
	for i := 0; i < 30 && (i < 6 || !deadBanned()); i++ {
		resp, err := f.Fetch(rctx, &crawl.Request{Method: "GET", URL: site.URL + "/", IgnoreRobots: true})
		if err == nil {
			ok++
			if got := string(resp.Body); got != "ua=PooledAgent/1" {
				t.Errorf("body %q: the pooled user agent was not sent", got)
			}
		} else if !strings.Contains(err.Error(), "connect") && !strings.Contains(err.Error(), "refused") {
			t.Errorf("unexpected error %v", err)
		}
	}
	if int(proxied.Load()) != ok || ok < 3 {
		t.Errorf("%d requests succeeded, %d went through the proxy; want every success proxied", ok, proxied.Load())
	}
	st, err := pools.Stats(ctx, "t", "s", external.Proxy, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range st.Items {
		if it.Value == dead && (it.Bans != 1 || it.BannedTil.IsZero()) {
			t.Errorf("dead proxy: %d failures, %d bans; want banned after 3 strikes", it.Failures, it.Bans)
		}
		if it.Value == proxy.URL && it.OK != int64(ok) {
			t.Errorf("working proxy: %d successes, want %d", it.OK, ok)
		}
	}
}
