package external

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestMask(t *testing.T) {
	for _, c := range []struct {
		kind      Kind
		value     string
		want      string
		forbidden string
	}{
		{Proxy, "http://bob:hunter2pw@127.0.0.1:3129", "http://bob:***@127.0.0.1:3129", "hunter2pw"},
		{Proxy, "bob:hunter2pw@127.0.0.1:3129", "bob:***@127.0.0.1:3129", "hunter2pw"},
		{Proxy, "http://10.0.0.1:3128", "http://10.0.0.1:3128", ""},
		{Cookie, "sid=0123456789abcdef0123456789abcdef", "sid=… (36 bytes)", "0123456789"},
		{Cookie, "sid=s3cr3tvalue; theme=dark", "sid=…; theme=… (27 bytes)", "s3cr3t"},
		{DeviceID, "dev-1", "…(5 bytes)", "dev-1"},
		{DeviceID, "a1b2c3d4e5f6a7b8c9d0e1f2", "a1b2…(24 bytes)", "c3d4e5f6a7b8"},
		{UserAgent, "Mozilla/5.0 (X11)", "Mozilla/5.0 (X11)", ""},
	} {
		got := Mask(c.kind, c.value)
		if got != c.want || (c.forbidden != "" && strings.Contains(got, c.forbidden)) {
			t.Errorf("Mask(%s, %q) = %q, want %q", c.kind, c.value, got, c.want)
		}
	}
}

