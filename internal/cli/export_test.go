package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack"
	"github.com/trawlerhq/trawler/internal/devstack/eslite"
	"github.com/trawlerhq/trawler/internal/devstack/hbaselite"
	"github.com/trawlerhq/trawler/internal/storage/es"
	"github.com/trawlerhq/trawler/internal/storage/file"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/storage/mongo"
)

// One embedded stack for the package's export tests, started on first use.
type embeddedStores struct {
	once             sync.Once
	err              error
	dir              string
	mongo, es, hbase string
	stops            []func() error
}

var exportStack embeddedStores

func exportStores(t *testing.T) *embeddedStores {
	t.Helper()
	st := &exportStack
	st.once.Do(func() {
		st.dir, st.err = os.MkdirTemp("", "trawler-export-")
		if st.err != nil {
			return
		}
		var stop func() error
		if st.mongo, stop, st.err = devstack.StartMongo(filepath.Join(st.dir, "mongo")); st.err != nil {
			return
		}
		st.stops = append(st.stops, stop)
		if st.es, stop, st.err = eslite.Start(filepath.Join(st.dir, "es"), "127.0.0.1:0"); st.err != nil {
			return
		}
		st.stops = append(st.stops, stop)
		srv, err := hbaselite.Run(hbaselite.Options{DataDir: filepath.Join(st.dir, "hbase")})
		if st.err = err; err != nil {
			return
		}
		st.hbase = srv.ZK()
		st.stops = append(st.stops, srv.Stop)
	})
	if st.err != nil {
		t.Fatal(st.err)
	}
	return st
}

func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(exportStack.stops) - 1; i >= 0; i-- {
		_ = exportStack.stops[i]()
	}
	if exportStack.dir != "" {
		os.RemoveAll(exportStack.dir)
	}
	os.Exit(code)
}

var exportT0 = time.Date(2026, 11, 20, 7, 0, 0, 0, time.UTC)

// demoStories are demo.story items (a registered task: its schema gives the columns).
func demoStories(run string, n int, ts time.Time) []crawl.Item {
	out := make([]crawl.Item, n)
	for i := range out {
		out[i] = crawl.Item{ID: int64(7000 + i), Biz: "demo.story", Key: fmt.Sprintf("demo:story:%03d", i), URL: fmt.Sprintf("http://demo/item/%d", i),
			TS: ts, Hash: fmt.Sprintf("h%d", i), Chain: "demo", RunID: run, Tenant: "team-a",
			Data: map[string]any{"id": i, "title": fmt.Sprintf("Story %d, \"quoted\"", i), "url": "http://press/" + fmt.Sprint(i),
				"author": "ann", "score": 10 * i, "time": "2026-11-19T10:00:00Z", "comments": i % 3, "text": ""}}
	}
	return out
}

const demoStoryHeader = "id,biz,key,url,ts,hash,chain,run_id,tenant,data.id,data.title,data.url,data.author,data.score,data.time,data.comments,data.text"

type exportRun struct {
	stdout, stderr bytes.Buffer
}

