package tests

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	// 300 ms a page keeps both workers writing for seconds, and the stories past the
	// 40th wait at a gate until the victim is dead: it dies mid-file, holding a batch.
	site, _, release := gatedSite(t, startSite(t, demosite.Options{Pages: 6, Latency: 300 * time.Millisecond}), "/item/", 40)
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
	release()
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
	o := demosite.Options{Pages: 2}
	// The stories past the fifth wait until the directory is gone, so that pages are
	// surely fetched after it went, however fast the run or slow the machine.
	site, served, release := gatedSite(t, startSite(t, o), "/item/", 5)
	before := archiveFailures(t)
	id := start(t, plan(t, "archive.yaml", archiveChain(site, "file://"+dir), "feed.pages=2"), queue)
	eventually(t, 2*time.Minute, "five stories served", func() bool { return served() >= 5 })
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	release()
	noFailures(t, wait(t, id, 2*time.Minute))
	stories, _ := demosite.Expected(o, 2)
	got := items(t, id)
	if n := len(got[demo.StoryTask]); n != stories {
		t.Errorf("stored %d stories (items by biz: %v); want all %d although the archive could not be written", n, slices.Collect(maps.Keys(got)), stories)
	}
	// Every story past the fifth was fetched with no directory to archive it in: it
	// failed to open a file there, or went into the file open when the directory went,
	// which is counted when that file, a second old (max_age: 1s), cannot be finished.
	eventually(t, 15*time.Second, fmt.Sprintf("trawler_archive_failures_total counting the %d pages fetched after the archive went", stories-5), func() bool {
		return archiveFailures(t)-before >= float64(stories-5)
	})
}

// gatedSite puts a gate in front of the site at target: the first n requests whose
// path starts with prefix pass, the later ones wait until release is called. served
// counts the requests of prefix answered so far.
func gatedSite(t *testing.T, target, prefix string, n int64) (site string, served func() int64, release func()) {
	t.Helper()
	var admitted, done atomic.Int64
	open := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(open) }) }
	t.Cleanup(release)
	site = inFrontOf(t, target, func(w http.ResponseWriter, r *http.Request, site http.Handler) {
		if strings.HasPrefix(r.URL.Path, prefix) {
			if admitted.Add(1) > n {
				select {
				case <-open:
				case <-r.Context().Done():
					return
				}
			}
			defer done.Add(1)
		}
		site.ServeHTTP(w, r)
	})
	return site, done.Load, release
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
