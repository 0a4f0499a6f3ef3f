package activities

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
)

// SharedSources lets identical source steps of different chains — the same task, params
// and input, in any chain of any tenant — fetch once per interval: the first batch to
// need an input in an interval runs the task and leaves its result in Redis; the others
// take that result. Each chain then applies its own dedup, quota and sinks to the items.
type SharedSources struct {
	rdb  redis.UniversalClient
	poll time.Duration // how often a waiting batch looks for the result
}

// NewSharedSources returns shared sources kept in rdb.
func NewSharedSources(rdb redis.UniversalClient) *SharedSources {
	return &SharedSources{rdb: rdb, poll: 50 * time.Millisecond}
}

// sourceKey names one input of one task with its params. The interval is not part of
// the key: the first fetch's result lives for the step's `shared` interval, so two
// chains a second apart share it even across a wall-clock boundary.
func sourceKey(step crawl.PlanStep, in crawl.Input) (string, error) {
	b, err := json.Marshal(struct {
		Task   string
		Params crawl.Params
		Input  crawl.Input
	}{step.Task, step.Params, in}) // encoding/json sorts map keys: a stable key
	if err != nil {
		return "", err
	}
	sum := sha1.Sum(b)
	return "trawler:shared:" + hex.EncodeToString(sum[:10]), nil
}

// Run returns the task's result for the input in the current interval, running the task
// only if no other batch has (or is).
func (s *SharedSources) Run(ctx context.Context, step crawl.PlanStep, in crawl.Input, run func() (crawl.Result, error)) (crawl.Result, error) {
	key, err := sourceKey(step, in)
	if err != nil {
		return run()
	}
	for {
		if res, ok, err := s.cached(ctx, key); err != nil || ok {
			return res, err
		}
		// Whoever takes the lock fetches; it expires with the step timeout, so a worker that
		// dies while fetching hands the fetch to the next one that asks.
		lock, err := takeLock(ctx, s.rdb, key+":lock", step.Timeout+5*time.Second)
		if err != nil {
			return crawl.Result{}, fmt.Errorf("shared source: %w", err)
		}
		if lock != nil {
			res, err := run()
			if err == nil {
				b, merr := json.Marshal(res)
				if merr == nil {
					err = s.rdb.Set(ctx, key, b, step.Shared).Err()
				}
			}
			// An expired lock another worker took since is theirs: release leaves it. A
			// failed release only delays the next fetch until the lock expires.
			_, _ = lock.release(context.WithoutCancel(ctx))
			return res, err
		}
		select {
		case <-ctx.Done():
			return crawl.Result{}, ctx.Err()
		case <-time.After(s.poll):
		}
	}
}

func (s *SharedSources) cached(ctx context.Context, key string) (crawl.Result, bool, error) {
	b, err := s.rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return crawl.Result{}, false, nil
	}
	if err != nil {
		return crawl.Result{}, false, fmt.Errorf("shared source: %w", err)
	}
	var res crawl.Result
	if err := json.Unmarshal(b, &res); err != nil {
		return crawl.Result{}, false, fmt.Errorf("shared source %s: %w", key, err)
	}
	return res, true, nil
}
