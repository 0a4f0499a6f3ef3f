package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/external"
)

// Two tenants crawled the same demo site into every store, each with a schedule and a
// pool: tenantA's principals must see none of tenantB's.
const (
	tenantA, tenantB = "acme", "globex"
	proxyA, proxyB   = "http://a:acmepw1@127.0.0.1:3128", "http://b:globexpw2@127.0.0.1:3128"
)

var world struct {
	once       sync.Once
	err        error
	runs       map[string]string // tenant → run id
	tokens     map[string]string // role name → token
	principals map[string]Principal
}

func tenantChain(t *testing.T, tenant string) string {
	return strings.Replace(demoSource(t, tenant), "store: [jsonl, mongo, es]", "store: [jsonl, mongo, es, hbase]", 1)
}

// tenantWorld runs both tenants' crawls once and creates the principals of the tests.
func tenantWorld(t *testing.T) {
	t.Helper()
	world.once.Do(func() {
		world.runs = map[string]string{}
		ctx := context.Background()
		rdb := redis.NewClient(&redis.Options{Addr: stack.redis.Addr()})
		defer rdb.Close()
		pools := external.NewPools(rdb, quiet)
		for tenant, proxy := range map[string]string{tenantA: proxyA, tenantB: proxyB} {
			status, out := api(t, "POST", "/api/runs", map[string]any{"source": tenantChain(t, tenant), "sets": []string{"base_url=" + stack.site, "feed.pages=1"}})
			if status != http.StatusCreated {
				world.err = fmt.Errorf("start %s: %d %v", tenant, status, out)
				return
			}
			world.runs[tenant] = out["run_id"].(string)
			if status, out := api(t, "POST", "/api/schedules", map[string]any{"id": "sched-" + tenant, "cron": "0 0 1 1 *", "source": tenantChain(t, tenant)}); status != http.StatusCreated {
				world.err = fmt.Errorf("schedule %s: %d %v", tenant, status, out)
				return
			}
			if err := pools.Add(ctx, tenant, "demo", external.Proxy, external.Resource{Value: proxy}); err != nil {
				world.err = err
				return
			}
		}
		for _, id := range world.runs {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			_, err := engine.Wait(wctx, stack.client, id, nil)
			cancel()
			if err != nil {
				world.err = err
				return
			}
		}
		ps := NewPrincipals(rdb)
		world.tokens = map[string]string{"admin": fullToken, "viewer": readToken}
		world.principals = map[string]Principal{}
		for name, p := range map[string]Principal{
			"operator":        {Name: "ops-acme", Role: RoleOperator, Tenants: []string{tenantA}, Reveal: true},
			"operator-hidden": {Name: "ops-acme-no-reveal", Role: RoleOperator, Tenants: []string{tenantA}},
			"analyst":         {Name: "alice", Role: RoleAnalyst, Tenants: []string{tenantA}},
		} {
			p, tok, err := ps.Create(ctx, p)
			if err != nil {
				world.err = err
				return
			}
			world.tokens[name], world.principals[name] = tok, p
		}
	})
	if world.err != nil {
		t.Fatal(world.err)
	}
}

// otherMarks are what only tenant B's data holds: its run id, schedule id, pool value
// and the tenant field of its records.
func otherMarks() []string {
	return []string{world.runs[tenantB], "sched-" + tenantB, "globexpw2", `"tenant":"` + tenantB + `"`, external.ItemID(proxyB)}
}

// leak is the first mark of B in body that the request did not carry itself (a chain
// of B's sent to be validated comes back with its tenant).
func leak(body, request string) string {
	for _, m := range otherMarks() {
		echo := strings.Contains(request, m) || (strings.HasPrefix(m, `"tenant"`) && strings.Contains(request, "tenant: "+tenantB))
		if strings.Contains(body, m) && !echo {
			return m
		}
	}
	return ""
}

// walkBody is the body each state-changing route gets in the walk: a chain of the
// tenant, so a permitted call does its real work.
func walkBody(t *testing.T, pattern, tenant string) string {
	src := tenantChain(t, tenant)
	var b any
	switch pattern {
	case "POST /api/runs":
		b = map[string]any{"source": src, "sets": []string{"base_url=" + stack.site, "feed.pages=1"}}
	case "POST /api/schedules":
		b = map[string]any{"id": "walk-" + tenant + fmt.Sprint(time.Now().UnixNano()), "cron": "0 0 1 1 *", "source": src}
	case "PUT /api/schedules/{id}/chain", "POST /api/chains/validate":
		b = map[string]any{"source": src}
	case "POST /api/search":
		b = map[string]any{"query": map[string]any{"match_all": map[string]any{}}}
	default:
		return ""
	}
	raw, _ := json.Marshal(b)
	return string(raw)
}

