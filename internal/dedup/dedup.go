// Package dedup tells new, changed and unchanged items apart across all workers, in a few
// bytes of Redis memory per item.
//
// # Layout
//
// Items of a namespace (Trawler uses "<tenant>:<site.task>") are spread over B buckets:
// bucket = crc32(key) mod B, each a Redis hash "dd:<namespace>:<bucket>". Inside a
// bucket, one entry per item:
//
//   - field: 24 bits of a BKDR hash of the key, written as a decimal integer in the
//     signed range [-2^23, 2^23). The bucket already accounts for log2(B) bits of the
//     crc32; taking the field from a different hash keeps all 24 field bits informative
//     instead of repeating bits the bucket implies.
//   - value: 24 bits, also a signed decimal integer: 12 bits of the content hash and 12
//     bits of the last-seen day (days since 2024-01-01, modulo 4096, i.e. an 11-year
//     window).
//
// Redis stores small hashes as listpacks, and a listpack stores an integer-looking
// string as a 24-bit integer in 4 bytes plus a 1-byte back-length: 10 bytes per entry.
// Buckets are sized so they stay listpacks (see Sizing), which puts a namespace at about
// 11 bytes per entry including the bucket keys, against 88 bytes for a Redis SET of SHA-1
// hex fingerprints (scrapy-redis). `trawler dedup bench` measures both.
//
// # Verdicts and error rates
//
// Check returns, per entry, New, Changed(last seen) or Unchanged(last seen), and records
// the entry, atomically, in one round trip per batch. It uses a MULTI/EXEC block of HGET
// and HSET rather than a Lua script: on Redis 7.0 an EVALSHA call costs about 10 µs of
// server time against 3 µs for the two commands (measured with `trawler dedup bench`),
// and MULTI/EXEC gives the same atomicity. With n = N/B entries in a bucket, the
// probabilities are:
//
//   - a new key collides with an existing field: p_field = n / 2^24. In dedup mode
//     "new" the item is then taken for a duplicate and not stored: the false-duplicate
//     rate. For N = 10^7 items in B = 111,112 buckets (n = 90) it is 5.4e-6, about 54
//     items of ten million.
//   - in mode "changed" a colliding new key is dropped only if its 12 content bits also
//     match: p_field / 2^12 = 1.3e-9 at the same sizing.
//   - a changed item whose new content hash agrees in its 12 bits is taken for unchanged:
//     1/4096 = 2.4e-4 per change. It is stored again at its next change.
//
// Stats computes these for a namespace from its actual fill.
//
// # Sizing
//
// B is fixed when a namespace is first used, from the expected cardinality:
// B = ceil(expected / 90), so a bucket averages 90 entries — at most 70% of the server's
// hash-max-listpack-entries (read with CONFIG GET; 128 in stock Redis 7, 512 in
// Debian's build), so with the Poisson spread of bucket sizes practically none converts
// to a hashtable. B is kept in
// "dd:<namespace>:meta". A namespace outgrowing its B keeps working but costs more
// memory (buckets convert to hashtables, about 5× larger); Open warns with the fix. To
// grow B, raise hash-max-listpack-entries on the server (CONFIG SET, then the existing
// buckets stay listpacks up to the new limit), or start a new namespace with a larger
// expected cardinality: its items are New once, then deduplicated as before.
//
// # Redis Cluster
//
// A Cluster refuses a MULTI/EXEC block whose keys lie in several hash slots, and the
// buckets of a batch lie in many. There Check runs one small script per bucket instead
// (checkEach), all in one pipeline that the cluster client splits by node: each bucket
// is still checked and recorded atomically, and two entries of one key still meet in
// one script, in order. Lookup, Record and Forget are plain pipelines of one-key
// commands, which need nothing special.
package dedup

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/redisops"
)

// State is what Check found for an entry.
type State int

// The verdicts.
const (
	New State = iota
	Changed
	Unchanged
)

func (s State) String() string {
	switch s {
	case New:
		return "new"
	case Changed:
		return "changed"
	case Unchanged:
		return "unchanged"
	}
	return "?"
}

// Entry is one item to check: its stable key and its content hash.
type Entry struct {
	Key     string
	Content string
}

// Verdict is what Check found; LastSeen is the day the entry was last recorded (zero for
// New).
type Verdict struct {
	State    State
	LastSeen time.Time
}

