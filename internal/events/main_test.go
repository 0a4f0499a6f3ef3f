package events_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/devstack"
	"github.com/trawlerhq/trawler/internal/events"
)

// One Redis and one Kafka for the package's tests; each test starts from an empty Redis.
var (
	mr      *miniredis.Miniredis
	rdb     redis.UniversalClient
	brokers []string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "events-test")
	if err != nil {
		panic(err)
	}
	var stopRedis, stopKafka func() error
	mr, stopRedis, err = devstack.StartRedis(dir, time.Minute)
	if err != nil {
		panic(err)
	}
	brokers, stopKafka, err = devstack.StartKafka(dir)
	if err != nil {
		panic(err)
	}
	rdb = redis.NewClient(&redis.Options{Addr: mr.Addr()})
	code := m.Run()
	rdb.Close()
	_ = stopKafka()
	_ = stopRedis()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fresh empties Redis for a test.
func fresh(t *testing.T) {
	t.Helper()
	mr.FlushAll()
}

// runDeliverer runs d until the test ends.
func runDeliverer(t *testing.T, d *events.Deliverer) {
	t.Helper()
	d.Redis = rdb
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// emit appends an event or fails the test.
func emit(t *testing.T, e events.Event) events.Event {
	t.Helper()
	got, err := events.Emit(context.Background(), rdb, e)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// eventually polls cond until it holds, failing the test after a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