// TestEveryRouteEveryRoleEveryTenant walks every route × every role × own and other
// tenant: a scoped token reading or changing tenant B's run, schedule, record, history,
// pool or search gets 404, starting B's chain 403, a fleet-wide route 403; and no answer
// to it holds anything of B.
func TestEveryRouteEveryRoleEveryTenant(t *testing.T) {
	tenantWorld(t)
	t.Cleanup(func() { dropTenantSchedules(t) })
	srv, ts := guarded(t, nil)
	walked := map[string]int{}
	for _, role := range []string{"analyst", "viewer", "operator", "admin"} {
		tok := world.tokens[role]
		scoped := role == "analyst" || role == "operator"
		for _, rt := range srv.Routes() {
			if rt.Open || rt.Pattern == "/api/" {
				continue
			}
			method := rt.Method()
			for _, which := range []string{tenantA, tenantB} {
				id := world.runs[which]
				if strings.Contains(rt.Pattern, "/schedules/") {
					id = "sched-" + which
				}
				vals := map[string][]string{"id": {id}, "tenant": {which}, "site": {"demo"}, "kind": {"proxy"},
					"biz": {"demo.story"}, "key": {"demo:story:1"}, "name": {"demo"}}
				for _, path := range paths(rt.Pattern, vals) {
					u := ts.URL + path + "?tenant=" + which
					if rt.Pattern == "GET /api/search" {
						u += "&q=*"
					}
					body := walkBody(t, rt.Pattern, which)
					status, got := send(t, method, u, "Bearer "+tok, body)
					walked[role]++
					call := fmt.Sprintf("%s %s as %s: %d %.300s", method, path+"?tenant="+which, role, status, got)
					if scoped {
						if m := leak(got, u+body); m != "" {
							t.Errorf("%s: shows B's %q", call, m)
						}
					}
					write := !readAllowed(rt.Pattern, method)
					var want []int // nil: let through (neither 401, 403 nor 404)
					switch {
					case rt.Pattern == "GET /api/audit":
						if role != "admin" {
							want = []int{http.StatusForbidden}
						}
					case scoped && fleetRoutes[rt.Pattern] != "":
						want = []int{http.StatusForbidden}
					case (role == "analyst" || role == "viewer") && write:
						want = []int{http.StatusForbidden}
					case scoped && which == tenantB && (rt.Pattern == "POST /api/runs" || rt.Pattern == "POST /api/schedules"):
						want = []int{http.StatusForbidden}
					case scoped && which == tenantB && !strings.HasPrefix(rt.Pattern, "GET /api/chains") && rt.Pattern != "POST /api/chains/validate" && rt.Pattern != "GET /api/schedules":
						want = []int{http.StatusNotFound}
					}
					switch {
					case want != nil && status != want[0]:
						t.Errorf("%s, want %d", call, want[0])
					case want == nil && (status == http.StatusUnauthorized || status == http.StatusForbidden):
						t.Errorf("%s, want it let through", call)
					case want == nil && status == http.StatusNotFound && method == http.MethodGet && !strings.Contains(path, "/schedules"):
						t.Errorf("%s, want its own data found", call)
					}
				}
			}
		}
	}
	if walked["analyst"] < 50 || walked["analyst"] != walked["admin"] {
		t.Errorf("walked %v", walked)
	}
}

// dropTenantSchedules deletes the schedules the walk made, so other tests' listings
// hold only their own.
func dropTenantSchedules(t *testing.T) {
	ctx := context.Background()
	rows, err := engine.ListSchedules(ctx, stack.client)
	if err != nil {
		t.Error(err)
		return
	}
	for _, sc := range rows {
		if sc.Tenant == tenantA || sc.Tenant == tenantB {
			_ = engine.DeleteSchedule(ctx, stack.client, sc.ID)
		}
	}
}

// bearer sends a request with token and decodes its JSON answer.
func bearer(t *testing.T, base, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	return call(t, base, method, path, token, body)
}

