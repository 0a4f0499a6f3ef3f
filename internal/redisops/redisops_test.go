package redisops_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/dedup"
	"github.com/trawlerhq/trawler/internal/devstack/redisproc"
	"github.com/trawlerhq/trawler/internal/redisops"
	"github.com/trawlerhq/trawler/internal/redisurl"
)

// On a three-master cluster: a scan finds the keys of every master, a script runs over
// keys of many slots in one call (loading itself where a node answers NOSCRIPT), and a
// dedup check spread over many buckets gives exact verdicts, in order for a key that
// comes twice in one batch.
func TestOnACluster(t *testing.T) {
	cl, err := redisproc.StartCluster(3)
	if err != nil {
		if errors.Is(err, redisproc.ErrNotInstalled) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer cl.Stop()
	rdb, err := redisurl.Open(cl.URL(), redisurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx := context.Background()

	var keys []string
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("k:%d", i))
	}
	incr := redis.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
	calls := make([]redisops.Call, len(keys))
	for i, k := range keys {
		calls[i] = redisops.Call{Keys: []string{k}, Args: []any{i}}
	}
	for i, cmd := range redisops.EvalEach(ctx, rdb, incr, calls) {
		if n, err := cmd.Int(); err != nil || n != i {
			t.Fatalf("script on %s: %d, %v; want %d", keys[i], n, err, i)
		}
	}
	var found []string
	if err := redisops.Scan(ctx, rdb, "k:*", 10, func(k string) error { found = append(found, k); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(found)
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(found, want) {
		t.Errorf("scan found %d keys, want all %d", len(found), len(keys))
	}

	d, err := dedup.Open(ctx, rdb, dedup.Config{Expected: 100000})
	if err != nil {
		t.Fatal(err)
	}
	var batch []dedup.Entry
	for i := range 200 {
		batch = append(batch, dedup.Entry{Key: fmt.Sprintf("item:%d", i), Content: "v1"})
	}
	batch = append(batch, dedup.Entry{Key: "item:7", Content: "v2"}) // the same key again, changed
	states := func(vs []dedup.Verdict) map[dedup.State]int {
		out := map[dedup.State]int{}
		for _, v := range vs {
			out[v.State]++
		}
		return out
	}
	v, err := d.Check(ctx, "t:a.b", batch)
	if err != nil {
		t.Fatal(err)
	}
	if got := states(v); got[dedup.New] != 200 || got[dedup.Changed] != 1 || v[200].State != dedup.Changed {
		t.Errorf("first check: %v (last %v); want 200 new and the repeated key changed", got, v[200].State)
	}
	v, err = d.Check(ctx, "t:a.b", batch[:200])
	if err != nil {
		t.Fatal(err)
	}
	// item:7 was last recorded with v2, so v1 is a change; the rest are unchanged.
	if got := states(v); got[dedup.Unchanged] != 199 || v[7].State != dedup.Changed {
		t.Errorf("second check: %v; want 199 unchanged and item:7 changed", got)
	}
	ns, err := d.Namespaces(ctx)
	if err != nil || !slices.Contains(ns, "t:a.b") {
		t.Errorf("namespaces %v (%v); want t:a.b", ns, err)
	}
}
