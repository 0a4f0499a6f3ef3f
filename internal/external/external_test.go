package external

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
)

// testPools returns pools on a fresh miniredis with a clock the test moves.
func testPools(t *testing.T) (*Pools, *time.Time) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	p := NewPools(rdb, nil)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	p.MaxWait = 0
	return p, &now
}

var ctx = context.Background()

func lend(t *testing.T, p *Pools, s Scope) *Lease {
	t.Helper()
	l, err := p.Lend(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestCheckoutLimitsUsesAndRotates(t *testing.T) {
	p, _ := testPools(t)
	if err := p.Configure(ctx, "t1", "demo", Cookie, Config{MaxUses: 1, MinInterval: -1}); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(ctx, "t1", "demo", Cookie, Resource{ID: "a", Value: "s=a"}, Resource{ID: "b", Value: "s=b"}); err != nil {
		t.Fatal(err)
	}
	s := Scope{Tenant: "t1", Site: "demo", Needs: []Kind{Cookie}}
	l1, l2 := lend(t, p, s), lend(t, p, s)
	c1, _ := l1.Item(Cookie)
	c2, _ := l2.Item(Cookie)
	if c1.ID == c2.ID {
		t.Fatalf("both leases got cookie %s; max_uses 1 must keep a cookie with one request", c1.ID)
	}
	_, err := p.Lend(ctx, s)
	var w *WaitError
	if !errors.As(err, &w) || w.Size != 2 {
		t.Fatalf("third lease: got %v, want a WaitError for a pool of 2 busy items", err)
	}
	if want := "waiting for pool cookie (tenant t1, site demo): all 2 items are in use, cooling down or banned"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	l1.Return(ctx, Verdict{Outcome: Success})
	l3 := lend(t, p, s)
	if c3, _ := l3.Item(Cookie); c3.ID != c1.ID {
		t.Errorf("after return got %s, want the returned %s", c3.ID, c1.ID)
	}
	st, err := p.Stats(ctx, "t1", "demo", Cookie, true)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != 2 || st.InUse != 2 || st.Counts["uses"] != 3 || st.Counts["successes"] != 1 || st.Counts["waits"] != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestEmptyPoolSaysWhatToDo(t *testing.T) {
	p, _ := testPools(t)
	_, err := p.Lend(ctx, Scope{Tenant: "t1", Site: "demo", Needs: []Kind{Cookie}})
	want := "waiting for pool cookie (tenant t1, site demo): empty; fill it with a farming chain (store: [pool:cookie]) or `trawler pool add cookie`"
	if err == nil || err.Error() != want || !IsWaiting(err) {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestProxyStrikesBanCoolDownAndHealth(t *testing.T) {
	p, now := testPools(t)
	if err := p.Add(ctx, "t1", Shared, Proxy, Resource{Value: "http://10.0.0.1:3128"}, Resource{Value: "http://10.0.0.2:3128"}); err != nil {
		t.Fatal(err)
	}
	s := Scope{Tenant: "t1", Site: "news", Needs: []Kind{Proxy}}
	// The site has no proxies of its own: the tenant's shared pool serves it.
	for range 3 {
		l := lend(t, p, s)
		if l.Proxy == "http://10.0.0.1:3128" {
			l.Return(ctx, Verdict{Outcome: Failed, Kind: Proxy})
		} else {
			l.Return(ctx, Verdict{Outcome: Success})
		}
		*now = now.Add(time.Second)
	}
	// Health rotation prefers the proxy that works.
	for range 3 {
		l := lend(t, p, s)
		if l.Proxy != "http://10.0.0.2:3128" {
			t.Fatalf("health rotation picked %s, want the healthy proxy", l.Proxy)
		}
		l.Return(ctx, Verdict{Outcome: Success})
	}
	bad := lend(t, p, Scope{Tenant: "t1", Site: Shared, Needs: []Kind{Proxy}})
	_ = bad
	st, _ := p.Stats(ctx, "t1", Shared, Proxy, true)
	var failing ItemStats
	for _, it := range st.Items {
		if it.Value == "http://10.0.0.1:3128" {
			failing = it
		}
	}
	if failing.Failures < 1 || failing.Health >= 1 {
		t.Errorf("failing proxy stats %+v", failing)
	}
	bad.Return(ctx, Verdict{Outcome: Failed, Kind: Proxy})
	// Strikes in a row ban a proxy for the cool-down (5m by default).
	p2, now2 := testPools(t)
	_ = p2.Add(ctx, "t1", "news", Proxy, Resource{Value: "http://dead:1"})
	for i := range 3 {
		l := lend(t, p2, s)
		if what := l.Return(ctx, Verdict{Outcome: Failed}); i == 2 && what != "proxy "+ItemID("http://dead:1")+" (http://dead:1) banned" {
			t.Errorf("third strike: %q", what)
		}
	}
	if _, err := p2.Lend(ctx, s); !IsWaiting(err) || !strings.Contains(err.Error(), "first is free in 5m0s") {
		t.Fatalf("banned proxy: %v", err)
	}
	if ids, _, _ := p2.Usable(ctx, "t1", "news", Proxy); len(ids) != 0 {
		t.Errorf("a banned proxy counts as usable: %v", ids)
	}
	*now2 = now2.Add(5*time.Minute + time.Second)
	if l := lend(t, p2, s); l.Proxy != "http://dead:1" {
		t.Errorf("after the cool-down got %q", l.Proxy)
	}
}

func TestBannedCookieIsDroppedAfterTwoBans(t *testing.T) {
	p, now := testPools(t)
	_ = p.Add(ctx, "t1", "demo", Cookie, Resource{ID: "acc1", Value: "s=1"})
	s := Scope{Tenant: "t1", Site: "demo", Needs: []Kind{Cookie}}
	l := lend(t, p, s)
	if what := l.Return(ctx, Verdict{Outcome: Banned}); what != "cookie acc1 banned" {
		t.Errorf("first ban: %q", what)
	}
	*now = now.Add(11 * time.Minute)
	l = lend(t, p, s)
	if what := l.Return(ctx, Verdict{Outcome: Banned}); what != "cookie acc1 dropped" {
		t.Errorf("second ban: %q", what)
	}
	st, _ := p.Stats(ctx, "t1", "demo", Cookie, false)
	if st.Size != 0 || st.Counts["dropped"] != 1 || st.Counts["bans"] != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestThrottleAndIntervalRestAnItem(t *testing.T) {
	p, now := testPools(t)
	_ = p.Configure(ctx, "t1", "demo", Cookie, Config{MinInterval: 500 * time.Millisecond})
	_ = p.Add(ctx, "t1", "demo", Cookie, Resource{ID: "a", Value: "s=a"})
	s := Scope{Tenant: "t1", Site: "demo", Needs: []Kind{Cookie}}
	lend(t, p, s).Return(ctx, Verdict{Outcome: Success})
	if _, err := p.Lend(ctx, s); !IsWaiting(err) {
		t.Fatalf("within min_interval: %v", err)
	}
	*now = now.Add(500 * time.Millisecond)
	lend(t, p, s).Return(ctx, Verdict{Outcome: Throttled, Wait: 3 * time.Second})
	*now = now.Add(2 * time.Second)
	if _, err := p.Lend(ctx, s); !IsWaiting(err) {
		t.Fatalf("throttled for 3s, lent after 2s: %v", err)
	}
	*now = now.Add(time.Second)
	lend(t, p, s)
	st, _ := p.Stats(ctx, "t1", "demo", Cookie, true)
	if st.Counts["throttles"] != 1 || st.Items[0].Throttles != 1 || st.Items[0].Bans != 0 {
		t.Errorf("stats %+v %+v", st, st.Items)
	}
}

func TestExpiredItemsLeave(t *testing.T) {
	p, now := testPools(t)
	_ = p.Add(ctx, "t1", "demo", Cookie, Resource{ID: "old", Value: "s=old", Expires: now.Add(time.Minute)})
	*now = now.Add(2 * time.Minute)
	if _, err := p.Lend(ctx, Scope{Tenant: "t1", Site: "demo", Needs: []Kind{Cookie}}); !IsWaiting(err) || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("expired cookie lent: %v", err)
	}
	st, _ := p.Stats(ctx, "t1", "demo", Cookie, false)
	if st.Size != 0 || st.Counts["expired"] != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestLeaseSendsWhatTheCookieIsBoundTo(t *testing.T) {
	p, _ := testPools(t)
	_ = p.Add(ctx, "t1", "demo", Cookie, Resource{ID: "acc1", Value: "s=1", Attrs: map[string]string{"user_agent": "UA-of-session", "device_id": "dev-7"}})
	_ = p.Add(ctx, "t1", "demo", DeviceID, Resource{Value: "dev-pooled"})
	_ = p.Add(ctx, "t1", "demo", UserAgent, Resource{Value: "UA-pooled"})
	l := lend(t, p, Scope{Tenant: "t1", Site: "demo", Needs: []Kind{Cookie, DeviceID, UserAgent}})
	req, err := l.Prepare(ctx, &crawl.Request{Method: "GET", URL: "http://x/", Header: http.Header{"Cookie": {"lang=en"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get("Cookie"); got != "lang=en; s=1" {
		t.Errorf("Cookie %q", got)
	}
	if req.Header.Get("User-Agent") != "UA-of-session" || req.Header.Get(DeviceHeader) != "dev-7" {
		t.Errorf("headers %v: want the user agent and device bound to the cookie", req.Header)
	}
	st, _ := p.Stats(ctx, "t1", "demo", DeviceID, false)
	if st.Counts["uses"] != 0 {
		t.Errorf("the device pool was used although the cookie brings its device")
	}
	// A refused device that came with the cookie bans the cookie.
	if what := l.Return(ctx, Verdict{Outcome: Banned, Kind: DeviceID}); what != "cookie acc1 banned" {
		t.Errorf("return: %q", what)
	}
	// Without a pool of user agents, a built-in one is sent.
	l = lend(t, p, Scope{Tenant: "t2", Site: "demo", Needs: []Kind{UserAgent}})
	req, _ = l.Prepare(ctx, &crawl.Request{Method: "GET", URL: "http://x/"})
	if !strings.HasPrefix(req.Header.Get("User-Agent"), "Mozilla/5.0") {
		t.Errorf("built-in user agent: %q", req.Header.Get("User-Agent"))
	}
}

func TestSigners(t *testing.T) {
	p, _ := testPools(t)
	secret := []byte("k")
	RegisterSigner("unit-site", HMACSigner(secret))
	l := lend(t, p, Scope{Tenant: "t1", Site: "unit-site", Needs: []Kind{Sign}})
	req, err := l.Prepare(ctx, &crawl.Request{Method: "GET", URL: "http://x/api?page=2"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(req.URL)
	if q := u.Query(); q.Get("ts") == "" || q.Get("sig") != QuerySignature(secret, "/api", q) || q.Get("page") != "2" {
		t.Errorf("signed URL %s", req.URL)
	}
	// A tenant may use a signing service instead.
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in SignRequest
		_ = json.NewDecoder(r.Body).Decode(&in)
		_ = json.NewEncoder(w).Encode(SignResponse{URL: in.URL + "&sig=svc", Headers: map[string]string{"X-Sig": "1"}})
	}))
	defer svc.Close()
	_ = p.Configure(ctx, "t2", "unit-site", Sign, Config{Signer: svc.URL})
	l = lend(t, p, Scope{Tenant: "t2", Site: "unit-site", Needs: []Kind{Sign}})
	req, err = l.Prepare(ctx, &crawl.Request{Method: "GET", URL: "http://x/api?page=2"})
	if err != nil || req.URL != "http://x/api?page=2&sig=svc" || req.Header.Get("X-Sig") != "1" {
		t.Errorf("service-signed: %v %v %v", req, err, req.Header)
	}
	_, err = p.Lend(ctx, Scope{Tenant: "t1", Site: "nosigner", Needs: []Kind{Sign}})
	if err == nil || !crawl.IsPermanent(err) || !strings.Contains(err.Error(), `no signer "nosigner" is registered (tenant t1, site nosigner)`) {
		t.Errorf("missing signer: %v", err)
	}
}

func TestArithSolverAndTask(t *testing.T) {
	for q, want := range map[string]string{"What is 7 plus 12?": "19", "What is 3 minus 9?": "-6", "4 × 5 = ?": "20"} {
		if got, err := ArithSolver.Solve(ctx, Challenge{Question: q}); err != nil || got != want {
			t.Errorf("%q: %q %v, want %s", q, got, err, want)
		}
	}
	env := &crawl.Env{Params: crawl.Params{"solver": "arith", "question_var": "question", "image_var": "image", "answer_var": "answer"}}
	res, err := CaptchaSolveTask.Run(ctx, env, crawl.Input{Vars: map[string]any{"user": "reader1", "captcha_id": "c1", "question": "What is 2 times 8?"}})
	if err != nil || len(res.Next) != 1 || res.Next[0].Vars["answer"] != "16" || res.Next[0].Vars["user"] != "reader1" {
		t.Fatalf("task: %+v %v", res, err)
	}
	if _, err := SolverFor("arth"); err == nil || !strings.Contains(err.Error(), `(did you mean "arith"?)`) {
		t.Errorf("unknown solver: %v", err)
	}
}

// view is a step fetcher's view of one pool, for Wanted and Missing.
type view struct {
	p    *Pools
	kind Kind
}

func (v view) Fetch(context.Context, *crawl.Request) (*crawl.Response, error) { return nil, nil }
func (v view) PoolUsable(ctx context.Context, k Kind) ([]string, int, error) {
	return v.p.Usable(ctx, "t1", "demo", k)
}

func TestPoolSinkAndFarmingTarget(t *testing.T) {
	p, _ := testPools(t)
	var names []string
	for _, s := range p.Sinks() {
		names = append(names, s.Name())
	}
	if got := SinkNames(); !slices.Equal(got, names) || !slices.Contains(got, "pool:cookie") {
		t.Fatalf("chain files may name the pool sinks %v, the pools serve %v", got, names)
	}
	var sink = p.Sinks()[0]
	items := []crawl.Item{
		{Key: "demo:session:reader1", Biz: "demo.login", Tenant: "t1", RunID: "r1", Data: map[string]any{"value": "s=1", "device_id": "dev-1", "expires": "2030-01-01T00:00:00Z"}},
		{Key: "demo:session:reader2", Biz: "demo.login", Tenant: "t1", RunID: "r1", Data: map[string]any{"value": "s=2"}},
		{Key: "demo:session:broken", Biz: "demo.login", Tenant: "t1", RunID: "r1", Data: map[string]any{}},
	}
	if err := sink.Write(ctx, items); err != nil {
		t.Fatal(err)
	}
	if n, err := sink.Count(ctx, "r1"); err != nil || n != 2 {
		t.Errorf("count %d %v, want 2", n, err)
	}
	st, _ := p.Reveal(ctx, "t1", "demo", Cookie)
	if st.Size != 2 || st.Items[0].Attrs["device_id"] != "dev-1" || st.Items[0].Expires.Year() != 2030 {
		t.Errorf("pool after the sink: %+v", st.Items)
	}
	env := &crawl.Env{Fetcher: view{p, Cookie}}
	if n, _ := Wanted(ctx, env, Cookie, 5); n != 5 {
		t.Errorf("no target: wanted %d, want the limit 5", n)
	}
	_ = p.Configure(ctx, "t1", "demo", Cookie, Config{Target: 3})
	if n, _ := Wanted(ctx, env, Cookie, 5); n != 1 {
		t.Errorf("target 3 with 2 usable: wanted %d, want 1", n)
	}
	got, _ := Missing(ctx, env, Cookie, []string{"demo:session:reader1", "demo:session:reader3", "demo:session:reader4"})
	if !slices.Equal(got, []string{"demo:session:reader3"}) {
		t.Errorf("missing %v", got)
	}
	_ = p.Configure(ctx, "t1", "demo", Cookie, Config{Target: 2})
	if n, _ := Wanted(ctx, env, Cookie, 5); n != 0 {
		t.Errorf("at target: wanted %d, want 0 (the farming step stops early)", n)
	}
	pools, _ := p.List(ctx, "t1")
	if len(pools) != 1 || pools[0].Kind != Cookie || pools[0].Target != 2 || pools[0].Usable != 2 {
		t.Errorf("list %+v", pools)
	}
}

// Pool settings read as words where a limit is off, never as -1.
func TestConfigSettingsNameLimitsThatAreOff(t *testing.T) {
	got := DefaultConfig(Proxy).Settings()
	want := "max_uses unlimited, min_interval none, ban_after 3, cooldown 5m0s, drop_after never, ttl forever, rotation health"
	if got != want {
		t.Fatalf("proxy settings %q, want %q", got, want)
	}
	if got := (Config{MaxUses: 2, MinInterval: 300 * time.Millisecond, BanAfter: 1, Cooldown: time.Minute, DropAfter: 2, TTL: time.Hour, Rotation: RotateLRU}).Settings(); !strings.Contains(got, "max_uses 2, min_interval 300ms") || !strings.Contains(got, "ttl 1h0m0s") {
		t.Fatalf("settings %q", got)
	}
}