// Config sizes new namespaces.
type Config struct {
	// Expected is the cardinality a namespace is sized for (default 10,000,000).
	Expected int64
	// Buckets fixes B for new namespaces instead of deriving it from Expected.
	Buckets int
	// PerBucket is the target average of entries per bucket (default 90). It is capped
	// at 70% of the server's hash-max-listpack-entries so buckets stay listpacks; below
	// that cap, fewer entries per bucket mean fewer field collisions (see the rates
	// above) at ~0.7 bytes of bucket overhead per entry at 90.
	PerBucket float64
	Log       *slog.Logger
}

// Deduper checks entries against Redis.
type Deduper struct {
	rdb         redis.UniversalClient
	cfg         Config
	maxListpack int
	mu          sync.Mutex
	buckets     map[string]int // namespace → B
	now         func() time.Time
}

// DefaultExpected is the cardinality namespaces are sized for by default.
const DefaultExpected = 10_000_000

// Open reads the server's listpack limit and returns a Deduper. A server that does not
// answer CONFIG GET (managed Redis often disables it) is assumed to use Redis's default
// of 128 entries.
func Open(ctx context.Context, rdb redis.UniversalClient, cfg Config) (*Deduper, error) {
	if cfg.Expected <= 0 {
		cfg.Expected = DefaultExpected
	}
	if cfg.PerBucket <= 0 {
		cfg.PerBucket = 90
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("dedup: Redis unreachable: %w (check --redis / TRAWLER_REDIS)", err)
	}
	d := &Deduper{rdb: rdb, cfg: cfg, maxListpack: 128, buckets: map[string]int{}, now: time.Now}
	if v, err := rdb.ConfigGet(ctx, "hash-max-listpack-entries").Result(); err == nil {
		if n, err := strconv.Atoi(v["hash-max-listpack-entries"]); err == nil && n > 0 {
			d.maxListpack = n
		}
	}
	d.cfg.PerBucket = min(d.cfg.PerBucket, 0.7*float64(d.maxListpack))
	return d, nil
}

// MaxListpack is the server's hash-max-listpack-entries as read at start.
func (d *Deduper) MaxListpack() int { return d.maxListpack }

func metaKey(ns string) string { return "dd:" + ns + ":meta" }

// BucketKey is the Redis key of one bucket.
func BucketKey(ns string, b int) string { return "dd:" + ns + ":" + strconv.Itoa(b) }

// Buckets returns a namespace's B, fixing it on first use.
func (d *Deduper) Buckets(ctx context.Context, ns string) (int, error) {
	d.mu.Lock()
	b, ok := d.buckets[ns]
	d.mu.Unlock()
	if ok {
		return b, nil
	}
	want := d.cfg.Buckets
	if want <= 0 {
		want = int(math.Ceil(float64(d.cfg.Expected) / d.cfg.PerBucket))
	}
	if err := d.rdb.HSetNX(ctx, metaKey(ns), "buckets", want).Err(); err != nil {
		return 0, fmt.Errorf("dedup: namespace %s: %w", ns, err)
	}
	s, err := d.rdb.HGet(ctx, metaKey(ns), "buckets").Result()
	if err != nil {
		return 0, fmt.Errorf("dedup: namespace %s: %w", ns, err)
	}
	b, err = strconv.Atoi(s)
	if err != nil || b <= 0 {
		return 0, fmt.Errorf("dedup: namespace %s: bad bucket count %q in %s", ns, s, metaKey(ns))
	}
	if per := float64(d.cfg.Expected) / float64(b); per > float64(d.maxListpack)*0.9 {
		d.cfg.Log.Warn(fmt.Sprintf("dedup namespace %s: %d expected items over %d buckets is %.0f per bucket, above 90%% of the server's hash-max-listpack-entries=%d; full buckets become hashtables and cost ~5x the memory. Fix: CONFIG SET hash-max-listpack-entries %d on the server, or start a new namespace sized for the larger cardinality",
			ns, d.cfg.Expected, b, per, d.maxListpack, nextPow2(int(per/0.7))))
	}
	d.mu.Lock()
	d.buckets[ns] = b
	d.mu.Unlock()
	return b, nil
}

