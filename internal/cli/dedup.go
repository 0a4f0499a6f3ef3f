package cli

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/internal/dedup"
	"github.com/trawlerhq/trawler/internal/redisops"
)

func dedupCmd(s *Settings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dedup",
		Short: "Inspect and benchmark the Redis dedup store",
		Long: `Trawler remembers every stored item in bucketed Redis hashes, in about 11 bytes per item,
so each step stores only new or changed items (chain option dedup: changed | new | off).
A namespace is <tenant>:<site.task>.`,
	}
	var ns string
	var sample int
	stats := &cobra.Command{
		Use:   "stats",
		Short: "Items, buckets, encodings, bytes per entry and error rates per namespace",
		Example: `  trawler dedup stats --data .data/dev
  trawler dedup stats --redis 10.0.0.5:6379 --ns default:demo.story --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rdb, err := s.RedisClient("to inspect")
			if err != nil {
				return err
			}
			defer rdb.Close()
			d, err := dedup.Open(cmd.Context(), rdb, dedup.Config{Log: s.Logger()})
			if err != nil {
				return err
			}
			names := []string{ns}
			if ns == "" {
				if names, err = d.Namespaces(cmd.Context()); err != nil {
					return err
				}
			}
			var all []dedup.Stats
			for _, n := range names {
				st, err := d.Stats(cmd.Context(), n, sample)
				if err != nil {
					return err
				}
				all = append(all, st)
			}
			if s.JSON {
				return PrintJSON(all)
			}
			if len(all) == 0 {
				fmt.Println("no dedup namespaces yet: they appear when a chain stores items")
			}
			for _, st := range all {
				fmt.Printf("%s\n  items %d in %d buckets (%d used, %.1f per bucket; listpack limit %d)\n",
					st.Namespace, st.Items, st.Buckets, st.UsedBuckets, st.PerBucket, st.MaxListpack)
				if st.MemoryReported {
					fmt.Printf("  encodings of %d sampled buckets: %s\n  bytes per entry %.2f (sampled MEMORY USAGE)\n", st.Sampled, encodings(st.Encodings), st.BytesPerEntry)
				} else {
					fmt.Println("  encodings and bytes per entry: not reported by this Redis (it answers no OBJECT ENCODING or MEMORY USAGE, as the dev stack's embedded Redis); a redis-server does, and `trawler dedup bench` measures one")
				}
				fmt.Printf("  false-duplicate rate %.2g (mode new), false-drop rate %.2g (mode changed), missed-change rate %.2g\n",
					st.FalseDupRate, st.FalseDropRate, st.MissedChangeRate)
			}
			return nil
		},
	}
	stats.Flags().StringVar(&ns, "ns", "", "one namespace (default: all)")
	stats.Flags().IntVar(&sample, "sample", 200, "buckets sampled for encoding and MEMORY USAGE")
	cmd.AddCommand(stats, dedupBenchCmd(s))
	return cmd
}

func dedupBenchCmd(s *Settings) *cobra.Command {
	var n, batch, workers int
	cmd := &cobra.Command{
		Use:   "bench --redis ADDR --n N",
		Short: "Memory and speed of Trawler's buckets against a scrapy-redis style SHA-1 set",
		Long: `Load N distinct synthetic keys into Trawler's dedup buckets (namespace "bench", keys
dd:bench:*) with Check batches from one process, and the same keys' SHA-1 hex
fingerprints into a Redis SET (bench:sha1set), as scrapy-redis keeps them, on the same
server. Prints bytes per entry of each (MEMORY USAGE of every key, not an estimate), the
ratio, Trawler's checks per second, and the false-duplicate rate measured (distinct keys
that came back as seen). Both structures stay for inspection; the next run deletes them
first. Use a real redis-server: miniredis does not measure memory.`,
		Example: `  redis-server --port 6390 --save "" &
  trawler dedup bench --redis 127.0.0.1:6390 --n 10000000 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := s.Resolve(); err != nil {
				return err
			}
			if s.Redis == "" {
				return fmt.Errorf("--redis HOST:PORT or redis://… is required (a real redis-server)")
			}
			if n < 1 {
				return fmt.Errorf("--n %d: use 1 or more keys", n)
			}
			res, err := runDedupBench(cmd.Context(), s, n, batch, workers)
			if err != nil {
				return err
			}
			if s.JSON {
				return PrintJSON(res)
			}
			fmt.Printf("%d keys\n  trawler buckets  %6.2f bytes/entry  (%d buckets, %.0f checks/s, false-duplicate rate %.2g)\n  sha1 hex SET     %6.2f bytes/entry\n  ratio            %6.1fx smaller\n",
				n, res.BytesPerEntry, res.Buckets, res.ChecksPerS, res.FalseDupRate, res.SetBytesPerEntry, res.Ratio)
			return nil
		},
	}
	cmd.Flags().IntVar(&n, "n", 1_000_000, "distinct keys to load")
	cmd.Flags().IntVar(&batch, "batch", 1000, "entries per Check call")
	cmd.Flags().IntVar(&workers, "workers", 8, "concurrent Check callers in this process")
	return cmd
}

