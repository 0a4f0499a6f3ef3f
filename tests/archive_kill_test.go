package tests

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nlnwa/gowarc/v3"
	dto "github.com/prometheus/client_model/go"
	"gocloud.dev/blob"

	"github.com/trawlerhq/trawler/internal/archive"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/sites/demo"
)

// A worker SIGKILLed while it writes WARC files leaves none unreadable: every
// `.warc.gz` of the run reads to its end under gowarc's strict validation, the killed
// worker's unfinished file is not among them, and every index line points into a
// finished file at a record of its URL. The run completes on the other worker, which
// finishes its own file when it stops.
func TestArchiveKilledWorkerLeavesNoUnreadableWARC(t *testing.T) {
	bin := buildTrawler(t)
	dest := "file://" + t.TempDir()
	// 300 ms a page keeps both workers writing for seconds: one dies mid-file.
	site := startSite(t, demosite.Options{Pages: 6, Latency: 300 * time.Millisecond})
	const queue = "archive-kill"
	out := filepath.Join(shared.dir, "archive-kill-out")
	workers := map[int]*exec.Cmd{}
	for range 2 {
		w := workerProcess(t, bin, queue, out)
		workers[w.Process.Pid] = w
	}
	id := start(t, plan(t, "archive.yaml", archiveChain(site, dest), "feed.pages=6"), queue)
	waitPages(t, id, 30)
	victim, _ := runningBatch(t, id, workers, "")
	if err := workers[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = workers[victim].Wait()
	delete(workers, victim)
	noFailures(t, wait(t, id, 3*time.Minute))
	for _, w := range workers { // stopped as an operator stops it: its open file is finished
		if err := w.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = w.Wait()
	}

	ctx := context.Background()
	bucket, err := archive.OpenBucket(ctx, dest)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	finished := map[string]bool{}
	it := bucket.List(&blob.ListOptions{Prefix: tenantOf(t) + "/" + id + "/"})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(obj.Key, ".warc.gz") {
			continue
		}
		data, err := bucket.ReadAll(ctx, obj.Key)
		if err != nil {
			t.Fatal(err)
		}
		r, err := gowarc.NewWarcFileReaderFromStream(bytes.NewReader(data), 0, gowarc.WithStrictValidation())
		if err != nil {
			t.Fatal(err)
		}
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatalf("%s does not read to its end: %v", obj.Key, err)
			}
			if len(rec.Validation) > 0 {
				t.Errorf("%s: record at %d: %v", obj.Key, rec.Offset, rec.Validation)
			}
			rec.Close()
		}
		r.Close()
		finished[obj.Key] = true
	}
	entries, err := archive.RunIndex(ctx, bucket, tenantOf(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(finished) == 0 || len(entries) == 0 {
		t.Fatalf("%d finished WARC files and %d index entries: the surviving worker archived nothing", len(finished), len(entries))
	}
	for _, e := range entries {
		if !finished[e.File] {
			t.Errorf("index entry %s points into %s, which is not a finished WARC file (finished: %v)", e.URL, e.File, finished)
			continue
		}
		data, err := archive.ReadRecord(ctx, bucket, e)
		if err != nil {
			t.Fatal(err)
		}
		rec, _, _, err := gowarc.NewUnmarshaler(gowarc.WithStrictValidation()).Unmarshal(bufio.NewReader(bytes.NewReader(data)))
		if err != nil {
			t.Fatalf("the record at %s:%d+%d: %v", e.File, e.Offset, e.Length, err)
		}
		if u := rec.WarcHeader().Get(gowarc.WarcTargetURI); u != e.URL {
			t.Errorf("the record at %s:%d is of %s, the index says %s", e.File, e.Offset, u, e.URL)
		}
		rec.Close()
	}
}

// When the archive cannot be written mid-run (its directory replaced by a file, as a
// full disk or a vanished mount fails every write), the item wins: every story is
// still stored, no page fails, and the pages not archived are counted in
// trawler_archive_failures_total.
func TestArchiveWriteFailureKeepsTheItems(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "warc")
	queue := "archive-fail-" + tenantOf(t)
	testWorker(t, engine.WorkerOptions{TaskQueue: queue, Redis: shared.redis.Addr(), OutDir: shared.dir + "/out"})
	o := demosite.Options{Pages: 2, Latency: 100 * time.Millisecond}
	site := startSite(t, o)
	before := archiveFailures(t)
	id := start(t, plan(t, "archive.yaml", archiveChain(site, "file://"+dir), "feed.pages=2"), queue)
	waitPages(t, id, 5)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	noFailures(t, wait(t, id, 2*time.Minute))
	stories, _ := demosite.Expected(o, 2)
	got := items(t, id)
	if n := len(got[demo.StoryTask]); n != stories {
		t.Errorf("stored %d stories (items by biz: %v); want all %d although the archive could not be written", n, slices.Collect(maps.Keys(got)), stories)
	}
	// The file open when the directory went is finished within a second of its age
	// (max_age: 1s), and cannot be: its pages are counted then.
	eventually(t, 15*time.Second, "trawler_archive_failures_total counting the pages not archived", func() bool {
		return archiveFailures(t)-before >= 1
	})
}

// archiveFailures reads trawler_archive_failures_total of this process.
func archiveFailures(t *testing.T) float64 {
	t.Helper()
	var m dto.Metric
	if err := monitor.ArchiveFailures.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
