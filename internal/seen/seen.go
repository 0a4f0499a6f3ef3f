// Package seen is a run's seen-set: which inputs each step of a run has been handed
// already, so a URL that many pages lead to is fetched once per run, in a few bytes of
// Redis memory per URL.
//
// # Claims
//
// A batch claims the inputs it hands on when it discovers them: Claim check-and-sets
// each key and says which go on. A key goes on when no one had claimed it, or when the
// claimer itself had: an activity attempt that claimed keys and died before it could
// checkpoint what it handed on finds its own claims on its retry and hands them on
// again. A claimer is a batch (its id is the same in every attempt); its claims are
// marked with a 13-bit tag of that id, so two batches share a tag with a probability of
// 1/8192, in which case the second fetches a page once more, never less. Within one
// attempt, a Claimer remembers what it handed on, so a key it meets twice goes on once.
//
// # Layout
//
// As dedup's: a run's keys are spread over B buckets, each a Redis hash
// "seen:<run>:<bucket>" with no hash tag, so on a Redis Cluster the buckets of one run
// spread over every slot. Inside a bucket, one entry per key: the field is 32 bits of a
// 64-bit FNV-1a hash of the key (the bucket takes the other 32), the value the claimer's
// tag. A listpack stores them as integers in 6 and 3 bytes. B is fixed per run when it
// is first used (B = ceil(Expected / PerBucket), kept in "seen:<run>:meta"), so buckets
// average PerBucket entries and stay listpacks; TestMemoryPerURL measures the bytes per
// URL that come to on a real redis-server. A new key whose field collides with a key
// of its bucket is taken for seen and not fetched: with n keys per bucket, a
// probability of n / 2^32, about 2·10⁻⁸ at 90 (0.2 URLs of ten million).
//
// Every key of a run expires TTL after the run last claimed anything: a run's set is
// gone a week after it ends.
package seen

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config sizes the seen-sets of new runs.
type Config struct {
	// Expected is the number of keys a run's set is sized for (default 10,000,000).
	Expected int64
	// PerBucket is the target average of keys per bucket (default 90), capped at 70% of
	// the server's hash-max-listpack-entries so buckets stay listpacks.
	PerBucket float64
	// TTL is how long a run's set lives after its last claim (default 7 days).
	TTL time.Duration
}

// Set keeps the seen-sets of runs in Redis.
type Set struct {
	rdb     redis.UniversalClient
	cfg     Config
	mu      sync.Mutex
	buckets map[string]int // run → B
}

// Open reads the server's listpack limit and returns a Set. A server that does not
// answer CONFIG GET is assumed to use Redis's default of 128 entries.
func Open(ctx context.Context, rdb redis.UniversalClient, cfg Config) (*Set, error) {
	if cfg.Expected <= 0 {
		cfg.Expected = 10_000_000
	}
	if cfg.PerBucket <= 0 {
		cfg.PerBucket = 90
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 7 * 24 * time.Hour
	}
	maxListpack := 128
	if v, err := rdb.ConfigGet(ctx, "hash-max-listpack-entries").Result(); err == nil {
		if n, err := strconv.Atoi(v["hash-max-listpack-entries"]); err == nil && n > 0 {
			maxListpack = n
		}
	}
	cfg.PerBucket = min(cfg.PerBucket, 0.7*float64(maxListpack))
	return &Set{rdb: rdb, cfg: cfg, buckets: map[string]int{}}, nil
}

func metaKey(run string) string { return "seen:" + run + ":meta" }

// BucketKey is the Redis key of one bucket of a run's set.
func BucketKey(run string, b int) string { return "seen:" + run + ":" + strconv.Itoa(b) }

