package activities

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
)

// A holder whose lock expired and was taken by another does not release the other's
// lock; the other releases it.
func TestLockReleasesOnlyItsOwn(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	first, err := takeLock(ctx, rdb, "k:lock", time.Second)
	if err != nil || first == nil {
		t.Fatalf("first holder: %v, %v", first, err)
	}
	if l, err := takeLock(ctx, rdb, "k:lock", time.Second); l != nil || err != nil {
		t.Fatalf("a second holder took a held lock: %v, %v", l, err)
	}
	mr.FastForward(2 * time.Second)
	second, err := takeLock(ctx, rdb, "k:lock", time.Second)
	if err != nil || second == nil {
		t.Fatalf("second holder after expiry: %v, %v", second, err)
	}
	if held, err := first.release(ctx); held || err != nil {
		t.Errorf("the expired holder released: held %v, %v", held, err)
	}
	if v, _ := rdb.Get(ctx, "k:lock").Result(); v != second.token {
		t.Fatalf("after the expired holder's release the key holds %q, want the second holder's token", v)
	}
	if held, err := second.release(ctx); !held || err != nil {
		t.Errorf("second holder's release: held %v, %v", held, err)
	}
	if n := mr.Exists("k:lock"); n {
		t.Error("the lock is still there after its holder released it")
	}
}

// A shared-source fetch that outlives its lock leaves alone the lock another worker
// took meanwhile.
func TestSharedSourceKeepsAnotherWorkersLock(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	step := crawl.PlanStep{Task: "demo.feed", Timeout: time.Second, Shared: time.Minute}
	in := crawl.Input{URL: "http://site/news?p=1"}
	key, err := sourceKey(step, in)
	if err != nil {
		t.Fatal(err)
	}
	var other *redisLock
	_, err = NewSharedSources(rdb).Run(ctx, step, in, func() (crawl.Result, error) {
		mr.FastForward(10 * time.Second) // the fetch outlives the lock (timeout + 5 s)
		var err error
		other, err = takeLock(ctx, rdb, key+":lock", time.Minute)
		if err != nil || other == nil {
			t.Fatalf("another worker could not take the expired lock: %v", err)
		}
		return crawl.Result{Items: []crawl.Item{{Key: "1"}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := rdb.Get(ctx, key+":lock").Result(); v != other.token {
		t.Fatalf("after the slow fetch the lock holds %q, want the other worker's token", v)
	}
}
