package console

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// hostile are values a caller may put in any parameter, as the console receives them
// (decoded): path separators, fragments, queries, their escaped forms (sent escaped once
// more), dot segments and NUL, and the index names that addressed Elasticsearch's write
// APIs through the search's path.
var hostile = []string{
	"trawler-x/_doc/pwned#",
	"trawler-x/_bulk?refresh=true#",
	"trawler-x/_close#",
	"trawler-items/_delete_by_query?q=*#",
	"../trawler-items/_doc/x?",
	"trawler-x%2F_doc%2Fpwned%23",
	"a%2Fb%3Fc%23d%00",
	"..",
	".",
	"demo.story/../x",
	"nul\x00byte",
	"?#/",
}

// routeInputs are the query parameters each API route reads; its path wildcards come
// from the pattern. Every route the console registers must be listed, so a new route
// is walked with hostile values too.
var routeInputs = map[string][]string{
	"GET /api/runs":                         {"chain", "tenant", "state", "limit"},
	"POST /api/runs":                        nil,
	"GET /api/runs/{id}":                    nil,
	"POST /api/runs/{id}/cancel":            nil,
	"POST /api/runs/{id}/pause":             nil,
	"POST /api/runs/{id}/resume":            nil,
	"GET /api/runs/{id}/chain":              nil,
	"GET /api/fleet":                        nil,
	"GET /api/capacity":                     {"drain"},
	"GET /api/chains":                       nil,
	"GET /api/chains/registered/{name}":     nil,
	"POST /api/chains/validate":             nil,
	"GET /api/schedules":                    nil,
	"POST /api/schedules":                   nil,
	"POST /api/schedules/{id}/pause":        nil,
	"POST /api/schedules/{id}/unpause":      nil,
	"POST /api/schedules/{id}/trigger":      nil,
	"POST /api/schedules/{id}/backfill":     nil,
	"DELETE /api/schedules/{id}":            nil,
	"PUT /api/schedules/{id}/chain":         nil,
	"GET /api/items":                        {"biz", "page", "size"},
	"GET /api/items/{biz}/{key...}":         {"tenant"},
	"GET /api/history/{biz}/{key...}":       {"tenant", "n"},
	"GET /api/archive/{biz}/{key...}":       {"tenant"},
	"GET /api/search":                       {"index", "tenant", "q", "size", "from", "sort", "agg"},
	"POST /api/search":                      {"index", "tenant"},
	"GET /api/dedup":                        {"sample"},
	"GET /api/recrawl":                      nil,
	"GET /api/hosts":                        nil,
	"GET /api/pools":                        {"tenant", "reveal"},
	"GET /api/pools/{tenant}/{site}/{kind}": {"reveal"},
	"/api/":                                 nil,
	"GET /metrics":                          nil,
	"GET /api/audit":                        {"since", "n", "last"},
}

// hostileCall is one request of the walk: a route with one parameter holding a
// hostile value.
type hostileCall struct {
	pattern, method, path, field, value string
}

// hostileCalls are the requests that put each hostile value into each path wildcard
// and query parameter of every API route (the open routes serve pages, no data).
func hostileCalls(t *testing.T, routes []Route) []hostileCall {
	t.Helper()
	var calls []hostileCall
	for _, rt := range routes {
		if rt.Open {
			continue
		}
		params, ok := routeInputs[rt.Pattern]
		if !ok {
			t.Errorf("route %s is not in routeInputs: list the query parameters it reads", rt.Pattern)
			continue
		}
		method := cmp.Or(rt.Method(), http.MethodGet)
		var wild []string
		for _, m := range wildcard.FindAllStringSubmatch(rt.Pattern, -1) {
			if m[1] != "" {
				wild = append(wild, m[1])
			}
		}
		for _, v := range hostile {
			for _, w := range wild {
				vals := map[string][]string{"id": {"x"}, "biz": {"demo.story"}, "key": {"demo:story:1"}, "tenant": {"default"}, "site": {"demo"}, "kind": {"cookie"}, "name": {"demo"}}
				vals[w] = []string{url.PathEscape(v)}
				for _, p := range paths(rt.Pattern, vals) {
					calls = append(calls, hostileCall{rt.Pattern, method, p, w, v})
				}
			}
			for _, q := range params {
				for _, p := range paths(rt.Pattern, map[string][]string{"biz": {"demo.story"}, "key": {"demo:story:1"}, "tenant": {"default"}, "site": {"demo"}, "kind": {"cookie"}}) {
					calls = append(calls, hostileCall{rt.Pattern, method, p + "?" + q + "=" + url.QueryEscape(v), q, v})
				}
			}
		}
	}
	return calls
}

