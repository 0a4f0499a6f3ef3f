package eslite_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// do sends one request to the server and decodes the answer.
func (e *env) do(method, path, body string) (int, map[string]any) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := e.es.Transport.Perform(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = jsonDecode(res.Body, &m)
	return res.StatusCode, m
}

func TestPointInTime(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	if st, _ := e.do("POST", "/news/_pit", ""); st != 400 {
		t.Errorf("open without keep_alive: %d", st)
	}
	st, m := e.do("POST", "/news/_pit?keep_alive=5m", "")
	id, _ := m["id"].(string)
	if st != 200 || id == "" {
		t.Fatalf("open: %d %v", st, m)
	}
	// A document written after the point in time opened is not seen through it.
	e.ok(e.es.Index("news", strings.NewReader(`{"title":"Late news","author":"erin","points":1}`), e.es.Index.WithRefresh("true")))
	body := `{"size":2,"sort":[{"points":"desc"}],"pit":{"id":"` + id + `","keep_alive":"1m"}}`
	st, m = e.do("POST", "/_search", body)
	if st != 200 || total(m) != 6.0 || m["pit_id"] != id {
		t.Errorf("search through the point in time: %d total %v pit_id %v", st, total(m), m["pit_id"])
	}
	if ids := hitIDs(m); strings.Join(ids, ",") != "3,5" {
		t.Errorf("hits %v", ids)
	}
	if live := e.search("news", `{"size":0}`); total(live) != 7.0 {
		t.Errorf("a search without it sees %v documents", total(live))
	}
	// A point in time names its indexes itself.
	if st, _ := e.do("POST", "/news/_search", body); st != 400 {
		t.Errorf("index and point in time: %d", st)
	}
	if st, m := e.do("DELETE", "/_pit", `{"id":"`+id+`"}`); st != 200 || m["num_freed"] != 1.0 {
		t.Errorf("close: %d %v", st, m)
	}
	if st, m := e.do("POST", "/_search", body); st != 404 || m["error"].(map[string]any)["type"] != "search_context_missing_exception" {
		t.Errorf("closed point in time: %d %v", st, m)
	}
}

func TestClusterSettingsMaxBuckets(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	if st, m := e.do("PUT", "/_cluster/settings", `{"transient":{"search":{"max_buckets":3}}}`); st != 200 || jsonString(m) != `{"acknowledged":true,"persistent":{},"transient":{"search":{"max_buckets":"3"}}}` {
		t.Errorf("put: %d %s", st, jsonString(m))
	}
	if _, m := e.do("GET", "/_cluster/settings?flat_settings=true", ""); jsonString(m) != `{"persistent":{},"transient":{"search.max_buckets":"3"}}` {
		t.Errorf("get: %s", jsonString(m))
	}
	// Four authors are more buckets than three.
	if st, typ := e.searchStatus("news", `{"size":0,"aggs":{"a":{"terms":{"field":"author"}}}}`); st != 400 || typ != "too_many_buckets_exception" {
		t.Errorf("over the limit: %d %s", st, typ)
	}
	if st, _ := e.searchStatus("news", `{"size":0,"aggs":{"a":{"terms":{"field":"author","size":3}}}}`); st != 200 {
		t.Errorf("at the limit: %d", st)
	}
	if st, _ := e.do("PUT", "/_cluster/settings", `{"transient":{"search.max_buckets":null}}`); st != 200 {
		t.Errorf("reset: %d", st)
	}
	if st, _ := e.searchStatus("news", `{"size":0,"aggs":{"a":{"terms":{"field":"author"}}}}`); st != 200 {
		t.Errorf("after reset: %d", st)
	}
	if st, _ := e.do("PUT", "/_cluster/settings", `{"persistent":{"no_such.setting":1}}`); st != 400 {
		t.Errorf("unknown setting: %d", st)
	}
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

func TestDisallowExpensiveQueriesAndFuzzy(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	if got := strings.Join(sorted(e.queryIDs("news", `{"fuzzy":{"author":{"value":"alise"}}}`)), ","); got != "1,3" {
		t.Errorf("fuzzy: %s", got)
	}
	if got := e.queryIDs("news", `{"fuzzy":{"author":{"value":"alise","fuzziness":0}}}`); len(got) != 0 {
		t.Errorf("fuzzy with fuzziness 0: %v", got)
	}
	if st, m := e.do("PUT", "/_cluster/settings?flat_settings=true", `{"persistent":{"search.allow_expensive_queries":"false"}}`); st != 200 || jsonString(m["persistent"]) != `{"search.allow_expensive_queries":"false"}` {
		t.Fatalf("put: %d %v", st, m)
	}
	for _, q := range []string{`{"prefix":{"title":"go"}}`, `{"wildcard":{"title":"g*"}}`, `{"regexp":{"title":"g.*"}}`,
		`{"fuzzy":{"author":"alise"}}`, `{"range":{"author":{"gte":"b"}}}`} {
		st, m := e.raw(e.es.Search(e.es.Search.WithIndex("news"), e.es.Search.WithBody(strings.NewReader(`{"query":`+q+`}`))))
		if st < 400 || !strings.Contains(jsonString(m), "cannot be executed when 'search.allow_expensive_queries' is set to false") {
			t.Errorf("%s: %d %v", q, st, m)
		}
	}
	if st, _ := e.searchStatus("news", `{"query":{"range":{"points":{"gte":100}}}}`); st != 200 {
		t.Errorf("numeric range: %d", st)
	}
}
