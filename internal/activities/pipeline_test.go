package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/dedup"
	"github.com/trawlerhq/trawler/internal/quota"
	"github.com/trawlerhq/trawler/internal/storage"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
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

// The stamp stage: every item carries the record's fields, with an id that is the same
// on every attempt of the run; an item without a key fails the input.
func TestStampStage(t *testing.T) {
	b := crawl.Batch{RunID: "r1", Chain: "c", Tenant: "t", Step: crawl.PlanStep{Task: "x.y"}}
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	items := []crawl.Item{{Key: "k1", Data: map[string]any{"a": 1}}, {Key: "k2", Data: map[string]any{"a": 1}}}
	if err := stamp(b, items, now); err != nil {
		t.Fatal(err)
	}
	again := []crawl.Item{{Key: "k1", Data: map[string]any{"a": 2}}}
	_ = stamp(b, again, now.Add(time.Hour))
	it := items[0]
	if it.Biz != "x.y" || !it.TS.Equal(now) || it.Chain != "c" || it.RunID != "r1" || it.Tenant != "t" || it.ID == 0 {
		t.Fatalf("stamped %+v", it)
	}
	if again[0].ID != it.ID || items[1].ID == it.ID {
		t.Fatalf("ids %d, %d (again %d): want one id per run and key", it.ID, items[1].ID, again[0].ID)
	}
	if it.Hash != items[1].Hash || again[0].Hash == it.Hash {
		t.Fatalf("hashes %s %s %s: want equal data equal, other data other", it.Hash, items[1].Hash, again[0].Hash)
	}
	err := stamp(b, []crawl.Item{{Data: map[string]any{}}}, now)
	if err == nil || !strings.Contains(err.Error(), "task x.y returned an item without a key") {
		t.Fatalf("keyless item: %v", err)
	}
}

// The dedup stage alone, on verdicts given to it: what each mode keeps, a key twice in
// one group once, and judged inputs counted as seen but not judged again.
func TestDedupStage(t *testing.T) {
	g := group("v", []string{"new", "same", "moved"}, []string{"new", "fresh"})
	verdicts := []dedup.Verdict{{State: dedup.New}, {State: dedup.Unchanged}, {State: dedup.Changed}, {State: dedup.New}, {State: dedup.New}}
	for _, tc := range []struct {
		mode string
		want string
	}{
		{crawl.DedupChanged, "[new moved] 1 [fresh] 1"},
		{crawl.DedupNew, "[new] 2 [fresh] 1"},
	} {
		kept, stopped := dedupStage(tc.mode, g, verdicts)
		if got := fmt.Sprint(keysOf(kept[0]), " ", stopped[0], " ", keysOf(kept[1]), " ", stopped[1]); got != tc.want {
			t.Errorf("mode %s: %s, want %s", tc.mode, got, tc.want)
		}
	}
	// Dedup off: only the repeat stops.
	kept, stopped := dedupStage(crawl.DedupOff, g, nil)
	if got := fmt.Sprint(keysOf(kept[0]), stopped[0], keysOf(kept[1]), stopped[1]); got != "[new same moved] 0 [fresh] 1" {
		t.Errorf("off: %s", got)
	}
	g[0].judged = true
	kept, _ = dedupStage(crawl.DedupOff, g, nil)
	if len(kept[0]) != 0 || fmt.Sprint(keysOf(kept[1])) != "[fresh]" {
		t.Errorf("after the first input was judged: %v %v", keysOf(kept[0]), keysOf(kept[1]))
	}
}