func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// Field is the compressed integer a key is stored under in its bucket.
func Field(key string) int32 {
	var h uint64
	for i := 0; i < len(key); i++ {
		h = h*131 + uint64(key[i]) // BKDR
	}
	return int32(h&0xffffff) - 1<<23
}

// Bucket is the bucket a key falls into.
func Bucket(key string, buckets int) int {
	return int(crc32.ChecksumIEEE([]byte(key)) % uint32(buckets))
}

var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	dayBits     = 12
	contentBits = 12
)

func contentBitsOf(content string) int32 {
	h := fnv.New32a()
	h.Write([]byte(content))
	return int32(h.Sum32() >> (32 - contentBits))
}

func dayOf(t time.Time) int32 {
	return int32(int64(t.Sub(epoch)/(24*time.Hour)) & (1<<dayBits - 1))
}

// value packs content bits and the day into the signed 24-bit range.
func value(content int32, day int32) int32 {
	return (content<<dayBits | day) - 1<<23
}

func unpack(v int32) (content, day int32) {
	u := v + 1<<23
	return u >> dayBits, u & (1<<dayBits - 1)
}

// lastSeen turns a stored day residue into the latest date not after now.
func lastSeen(day int32, now time.Time) time.Time {
	today := int64(now.Sub(epoch) / (24 * time.Hour))
	d := today - (today-int64(day))&(1<<dayBits-1)
	return epoch.Add(time.Duration(d) * 24 * time.Hour)
}

type group struct {
	key     string
	idx     []int
	fields  []int32
	content []int32
}

func (d *Deduper) group(ctx context.Context, ns string, entries []Entry) ([]*group, error) {
	b, err := d.Buckets(ctx, ns)
	if err != nil {
		return nil, err
	}
	byBucket := map[int]*group{}
	var order []int
	for i, e := range entries {
		if e.Key == "" {
			return nil, fmt.Errorf("dedup: entry %d has an empty key", i)
		}
		bk := Bucket(e.Key, b)
		g, ok := byBucket[bk]
		if !ok {
			g = &group{key: BucketKey(ns, bk)}
			byBucket[bk] = g
			order = append(order, bk)
		}
		f, c := Field(e.Key), contentBitsOf(e.Content)
		g.idx = append(g.idx, i)
		g.fields = append(g.fields, f)
		g.content = append(g.content, c)
	}
	sort.Ints(order)
	out := make([]*group, len(order))
	for i, bk := range order {
		out[i] = byBucket[bk]
	}
	return out, nil
}

// Check returns a verdict per entry and records every entry as seen now with its
// content, atomically, in one round trip: a MULTI/EXEC block of HGET + HSET per entry.
// Two entries of one batch with the same key get verdicts in order (the second sees the
// first). On Redis Cluster the client runs one MULTI/EXEC per hash slot, and every
// command touches one bucket key, so each block is single-slot.
func (d *Deduper) Check(ctx context.Context, ns string, entries []Entry) ([]Verdict, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	b, err := d.Buckets(ctx, ns)
	if err != nil {
		return nil, err
	}
	now := d.now()
	day := dayOf(now)
	if _, ok := d.rdb.(*redis.ClusterClient); ok {
		return d.checkEach(ctx, ns, entries, now)
	}
	pipe := d.rdb.TxPipeline()
	olds := make([]*redis.StringCmd, len(entries))
	contents := make([]int32, len(entries))
	prefix := "dd:" + ns + ":"
	for i, e := range entries {
		if e.Key == "" {
			return nil, fmt.Errorf("dedup: entry %d has an empty key", i)
		}
		key := prefix + strconv.Itoa(Bucket(e.Key, b))
		field := strconv.Itoa(int(Field(e.Key)))
		contents[i] = contentBitsOf(e.Content)
		olds[i] = pipe.HGet(ctx, key, field)
		pipe.HSet(ctx, key, field, strconv.Itoa(int(value(contents[i], day))))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("dedup: check %d entries in namespace %s: %w", len(entries), ns, err)
	}
	verdicts := make([]Verdict, len(entries))
	for i, cmd := range olds {
		var old any
		if v, err := cmd.Result(); err == nil {
			old = v
		} else if !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("dedup: check %s: %w", entries[i].Key, err)
		}
		verdicts[i] = verdictFor(old, contents[i], now)
	}
	return verdicts, nil
}