// esState is what Elasticsearch holds: every index with its document count, or the
// error counting gives (a closed index cannot be counted).
func esState(t *testing.T) map[string]string {
	t.Helper()
	base := "http://" + strings.TrimPrefix(stack.es, "http://")
	if res, err := http.Post(base+"/_refresh", "application/json", nil); err == nil {
		res.Body.Close()
	}
	res, err := http.Get(base + "/_aliases")
	if err != nil {
		t.Fatal(err)
	}
	var aliases map[string]any
	err = json.NewDecoder(res.Body).Decode(&aliases)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]string{}
	for ix := range aliases {
		res, err := http.Get(base + "/" + url.PathEscape(ix) + "/_count")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var c struct{ Count int }
		if res.StatusCode != http.StatusOK || json.Unmarshal(raw, &c) != nil {
			state[ix] = fmt.Sprintf("%d %s", res.StatusCode, raw)
			continue
		}
		state[ix] = fmt.Sprint(c.Count, " documents")
	}
	return state
}

// TestHostileInputs walks every API route with hostile values in each path wildcard and
// query parameter, with both tokens: the console answers each with 4xx (a 400 names the
// parameter), never 5xx, and Elasticsearch holds the same indexes, open, with the same
// documents afterwards.
func TestHostileInputs(t *testing.T) {
	demoRun(t)
	srv, ts := guarded(t, nil)
	before := esState(t)
	schedulesBefore := schedules(t, ts.URL)
	calls := hostileCalls(t, srv.Routes())
	if len(calls) < 300 {
		t.Fatalf("only %d hostile calls", len(calls))
	}
	for _, c := range calls {
		for _, tok := range []string{fullToken, readToken} {
			body := ""
			if c.method == http.MethodPost && strings.HasPrefix(c.path, "/api/search") {
				body = `{"query":{"match_all":{}}}`
			}
			status, out := send(t, c.method, ts.URL+c.path, "Bearer "+tok, body)
			switch {
			case status >= 500:
				t.Errorf("%s %s (%s=%q, %s token): %d %.300s", c.method, c.path, c.field, c.value, tokName(tok), status, out)
			case status == http.StatusBadRequest && !strings.Contains(out, `"field":"`):
				t.Errorf("%s %s (%s=%q): 400 naming no field: %.300s", c.method, c.path, c.field, c.value, out)
			}
		}
	}
	if after := esState(t); !equalMaps(before, after) {
		t.Errorf("Elasticsearch changed under hostile requests:\nbefore %v\nafter  %v", before, after)
	}
	if after := schedules(t, ts.URL); !slices.Equal(schedulesBefore, after) {
		t.Errorf("schedules changed under hostile requests: %v, then %v", schedulesBefore, after)
	}
}

func tokName(tok string) string {
	if tok == readToken {
		return "read-only"
	}
	return "full"
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// schedules are the ids of the schedules the console lists.
func schedules(t *testing.T, base string) []string {
	t.Helper()
	status, out := call(t, base, http.MethodGet, "/api/schedules", fullToken, nil)
	if status != http.StatusOK {
		t.Fatalf("schedules: %d %v", status, out)
	}
	var ids []string
	for _, s := range list(out["schedules"]) {
		ids = append(ids, fmt.Sprint(obj(s)["id"]))
	}
	sort.Strings(ids)
	return ids
}

// esRecorder is a reverse proxy in front of Elasticsearch that notes every request
// passing through it.
type esRecorder struct {
	mu   sync.Mutex
	seen []string // "METHOD /escaped/path"
}

func (e *esRecorder) requests() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.seen)
}

