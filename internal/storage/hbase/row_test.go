package hbase

import (
	"bytes"
	"testing"
)

// The default tenant's row keys are the ones written before history was per tenant, so
// existing histories stay readable.
func TestDefaultTenantRowKeyKeepsTheOldLayout(t *testing.T) {
	for _, key := range []string{"demo:story:1", "hn:item:8863", ""} {
		old := append(append(append([]byte{Salt(key)}, "demo.story"...), 0), key...)
		for _, tenant := range []string{"default", ""} {
			if row := RowKey(tenant, "demo.story", key); !bytes.Equal(row, old) {
				t.Errorf("tenant %q key %q: row %q, want the old %q", tenant, key, row, old)
			}
		}
	}
}

func TestSplitRowRoundTrips(t *testing.T) {
	for _, c := range []struct{ tenant, want, biz, key string }{
		{"default", "default", "demo.story", "demo:story:1"},
		{"", "default", "demo.story", "demo:story:1"},
		{"team-a", "team-a", "demo.story", "demo:story:1"},
		{"t_2", "t_2", "hn.item", "hn:item:8863"},
		{"team-a", "team-a", "demo.story", ""},
	} {
		tenant, biz, key, ok := splitRow(RowKey(c.tenant, c.biz, c.key))
		if !ok || tenant != c.want || biz != c.biz || key != c.key {
			t.Errorf("splitRow(RowKey(%q, %q, %q)) = %q, %q, %q, %v", c.tenant, c.biz, c.key, tenant, biz, key, ok)
		}
	}
	for _, row := range []string{"", "\x01", "\x01@team-a", "\x01@\x00demo.story\x00k", "\x01demo.story"} {
		if _, _, _, ok := splitRow([]byte(row)); ok {
			t.Errorf("splitRow(%q) accepted a row RowKey never writes", row)
		}
	}
}
