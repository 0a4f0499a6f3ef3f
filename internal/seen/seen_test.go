package seen

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
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

func connect(t *testing.T, cfg Config) (*Set, *redis.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: realRedis})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, rdb
}

func claim(t *testing.T, c *Claimer, keys ...string) string {
	t.Helper()
	goes, err := c.Claim(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(goes))
	for i, g := range goes {
		out[i] = strconv.FormatBool(g)
	}
	return strings.Join(out, ",")
}

// The first batch to meet a URL claims it; a second batch, and the first one again
// later in the same attempt, find it seen; a key twice in one claim goes on once.
func TestClaimAndDuplicate(t *testing.T) {
	s, _ := connect(t, Config{Expected: 1000})
	a, b := s.Claimer("shop", "run-1", "wf/list/1"), s.Claimer("shop", "run-1", "wf/list/2")
	if got := claim(t, a, "1\x00/p/1", "1\x00/p/2", "1\x00/p/1"); got != "true,true,false" {
		t.Fatalf("first claim = %s, want true,true,false", got)
	}
	if got := claim(t, b, "1\x00/p/2", "1\x00/p/3"); got != "false,true" {
		t.Fatalf("another batch = %s, want false,true", got)
	}
	if got := claim(t, a, "1\x00/p/3", "1\x00/p/1"); got != "false,false" {
		t.Fatalf("the first batch again = %s, want false,false", got)
	}
	// Another run has a set of its own.
	if got := claim(t, s.Claimer("shop", "run-2", "wf/list/1"), "1\x00/p/1"); got != "true" {
		t.Fatalf("another run = %s, want true", got)
	}
}

// An attempt that claimed keys and died before checkpointing what it handed on is
// retried with the same batch id: it finds its own claims and hands them on again,
// except those its checkpoint says it handed on already.
func TestOwnClaimOnRetry(t *testing.T) {
	s, _ := connect(t, Config{Expected: 1000})
	if got := claim(t, s.Claimer("shop", "run-1", "wf/detail/7"), "/p/1", "/p/2", "/p/3"); got != "true,true,true" {
		t.Fatalf("first attempt = %s", got)
	}
	retry := s.Claimer("shop", "run-1", "wf/detail/7")
	retry.Mark([]string{"/p/1"})
	if got := claim(t, retry, "/p/1", "/p/2", "/p/3", "/p/4"); got != "false,true,true,true" {
		t.Fatalf("retried attempt = %s, want false,true,true,true (own claims go on, checkpointed ones not twice)", got)
	}
	// What the dead attempt had claimed is told from what no one had.
	if !retry.Earlier("/p/2") || !retry.Earlier("/p/3") || retry.Earlier("/p/4") {
		t.Errorf("earlier: /p/2 %v, /p/3 %v, /p/4 %v; want true, true, false", retry.Earlier("/p/2"), retry.Earlier("/p/3"), retry.Earlier("/p/4"))
	}
	if got := claim(t, s.Claimer("shop", "run-1", "wf/detail/8"), "/p/2"); got != "false" {
		t.Fatalf("another batch after the retry = %s, want false", got)
	}
}

// Every key of a run's set expires with the run's TTL, refreshed on use.
func TestTTLSet(t *testing.T) {
	s, rdb := connect(t, Config{Expected: 1000, TTL: time.Hour})
	ctx := context.Background()
	claim(t, s.Claimer("shop", "run-ttl", "b"), "/a", "/b", "/c")
	keys, err := rdb.Keys(ctx, "seen:run-ttl:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 2 { // the meta key and at least one bucket
		t.Fatalf("keys %v", keys)
	}
	for _, k := range keys {
		ttl, err := rdb.TTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 59*time.Minute || ttl > time.Hour {
			t.Errorf("%s has TTL %s, want about 1h", k, ttl)
		}
	}
}

// TestMemoryPerURL measures what a run's seen-set costs on a real redis-server: 1 M URLs
// claimed through Claim, in a set sized for them, and the growth of used_memory.
func TestMemoryPerURL(t *testing.T) {
	const n = 1_000_000
	s, rdb := connect(t, Config{Expected: n})
	ctx := context.Background()
	before := usedMemory(t, rdb)
	keys := make([]string, 0, 1000)
	for i := range n {
		c := s.Claimer("shop", "run-mem", "batch-"+strconv.Itoa(i/1000))
		keys = append(keys, "2\x00https://shop.example/product/"+strconv.Itoa(i)+"?ref=list")
		if len(keys) == cap(keys) {
			goes, err := c.Claim(ctx, keys)
			if err != nil {
				t.Fatal(err)
			}
			for j, g := range goes {
				if !g {
					// A field collision within a bucket: about 2e-8 per URL.
					t.Logf("collision: %s", keys[j])
				}
			}
			keys = keys[:0]
		}
	}
	perURL := float64(usedMemory(t, rdb)-before) / n
	t.Logf("%.2f bytes of Redis per seen URL (%d URLs, used_memory delta)", perURL, n)
	if perURL > 24 {
		t.Fatalf("%.2f bytes per URL, want under 24", perURL)
	}
	enc, err := rdb.ObjectEncoding(ctx, BucketKey("run-mem", 0)).Result()
	if err != nil || enc != "listpack" {
		t.Fatalf("bucket encoding %q (%v), want listpack", enc, err)
	}
}

func usedMemory(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}

