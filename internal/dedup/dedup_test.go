package dedup

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/devstack/redisproc"
)

var realRedis string

func TestMain(m *testing.M) {
	srv, err := redisproc.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	realRedis = srv.Addr
	code := m.Run()
	srv.Stop()
	os.Exit(code)
}

// servers runs a test against a real redis-server and against miniredis.
func servers(t *testing.T, fn func(t *testing.T, rdb *redis.Client)) {
	t.Run("redis-server", func(t *testing.T) {
		rdb := redis.NewClient(&redis.Options{Addr: realRedis})
		defer rdb.Close()
		rdb.FlushAll(context.Background())
		fn(t, rdb)
	})
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer rdb.Close()
		fn(t, rdb)
	})
}

func open(t *testing.T, rdb *redis.Client, cfg Config) *Deduper {
	t.Helper()
	d, err := Open(context.Background(), rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func states(vs []Verdict) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.State.String()
	}
	return strings.Join(out, ",")
}

func TestVerdictSequence(t *testing.T) {
	servers(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		d := open(t, rdb, Config{Expected: 1000})
		day1 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		d.now = func() time.Time { return day1 }
		batch := []Entry{{"a", "v1"}, {"b", "v1"}}
		steps := []struct {
			entries []Entry
			at      time.Time
			want    string
		}{
			{batch, day1, "new,new"},
			{batch, day1.Add(24 * time.Hour), "unchanged,unchanged"},
			{[]Entry{{"a", "v2"}, {"b", "v1"}}, day1.Add(48 * time.Hour), "changed,unchanged"},
			{[]Entry{{"a", "v2"}, {"c", "v1"}}, day1.Add(72 * time.Hour), "unchanged,new"},
		}
		for i, s := range steps {
			d.now = func() time.Time { return s.at }
			v, err := d.Check(ctx, "t", s.entries)
			if err != nil {
				t.Fatal(err)
			}
			if got := states(v); got != s.want {
				t.Fatalf("step %d: %s, want %s", i, got, s.want)
			}
			if i == 2 && !v[0].LastSeen.Equal(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)) {
				t.Fatalf("changed entry last seen %v, want 2026-03-02", v[0].LastSeen)
			}
		}
		// Forget makes a key new again.
		if err := d.Forget(ctx, "t", []string{"a"}); err != nil {
			t.Fatal(err)
		}
		v, _ := d.Check(ctx, "t", []Entry{{"a", "v2"}})
		if v[0].State != New {
			t.Fatalf("after Forget: %v", v[0].State)
		}
	})
}

