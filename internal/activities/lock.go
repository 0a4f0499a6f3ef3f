package activities

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisLock is a lock in Redis that only its holder releases. Its key holds a random
// token: a holder that outlived the lock's expiry (a slow fetch, a paused process) and
// whose key another worker has taken since must not delete that worker's lock, or a
// third one would take it too and the work would run twice.
type redisLock struct {
	rdb   redis.UniversalClient
	key   string
	token string
}

// takeLock sets key to a fresh token for ttl unless it is already set; it returns nil
// (and no error) when another holder has it.
func takeLock(ctx context.Context, rdb redis.UniversalClient, key string, ttl time.Duration) (*redisLock, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("lock %s: %w", key, err)
	}
	l := &redisLock{rdb: rdb, key: key, token: hex.EncodeToString(b)}
	got, err := rdb.SetNX(ctx, key, l.token, ttl).Result()
	if err != nil || !got {
		return nil, err
	}
	return l, nil
}

// unlock deletes the key only while it still holds this lock's token (compare and
// delete, atomic in Redis).
var unlock = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// release gives the lock up; held is false when it had expired and perhaps passed to
// another holder, whose lock stays.
func (l *redisLock) release(ctx context.Context) (held bool, err error) {
	n, err := unlock.Run(ctx, l.rdb, []string{l.key}, l.token).Int()
	if err != nil {
		return false, fmt.Errorf("release lock %s: %w", l.key, err)
	}
	return n == 1, nil
}
