package yamltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSkipGates(t *testing.T) {
	step := func(k string, v map[string]any) []any { return []any{map[string]any{k: v}} }
	issue := func(has, fixed string) map[string]any {
		return map[string]any{"known_issues": []any{map[string]any{"cluster_feature": has, "fixed_by": fixed}}}
	}
	// A known issue the server's version has a fix for does not skip the test.
	if why := skipReason(step("skip", issue("gte_v8.4.0", "gte_v8.5.1"))); why != "" {
		t.Errorf("fixed known issue skipped: %s", why)
	}
	if why := skipReason(step("skip", issue("gte_v8.4.0", "gte_v99.0.0"))); why == "" {
		t.Error("unfixed known issue not skipped")
	}
	if why := xpackReason(step("do", map[string]any{"security.put_role": map[string]any{}})); why == "" {
		t.Error("a test calling a security API is not skipped")
	}
	if why := xpackReason(step("do", map[string]any{"indices.create": map[string]any{}})); why != "" {
		t.Errorf("indices.create skipped: %s", why)
	}
}

func TestSplitPath(t *testing.T) {
	for path, want := range map[string]string{
		`aggregations.p.values.50\.0`:  "[aggregations p values 50.0]",
		`aggregations.p.values.50\\.0`: "[aggregations p values 50.0]",
		`hits.hits.0._source`:          "[hits hits 0 _source]",
		`a..b`:                         "[a b]",
	} {
		if got := fmt.Sprint(splitPath(path)); got != want {
			t.Errorf("splitPath(%q) = %s, want %s", path, got, want)
		}
	}
}

func TestTimestampsStayStrings(t *testing.T) {
	f := filepath.Join(t.TempDir(), "t.yml")
	if err := os.WriteFile(f, []byte("\"t\":\n  - match: { a: 2022-01-01T00:00:00.000Z }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, tests, err := parseFile(f)
	if err != nil {
		t.Fatal(err)
	}
	m := tests[0].steps[0].(map[string]any)["match"].(map[string]any)
	if m["a"] != "2022-01-01T00:00:00.000Z" {
		t.Errorf("timestamp read as %#v", m["a"])
	}
}

func TestNonStringKeys(t *testing.T) {
	f := filepath.Join(t.TempDir(), "t.yml")
	if err := os.WriteFile(f, []byte("\"t\":\n  - do: { search: { body: { aggs: { m: { filters: { 1: { match_all: {} } } } } } } }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, tests, err := parseFile(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tests[0].steps)
	if err != nil || !strings.Contains(string(b), `"1":{"match_all":{}}`) {
		t.Errorf("steps: %s %v", b, err)
	}
}

func TestRequestCatch(t *testing.T) {
	// catch: request is any error but the ones the named catches stand for.
	for status, want := range map[int]bool{200: false, 400: false, 404: false, 409: false, 410: false, 413: true, 429: true, 500: true, 503: true} {
		if got := requestCatch(status); got != want {
			t.Errorf("requestCatch(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestFailingTeardownFailsTheTest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodDelete && r.URL.Path == "/broken" {
			w.WriteHeader(500)
			_, _ = w.Write([]byte(`{"error":{"type":"exception","reason":"boom"},"status":500}`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	f := filepath.Join(t.TempDir(), "t.yml")
	yml := "teardown:\n  - do:\n      indices.delete:\n        index: broken\n---\n\"t\":\n  - do:\n      info: {}\n"
	if err := os.WriteFile(f, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := (&Runner{URL: srv.URL}).RunFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Status != "fail" || !strings.Contains(res[0].Reason, "teardown") {
		t.Errorf("results: %+v", res)
	}
}

// The assertions hold to Elasticsearch's framework: a string is not a number, a regex
// matches only strings, is_true follows Java's string forms.
func TestAssertionsAreAsStrictAsElasticsearch(t *testing.T) {
	x := &exec{stash: map[string]any{}, body: map[string]any{
		"n": json.Number("1"), "s": "1", "f": json.Number("0.0"), "zero": json.Number("0"),
		"empty": map[string]any{}, "no": "FALSE", "t": "2021-01-01",
	}}
	for _, c := range []struct {
		kind, path string
		want       any
		ok         bool
	}{
		{"match", "n", 1.0, true},
		{"match", "n", "1", false},
		{"match", "s", 1, false},
		{"match", "s", "1", true},
		{"match", "n", "/1/", false},
		{"match", "s", "/^1$/", true},
		{"gt", "t", "2020-12-31", true},
		{"gt", "s", 0, false},
		{"close_to", "s", map[string]any{"value": 1, "error": 0.1}, false},
		{"close_to", "n", map[string]any{"value": 1, "error": 0.1}, true},
	} {
		err := x.assert(c.kind, c.path, c.want)
		if (err == nil) != c.ok {
			t.Errorf("%s %s %v: err %v, want pass=%v", c.kind, c.path, c.want, err, c.ok)
		}
	}
	for path, want := range map[string]bool{"f": true, "zero": false, "empty": true, "no": false, "missing": false} {
		if err := x.step("is_true", path); (err == nil) != want {
			t.Errorf("is_true %s: %v, want true=%v", path, err, want)
		}
	}
}

// catch: /regex/ is found in the Java string form of the response's error, which the
// response must have.
func TestCatchRegexMatchesTheErrorObject(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		if r.URL.Path == "/bare/_search" {
			_, _ = w.Write([]byte(`{"status":400,"message":"type=x"}`))
			return
		}
		_, _ = w.Write([]byte(`{"error":{"root_cause":[{"type":"x","reason":"bad [a]"}],"type":"x","reason":"bad [a]"},"status":400}`))
	}))
	defer srv.Close()
	x := &exec{r: &Runner{URL: srv.URL}, stash: map[string]any{}}
	do := func(index, catch string) error {
		return x.do(map[string]any{"catch": catch, "search": map[string]any{"index": index}})
	}
	if err := do("i", `/type=x, reason=bad \[a\]/`); err != nil {
		t.Errorf("error object form not matched: %v", err)
	}
	if err := do("i", `/"type":"x"/`); err == nil {
		t.Error("the JSON text matched, not the error object")
	}
	if err := do("bare", `/type=x/`); err == nil || !strings.Contains(err.Error(), "has no [error]") {
		t.Errorf("a response without error passed: %v", err)
	}
}

func TestTypesAreGatedAs7xOnly(t *testing.T) {
	step := func(k string, v any) []any { return []any{map[string]any{k: v}} }
	for _, steps := range [][]any{
		step("do", map[string]any{"index": map[string]any{"index": "i", "type": "t"}}),
		step("do", map[string]any{"indices.create": map[string]any{"index": "i", "include_type_name": true}}),
		step("match", map[string]any{"hits.hits.0._type": "_doc"}),
		step("is_true", "_type"),
	} {
		if why := gateReason(steps); !strings.HasPrefix(why, "7.x only") {
			t.Errorf("%v: gate %q", steps, why)
		}
	}
	for _, steps := range [][]any{
		step("is_false", "hits.hits.0._type"),
		step("do", map[string]any{"indices.create": map[string]any{"index": "i", "include_type_name": false}}),
	} {
		if why := gateReason(steps); why != "" {
			t.Errorf("%v: gated %q", steps, why)
		}
	}
}
