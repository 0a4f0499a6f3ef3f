package dedup

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/redisops"
)

// Stats describes one namespace.
type Stats struct {
	Namespace   string         `json:"namespace"`
	Items       int64          `json:"items"`
	Buckets     int            `json:"buckets"`      // B
	UsedBuckets int            `json:"used_buckets"` // buckets holding at least one entry
	PerBucket   float64        `json:"per_bucket"`   // average entries per bucket
	MaxListpack int            `json:"hash_max_listpack_entries"`
	Encodings   map[string]int `json:"encodings"` // sampled buckets by Redis encoding
	Sampled     int            `json:"sampled_buckets"`
	// BytesPerEntry is MEMORY USAGE of the sampled buckets over their entries; 0 when
	// the server does not answer MEMORY USAGE (MemoryReported false).
	BytesPerEntry  float64 `json:"bytes_per_entry"`
	MemoryReported bool    `json:"memory_reported"`
	// FalseDupRate is the probability that a new key is taken for a seen one (mode
	// "new"); FalseDropRate that a new item is dropped in mode "changed".
	FalseDupRate  float64 `json:"false_dup_rate"`
	FalseDropRate float64 `json:"false_drop_rate"`
	// MissedChangeRate is the probability that a change goes unnoticed (its content bits
	// agree with the old ones).
	MissedChangeRate float64 `json:"missed_change_rate"`
}

// FalseDupRate is the chance that a new key lands on an existing field of its bucket
// when buckets hold perBucket entries on average.
func FalseDupRate(perBucket float64) float64 {
	return 1 - math.Pow(1-1/float64(int64(1)<<24), perBucket)
}

// Namespaces lists the namespaces in Redis (those with a meta key).
func (d *Deduper) Namespaces(ctx context.Context) ([]string, error) {
	var out []string
	err := redisops.Scan(ctx, d.rdb, "dd:*:meta", 1000, func(k string) error {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(k, "dd:"), ":meta"))
		return nil
	})
	return out, err
}

// Stats counts a namespace's entries (HLEN of every bucket, pipelined) and samples up to
// `sample` buckets, evenly spread, for encoding and MEMORY USAGE.
func (d *Deduper) Stats(ctx context.Context, ns string, sample int) (Stats, error) {
	b, err := d.Buckets(ctx, ns)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Namespace: ns, Buckets: b, MaxListpack: d.maxListpack, Encodings: map[string]int{}}
	const chunk = 2000
	for start := 0; start < b; start += chunk {
		pipe := d.rdb.Pipeline()
		cmds := make([]*redis.IntCmd, 0, chunk)
		for i := start; i < min(start+chunk, b); i++ {
			cmds = append(cmds, pipe.HLen(ctx, BucketKey(ns, i)))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return st, fmt.Errorf("dedup stats %s: %w", ns, err)
		}
		for _, c := range cmds {
			if n := c.Val(); n > 0 {
				st.Items += n
				st.UsedBuckets++
			}
		}
	}
	st.PerBucket = float64(st.Items) / float64(b)
	st.FalseDupRate = FalseDupRate(st.PerBucket)
	st.FalseDropRate = st.FalseDupRate / float64(int64(1)<<contentBits)
	st.MissedChangeRate = 1 / float64(int64(1)<<contentBits)
	if sample <= 0 || st.Items == 0 {
		return st, nil
	}
	step := max(b/sample, 1)
	var bytes, entries int64
	memOK := true
	for i := 0; i < b && st.Sampled < sample; i += step {
		key := BucketKey(ns, i)
		n, err := d.rdb.HLen(ctx, key).Result()
		if err != nil || n == 0 {
			continue
		}
		st.Sampled++
		// A server without OBJECT ENCODING (an embedded dev Redis) reports none.
		if enc, err := d.rdb.ObjectEncoding(ctx, key).Result(); err == nil {
			st.Encodings[enc]++
		}
		if memOK {
			m, err := d.rdb.MemoryUsage(ctx, key, 0).Result()
			if err != nil {
				memOK = false // e.g. a server that does not implement MEMORY USAGE
				continue
			}
			bytes += m
			entries += n
		}
	}
	if memOK && entries > 0 {
		st.BytesPerEntry = float64(bytes) / float64(entries)
		st.MemoryReported = true
	}
	return st, nil
}
