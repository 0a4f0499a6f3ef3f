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
// # Sizing
//
// B is fixed when a run first claims, from the runs of its chain before it: twice the
// keys of the largest of them (at least Least), or Expected for a chain's first run.
// Each process counts the keys its claims add and adds them, on its first claim of the
// run and then every thousand keys or ten seconds, to "seen:sizes:<chain>", a sorted set of run → keys that keeps the eight
// largest runs and is forgotten 30 days after the chain last claimed. Sizing matters for
// cost as much as for memory: every bucket a process touches takes one EXPIRE, so a run
// of 2,000 pages in a set sized for ten million would pay two commands a key, where a
// set sized for it pays one.
//
// Every key of a run expires between TTL/2 and TTL after the run last claimed anything
// (a process refreshes a bucket's TTL at most once per TTL/2): a run's set is gone
// within a week after it ends.
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
	// Expected is the number of keys the set of a chain's first run is sized for
	// (default 1,000,000); later runs are sized from the runs before them.
	Expected int64
	// Least is the fewest keys a set is sized for (default 10,000).
	Least int64
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
	// added counts the keys each run's claims added in this process since they were
	// last added to its chain's sizes.
	added map[string]*added
	// refreshed is when this process last refreshed a bucket's TTL: at most once per
	// TTL/2, so a claim costs one command, not two.
	refreshed map[string]time.Time
}

// Open reads the server's listpack limit and returns a Set. A server that does not
// answer CONFIG GET is assumed to use Redis's default of 128 entries.
func Open(ctx context.Context, rdb redis.UniversalClient, cfg Config) (*Set, error) {
	if cfg.Expected <= 0 {
		cfg.Expected = 1_000_000
	}
	if cfg.Least <= 0 {
		cfg.Least = 10_000
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
	return &Set{rdb: rdb, cfg: cfg, buckets: map[string]int{}, added: map[string]*added{}, refreshed: map[string]time.Time{}}, nil
}

func metaKey(run string) string { return "seen:" + run + ":meta" }

// BucketKey is the Redis key of one bucket of a run's set.
func BucketKey(run string, b int) string { return "seen:" + run + ":" + strconv.Itoa(b) }

func sizesKey(chain string) string { return "seen:sizes:" + chain }

// sizesKept is how many of a chain's runs its sizes remember (the largest), and
// sizesTTL how long after the chain's last claim they are forgotten.
const (
	sizesKept = 8
	sizesTTL  = 30 * 24 * time.Hour
)

// bucketsOf returns a run's B, fixing it on first use from the sizes of its chain's runs.
func (s *Set) bucketsOf(ctx context.Context, chain, run string) (int, error) {
	s.mu.Lock()
	b, ok := s.buckets[run]
	s.mu.Unlock()
	if ok {
		return b, nil
	}
	pipe := s.rdb.Pipeline()
	fixed := pipe.HGet(ctx, metaKey(run), "buckets")
	largest := pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: sizesKey(chain), Start: 0, Stop: 0, Rev: true})
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("seen-set of run %s: %w", run, err)
	}
	val := fixed.Val()
	if val == "" {
		want := s.cfg.Expected
		if prev := largest.Val(); len(prev) > 0 {
			want = max(2*int64(prev[0].Score), s.cfg.Least)
		}
		pipe = s.rdb.Pipeline()
		pipe.HSetNX(ctx, metaKey(run), "buckets", int(math.Ceil(float64(want)/s.cfg.PerBucket)))
		get := pipe.HGet(ctx, metaKey(run), "buckets")
		pipe.Expire(ctx, metaKey(run), s.cfg.TTL)
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, fmt.Errorf("seen-set of run %s: %w", run, err)
		}
		val = get.Val()
	}
	b, err := strconv.Atoi(val)
	if err != nil || b <= 0 {
		return 0, fmt.Errorf("seen-set of run %s: bad bucket count %q in %s", run, val, metaKey(run))
	}
	s.mu.Lock()
	if len(s.buckets) > 10_000 { // a long-lived worker forgets old runs
		clear(s.buckets)
		clear(s.added)
	}
	s.buckets[run] = b
	s.mu.Unlock()
	return b, nil
}

// added is what a run's claims added in this process, not yet in its chain's sizes.
type added struct {
	keys int64
	at   time.Time // when they were last added
}

// count notes n keys a run's claims added, and reports how many are due to be added to
// its chain's sizes now: on the run's first claim in this process (so that even a short
// run is known to be small), then every thousand keys or ten seconds.
func (s *Set) count(run string, n int64, now time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.added[run]
	if a == nil {
		s.added[run] = &added{at: now}
		return n
	}
	a.keys += n
	if a.keys < 1000 && now.Sub(a.at) < 10*time.Second {
		return 0
	}
	due := a.keys
	a.keys, a.at = 0, now
	return due
}

// recordSize adds keys to a run's entry in its chain's sizes, keeping the largest runs.
// It is a hint for sizing the next run: if Redis does not answer, the keys are dropped.
func (s *Set) recordSize(ctx context.Context, chain, run string, keys int64) {
	pipe := s.rdb.Pipeline()
	pipe.ZIncrBy(ctx, sizesKey(chain), float64(keys), run)
	pipe.ZRemRangeByRank(ctx, sizesKey(chain), 0, -sizesKept-1)
	pipe.Expire(ctx, sizesKey(chain), sizesTTL)
	_, _ = pipe.Exec(ctx) // a lost count only sizes a later run less well
}

