package polite

import (
	"context"
	"encoding/json"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/fetch"
)

// Robots is the fleet's copies of the robots.txt files its workers read, in Redis: each
// host's file is read by one worker per robots.txt lifetime and shared by all. It
// implements fetch.RobotsStore.
type Robots struct{ rdb redis.UniversalClient }

// NewRobots returns the robots.txt copies kept in rdb.
func NewRobots(rdb redis.UniversalClient) *Robots { return &Robots{rdb: rdb} }

var _ fetch.RobotsStore = (*Robots)(nil)

func robotsKeys(host string) (file, claim string) {
	base := robotsKey + "{" + tag(host) + "}"
	return base, base + ":claim"
}

// Load implements fetch.RobotsStore. A Redis that cannot be reached, or a copy that
// does not decode, is as if none were stored: the worker reads robots.txt itself.
func (r *Robots) Load(ctx context.Context, host string) (fetch.RobotsFile, bool) {
	key, _ := robotsKeys(host)
	raw, err := r.rdb.Get(ctx, key).Bytes()
	var f fetch.RobotsFile
	if err != nil || json.Unmarshal(raw, &f) != nil || !time.Now().Before(f.Expires) {
		return fetch.RobotsFile{}, false
	}
	return f, true
}

// Claim implements fetch.RobotsStore: the first worker to ask reads the file; a claim
// lapses after 15 s, so a worker that died reading it holds nobody back for long.
func (r *Robots) Claim(ctx context.Context, host string) bool {
	_, claim := robotsKeys(host)
	ok, err := r.rdb.SetNX(ctx, claim, 1, 15*time.Second).Result()
	return ok || err != nil
}

// Store implements fetch.RobotsStore.
func (r *Robots) Store(ctx context.Context, host string, f fetch.RobotsFile) {
	key, claim := robotsKeys(host)
	ttl := time.Until(f.Expires)
	raw, err := json.Marshal(f)
	if err != nil || ttl <= 0 {
		return
	}
	r.rdb.Set(ctx, key, raw, ttl)
	r.rdb.Del(ctx, claim)
}
