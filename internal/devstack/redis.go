package devstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// RedisFile is where a persistent embedded Redis keeps its data between stacks.
const RedisFile = "redis.json"

// redisKey is one key of a snapshot, with the value of its type.
type redisKey struct {
	Key   string             `json:"k"`
	Type  string             `json:"t"`
	TTLms int64              `json:"ttl_ms,omitempty"`
	Str   string             `json:"s,omitempty"`
	Hash  map[string]string  `json:"h,omitempty"`
	Set   []string           `json:"set,omitempty"`
	ZSet  map[string]float64 `json:"z,omitempty"`
	List  []string           `json:"l,omitempty"`
}

// StartRedis starts the embedded Redis (miniredis) with what dir/redis.json kept from
// the last stack, and saves it there every `every` and when stopped, so dedup entries,
// recrawl plans, budgets and pools outlive a restart of `trawler dev` (a killed stack
// loses at most the last `every`). Strings, hashes, sets, sorted sets and lists are
// kept, with their expiry; miniredis has no other type Trawler uses.
func StartRedis(dir string, every time.Duration) (*miniredis.Miniredis, func() error, error) {
	m := miniredis.NewMiniRedis()
	file := filepath.Join(dir, RedisFile)
	if err := loadRedis(m, file); err != nil {
		return nil, nil, err
	}
	if err := m.Start(); err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = saveRedis(m, file) // the next tick or the stop tries again
			}
		}
	}()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			close(done)
			wg.Wait()
			err = saveRedis(m, file)
			m.Close()
		})
		return err
	}
	return m, stop, nil
}

func loadRedis(m *miniredis.Miniredis, file string) error {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var keys []redisKey
	if err := json.Unmarshal(b, &keys); err != nil {
		return fmt.Errorf("embedded Redis: %s is not a snapshot (%v); move it away to start empty", file, err)
	}
	for _, k := range keys {
		switch k.Type {
		case "string":
			err = m.Set(k.Key, k.Str)
		case "hash":
			for f, v := range k.Hash {
				m.HSet(k.Key, f, v)
			}
		case "set":
			_, err = m.SetAdd(k.Key, k.Set...)
		case "zset":
			for member, score := range k.ZSet {
				if _, err = m.ZAdd(k.Key, score, member); err != nil {
					break
				}
			}
		case "list":
			_, err = m.Push(k.Key, k.List...)
		}
		if err != nil {
			return fmt.Errorf("embedded Redis: restore %s from %s: %w", k.Key, file, err)
		}
		if k.TTLms > 0 {
			m.SetTTL(k.Key, time.Duration(k.TTLms)*time.Millisecond)
		}
	}
	return nil
}

// saveRedis writes every key to file, through a temporary file and a rename, so a
// crash mid-write leaves the previous snapshot.
func saveRedis(m *miniredis.Miniredis, file string) error {
	var keys []redisKey
	for _, k := range m.Keys() {
		rk := redisKey{Key: k, Type: m.Type(k), TTLms: m.TTL(k).Milliseconds()}
		var err error
		switch rk.Type {
		case "string":
			rk.Str, err = m.Get(k)
		case "hash":
			var fields []string
			if fields, err = m.HKeys(k); err == nil {
				rk.Hash = map[string]string{}
				for _, f := range fields {
					rk.Hash[f] = m.HGet(k, f)
				}
			}
		case "set":
			rk.Set, err = m.Members(k)
		case "zset":
			rk.ZSet, err = m.SortedSet(k)
		case "list":
			rk.List, err = m.List(k)
		default:
			continue
		}
		if err != nil {
			continue // gone or changed type since Keys: the next snapshot has it
		}
		keys = append(keys, rk)
	}
	b, err := json.Marshal(keys)
	if err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