// Claimer claims keys in one run's set for one batch, across the batch's attempts.
type Claimer struct {
	set   *Set
	chain string
	run   string
	tag   string
	mine  map[uint64]bool // fingerprints this attempt handed on
	// earlier are the fingerprints this attempt found claimed by the batch already: an
	// attempt that died claimed them, and may have run them itself.
	earlier map[uint64]bool
	// first is set on a batch's first attempt: no attempt before it claimed anything, so
	// a key claimed already is someone else's, with no need to read whose.
	first bool
}

// FirstAttempt tells the claimer that no earlier attempt of its batch ran: Claim then
// takes a key claimed already for another batch's without reading its claim, which
// saves a round trip and an HGET per duplicate (and the 1/8192 chance of mistaking
// another batch's tag for its own).
func (c *Claimer) FirstAttempt() { c.first = true }

// Claimer returns the claimer of the batch with the given id (the same in every attempt
// of the batch) in a run of a chain (a name that is the same for every run of the chain,
// such as tenant/chain: its runs' sizes size the next run's set).
func (s *Set) Claimer(chain, run, id string) *Claimer {
	return &Claimer{set: s, chain: chain, run: run, tag: strconv.Itoa(Tag(id)), mine: map[uint64]bool{}, earlier: map[uint64]bool{}}
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
// twice in keys goes on once. One command per key in the usual case: an HSETNX per key,
// and an EXPIRE for each bucket this process has not refreshed within TTL/2, in one
// pipeline of one-key commands (on a Cluster the client splits it by node); only keys
// someone had claimed already take a second round trip, an HGET to read whose claim it
// is. Values never change once set, so no transaction is needed.
func (c *Claimer) Claim(ctx context.Context, keys []string) ([]bool, error) {
	goes := make([]bool, len(keys))
	if len(keys) == 0 {
		return goes, nil
	}
	b, err := c.set.bucketsOf(ctx, c.chain, c.run)
	if err != nil {
		return nil, err
	}
	pipe := c.set.rdb.Pipeline()
	sets := make([]*redis.BoolCmd, len(keys))
	fps := make([]uint64, len(keys))
	where := make([][2]string, len(keys)) // bucket key and field
	asked := map[uint64]bool{}
	touched := map[int]bool{}
	var refreshing []string // buckets whose EXPIRE rides in this pipeline
	now := time.Now()
	for i, k := range keys {
		fp := fingerprint(k)
		fps[i] = fp
		if c.mine[fp] || asked[fp] {
			continue
		}
		asked[fp] = true
		bk := int((fp >> 32) % uint64(b))
		key, field := BucketKey(c.run, bk), strconv.Itoa(int(int32(uint32(fp))))
		where[i] = [2]string{key, field}
		sets[i] = pipe.HSetNX(ctx, key, field, c.tag)
		if !touched[bk] {
			touched[bk] = true
			if c.set.stale(key, now) {
				pipe.Expire(ctx, key, c.set.cfg.TTL)
				refreshing = append(refreshing, key)
			}
		}
	}
	if len(asked) == 0 {
		return goes, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		// An HSETNX may have run without its bucket's EXPIRE: refresh those next time.
		c.set.forget(refreshing)
		return nil, fmt.Errorf("seen-set of run %s: claim %d keys: %w", c.run, len(asked), err)
	}
	gets := make([]*redis.StringCmd, len(keys))
	pipe = c.set.rdb.Pipeline()
	var n int64
	for i, set := range sets {
		switch {
		case set == nil:
		case set.Val():
			goes[i] = true
			c.mine[fps[i]] = true
			n++
		case c.first:
		default:
			gets[i] = pipe.HGet(ctx, where[i][0], where[i][1])
		}
	}
	if due := c.set.count(c.run, n, now); due > 0 {
		c.set.recordSize(ctx, c.chain, c.run, due)
	}
	if pipe.Len() == 0 {
		return goes, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("seen-set of run %s: read the claims of %d keys: %w", c.run, pipe.Len(), err)
	}
	for i, get := range gets {
		if get != nil && get.Val() == c.tag {
			goes[i] = true
			c.mine[fps[i]] = true
			c.earlier[fps[i]] = true
		}
	}
	return goes, nil
}

// stale reports whether a bucket's TTL is due for a refresh from this process (not
// refreshed within TTL/2), and notes it refreshed now.
func (s *Set) stale(key string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if at, ok := s.refreshed[key]; ok && now.Sub(at) < s.cfg.TTL/2 {
		return false
	}
	if len(s.refreshed) >= maxRefreshed { // a long-lived worker forgets old buckets
		clear(s.refreshed)
	}
	s.refreshed[key] = now
	return true
}

// forget drops buckets from those this process refreshed, so the next claim sets their TTL.
func (s *Set) forget(keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.refreshed, k)
	}
}

// maxRefreshed bounds the buckets a process remembers refreshing (about 64 bytes each).
const maxRefreshed = 1 << 18

// Earlier reports whether the key went on in Claim because the batch had claimed it
// already, in an attempt that died, rather than because no one had: that attempt may
// have run the input itself and claimed what it led to.
func (c *Claimer) Earlier(key string) bool { return c.earlier[fingerprint(key)] }