func export(t *testing.T, s *Settings, f exportFlags) (*exportRun, error) {
	t.Helper()
	if f.from == "" {
		f.from = "jsonl"
	}
	if f.versions == "" {
		f.versions = "latest"
	}
	r := &exportRun{}
	err := runExport(context.Background(), s, f, &r.stdout, &r.stderr)
	return r, err
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// readParquet reads a Parquet file with parquet-go's reader: one map per row, by column.
func readParquet(t *testing.T, path string) []map[string]parquet.Value {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	pf, err := parquet.OpenFile(fh, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range pf.Schema().Columns() {
		names = append(names, strings.Join(c, "."))
	}
	r := parquet.NewReader(pf)
	defer r.Close()
	var out []map[string]parquet.Value
	rows := make([]parquet.Row, 100)
	for {
		n, err := r.ReadRows(rows)
		for _, row := range rows[:n] {
			m := map[string]parquet.Value{}
			for _, v := range row {
				m[names[v.Column()]] = v.Clone()
			}
			out = append(out, m)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if int64(len(out)) != pf.NumRows() {
		t.Fatalf("read %d rows of %d", len(out), pf.NumRows())
	}
	return out
}

func lastJSON(t *testing.T, b []byte) exportResult {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var res exportResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	return res
}

func TestExportFromJSONL(t *testing.T) {
	dir := t.TempDir()
	sink, err := jsonl.Open(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := sink.Write(ctx, append(demoStories("run-1", 30, exportT0), demoStories("run-2", 5, exportT0.Add(time.Hour))...)); err != nil {
		t.Fatal(err)
	}
	other := []crawl.Item{{ID: 1, Biz: "demo.comments", Key: "c1", TS: exportT0, RunID: "run-1", Data: map[string]any{"text": "hi"}}}
	if err := sink.Write(ctx, other); err != nil {
		t.Fatal(err)
	}
	s := &Settings{Out: sink.Dir(), JSON: true}

	// CSV of one task and one run, columns from demo.story's schema
	out := filepath.Join(dir, "exp", "stories.csv")
	r, err := export(t, s, exportFlags{biz: "demo.story", runID: "run-1", out: out})
	if err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, out)
	if len(rows) != 31 || strings.Join(rows[0], ",") != demoStoryHeader {
		t.Fatalf("%d rows, header %v", len(rows), rows[0])
	}
	if got := strings.Join(rows[5], "|"); got != `7004|demo.story|demo:story:004|http://demo/item/4|2026-11-20T07:00:00Z|h4|demo|run-1|team-a|4|Story 4, "quoted"|http://press/4|ann|40|2026-11-19T10:00:00Z|1|` {
		t.Errorf("row 4: %s", got)
	}
	res := lastJSON(t, r.stdout.Bytes())
	st, _ := os.Stat(out)
	if res.Records != 30 || res.File != out || res.Bytes != st.Size() || res.Format != "csv" || !strings.HasPrefix(res.Source, "jsonl ") {
		t.Errorf("result %+v (file %d bytes)", res, st.Size())
	}
	if _, err := os.Stat(out + file.PartialExt); !os.IsNotExist(err) {
		t.Errorf("partial file left: %v", err)
	}

	// Parquet of a run across tasks (columns inferred), typed
	pq := filepath.Join(dir, "run2.parquet")
	if _, err := export(t, s, exportFlags{runID: "run-2", out: pq}); err != nil {
		t.Fatal(err)
	}
	prow := readParquet(t, pq)
	if len(prow) != 5 {
		t.Fatalf("%d parquet rows", len(prow))
	}
	row := prow[3]
	if row["id"].Int64() != 7003 || row["key"].String() != "demo:story:003" || row["run_id"].String() != "run-2" ||
		time.UnixMicro(row["ts"].Int64()).UTC() != exportT0.Add(time.Hour) || row["data.score"].Int64() != 30 ||
		row["data.title"].String() != `Story 3, "quoted"` || row["data.text"].String() != "" {
		t.Errorf("parquet row 3: %v", row)
	}

	// JSON Lines to stdout: every item as the jsonl sink wrote it; progress and result on stderr
	s.JSON = true
	r, err = export(t, s, exportFlags{biz: "demo.comments"})
	if err != nil {
		t.Fatal(err)
	}
	var it crawl.Item
	if err := json.Unmarshal(r.stdout.Bytes(), &it); err != nil || it.Key != "c1" || it.Data["text"] != "hi" {
		t.Errorf("stdout %q: %v", r.stdout.String(), err)
	}
	if res := lastJSON(t, r.stderr.Bytes()); res.Records != 1 || res.File != "-" || res.Format != "jsonl" {
		t.Errorf("result on stderr %+v", res)
	}
}

func TestExportFromMongo(t *testing.T) {
	st := exportStores(t)
	m, err := mongo.Open(mongo.Config{URI: st.mongo})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	if err := m.Write(ctx, append(demoStories("m-run-1", 1200, exportT0), demoStories("m-run-2", 0, exportT0)...)); err != nil {
		t.Fatal(err)
	}
	// a later run re-crawls the first 100: the latest copy is what MongoDB holds
	if err := m.Write(ctx, demoStories("m-run-2", 100, exportT0.Add(2*time.Hour))); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &Settings{Mongo: st.mongo, JSON: true}
	out := filepath.Join(dir, "stories.parquet")
	r, err := export(t, s, exportFlags{from: "mongo", biz: "demo.story", out: out})
	if err != nil {
		t.Fatal(err)
	}
	rows := readParquet(t, out)
	if len(rows) != 1200 {
		t.Fatalf("%d rows, want 1200", len(rows))
	}
	byKey := map[string]map[string]parquet.Value{}
	for _, row := range rows {
		byKey[row["key"].String()] = row
	}
	a, b := byKey["demo:story:050"], byKey["demo:story:500"]
	if a["run_id"].String() != "m-run-2" || time.UnixMicro(a["ts"].Int64()).UTC() != exportT0.Add(2*time.Hour) || a["data.score"].Int64() != 500 ||
		b["run_id"].String() != "m-run-1" || b["id"].Int64() != 7500 || b["tenant"].String() != "team-a" || b["data.author"].String() != "ann" ||
		time.UnixMicro(b["data.time"].Int64()).UTC() != time.Date(2026, 11, 19, 10, 0, 0, 0, time.UTC) {
		t.Errorf("rows: %v\n%v", a, b)
	}
	// progress lines carry the total MongoDB counted; the result is last
	lines := strings.Split(strings.TrimSpace(r.stdout.String()), "\n")
	if !strings.Contains(lines[0], `"progress":{"records":1000,"total":1200}`) {
		t.Errorf("progress %q", lines[0])
	}
	if res := lastJSON(t, r.stdout.Bytes()); res.Records != 1200 || res.Source != "mongo trawler.demo_story" || res.Format != "parquet" {
		t.Errorf("result %+v", res)
	}

	// one run, since a time, as CSV
	csvOut := filepath.Join(dir, "run2.csv")
	if _, err := export(t, s, exportFlags{from: "mongo", biz: "demo.story", runID: "m-run-2", since: exportT0.Add(time.Hour).Format(time.RFC3339), out: csvOut}); err != nil {
		t.Fatal(err)
	}
	crow := readCSV(t, csvOut)
	if len(crow) != 101 || crow[1][2] != "demo:story:000" || crow[100][7] != "m-run-2" {
		t.Errorf("%d csv rows, first %v", len(crow), crow[1])
	}
	if _, err := export(t, s, exportFlags{from: "mongo", biz: "demo.story", since: exportT0.Add(3 * time.Hour).Format(time.RFC3339), out: filepath.Join(dir, "none.csv")}); err != nil {
		t.Fatal(err)
	}
	if rows := readCSV(t, filepath.Join(dir, "none.csv")); len(rows) != 1 {
		t.Errorf("nothing since: %d rows", len(rows))
	}
}

func TestExportFromES(t *testing.T) {
	st := exportStores(t)
	ctx := context.Background()
	sink, err := es.Open(ctx, es.Options{Addresses: []string{st.es}, Specs: es.SpecsFrom(crawl.Default)})
	if err != nil {
		t.Fatal(err)
	}
	items := demoStories("e-run-1", 1100, exportT0)
	for i := 0; i < len(items); i += 250 {
		if err := sink.Write(ctx, items[i:min(i+250, len(items))]); err != nil {
			t.Fatal(err)
		}
	}
	s := &Settings{ES: st.es}
	dir := t.TempDir()
	// every record of the run: three pages of search_after
	out := filepath.Join(dir, "all.csv")
	if _, err := export(t, s, exportFlags{from: "es", runID: "e-run-1", out: out}); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, out)
	if len(rows) != 1101 {
		t.Fatalf("%d rows, want 1101", len(rows))
	}
	seen := map[string]bool{}
	for _, r := range rows[1:] {
		if seen[r[2]] {
			t.Fatalf("%s twice", r[2])
		}
		seen[r[2]] = true
	}
	if rows[1][2] != "demo:story:000" || rows[1100][2] != "demo:story:999" { // biz, then key order
		t.Errorf("order: %s … %s", rows[1][2], rows[1100][2])
	}
	// a query-string query with --biz: the task's schema gives the columns
	out = filepath.Join(dir, "top.jsonl")
	if _, err := export(t, s, exportFlags{from: "es", biz: "demo.story", query: "data.score:>=10900", out: out}); err != nil {
		t.Fatal(err)
	}
	var got []crawl.Item
	if err := file.ReadFile(out, func(it crawl.Item) error { got = append(got, it); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || got[0].Key != "demo:story:1090" || fmt.Sprint(got[9].Data["score"]) != "10990" || got[0].RunID != "e-run-1" {
		t.Errorf("query export: %d items, first %+v", len(got), got[0])
	}
	pq := filepath.Join(dir, "top.parquet")
	if _, err := export(t, s, exportFlags{from: "es", biz: "demo.story", query: "data.score:>=10900", out: pq}); err != nil {
		t.Fatal(err)
	}
	if prow := readParquet(t, pq); len(prow) != 10 || prow[9]["data.score"].Int64() != 10990 || prow[0]["id"].Int64() != 8090 {
		t.Errorf("parquet: %d rows %v", len(prow), prow)
	}
}

func TestExportFromHBase(t *testing.T) {
	st := exportStores(t)
	ctx := context.Background()
	sink, err := hbase.Open(hbase.Config{ZK: st.hbase, Timeout: 10 * time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if err := sink.Write(ctx, demoStories("h-run-1", 40, exportT0)); err != nil {
		t.Fatal(err)
	}
	changed := demoStories("h-run-2", 10, exportT0.Add(time.Hour))
	for i := range changed {
		changed[i].Data["score"] = 1000 + i
	}
	if err := sink.Write(ctx, changed); err != nil {
		t.Fatal(err)
	}
	s := &Settings{HBase: st.hbase}
	dir := t.TempDir()
	all := filepath.Join(dir, "all.parquet")
	if _, err := export(t, s, exportFlags{from: "hbase", tenant: "team-a", biz: "demo.story", versions: "all", out: all}); err != nil {
		t.Fatal(err)
	}
	// History is per tenant: the default tenant stored none of team-a's records, and
	// --tenant reads HBase only.
	none := filepath.Join(dir, "none.jsonl")
	if _, err := export(t, s, exportFlags{from: "hbase", biz: "demo.story", versions: "all", out: none}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(none); err != nil || len(b) != 0 {
		t.Errorf("default tenant: %q, %v; want no records", b, err)
	}
	if _, err := export(t, s, exportFlags{from: "jsonl", tenant: "team-a", out: none}); err == nil || !strings.Contains(err.Error(), "use it with --from hbase") {
		t.Errorf("--tenant with --from jsonl: %v", err)
	}
	rows := readParquet(t, all)
	if len(rows) != 50 {
		t.Fatalf("all versions: %d rows, want 50", len(rows))
	}
	versions := map[string][]int64{}
	for _, r := range rows {
		versions[r["key"].String()] = append(versions[r["key"].String()], r["data.score"].Int64())
	}
	if fmt.Sprint(versions["demo:story:003"]) != "[30 1003]" || fmt.Sprint(versions["demo:story:033"]) != "[330]" {
		t.Errorf("versions: %v %v", versions["demo:story:003"], versions["demo:story:033"])
	}
	latest := filepath.Join(dir, "latest.csv")
	if _, err := export(t, s, exportFlags{from: "hbase", tenant: "team-a", biz: "demo.story", out: latest}); err != nil {
		t.Fatal(err)
	}
	crow := readCSV(t, latest)
	if len(crow) != 41 {
		t.Fatalf("latest: %d rows", len(crow))
	}
	for _, r := range crow[1:] {
		if r[2] == "demo:story:003" && (r[13] != "1003" || r[7] != "h-run-2" || r[4] != "2026-11-20T08:00:00Z" || r[8] != "team-a") {
			t.Errorf("latest of 003: %v", r)
		}
	}
	run2 := filepath.Join(dir, "run2.jsonl")
	if _, err := export(t, s, exportFlags{from: "hbase", tenant: "team-a", biz: "demo.story", versions: "all", runID: "h-run-2", out: run2}); err != nil {
		t.Fatal(err)
	}
	n := 0
	_ = file.ReadFile(run2, func(crawl.Item) error { n++; return nil })
	if n != 10 {
		t.Errorf("run 2: %d records", n)
	}
}

func TestExportErrors(t *testing.T) {
	dir := t.TempDir()
	closed := func() string { // a port nothing listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	for _, c := range []struct {
		name string
		s    Settings
		f    exportFlags
		want string
	}{
		{"unknown source", Settings{}, exportFlags{from: "kafka"}, `--from "kafka": export reads jsonl, mongo, es or hbase`},
		{"parquet to stdout", Settings{}, exportFlags{format: "parquet"}, "parquet needs a file: pass --out FILE.parquet (stdout takes --format jsonl or csv)"},
		{"unknown extension", Settings{}, exportFlags{out: "x.xlsx"}, "--out x.xlsx: cannot tell the format from its extension; name it .jsonl, .csv or .parquet, or pass --format jsonl|csv|parquet"},
		{"unknown format", Settings{}, exportFlags{format: "xml"}, `--format: unknown format "xml": use jsonl, csv or parquet`},
		{"mongo without biz", Settings{Mongo: "mongodb://" + closed()}, exportFlags{from: "mongo"}, "--from mongo needs --biz SITE.TASK"},
		{"hbase without biz", Settings{HBase: closed()}, exportFlags{from: "hbase"}, "--from hbase needs --biz SITE.TASK"},
		{"mongo unreachable", Settings{Mongo: "mongodb://" + closed() + "/?serverSelectionTimeoutMS=500"}, exportFlags{from: "mongo", biz: "demo.story"}, "cannot reach MongoDB at mongodb://"},
		{"es unreachable", Settings{ES: "http://" + closed()}, exportFlags{from: "es"}, "cannot reach Elasticsearch at http://"},
		{"hbase unreachable", Settings{HBase: closed()}, exportFlags{from: "hbase", biz: "demo.story"}, "HBase's ZooKeeper quorum"},
		{"query without es", Settings{}, exportFlags{query: "x"}, "--query searches Elasticsearch: use it with --from es"},
		{"no jsonl dir", Settings{}, exportFlags{}, "--from jsonl: no directory to read: pass --out-dir DIR"},
		{"missing jsonl task", Settings{Out: dir}, exportFlags{biz: "demo.nope"}, "--biz demo.nope: no file " + filepath.Join(dir, "demo.nope.jsonl")},
		{"bad since", Settings{Out: dir}, exportFlags{since: "yesterday"}, `--since "yesterday": give a time`},
		{"bad versions", Settings{}, exportFlags{versions: "some"}, `--versions "some": use all (every stored version) or latest`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.s
			_, err := export(t, &s, c.f)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}

func TestExportCommandFlags(t *testing.T) {
	root := newRoot()
	cmd, _, err := root.Find([]string{"export"})
	if err != nil {
		t.Fatal(err)
	}
	// export's own --out (a file) shadows the jsonl sink's directory flag
	if f := cmd.Flags().Lookup("out"); f == nil || !strings.Contains(f.Usage, "FILE") {
		t.Errorf("--out: %+v", f)
	}
	root.SetArgs([]string{"export", "--from", "nowhere"})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), `--from "nowhere"`) {
		t.Errorf("execute: %v", err)
	}
}

func TestFileSinkFlags(t *testing.T) {
	for _, k := range []string{"TRAWLER_FILE_DIR", "TRAWLER_FILE_FORMAT", "TRAWLER_FILE_ROTATE_SIZE", "TRAWLER_FILE_ROTATE_EVERY"} {
		t.Setenv(k, "")
	}
	f := fileSinkFlags{dir: "/tmp/x", format: "parquet", rotateSize: "100MB", rotateEvery: "1h"}
	o, err := f.options()
	if err != nil || o.Dir != "/tmp/x" || o.Format != "parquet" || o.RotateSize != 100<<20 || o.RotateEvery != time.Hour {
		t.Errorf("options %+v %v", o, err)
	}
	t.Setenv("TRAWLER_FILE_DIR", "/tmp/y")
	t.Setenv("TRAWLER_FILE_ROTATE_SIZE", "512")
	if o, err := (&fileSinkFlags{}).options(); err != nil || o.Dir != "/tmp/y" || o.RotateSize != 512 || o.Format != "" {
		t.Errorf("env %+v %v", o, err)
	}
	t.Setenv("TRAWLER_FILE_DIR", "")
	t.Setenv("TRAWLER_FILE_ROTATE_SIZE", "")
	if _, err := (&fileSinkFlags{format: "csv"}).options(); err == nil || !strings.Contains(err.Error(), "also pass --file-dir DIR") {
		t.Errorf("format without dir: %v", err)
	}
	if _, err := (&fileSinkFlags{dir: "d", format: "xls"}).options(); err == nil || !strings.Contains(err.Error(), "--file-format") {
		t.Errorf("bad format: %v", err)
	}
	if _, err := (&fileSinkFlags{dir: "d", rotateSize: "lots"}).options(); err == nil || !strings.Contains(err.Error(), "--file-rotate-size") {
		t.Errorf("bad size: %v", err)
	}
}

// shopChain is a YAML-only chain: its detail step runs generic.html_detail and maps
// fields the task's own schema does not know (name, price, sku, in_stock).
const shopChain = `name: shop
steps:
  - id: detail
    task: generic.html_detail
    params:
      urls: [http://shop.test/p/1]
      fields:
        name: h1
        price: {css: .price, type: float}
        sku: .sku
        in_stock: {css: .stock, type: bool}
        tags: {css: .tag, type: list}
`

// shopItems are the detail step's records as the worker stamps them: every field of
// the chain, a missing price on one, and a field (sku) only the last record has.
func shopItems(t *testing.T, n int) []crawl.Item {
	t.Helper()
	c, err := crawl.Load("shop.yaml", []byte(shopChain), crawl.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(nil)
	if err != nil {
		t.Fatal(err)
	}
	biz := p.Steps[0].RecordBiz()
	if biz != "shop.detail" {
		t.Fatalf("the detail step stores under %q, want shop.detail", biz)
	}
	out := make([]crawl.Item, n)
	for i := range out {
		data := map[string]any{"name": fmt.Sprintf("Widget %d, \"deluxe\"", i), "price": 9.5 + float64(i),
			"in_stock": i%2 == 0, "tags": []any{"tool", fmt.Sprint(i)}}
		if i == 3 {
			delete(data, "price")
		}
		if i == n-1 {
			data["sku"] = fmt.Sprintf("W-%04d", i)
		}
		out[i] = crawl.Item{ID: int64(9000 + i), Biz: biz, Key: fmt.Sprintf("http://shop.test/p/%d", i), URL: fmt.Sprintf("http://shop.test/p/%d", i),
			TS: exportT0, Hash: fmt.Sprintf("s%d", i), Chain: "shop", RunID: "shop-run", Tenant: crawl.DefaultTenant, Data: data}
	}
	return out
}

// Every field of every record of a YAML chain, exported from each store in each
// format, reads back as the store holds it: no field is dropped, the record fields
// (id, chain …) come back too, HBase's included.
func TestExportRoundTripsEveryFieldOfAChain(t *testing.T) {
	st := exportStores(t)
	ctx := context.Background()
	items := shopItems(t, 40)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	j, err := jsonl.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	m, err := mongo.Open(mongo.Config{URI: st.mongo})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := es.Open(ctx, es.Options{Addresses: []string{st.es}, Specs: es.SpecsFrom(crawl.Default)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hbase.Open(hbase.Config{ZK: st.hbase, Timeout: 10 * time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, sink := range []interface {
		Write(context.Context, []crawl.Item) error
	}{j, m, e, h} {
		if err := sink.Write(ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	s := &Settings{Out: out, Mongo: st.mongo, ES: st.es, HBase: st.hbase}
	want := map[string]crawl.Item{}
	for _, it := range items {
		want[it.Key] = it
	}
	for _, from := range []string{"jsonl", "mongo", "es", "hbase"} {
		for _, f := range file.Formats {
			path := filepath.Join(dir, from+"."+f.Ext())
			if _, err := export(t, s, exportFlags{from: from, biz: "shop.detail", chain: "shop", out: path}); err != nil {
				t.Errorf("%s as %s: %v", from, f, err)
				continue
			}
			n := 0
			err := file.ReadFile(path, func(got crawl.Item) error {
				n++
				w, ok := want[got.Key]
				if !ok {
					return fmt.Errorf("record %s was never stored", got.Key)
				}
				if got.ID != w.ID || got.Biz != w.Biz || got.Chain != w.Chain || got.RunID != w.RunID || got.Hash != w.Hash ||
					got.URL != w.URL || !got.TS.Equal(w.TS) || got.Tenant != w.Tenant {
					t.Errorf("%s as %s: record %s is %+v, want %+v", from, f, got.Key, got, w)
				}
				for _, name := range []string{"name", "price", "sku", "in_stock", "tags"} {
					if g, x := file.Text(got.Data[name]), file.Text(w.Data[name]); g != x {
						t.Errorf("%s as %s: record %s field %s is %q, want %q", from, f, got.Key, name, g, x)
					}
				}
				return nil
			})
			if err != nil || n != len(items) {
				t.Errorf("%s as %s: read %d of %d records: %v", from, f, n, len(items), err)
			}
		}
	}
}
