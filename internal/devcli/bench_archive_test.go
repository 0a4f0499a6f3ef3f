//go:build !production

package devcli

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/internal/archive"
	"github.com/trawlerhq/trawler/internal/cli"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
)

// `trawler bench crawl --archive DIR` times each run archived too: the archive holds one
// response record per page of the first archived run and one revisit record per page of
// the second (the site did not change), and the bytes per page printed are those of the
// runs' files on disk.
func TestBenchCrawlArchive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	res, err := benchCrawl(ctx, &cli.Settings{Data: t.TempDir()}, benchOptions{pages: 1, perPage: 5, concurrency: 4, runs: 2, archive: dir})
	if err != nil {
		t.Fatal(err)
	}
	wantPages, wantItems := demoCrawlSize(demosite.Options{Pages: 1, PerPage: 5}, 1, 3)
	a := res.Archived
	if a == nil || a.Trawler.Pages != wantPages || a.Trawler.Items != wantItems || len(a.Runs) != 2 || a.Trawler.CPUPerPageMS <= 0 || a.CPURatio <= 0 {
		t.Fatalf("archived side %+v; want 2 runs of %d pages, %d items, their CPU", a, wantPages, wantItems)
	}
	bucket, err := archive.OpenBucket(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	files, _, err := archive.Files(ctx, bucket, "")
	if err != nil {
		t.Fatal(err)
	}
	bytes := map[string]int64{}
	var runs []string
	for _, f := range files {
		if bytes[f.RunID] == 0 {
			runs = append(runs, f.RunID)
		}
		bytes[f.RunID] += f.Bytes
	}
	slices.Sort(runs) // run ids start with their time
	if len(runs) != 2 {
		t.Fatalf("the archive holds runs %v, want the 2 archived runs", runs)
	}
	for i, want := range []string{"response", "revisit"} {
		entries, err := archive.RunIndex(ctx, bucket, "default", runs[i])
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range entries {
			if e.Type == want {
				n++
			}
		}
		if n != wantPages || len(entries) != wantPages {
			t.Errorf("archived run %d holds %d pages, %d of them %s records; want %d, all %s", i+1, len(entries), n, want, wantPages, want)
		}
	}
	if first := cli.RoundTo(float64(bytes[runs[0]])/float64(wantPages), 1); a.BytesPerPage != first {
		t.Errorf("bytes per page %v, the first run's files hold %v per page", a.BytesPerPage, first)
	}
	if second := cli.RoundTo(float64(bytes[runs[1]])/float64(wantPages), 1); a.RevisitBytesPerPage != second || second >= a.BytesPerPage {
		t.Errorf("revisit bytes per page %v, the second run's files hold %v per page; want those, fewer than the first's %v", a.RevisitBytesPerPage, second, a.BytesPerPage)
	}
}
