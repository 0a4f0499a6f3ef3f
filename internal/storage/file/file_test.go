package file_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/storage"
	"github.com/trawlerhq/trawler/internal/storage/file"
)

var storyFields = []crawl.Field{
	{Name: "title", Type: crawl.String}, {Name: "points", Type: crawl.Int}, {Name: "ratio", Type: crawl.Float},
	{Name: "dead", Type: crawl.Bool}, {Name: "posted", Type: crawl.Time}, {Name: "tags", Type: crawl.List},
	{Name: "by", Type: crawl.Object},
}

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 123456000, time.UTC)

func stories(run string, n int) []crawl.Item {
	out := make([]crawl.Item, n)
	for i := range out {
		data := map[string]any{"title": fmt.Sprintf("Story, \"%d\"", i), "points": float64(i * 10), "ratio": 0.5 + float64(i),
			"dead": i%2 == 1, "posted": "2026-10-31T08:00:00Z", "tags": []any{"a", "b"}, "by": map[string]any{"name": "ann"}}
		if i == 1 {
			delete(data, "ratio") // a missing field is null
		}
		out[i] = crawl.Item{ID: int64(1000 + i), Biz: "demo.story", Key: fmt.Sprintf("demo:story:%d", i), URL: fmt.Sprintf("http://x/%d", i),
			TS: t0.Add(time.Duration(i) * time.Second), Hash: "h", Chain: "demo", RunID: run, Tenant: "t", Data: data}
	}
	return out
}

func each(items []crawl.Item) file.Each {
	return func(ctx context.Context, fn func(crawl.Item) error) error {
		for _, it := range items {
			if err := fn(it); err != nil {
				return err
			}
		}
		return nil
	}
}

