package es_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/eslite"
	"github.com/trawlerhq/trawler/internal/storage/es"
)

// aliasCalls records the alias changes a sink asks for.
type aliasCalls struct {
	mu     sync.Mutex
	bodies []string
}

func (a *aliasCalls) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/_aliases" && r.Method == http.MethodPost {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		a.mu.Lock()
		a.bodies = append(a.bodies, string(b))
		a.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (a *aliasCalls) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.bodies)
}

func tenantStory(tenant, key string) crawl.Item {
	it := story(key, "r-"+tenant, 1)
	it.Tenant = tenant
	return it
}

// keysThrough is the keys of every document a match_all through index finds.
func keysThrough(t *testing.T, c *es.Client, index string) []string {
	t.Helper()
	res, err := c.Search(c.Search.WithIndex(es.IndexPath(index)...), c.Search.WithBody(strings.NewReader(`{"size":100,"query":{"match_all":{}}}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Hits struct {
			Hits []struct {
				Source crawl.Item `json:"_source"`
			} `json:"hits"`
		} `json:"hits"`
	}
	if res.IsError() {
		t.Fatalf("search %s: %s", index, res.Status())
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	keys := []string{}
	for _, h := range out.Hits.Hits {
		keys = append(keys, h.Source.Tenant+"/"+h.Source.Key)
	}
	sort.Strings(keys)
	return keys
}

// Every tenant the sink writes gets aliases that show its documents only, so an
// Elasticsearch role granting read on trawler.<tenant> and trawler.<tenant>.* keeps an
// analyst to that tenant whatever the query says.
func TestTenantAliases(t *testing.T) {
	url, stop, err := eslite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	calls := &aliasCalls{}
	s, err := es.Open(ctx, es.Options{Addresses: []string{url}, Specs: specs, Transport: calls})
	if err != nil {
		t.Fatal(err)
	}
	comment := item("demo.comment", "c1", "r-acme", map[string]any{"text": "hi"})
	comment.Tenant = "acme"
	items := []crawl.Item{tenantStory("acme", "1"), tenantStory("acme", "2"), tenantStory("acme", "3"), comment,
		tenantStory("globex", "1"), tenantStory("globex", "9"), tenantStory("", "0")}
	if err := s.Write(ctx, items); err != nil {
		t.Fatal(err)
	}
	if n := calls.count(); n != 1 {
		t.Fatalf("first write: %d alias requests, want 1: %q", n, calls.bodies)
	}
	c := s.Client()
	refresh := func() {
		res, err := c.Indices.Refresh()
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	refresh()
	for index, want := range map[string]string{
		"trawler.acme":                              "acme/1 acme/2 acme/3 acme/c1",
		"trawler.acme.demo-story":                   "acme/1 acme/2 acme/3",
		"trawler.acme.demo-comment":                 "acme/c1",
		"trawler.globex":                            "globex/1 globex/9",
		"trawler.globex.demo-story":                 "globex/1 globex/9",
		"trawler.default":                           "/0",
		"trawler.default.demo-story":                "/0",
		es.Alias:                                    "/0 acme/1 acme/2 acme/3 acme/c1 globex/1 globex/9",
		es.IndexName("demo.story"):                  "/0 acme/1 acme/2 acme/3 globex/1 globex/9",
		es.TenantAlias("acme"):                      "acme/1 acme/2 acme/3 acme/c1",
		es.TenantAlias(""):                          "/0",
		es.TenantAlias("default"):                   "/0",
		es.TenantIndexAlias("globex", "demo.story"): "globex/1 globex/9",
	} {
		if got := strings.Join(keysThrough(t, c, index), " "); got != want {
			t.Errorf("match_all through %s: %q, want %q", index, got, want)
		}
	}
	// A query naming no tenant, or another tenant, finds nothing beyond the alias.
	for _, q := range []string{`{"query":{"term":{"tenant":"acme"}}}`, `{"query":{"match":{"data.title":"story"}}}`} {
		res, err := c.Count(c.Count.WithIndex("trawler.globex"), c.Count.WithBody(strings.NewReader(q)))
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Count int }
		_ = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		want := 2
		if strings.Contains(q, "acme") {
			want = 0
		}
		if out.Count != want {
			t.Errorf("count %s through trawler.globex: %d, want %d", q, out.Count, want)
		}
	}

	// The aliases, as Elasticsearch lists them, carry the tenant filter.
	res, err := c.Indices.GetAlias(c.Indices.GetAlias.WithName("trawler.acme*"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]struct {
		Aliases map[string]struct {
			Filter json.RawMessage `json:"filter"`
		} `json:"aliases"`
	}
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	want := map[string][]string{
		"trawler-demo-story":   {"trawler.acme", "trawler.acme.demo-story"},
		"trawler-demo-comment": {"trawler.acme", "trawler.acme.demo-comment"},
	}
	if len(got) != len(want) {
		t.Errorf("aliases trawler.acme*: %v", got)
	}
	for index, names := range want {
		for _, a := range names {
			f := string(got[index].Aliases[a].Filter)
			if f != `{"term":{"tenant":"acme"}}` {
				t.Errorf("%s alias %s filter %s", index, a, f)
			}
		}
	}

	// One ensure per tenant and index per process: writing the same tenants again asks
	// for no alias; a new tenant asks once.
	if err := s.Write(ctx, []crawl.Item{tenantStory("acme", "4"), tenantStory("globex", "5"), comment}); err != nil {
		t.Fatal(err)
	}
	if n := calls.count(); n != 1 {
		t.Errorf("second write: %d alias requests, want still 1", n)
	}
	if err := s.Write(ctx, []crawl.Item{tenantStory("initech", "1")}); err != nil {
		t.Fatal(err)
	}
	if n := calls.count(); n != 2 {
		t.Errorf("new tenant: %d alias requests, want 2", n)
	}

	// Migration: an index written before the aliases existed (none on it) gets them on
	// the next write of a process, and they cover the documents already there.
	res, err = c.Indices.DeleteAlias([]string{es.IndexName("demo.story")}, []string{"trawler.globex", "trawler.globex.demo-story"})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	s2, err := es.Open(ctx, es.Options{Addresses: []string{url}, Specs: specs})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Write(ctx, []crawl.Item{tenantStory("globex", "6")}); err != nil {
		t.Fatal(err)
	}
	refresh()
	if got := strings.Join(keysThrough(t, c, "trawler.globex"), " "); got != "globex/1 globex/5 globex/6 globex/9" {
		t.Errorf("after migration, trawler.globex: %q", got)
	}
}

// An item whose tenant cannot name an alias (a chain file refuses such a tenant) is
// refused, not stored where no tenant's alias shows it.
func TestTenantAliasRefusesBadTenant(t *testing.T) {
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
	err = s.Write(ctx, []crawl.Item{tenantStory("ok", "1"), tenantStory("a.b", "2"), tenantStory("Acme", "3")})
	want := `es sink: 2 of 3 documents rejected: 2 (trawler-demo-story, 400 invalid_tenant: tenant "a.b": use lowercase letters, digits, - and _, starting with a letter or digit, as a chain file's tenant); 3 (trawler-demo-story, 400 invalid_tenant: tenant "Acme": use lowercase letters, digits, - and _, starting with a letter or digit, as a chain file's tenant)`
	if err == nil || err.Error() != want {
		t.Fatalf("write: %v\nwant %s", err, want)
	}
	if got := strings.Join(keysThrough(t, s.Client(), "trawler.ok"), " "); got != "ok/1" {
		t.Errorf("trawler.ok: %q", got)
	}
}
