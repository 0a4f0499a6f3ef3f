package jsonl

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/itemjson"
)

func items(run string, keys ...string) []crawl.Item {
	out := make([]crawl.Item, len(keys))
	for i, k := range keys {
		out[i] = crawl.Item{Biz: "site.task", Key: k, RunID: run, Data: map[string]any{"k": k}}
	}
	return out
}

// write stores the items of keys for run, as a batch of it does.
func write(t *testing.T, s *Sink, run string, keys ...string) {
	t.Helper()
	if err := s.Write(context.Background(), items(run, keys...)); err != nil {
		t.Fatal(err)
	}
}

// wantIndexed fails unless the index of the sink's file holds just the runs want.
func wantIndexed(t *testing.T, s *Sink, want ...string) {
	t.Helper()
	f := s.file("site.task.jsonl")
	got := slices.Sorted(maps.Keys(f.runs))
	if !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("the index holds runs %v; want %v", got, want)
	}
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// wantStored checks that the site.task file holds n lines (which, says which) and that
// runID has k records in it.
func wantStored(t *testing.T, s *Sink, n int, which, runID string, k int) {
	t.Helper()
	if got := lines(t, s.Path("site.task")); len(got) != n {
		t.Fatalf("%d lines, want %d (%s):\n%s", len(got), n, which, strings.Join(got, "\n"))
	}
	if got, _ := s.Count(context.Background(), runID); got != k {
		t.Fatalf("Count(%s) = %d, want %d", runID, got, k)
	}
}

func TestRetriedBatchIsStoredOnce(t *testing.T) {
	s, _ := Open(t.TempDir())
	for i := 0; i < 3; i++ { // the same batch, retried
		write(t, s, "r1", "a", "b", "b")
	}
	write(t, s, "r2", "a") // another run keeps its own copy
	wantStored(t, s, 3, "a, b of r1 and a of r2", "r1", 2)
}

func TestWritersInSeveralProcessesShareOneFile(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	// Two sinks on one directory behave like two worker processes: separate memory,
	// one file, coordinated by flock.
	a, _ := Open(dir)
	b, _ := Open(dir)
	var wg sync.WaitGroup
	for _, s := range []*Sink{a, b} {
		wg.Add(1)
		go func(s *Sink) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				keys := []string{string(rune('a' + i%26)), string(rune('A' + i%26))}
				if err := s.Write(ctx, items("r", keys...)); err != nil {
					t.Error(err)
				}
			}
		}(s)
	}
	wg.Wait()
	if got := len(lines(t, a.Path("site.task"))); got != 52 {
		t.Fatalf("%d lines, want 52 distinct keys", got)
	}
}