func TestItemIDsHideValues(t *testing.T) {
	p, _ := testPools(t)
	const proxy = "http://bob:hunter2pw@127.0.0.1:3129"
	const cookie = "sid=0123456789abcdef0123456789abcdef"
	if err := p.Add(ctx, "t1", Shared, Proxy, Resource{Value: proxy}); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(ctx, "t1", "demo", Cookie, Resource{ID: "reader1", Value: cookie, Attrs: map[string]string{"device_id": "device-secret-0001", "account": "reader1"}}); err != nil {
		t.Fatal(err)
	}
	// A farming task that keys an item by its value gets a hashed id instead.
	if err := p.Add(ctx, "t1", "demo", DeviceID, Resource{ID: "demo:device:device-secret-0002", Value: "device-secret-0002"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(ctx, "t1", "demo", Cookie, Resource{ID: "nothing"}); err == nil || !strings.Contains(err.Error(), "no value") {
		t.Errorf("an item without a value: %v", err)
	}

	for _, k := range []struct {
		site string
		kind Kind
	}{{Shared, Proxy}, {"demo", Cookie}, {"demo", DeviceID}} {
		st, err := p.Stats(ctx, "t1", k.site, k.kind, true)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(st)
		for _, secret := range []string{"hunter2pw", "0123456789abcdef", "device-secret"} {
			if strings.Contains(string(raw), secret) {
				t.Errorf("stats of %s pool show %q: %s", k.kind, secret, raw)
			}
		}
		if st.Revealed || len(st.Items) != 1 {
			t.Errorf("stats of %s pool: %s", k.kind, raw)
		}
	}
	st, _ := p.Stats(ctx, "t1", Shared, Proxy, true)
	if it := st.Items[0]; it.ID != ItemID(proxy) || it.Value != "http://bob:***@127.0.0.1:3129" {
		t.Errorf("proxy item: id %q value %q, want %q and the password masked", it.ID, it.Value, ItemID(proxy))
	}
	st, _ = p.Stats(ctx, "t1", "demo", Cookie, true)
	if it := st.Items[0]; it.ID != "reader1" || it.Value != "sid=… (36 bytes)" || it.Attrs["account"] != "reader1" {
		t.Errorf("named cookie: %+v", it)
	}

	rv, err := p.Reveal(ctx, "t1", Shared, Proxy)
	if err != nil || !rv.Revealed || rv.Items[0].Value != proxy || rv.Items[0].ID != ItemID(proxy) {
		t.Fatalf("reveal: %v %+v", err, rv)
	}
	// A lease still carries the real value, and what it reports names the id.
	l := lend(t, p, Scope{Tenant: "t1", Site: "demo", Needs: []Kind{Proxy}})
	if l.Proxy != proxy {
		t.Errorf("leased proxy %q, want the value", l.Proxy)
	}
	_ = p.Configure(ctx, "t1", Shared, Proxy, Config{BanAfter: 1})
	if what := l.Return(ctx, Verdict{Outcome: Failed, Kind: Proxy}); strings.Contains(what, "hunter2pw") || !strings.Contains(what, ItemID(proxy)+" (http://bob:***@127.0.0.1:3129)") {
		t.Errorf("return reports %q", what)
	}

	// Remove takes the id or the value.
	if n, err := p.Remove(ctx, "t1", Shared, Proxy, ItemID(proxy)); err != nil || n != 1 {
		t.Errorf("remove by id: %d %v", n, err)
	}
	if n, err := p.Remove(ctx, "t1", "demo", Cookie, cookie); err != nil || n != 1 {
		t.Errorf("remove a named cookie by value: %d %v", n, err)
	}
	if n, err := p.Remove(ctx, "t1", "demo", DeviceID, "device-secret-0002"); err != nil || n != 1 {
		t.Errorf("remove a device by value: %d %v", n, err)
	}
	if n, err := p.Remove(ctx, "t1", "demo", DeviceID, "no-such-item"); err != nil || n != 0 {
		t.Errorf("remove an unknown item: %d %v", n, err)
	}
}

// Pools filled before ids were hashes hold items under their values: they keep lending
// and counting, and move to their hashed ids the first time the pool is read.
func TestItemsStoredUnderTheirValueMove(t *testing.T) {
	p, now := testPools(t)
	const cookie = "sid=legacy-session-value-0001"
	const busy = "sid=legacy-session-value-0002"
	keys := keysOf("t1", "demo", Cookie)
	for _, v := range []string{cookie, busy} {
		b, _ := json.Marshal(Resource{ID: v, Value: v, Added: *now})
		p.rdb.HSet(ctx, keys.items, v, b)
		p.rdb.ZAdd(ctx, keys.ready, redis.Z{Score: float64(now.UnixMilli()), Member: v})
	}
	p.rdb.SAdd(ctx, registryKey, "t1|demo|cookie")
	p.rdb.HSet(ctx, keys.stat, cookie+"|uses", 7, cookie+"|bans", 1)
	// The second one is checked out by a worker that does not know about hashed ids.
	p.rdb.HSet(ctx, keys.inuse, busy, 1)

	st, err := p.Stats(ctx, "t1", "demo", Cookie, true)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(st)
	if strings.Contains(string(raw), "legacy-session") || st.Size != 2 {
		t.Fatalf("stats of a pool stored under values: %s", raw)
	}
	byID := map[string]ItemStats{}
	for _, it := range st.Items {
		byID[it.ID] = it
	}
	if it := byID[ItemID(cookie)]; it.Uses != 7 || it.Bans != 1 {
		t.Errorf("moved item lost its counters: %+v", it)
	}
	if ok, _ := p.rdb.HExists(ctx, keys.items, cookie).Result(); ok {
		t.Error("the free item still sits under its value")
	}
	if ok, _ := p.rdb.HExists(ctx, keys.items, busy).Result(); !ok {
		t.Error("the checked-out item moved under its borrower")
	}
	// Its borrower returns it under the old id; the next read moves it.
	if _, err := p.release(ctx, "t1", "demo", Cookie, busy, Success, 0, DefaultConfig(Cookie)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Stats(ctx, "t1", "demo", Cookie, false); err != nil {
		t.Fatal(err)
	}
	ids, _ := p.rdb.HKeys(ctx, keys.items).Result()
	if len(ids) != 2 || strings.Contains(strings.Join(ids, " "), "legacy") {
		t.Errorf("ids after the borrower returned: %v", ids)
	}
	// Lending goes on from the moved items.
	*now = now.Add(time.Second)
	l := lend(t, p, Scope{Tenant: "t1", Site: "demo", Needs: []Kind{Cookie}})
	if c, _ := l.Item(Cookie); c.Value != cookie && c.Value != busy {
		t.Errorf("leased %+v", c)
	}
	l.Return(ctx, Verdict{Outcome: Success})
	if n, err := p.Remove(ctx, "t1", "demo", Cookie, cookie, ItemID(busy)); err != nil || n != 2 {
		t.Errorf("remove moved items by value and id: %d %v", n, err)
	}
}