func TestDuplicateKeysInOneBatchSeeEachOther(t *testing.T) {
	servers(t, func(t *testing.T, rdb *redis.Client) {
		d := open(t, rdb, Config{Expected: 1000})
		v, err := d.Check(context.Background(), "t", []Entry{{"x", "1"}, {"x", "1"}, {"x", "2"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := states(v); got != "new,unchanged,changed" {
			t.Fatalf("%s", got)
		}
	})
}

func TestConcurrentWorkersGetExactlyOneNew(t *testing.T) {
	servers(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		keys := make([]Entry, 500)
		for i := range keys {
			keys[i] = Entry{Key: fmt.Sprintf("item:%d", i), Content: "c"}
		}
		const workers = 4
		news := make([]int, len(keys))
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := open(t, rdb, Config{Expected: 1000})
				for start := 0; start < len(keys); start += 50 {
					v, err := d.Check(ctx, "conc", keys[start:start+50])
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for i, x := range v {
						if x.State == New {
							news[start+i]++
						}
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		for i, n := range news {
			if n != 1 {
				t.Fatalf("%s was New for %d workers, want exactly 1", keys[i].Key, n)
			}
		}
	})
}

func TestLookupThenRecord(t *testing.T) {
	servers(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		d := open(t, rdb, Config{Expected: 1000})
		e := []Entry{{"p", "1"}, {"q", "1"}}
		for i := 0; i < 2; i++ { // looking up records nothing
			v, err := d.Lookup(ctx, "lr", e)
			if err != nil || states(v) != "new,new" {
				t.Fatalf("lookup %d: %s %v", i, states(v), err)
			}
		}
		if err := d.Record(ctx, "lr", e); err != nil {
			t.Fatal(err)
		}
		v, _ := d.Lookup(ctx, "lr", []Entry{{"p", "1"}, {"q", "2"}})
		if states(v) != "unchanged,changed" {
			t.Fatalf("after record: %s", states(v))
		}
	})
}

// A second Record of a key replaces the first: its content and its last-seen day. A
// Record that kept the first entry would make every later crawl of a changed item
// store it again.
func TestRecordReplacesTheEntry(t *testing.T) {
	servers(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		d := open(t, rdb, Config{Expected: 1000})
		day1 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		day2 := day1.Add(24 * time.Hour)
		d.now = func() time.Time { return day1 }
		if err := d.Record(ctx, "rr", []Entry{{"k", "v1"}}); err != nil {
			t.Fatal(err)
		}
		d.now = func() time.Time { return day2 }
		if err := d.Record(ctx, "rr", []Entry{{"k", "v2"}}); err != nil {
			t.Fatal(err)
		}
		d.now = func() time.Time { return day2.Add(24 * time.Hour) }
		v, err := d.Lookup(ctx, "rr", []Entry{{"k", "v2"}})
		if err != nil {
			t.Fatal(err)
		}
		want := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
		if v[0].State != Unchanged || !v[0].LastSeen.Equal(want) {
			t.Fatalf("v2 after recording v1 then v2: %s, last seen %v; want unchanged, last seen %v", v[0].State, v[0].LastSeen.Format(time.DateOnly), want.Format(time.DateOnly))
		}
	})
}

// Keys whose fields collide in one bucket are one entry to dedup: the documented
// false-duplicate case.
func TestFieldCollisionIsADocumentedDuplicate(t *testing.T) {
	servers(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		d := open(t, rdb, Config{Buckets: 1, Expected: 10})
		a, b := collidingKeys(t)
		v, err := d.Check(ctx, "col", []Entry{{a, "same"}, {b, "same"}, {b, "other"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := states(v); got != "new,unchanged,changed" {
			t.Fatalf("colliding keys %q %q: %s", a, b, got)
		}
	})
}

// collidingKeys finds two keys with the same 24-bit field (birthday search).
func collidingKeys(t *testing.T) (string, string) {
	seen := map[int32]string{}
	for i := 0; i < 1<<16; i++ {
		k := fmt.Sprintf("k%d", i)
		f := Field(k)
		if prev, ok := seen[f]; ok {
			return prev, k
		}
		seen[f] = k
	}
	// BKDR over "k<decimal>" is nearly linear, so also try random-looking keys.
	for i := 0; i < 1<<22; i++ {
		k := fmt.Sprintf("%x-%d", i*2654435761, i)
		f := Field(k)
		if prev, ok := seen[f]; ok && prev != k {
			return prev, k
		}
		seen[f] = k
	}
	t.Fatal("no colliding keys found")
	return "", ""
}

func TestUnreachableRedisFailsClearly(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	_, err := Open(context.Background(), rdb, Config{})
	if err == nil || !strings.Contains(err.Error(), "dedup: Redis unreachable") || !strings.Contains(err.Error(), "--redis") {
		t.Fatalf("err = %v", err)
	}
	// A deduper whose server goes away mid-life fails its batch with the cause.
	mr := miniredis.RunT(t)
	rdb2 := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb2.Close()
	d := open(t, rdb2, Config{Expected: 100})
	if _, err := d.Buckets(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	mr.Close()
	_, err = d.Check(context.Background(), "gone", []Entry{{"a", "1"}})
	if err == nil || !strings.Contains(err.Error(), "dedup: check 1 entries in namespace gone") {
		t.Fatalf("err = %v", err)
	}
}

func TestSizingKeepsBucketsListpacksAndStatsMeasureThem(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: realRedis})
	defer rdb.Close()
	d := open(t, rdb, Config{Expected: 200_000})
	cfg, _ := rdb.ConfigGet(ctx, "hash-max-listpack-entries").Result()
	if fmt.Sprint(d.MaxListpack()) != cfg["hash-max-listpack-entries"] {
		t.Fatalf("hash-max-listpack-entries read as %d, the server says %s", d.MaxListpack(), cfg["hash-max-listpack-entries"])
	}
	b, err := d.Buckets(ctx, "size")
	if err != nil {
		t.Fatal(err)
	}
	if want := int(math.Ceil(200_000 / min(90, 0.7*float64(d.MaxListpack())))); b != want {
		t.Fatalf("B = %d, want %d", b, want)
	}
	entries := make([]Entry, 0, 1000)
	for i := 0; i < 200_000; i++ {
		entries = append(entries, Entry{Key: fmt.Sprintf("demo:story:%d", i), Content: "x"})
		if len(entries) == cap(entries) {
			if _, err := d.Check(ctx, "size", entries); err != nil {
				t.Fatal(err)
			}
			entries = entries[:0]
		}
	}
	st, err := d.Stats(ctx, "size", 200)
	if err != nil {
		t.Fatal(err)
	}
	if st.Items < 199_990 || st.Items > 200_000 { // a few field collisions are expected
		t.Fatalf("items %d", st.Items)
	}
	if st.Encodings["listpack"] != st.Sampled || st.Sampled == 0 {
		t.Fatalf("encodings %v of %d sampled, want all listpack", st.Encodings, st.Sampled)
	}
	if !st.MemoryReported || st.BytesPerEntry <= 0 || st.BytesPerEntry > 12 {
		t.Fatalf("%.2f bytes per entry, the design bound is 12", st.BytesPerEntry)
	}
	if st.FalseDupRate <= 0 || st.FalseDupRate > 1e-5 {
		t.Fatalf("false dup rate %g", st.FalseDupRate)
	}
	t.Logf("%.2f bytes/entry, %.1f per bucket, false-dup rate %.2g", st.BytesPerEntry, st.PerBucket, st.FalseDupRate)
}

// A Redis that keeps no memory accounting (the dev stack's embedded one) reports no
// encodings and no bytes per entry, rather than "unknown" and 0.
func TestStatsWithoutMemoryAccounting(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	defer rdb.Close()
	d, err := Open(ctx, rdb, Config{Expected: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Check(ctx, "m", []Entry{{Key: "a", Content: "x"}, {Key: "b", Content: "y"}}); err != nil {
		t.Fatal(err)
	}
	st, err := d.Stats(ctx, "m", 10)
	if err != nil {
		t.Fatal(err)
	}
	if st.Items != 2 || st.MemoryReported || len(st.Encodings) != 0 || st.BytesPerEntry != 0 {
		t.Fatalf("stats %+v: want 2 items and no memory figures", st)
	}
}
