package storage_test

import (
	"testing"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/storage"
)

// Keys come from site content, so a hostile site picks them: keys that imitate another
// tenant's id, the separator, the escape, or hold 0x00.
var hostileKeys = []string{"k1", "@acme:k1", "@acme:k1\x00", "@:k1", "@@acme:k1", "@:@acme:k1", "@acme", "@", ":", ":k1",
	"k\x00@acme:k1", "@default:k1", "", "@team-b:k1"}

func TestTenantKeyCannotBeForged(t *testing.T) {
	owner := map[string]string{}
	for _, tenant := range []string{crawl.DefaultTenant, "acme", "team-b", "a_1"} {
		for _, key := range hostileKeys {
			id := storage.TenantKey(tenant, key)
			if prev, taken := owner[id]; taken {
				t.Errorf("TenantKey(%q, %q) = %q, the id of %s", tenant, key, id, prev)
			}
			owner[id] = tenant + "/" + key
			if gotT, gotK := storage.SplitTenantKey(id); gotT != tenant || gotK != key {
				t.Errorf("SplitTenantKey(%q) = %q, %q; want %q, %q", id, gotT, gotK, tenant, key)
			}
		}
	}
	if id := storage.TenantKey("", "@acme:k1"); id != storage.TenantKey(crawl.DefaultTenant, "@acme:k1") {
		t.Errorf("the default tenant named \"\" and %q has two ids: %q", crawl.DefaultTenant, id)
	}
	// The default tenant's ids are the bare keys records were stored under before tenants
	// had their own, except the keys starting with "@".
	for key, want := range map[string]string{"demo:story:1": "demo:story:1", "k\x00@acme:k1": "k\x00@acme:k1", "@acme:k1": "@:@acme:k1"} {
		if got := storage.TenantKey(crawl.DefaultTenant, key); got != want {
			t.Errorf("default tenant's id of %q = %q, want %q", key, got, want)
		}
	}
}
