package es_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/eslite"
	"github.com/trawlerhq/trawler/internal/storage"
	"github.com/trawlerhq/trawler/internal/storage/es"
)

var storySpec = crawl.TaskSpec{Name: "demo.story", Output: []crawl.Field{
	{Name: "title", Type: crawl.String},
	{Name: "link", Type: crawl.URL},
	{Name: "points", Type: crawl.Int},
	{Name: "ratio", Type: crawl.Float},
	{Name: "posted", Type: crawl.Time},
	{Name: "dead", Type: crawl.Bool},
	{Name: "tags", Type: crawl.List},
}}

func specs(biz string) (crawl.TaskSpec, bool) {
	if biz == storySpec.Name {
		return storySpec, true
	}
	return crawl.TaskSpec{}, false
}

func item(biz, key, run string, data map[string]any) crawl.Item {
	return crawl.Item{ID: 1, Biz: biz, Key: key, URL: "http://x/" + key, TS: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		Hash: "h" + key, Chain: "demo", RunID: run, Tenant: "t", Data: data}
}

func story(key, run string, points any) crawl.Item {
	return item("demo.story", key, run, map[string]any{"title": "Story " + key, "link": "http://x/" + key, "points": points,
		"ratio": 0.5, "posted": "2026-11-01T10:00:00Z", "dead": false, "tags": []string{"a", "b"}})
}

// flaky answers 429 to the first n bulk requests, then passes through.
type flaky struct {
	n    int32
	seen atomic.Int32
}

