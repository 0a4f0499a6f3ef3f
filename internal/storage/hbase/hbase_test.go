package hbase_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tsuna/gohbase"
	"github.com/tsuna/gohbase/filter"
	"github.com/tsuna/gohbase/hrpc"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/hbaselite"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openSink(t *testing.T, o hbaselite.Options) *hbase.Sink {
	t.Helper()
	o.DataDir = t.TempDir()
	srv, err := hbaselite.Run(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	s, err := hbase.Open(hbase.Config{ZK: srv.ZK(), Timeout: 10 * time.Second, Retries: 1, Backoff: 10 * time.Millisecond, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func item(key, run string, ts time.Time, data map[string]any) crawl.Item {
	return crawl.Item{Biz: "demo.story", Key: key, URL: "http://x/" + key, TS: ts, Hash: "h-" + run, RunID: run, Data: data}
}

func TestWriteCountAndHistory(t *testing.T) {
	ctx := context.Background()
	s := openSink(t, hbaselite.Options{})
	t1 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	first := []crawl.Item{
		item("demo:story:1", "run-1", t1, map[string]any{"title": "One", "points": 10}),
		item("demo:story:2", "run-1", t1, map[string]any{"title": "Two", "points": 20}),
	}
	for range 2 { // a retried write leaves the same cells
		if err := s.Write(ctx, first); err != nil {
			t.Fatal(err)
		}
	}
	second := []crawl.Item{item("demo:story:1", "run-2", t2, map[string]any{"title": "One", "points": 42, "flagged": true})}
	if err := s.Write(ctx, second); err != nil {
		t.Fatal(err)
	}
	for run, want := range map[string]int{"run-1": 2, "run-2": 1, "run-3": 0} {
		if n, err := s.Count(ctx, run); err != nil || n != want {
			t.Errorf("count %s = %d, %v; want %d", run, n, err, want)
		}
	}
	rec, err := s.History(ctx, "default", "demo.story", "demo:story:1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Versions) != 2 {
		t.Fatalf("%d versions, want 2: %+v", len(rec.Versions), rec.Versions)
	}
	newest, oldest := rec.Versions[0], rec.Versions[1]
	if !newest.TS.Equal(t2) || newest.RunID != "run-2" || string(newest.Fields["points"]) != "42" || strings.Join(newest.Changed, ",") != "flagged,points" {
		t.Errorf("newest = %+v", newest)
	}
	if !oldest.TS.Equal(t1) || oldest.RunID != "run-1" || string(oldest.Fields["title"]) != `"One"` || oldest.URL != "http://x/demo:story:1" || len(oldest.Changed) != 0 {
		t.Errorf("oldest = %+v", oldest)
	}
	if rec, err := s.History(ctx, "default", "demo.story", "demo:story:2", 0); err != nil || len(rec.Versions) != 1 {
		t.Errorf("story 2: %+v, %v", rec, err)
	}
	if rec, err := s.History(ctx, "default", "demo.story", "demo:story:1", 1); err != nil || len(rec.Versions) != 1 || rec.Versions[0].RunID != "run-2" {
		t.Errorf("--versions 1: %+v, %v", rec, err)
	}
	if _, err := s.History(ctx, "default", "demo.story", "demo:story:9", 0); !errors.Is(err, hbase.ErrNotFound) {
		t.Errorf("missing record: %v", err)
	}
	if bizes, err := s.Find(ctx, "default", "demo:story:1"); err != nil || len(bizes) != 1 || bizes[0] != "demo.story" {
		t.Errorf("find = %v, %v", bizes, err)
	}
}

func TestOversizedItemFailsWithTheKey(t *testing.T) {
	s := openSink(t, hbaselite.Options{MaxCellSize: 1 << 10})
	big := item("demo:story:big", "run-1", time.Now(), map[string]any{"text": strings.Repeat("x", 4<<10)})
	ok := item("demo:story:ok", "run-1", time.Now(), map[string]any{"text": "fine"})
	err := s.Write(context.Background(), []crawl.Item{ok, big})
	if err == nil || !strings.Contains(err.Error(), "1 of 2 items not stored") || !strings.Contains(err.Error(), "demo:story:big") || !strings.Contains(err.Error(), "over the limit of 1024 bytes") {
		t.Fatalf("write of an oversized item: %v", err)
	}
	if n, err := s.Count(context.Background(), "run-1"); err != nil || n != 1 {
		t.Errorf("count = %d, %v; want the 1 good item", n, err)
	}
}

func TestUnreachableClusterFailsTheBatch(t *testing.T) {
	s, err := hbase.Open(hbase.Config{ZK: "127.0.0.1:1", Timeout: 500 * time.Millisecond, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Write(context.Background(), []crawl.Item{item("k", "r", time.Now(), nil)})
	if err == nil || !strings.Contains(err.Error(), "did not answer within 500ms") {
		t.Fatalf("write to a cluster that is down: %v", err)
	}
}

// The items table has one region per salt, and writes, counts, histories and finds
// work across them.
func TestTableIsSplitBySalt(t *testing.T) {
	ctx := context.Background()
	srv, err := hbaselite.Run(hbaselite.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	s, err := hbase.Open(hbase.Config{ZK: srv.ZK(), Timeout: 10 * time.Second, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var items []crawl.Item
	salts := map[byte]bool{}
	for i := range 64 {
		key := fmt.Sprintf("demo:story:%d", i)
		salts[hbase.Salt(key)] = true
		items = append(items, item(key, "run-1", time.Now(), map[string]any{"n": i}))
	}
	if len(salts) != hbase.Salts {
		t.Fatalf("the keys cover %d salts, want all %d", len(salts), hbase.Salts)
	}
	if err := s.Write(ctx, items); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Count(ctx, "run-1"); err != nil || n != len(items) {
		t.Errorf("count = %d, %v; want %d", n, err, len(items))
	}
	for _, it := range items {
		if rec, err := s.History(ctx, it.Tenant, it.Biz, it.Key, 0); err != nil || len(rec.Versions) != 1 {
			t.Errorf("history %s: %+v, %v", it.Key, rec, err)
		}
		if bizes, err := s.Find(ctx, it.Tenant, it.Key); err != nil || len(bizes) != 1 {
			t.Errorf("find %s = %v, %v", it.Key, bizes, err)
		}
	}
	c := gohbase.NewClient(srv.ZK(), gohbase.Logger(quiet))
	defer c.Close()
	meta, err := hrpc.NewScanStr(ctx, "hbase:meta", hrpc.Filters(filter.NewPrefixFilter([]byte(hbase.Table+","))))
	if err != nil {
		t.Fatal(err)
	}
	sc := c.Scan(meta)
	defer sc.Close()
	var starts []string
	for {
		r, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, strings.SplitN(string(r.Cells[0].Row), ",", 3)[1])
	}
	want := []string{""}
	for i := 1; i < hbase.Salts; i++ {
		want = append(want, string([]byte{byte(i)}))
	}
	if !slices.Equal(starts, want) {
		t.Errorf("regions of %s start at %q, want one per salt %q", hbase.Table, starts, want)
	}
}

func TestRowKey(t *testing.T) {
	row := hbase.RowKey("acme", "demo.story", "demo:story:1")
	if row[0] != hbase.Salt("demo:story:1") || row[0] >= hbase.Salts || string(row[1:]) != "@acme\x00demo.story\x00demo:story:1" {
		t.Errorf("row key %q", row)
	}
}

// Keys come from site content: a default-tenant key imitating acme's row (its "@tenant"
// mark, 0x00 separators) is a row of its own and leaves acme's history as acme wrote it.
// Row keys cannot be forged because the biz, which comes first for the default tenant,
// is a task name ("site.task"): it never starts with "@" and holds no 0x00.
func TestHostileKeysCannotWriteIntoAnotherTenantsHistory(t *testing.T) {
	ctx := context.Background()
	s := openSink(t, hbaselite.Options{})
	ts := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	keys := []string{"k1", "@acme:k1", "@acme\x00demo.story\x00k1", "\x00@acme\x00demo.story\x00k1", "@acme:k1\x00", "@:k1",
		"@@acme:k1", "@acme", "@", ":k1", "k1\x00@acme:k1", "@default:k1"}
	for _, tenant := range []string{"acme", crawl.DefaultTenant} { // acme first: an overwrite would add to its history
		var batch []crawl.Item
		for _, key := range keys {
			it := item(key, "run-"+tenant, ts, map[string]any{"by": tenant})
			it.Tenant = tenant
			batch = append(batch, it)
		}
		if err := s.Write(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	for _, tenant := range []string{"acme", crawl.DefaultTenant} {
		for _, key := range keys {
			rec, err := s.History(ctx, tenant, "demo.story", key, 0)
			if err != nil {
				t.Fatalf("history of %s's %q: %v", tenant, key, err)
			}
			if rec.Tenant != tenant || rec.Key != key || len(rec.Versions) != 1 || rec.Versions[0].RunID != "run-"+tenant ||
				string(rec.Versions[0].Fields["by"]) != `"`+tenant+`"` {
				t.Errorf("history of %s's %q: tenant %q key %q versions %+v", tenant, key, rec.Tenant, rec.Key, rec.Versions)
			}
		}
		var scanned []string
		err := s.ScanBiz(ctx, tenant, "demo.story", true, func(it crawl.Item) error {
			if it.Tenant != tenant || it.RunID != "run-"+tenant {
				t.Errorf("scan of %s: %q of tenant %q run %q", tenant, it.Key, it.Tenant, it.RunID)
			}
			scanned = append(scanned, it.Key)
			return nil
		})
		if err != nil || len(scanned) != len(keys) {
			t.Errorf("scan of %s: %d records %q, %v; want its %d", tenant, len(scanned), scanned, err, len(keys))
		}
	}
}

// Two tenants crawling the same task store the same biz and key: each sees only its own
// runs, in history, find and scans, and the default tenant's rows keep their old keys.
func TestTenantsKeepSeparateHistories(t *testing.T) {
	ctx := context.Background()
	s := openSink(t, hbaselite.Options{})
	t1 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	write := func(tenant, run string, ts time.Time, points int) {
		t.Helper()
		it := item("demo:story:1", run, ts, map[string]any{"points": points})
		it.Tenant = tenant
		if err := s.Write(ctx, []crawl.Item{it}); err != nil {
			t.Fatal(err)
		}
	}
	write("default", "d-run-1", t1, 1)
	write("team-a", "a-run-1", t1.Add(time.Minute), 10)
	write("team-a", "a-run-2", t1.Add(2*time.Minute), 11)
	write("team-b", "b-run-1", t1.Add(3*time.Minute), 100)
	runs := func(rec *hbase.Record) string {
		var out []string
		for _, v := range rec.Versions {
			out = append(out, v.RunID)
		}
		return strings.Join(out, ",")
	}
	for tenant, want := range map[string]string{"default": "d-run-1", "": "d-run-1", "team-a": "a-run-2,a-run-1", "team-b": "b-run-1"} {
		rec, err := s.History(ctx, tenant, "demo.story", "demo:story:1", 0)
		if err != nil {
			t.Fatalf("tenant %q: %v", tenant, err)
		}
		if runs(rec) != want || rec.Tenant != cmp.Or(tenant, "default") {
			t.Errorf("tenant %q: history of %s runs %s, want %s", tenant, rec.Tenant, runs(rec), want)
		}
		if bizes, err := s.Find(ctx, tenant, "demo:story:1"); err != nil || !slices.Equal(bizes, []string{"demo.story"}) {
			t.Errorf("tenant %q: find = %v, %v", tenant, bizes, err)
		}
		var scanned []string
		err = s.ScanBiz(ctx, tenant, "demo.story", true, func(it crawl.Item) error {
			scanned = append(scanned, it.Tenant+"/"+it.RunID)
			return nil
		})
		if err != nil || len(scanned) != strings.Count(want, ",")+1 || !strings.HasPrefix(scanned[0], cmp.Or(tenant, "default")+"/") {
			t.Errorf("tenant %q: scan = %v, %v; want the runs %s", tenant, scanned, err, want)
		}
	}
	if _, err := s.History(ctx, "team-c", "demo.story", "demo:story:1", 0); !errors.Is(err, hbase.ErrNotFound) {
		t.Errorf("a tenant that stored nothing: %v", err)
	}
	if bizes, err := s.Find(ctx, "team-c", "demo:story:1"); err != nil || len(bizes) != 0 {
		t.Errorf("find for a tenant that stored nothing = %v, %v", bizes, err)
	}
}