// TestAnalystSeesOnlyItsTenant: an analyst of A lists, searches and reads A's runs,
// records, history and pools — exactly A's — and none of B's.
func TestAnalystSeesOnlyItsTenant(t *testing.T) {
	tenantWorld(t)
	_, ts := guarded(t, nil)
	tok := world.tokens["analyst"]

	_, out := bearer(t, ts.URL, "GET", "/api/runs?limit=1000", tok, nil)
	var ids []string
	for _, r := range list(out["runs"]) {
		if obj(r)["tenant"] != tenantA {
			t.Errorf("analyst of %s lists run %v", tenantA, r)
		}
		ids = append(ids, obj(r)["run_id"].(string))
	}
	if !strings.Contains(strings.Join(ids, " "), world.runs[tenantA]) {
		t.Errorf("analyst's runs %v lack its own %s", ids, world.runs[tenantA])
	}
	if status, out := bearer(t, ts.URL, "GET", "/api/runs?tenant="+tenantB, tok, nil); status != http.StatusNotFound || out["error"] != `tenant "globex" is none of this token's tenants (acme)` {
		t.Errorf("runs of B: %d %v", status, out)
	}

	// Search: the analyst's hits are A's documents, as many as an admin finds of A.
	_, admin := bearer(t, ts.URL, "GET", "/api/search?size=100&q="+url.QueryEscape("tenant:"+tenantA), fullToken, nil)
	_, mine := bearer(t, ts.URL, "GET", "/api/search?size=100&q=*", tok, nil)
	total := func(out map[string]any) float64 { return obj(obj(out["hits"])["total"])["value"].(float64) }
	if total(admin) == 0 || total(mine) != total(admin) {
		t.Errorf("analyst search finds %v documents, admin finds %v of %s", total(mine), total(admin), tenantA)
	}
	for _, h := range list(obj(mine["hits"])["hits"]) {
		if src := obj(obj(h)["_source"]); src["tenant"] != tenantA {
			t.Errorf("analyst search hit of tenant %v", src["tenant"])
		}
	}
	// A query DSL body naming B's tenant still finds only A's documents.
	_, bodyB := bearer(t, ts.URL, "POST", "/api/search", tok, map[string]any{"query": map[string]any{"term": map[string]any{"tenant": tenantB}}})
	if total(bodyB) != 0 {
		t.Errorf("analyst's query for B's documents found %v", total(bodyB))
	}
	if status, out := bearer(t, ts.URL, "POST", "/api/search", tok, map[string]any{"aggs": map[string]any{"all": map[string]any{"global": map[string]any{}}}}); status != http.StatusBadRequest || !strings.Contains(out["error"].(string), `"global"`) {
		t.Errorf("global aggregation: %d %v", status, out)
	}
	if status, _ := bearer(t, ts.URL, "GET", "/api/search?q=*&tenant="+tenantB, tok, nil); status != http.StatusNotFound {
		t.Errorf("search of B: %d", status)
	}

	// Records and history: A's own, B's 404.
	status, item := bearer(t, ts.URL, "GET", "/api/items/demo.story/demo:story:1", tok, nil)
	if status != http.StatusOK || item["tenant"] != tenantA {
		t.Errorf("own record: %d %v", status, item)
	}
	if status, _ := bearer(t, ts.URL, "GET", "/api/items/demo.story/demo:story:1?tenant="+tenantB, tok, nil); status != http.StatusNotFound {
		t.Errorf("B's record: %d", status)
	}
	_, bizes := bearer(t, ts.URL, "GET", "/api/items", tok, nil)
	_, bizesAdmin := bearer(t, ts.URL, "GET", "/api/items?tenant="+tenantA, fullToken, nil)
	if toJSON(bizes) != toJSON(bizesAdmin) {
		t.Errorf("analyst's tasks %v, A's %v", bizes, bizesAdmin)
	}
	_, page := bearer(t, ts.URL, "GET", "/api/items?biz=demo.story&size=500", tok, nil)
	for _, it := range list(page["items"]) {
		if obj(it)["tenant"] != tenantA {
			t.Errorf("analyst's page holds %v", it)
		}
	}
	if status, h := bearer(t, ts.URL, "GET", "/api/history/demo.story/demo:story:1", tok, nil); status != http.StatusOK {
		t.Errorf("own history: %d %v", status, h)
	}
	if status, _ := bearer(t, ts.URL, "GET", "/api/history/demo.story/demo:story:1?tenant="+tenantB, tok, nil); status != http.StatusNotFound {
		t.Errorf("B's history: %d", status)
	}

	// Pools: A's, masked; B's 404; no value even asked for.
	_, pools := bearer(t, ts.URL, "GET", "/api/pools", tok, nil)
	if got := list(pools["pools"]); len(got) != 1 || obj(got[0])["tenant"] != tenantA || strings.Contains(toJSON(pools), "acmepw1") {
		t.Errorf("analyst's pools: %v", pools)
	}
	if status, _ := bearer(t, ts.URL, "GET", "/api/pools/"+tenantB+"/demo/proxy", tok, nil); status != http.StatusNotFound {
		t.Errorf("B's pool: %d", status)
	}
	if status, out := bearer(t, ts.URL, "GET", "/api/pools/"+tenantA+"/demo/proxy?reveal=1", tok, nil); status != http.StatusForbidden || strings.Contains(toJSON(out), "acmepw1") {
		t.Errorf("analyst reveal: %d %v", status, out)
	}
	// Schedules: A's alone.
	_, sc := bearer(t, ts.URL, "GET", "/api/schedules", tok, nil)
	for _, s := range list(sc["schedules"]) {
		if obj(s)["tenant"] != tenantA {
			t.Errorf("analyst lists schedule %v", s)
		}
	}
	if status, out := bearer(t, ts.URL, "GET", "/metrics", tok, nil); status != http.StatusForbidden || !strings.Contains(out["error"].(string), "every tenant's metric series") {
		t.Errorf("metrics: %d %v", status, out)
	}
}