func TestTornLineFromAKilledWriterIsRepaired(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, _ := Open(dir)
	write(t, s, "r", "a")
	f, _ := os.OpenFile(s.Path("site.task"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":"1","biz":"site.task","key":"b","run_`) // the writer died here
	f.Close()
	if n, err := s.Count(ctx, "r"); err != nil || n != 1 {
		t.Fatalf("Count with a torn tail = %d, %v; want 1 and no error", n, err)
	}
	fresh, _ := Open(dir)
	write(t, fresh, "r", "b", "a")
	got := lines(t, s.Path("site.task"))
	if len(got) != 2 || !strings.Contains(got[1], `"key":"b"`) {
		t.Fatalf("after repair: %q", got)
	}
}

func TestFailuresAreLoggedOncePerInput(t *testing.T) {
	s, _ := Open(t.TempDir())
	f := []crawl.Failure{{Step: "story", Input: crawl.Input{URL: "http://x/1"}, Attempts: 4, Cause: "HTTP 500"}}
	for i := 0; i < 2; i++ {
		if err := s.WriteFailures(context.Background(), "r", f); err != nil {
			t.Fatal(err)
		}
	}
	fresh, _ := Open(s.Dir()) // a restarted worker re-reads the log
	if err := fresh.WriteFailures(context.Background(), "r", f); err != nil {
		t.Fatal(err)
	}
	got := lines(t, s.Dir()+"/"+FailuresFile)
	if len(got) != 1 || !strings.Contains(got[0], `"cause":"HTTP 500"`) {
		t.Fatalf("failure log %q", got)
	}
}

// Keys come from site content: a default-tenant key imitating another tenant's record
// (its "@tenant:" form, 0x00) is a line of its own; each tenant's lines stay as written.
func TestHostileKeysKeepEveryTenantsRecord(t *testing.T) {
	ctx := context.Background()
	s, _ := Open(t.TempDir())
	keys := []string{"k1", "@acme:k1", "@acme:k1\x00", "@:k1", "@@acme:k1", "@acme", "@", ":k1", "k1\x00@acme:k1", "@default:k1"}
	for _, tenant := range []string{"acme", crawl.DefaultTenant} {
		batch := items("run-"+tenant, keys...)
		for i := range batch {
			batch[i].Tenant = tenant
		}
		if err := s.Write(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	found := map[string]bool{}
	err := s.Scan(func(it crawl.Item) error {
		if it.RunID != "run-"+it.Tenant || it.Data["k"] != it.Key || found[it.Tenant+"/"+it.Key] {
			t.Errorf("line of tenant %q key %q run %q data %v", it.Tenant, it.Key, it.RunID, it.Data)
		}
		found[it.Tenant+"/"+it.Key] = true
		return nil
	})
	if err != nil || len(found) != 2*len(keys) {
		t.Errorf("%d records (%v) for %d keys of two tenants, want %d", len(found), err, len(keys), 2*len(keys))
	}
}

// BenchmarkWrite measures a batch's items going to the sink: 50 story-like items a
// write, allocations per item shown with -benchmem (divide by 50).
func BenchmarkWrite(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	items := make([]crawl.Item, 50)
	for i := range items {
		items[i] = crawl.Item{Biz: "demo.story", Key: "demo:story:" + strconv.Itoa(i), URL: "http://127.0.0.1/item/" + strconv.Itoa(i),
			Data: map[string]any{"id": i, "title": "A story title of some length", "author": "someone", "score": 42, "comments": 7,
				"text": "Some text of the story, a sentence or two long, as a story page has."}}
	}
	b.ReportAllocs()
	for n := 0; b.Loop(); n++ {
		for i := range items {
			items[i].RunID = "run-" + strconv.Itoa(n)
		}
		if err := s.Write(context.Background(), items); err != nil {
			b.Fatal(err)
		}
	}
}

// The sink's lines are what json.Marshal makes of each item, byte for byte: readers
// and older files see no difference.
func TestItemLinesAreJSONMarshal(t *testing.T) {
	ts := time.Date(2026, 11, 27, 9, 45, 1, 123456789, time.FixedZone("x", 3600))
	cases := []crawl.Item{
		{ID: 7345981234, Biz: "demo.story", Key: "demo:story:1", URL: "http://h/item/1", TS: ts, Hash: "abc", Flag: 2, Chain: "demo", RunID: "r1", Tenant: "acme",
			Data: map[string]any{"title": "<b>Tom & Jerry</b>", "score": 42, "ratio": 0.5, "ok": true, "none": nil,
				"tags": []any{"a", 1.5}, "nested": map[string]any{"z": 1, "a": "\u2028"}, "clé": "é", "with space": 1, "_id-2": "x"}},
		{Key: "no-data"},
		{Key: "empty-data", Data: map[string]any{}},
		{ID: -1, Biz: `q"<&>`, Key: "ünï\u2028\xff", Flag: -3, TS: time.Unix(0, 0).UTC()},
	}
	// The first case sets every field, so a field added to crawl.Item fails here until
	// the encoder writes it.
	v := reflect.ValueOf(cases[0])
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the first case leaves crawl.Item.%s unset", v.Type().Field(i).Name)
		}
	}
	enc := itemEncoder{itemjson.Get()}
	defer enc.Release()
	// A time json.Marshal refuses is refused too.
	bad := crawl.Item{Key: "k", TS: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := json.Marshal(bad); err == nil {
		t.Fatal("json.Marshal took the year 10000")
	}
	if line, err := enc.encode(bad); err == nil {
		t.Errorf("encode took the year 10000: %s", line)
	}
	for _, it := range cases {
		want, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		got, err := enc.encode(it)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("item %s:\n got %s\nwant %s", it.Key, got, want)
		}
	}
}