func recordES(t *testing.T) (*esRecorder, string) {
	t.Helper()
	target, err := url.Parse("http://" + strings.TrimPrefix(stack.es, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &esRecorder{}
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		rec.mu.Lock()
		rec.seen = append(rec.seen, pr.In.Method+" "+pr.In.URL.EscapedPath())
		rec.mu.Unlock()
		pr.SetURL(target)
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

// esRead reports whether a request, as Elasticsearch routes it, only reads: any GET or
// HEAD, or a POST of a search or count to the cluster or to one index (its path parts
// unescaped one by one, as Elasticsearch reads them).
func esRead(req string) bool {
	method, path, _ := strings.Cut(req, " ")
	if method == http.MethodGet || method == http.MethodHead {
		return true
	}
	var parts []string
	for _, p := range strings.Split(strings.Trim(path, "/"), "/") {
		if u, err := url.PathUnescape(p); err == nil {
			p = u
		}
		parts = append(parts, p)
	}
	if method != http.MethodPost || len(parts) > 2 {
		return false
	}
	if len(parts) == 2 && strings.HasPrefix(parts[0], "_") {
		return false
	}
	last := parts[len(parts)-1]
	return last == "_search" || last == "_count"
}

// TestReadTokenOnlyReadsElasticsearch puts a recording proxy between the console and
// Elasticsearch and sends, with the read-only token, every request that token may make
// with hostile values in every parameter, and the index names that once reached
// Elasticsearch's write APIs: only searches, counts and GETs reach Elasticsearch.
func TestReadTokenOnlyReadsElasticsearch(t *testing.T) {
	demoRun(t)
	rec, esURL := recordES(t)
	srv, ts := guarded(t, func(c *Config) { c.ES = esURL })
	before := esState(t)

	sent := 0
	for _, c := range hostileCalls(t, srv.Routes()) {
		if !readAllowed(c.pattern, c.method) {
			continue
		}
		body := ""
		if c.method == http.MethodPost {
			body = `{"query":{"match_all":{}}}`
		}
		send(t, c.method, ts.URL+c.path, "Bearer "+readToken, body)
		sent++
	}
	// The exploits as reported, escaped as a browser or curl sends them.
	for _, q := range []string{
		"index=trawler-x%2F_doc%2Fpwned%23",
		"index=trawler-x%2F_bulk%3Frefresh%3Dtrue%23",
		"index=trawler-x%2F_close%23",
		"index=trawler-items%2F_close%23",
		"index=trawler-items%2F_delete_by_query%23",
		"index=trawler-items%2F_update_by_query%23",
		"index=_all%2F_close%23",
	} {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			send(t, m, ts.URL+"/api/search?"+q, "Bearer "+readToken, `{"query":{"match_all":{}}}`)
			sent++
		}
	}
	status, out := call(t, ts.URL, http.MethodGet, "/api/search?index=trawler-x%2F_doc%2Fpwned%23", readToken, nil)
	if want := `index "trawler-x/_doc/pwned#": not an index Trawler writes; use trawler-items, trawler-<site>-<task>, trawler.<tenant> or trawler.<tenant>.<site>-<task> (lowercase letters, digits, - and _)`; status != http.StatusBadRequest || out["error"] != want || out["field"] != "index" {
		t.Errorf("the exploit: %d %v, want 400 %q", status, out, want)
	}
	// A search the read-only token may make reaches Elasticsearch: the recording sees
	// the console's requests.
	if status, body := send(t, http.MethodPost, ts.URL+"/api/search?index=trawler-demo-story", "Bearer "+readToken, `{"query":{"match_all":{}}}`); status != http.StatusOK {
		t.Errorf("search of trawler-demo-story: %d %.300s", status, body)
	}
	seen := rec.requests()
	for _, req := range seen {
		if !esRead(req) {
			t.Errorf("the read-only token's requests (%d sent) made the console send %s to Elasticsearch", sent, req)
		}
	}
	if !slices.Contains(seen, "POST /trawler-demo-story/_search") {
		t.Errorf("the proxy saw no search of trawler-demo-story in %d requests: %v", len(seen), seen)
	}
	if after := esState(t); !equalMaps(before, after) {
		t.Errorf("Elasticsearch changed under the read-only token:\nbefore %v\nafter  %v", before, after)
	}
	for _, req := range []string{"POST /trawler-x/_doc/pwned", "POST /trawler-x/_bulk", "POST /trawler-x/_close", "PUT /x/_doc/1", "DELETE /trawler-items", "POST /trawler-items/_delete_by_query", "POST /_bulk", "POST /trawler-items/_doc/_search", "POST /_all/_close"} {
		if esRead(req) {
			t.Errorf("esRead(%q) = true", req)
		}
	}
}
