package hbaselite_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tsuna/gohbase"
	"github.com/tsuna/gohbase/filter"
	"github.com/tsuna/gohbase/hrpc"

	"github.com/trawlerhq/trawler/internal/devstack/hbaselite"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
)

// start runs a server on a fresh directory (or dir) and returns it with clients.
func start(t *testing.T, dir string, o hbaselite.Options) (*hbaselite.Server, gohbase.Client, gohbase.AdminClient) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	o.DataDir = dir
	srv, err := hbaselite.Run(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c, a := clients(t, srv)
	return srv, c, a
}

func clients(t *testing.T, srv *hbaselite.Server) (gohbase.Client, gohbase.AdminClient) {
	opts := []gohbase.Option{gohbase.ZookeeperTimeout(5 * time.Second), gohbase.RegionLookupTimeout(5 * time.Second), gohbase.RegionReadTimeout(10 * time.Second),
		gohbase.Logger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	c := gohbase.NewClient(srv.ZK(), opts...)
	t.Cleanup(c.Close)
	return c, gohbase.NewAdminClient(srv.ZK(), opts...)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createTable(t *testing.T, a gohbase.AdminClient, name string, versions int) {
	t.Helper()
	err := a.CreateTable(hrpc.NewCreateTable(ctxT(t), []byte(name), map[string]map[string]string{"d": {"VERSIONS": fmt.Sprint(versions)}}))
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
}

func put(t *testing.T, c gohbase.Client, table, row string, cols map[string]string, opts ...func(hrpc.Call) error) {
	t.Helper()
	vals := map[string][]byte{}
	for k, v := range cols {
		vals[k] = []byte(v)
	}
	p, err := hrpc.NewPutStr(ctxT(t), table, row, map[string]map[string][]byte{"d": vals}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(p); err != nil {
		t.Fatalf("put %s/%s: %v", table, row, err)
	}
}

// cells renders a result as "qual@ts=value ..." in the order HBase returns them.
func cells(r *hrpc.Result) string {
	var parts []string
	for _, c := range r.Cells {
		parts = append(parts, fmt.Sprintf("%s@%d=%s", c.Qualifier, *c.Timestamp, c.Value))
	}
	return strings.Join(parts, " ")
}

func get(t *testing.T, c gohbase.Client, table, row string, opts ...func(hrpc.Call) error) *hrpc.Result {
	t.Helper()
	g, err := hrpc.NewGetStr(ctxT(t), table, row, opts...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Get(g)
	if err != nil {
		t.Fatalf("get %s/%s: %v", table, row, err)
	}
	return r
}

// scanRows returns the row keys a scan returns, in order.
func scanRows(t *testing.T, c gohbase.Client, s *hrpc.Scan) []string {
	t.Helper()
	sc := c.Scan(s)
	defer sc.Close()
	var rows []string
	for {
		r, err := sc.Next()
		if err == io.EOF {
			return rows
		}
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		rows = append(rows, string(r.Cells[0].Row))
	}
}

func TestPutGetScanDelete(t *testing.T) {
	_, c, a := start(t, "", hbaselite.Options{})
	createTable(t, a, "t1", 1)
	for _, r := range []string{"b", "a", "c", "d", "ab", "\x00x", "e"} {
		put(t, c, "t1", r, map[string]string{"q": "v-" + r, "z": "zz"})
	}
	if got := cells(get(t, c, "t1", "ab")); !strings.Contains(got, "q@") || !strings.Contains(got, "=v-ab") || !strings.HasSuffix(got, "=zz") {
		t.Errorf("get ab = %q", got)
	}
	if got := get(t, c, "t1", "nope"); len(got.Cells) != 0 {
		t.Errorf("get of a missing row = %v", got)
	}
	if got := cells(get(t, c, "t1", "a", hrpc.Families(map[string][]string{"d": {"z"}}))); !strings.HasPrefix(got, "z@") || strings.Contains(got, "q@") {
		t.Errorf("get a d:z = %q", got)
	}
	ctx := ctxT(t)
	all, _ := hrpc.NewScanStr(ctx, "t1", hrpc.NumberOfRows(2))
	if got := strings.Join(scanRows(t, c, all), ","); got != "\x00x,a,ab,b,c,d,e" {
		t.Errorf("scan = %q", got)
	}
	rng, _ := hrpc.NewScanRangeStr(ctx, "t1", "ab", "d")
	if got := strings.Join(scanRows(t, c, rng), ","); got != "ab,b,c" {
		t.Errorf("scan [ab, d) = %q", got)
	}
	rev, _ := hrpc.NewScanRangeStr(ctx, "t1", "d", "a", hrpc.Reversed(), hrpc.NumberOfRows(2))
	if got := strings.Join(scanRows(t, c, rev), ","); got != "d,c,b,ab" {
		t.Errorf("reversed scan (a, d] = %q", got)
	}
	revAll, _ := hrpc.NewScanStr(ctx, "t1", hrpc.Reversed())
	if got := strings.Join(scanRows(t, c, revAll), ","); got != "e,d,c,b,ab,a,\x00x" {
		t.Errorf("reversed scan = %q", got)
	}
	pre, _ := hrpc.NewScanStr(ctx, "t1", hrpc.Filters(filter.NewPrefixFilter([]byte("a"))))
	if got := strings.Join(scanRows(t, c, pre), ","); got != "a,ab" {
		t.Errorf("prefix scan = %q", got)
	}
	val, _ := hrpc.NewScanStr(ctx, "t1", hrpc.Filters(filter.NewValueFilter(filter.NewCompareFilter(filter.Equal, filter.NewBinaryComparator(filter.NewByteArrayComparable([]byte("v-c")))))))
	if got := strings.Join(scanRows(t, c, val), ","); got != "c" {
		t.Errorf("value filter scan = %q", got)
	}
	// Delete one column, then a whole row.
	del, _ := hrpc.NewDelStr(ctx, "t1", "b", map[string]map[string][]byte{"d": {"q": nil}})
	if _, err := c.Delete(del); err != nil {
		t.Fatal(err)
	}
	if got := cells(get(t, c, "t1", "b")); strings.Contains(got, "q@") || !strings.Contains(got, "z@") {
		t.Errorf("after deleting d:q, b = %q", got)
	}
	delRow, _ := hrpc.NewDelStr(ctx, "t1", "c", nil)
	if _, err := c.Delete(delRow); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(scanRows(t, c, all2(t, ctx)), ","); got != "\x00x,a,ab,b,d,e" {
		t.Errorf("scan after deleting c = %q", got)
	}
	// A batch (Multi) of puts and gets.
	var batch []hrpc.Call
	for i := range 50 {
		p, _ := hrpc.NewPutStr(ctx, "t1", fmt.Sprintf("m%02d", i), map[string]map[string][]byte{"d": {"n": []byte(fmt.Sprint(i))}})
		batch = append(batch, p)
	}
	if res, ok := c.SendBatch(ctx, batch); !ok {
		t.Fatalf("batch: %v", res[0].Error)
	}
	if got := cells(get(t, c, "t1", "m42")); !strings.HasSuffix(got, "=42") {
		t.Errorf("m42 = %q", got)
	}
	var gets []hrpc.Call
	for _, r := range []string{"m01", "m02"} {
		g, _ := hrpc.NewGetStr(ctx, "t1", r)
		gets = append(gets, g)
	}
	res, ok := c.SendBatch(ctx, gets)
	if !ok {
		t.Fatalf("batch get: %v %v", res[0].Error, res[1].Error)
	}
}

func all2(t *testing.T, ctx context.Context) *hrpc.Scan {
	s, err := hrpc.NewScanStr(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVersionsTimeRangesAndTrimming(t *testing.T) {
	_, c, a := start(t, "", hbaselite.Options{})
	createTable(t, a, "v", 3)
	for _, ts := range []int64{1000, 2000, 3000, 4000} {
		put(t, c, "v", "r", map[string]string{"p": fmt.Sprint(ts / 1000)}, hrpc.Timestamp(time.UnixMilli(ts)))
	}
	// The same cell again (a retried write): still one cell at 4000.
	put(t, c, "v", "r", map[string]string{"p": "4"}, hrpc.Timestamp(time.UnixMilli(4000)))
	if got := cells(get(t, c, "v", "r")); got != "p@4000=4" {
		t.Errorf("latest = %q", got)
	}
	if got := cells(get(t, c, "v", "r", hrpc.MaxVersions(10))); got != "p@4000=4 p@3000=3 p@2000=2" {
		t.Errorf("all versions (max 3 kept) = %q", got)
	}
	if got := cells(get(t, c, "v", "r", hrpc.MaxVersions(10), hrpc.TimeRange(time.UnixMilli(2000), time.UnixMilli(4000)))); got != "p@3000=3 p@2000=2" {
		t.Errorf("time range [2000, 4000) = %q", got)
	}
	if got := cells(get(t, c, "v", "r", hrpc.MaxVersions(2))); got != "p@4000=4 p@3000=3" {
		t.Errorf("2 versions = %q", got)
	}
	// Delete one version.
	del, _ := hrpc.NewDelStr(ctxT(t), "v", "r", map[string]map[string][]byte{"d": {"p": nil}}, hrpc.Timestamp(time.UnixMilli(3000)), hrpc.DeleteOneVersion())
	if _, err := c.Delete(del); err != nil {
		t.Fatal(err)
	}
	if got := cells(get(t, c, "v", "r", hrpc.MaxVersions(10))); got != "p@4000=4 p@2000=2" {
		t.Errorf("after deleting version 3000 = %q", got)
	}
	scan, _ := hrpc.NewScanStr(ctxT(t), "v", hrpc.MaxVersions(5))
	sc := c.Scan(scan)
	r, err := sc.Next()
	if err != nil || cells(r) != "p@4000=4 p@2000=2" {
		t.Errorf("scan with versions = %v %v", r, err)
	}
	sc.Close()
}

func TestRegionLookupAndAdmin(t *testing.T) {
	_, c, a := start(t, "", hbaselite.Options{})
	ctx := ctxT(t)
	// A table in a namespace that does not exist yet.
	err := a.CreateTable(hrpc.NewCreateTable(ctx, []byte("ns1:items"), map[string]map[string]string{"d": nil}))
	if err == nil || !strings.Contains(err.Error(), "NamespaceNotFoundException") {
		t.Fatalf("create table in a missing namespace: %v", err)
	}
	// Three regions: [, \x05), [\x05, zz), [zz, ).
	splits := [][]byte{[]byte("zz"), {0x05}}
	if err := hbase.EnsureTable(ctx, a, "ns1", "items", splits, "d"); err != nil {
		t.Fatal(err)
	}
	if err := hbase.EnsureTable(ctx, a, "ns1", "items", splits, "d"); err != nil { // again: a no-op
		t.Fatal(err)
	}
	createTable(t, a, "plain", 1)
	err = a.CreateTable(hrpc.NewCreateTable(ctx, []byte("plain"), map[string]map[string]string{"d": nil}))
	if err == nil || !strings.Contains(err.Error(), "TableExistsException") {
		t.Errorf("create an existing table: %v", err)
	}
	list, _ := hrpc.NewListTableNames(ctx)
	names, err := a.ListTableNames(list)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range names {
		got = append(got, string(n.Namespace)+":"+string(n.Qualifier))
	}
	if strings.Join(got, ",") != "ns1:items,default:plain" {
		t.Errorf("tables = %v", got)
	}
	// Rows below ',' (a salted key) and above it find their regions; scans forward and
	// reversed cross all three, and one that stops inside a region ends there.
	for _, row := range []string{"\x00a", "\x05b", "zz,z", "~"} {
		put(t, c, "ns1:items", row, map[string]string{"q": "1"})
	}
	all, _ := hrpc.NewScanStr(ctx, "ns1:items")
	if got := strings.Join(scanRows(t, c, all), " "); got != "\x00a \x05b zz,z ~" {
		t.Errorf("scan ns1:items: %q", got)
	}
	// gohbase starts a reversed scan in the region of its start row, so a reversed scan
	// of a whole table starts at a row above every key.
	rev, _ := hrpc.NewScanRangeStr(ctx, "ns1:items", "\xff", "", hrpc.Reversed())
	if got := strings.Join(scanRows(t, c, rev), " "); got != "~ zz,z \x05b \x00a" {
		t.Errorf("reversed scan ns1:items: %q", got)
	}
	part, _ := hrpc.NewScanRangeStr(ctx, "ns1:items", "\x01", "zz,z")
	if got := strings.Join(scanRows(t, c, part), " "); got != "\x05b" {
		t.Errorf("scan ns1:items [\\x01, zz,z): %q", got)
	}
	if err := c.CacheRegions([]byte("ns1:items")); err != nil {
		t.Errorf("cache regions: %v", err)
	}
	meta, _ := hrpc.NewScanStr(ctx, "hbase:meta", hrpc.Families(map[string][]string{"info": nil}))
	want := []string{"hbase:namespace,,", "ns1:items,,", "ns1:items,\x05,", "ns1:items,zz,", "plain,,"}
	rows := scanRows(t, c, meta)
	ok := len(rows) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.HasPrefix(rows[i], want[i])
	}
	if !ok {
		t.Errorf("hbase:meta rows = %q, want the prefixes %q", rows, want)
	}
	// Disable: reads fail with the reason; enable: they work again.
	if err := a.DisableTable(hrpc.NewDisableTable(ctx, []byte("plain"))); err != nil {
		t.Fatal(err)
	}
	g, _ := hrpc.NewGetStr(ctx, "plain", "x")
	if _, err := c.Get(g); err == nil || !strings.Contains(err.Error(), "TableNotEnabledException") {
		t.Errorf("get on a disabled table: %v", err)
	}
	if err := a.DeleteTable(hrpc.NewDeleteTable(ctx, []byte("ns1:items"))); err == nil || !strings.Contains(err.Error(), "TableNotDisabledException") {
		t.Errorf("delete an enabled table: %v", err)
	}
	if err := a.EnableTable(hrpc.NewEnableTable(ctx, []byte("plain"))); err != nil {
		t.Fatal(err)
	}
	put(t, c, "plain", "x", map[string]string{"q": "1"})
	// Delete: the table and its cells are gone; a new table of that name starts empty.
	if err := a.DisableTable(hrpc.NewDisableTable(ctx, []byte("plain"))); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteTable(hrpc.NewDeleteTable(ctx, []byte("plain"))); err != nil {
		t.Fatal(err)
	}
	g, _ = hrpc.NewGetStr(ctx, "plain", "x")
	if _, err := c.Get(g); !errors.Is(err, gohbase.TableNotFound) {
		t.Errorf("get on a deleted table: %v, want %v", err, gohbase.TableNotFound)
	}
	createTable(t, a, "plain", 1)
	if got := get(t, c, "plain", "x"); len(got.Cells) != 0 {
		t.Errorf("recreated table holds %v", got)
	}
}

func TestRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	srv, c, a := start(t, dir, hbaselite.Options{})
	createTable(t, a, "keep", 5)
	put(t, c, "keep", "r", map[string]string{"p": "1"}, hrpc.Timestamp(time.UnixMilli(1000)))
	put(t, c, "keep", "r", map[string]string{"p": "2"}, hrpc.Timestamp(time.UnixMilli(2000)))
	// A pre-split table, a cell with a TTL and a snapshot come back too.
	err := a.CreateTable(hrpc.NewCreateTable(ctxT(t), []byte("split"), map[string]map[string]string{"d": nil},
		hrpc.SplitKeys([][]byte{[]byte("m"), []byte("t")})))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"a", "n", "u"} {
		put(t, c, "split", row, map[string]string{"p": row})
	}
	put(t, c, "split", "short", map[string]string{"p": "x"}, hrpc.TTL(time.Hour), hrpc.Timestamp(time.Now().Add(-2*time.Hour)))
	put(t, c, "split", "long", map[string]string{"p": "x"}, hrpc.TTL(time.Hour))
	sn, _ := hrpc.NewSnapshot(ctxT(t), "split-snap", "split")
	if err := a.CreateSnapshot(sn); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	_, c2, a2 := start(t, dir, hbaselite.Options{})
	if got := cells(get(t, c2, "keep", "r", hrpc.MaxVersions(5))); got != "p@2000=2 p@1000=1" {
		t.Errorf("after restart = %q", got)
	}
	scan, _ := hrpc.NewScanRangeStr(ctxT(t), "split", "", "")
	if got := strings.Join(scanRows(t, c2, scan), " "); got != "a long n u" {
		t.Errorf("pre-split table after restart: rows %q, want a long n u (short expired)", got)
	}
	if err := c2.CacheRegions([]byte("split")); err != nil {
		t.Error(err)
	}
	if snaps, err := a2.ListSnapshots(hrpc.NewListSnapshots(ctxT(t))); err != nil || len(snaps) != 1 || snaps[0].GetTable() != "split" {
		t.Errorf("snapshots after restart: %v, %v", snaps, err)
	}
	put(t, c2, "keep", "r2", map[string]string{"p": "3"})
	if got := cells(get(t, c2, "keep", "r2")); !strings.HasSuffix(got, "=3") {
		t.Errorf("write after restart = %q", got)
	}
}

func TestBadInputGetsErrors(t *testing.T) {
	srv, c, a := start(t, "", hbaselite.Options{MaxCellSize: 64 << 10, MaxRequestSize: 1 << 20})
	createTable(t, a, "b", 1)
	ctx := ctxT(t)
	try := func(row string, value []byte) error {
		p, _ := hrpc.NewPutStr(ctx, "b", row, map[string]map[string][]byte{"d": {"q": value}})
		_, err := c.Put(p)
		return err
	}
	if err := try(strings.Repeat("r", 40000), []byte("v")); err == nil || !strings.Contains(err.Error(), "row length 40000 is > 32767") {
		t.Errorf("40000-byte row: %v", err)
	}
	if err := try(strings.Repeat("r", 70000), []byte("v")); err == nil || !strings.Contains(err.Error(), "DoNotRetryIOException") {
		t.Errorf("70000-byte row: %v", err)
	}
	if err := try("big", make([]byte, 100<<10)); err == nil || !strings.Contains(err.Error(), "over the limit of 65536 bytes") {
		t.Errorf("100 KiB cell: %v", err)
	}
	if err := try("huge", make([]byte, 2<<20)); err == nil || !strings.Contains(err.Error(), "RequestTooBigException") {
		t.Errorf("2 MiB request: %v", err)
	}
	p, _ := hrpc.NewPutStr(ctx, "b", "r", map[string]map[string][]byte{"nofamily": {"q": []byte("v")}})
	if _, err := c.Put(p); err == nil || !strings.Contains(err.Error(), `column family "nofamily" does not exist`) {
		t.Errorf("unknown family: %v", err)
	}
	g, _ := hrpc.NewGetStr(ctx, "no_such_table", "r")
	if _, err := c.Get(g); !errors.Is(err, gohbase.TableNotFound) {
		t.Errorf("unknown table: %v", err)
	}
	s, _ := hrpc.NewScanStr(ctx, "b", hrpc.Filters(filter.NewRandomRowFilter(0.5)))
	if _, err := c.Scan(s).Next(); err == nil || !strings.Contains(err.Error(), "RandomRowFilter is not supported") {
		t.Errorf("unsupported filter: %v", err)
	}
	// Garbage on both ports does not take the server down.
	for _, addr := range []string{srv.ZK(), srv.RPCAddr()} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(bytes.Repeat([]byte{0xFF, 0, 0x42}, 1000))
		nc.Close()
	}
	if err := try("fine", []byte("v")); err != nil {
		t.Fatalf("a good put after bad ones: %v", err)
	}
	if got := cells(get(t, c, "b", "fine")); !strings.HasSuffix(got, "=v") {
		t.Errorf("fine = %q", got)
	}
}

// Increments, appends and check-and-put are atomic read-modify-writes; a snapshot
// restores a table as it was, or clones it into a new table.
func TestReadModifyWriteAndSnapshots(t *testing.T) {
	_, c, a := start(t, "", hbaselite.Options{})
	ctx := ctxT(t)
	err := a.CreateTable(hrpc.NewCreateTable(ctx, []byte("rmw"), map[string]map[string]string{"d": nil}, hrpc.SplitKeys([][]byte{[]byte("m")})))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 20)
	for range 20 {
		go func() {
			inc, _ := hrpc.NewIncStrSingle(ctx, "rmw", "n", "d", "count", 2)
			_, err := c.Increment(inc)
			done <- err
		}()
	}
	for range 20 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	inc, _ := hrpc.NewIncStrSingle(ctx, "rmw", "n", "d", "count", 1)
	if n, err := c.Increment(inc); err != nil || n != 41 {
		t.Errorf("increment after 20 parallel ones = %d, %v; want 41", n, err)
	}
	put(t, c, "rmw", "a", map[string]string{"text": "ab"})
	app, _ := hrpc.NewAppStr(ctx, "rmw", "a", map[string]map[string][]byte{"d": {"text": []byte("cd")}})
	if r, err := c.Append(app); err != nil || len(r.Cells) != 1 || string(r.Cells[0].Value) != "abcd" {
		t.Errorf("append = %v, %v", r, err)
	}
	inc, _ = hrpc.NewIncStrSingle(ctx, "rmw", "a", "d", "text", 1)
	if _, err := c.Increment(inc); err == nil || !strings.Contains(err.Error(), "not a long") {
		t.Errorf("increment of a 4-byte value: %v", err)
	}
	for i, want := range []bool{true, false} { // only the first put of a missing cell wins
		p, _ := hrpc.NewPutStr(ctx, "rmw", "z", map[string]map[string][]byte{"d": {"lock": []byte(fmt.Sprint(i))}})
		if ok, err := c.CheckAndPut(p, "d", "lock", nil); err != nil || ok != want {
			t.Errorf("check-and-put %d = %v, %v; want %v", i, ok, err, want)
		}
	}
	if got := cells(get(t, c, "rmw", "z")); !strings.HasSuffix(got, "=0") {
		t.Errorf("after check-and-puts = %q", got)
	}

	sn, _ := hrpc.NewSnapshot(ctx, "rmw-1", "rmw")
	if err := a.CreateSnapshot(sn); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateSnapshot(sn); err == nil || !strings.Contains(err.Error(), "SnapshotExistsException") {
		t.Errorf("snapshot of a taken name: %v", err)
	}
	put(t, c, "rmw", "a", map[string]string{"text": "later"})
	if err := a.RestoreSnapshot(sn); err == nil || !strings.Contains(err.Error(), "TableNotDisabledException") {
		t.Errorf("restore over an enabled table: %v", err)
	}
	if err := a.DisableTable(hrpc.NewDisableTable(ctx, []byte("rmw"))); err != nil {
		t.Fatal(err)
	}
	if err := a.RestoreSnapshot(sn); err != nil {
		t.Fatal(err)
	}
	if err := a.EnableTable(hrpc.NewEnableTable(ctx, []byte("rmw"))); err != nil {
		t.Fatal(err)
	}
	if got := cells(get(t, c, "rmw", "a")); !strings.HasSuffix(got, "=abcd") {
		t.Errorf("after restore = %q, want the snapshot's abcd", got)
	}
	clone, _ := hrpc.NewSnapshot(ctx, "rmw-1", "rmw_clone")
	if err := a.RestoreSnapshot(clone); err != nil {
		t.Fatal(err)
	}
	scan, _ := hrpc.NewScanStr(ctx, "rmw_clone")
	if got := strings.Join(scanRows(t, c, scan), " "); got != "a n z" {
		t.Errorf("clone rows = %q", got)
	}
	if err := a.DeleteSnapshot(sn); err != nil {
		t.Fatal(err)
	}
	if snaps, err := a.ListSnapshots(hrpc.NewListSnapshots(ctx)); err != nil || len(snaps) != 0 {
		t.Errorf("snapshots after delete: %v, %v", snaps, err)
	}
}
