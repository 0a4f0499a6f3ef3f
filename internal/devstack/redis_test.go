package devstack

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/dedup"
)

// redisChildEnv makes the test binary a process that only runs a persistent embedded
// Redis on the directory it names, prints its address and waits to be killed.
const redisChildEnv = "DEVSTACK_TEST_REDIS_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(redisChildEnv); dir != "" {
		r, _, err := StartRedis(dir, time.Hour) // no compaction tick before the kill
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(r.Addr())
		select {}
	}
	os.Exit(m.Run())
}

// redisChild starts the embedded Redis on dir in a process of its own and returns a
// client of it and a function that SIGKILLs the process.
func redisChild(t *testing.T, dir string) (*redis.Client, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), redisChildEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	t.Cleanup(kill)
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("embedded Redis on %s did not start: %v", dir, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr[:len(addr)-1]})
	t.Cleanup(func() { rdb.Close() })
	return rdb, kill
}

// incrScript adds to a counter from Lua, as budgets and pools do: a write by EVALSHA.
var incrScript = redis.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)

// A SIGKILL right after a batch's dedup check was answered loses none of it: the Redis
// of the next stack finds every item unchanged, and counters written by INCRBY and by
// a Lua script count each answered write once, through two kills.
func TestRedisKeepsEveryAnsweredWriteThroughSIGKILL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	entries := make([]dedup.Entry, 200)
	for i := range entries {
		entries[i] = dedup.Entry{Key: "demo:story:" + strconv.Itoa(i), Content: "v1"}
	}
	count := func(rdb *redis.Client) map[dedup.State]int {
		t.Helper()
		d, err := dedup.Open(ctx, rdb, dedup.Config{Expected: 1000})
		if err != nil {
			t.Fatal(err)
		}
		verdicts, err := d.Check(ctx, "default", entries)
		if err != nil {
			t.Fatal(err)
		}
		n := map[dedup.State]int{}
		for _, v := range verdicts {
			n[v.State]++
		}
		return n
	}
	bump := func(rdb *redis.Client) {
		t.Helper()
		if err := rdb.IncrBy(ctx, "budget", 3).Err(); err != nil {
			t.Fatal(err)
		}
		if err := incrScript.Run(ctx, rdb, []string{"pool"}, 5).Err(); err != nil {
			t.Fatal(err)
		}
	}

	rdb, kill := redisChild(t, dir)
	if n := count(rdb); n[dedup.New] != len(entries) {
		t.Fatalf("first check: %v, want %d new", n, len(entries))
	}
	bump(rdb)
	kill()

	rdb, kill = redisChild(t, dir)
	if n := count(rdb); n[dedup.Unchanged] != len(entries) {
		t.Fatalf("after a SIGKILL: %v, want all %d unchanged", n, len(entries))
	}
	bump(rdb)
	kill()

	rdb, _ = redisChild(t, dir)
	if n := count(rdb); n[dedup.Unchanged] != len(entries) {
		t.Errorf("after a second SIGKILL: %v, want all %d unchanged", n, len(entries))
	}
	budget, _ := rdb.Get(ctx, "budget").Int()
	pool, _ := rdb.Get(ctx, "pool").Int()
	if budget != 6 || pool != 10 {
		t.Errorf("counters after two kills: budget %d, pool %d; want 6 and 10 (each answered INCRBY once)", budget, pool)
	}
}

// A kill in the middle of appending a command leaves it cut short at the end of the
// file: it was never answered, so the next stack drops it and keeps the rest.
func TestRedisDropsACommandCutShortByAKill(t *testing.T) {
	dir := t.TempDir()
	log := appendCommand(appendCommand(nil, "SET", "kept", "1"), "HSET", "h", "f", "v")
	cut := appendCommand(nil, "SET", "lost", "2")
	if err := os.WriteFile(filepath.Join(dir, RedisLog), append(log, cut[:len(cut)-4]...), 0o644); err != nil {
		t.Fatal(err)
	}
	m, stop, err := StartRedis(dir, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if got, _ := m.Get("kept"); got != "1" || m.HGet("h", "f") != "v" || m.Exists("lost") {
		t.Errorf("after the load: kept=%q h.f=%q lost exists=%v; want 1, v, false", got, m.HGet("h", "f"), m.Exists("lost"))
	}
}

// The JSON snapshot of earlier versions is read once and its data moved to redis.aof.
func TestRedisMovesAnOldSnapshotIntoItsLog(t *testing.T) {
	dir := t.TempDir()
	old := `[{"k":"s","t":"string","s":"v"},{"k":"z","t":"zset","z":{"a":1.5e15}},{"k":"l","t":"list","l":["x","y"],"ttl_ms":60000}]`
	if err := os.WriteFile(filepath.Join(dir, RedisFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	m, stop, err := StartRedis(dir, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	before := m.Dump()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, RedisFile)); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v); its data is in %s now", RedisFile, err, RedisLog)
	}
	m, stop, err = StartRedis(dir, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if after := m.Dump(); after != before || before == "" {
		t.Fatalf("from the log:\n%s\nfrom the snapshot:\n%s", after, before)
	}
	if ttl := m.TTL("l"); ttl != time.Minute {
		t.Errorf("ttl %s, want 1m kept", ttl)
	}
}