// The quota stage alone: an item budget of 3 over inputs of 2 items each keeps 2, then
// 1, then none, and names the keys it dropped.
func TestQuotaStage(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	defer rdb.Close()
	lease, err := quota.New(rdb, 0).For(ctx, "t", "c", "r", crawl.Quota{Items: 3}, 10)
	if err != nil {
		t.Fatal(err)
	}
	budget := &batchQuota{lease: lease}
	defer budget.release(ctx, slog.Default())
	var got []string
	for _, keys := range [][]string{{"a", "b"}, {"c", "d"}, {"e", "f"}} {
		items := group("v", keys)[0].result.Items
		allowed, dropped, err := quotaStage(ctx, budget, items)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(keysOf(allowed), dropped))
	}
	if fmt.Sprint(got) != "[[a b] [] [c] [d] [] [e f]]" {
		t.Fatalf("kept and dropped %v", got)
	}
	if allowed, dropped, _ := quotaStage(ctx, nil, []crawl.Item{{Key: "z"}}); len(allowed) != 1 || dropped != nil {
		t.Fatalf("no budget: kept %v, dropped %v", allowed, dropped)
	}
}

// The route stage: stored items fan out by `each:`, next inputs go to their step.
func TestRouteStage(t *testing.T) {
	step := crawl.PlanStep{ID: "story", Consumers: []crawl.Consumer{{Step: 2, ID: "comments", Each: "kids"}}}
	items := []crawl.Item{{Key: "s1", Data: map[string]any{"kids": []int{7, 8}}}}
	out, _ := route(step, crawl.Input{URL: "http://x/1"}, items, nil)
	var got []string
	for _, r := range out {
		got = append(got, fmt.Sprint(r.Step, ":", r.Input.Value, ":", r.Input.Parent))
	}
	if fmt.Sprint(got) != "[2:7:s1 2:8:s1]" {
		t.Fatalf("routed %v", got)
	}
}

// Dedup knows a URL-keyed item by its canonical URL: another spelling of the page (host
// case, default port, tracking parameters, query order) is unchanged, not a second
// record. An item recorded before keys were canonical, under its key as given, is still
// unchanged. A fragment tells records apart (a list's rows keyed page#1, page#2 …).
func TestDedupKeysAreCanonicalURLs(t *testing.T) {
	a, b := pipeline(t)
	ctx := context.Background()
	sink := newFlaky(t, "m")
	first := group("v1", []string{"https://Shop.test/p?id=1&utm_source=mail"})
	if err := a.store(ctx, b, []storage.Sink{sink}, first, nil); err != nil {
		t.Fatal(err)
	}
	again := group("v1", []string{"https://shop.test:443/p?id=1"})
	again[0].result.Items[0].Hash = first[0].result.Items[0].Hash
	if err := a.store(ctx, b, []storage.Sink{sink}, again, nil); err != nil {
		t.Fatal(err)
	}
	if len(again[0].kept) != 0 || again[0].Unchanged != 1 {
		t.Fatalf("the same page spelt another way: kept %v, %d unchanged; want none kept, 1 unchanged", keysOf(again[0].kept), again[0].Unchanged)
	}
	// Recorded as given by an older worker: the query unsorted.
	old := "https://shop.test/q?b=2&a=1"
	if err := a.Dedup.Record(ctx, "t:x.y", []dedup.Entry{{Key: old, Content: "v1" + old}}); err != nil {
		t.Fatal(err)
	}
	upgraded := group("v1", []string{old})
	if err := a.store(ctx, b, []storage.Sink{sink}, upgraded, nil); err != nil {
		t.Fatal(err)
	}
	if len(upgraded[0].kept) != 0 || upgraded[0].Unchanged != 1 {
		t.Fatalf("a record kept under its key as given: kept %v; want it unchanged", keysOf(upgraded[0].kept))
	}
	if fmt.Sprint(sink.got) != "[https://Shop.test/p?id=1&utm_source=mail]" {
		t.Fatalf("sink got %v, want the first spelling once", sink.got)
	}
	rows := group("v1", []string{"https://shop.test/list?utm_source=x#1", "https://shop.test/list#2", "https://Shop.test/list#3"})
	if err := a.store(ctx, b, []storage.Sink{sink}, rows, nil); err != nil {
		t.Fatal(err)
	}
	if len(rows[0].kept) != 3 {
		t.Fatalf("three rows of a list keyed by fragment: kept %v, want all three", keysOf(rows[0].kept))
	}
}
