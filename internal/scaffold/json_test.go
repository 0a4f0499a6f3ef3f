package scaffold

import (
	"net/url"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A document that is itself the array: no items path, the slug as key (the ids repeat),
// the page number in the URL as paging.
func TestAnalyzeJSONRootArray(t *testing.T) {
	body := []byte(` [{"id": 1, "slug": "a", "tags": [{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}]},
		{"id": 1, "slug": "b"}, {"id": 2, "slug": "c"}]`)
	page := mustURL(t, "https://api.example.com/v1/posts?pg=3&size=3")
	f, err := AnalyzeJSON(body, page)
	if err != nil {
		t.Fatal(err)
	}
	if f.Items.Path != "" || f.Items.Count != 3 || f.Key != "slug" || f.Paging != "page_param" || f.PageParam != "pg" || f.StartPage != 3 || f.HasMorePath != "" {
		t.Fatalf("findings %+v: want the document's 3 objects, key slug, page_param pg from 3", f)
	}
	data, err := JSONChainYAML(ChainOptions{Name: "posts", URL: page, MaxPages: 5}, f)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Defaults struct {
			Params map[string]any `yaml:"params"`
		} `yaml:"defaults"`
		Steps []struct {
			Task   string         `yaml:"task"`
			Params map[string]any `yaml:"params"`
		} `yaml:"steps"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	p := c.Steps[0].Params
	if c.Defaults.Params["base_url"] != "https://api.example.com" || c.Steps[0].Task != "generic.json" || p["items"] != nil ||
		p["page_param"] != "pg" || p["start_page"] != 3 || p["max_pages"] != 5 {
		t.Fatalf("chain:\n%s", data)
	}
}

// A cursor API with the items under data and the cursor under paging: cursor_param from
// the field's name, has_more from the response; the largest array wins.
func TestAnalyzeJSONCursor(t *testing.T) {
	body := []byte(`{"meta": {"count": 2, "errors": [{"x": 1}]},
		"data": {"results": [{"user_id": "u1", "name": "a"}, {"user_id": "u2", "name": "b"}]},
		"paging": {"cursors": {"before": "b0", "after": "QVFIUk"}}, "hasMore": true}`)
	f, err := AnalyzeJSON(body, mustURL(t, "https://graph.example.com/users?limit=2"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Items.Path != "data.results" || len(f.Candidates) != 2 || f.Key != "user_id" || f.Paging != "cursor_path" ||
		f.CursorPath != "paging.cursors.after" || f.CursorParam != "after" || f.HasMorePath != "hasMore" {
		t.Fatalf("findings %+v", f)
	}
	if strings.Join(f.Fields, ",") != "user_id,name" {
		t.Fatalf("fields %v", f.Fields)
	}
	// next_cursor goes back as ?cursor=, unless the URL already names its cursor.
	f, _ = AnalyzeJSON([]byte(`{"items": [{"a": 1}], "next_cursor": "c2"}`), mustURL(t, "https://x.example/api"))
	g, _ := AnalyzeJSON([]byte(`{"items": [{"a": 1}], "next_cursor": "c2"}`), mustURL(t, "https://x.example/api?page_token=c1"))
	if f.CursorParam != "cursor" || g.CursorParam != "page_token" || f.Key != "" {
		t.Fatalf("cursor_param %q and %q, want cursor and page_token; key %q, want none", f.CursorParam, g.CursorParam, f.Key)
	}
}

// JSON without an array of objects says so, and what to do.
func TestAnalyzeJSONNoList(t *testing.T) {
	for _, body := range []string{`{"status": "ok", "ids": [1, 2, 3]}`, `[]`} {
		_, err := AnalyzeJSON([]byte(body), mustURL(t, "https://x.example/api/status"))
		if err == nil || !strings.Contains(err.Error(), "no list of objects in the JSON at https://x.example/api/status") || !strings.Contains(err.Error(), "items") {
			t.Fatalf("%s: error %v", body, err)
		}
	}
	if _, err := AnalyzeJSON([]byte(`{"a": `), mustURL(t, "https://x.example/")); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("broken JSON: %v", err)
	}
}

func TestIsJSON(t *testing.T) {
	for _, c := range []struct {
		ct, body string
		want     bool
	}{
		{"application/json; charset=utf-8", "", true},
		{"application/vnd.api+json", "", true},
		{"text/plain", "\n  [1]", true},
		{"", "\uFEFF{}", true},
		{"text/html", "<!doctype html>", false},
	} {
		if got := IsJSON(c.ct, []byte(c.body)); got != c.want {
			t.Errorf("IsJSON(%q, %q) = %v", c.ct, c.body, got)
		}
	}
}
