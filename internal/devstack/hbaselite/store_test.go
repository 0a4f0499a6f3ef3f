package hbaselite

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"
)

// countPrefix counts the stored keys starting with p.
func countPrefix(t *testing.T, s *store, p []byte) int {
	t.Helper()
	n := 0
	err := s.view(func(b *bbolt.Bucket) error {
		return scanPrefix(b, p, func(_, _ []byte) error { n++; return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func putRow(t *testing.T, s *store, tb *table, row string, value []byte) {
	t.Helper()
	m := mutation{row: []byte(row), kind: mutPut, cells: []mutCell{{family: []byte("d"), qualifier: []byte("q"), ts: 1, value: value, kind: kindPut}}}
	if _, _, err := s.apply(tb, m); err != nil {
		t.Fatalf("put %.20s: %v", row, err)
	}
}

// Snapshots copy in several transactions and drops delete in several rounds once a
// table is big enough; neither may lose or leave a key, and row lookups stay inside
// their table whatever sorts around it.
func TestStoreBulkCopyDeleteAndRowBounds(t *testing.T) {
	dir := t.TempDir()
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	fams := []family{{Name: "d", MaxVersions: 1}}
	big := &table{Namespace: "default", Qualifier: "big", Families: fams, Enabled: true, RegionID: 1}
	next := &table{Namespace: "default", Qualifier: "big2", Families: fams, Enabled: true, RegionID: 2}
	for _, tb := range []*table{big, next} {
		if err := s.putTable(tb); err != nil {
			t.Fatal(err)
		}
	}
	const rows = 3000 // about 6 MiB of values: more than one copy transaction
	value := bytes.Repeat([]byte("v"), 2<<10)
	for i := range rows {
		putRow(t, s, big, fmt.Sprintf("r%05d", i), value)
	}
	putRow(t, s, next, "a", []byte("x"))
	if err := s.sync(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		from            string
		incl, rev, null bool
		want            string
	}{
		{null: true, want: "r00000"},
		{null: true, rev: true, want: "r02999"},
		{from: "r00010", incl: true, want: "r00010"},
		{from: "r00010", want: "r00011"},
		{from: "r00010", incl: true, rev: true, want: "r00010"},
		{from: "r00010", rev: true, want: "r00009"},
		{from: "r02999", want: "<none>"},
		{from: "r00000", rev: true, want: "<none>"},
		{from: "zz", rev: true, incl: true, want: "r02999"},
	} {
		var from []byte
		if !c.null {
			from = []byte(c.from)
		}
		row, err := s.nextRow(big.Name(), from, c.incl, c.rev)
		got := string(row)
		if row == nil {
			got = "<none>"
		}
		if err != nil || got != c.want {
			t.Errorf("nextRow(%q, incl %v, reverse %v) = %q, %v; want %q", c.from, c.incl, c.rev, got, err, c.want)
		}
	}

	if err := s.takeSnapshot("snap", big); err != nil {
		t.Fatal(err)
	}
	if n := countPrefix(t, s, snapCells("snap", cellPrefix)); n != rows {
		t.Errorf("snapshot holds %d cells, want %d", n, rows)
	}
	restored := &table{Namespace: "default", Qualifier: "copy", Families: fams, Enabled: true, RegionID: 3}
	d, err := s.snapshot("snap")
	if err != nil || d == nil {
		t.Fatalf("snapshot descriptor: %v, %v", d, err)
	}
	if err := s.restoreSnapshot(d, restored); err != nil {
		t.Fatal(err)
	}
	if n := countPrefix(t, s, tableKey("copy")); n != rows {
		t.Errorf("restored table holds %d cells, want %d", n, rows)
	}
	if err := s.dropTable(big); err != nil {
		t.Fatal(err)
	}
	if err := s.deleteSnapshot("snap"); err != nil {
		t.Fatal(err)
	}
	for _, p := range [][]byte{tableKey("big"), {snapCellPrefix}, {snapPrefix}} {
		if n := countPrefix(t, s, p); n != 0 {
			t.Errorf("%d keys left under %q", n, p)
		}
	}
	if n := countPrefix(t, s, tableKey("big2")); n != 1 {
		t.Errorf("the neighbouring table holds %d cells, want 1", n)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}

	s, err = openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if s.table("big") != nil || s.table("big2") == nil || s.table("copy") == nil {
		t.Errorf("tables after reopening: %v", s.tableList())
	}
	if n := countPrefix(t, s, tableKey("copy")); n != rows {
		t.Errorf("restored table holds %d cells after reopening, want %d", n, rows)
	}
}

// A cell whose key would pass the store's key limit is refused before anything of its
// mutation is written; a long row with short columns still fits.
func TestStoreKeyLimit(t *testing.T) {
	s, err := openStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	tb := &table{Namespace: "default", Qualifier: "k", Families: []family{{Name: "d"}}, Enabled: true, RegionID: 1}
	if err := s.putTable(tb); err != nil {
		t.Fatal(err)
	}
	putRow(t, s, tb, strings.Repeat("r", 31000), []byte("v"))
	m := mutation{row: []byte("short"), kind: mutPut, cells: []mutCell{
		{family: []byte("d"), qualifier: []byte("ok"), ts: 1, value: []byte("v"), kind: kindPut},
		{family: []byte("d"), qualifier: bytes.Repeat([]byte{0}, 20000), ts: 1, value: []byte("v"), kind: kindPut},
	}}
	_, _, err = s.apply(tb, m)
	var re rpcError
	if !errors.As(err, &re) || re.class != excDoNotRetry || !strings.Contains(re.msg, "over hbaselite's limit") {
		t.Fatalf("oversized key: %v", err)
	}
	if n := countPrefix(t, s, rowKey("k", []byte("short"))); n != 0 {
		t.Errorf("a refused mutation left %d cells", n)
	}
}

// A data directory written by the pebble-based store is refused, not read as empty.
func TestStoreRefusesPebbleDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "MANIFEST-000001"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := openStore(dir); err == nil || !strings.Contains(err.Error(), "pebble") {
		if s != nil {
			s.close()
		}
		t.Fatalf("openStore over a pebble store: %v", err)
	}
}
