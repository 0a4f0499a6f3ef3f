package hbaselite

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tsuna/gohbase"
	"github.com/tsuna/gohbase/hrpc"
)

// A client that stops reading mid-scan closes its scanner; one that reads to the end
// leaves none open either.
func TestScannersAreClosed(t *testing.T) {
	srv, err := Run(Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	quiet := gohbase.Logger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	admin := gohbase.NewAdminClient(srv.ZK(), quiet)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := admin.CreateTable(hrpc.NewCreateTable(ctx, []byte("s"), map[string]map[string]string{"d": nil})); err != nil {
		t.Fatal(err)
	}
	c := gohbase.NewClient(srv.ZK(), quiet)
	defer c.Close()
	for _, r := range []string{"a", "b", "c"} {
		p, _ := hrpc.NewPutStr(ctx, "s", r, map[string]map[string][]byte{"d": {"q": []byte(r)}})
		if _, err := c.Put(p); err != nil {
			t.Fatal(err)
		}
	}
	open := func() int {
		srv.s.scanMu.Lock()
		defer srv.s.scanMu.Unlock()
		return len(srv.s.scanners)
	}
	scan, _ := hrpc.NewScanStr(ctx, "s", hrpc.NumberOfRows(1))
	sc := c.Scan(scan)
	if r, err := sc.Next(); err != nil || string(r.Cells[0].Row) != "a" {
		t.Fatalf("first row: %v, %v", r, err)
	}
	if n := open(); n != 1 {
		t.Fatalf("%d scanners open mid-scan, want 1", n)
	}
	sc.Close()
	for deadline := time.Now().Add(5 * time.Second); open() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d scanners still open after Close", open())
		}
	}
	scan, _ = hrpc.NewScanStr(ctx, "s", hrpc.NumberOfRows(2))
	sc = c.Scan(scan)
	rows := 0
	for _, err := sc.Next(); err != io.EOF; _, err = sc.Next() {
		if err != nil {
			t.Fatal(err)
		}
		rows++
	}
	if rows != 3 || open() != 0 {
		t.Errorf("full scan: %d rows, %d scanners open; want 3 and 0", rows, open())
	}
}