// One write holding items of two tasks, interleaved, puts each in its task's file in
// the order written; an item already in the file, or twice in the write, is kept once.
func TestMixedWriteGoesToEachBizFileOnce(t *testing.T) {
	ctx := context.Background()
	s, _ := Open(t.TempDir())
	write(t, s, "r1", "b")
	mixed := append(items("r1", "a", "b", "c", "a"), items("r1", "x", "y")...)
	for i := range mixed[4:] {
		mixed[4+i].Biz = "site.other"
	}
	mixed = []crawl.Item{mixed[0], mixed[4], mixed[1], mixed[2], mixed[5], mixed[3]}
	if err := s.Write(ctx, mixed); err != nil {
		t.Fatal(err)
	}
	keys := func(biz string) []string {
		var out []string
		for _, l := range lines(t, s.Path(biz)) {
			var it crawl.Item
			if err := json.Unmarshal([]byte(l), &it); err != nil {
				t.Fatalf("%s: %v in %q", biz, err, l)
			}
			out = append(out, it.Key)
		}
		return out
	}
	if got := strings.Join(keys("site.task"), ","); got != "b,a,c" {
		t.Errorf("site.task holds %s, want b,a,c", got)
	}
	if got := strings.Join(keys("site.other"), ","); got != "x,y" {
		t.Errorf("site.other holds %s, want x,y", got)
	}
}

// TestFailedWriteIsStoredOnRetry: a write the disk refuses (here a file that is
// /dev/full) fails, and the batch's retry, once the disk has room, stores every item:
// a failed write must not leave its records counted as in the file.
func TestFailedWriteIsStoredOnRetry(t *testing.T) {
	ctx := context.Background()
	s, _ := Open(t.TempDir())
	path := s.Path("site.task")
	if err := os.Symlink("/dev/full", path); err != nil {
		t.Skip("no /dev/full to fill the disk with:", err)
	}
	err := s.Write(ctx, items("r1", "a", "b"))
	if err == nil || !strings.Contains(err.Error(), "jsonl sink: write "+path) {
		t.Fatalf("a write to a full disk returned %v, want the write's error naming %s", err, path)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	write(t, s, "r1", "a", "b")
	if n, _ := s.Count(ctx, "r1"); n != 2 {
		t.Fatalf("the retry stored %d of 2 items", n)
	}
}

// A long-lived worker keeps the index of the runs it writes now, not of every run it
// ever wrote; a run written to again after its index was dropped still stores each
// key once.
func TestIdleRunsLeaveTheIndexAndComeBackWhole(t *testing.T) {
	defer func(d time.Duration) { runIdle = d }(runIdle)
	runIdle = 50 * time.Millisecond
	s, _ := Open(t.TempDir())
	write(t, s, "old", "a", "b")
	time.Sleep(2 * runIdle)
	write(t, s, "new", "a")
	wantIndexed(t, s, "new") // only the run written lately
	// The old run's batch, retried long after, and one more key of it.
	write(t, s, "old", "a", "b", "c")
	wantStored(t, s, 4, "a, b, c of the old run, a of the new", "old", 3)
}

// A worker that starts beside a file of earlier runs indexes only the runs it writes,
// and still stores each key of an earlier run once when one of its batches is retried.
func TestAWorkerStartingBesideAFileIndexesOnlyItsRuns(t *testing.T) {
	dir := t.TempDir()
	before, _ := Open(dir)
	for _, run := range []string{"r1", "r2", "r3"} {
		write(t, before, run, "a", "b")
	}
	s, _ := Open(dir) // the worker restarted
	write(t, s, "r4", "a")
	wantIndexed(t, s, "r4")
	write(t, s, "r2", "a", "b", "c") // r2's batch, retried
	wantStored(t, s, 8, "a and b of r1, r2, r3, c of r2, a of r4", "r2", 3)
}
