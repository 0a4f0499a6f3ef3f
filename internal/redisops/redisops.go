// Package redisops holds the few Redis operations that must be written with a Cluster
// in mind, so every part of Trawler kept in Redis runs the same on one server, behind
// Sentinel or on a Redis Cluster: a scan that visits every master, and a script run
// over many keys in one round trip.
//
// The rule the rest of the code follows: a script, a MULTI/EXEC block or a multi-key
// command touches keys of one hash slot only (a Cluster refuses others with CROSSSLOT).
// Keys that must meet share a hash tag ("{…}"); work over many independent keys is a
// plain pipeline, which the cluster client splits by node.
package redisops

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Scan calls fn with every key matching match, on every master of a Cluster (SCAN on a
// cluster client visits one node only).
func Scan(ctx context.Context, rdb redis.UniversalClient, match string, count int64, fn func(key string) error) error {
	each := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, match, count).Iterator()
		for iter.Next(ctx) {
			if err := fn(iter.Val()); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		// ForEachMaster calls in parallel and fn may not be safe for concurrent use:
		// collect the masters, then visit them one at a time.
		var errs []error
		var masters []*redis.Client
		var mu sync.Mutex
		if err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
			mu.Lock()
			masters = append(masters, c)
			mu.Unlock()
			return nil
		}); err != nil {
			return err
		}
		for _, c := range masters {
			errs = append(errs, each(ctx, c))
		}
		return errors.Join(errs...)
	}
	return each(ctx, rdb)
}

// Call is one run of a script: its keys (of one hash slot) and arguments.
type Call struct {
	Keys []string
	Args []any
}

// EvalEach runs script once per call in one pipeline (the cluster client sends each
// call to the node of its keys) and returns the answers in order, each with its own
// error. A pipeline cannot fall back from EVALSHA to EVAL by itself: calls that a Redis
// without the script cached (restarted, flushed, a new node) answered NOSCRIPT did
// nothing, and run again with the script's own fallback.
func EvalEach(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, calls []Call) []*redis.Cmd {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = script.EvalSha(ctx, pipe, c.Keys, c.Args...)
	}
	_, _ = pipe.Exec(ctx) // each answer carries its own error
	for i, c := range calls {
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			cmds[i] = script.Run(ctx, rdb, c.Keys, c.Args...)
		}
	}
	return cmds
}