// TestOperatorCannotStartAnotherTenant: an operator of A starts A's chain, not B's, and
// cannot cancel or schedule B's.
func TestOperatorCannotStartAnotherTenant(t *testing.T) {
	tenantWorld(t)
	t.Cleanup(func() { dropTenantSchedules(t) })
	_, ts := guarded(t, nil)
	tok := world.tokens["operator"]
	status, out := bearer(t, ts.URL, "POST", "/api/runs", tok, map[string]any{"source": tenantChain(t, tenantB), "sets": []string{"base_url=" + stack.site}})
	if want := `this token is an operator of tenants acme: it cannot start a chain of tenant "globex"; set tenant: in the chain file to one of its tenants`; status != http.StatusForbidden || out["error"] != want {
		t.Errorf("start B's chain: %d %v", status, out)
	}
	if status, out := bearer(t, ts.URL, "POST", "/api/schedules", tok, map[string]any{"id": "op-b", "cron": "0 0 1 1 *", "source": tenantChain(t, tenantB)}); status != http.StatusForbidden {
		t.Errorf("schedule B's chain: %d %v", status, out)
	}
	if status, out := bearer(t, ts.URL, "POST", "/api/schedules", tok, map[string]any{"id": "op-a", "cron": "0 0 1 1 *", "source": tenantChain(t, tenantA)}); status != http.StatusCreated {
		t.Errorf("schedule A's chain: %d %v", status, out)
	}
	if status, out := bearer(t, ts.URL, "PUT", "/api/schedules/op-a/chain", tok, map[string]any{"source": tenantChain(t, tenantB)}); status != http.StatusForbidden {
		t.Errorf("move A's schedule to B's chain: %d %v", status, out)
	}
	if status, out := bearer(t, ts.URL, "POST", "/api/runs/"+world.runs[tenantB]+"/cancel", tok, nil); status != http.StatusNotFound || strings.Contains(toJSON(out), "completed") {
		t.Errorf("cancel B's run: %d %v", status, out)
	}
	status, out = bearer(t, ts.URL, "POST", "/api/runs", tok, map[string]any{"source": tenantChain(t, tenantA), "sets": []string{"base_url=" + stack.site, "feed.pages=1"}})
	if status != http.StatusCreated {
		t.Fatalf("start A's chain: %d %v", status, out)
	}
	// The start is in the audit trail, with who, tenant and outcome.
	entries := auditSince(t, ts.URL, time.Minute)
	found := false
	for _, e := range entries {
		found = found || (e.Who == world.principals["operator"].ID && e.Action == "POST /api/runs" && e.Tenant == tenantA && e.Status == http.StatusCreated && e.Role == RoleOperator && e.Source == "127.0.0.1")
	}
	if !found {
		t.Errorf("no audit entry of the operator's start in %v", entries)
	}
	// The dashboard's panel reads the newest entries.
	status, body := send(t, "GET", ts.URL+"/api/audit?last=1", "Bearer "+fullToken, "")
	var last struct{ Entries []AuditEntry }
	if err := json.Unmarshal([]byte(body), &last); status != http.StatusOK || err != nil || len(last.Entries) != 1 || last.Entries[0].ID != entries[len(entries)-1].ID {
		t.Errorf("audit?last=1: %d %s; want the newest entry, %+v", status, body, entries[len(entries)-1])
	}
}

