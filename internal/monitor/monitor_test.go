package monitor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// commandCounter counts the commands a client sends, those of pipelines one by one.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// countedRecorder is a Recorder on an embedded Redis whose commands count counts.
func countedRecorder(t *testing.T) (*miniredis.Miniredis, *Recorder, *commandCounter) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	count := &commandCounter{}
	rdb.AddHook(count)
	return m, NewRecorder(rdb), count
}

// A batch's rate and learned cost take two commands once the worker has listed the task
// and set the minute's expiry, and the sums stay exact: 20 batches of 50 pages.
func TestBatchBookkeepingCostsTwoCommands(t *testing.T) {
	ctx := context.Background()
	m, r, count := countedRecorder(t)
	minute := time.Date(2026, 11, 27, 9, 30, 0, 0, time.UTC)
	r.now = func() time.Time { return minute }
	batch := func() {
		t.Helper()
		if err := r.Pages(ctx, "acme", "news", 50); err != nil {
			t.Fatal(err)
		}
		if err := r.TaskCost(ctx, "demo.story", 50, 500*time.Millisecond, 100*time.Millisecond, 50*2048); err != nil {
			t.Fatal(err)
		}
	}
	batch()
	before, scripts := count.n.Load(), m.CommandCount()
	for range 19 {
		batch()
	}
	if n := count.n.Load() - before; n != 19*2 {
		t.Errorf("19 batches sent %d commands; want 2 each (the rate's INCRBY, the cost's script)", n)
	}
	if n := m.CommandCount() - scripts; n != 19*4 {
		t.Errorf("the embedded Redis ran %d commands for 19 batches; want 4 each (and the script's HMGET and HSET)", n)
	}
	if ttl := m.TTL(rateKey("acme", "news", minute.Unix()/60)); ttl != time.Hour {
		t.Errorf("the minute's rate counter expires in %v, want an hour", ttl)
	}
	checkTwentyBatches(t, r, minute)
}

// A worker's batches that end while others run send nothing (but the first, and one a
// second); the one that ends alone sends what all of them recorded, in the commands of
// one batch, and the sums stay exact.
func TestTallySendsWhenTheLastBatchEnds(t *testing.T) {
	ctx := context.Background()
	_, r, count := countedRecorder(t)
	minute := time.Date(2026, 11, 27, 9, 30, 0, 0, time.UTC)
	r.now = func() time.Time { return minute }
	tally := NewTally(r)
	batch := func(alone bool) {
		t.Helper()
		tally.Pages("acme", "news", 50)
		tally.Cost("demo.story", 50, 500*time.Millisecond, 100*time.Millisecond, 50*2048)
		if err := tally.Send(ctx, alone); err != nil {
			t.Fatal(err)
		}
	}
	batch(false) // the first sends, and lists the task and sets the minute's expiry
	before := count.n.Load()
	for i := range 18 {
		batch(false)
		if sent := count.n.Load() - before; sent != 0 {
			t.Fatalf("batch %d of 20 ended while others ran and sent %d commands; want none", i+2, sent)
		}
	}
	batch(true)
	if sent := count.n.Load() - before; sent != 2 {
		t.Errorf("the last batch sent %d commands for 19; want 2 (the rate's INCRBY, the cost's script)", sent)
	}
	checkTwentyBatches(t, r, minute)
}

// checkTwentyBatches checks what r holds after 20 batches of 50 pages in minute, each
// 500 ms, 100 ms of CPU and 100 KiB: the minute's rate and the task's learned needs.
func checkTwentyBatches(t *testing.T, r *Recorder, minute time.Time) {
	t.Helper()
	ctx := context.Background()
	r.now = func() time.Time { return minute.Add(time.Minute) }
	if n, err := r.PerMinute(ctx, "acme", "news"); err != nil || n != 20*50 {
		t.Errorf("pages in the last minute: %d (%v); want 1000", n, err)
	}
	needs, err := r.Needs(ctx)
	if err != nil || len(needs) != 1 {
		t.Fatalf("needs %+v (%v); want demo.story's", needs, err)
	}
	if n := needs[0]; n.Task != "demo.story" || n.MSPerPage != 10 || n.KBPerPage != 2 || n.CPUMSPage != 2 {
		t.Errorf("needs %+v; want 10 ms, 2 KB and 2 ms of CPU a page", n)
	}
}