func (f *flaky) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/_bulk") && f.seen.Add(1) <= f.n {
		return &http.Response{StatusCode: 429, Status: "429 Too Many Requests", Header: http.Header{"X-Elastic-Product": {"Elasticsearch"}},
			Body: http.NoBody, Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestSink(t *testing.T) {
	url, stop, err := eslite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	fl := &flaky{n: 2}
	s, err := es.Open(ctx, es.Options{Addresses: []string{url}, Specs: specs, Backoff: time.Millisecond, Transport: fl})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var _ storage.Sink = s
	if s.Name() != "es" || es.IndexName("hacker.News") != "trawler-hacker-news" {
		t.Fatal("names")
	}

	if err := s.Write(ctx, []crawl.Item{story("1", "r1", 10), story("2", "r1", 20), story("3", "r1", 30)}); err != nil {
		t.Fatal(err)
	}
	if fl.seen.Load() != 3 {
		t.Fatalf("429 was not retried: %d bulk requests", fl.seen.Load())
	}
	if n, err := s.Count(ctx, "r1"); err != nil || n != 3 {
		t.Fatalf("count r1: %d %v", n, err)
	}
	// the same keys again in a later run: one document per key, the latest wins
	if err := s.Write(ctx, []crawl.Item{story("1", "r2", 11), story("2", "r2", 21), story("3", "r2", 31), story("3", "r2", 32)}); err != nil {
		t.Fatal(err)
	}
	n1, _ := s.Count(ctx, "r1")
	n2, _ := s.Count(ctx, "r2")
	if n1 != 0 || n2 != 3 {
		t.Fatalf("after rewrite: r1=%d r2=%d", n1, n2)
	}

	// the mapping follows the spec
	c := s.Client()
	res, err := c.Indices.GetMapping(c.Indices.GetMapping.WithIndex("trawler-demo-story"))
	if err != nil {
		t.Fatal(err)
	}
	var mp map[string]map[string]map[string]map[string]any
	_ = json.NewDecoder(res.Body).Decode(&mp)
	res.Body.Close()
	props := mp["trawler-demo-story"]["mappings"]["properties"]
	data := props["data"].(map[string]any)["properties"].(map[string]any)
	want := map[string]string{"title": "text", "link": "keyword", "points": "long", "ratio": "double", "posted": "date", "dead": "boolean", "tags": "keyword"}
	for f, typ := range want {
		if got := data[f].(map[string]any)["type"]; got != typ {
			t.Errorf("data.%s: %v, want %s", f, got, typ)
		}
	}
	if props["run_id"].(map[string]any)["type"] != "keyword" || props["ts"].(map[string]any)["type"] != "date" {
		t.Errorf("item fields: %v", props)
	}

	// per-document errors name the failing keys; the good documents are stored
	err = s.Write(ctx, []crawl.Item{story("4", "r3", 4), story("5", "r3", "many"), story("6", "r3", map[string]any{"x": 1})})
	var be *es.BulkError
	if !errors.As(err, &be) || len(be.Failures) != 2 || be.Failures[0].Key != "5" || be.Failures[1].Key != "6" || be.Failures[0].Type != "document_parsing_exception" {
		t.Fatalf("bulk error: %v", err)
	}
	if !strings.Contains(err.Error(), "5 (trawler-demo-story, 400 document_parsing_exception") {
		t.Fatalf("message: %v", err)
	}
	if n, _ := s.Count(ctx, "r3"); n != 1 {
		t.Fatalf("r3 count %d", n)
	}

	// a biz without a spec gets a mapping inferred from its data
	if err := s.Write(ctx, []crawl.Item{item("other.thing", "k1", "r4", map[string]any{"name": "Thing", "size": 3, "home": "https://a.b/"})}); err != nil {
		t.Fatal(err)
	}
	res, err = c.Search(c.Search.WithIndex(es.Alias), c.Search.WithBody(strings.NewReader(`{"query":{"bool":{"filter":[{"term":{"data.home":"https://a.b/"}},{"match":{"data.name":"thing"}},{"range":{"data.size":{"gte":3}}}]}}}`)))
	if err != nil {
		t.Fatal(err)
	}
	var sr struct {
		Hits struct {
			Hits []struct {
				Index string `json:"_index"`
				ID    string `json:"_id"`
			} `json:"hits"`
		} `json:"hits"`
	}
	_ = json.NewDecoder(res.Body).Decode(&sr)
	res.Body.Close()
	if len(sr.Hits.Hits) != 1 || sr.Hits.Hits[0].Index != "trawler-other-thing" || sr.Hits.Hits[0].ID != "@t:k1" {
		t.Fatalf("inferred mapping search: %+v", sr)
	}
	if n, _ := s.Count(ctx, "nope"); n != 0 {
		t.Fatal("count of unknown run")
	}
}

func TestDocIDIsPerTenant(t *testing.T) {
	for _, c := range []struct{ tenant, key, want string }{
		{"", "demo:story:1", "demo:story:1"}, // the default tenant keeps the bare key
		{crawl.DefaultTenant, "demo:story:1", "demo:story:1"},
		{"acme", "demo:story:1", "@acme:demo:story:1"},
		{"", strings.Repeat("k", 512), strings.Repeat("k", 512)},
		{"", "@acme:demo:story:1", "@:@acme:demo:story:1"}, // a key that imitates acme's id
	} {
		if got := es.DocID(c.tenant, c.key); got != c.want {
			t.Errorf("DocID(%q, %q) = %q, want %q", c.tenant, c.key, got, c.want)
		}
	}
	// Over 512 bytes the whole id is digested, so two tenants' long keys still differ.
	long := strings.Repeat("k", 510)
	a, b, d := es.DocID("a", long), es.DocID("b", long), es.DocID("", long)
	if !strings.HasPrefix(a, "@sha256-") || len(a) != 72 || a == b || d != long {
		t.Errorf("long ids: %q %q %q", a, b, d)
	}
}

// Two tenants indexing the same biz/key keep two documents; Count by run sees both.
func TestTenantsKeepSeparateDocuments(t *testing.T) {
	url, stop, err := eslite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	s, err := es.Open(ctx, es.Options{Addresses: []string{url}, Specs: specs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var batch []crawl.Item
	for _, tenant := range []string{"a", "b", crawl.DefaultTenant} {
		it := story("1", "r1", 10)
		it.Tenant = tenant
		batch = append(batch, it)
	}
	if err := s.Write(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Count(ctx, "r1"); err != nil || n != 3 {
		t.Fatalf("count r1: %d %v; want 3, one document per tenant", n, err)
	}
	c := s.Client()
	res, err := c.Search(c.Search.WithIndex(es.Alias), c.Search.WithBody(strings.NewReader(`{"sort":[{"tenant":"asc"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var sr struct {
		Hits struct {
			Hits []struct {
				ID     string `json:"_id"`
				Source struct {
					Key, Tenant string
				} `json:"_source"`
			} `json:"hits"`
		} `json:"hits"`
	}
	if err := json.NewDecoder(res.Body).Decode(&sr); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range sr.Hits.Hits {
		got = append(got, h.ID+"="+h.Source.Tenant+"/"+h.Source.Key)
	}
	if strings.Join(got, " ") != "@a:1=a/1 @b:1=b/1 1=default/1" {
		t.Errorf("documents: %v", got)
	}
}

// Keys come from site content: a default-tenant key imitating acme's document id (its
// "@tenant:" form, the escape, 0x00, or the digest id of acme's long key) is a document
// of its own and leaves acme's as acme indexed it.
func TestHostileKeysCannotOverwriteAnotherTenantsDocument(t *testing.T) {
	url, stop, err := eslite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	s, err := es.Open(ctx, es.Options{Addresses: []string{url}, Specs: specs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	long := strings.Repeat("k", 600)
	keys := []string{"k1", "@acme:k1", "@acme:k1\x00", "@:k1", "@@acme:k1", "@acme", "@", ":k1", "k1\x00@acme:k1", "@default:k1",
		long, es.DocID("acme", long)}
	write := func(tenant string) {
		t.Helper()
		var batch []crawl.Item
		for _, key := range keys {
			it := story(key, "run-"+tenant, 1)
			it.Tenant, it.Data["title"] = tenant, tenant+" "+key
			batch = append(batch, it)
		}
		if err := s.Write(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	write("acme") // acme first: an overwrite would replace its documents
	write(crawl.DefaultTenant)

	c := s.Client()
	res, err := c.Search(c.Search.WithIndex(es.Alias), c.Search.WithSize(100))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var sr struct {
		Hits struct {
			Hits []struct {
				ID     string `json:"_id"`
				Source struct {
					Key, Tenant string
					RunID       string `json:"run_id"`
					Data        struct{ Title string }
				} `json:"_source"`
			} `json:"hits"`
		} `json:"hits"`
	}
	if err := json.NewDecoder(res.Body).Decode(&sr); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, h := range sr.Hits.Hits {
		src := h.Source
		if h.ID != es.DocID(src.Tenant, src.Key) || src.RunID != "run-"+src.Tenant || src.Data.Title != src.Tenant+" "+src.Key {
			t.Errorf("document %q holds tenant %q key %q run %q title %q", h.ID, src.Tenant, src.Key, src.RunID, src.Data.Title)
		}
		found[src.Tenant+"/"+src.Key] = true
	}
	for _, tenant := range []string{"acme", crawl.DefaultTenant} {
		for _, key := range keys {
			if !found[tenant+"/"+key] {
				t.Errorf("%s's document %q is gone", tenant, key)
			}
		}
	}
	if len(sr.Hits.Hits) != 2*len(keys) {
		t.Errorf("%d documents for %d keys of two tenants, want %d", len(sr.Hits.Hits), len(keys), 2*len(keys))
	}
}

func TestCountWithoutIndexes(t *testing.T) {
	url, stop, err := eslite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	s, err := es.Open(context.Background(), es.Options{Addresses: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Count(context.Background(), "r"); err != nil || n != 0 {
		t.Fatalf("%d %v", n, err)
	}
	if _, err := es.Open(context.Background(), es.Options{Addresses: []string{"http://127.0.0.1:1"}, Retries: 1}); err == nil {
		t.Fatal("open of a dead address succeeded")
	}
}

func TestSpecsFrom(t *testing.T) {
	r := crawl.NewRegistry()
	r.Register(crawl.TaskFunc(storySpec, nil))
	f := es.SpecsFrom(r)
	if sp, ok := f("demo.story"); !ok || len(sp.Output) != len(storySpec.Output) {
		t.Fatal("registered spec not found")
	}
	if _, ok := f("demo.nope"); ok {
		t.Fatal("unknown biz found")
	}
	m := es.Mappings(storySpec)["properties"].(map[string]any)
	if m["data"].(map[string]any)["properties"].(map[string]any)["title"].(map[string]any)["fields"] == nil {
		t.Fatal("string fields need a keyword sub-field")
	}
}

func TestCheckSearchable(t *testing.T) {
	for _, ok := range []string{es.Alias, es.IndexName("demo.story"), es.IndexName("hackernews.item"), "trawler-nosuch-index", "trawler-a_b",
		es.TenantAlias("acme"), es.TenantAlias(""), es.TenantIndexAlias("acme", "demo.story"), es.TenantIndexAlias("team-2", "hackernews.item"),
		"trawler.acme", "trawler.default.demo-story", "trawler.a_b.x"} {
		if err := es.CheckSearchable(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	const rule = "not an index Trawler writes; use trawler-items, trawler-<site>-<task>, trawler.<tenant> or trawler.<tenant>.<site>-<task> (lowercase letters, digits, - and _)"
	for _, bad := range []string{"", "trawler-", "trawler-x/_doc/pwned#", "trawler-x%2F_close", "trawler-items/_bulk?refresh=true#",
		"trawler-*", "trawler-a,other", "Trawler-Demo", "trawler-demo.story", "..", ".", "trawler-..", "trawler-a:b", "trawler-a b",
		"trawler-a\x00", "other", "_all", "trawler-items\\x", "trawler-ä",
		"trawler.", "trawler.*", "trawler.acme*", "trawler.acme.*", "trawler..x", "trawler.acme.", "trawler.acme.a.b", "trawler.Acme",
		"trawler.-acme", "trawler._all", "trawler.acme/_doc/1#", "trawler.acme,trawler.globex", "trawler.acme.x/_close", "trawler.acme:x",
		"trawler.acme.demo-story?q=x", "trawler.a%2Fb"} {
		if err := es.CheckSearchable(bad); err == nil || err.Error() != fmt.Sprintf("index %q: ", bad)+rule {
			t.Errorf("%q: %v", bad, err)
		}
	}
	long := "trawler-" + strings.Repeat("a", 248)
	if err := es.CheckSearchable(long); err == nil || !strings.Contains(err.Error(), "256 bytes, longer than the 255 Elasticsearch allows") {
		t.Errorf("256 bytes: %v", err)
	}
	if err := es.CheckSearchable(long[:255]); err != nil {
		t.Errorf("255 bytes: %v", err)
	}
	if err := es.CheckSearchable("trawler.acme." + strings.Repeat("a", 243)); err == nil || !strings.Contains(err.Error(), "256 bytes") {
		t.Errorf("256-byte tenant alias: %v", err)
	}
}

func TestForTenant(t *testing.T) {
	for _, c := range [][3]string{
		{"acme", es.Alias, "trawler.acme"},
		{"acme", "trawler-demo-story", "trawler.acme.demo-story"},
		{"acme", "trawler.acme", "trawler.acme"},
		{"acme", "trawler.acme.demo-story", "trawler.acme.demo-story"},
		{"", es.Alias, "trawler.default"},
		{"default", "trawler-demo-story", "trawler.default.demo-story"},
	} {
		if got, err := es.ForTenant(c[0], c[1]); err != nil || got != c[2] {
			t.Errorf("ForTenant(%q, %q) = %q, %v; want %q", c[0], c[1], got, err, c[2])
		}
	}
	for _, c := range [][3]string{
		{"acme", "trawler.globex", `index "trawler.globex" is another tenant's alias, not tenant acme's: use trawler.acme, or trawler.acme.<site>-<task> for one task`},
		{"acme", "trawler.acme2.demo-story", `index "trawler.acme2.demo-story" is another tenant's alias, not tenant acme's: use trawler.acme, or trawler.acme.<site>-<task> for one task`},
		{"a.b", es.Alias, `tenant "a.b": use lowercase letters, digits, - and _, starting with a letter or digit`},
		{"acme", "trawler-*", `index "trawler-*": not an index Trawler writes; use trawler-items, trawler-<site>-<task>, trawler.<tenant> or trawler.<tenant>.<site>-<task> (lowercase letters, digits, - and _)`},
	} {
		if _, err := es.ForTenant(c[0], c[1]); err == nil || err.Error() != c[2] {
			t.Errorf("ForTenant(%q, %q): %v\nwant %s", c[0], c[1], err, c[2])
		}
	}
}

// An index name holding a path stays one path segment: counting and scanning
// "trawler-x/_doc/pwned#" asks for that index (none), and writes nothing.
func TestIndexNameStaysInItsSegment(t *testing.T) {
	addr, stop, err := eslite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c, err := es.Auth{}.NewClient([]string{addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, index := range []string{"trawler-x/_doc/pwned#", "trawler-x/_bulk?refresh=true#", "trawler-x%2F_doc%2Fpwned"} {
		if n, err := es.CountSelected(ctx, c, index, es.Selection{}); err != nil || n != 0 {
			t.Errorf("count %q: %d %v", index, n, err)
		}
		// The scan finds nothing; it may fail (a name holding ? is a pattern matching no
		// index, with no field to sort on), but it writes nothing either way.
		seen := 0
		_ = es.Scan(ctx, c, index, es.Selection{}, 10, func(crawl.Item) error { seen++; return nil })
		if seen != 0 {
			t.Errorf("scan %q: %d items", index, seen)
		}
	}
	res, err := http.Get(addr + "/_aliases")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var indexes map[string]any
	if err := json.NewDecoder(res.Body).Decode(&indexes); err != nil || len(indexes) != 0 {
		t.Errorf("indexes after counting and scanning: %v %v", indexes, err)
	}
}