func readAll(t *testing.T, path string) []crawl.Item {
	t.Helper()
	var out []crawl.Item
	if err := file.ReadFile(path, func(it crawl.Item) error { out = append(out, it); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExportCSVColumnsAndValues(t *testing.T) {
	var buf bytes.Buffer
	res, err := file.Export(context.Background(), &buf, each(stories("r1", 3)), file.ExportOptions{Format: file.CSV, Fields: storyFields})
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 3 || res.Bytes != int64(buf.Len()) {
		t.Fatalf("result %+v, %d bytes", res, buf.Len())
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := "id,biz,key,url,ts,hash,chain,run_id,tenant,data.title,data.points,data.ratio,data.dead,data.posted,data.tags,data.by"
	if got := strings.Join(rows[0], ","); got != want {
		t.Fatalf("header %s\nwant   %s", got, want)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows", len(rows))
	}
	r1 := strings.Join(rows[2], "|")
	if r1 != `1001|demo.story|demo:story:1|http://x/1|2026-11-01T10:00:01.123456Z|h|demo|r1|t|Story, "1"|10||true|2026-10-31T08:00:00Z|["a","b"]|{"name":"ann"}` {
		t.Errorf("row 1: %s", r1)
	}
}

func TestExportParquetTypes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := file.Export(context.Background(), f, each(stories("r1", 25)), file.ExportOptions{Format: file.Parquet, Fields: storyFields, Every: 10})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, _ := os.Stat(path)
	if res.Records != 25 || res.Bytes != st.Size() {
		t.Fatalf("result %+v, file %d bytes", res, st.Size())
	}
	fh, _ := os.Open(path)
	defer fh.Close()
	pf, err := parquet.OpenFile(fh, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if pf.NumRows() != 25 {
		t.Fatalf("%d rows", pf.NumRows())
	}
	var got []string
	for _, fl := range pf.Schema().Fields() {
		lt := ""
		if l := fl.Type().LogicalType(); l != nil {
			lt = "/" + l.String()
		}
		opt := ""
		if fl.Optional() {
			opt = "?"
		}
		got = append(got, fl.Name()+":"+fl.Type().Kind().String()+lt+opt)
	}
	want := "id:INT64/INT(64,true), biz:BYTE_ARRAY/STRING, key:BYTE_ARRAY/STRING, url:BYTE_ARRAY/STRING, ts:INT64/TIMESTAMP(isAdjustedToUTC=true,unit=MICROS), hash:BYTE_ARRAY/STRING, chain:BYTE_ARRAY/STRING, run_id:BYTE_ARRAY/STRING, tenant:BYTE_ARRAY/STRING, " +
		"data.title:BYTE_ARRAY/STRING?, data.points:INT64/INT(64,true)?, data.ratio:DOUBLE?, data.dead:BOOLEAN?, data.posted:INT64/TIMESTAMP(isAdjustedToUTC=true,unit=MICROS)?, data.tags:BYTE_ARRAY/STRING?, data.by:BYTE_ARRAY/STRING?"
	if strings.Join(got, ", ") != want {
		t.Errorf("schema\n%s\nwant\n%s", strings.Join(got, ", "), want)
	}
	items := readAll(t, path)
	if len(items) != 25 {
		t.Fatalf("read back %d", len(items))
	}
	it := items[1]
	if it.ID != 1001 || it.Key != "demo:story:1" || !it.TS.Equal(t0.Add(time.Second)) || it.RunID != "r1" || it.Tenant != "t" ||
		it.Data["title"] != `Story, "1"` || it.Data["points"] != int64(10) || it.Data["dead"] != true || it.Data["ratio"] != nil ||
		it.Data["tags"] != `["a","b"]` || it.Data["by"] != `{"name":"ann"}` || !it.Data["posted"].(time.Time).Equal(time.Date(2026, 10, 31, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("record 1: %+v", it)
	}
	if items[2].Data["ratio"] != 2.5 {
		t.Errorf("record 2 ratio %v", items[2].Data["ratio"])
	}
}

func TestExportInfersColumnsAndRefusesMismatch(t *testing.T) {
	items := stories("r1", 3)
	var buf bytes.Buffer
	if _, err := file.Export(context.Background(), &buf, each(items), file.ExportOptions{Format: file.CSV}); err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(buf.String(), "\n")
	if head != "id,biz,key,url,ts,hash,chain,run_id,tenant,data.by,data.dead,data.points,data.posted,data.ratio,data.tags,data.title" {
		t.Errorf("inferred header %s", head)
	}
	// the task declares points an int; a record with text fails Parquet with the column named
	more := append(stories("r1", 2), stories("r1", 1)...)
	more[2].Data["points"] = "many"
	_, err := file.Export(context.Background(), &bytes.Buffer{}, each(more), file.ExportOptions{Format: file.Parquet, Fields: []crawl.Field{{Name: "points", Type: crawl.Int}}})
	if err == nil || !strings.Contains(err.Error(), `column data.points is int`) || !strings.Contains(err.Error(), `"many"`) {
		t.Errorf("mismatch error: %v", err)
	}
}

// A field only a late record holds still gets a column (the columns come from every
// record, not the first ones), and a field that turns up after the columns were chosen
// stops the export with its name instead of going missing.
func TestExportNeverDropsAField(t *testing.T) {
	items := stories("r1", 1500)
	items[1400].Data["sku"] = "A-1400"
	for _, f := range []file.Format{file.CSV, file.Parquet} {
		var buf bytes.Buffer
		if _, err := file.Export(context.Background(), &buf, each(items), file.ExportOptions{Format: f, Fields: storyFields}); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "out."+f.Ext())
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		got := readAll(t, path)
		if len(got) != 1500 || got[1400].Data["sku"] != "A-1400" {
			t.Errorf("%s: %d records, record 1400 sku %v; want 1500 and A-1400", f, len(got), got[1400].Data["sku"])
		}
	}

	passes := 0
	growing := func(ctx context.Context, fn func(crawl.Item) error) error {
		passes++
		it := stories("r1", 1)[0]
		if passes > 1 {
			it.Data["price"] = 9.5 // stored between the two passes
		}
		return fn(it)
	}
	_, err := file.Export(context.Background(), &bytes.Buffer{}, growing, file.ExportOptions{Format: file.CSV})
	want := `record demo.story demo:story:0 has field "price", which no record had when the columns were chosen (it was stored during the export); export again, or as jsonl`
	if err == nil || err.Error() != want {
		t.Errorf("late field: %v\nwant %s", err, want)
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func partials(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if strings.HasSuffix(p, file.PartialExt) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestSinkRotatesBySizeAndTime(t *testing.T) {
	for _, f := range file.Formats {
		t.Run(string(f), func(t *testing.T) {
			dir := t.TempDir()
			clk := &clock{t: time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC)}
			specs := func(biz string) (crawl.TaskSpec, bool) {
				return crawl.TaskSpec{Name: biz, Output: storyFields}, biz == "demo.story"
			}
			s, err := file.Open(file.Options{Dir: dir, Format: f, RotateSize: 1500, RotateEvery: time.Hour, Now: clk.now, Specs: specs})
			if err != nil {
				t.Fatal(err)
			}
			var _ storage.Sink = s
			ctx := context.Background()
			all := stories("r1", 40)
			for i := 0; i < 40; i += 4 { // batches of 4: the size limit rotates every few batches
				if err := s.Write(ctx, all[i:i+4]); err != nil {
					t.Fatal(err)
				}
				if f != file.Parquet && len(partials(t, dir)) != 1 {
					t.Fatalf("partial files: %v", partials(t, dir))
				}
			}
			if err := s.Write(ctx, all[36:]); err != nil { // a retried batch: written once
				t.Fatal(err)
			}
			bySize, _ := s.Files("demo.story")
			if len(bySize) < 2 {
				t.Fatalf("no size rotation: %v", bySize)
			}
			// time: an hour later the open file is finished before the next item
			clk.t = clk.t.Add(time.Hour)
			if err := s.Write(ctx, stories("r2", 1)); err != nil {
				t.Fatal(err)
			}
			afterTime, _ := s.Files("demo.story")
			if len(afterTime) != len(bySize)+1 {
				t.Fatalf("no time rotation: %v then %v", bySize, afterTime)
			}
			if err := s.Write(ctx, []crawl.Item{{Biz: "other.task", Key: "k", RunID: "r2", TS: clk.t, Data: map[string]any{"n": 1.0}}}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if p := partials(t, dir); len(p) != 0 {
				t.Fatalf("partial files after Close: %v", p)
			}
			files, _ := s.Files("demo.story")
			if len(files) != len(afterTime)+1 {
				t.Fatalf("files after close: %v", files)
			}
			last := filepath.Base(files[len(files)-1])
			if last != "20261102-103000-1."+f.Ext() {
				t.Errorf("last file %s", last)
			}
			if filepath.Base(files[0]) != "20261102-093000-1."+f.Ext() || filepath.Base(files[1]) != "20261102-093000-2."+f.Ext() {
				t.Errorf("file names %v", files)
			}
			// every record once in order across the files, each file complete
			var keys []string
			for _, p := range files[:len(files)-1] {
				for _, it := range readAll(t, p) {
					keys = append(keys, it.Key)
				}
			}
			if len(keys) != 40 || keys[0] != "demo:story:0" || keys[39] != "demo:story:39" {
				t.Errorf("%d records: %v", len(keys), keys)
			}
			for _, run := range []struct {
				id   string
				want int
			}{{"r1", 40}, {"r2", 2}} {
				if n, err := s.Count(ctx, run.id); err != nil || n != run.want {
					t.Errorf("Count(%s) = %d, %v; want %d", run.id, n, err, run.want)
				}
			}
			if f == file.CSV {
				b, _ := os.ReadFile(files[0])
				if !strings.HasPrefix(string(b), "id,biz,key,url,ts,hash,chain,run_id,tenant,data.title,data.points") {
					t.Errorf("csv head %.100s", b)
				}
			}
		})
	}
}

func TestSinkSettingsErrors(t *testing.T) {
	if _, err := file.Open(file.Options{}); err == nil || !strings.Contains(err.Error(), "--file-dir") {
		t.Errorf("no dir: %v", err)
	}
	if _, err := file.Open(file.Options{Dir: t.TempDir(), Format: "xlsx"}); err == nil || !strings.Contains(err.Error(), "--file-format") {
		t.Errorf("bad format: %v", err)
	}
}

// A field that first turns up in a later batch is not dropped from CSV and Parquet
// files: the sink starts the next file with the column added, so every field of every
// item is in some file, under a header that fits all of that file's rows.
func TestSinkWidensColumnsForANewField(t *testing.T) {
	for _, f := range []file.Format{file.CSV, file.Parquet} {
		t.Run(string(f), func(t *testing.T) {
			dir := t.TempDir()
			clk := &clock{t: time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC)}
			s, err := file.Open(file.Options{Dir: dir, Format: f, Now: clk.now})
			if err != nil {
				t.Fatal(err)
			}
			item := func(n int, data map[string]any) crawl.Item {
				return crawl.Item{ID: int64(n), Biz: "shop.product", Key: fmt.Sprintf("shop:product:%d", n), RunID: "r1", TS: clk.t, Data: data}
			}
			batch1 := []crawl.Item{item(1, map[string]any{"a": "a1"}), item(2, map[string]any{"a": "a2"})}
			batch2 := []crawl.Item{item(3, map[string]any{"a": "a3", "b": "b3"}), item(4, map[string]any{"a": "a4"})}
			ctx := context.Background()
			for _, b := range [][]crawl.Item{batch1, batch2} {
				if err := s.Write(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			files, err := s.Files("shop.product")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			got := map[string]map[string]any{}
			for _, p := range files {
				names = append(names, filepath.Base(p))
				for _, it := range readAll(t, p) {
					got[it.Key] = it.Data
				}
			}
			if want := "20261102-093000-1." + f.Ext() + " 20261102-093000-2." + f.Ext(); strings.Join(names, " ") != want {
				t.Errorf("files %v, want %s", names, want)
			}
			for _, it := range append(batch1, batch2...) {
				if fmt.Sprint(got[it.Key]) != fmt.Sprint(it.Data) {
					t.Errorf("%s read back %v, want %v", it.Key, got[it.Key], it.Data)
				}
			}
			if f == file.CSV {
				b, _ := os.ReadFile(files[len(files)-1])
				if head, _, _ := strings.Cut(string(b), "\n"); head != "id,biz,key,url,ts,hash,chain,run_id,tenant,data.a,data.b" {
					t.Errorf("last file's header %s", head)
				}
			}
		})
	}
}