type dedupBenchResult struct {
	N                int     `json:"n"`
	Buckets          int     `json:"buckets"`
	BytesPerEntry    float64 `json:"bytes_per_entry"`
	SetBytesPerEntry float64 `json:"set_sha1_bytes_per_entry"`
	Ratio            float64 `json:"ratio"`
	ChecksPerS       float64 `json:"checks_per_s"`
	FalseDupRate     float64 `json:"false_dup_rate"`
	FalseDups        int64   `json:"false_dups"`
	ExpectedDupRate  float64 `json:"expected_false_dup_rate"`
}

func runDedupBench(ctx context.Context, s *Settings, n, batch, workers int) (*dedupBenchResult, error) {
	rdb, err := s.OpenRedis(workers*2, true)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	const ns, setKey = "bench", "bench:sha1set"
	say := func(stage string, done, total int) {
		if s.JSON {
			_ = PrintJSON(map[string]any{"progress": map[string]any{"stage": stage, "done": done, "total": total}})
		} else {
			fmt.Fprintf(os.Stderr, "\r%-28s %d/%d   ", stage, done, total)
			if done == total {
				fmt.Fprintln(os.Stderr)
			}
		}
	}
	// Clear the previous run's structures.
	// One UNLINK per key, pipelined: the keys lie in many Redis Cluster slots.
	pipe := rdb.Pipeline()
	flush := func() error { _, err := pipe.Exec(ctx); return err }
	if err := redisops.Scan(ctx, rdb, "dd:"+ns+":*", 5000, func(key string) error {
		pipe.Unlink(ctx, key)
		if pipe.Len() < 5000 {
			return nil
		}
		return flush()
	}); err != nil {
		return nil, err
	}
	pipe.Unlink(ctx, setKey)
	if err := flush(); err != nil {
		return nil, err
	}

	d, err := dedup.Open(ctx, rdb, dedup.Config{Expected: int64(n), Log: s.Logger()})
	if err != nil {
		return nil, err
	}
	b, err := d.Buckets(ctx, ns)
	if err != nil {
		return nil, err
	}
	key := func(i int) string { return "bench:item:" + strconv.Itoa(i) }
	var next, done, dups atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			entries := make([]dedup.Entry, 0, batch)
			for {
				from := int(next.Add(int64(batch))) - batch
				if from >= n {
					return
				}
				entries = entries[:0]
				for i := from; i < min(from+batch, n); i++ {
					entries = append(entries, dedup.Entry{Key: key(i), Content: "v"})
				}
				vs, err := d.Check(ctx, ns, entries)
				if err != nil {
					errs <- err
					return
				}
				for _, v := range vs {
					if v.State != dedup.New {
						dups.Add(1)
					}
				}
				done.Add(int64(len(entries)))
			}
		}()
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				say("checking (trawler buckets)", int(done.Load()), n)
			case <-stop:
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	say("checking (trawler buckets)", n, n)

	for from := 0; from < n; from += 10000 {
		pipe := rdb.Pipeline()
		members := make([]any, 0, 10000)
		for i := from; i < min(from+10000, n); i++ {
			sum := sha1.Sum([]byte(key(i)))
			members = append(members, hex.EncodeToString(sum[:]))
		}
		pipe.SAdd(ctx, setKey, members...)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
		if from%1_000_000 == 0 {
			say("loading sha1 set", from, n)
		}
	}
	say("loading sha1 set", n, n)

	var bucketBytes int64
	for from := 0; from < b; from += 2000 {
		pipe := rdb.Pipeline()
		cmds := make([]*redis.IntCmd, 0, 2000)
		for i := from; i < min(from+2000, b); i++ {
			cmds = append(cmds, pipe.MemoryUsage(ctx, dedup.BucketKey(ns, i), 0))
		}
		_, _ = pipe.Exec(ctx) // empty buckets answer nil
		for _, c := range cmds {
			bucketBytes += c.Val()
		}
	}
	setBytes, err := rdb.MemoryUsage(ctx, setKey, 0).Result()
	if err != nil {
		return nil, fmt.Errorf("MEMORY USAGE %s: %w (the bench needs a real redis-server)", setKey, err)
	}
	res := &dedupBenchResult{
		N: n, Buckets: b,
		BytesPerEntry:    RoundTo(float64(bucketBytes)/float64(n), 2),
		SetBytesPerEntry: RoundTo(float64(setBytes)/float64(n), 2),
		ChecksPerS:       RoundTo(float64(n)/elapsed.Seconds(), 0),
		FalseDups:        dups.Load(),
		FalseDupRate:     float64(dups.Load()) / float64(n),
		ExpectedDupRate:  dedup.FalseDupRate(float64(n)/float64(b)) / 2, // averaged over the fill
	}
	res.Ratio = RoundTo(res.SetBytesPerEntry/res.BytesPerEntry, 2)
	return res, nil
}

// encodings lists bucket counts by encoding, most common first: "listpack 61, hashtable 3".
func encodings(m map[string]int) string {
	names := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(names, func(a, b string) int { return m[b] - m[a] })
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m[n])
	}
	return strings.Join(parts, ", ")
}
