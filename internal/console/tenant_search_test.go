package console

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/storage/es"
)

// A search with ?tenant= goes through that tenant's alias: it shows the tenant's
// documents only, even when the query itself names no tenant or another one.
func TestSearchByTenant(t *testing.T) {
	ctx := context.Background()
	sink, err := es.Open(ctx, es.Options{Addresses: []string{stack.es}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	var items []crawl.Item
	for tenant, n := range map[string]int{"iso-a": 3, "iso-b": 2} {
		for i := range n {
			items = append(items, crawl.Item{Biz: "isolation.doc", Key: fmt.Sprintf("%s-%d", tenant, i), TS: time.Now().UTC(), Chain: "isolation",
				RunID: "isolation-run", Tenant: tenant, Data: map[string]any{"title": "isolated document"}})
		}
	}
	if err := sink.Write(ctx, items); err != nil {
		t.Fatal(err)
	}
	res, err := sink.Client().Indices.Refresh()
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()

	keys := func(out map[string]any) string {
		var ks []string
		for _, h := range list(obj(out["hits"])["hits"]) {
			ks = append(ks, obj(obj(h)["_source"])["key"].(string))
		}
		sort.Strings(ks)
		return strings.Join(ks, " ")
	}
	for _, c := range []struct{ method, path, body, want string }{
		{"GET", "/api/search?tenant=iso-a&q=isolated&size=100", "", "iso-a-0 iso-a-1 iso-a-2"},
		{"GET", "/api/search?tenant=iso-b&q=isolated&size=100", "", "iso-b-0 iso-b-1"},
		{"GET", "/api/search?tenant=iso-a&index=trawler-isolation-doc&size=100", "", "iso-a-0 iso-a-1 iso-a-2"},
		{"GET", "/api/search?tenant=iso-b&index=trawler.iso-b.isolation-doc&size=100", "", "iso-b-0 iso-b-1"},
		// The query asks for the other tenant: the alias still holds.
		{"POST", "/api/search?tenant=iso-b", `{"size":100,"query":{"term":{"tenant":"iso-a"}}}`, ""},
		{"POST", "/api/search?tenant=iso-a", `{"size":100,"query":{"match_all":{}}}`, "iso-a-0 iso-a-1 iso-a-2"},
		// Without a tenant, the search is fleet-wide as before.
		{"GET", "/api/search?q=isolated&size=100", "", "iso-a-0 iso-a-1 iso-a-2 iso-b-0 iso-b-1"},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		status, out := api(t, c.method, c.path, body)
		if status != http.StatusOK {
			t.Errorf("%s %s: %d %v", c.method, c.path, status, out)
			continue
		}
		if got := keys(out); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.path, got, c.want)
		}
	}
	for _, c := range []struct{ path, field, err string }{
		{"/api/search?tenant=iso-a&index=trawler.iso-b", "index", `index "trawler.iso-b" is another tenant's alias, not tenant iso-a's: use trawler.iso-a, or trawler.iso-a.<site>-<task> for one task`},
		{"/api/search?tenant=a.b", "tenant", `tenant "a.b": use lowercase letters, digits, - and _, starting with a letter or digit`},
	} {
		status, out := api(t, "GET", c.path, nil)
		if status != http.StatusBadRequest || out["field"] != c.field || out["error"] != c.err {
			t.Errorf("%s: %d %v\nwant 400 %s: %s", c.path, status, out, c.field, c.err)
		}
	}
}