// bucketsOf returns a run's B, fixing it on first use.
func (s *Set) bucketsOf(ctx context.Context, run string) (int, error) {
	s.mu.Lock()
	b, ok := s.buckets[run]
	s.mu.Unlock()
	if ok {
		return b, nil
	}
	want := int(math.Ceil(float64(s.cfg.Expected) / s.cfg.PerBucket))
	pipe := s.rdb.Pipeline()
	pipe.HSetNX(ctx, metaKey(run), "buckets", want)
	get := pipe.HGet(ctx, metaKey(run), "buckets")
	pipe.Expire(ctx, metaKey(run), s.cfg.TTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("seen-set of run %s: %w", run, err)
	}
	b, err := strconv.Atoi(get.Val())
	if err != nil || b <= 0 {
		return 0, fmt.Errorf("seen-set of run %s: bad bucket count %q in %s", run, get.Val(), metaKey(run))
	}
	s.mu.Lock()
	if len(s.buckets) > 10_000 { // a long-lived worker forgets old runs
		clear(s.buckets)
	}
	s.buckets[run] = b
	s.mu.Unlock()
	return b, nil
}

// Claimer claims keys in one run's set for one batch, across the batch's attempts.
type Claimer struct {
	set  *Set
	run  string
	tag  string
	mine map[uint64]bool // fingerprints this attempt handed on
	// earlier are the fingerprints this attempt found claimed by the batch already: an
	// attempt that died claimed them, and may have run them itself.
	earlier map[uint64]bool
}

// Claimer returns the claimer of the batch with the given id (the same in every attempt
// of the batch) in a run.
func (s *Set) Claimer(run, id string) *Claimer {
	return &Claimer{set: s, run: run, tag: strconv.Itoa(Tag(id)), mine: map[uint64]bool{}, earlier: map[uint64]bool{}}
}

// Tag is the 13-bit tag a batch's claims carry, in the signed range a listpack stores in
// two bytes.
func Tag(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32()>>19) - 1<<12
}

func fingerprint(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64()
}

// Mark notes keys the batch handed on in an earlier attempt (its checkpoint lists
// them): meeting them again, it does not hand them on twice.
func (c *Claimer) Mark(keys []string) {
	for _, k := range keys {
		c.mine[fingerprint(k)] = true
	}
}

// Claim check-and-sets keys in the run's set and reports, per key, whether it goes on:
// no one had claimed it, or this batch had in an attempt that did not hand it on. A key
// twice in keys goes on once. One round trip: HSETNX and HGET per key, and a refreshed
// TTL per bucket, in a pipeline of one-key commands (on a Cluster the client splits it
// by node; values never change once set, so no transaction is needed).
func (c *Claimer) Claim(ctx context.Context, keys []string) ([]bool, error) {
	goes := make([]bool, len(keys))
	if len(keys) == 0 {
		return goes, nil
	}
	b, err := c.set.bucketsOf(ctx, c.run)
	if err != nil {
		return nil, err
	}
	pipe := c.set.rdb.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	sets := make([]*redis.BoolCmd, len(keys))
	fps := make([]uint64, len(keys))
	asked := map[uint64]bool{}
	touched := map[int]bool{}
	for i, k := range keys {
		fp := fingerprint(k)
		fps[i] = fp
		if c.mine[fp] || asked[fp] {
			continue
		}
		asked[fp] = true
		bk := int((fp >> 32) % uint64(b))
		key, field := BucketKey(c.run, bk), strconv.Itoa(int(int32(uint32(fp))))
		sets[i] = pipe.HSetNX(ctx, key, field, c.tag)
		gets[i] = pipe.HGet(ctx, key, field)
		if !touched[bk] {
			touched[bk] = true
			pipe.Expire(ctx, key, c.set.cfg.TTL)
		}
	}
	if len(asked) == 0 {
		return goes, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("seen-set of run %s: claim %d keys: %w", c.run, len(asked), err)
	}
	for i, get := range gets {
		if get == nil {
			continue
		}
		if get.Val() == c.tag {
			goes[i] = true
			c.mine[fps[i]] = true
			if !sets[i].Val() {
				c.earlier[fps[i]] = true
			}
		}
	}
	return goes, nil
}

// Earlier reports whether the key went on in Claim because the batch had claimed it
// already, in an attempt that died, rather than because no one had: that attempt may
// have run the input itself and claimed what it led to.
func (c *Claimer) Earlier(key string) bool { return c.earlier[fingerprint(key)] }
