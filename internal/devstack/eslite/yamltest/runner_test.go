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