func auditSince(t *testing.T, base string, d time.Duration) []AuditEntry {
	t.Helper()
	status, body := send(t, "GET", base+"/api/audit?since="+d.String(), "Bearer "+fullToken, "")
	if status != http.StatusOK {
		t.Fatalf("audit: %d %s", status, body)
	}
	var out struct{ Entries []AuditEntry }
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	return out.Entries
}

// TestRevealNeedsOperatorFlagAndIsAudited: pool values are shown to an operator only
// when its token has the reveal flag and the request asks; each reveal is audited, and
// the trail holds no value.
func TestRevealNeedsOperatorFlagAndIsAudited(t *testing.T) {
	tenantWorld(t)
	_, ts := guarded(t, nil)
	path := "/api/pools/" + tenantA + "/demo/proxy?reveal=1"
	status, out := bearer(t, ts.URL, "GET", path, world.tokens["operator-hidden"], nil)
	if status != http.StatusForbidden || out["field"] != "reveal" || !strings.Contains(out["error"].(string), "created without --reveal") || strings.Contains(toJSON(out), "acmepw1") {
		t.Errorf("operator without the flag: %d %v", status, out)
	}
	status, body := send(t, "GET", ts.URL+path, "Bearer "+world.tokens["operator"], "")
	if status != http.StatusOK || !strings.Contains(body, proxyA) {
		t.Errorf("operator with the flag: %d %s", status, body)
	}
	if status, _ := send(t, "GET", ts.URL+"/api/pools/"+tenantB+"/demo/proxy?reveal=1", "Bearer "+world.tokens["operator"], ""); status != http.StatusNotFound {
		t.Errorf("operator reveals B's pool: %d", status)
	}
	entries := auditSince(t, ts.URL, time.Minute)
	var reveals []AuditEntry
	for _, e := range entries {
		if e.Reveal && e.Tenant == tenantA && strings.HasPrefix(e.Who, "p-") && e.Action == "GET /api/pools/{tenant}/{site}/{kind}" {
			reveals = append(reveals, e)
		}
	}
	if len(reveals) < 2 || reveals[len(reveals)-1].Status != http.StatusOK || reveals[len(reveals)-2].Status != http.StatusForbidden ||
		reveals[len(reveals)-1].Target != "tenant=acme site=demo kind=proxy" {
		t.Errorf("reveals audited: %+v", reveals)
	}
	raw, _ := json.Marshal(entries)
	for _, secret := range []string{"acmepw1", "globexpw2", world.tokens["operator"], fullToken} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the audit trail holds %q", secret)
		}
	}
	// Only admins read the trail.
	for _, role := range []string{"viewer", "operator", "analyst"} {
		if status, _ := send(t, "GET", ts.URL+"/api/audit", "Bearer "+world.tokens[role], ""); status != http.StatusForbidden {
			t.Errorf("%s reads the audit trail: %d", role, status)
		}
	}
}

