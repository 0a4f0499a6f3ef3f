package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/external"
	"github.com/trawlerhq/trawler/internal/sites/demo"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// pools reads and configures the pools the shared worker lends from.
func pools(t *testing.T) *external.Pools {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: shared.redis.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return external.NewPools(rdb, quiet)
}

func configure(t *testing.T, p *external.Pools, k external.Kind, c external.Config) {
	t.Helper()
	if err := p.Configure(context.Background(), tenantOf(t), "demo", k, c); err != nil {
		t.Fatal(err)
	}
}

func poolStats(t *testing.T, p *external.Pools, k external.Kind) *external.PoolStats {
	t.Helper()
	st, err := p.Stats(context.Background(), tenantOf(t), "demo", k, true)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// siteStats reads the demo site's members' counters (logins, denials by reason, …).
func siteStats(t *testing.T, site string) map[string]int {
	t.Helper()
	resp, err := http.Get(site + "/auth/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]int
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// farm runs examples/farm.yaml for the test's tenant and returns its summary.
func farm(t *testing.T, site string, sets ...string) *workflows.Summary {
	t.Helper()
	id := start(t, plan(t, "farm.yaml", "", append([]string{"base_url=" + site}, sets...)...), taskQueue)
	return wait(t, id, 2*time.Minute)
}

func TestFarmingScheduleFillsPoolsToTarget(t *testing.T) {
	site := startSite(t, demosite.Options{Pages: 1})
	p := pools(t)
	configure(t, p, external.Cookie, external.Config{Target: 3})
	configure(t, p, external.DeviceID, external.Config{Target: 2})
	pl := plan(t, "farm.yaml", "", "base_url="+site, "captcha.users=[reader1, reader2, reader3, reader4, reader5]", "devices.count=5")
	ctx := context.Background()
	const id = "farm-demo"
	if err := engine.CreateSchedule(ctx, shared.client, id, "0 3 * * *", pl, engine.RunOptions{TaskQueue: taskQueue, Tuning: fast}); err != nil {
		t.Fatal(err)
	}
	h := shared.client.ScheduleClient().GetHandle(ctx, id)
	defer h.Delete(ctx)
	// fire runs the schedule now and waits for the run it starts.
	fire := func(n int) *workflows.Summary {
		t.Helper()
		if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
			t.Fatal(err)
		}
		return wait(t, firedRun(t, h, n), 2*time.Minute)
	}
	s := fire(1)
	cookies, devices := poolStats(t, p, external.Cookie), poolStats(t, p, external.DeviceID)
	if cookies.Usable != 3 || devices.Usable != 2 {
		t.Fatalf("after the first farming run: %d cookies, %d device ids; want the targets 3 and 2 (summary %+v)", cookies.Usable, devices.Usable, s.Steps)
	}
	for _, c := range cookies.Items {
		if c.Attrs["device_id"] == "" || c.Attrs["account"] == "" || c.Expires.IsZero() {
			t.Errorf("cookie %s is not bound to its device and account: %+v", c.ID, c.Resource)
		}
	}
	// A second firing finds the pools full and stops early: no new logins or devices.
	s = fire(2)
	stats := siteStats(t, site)
	if stats["logins"] != 3 || stats["devices"] != 2 {
		t.Errorf("site saw %d logins and %d registrations over two runs, want 3 and 2", stats["logins"], stats["devices"])
	}
	if _, items, _, failed := s.Totals(); items != 0 || failed != 0 {
		t.Errorf("the second run stored %d items, failed %d; want 0 and 0 against full pools", items, failed)
	}
	if got := poolStats(t, p, external.Cookie).Usable; got != 3 {
		t.Errorf("cookie pool holds %d after the second run, want 3", got)
	}
}

// protectedRun runs examples/protected.yaml (2 signed API pages, 20 members' pages).
func protectedRun(t *testing.T, site string) (string, *workflows.Summary) {
	t.Helper()
	id := start(t, plan(t, "protected.yaml", "", "base_url="+site), taskQueue)
	return id, wait(t, id, 3*time.Minute)
}

func TestProtectedChainWithFarmedResources(t *testing.T) {
	site := startSite(t, demosite.Options{Pages: 1})
	p := pools(t)
	farm(t, site)
	if n := poolStats(t, p, external.Cookie).Usable; n != 3 {
		t.Fatalf("farming stored %d cookies, want 3", n)
	}
	id, s := protectedRun(t, site)
	keys := stored(t, id)
	if got := countPrefix(keys, "demo:member:"); got != 20 {
		t.Errorf("stored %d members' pages, want 20 (summary %+v, failures %v)", got, s.Steps, s.Failures)
	}
	if got := countPrefix(keys, "demo:signed:"); got != 20 {
		t.Errorf("stored %d signed listings, want 20", got)
	}
	assertOnce(t, keys)
	accounts := map[string]bool{}
	_ = shared.sink.Scan(func(it crawl.Item) error {
		if it.RunID == id && strings.HasPrefix(it.Key, "demo:member:") {
			accounts[it.Data["member_note"].(string)] = true
		}
		return nil
	})
	if len(accounts) < 2 {
		t.Errorf("members' pages were read with %d session(s), want them spread over the pool: %v", len(accounts), accounts)
	}
	stats := siteStats(t, site)
	if stats["members_served"] != 20 || stats["denied_overuse"] != 0 || stats["denied_cookie"] != 0 || stats["denied_signature"] != 0 {
		t.Errorf("site counters %v: want 20 pages served, none refused (the pool keeps each cookie under the site's rate)", stats)
	}
}

func TestExpiredCookieIsRotatedAndTheItemRetried(t *testing.T) {
	site := startSite(t, demosite.Options{Pages: 1})
	p := pools(t)
	farm(t, site)
	// The site ends reader1's session; the pool does not know yet.
	resp, err := http.PostForm(site+"/auth/expire", url.Values{"user": {"reader1"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id, s := protectedRun(t, site)
	if got := countPrefix(stored(t, id), "demo:member:"); got != 20 {
		t.Fatalf("stored %d members' pages, want 20 (failures %v)", got, s.Failures)
	}
	if _, _, _, failed := s.Totals(); failed != 0 {
		t.Errorf("%d inputs failed; a refused cookie must be replaced, not fail the page", failed)
	}
	stats := siteStats(t, site)
	if stats["denied_cookie"] < 1 {
		t.Errorf("the site refused no cookie (%v); the test did not exercise the expiry", stats)
	}
	st := poolStats(t, p, external.Cookie)
	for _, c := range st.Items {
		banned := !c.BannedTil.IsZero()
		if (c.ID == demo.SessionKey("reader1")) != banned || (banned && c.Bans != 1) {
			t.Errorf("cookie %s: bans %d, banned until %v; want only reader1's banned, once", c.ID, c.Bans, c.BannedTil)
		}
	}
	if st.Usable != 2 || st.Counts["bans"] != 1 {
		t.Errorf("pool: %d usable, %d bans; want 2 and 1", st.Usable, st.Counts["bans"])
	}
}

func TestOverusedCookieIsThrottled(t *testing.T) {
	site := startSite(t, demosite.Options{Pages: 1})
	p := pools(t)
	farm(t, site, "captcha.users=[reader1]")
	// Let every request use the one cookie at once, faster than the site allows.
	configure(t, p, external.Cookie, external.Config{MaxUses: -1, MinInterval: -1})
	id, s := protectedRun(t, site)
	if got := countPrefix(stored(t, id), "demo:member:"); got != 20 {
		t.Fatalf("stored %d members' pages, want 20 (failures %v)", got, s.Failures)
	}
	stats := siteStats(t, site)
	if stats["denied_overuse"] < 1 {
		t.Fatalf("the site refused no request for overuse (%v)", stats)
	}
	st := poolStats(t, p, external.Cookie)
	if st.Usable != 1 || st.Counts["throttles"] < 1 || st.Counts["bans"] != 0 {
		t.Errorf("pool: %d usable, %d throttles, %d bans; want the one cookie throttled, never banned", st.Usable, st.Counts["throttles"], st.Counts["bans"])
	}
}

func TestEmptyPoolMakesItemsWaitWithAVisibleReason(t *testing.T) {
	site := startSite(t, demosite.Options{Pages: 1})
	p := pools(t)
	id := start(t, plan(t, "protected.yaml", "", "base_url="+site, "list.pages=1"), taskQueue)
	want := "waiting for pool cookie (tenant " + tenantOf(t) + ", site demo): empty"
	out := waitOutage(t, id, "pool "+tenantOf(t)+"/demo/cookie", want)
	if out.Waiting != 10 || !slices.Equal(out.Steps, []string{"story"}) {
		t.Errorf("outage %+v, want the 10 story inputs waiting", out)
	}
	// Still waiting, not failed: filling the pool lets the same run finish.
	farm(t, site)
	s := wait(t, id, 3*time.Minute)
	if got := countPrefix(stored(t, id), "demo:member:"); got != 10 {
		t.Errorf("stored %d members' pages after the pool filled, want 10", got)
	}
	if _, _, _, failed := s.Totals(); failed != 0 {
		t.Errorf("%d inputs failed while waiting for the pool (%v)", failed, s.Failures)
	}
	if st := poolStats(t, p, external.Cookie); st.Counts["waits"] < 1 {
		t.Errorf("the pool counted no waits: %+v", st.Counts)
	}
}

func TestSignedAPIAndWrongSigner(t *testing.T) {
	site := startSite(t, demosite.Options{Pages: 1})
	p := pools(t)
	// A signing service that knows the site's key passes.
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in external.SignRequest
		_ = json.NewDecoder(r.Body).Decode(&in)
		req := &crawl.Request{Method: in.Method, URL: in.URL}
		_ = external.HMACSigner([]byte(demosite.APISecret)).Sign(r.Context(), req)
		_ = json.NewEncoder(w).Encode(external.SignResponse{URL: req.URL})
	}))
	defer svc.Close()
	configure(t, p, external.Sign, external.Config{Signer: svc.URL})
	const chain = `
name: signed
steps:
  - {id: list, task: demo.signed_feed, from: list, max_depth: 10, params: {pages: 2}}
`
	id := start(t, plan(t, "signed.yaml", chain, "base_url="+site), taskQueue)
	s := wait(t, id, time.Minute)
	if got := countPrefix(stored(t, id), "demo:signed:"); got != 20 {
		t.Errorf("stored %d signed listings, want 20 (failures %v)", got, s.Failures)
	}
	// A signer with the wrong key fails clearly, at once, without blaming any cookie.
	external.RegisterSigner("demo-wrong-key", external.HMACSigner([]byte("not-the-key")))
	t.Run("wrong", func(t *testing.T) {
		configure(t, p, external.Sign, external.Config{Signer: "demo-wrong-key"})
		id := start(t, plan(t, "signed.yaml", chain, "base_url="+site), taskQueue)
		s := wait(t, id, time.Minute)
		if len(s.Failures) != 1 || s.Failures[0].Attempts != 1 {
			t.Fatalf("failures %+v, want the first page failed after one attempt", s.Failures)
		}
		cause := s.Failures[0].Cause
		for _, want := range []string{"the site rejected the request signature (X-Denied: signature)", "signed by demo-wrong-key"} {
			if !strings.Contains(cause, want) {
				t.Errorf("cause %q does not say %q", cause, want)
			}
		}
	})
	if got := siteStats(t, site)["denied_signature"]; got != 1 {
		t.Errorf("site refused %d signatures, want 1", got)
	}
}
