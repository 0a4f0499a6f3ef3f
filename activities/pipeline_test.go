package activities

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"trawler/crawl"
	"trawler/dedup"
	"trawler/storage"
	"trawler/storage/jsonl"
)

// flaky is a real jsonl sink under another name that fails while down is set, and
// notes the keys it stored, in order.
type flaky struct {
	*jsonl.Sink
	name  string
	down  bool
	got   []string
	calls int
}

func (f *flaky) Name() string { return f.name }
func (f *flaky) Write(ctx context.Context, items []crawl.Item) error {
	f.calls++
	if f.down {
		return errors.New("connection refused")
	}
	if err := f.Sink.Write(ctx, items); err != nil {
		return err
	}
	for _, it := range items {
		f.got = append(f.got, it.Key)
	}
	return nil
}

func newFlaky(t *testing.T, name string) *flaky {
	t.Helper()
	js, err := jsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { js.Close() })
	return &flaky{Sink: js, name: name}
}

func pipeline(t *testing.T) (*Activities, crawl.Batch) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	dd, err := dedup.Open(context.Background(), rdb, dedup.Config{Expected: 1000})
	if err != nil {
		t.Fatal(err)
	}
	b := crawl.Batch{RunID: "r", Tenant: "t", Step: crawl.PlanStep{ID: "s", Task: "x.y", Dedup: crawl.DedupChanged}}
	return &Activities{Dedup: dd}, b
}

// group is finished inputs with items keyed as given, content c.
func group(c string, keys ...[]string) []outcome {
	var out []outcome
	for i, ks := range keys {
		o := outcome{Index: i, OK: true}
		for _, k := range ks {
			o.result.Items = append(o.result.Items, crawl.Item{Key: k, Hash: c + k, Data: map[string]any{"c": c}})
		}
		out = append(out, o)
	}
	return out
}

func keysOf(items []crawl.Item) []string {
	var ks []string
	for _, it := range items {
		ks = append(ks, it.Key)
	}
	return ks
}

// The judge stage: new items are kept, a key twice in one group once, unchanged ones
// dropped and counted; a judged group is not judged again.
func TestJudgeStage(t *testing.T) {
	a, b := pipeline(t)
	ctx := context.Background()
	sink := newFlaky(t, "m")
	g := group("v1", []string{"a", "b"}, []string{"b", "c"})
	if err := a.store(ctx, b, []storage.Sink{sink}, g, nil); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(keysOf(g[0].kept), keysOf(g[1].kept), g[1].Unchanged) != "[a b] [c] 1" {
		t.Fatalf("kept %v and %v (%d unchanged), want [a b], [c] and 1", keysOf(g[0].kept), keysOf(g[1].kept), g[1].Unchanged)
	}
	again := group("v1", []string{"a"}, []string{"c", "d"})
	if err := a.store(ctx, b, []storage.Sink{sink}, again, nil); err != nil {
		t.Fatal(err)
	}
	if len(again[0].kept) != 0 || again[0].Unchanged != 1 || fmt.Sprint(keysOf(again[1].kept)) != "[d]" {
		t.Fatalf("second crawl kept %v and %v; want nothing and [d]", keysOf(again[0].kept), keysOf(again[1].kept))
	}
	changed := group("v2", []string{"a"})
	if err := a.store(ctx, b, []storage.Sink{sink}, changed, nil); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sink.got) != "[a b c d a]" {
		t.Fatalf("sink got %v, want a b c, then d, then a changed", sink.got)
	}
}

// The write and record stages: a sink that fails is written again from where the
// group stopped, and the group is recorded as seen only once every sink holds it.
func TestWriteStageResumesAtTheFailedSink(t *testing.T) {
	a, b := pipeline(t)
	ctx := context.Background()
	first, second := newFlaky(t, "first"), newFlaky(t, "second")
	second.down = true
	sinks := []storage.Sink{first, second}
	g := group("v1", []string{"a", "b"})
	err := a.store(ctx, b, sinks, g, nil)
	if dep, ok := crawl.DependencyOf(err); !ok || dep != "store second" {
		t.Fatalf("error %v, want an outage of store second", err)
	}
	// Not recorded yet: a lookup still finds the items new.
	vs, err := a.Dedup.Lookup(ctx, "t:x.y", []dedup.Entry{{Key: "a", Content: "v1a"}})
	if err != nil || vs[0].State != dedup.New {
		t.Fatalf("before the group is stored: %+v, %v; want new", vs, err)
	}
	second.down = false
	if err := a.store(ctx, b, sinks, g, nil); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(first.got, second.got, first.calls) != "[a b] [a b] 1" {
		t.Fatalf("first %v (%d writes), second %v; want each to hold a and b once", first.got, first.calls, second.got)
	}
	vs, err = a.Dedup.Lookup(ctx, "t:x.y", []dedup.Entry{{Key: "a", Content: "v1a"}, {Key: "b", Content: "v1b"}})
	if err != nil || vs[0].State != dedup.Unchanged || vs[1].State != dedup.Unchanged {
		t.Fatalf("after the group is stored: %+v, %v; want both unchanged", vs, err)
	}
}