// A claim that fails after Redis ran its HSETNX but not its EXPIRE leaves the bucket to
// be refreshed by the next claim, not taken for refreshed: no bucket outlives its TTL.
func TestFailedClaimRefreshesTheBucketNextTime(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	s, err := Open(ctx, rdb, Config{Expected: 2, PerBucket: 1, TTL: time.Hour}) // two buckets
	if err != nil {
		t.Fatal(err)
	}
	// Two keys in different buckets: one to fix B, one whose bucket is new.
	bucket := func(k string) uint64 { return (fingerprint(k) >> 32) % 2 }
	warm, cold := "/warm", ""
	for i := 0; cold == ""; i++ {
		if k := fmt.Sprintf("/cold%d", i); bucket(k) != bucket(warm) {
			cold = k
		}
	}
	c := s.Claimer("shop", "run-f", "b")
	if _, err := c.Claim(ctx, []string{warm}); err != nil {
		t.Fatal(err)
	}
	mr.Close()
	if _, err := c.Claim(ctx, []string{cold}); err == nil {
		t.Fatal("a claim with Redis down succeeded")
	}
	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	key := BucketKey("run-f", int(bucket(cold)))
	mr.HSet(key, "1", "1") // as if its HSETNX had run, with no EXPIRE after it
	if _, err := c.Claim(ctx, []string{cold}); err != nil {
		t.Fatal(err)
	}
	if ttl := mr.TTL(key); ttl <= 0 || ttl > time.Hour {
		t.Errorf("bucket TTL %s after the failed claim and the next one, want about 1h", ttl)
	}
}

// A run's set is sized from the runs of its chain before it, so a small run pays about
// one command a key: an HSETNX, and an EXPIRE per bucket it touches, of which a set
// sized for it has a few. (Sized for a million keys, each of its keys would find a new
// bucket and pay an EXPIRE of its own.)
func TestSetSizedFromTheChainsEarlierRuns(t *testing.T) {
	s, rdb := connect(t, Config{Expected: 1_000_000, Least: 1000})
	ctx := context.Background()
	claimAll := func(chain, run string, n int) {
		for i := 0; i < n; i += 100 {
			var keys []string
			for j := i; j < i+100 && j < n; j++ {
				keys = append(keys, fmt.Sprintf("2\x00https://shop.example/%s/%d", run, j))
			}
			if got := claim(t, s.Claimer(chain, run, "b"+strconv.Itoa(i)), keys...); strings.Contains(got, "false") {
				t.Fatalf("%s: a new key was taken for seen: %s", run, got)
			}
		}
	}
	expires := func() int64 { return calls(t, rdb, "expire") }
	claimAll("acme/shop", "run-1", 3000) // the chain's first run: sized for Expected
	// A process adds its count on its first claim, then every thousand keys: what it
	// has not added yet when the run ends (under a thousand) is not counted.
	recorded := rdb.ZScore(ctx, "seen:sizes:acme/shop", "run-1").Val()
	if recorded < 2000 || recorded > 3000 {
		t.Fatalf("the chain's sizes hold %v keys for run-1, want 2000 to 3000", recorded)
	}
	before := expires()
	claimAll("acme/shop", "run-2", 2000)
	want := int64(math.Ceil(2 * recorded / 90))
	if b, _ := rdb.HGet(ctx, metaKey("run-2"), "buckets").Int64(); b != want {
		t.Errorf("run-2 has %d buckets, want %d (twice the keys recorded for run-1, 90 a bucket)", b, want)
	}
	if n := expires() - before; n > want+3 { // a bucket each, the meta key, the sizes twice
		t.Errorf("run-2 paid %d EXPIREs for 2000 keys, want at most one a bucket and 3 more (%d)", n, want+3)
	}
	// Another chain's first run is not sized from this one's.
	claimAll("acme/news", "run-3", 10)
	if b := rdb.HGet(ctx, metaKey("run-3"), "buckets").Val(); b != "11112" {
		t.Errorf("run-3 has %s buckets, want 11112 (Expected, 90 a bucket)", b)
	}
}

// calls is how many times the server ran a command, from INFO commandstats.
func calls(t *testing.T, rdb *redis.Client, command string) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "cmdstat_"+command+":calls="); ok {
			n, err := strconv.ParseInt(strings.SplitN(v, ",", 2)[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// A batch's first attempt takes a key claimed already for someone else's without
// reading the claim; a later attempt reads it, and finds its own claims its own.
func TestFirstAttemptReadsNoClaims(t *testing.T) {
	s, rdb := connect(t, Config{Expected: 1000})
	claim(t, s.Claimer("shop", "run-1", "wf/list/1"), "/p/1", "/p/2")
	before := calls(t, rdb, "hget")
	first := s.Claimer("shop", "run-1", "wf/list/2")
	first.FirstAttempt()
	if got := claim(t, first, "/p/1", "/p/2", "/p/3"); got != "false,false,true" {
		t.Fatalf("first attempt: %s, want false,false,true", got)
	}
	if n := calls(t, rdb, "hget") - before; n != 0 {
		t.Errorf("a first attempt read %d claims, want none", n)
	}
	retry := s.Claimer("shop", "run-1", "wf/list/2")
	if got := claim(t, retry, "/p/1", "/p/3"); got != "false,true" {
		t.Fatalf("retry: %s, want false,true (its own /p/3 goes on again)", got)
	}
	if !retry.Earlier("/p/3") {
		t.Error("the retry did not find /p/3 claimed by its batch earlier")
	}
}