// checkBucket is Check for the entries of one bucket (KEYS[1]): ARGV holds pairs of
// field and new value; it returns the old values in order (nil where none).
var checkBucket = redis.NewScript(`
local old = {}
for i = 1, #ARGV, 2 do
  old[#old + 1] = redis.call('HGET', KEYS[1], ARGV[i])
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
return old
`)

// checkEach is Check on a Redis Cluster: one script per bucket (see the package doc).
func (d *Deduper) checkEach(ctx context.Context, ns string, entries []Entry, now time.Time) ([]Verdict, error) {
	day := dayOf(now)
	groups, err := d.group(ctx, ns, entries)
	if err != nil {
		return nil, err
	}
	calls := make([]redisops.Call, len(groups))
	for i, g := range groups {
		calls[i] = redisops.Call{Keys: []string{g.key}, Args: g.pairs(day)}
	}
	verdicts := make([]Verdict, len(entries))
	for i, cmd := range redisops.EvalEach(ctx, d.rdb, checkBucket, calls) {
		olds, err := cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("dedup: check %d entries in namespace %s: %w", len(entries), ns, err)
		}
		groups[i].judge(verdicts, olds, now)
	}
	return verdicts, nil
}

// judge fills in the verdicts of a group's entries from their old values (in order).
func (g *group) judge(verdicts []Verdict, olds []any, now time.Time) {
	for j := range g.idx {
		var old any
		if j < len(olds) {
			old = olds[j]
		}
		verdicts[g.idx[j]] = verdictFor(old, g.content[j], now)
	}
}

// pairs are a group's fields with their new values, as HSET takes them.
func (g *group) pairs(day int32) []any {
	out := make([]any, 0, 2*len(g.fields))
	for j, f := range g.fields {
		out = append(out, strconv.Itoa(int(f)), strconv.Itoa(int(value(g.content[j], day))))
	}
	return out
}

func verdictFor(old any, content int32, now time.Time) Verdict {
	s, ok := old.(string)
	if !ok || s == "" {
		return Verdict{State: New}
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return Verdict{State: New}
	}
	oldContent, oldDay := unpack(int32(v))
	st := Changed
	if oldContent == content {
		st = Unchanged
	}
	return Verdict{State: st, LastSeen: lastSeen(oldDay, now)}
}

// Lookup returns verdicts without recording anything (HMGET per bucket, one round trip).
// With Record it lets a pipeline record entries only after their items are stored, so a
// crash in between re-checks them as new rather than losing them.
func (d *Deduper) Lookup(ctx context.Context, ns string, entries []Entry) ([]Verdict, error) {
	now := d.now()
	groups, err := d.group(ctx, ns, entries)
	if err != nil || len(groups) == 0 {
		return nil, err
	}
	pipe := d.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(groups))
	for i, g := range groups {
		fields := make([]string, len(g.fields))
		for j, f := range g.fields {
			fields[j] = strconv.Itoa(int(f))
		}
		cmds[i] = pipe.HMGet(ctx, g.key, fields...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("dedup: look up %d entries in namespace %s: %w", len(entries), ns, err)
	}
	verdicts := make([]Verdict, len(entries))
	for i, g := range groups {
		g.judge(verdicts, cmds[i].Val(), now)
	}
	return verdicts, nil
}

// Record marks entries as seen now with their content (HSET per bucket, one round trip).
func (d *Deduper) Record(ctx context.Context, ns string, entries []Entry) error {
	now := d.now()
	day := dayOf(now)
	groups, err := d.group(ctx, ns, entries)
	if err != nil || len(groups) == 0 {
		return err
	}
	pipe := d.rdb.Pipeline()
	for _, g := range groups {
		pipe.HSet(ctx, g.key, g.pairs(day)...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("dedup: record %d entries in namespace %s: %w", len(entries), ns, err)
	}
	return nil
}

// Forget removes keys, so they are New again.
func (d *Deduper) Forget(ctx context.Context, ns string, keys []string) error {
	b, err := d.Buckets(ctx, ns)
	if err != nil {
		return err
	}
	pipe := d.rdb.Pipeline()
	for _, k := range keys {
		pipe.HDel(ctx, BucketKey(ns, Bucket(k, b)), strconv.Itoa(int(Field(k))))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("dedup: forget %d keys in namespace %s: %w", len(keys), ns, err)
	}
	return nil
}