// TestRevokeAndRotateOnTwoConsoles: two consoles of the fleet (two Servers on the same
// Redis) refuse a revoked or rotated token from the next request.
func TestRevokeAndRotateOnTwoConsoles(t *testing.T) {
	_, one := guarded(t, nil)
	_, two := guarded(t, nil)
	rdb := redis.NewClient(&redis.Options{Addr: stack.redis.Addr()})
	defer rdb.Close()
	ps := NewPrincipals(rdb)
	ctx := context.Background()
	both := func(tok string, want int) {
		t.Helper()
		for _, ts := range []string{one.URL, two.URL} {
			if status, body := send(t, "GET", ts+"/api/chains/registered/demo", "Bearer "+tok, ""); status != want {
				t.Errorf("%s: %d %.200s, want %d", ts, status, body, want)
			}
		}
	}
	p, tok, err := ps.Create(ctx, Principal{Name: "bob", Role: RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, TokenPrefix) || len(tok) != len(TokenPrefix)+64 {
		t.Errorf("token %q", tok)
	}
	both(tok, http.StatusOK)
	p2, tok2, err := ps.Rotate(ctx, p.ID)
	if err != nil || p2.ID != p.ID || tok2 == tok {
		t.Fatal(p2, err)
	}
	both(tok, http.StatusUnauthorized)
	both(tok2, http.StatusOK)
	if _, err := ps.Revoke(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	both(tok2, http.StatusUnauthorized)
	all, err := ps.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range all {
		if q.ID == p.ID {
			t.Errorf("revoked %s still listed", p.ID)
		}
	}
	// No Redis key holds a token itself.
	keys, _ := rdb.Keys(ctx, "*").Result()
	for _, k := range keys {
		if v, _ := rdb.Get(ctx, k).Result(); strings.Contains(v+k, tok2) || strings.Contains(v+k, tok) {
			t.Errorf("key %s holds a token", k)
		}
	}
	if _, err := ps.Revoke(ctx, "p-nope"); err == nil || err.Error() != "no principal \"p-nope\": `trawler token list` shows the ids" {
		t.Errorf("revoke unknown: %v", err)
	}
}

// TestBadTokenInput: an unknown role, a tenant that is no tenant name, a scoped role
// without tenants and a malformed header are refused with what to do; repeated bad
// tokens from an address get 429 with Retry-After, counted and logged once, never with
// the token.
func TestBadTokenInput(t *testing.T) {
	for _, c := range []struct {
		p    Principal
		want string
	}{
		{Principal{Name: "x", Role: "boss"}, `--role "boss": want one of admin, operator, analyst, viewer`},
		{Principal{Name: "x", Role: RoleAnalyst}, "--role analyst needs --tenant T[,T…]: the tenants it works on"},
		{Principal{Name: "x", Role: RoleOperator, Tenants: []string{"Acme Corp"}}, `--tenant "Acme Corp": a tenant name is lowercase letters, digits, - and _, as a chain's tenant: line takes it`},
		{Principal{Name: "x", Role: RoleViewer, Tenants: []string{"acme"}}, "--tenant: a viewer reads every tenant; leave --tenant out, or create an operator or analyst"},
		{Principal{Name: "x", Role: RoleAnalyst, Tenants: []string{"acme"}, Reveal: true}, "--reveal is for operators: an analyst never sees pool values (admins reveal with reveal=1 already)"},
		{Principal{Role: RoleAdmin}, "--name is required: say whose token it is, e.g. --name alice"},
	} {
		if err := CheckPrincipal(&c.p); err == nil || err.Error() != c.want {
			t.Errorf("%+v: %v, want %q", c.p, err, c.want)
		}
	}

	var logs bytes.Buffer
	_, ts := guarded(t, func(c *Config) {
		c.AuthFailLimit = 5
		c.Log = slog.New(slog.NewTextHandler(&logs, nil))
	})
	for _, h := range []string{"Basic dXNlcjpwdw==", "Bearer two words", "Token abc"} {
		status, body := send(t, "GET", ts.URL+"/api/runs", h, "")
		if status != http.StatusUnauthorized || !strings.Contains(body, `malformed Authorization header: it must read \"Bearer TOKEN\"`) {
			t.Errorf("%q: %d %s", h, status, body)
		}
	}
	before := counter(t, "throttled")
	wrong := "trw_guess0000000000000000000000000000000000000000000000000000000000"
	for i := 0; i < 3; i++ {
		send(t, "GET", ts.URL+"/api/runs", "Bearer "+wrong, "")
	}
	// Six bad tokens, past the limit of five: even the right token waits: guesses cannot be interleaved.
	req, _ := http.NewRequest("GET", ts.URL+"/api/runs", nil)
	req.Header.Set("Authorization", "Bearer "+fullToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Errorf("after six bad tokens: %d, Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if got := counter(t, "throttled") - before; got != 1 {
		t.Errorf("throttled counted %v times", got)
	}
	if n := strings.Count(logs.String(), "bad bearer tokens from one address"); n != 1 {
		t.Errorf("logged %d times: %s", n, logs.String())
	}
	if strings.Contains(logs.String(), wrong) || strings.Contains(logs.String(), "dXNlcjpwdw") {
		t.Errorf("a token is logged: %s", logs.String())
	}
	// Without a token, the pages' API calls are not throttled (nothing was guessed).
	if status, _ := send(t, "GET", ts.URL+"/api/runs", "", ""); status != http.StatusUnauthorized {
		t.Errorf("no token while throttled: %d", status)
	}
}

func counter(t *testing.T, reason string) float64 {
	t.Helper()
	m, err := AuthFailures.GetMetricWithLabelValues(reason)
	if err != nil {
		t.Fatal(err)
	}
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

// TestPauseAndResumeRun: pausing and resuming need an operator of the run's tenant, like
// cancel; the run's detail shows who paused it; wrong states are refused with 409.
func TestPauseAndResumeRun(t *testing.T) {
	tenantWorld(t)
	_, ts := guarded(t, nil)
	op := world.tokens["operator"]
	if status, out := bearer(t, ts.URL, "POST", "/api/runs/"+world.runs[tenantA]+"/pause", world.tokens["viewer"], nil); status != http.StatusForbidden {
		t.Errorf("viewer pauses A's run: %d %v, want 403", status, out)
	}
	if status, out := bearer(t, ts.URL, "POST", "/api/runs/"+world.runs[tenantB]+"/pause", op, nil); status != http.StatusNotFound {
		t.Errorf("operator of A pauses B's run: %d %v, want 404", status, out)
	}
	want := fmt.Sprintf("run %s has already ended (completed): only a running run can be paused", world.runs[tenantA])
	if status, out := bearer(t, ts.URL, "POST", "/api/runs/"+world.runs[tenantA]+"/pause", op, nil); status != http.StatusConflict || out["error"] != want {
		t.Errorf("pause a finished run: %d %v, want 409 %q", status, out, want)
	}
	want = "no run \"no-such-run\" on this Temporal namespace (list runs with `trawler status`)"
	if status, out := bearer(t, ts.URL, "POST", "/api/runs/no-such-run/pause", fullToken, nil); status != http.StatusNotFound || out["error"] != want {
		t.Errorf("pause an unknown run: %d %v, want 404 %q", status, out, want)
	}

	slow, stop, err := demosite.Start("127.0.0.1:0", demosite.Options{Pages: 10, Latency: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	status, out := bearer(t, ts.URL, "POST", "/api/runs", op, map[string]any{"source": tenantChain(t, tenantA), "sets": []string{"base_url=" + slow, "feed.pages=10"}})
	if status != http.StatusCreated {
		t.Fatalf("start A's chain: %d %v", status, out)
	}
	id := out["run_id"].(string)
	defer bearer(t, ts.URL, "POST", "/api/runs/"+id+"/cancel", op, nil)
	want = fmt.Sprintf("run %s is not paused, so there is nothing to resume; pause it with `trawler pause %s`", id, id)
	if status, out := bearer(t, ts.URL, "POST", "/api/runs/"+id+"/resume", op, nil); status != http.StatusConflict || out["error"] != want {
		t.Errorf("resume a running run: %d %v, want 409 %q", status, out, want)
	}
	if status, out := bearer(t, ts.URL, "POST", "/api/runs/"+id+"/pause", op, nil); status != http.StatusAccepted || out["taken"] != true || out["by"] != "console: ops-acme" {
		t.Fatalf("pause: %d %v", status, out)
	}
	_, run := bearer(t, ts.URL, "GET", "/api/runs/"+id, op, nil)
	if p, _ := run["paused"].(map[string]any); p == nil || p["by"] != "console: ops-acme" || p["since"] == "" || run["state"] != "running" {
		t.Errorf("paused run's detail: state %v, paused %v", run["state"], run["paused"])
	}
	if status, out := bearer(t, ts.URL, "POST", "/api/runs/"+id+"/resume", op, nil); status != http.StatusAccepted || out["taken"] != true {
		t.Fatalf("resume: %d %v", status, out)
	}
	if _, run := bearer(t, ts.URL, "GET", "/api/runs/"+id, op, nil); run["paused"] != nil {
		t.Errorf("resumed run still paused: %v", run["paused"])
	}
}
