package tests

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/nlnwa/gowarc/v3"
	"gocloud.dev/blob"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/archive"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
)

// archiveChain crawls one feed page of the demo site and its 30 stories, archiving
// every page to `to`, each file finished within a second.
func archiveChain(site, to string) string {
	return `name: archived
defaults:
  params: {base_url: "` + site + `"}
  archive: {to: "` + to + `", max_age: 1s}
steps:
  - id: feed
    task: demo.feed
    from: feed
    max_depth: 10
    params: {pages: 1}
  - id: story
    task: demo.story
    from: feed
`
}

// TestArchiveWARC crawls the demo site twice with `archive:` to a directory (file://)
// and to an S3 bucket (an in-process S3 server): the WARC files of each run, read
// back with gowarc's strict reader, hold one request and one response record for every
// page the site served (robots.txt aside), each request naming its response; the
// second run of the unchanged site holds revisit records instead, referring to the
// first run's responses; and the CDXJ index lists every page, its offset and length
// locating a record of its URL.
func TestArchiveWARC(t *testing.T) {
	startHot(t)
	backend := s3mem.New()
	s3 := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(s3.Close)
	s3URL := "s3://warc/trawler?endpoint=" + url.QueryEscape(s3.URL) + "&region=us-east-1&use_path_style=true&disable_https=true&anonymous=true"
	queue := "archive-" + fmt.Sprint(time.Now().UnixNano())
	testWorker(t, engine.WorkerOptions{TaskQueue: queue, Redis: shared.redis.Addr()})

	for _, dest := range []string{"file://" + t.TempDir(), s3URL} {
		bucket, err := archive.OpenBucket(context.Background(), dest)
		if strings.HasPrefix(dest, "s3:") {
			// The bucket must exist before the worker writes to it: a run to a missing
			// one fails its start page with the reason.
			if err == nil {
				t.Fatal("a bucket that does not exist opened")
			}
			s := wait(t, start(t, plan(t, "archive.yaml", archiveChain(startSite(t, demosite.Options{Pages: 1}), dest)), queue), 2*time.Minute)
			wantCause := "archive s3://warc/trawler?endpoint=" + url.QueryEscape(s3.URL) + "&region=us-east-1&use_path_style=true&disable_https=true&anonymous=true: bucket warc cannot be written: it does not exist; create it, or check the worker's AWS credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and the URL's region and endpoint"
			if len(s.Failures) != 1 || s.Failures[0].Cause != wantCause {
				t.Errorf("a run archiving to a missing bucket failed %+v; want its start page failed with %q", s.Failures, wantCause)
			}
			if err := backend.CreateBucket("warc"); err != nil {
				t.Fatal(err)
			}
			bucket, err = archive.OpenBucket(context.Background(), dest)
		}
		if err != nil {
			t.Fatal(err)
		}
		site, served := pagesServed(t, demosite.Options{Pages: 1})
		p := plan(t, "archive.yaml", archiveChain(site, dest))
		responses := map[string]string{} // response record id → URL and payload digest, of both runs
		for n := 1; n <= 2; n++ {
			before := len(served())
			id := start(t, p, queue)
			noFailures(t, wait(t, id, 2*time.Minute))
			paths := served()[before:]
			pages := len(paths)
			if pages != 31 {
				t.Fatalf("run %d fetched %d pages, want the feed page and 30 stories", n, pages)
			}
			var entries []archive.Entry
			eventually(t, 30*time.Second, "the run's index lists every page", func() bool {
				entries, err = archive.RunIndex(context.Background(), bucket, tenantOf(t), id)
				return err == nil && len(entries) >= pages
			})
			want := "response"
			if n == 2 {
				want = "revisit"
			}
			checkWARCs(t, bucket, tenantOf(t), id, paths, want, responses)
			checkIndex(t, bucket, entries, id, want)
		}
	}
}

// pagesServed is the demo site behind a proxy that lists the pages it served (every
// request but robots.txt), in order.
func pagesServed(t *testing.T, o demosite.Options) (string, func() []string) {
	t.Helper()
	target, err := url.Parse(startSite(t, o))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var served []string
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/robots.txt" {
			mu.Lock()
			served = append(served, r.URL.RequestURI())
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(served)
	}
}

// checkWARCs reads every WARC file of a run with gowarc's strict reader and with
// readWARC: the run holds one response (or, want "revisit", one revisit) per page the
// site served, each revisit referring to an earlier response of its URL and payload.
// The run's responses are added to responses.
func checkWARCs(t *testing.T, bucket *blob.Bucket, tenant, run string, served []string, want string, responses map[string]string) {
	t.Helper()
	answered := map[string]int{} // responses or revisits by path, as readWARC reads them
	pages := len(served)
	ctx := context.Background()
	it := bucket.List(&blob.ListOptions{Prefix: tenant + "/" + run + "/"})
	requests, answers := map[string]string{}, map[string]string{} // record id → URL
	concurrent := map[string]string{}                             // request's id → the response it names
	files := 0
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
		files++
		data, err := bucket.ReadAll(ctx, obj.Key)
		if err != nil {
			t.Fatal(err)
		}
		recs := readWARC(t, obj.Key, data)
		if len(recs) == 0 || recs[0].header["Warc-Type"] != "warcinfo" {
			t.Errorf("%s does not start with a warcinfo record", obj.Key)
		}
		for _, rec := range recs {
			h := rec.header
			typ, target := h["Warc-Type"], h["Warc-Target-Uri"]
			switch typ {
			case "response":
				responses[h["Warc-Record-Id"]] = target + " " + h["Warc-Payload-Digest"]
			case "revisit":
				if ref := responses[h["Warc-Refers-To"]]; ref != target+" "+h["Warc-Payload-Digest"] || h["Warc-Refers-To-Target-Uri"] != target {
					t.Errorf("%s: the revisit of %s (payload %s) refers to %s (%s), an earlier response of %q", obj.Key, target, h["Warc-Payload-Digest"], h["Warc-Refers-To"], h["Warc-Refers-To-Target-Uri"], ref)
				}
			}
			if typ == want {
				u, _ := url.Parse(target)
				answered[u.RequestURI()]++
			}
		}
		r, err := gowarc.NewWarcFileReaderFromStream(bytes.NewReader(data), 0, gowarc.WithStrictValidation())
		if err != nil {
			t.Fatal(err)
		}
		first := true
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatalf("%s: %v", obj.Key, err)
			}
			if len(rec.Validation) > 0 {
				t.Errorf("%s: record at %d: %v", obj.Key, rec.Offset, rec.Validation)
			}
			w := rec.WarcRecord
			h := w.WarcHeader()
			if first && w.Type() != gowarc.Warcinfo {
				t.Errorf("%s starts with a %s record, want warcinfo", obj.Key, w.Type())
			}
			first = false
			switch w.Type() {
			case gowarc.Request:
				requests[w.RecordId()] = h.Get(gowarc.WarcTargetURI)
				concurrent[w.RecordId()] = h.GetId(gowarc.WarcConcurrentTo)
			case gowarc.Response, gowarc.Revisit:
				if got := strings.ToLower(w.Type().String()); got != want {
					t.Errorf("%s: a %s record for %s, want %s", obj.Key, got, h.Get(gowarc.WarcTargetURI), want)
				}
				answers[w.RecordId()] = h.Get(gowarc.WarcTargetURI)
				if w.Type() == gowarc.Revisit && (h.Get(gowarc.WarcRefersTo) == "" || h.Get(gowarc.WarcRefersToTargetURI) != h.Get(gowarc.WarcTargetURI)) {
					t.Errorf("revisit of %s refers to %q (%s)", h.Get(gowarc.WarcTargetURI), h.Get(gowarc.WarcRefersTo), h.Get(gowarc.WarcRefersToTargetURI))
				}
			}
			rec.Close()
		}
		r.Close()
	}
	if files == 0 || len(answers) != pages || len(requests) != pages {
		t.Fatalf("run %s: %d WARC files hold %d requests and %d %s records, want %d of each", run, files, len(requests), len(answers), want, pages)
	}
	var archived []string
	for id, u := range requests {
		if answers[concurrent[id]] != u {
			t.Errorf("request %s for %s names response %s, which is for %q", id, u, concurrent[id], answers[concurrent[id]])
		}
		parsed, _ := url.Parse(u)
		archived = append(archived, parsed.RequestURI())
	}
	slices.Sort(archived)
	served = slices.Sorted(slices.Values(served))
	if !slices.Equal(archived, served) {
		t.Errorf("run %s archived the pages\n%v\nthe site served\n%v", run, archived, served)
	}
	for _, p := range served {
		if answered[p] != 1 {
			t.Errorf("run %s holds %d %s records of %s, want 1", run, answered[p], want, p)
		}
	}
	if len(answered) != len(served) {
		t.Errorf("run %s holds %s records of %d pages, the site served %d", run, want, len(answered), len(served))
	}
}

// checkIndex reads the record at each index entry's offset and length on its own.
func checkIndex(t *testing.T, bucket *blob.Bucket, entries []archive.Entry, run, want string) {
	t.Helper()
	stories := 0
	for _, e := range entries {
		if e.RunID != run || e.Type != want || e.Status != 200 || e.Digest == "" || e.Canonical == "" || e.At.IsZero() {
			t.Errorf("index entry %+v; want run %s, type %s, status 200, its digest, canonical URL and time", e, run, want)
		}
		if e.Step == "story" && e.Task == "demo.story" {
			stories++
		}
		data, err := archive.ReadRecord(context.Background(), bucket, e)
		if err != nil {
			t.Fatal(err)
		}
		rec, _, _, err := gowarc.NewUnmarshaler(gowarc.WithStrictValidation()).Unmarshal(bufio.NewReader(bytes.NewReader(data)))
		if err != nil {
			t.Fatalf("the record at %s:%d+%d: %v", e.File, e.Offset, e.Length, err)
		}
		if u := rec.WarcHeader().Get(gowarc.WarcTargetURI); u != e.URL || strings.ToLower(rec.Type().String()) != want {
			t.Errorf("the record at %s:%d is a %s of %s, the index says a %s of %s", e.File, e.Offset, rec.Type(), u, want, e.URL)
		}
		rec.Close()
	}
	if stories != 30 {
		t.Errorf("the index lists %d story pages of step story, task demo.story; want 30", stories)
	}
	urls := make([]string, len(entries))
	for i, e := range entries {
		urls[i] = e.URL
	}
	slices.Sort(urls)
	if len(slices.Compact(urls)) != 31 {
		t.Errorf("the index lists %d distinct URLs, want 31", len(urls))
	}
}

// reparseChain lists the demo site's first feed page and stores its 30 stories, with
// author read by the selector given, archiving every page to dir.
func reparseChain(t *testing.T, site, dir, author string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "reparsed.yaml")
	yaml := `name: reparsed
tenant: ` + tenantOf(t) + `
defaults:
  params: {base_url: "` + site + `"}
  archive: {to: "` + dir + `", max_age: 1s}
steps:
  - id: list
    task: generic.html_list
    from: list
    max_depth: 10
    params:
      urls: ['/news?p=1']
      items: tr.athing
      fields:
        link: {css: span.titleline > a, attr: href, type: url}
      detail: link
      next: a.morelink
      max_pages: 1
  - id: story
    task: generic.html_detail
    from: list
    store: [jsonl]
    dedup: "off"
    params:
      fields:
        title: {css: h1.title, required: true}
        author: "` + author + `"
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReparse crawls the demo site with a selector that reads no author, then re-parses
// the archived run with the selector fixed: the dry run counts exactly the 30 records
// whose author differs, the reparse stores the 30 stories again under its own run id
// with every author filled, a page the archive lacks is listed and not fetched, and
// `try --from-archive` prints what `try` printed online — all without one request to
// the site.
// The story step stores every record (dedup: off): dedup keeps 12 bits of a record's
// content, so it takes one changed record in 4,096 for unchanged (docs/dedup.md), and
// the reparse must store all 30 corrected stories.
func TestReparse(t *testing.T) {
	var mu sync.Mutex
	requests := 0
	target, err := url.Parse(startSite(t, demosite.Options{Pages: 2}))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	site := srv.URL
	sent := func() int { mu.Lock(); defer mu.Unlock(); return requests }

	dir := t.TempDir()
	broken, fixed := reparseChain(t, site, dir, ".meta .writer"), reparseChain(t, site, dir, ".meta .author")
	code, first := runWait(t, broken)
	if code != 0 || first.RunID == "" {
		t.Fatalf("the first run exited %d: %+v", code, first)
	}
	stories := func(run string) []crawl.Item {
		var out []crawl.Item
		if err := shared.sink.Scan(func(it crawl.Item) error {
			if it.RunID == run && it.Biz == "reparsed.story" {
				out = append(out, it)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := stories(first.RunID); len(got) != 30 || got[0].Data["author"] != nil && got[0].Data["author"] != "" {
		t.Fatalf("the first run stored %d stories (the first %v), want 30 without an author", len(got), got)
	}
	bucket, err := archive.OpenBucket(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var page string
	eventually(t, 30*time.Second, "the run's index lists every page", func() bool {
		entries, err := archive.RunIndex(context.Background(), bucket, tenantOf(t), first.RunID)
		for _, e := range entries {
			if e.Step == "story" {
				page = e.URL
			}
		}
		return err == nil && len(entries) == 31
	})
	tryArgs := []string{"try", "generic.html_detail", page, "--params", fixed, "--step", "story", "--json"}
	online, stderr, code := trawler(t, append(tryArgs, "--allow-private")...)
	if code != 0 || !strings.Contains(online, `"author":`) {
		t.Fatalf("try online exited %d: %s %s", code, online, stderr)
	}

	before := sent()
	stdout, stderr, code := trawler(t, append([]string{"reparse", fixed, "--run", first.RunID, "--dry-run", "--json"}, stackFlags()...)...)
	if code != 0 {
		t.Fatalf("reparse --dry-run exited %d: %s", code, stderr)
	}
	var dry struct {
		Pages                       int
		NotArchived                 []string `json:"not_archived"`
		Extracted, Stored, Compared int
		OnlyExtracted               int `json:"only_extracted"`
		OnlyStored                  int `json:"only_stored"`
		Fields                      map[string]struct {
			Differ   int
			Examples []struct{ Stored, Now any }
		}
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &dry); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if dry.Pages != 31 || len(dry.NotArchived) != 0 || dry.Extracted != 30 || dry.Stored != 30 || dry.Compared != 30 || dry.OnlyExtracted+dry.OnlyStored != 0 {
		t.Errorf("dry run read %d pages (%v not archived), extracted %d records, the run stored %d, %d compared (%d, %d on one side only); want 31 pages, 30 of each",
			dry.Pages, dry.NotArchived, dry.Extracted, dry.Stored, dry.Compared, dry.OnlyExtracted, dry.OnlyStored)
	}
	if a, ti := dry.Fields["author"], dry.Fields["title"]; a.Differ != 30 || ti.Differ != 0 || len(a.Examples) != 3 || a.Examples[0].Now == "" {
		t.Errorf("dry run: author differs on %d records (examples %+v), title on %d; want 30 and 0", a.Differ, a.Examples, ti.Differ)
	}

	stdout, stderr, code = trawler(t, append([]string{"reparse", fixed, "--run", first.RunID, "--json"}, stackFlags()...)...)
	var again struct {
		RunID       string   `json:"run_id"`
		Of          string   `json:"reparse_of"`
		NotArchived []string `json:"not_archived"`
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &again); code != 0 || err != nil {
		t.Fatalf("reparse exited %d (%v): %s %s", code, err, stdout, stderr)
	}
	got := stories(again.RunID)
	if again.RunID == first.RunID || again.Of != first.RunID || len(again.NotArchived) != 0 || len(got) != 30 {
		t.Fatalf("reparse run %s of %s (%v not archived) stored %d stories; want a new run of %s storing 30\nits result: %s", again.RunID, again.Of, again.NotArchived, len(got), first.RunID, lastLine(stdout))
	}
	for _, it := range got {
		if a, _ := it.Data["author"].(string); a == "" {
			t.Errorf("reparse stored %s without its author: %v", it.Key, it.Data)
		}
	}

	// Two list pages: the second was never archived.
	stdout, stderr, code = trawler(t, append([]string{"reparse", fixed, "--run", first.RunID, "--set", "list.max_pages=2", "--json"}, stackFlags()...)...)
	if err := json.Unmarshal([]byte(lastLine(stdout)), &again); code != 2 || err != nil {
		t.Fatalf("reparse with a page not archived exited %d (%v), want 2 (partial): %s %s", code, err, stdout, stderr)
	}
	if want := []string{site + "/news?p=2"}; !slices.Equal(again.NotArchived, want) {
		t.Errorf("reparse lists %v as not archived, want %v", again.NotArchived, want)
	}

	archived, stderr, code := trawler(t, append(tryArgs, "--from-archive", dir, "--run", first.RunID)...)
	if code != 0 || archived != online {
		t.Errorf("try --from-archive exited %d and printed\n%s\nonline it printed\n%s%s", code, archived, online, stderr)
	}
	if n := sent() - before; n != 0 {
		t.Errorf("re-parsing sent %d requests to the site, want none", n)
	}
}

// archivePages archives n pages of a run, fetched at `at`, as one finished WARC file.
func archivePages(t *testing.T, dest, tenant, run string, at time.Time, n int) {
	t.Helper()
	ws := archive.NewWriters(nil)
	w, err := ws.Get(crawl.Archive{To: dest})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		writePage(t, w, tenant, run, fmt.Sprintf("http://example.com/%s/%d", run, i), at)
	}
	if err := ws.Close(); err != nil {
		t.Fatal(err)
	}
}

func writePage(t *testing.T, w *archive.Writer, tenant, run, u string, at time.Time) {
	t.Helper()
	err := w.Write(archive.Page{Tenant: tenant, RunID: run, Step: "story", Task: "demo.story"}, &fetch.Exchange{
		Method: "GET", URL: u, RequestHeader: http.Header{"Host": {"example.com"}}, Status: "200 OK",
		Header: http.Header{"Content-Type": {"text/html"}}, Body: []byte("<html><body>" + u + "</body></html>"), At: at,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// archiveStats is `trawler archive stats --json`.
type archiveStats struct {
	Tenants []struct {
		Tenant, Run           string
		Files, Pages, Records int
		Bytes                 int64
		Oldest, Newest        time.Time
		Runs                  []struct {
			Run                   string
			Files, Pages, Records int
			Bytes                 int64
			Oldest, Newest        time.Time
		}
	}
	Unindexed []string
}

// TestArchiveRetention archives pages of two tenants, some long ago, to a directory and
// to an S3 bucket (an in-process S3 server), while another file is being written:
// `archive stats` counts exactly the finished files, pages, records and bytes per tenant
// and run; `archive prune` removes, oldest first, the files older than --older-than and
// then a tenant's oldest until it fits in --max-gb — nothing with --dry-run, never the
// file being written — and bad input is refused with the fix.
func TestArchiveRetention(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("warc"); err != nil {
		t.Fatal(err)
	}
	s3 := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(s3.Close)
	s3URL := "s3://warc/kept?endpoint=" + url.QueryEscape(s3.URL) + "&region=us-east-1&use_path_style=true&disable_https=true&anonymous=true"
	now := time.Now().UTC().Truncate(time.Second)
	for _, dest := range []string{"file://" + t.TempDir(), s3URL} {
		t.Run(strings.SplitN(dest, ":", 2)[0], func(t *testing.T) {
			archivePages(t, dest, "a", "r1", now.Add(-40*24*time.Hour), 3)
			archivePages(t, dest, "a", "r2", now.Add(-time.Hour), 2)
			archivePages(t, dest, "a", "r2", now.Add(-time.Minute), 1)
			archivePages(t, dest, "b", "r3", now.Add(-10*24*time.Hour), 1)
			// A file being written: listed by neither command, never removed.
			writing := archive.NewWriters(nil)
			w, err := writing.Get(crawl.Archive{To: dest})
			if err != nil {
				t.Fatal(err)
			}
			writePage(t, w, "a", "r4", "http://example.com/r4", now.Add(-50*24*time.Hour))

			bucket, err := archive.OpenBucket(context.Background(), dest)
			if err != nil {
				t.Fatal(err)
			}
			defer bucket.Close()
			// names are the finished WARC files of a tenant (or of all), with their sizes
			// and those of their indexes.
			names := func(prefix string) (warcs []string, size map[string]int64) {
				size = map[string]int64{}
				it := bucket.List(&blob.ListOptions{Prefix: prefix})
				for {
					obj, err := it.Next(context.Background())
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if strings.HasSuffix(obj.Key, ".warc.gz") {
						warcs = append(warcs, obj.Key)
					}
					if strings.HasSuffix(obj.Key, ".warc.gz") || strings.HasSuffix(obj.Key, ".cdxj") {
						size[obj.Key] = obj.Size
					}
				}
				slices.Sort(warcs)
				return warcs, size
			}
			warcs, size := names("")
			if len(warcs) != 4 {
				t.Fatalf("%d finished WARC files at %s: %v, want 4", len(warcs), dest, warcs)
			}
			bytesOf := func(warcs ...string) (n int64) {
				for _, w := range warcs {
					n += size[w] + size[archive.IndexName(w)]
				}
				return n
			}
			r1, r2old, r2new, r3 := warcs[0], warcs[1], warcs[2], warcs[3]
			if !strings.HasPrefix(r1, "a/r1/") || !strings.HasPrefix(r2old, "a/r2/") || !strings.HasPrefix(r3, "b/r3/") {
				t.Fatalf("files %v are not laid out TENANT/RUN/", warcs)
			}

			stats := func(args ...string) archiveStats {
				t.Helper()
				stdout, stderr, code := trawler(t, append([]string{"archive", "stats", "--to", dest, "--json"}, args...)...)
				var s archiveStats
				if err := json.Unmarshal([]byte(stdout), &s); code != 0 || err != nil {
					t.Fatalf("archive stats exited %d (%v): %s %s", code, err, stdout, stderr)
				}
				return s
			}
			s := stats()
			if len(s.Tenants) != 2 || len(s.Unindexed) != 0 {
				t.Fatalf("stats: %+v; want tenants a and b, no unindexed file", s)
			}
			a, b := s.Tenants[0], s.Tenants[1]
			if a.Tenant != "a" || a.Files != 3 || a.Pages != 6 || a.Records != 3+6*2 || a.Bytes != bytesOf(r1, r2old, r2new) ||
				!a.Oldest.Equal(now.Add(-40*24*time.Hour)) || !a.Newest.Equal(now.Add(-time.Minute)) || len(a.Runs) != 2 {
				t.Errorf("stats of tenant a: %+v; want 3 files, 6 pages, 15 records, %d bytes, 40 days to a minute old, 2 runs", a, bytesOf(r1, r2old, r2new))
			}
			if r := a.Runs[1]; r.Run != "r2" || r.Files != 2 || r.Pages != 3 || r.Records != 8 || r.Bytes != bytesOf(r2old, r2new) || !r.Oldest.Equal(now.Add(-time.Hour)) {
				t.Errorf("stats of run r2: %+v; want 2 files, 3 pages, 8 records, %d bytes, an hour to a minute old", r, bytesOf(r2old, r2new))
			}
			if b.Tenant != "b" || b.Files != 1 || b.Pages != 1 || b.Records != 3 || b.Bytes != bytesOf(r3) || len(b.Runs) != 1 || b.Runs[0].Run != "r3" {
				t.Errorf("stats of tenant b: %+v; want 1 file of run r3, 1 page, 3 records, %d bytes", b, bytesOf(r3))
			}
			if s := stats("--tenant", "b"); len(s.Tenants) != 1 || s.Tenants[0].Tenant != "b" {
				t.Errorf("stats --tenant b: %+v", s)
			}

			type pruned struct {
				DryRun  bool `json:"dry_run"`
				Removed []struct{ File string }
				Bytes   int64
				Kept    int
				Orphans []string `json:"orphan_indexes"`
			}
			prune := func(args ...string) pruned {
				t.Helper()
				stdout, stderr, code := trawler(t, append([]string{"archive", "prune", "--to", dest, "--json"}, args...)...)
				var p pruned
				if err := json.Unmarshal([]byte(stdout), &p); code != 0 || err != nil {
					t.Fatalf("archive prune exited %d (%v): %s %s", code, err, stdout, stderr)
				}
				return p
			}
			files := func(p pruned) (out []string) {
				for _, r := range p.Removed {
					out = append(out, r.File)
				}
				return out
			}
			// Keep the newest file of a: its bytes and a few more.
			maxGB := fmt.Sprintf("%.15f", float64(bytesOf(r2new)+16)/(1<<30))
			p := prune("--older-than", "30d", "--max-gb", maxGB, "--dry-run")
			if want := []string{r1, r2old}; !p.DryRun || !slices.Equal(files(p), want) || p.Bytes != bytesOf(r1, r2old) || p.Kept != 2 {
				t.Errorf("prune --dry-run: %+v; want %v (%d bytes) listed, 2 kept", p, want, bytesOf(r1, r2old))
			}
			if got, _ := names(""); !slices.Equal(got, warcs) {
				t.Errorf("prune --dry-run left %v, want every file %v", got, warcs)
			}
			if p := prune("--older-than", "30d"); !slices.Equal(files(p), []string{r1}) || p.Kept != 3 {
				t.Errorf("prune --older-than 30d: %+v; want %s removed, 3 kept", p, r1)
			}
			if p := prune("--max-gb", maxGB, "--tenant", "a"); !slices.Equal(files(p), []string{r2old}) || p.Kept != 1 {
				t.Errorf("prune --max-gb %s --tenant a: %+v; want %s removed, 1 kept", maxGB, p, r2old)
			}
			left, size := names("")
			if want := []string{r2new, r3}; !slices.Equal(left, want) || len(size) != 4 {
				t.Errorf("after pruning %s holds %v (%d objects), want %v and their indexes", dest, left, len(size), want)
			}
			// A prune cut short between a file and its index leaves the index naming
			// nothing: readers skip it, stats do not count it, the next prune removes it.
			if err := bucket.Delete(context.Background(), r3); err != nil {
				t.Fatal(err)
			}
			if entries, err := archive.RunIndex(context.Background(), bucket, "b", "r3"); err != nil || len(entries) != 0 {
				t.Errorf("the index of run r3, whose file is gone: %d entries (%v); want none read", len(entries), err)
			}
			if s := stats("--tenant", "b"); len(s.Tenants) != 0 {
				t.Errorf("stats of tenant b, whose one file is gone: %+v; want nothing", s)
			}
			if p := prune("--older-than", "30d"); len(p.Removed) != 0 || !slices.Equal(p.Orphans, []string{archive.IndexName(r3)}) {
				t.Errorf("prune after a cut-short one: %+v; want only the orphan index %s removed", p, archive.IndexName(r3))
			}
			if _, size := names(""); len(size) != 2 {
				t.Errorf("after pruning the orphan index %s holds %v; want %s and its index", dest, size, r2new)
			}
			if err := writing.Close(); err != nil {
				t.Fatal(err)
			}
			if s := stats("--tenant", "a"); len(s.Tenants) != 1 || s.Tenants[0].Files != 2 || s.Tenants[0].Runs[1].Run != "r4" {
				t.Errorf("the file being written during prune is not there once finished: %+v", s)
			}
		})
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"prune", "--to", "/tmp", "--older-than", "30"}, `--older-than "30": give a positive age with its unit: 30d (days), 12h, 90m, 1d12h`},
		{[]string{"prune", "--to", "/tmp", "--older-than", "-1d"}, `--older-than "-1d": give a positive age with its unit: 30d (days), 12h, 90m, 1d12h`},
		{[]string{"prune", "--to", "/tmp", "--max-gb", "-5"}, `--max-gb "-5": give the size to keep per tenant in GB, a number above 0: 500, 0.5`},
		{[]string{"prune", "--to", "/tmp"}, `give --older-than AGE (30d) or --max-gb N (per tenant), or both: what to keep`},
		{[]string{"stats", "--to", "ftp://host/warc"}, `--to ftp://host/warc: ftp:// is not a destination for WARC files; use an absolute directory, file:///DIR or s3://BUCKET/PREFIX (gs:// and azblob:// need their gocloud.dev driver built in)`},
		{[]string{"stats", "--to", "/no/such/warc"}, `--to /no/such/warc: no such directory; give the archive.to of the chain whose archive to read`},
		{[]string{"stats"}, `--to: name the archive, as a chain's archive.to: an absolute directory, file:///DIR or s3://BUCKET/PREFIX (or set TRAWLER_ARCHIVE)`},
	} {
		_, stderr, code := trawler(t, append([]string{"archive"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("archive %v exited %d: %s\nwant the error %s", c.args, code, stderr, c.want)
		}
	}
}

// warcRecord is a record as readWARC reads it.
type warcRecord struct {
	header  map[string]string // WARC header fields by their canonical name
	block   []byte
	payload []byte // a request's, response's or revisit's HTTP body
}

var (
	warcRecordID = regexp.MustCompile(`^<[A-Za-z][A-Za-z0-9+.-]*:[^<>\s]+>$`)
	warcTypes    = []string{"warcinfo", "response", "resource", "request", "metadata", "revisit", "conversion", "continuation"}
)

// readWARC reads a WARC 1.1 file as the standard writes it, independently of the WARC
// library the archive uses: each record a gzip member of its own, a version line, header
// fields, a block of exactly Content-Length bytes and two CRLFs; WARC-Record-ID,
// Content-Length, WARC-Date and WARC-Type present and well formed, record ids unique;
// WARC-Block-Digest and WARC-Payload-Digest (sha1, base32) recomputed and equal. A
// revisit's payload is not in it: its payload digest is checked against the response
// it refers to, by the caller.
func readWARC(t *testing.T, name string, data []byte) []warcRecord {
	t.Helper()
	var out []warcRecord
	ids := map[string]bool{}
	in := bufio.NewReader(bytes.NewReader(data))
	for n := 0; ; n++ {
		if _, err := in.Peek(1); err == io.EOF {
			return out
		}
		zr, err := gzip.NewReader(in)
		if err != nil {
			t.Fatalf("%s: record %d is no gzip member: %v", name, n, err)
		}
		zr.Multistream(false) // one member, one record
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: record %d: %v", name, n, err)
		}
		where := fmt.Sprintf("%s record %d", name, n)
		head, rest, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
		if !ok {
			t.Fatalf("%s: no blank line after its header", where)
		}
		lines := strings.Split(string(head), "\r\n")
		if lines[0] != "WARC/1.1" {
			t.Fatalf("%s: version line %q, want WARC/1.1", where, lines[0])
		}
		rec := warcRecord{header: map[string]string{}}
		for _, l := range lines[1:] {
			k, v, ok := strings.Cut(l, ":")
			if !ok || k == "" || strings.ContainsAny(k, " \t") {
				t.Fatalf("%s: header line %q is no field", where, l)
			}
			k = http.CanonicalHeaderKey(k)
			if _, dup := rec.header[k]; dup && k != "Warc-Concurrent-To" {
				t.Errorf("%s: field %s repeated", where, k)
			}
			rec.header[k] = strings.TrimSpace(v)
		}
		h := rec.header
		length, err := strconv.Atoi(h["Content-Length"])
		if err != nil || length < 0 || len(rest) != length+4 || string(rest[length:]) != "\r\n\r\n" {
			t.Fatalf("%s: Content-Length %q, and %d bytes follow the header; want the block then CRLF CRLF ending the member", where, h["Content-Length"], len(rest))
		}
		rec.block = rest[:length]
		id := h["Warc-Record-Id"]
		if !warcRecordID.MatchString(id) || ids[id] {
			t.Errorf("%s: WARC-Record-ID %q is no <URI> or is not unique", where, id)
		}
		ids[id] = true
		if _, err := time.Parse(time.RFC3339Nano, h["Warc-Date"]); err != nil || !strings.HasSuffix(h["Warc-Date"], "Z") {
			t.Errorf("%s: WARC-Date %q is no UTC W3C-ISO8601 date", where, h["Warc-Date"])
		}
		if !slices.Contains(warcTypes, h["Warc-Type"]) {
			t.Errorf("%s: WARC-Type %q", where, h["Warc-Type"])
		}
		if d, ok := h["Warc-Block-Digest"]; !ok || d != sha1Base32(rec.block) {
			t.Errorf("%s (%s): WARC-Block-Digest %q, the block's is %s", where, h["Warc-Type"], d, sha1Base32(rec.block))
		}
		switch h["Warc-Type"] {
		case "request", "response", "revisit":
			want := map[string]string{"request": "application/http;msgtype=request", "response": "application/http;msgtype=response", "revisit": "application/http;msgtype=response"}[h["Warc-Type"]]
			if strings.ReplaceAll(h["Content-Type"], " ", "") != want {
				t.Errorf("%s: Content-Type %q, want %s", where, h["Content-Type"], want)
			}
			if h["Warc-Target-Uri"] == "" {
				t.Errorf("%s: no WARC-Target-URI", where)
			}
			httpHead, body, ok := bytes.Cut(rec.block, []byte("\r\n\r\n"))
			if !ok || !bytes.HasPrefix(httpHead, []byte("HTTP/1.")) && h["Warc-Type"] != "request" {
				t.Errorf("%s: the block is no HTTP message: %q", where, rec.block[:min(len(rec.block), 80)])
			}
			rec.payload = body
			if d, ok := h["Warc-Payload-Digest"]; h["Warc-Type"] == "response" && (!ok || d != sha1Base32(body)) {
				t.Errorf("%s: WARC-Payload-Digest %q, the HTTP body's is %s", where, d, sha1Base32(body))
			}
			if h["Warc-Type"] == "revisit" && (len(body) != 0 || h["Warc-Profile"] != "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest") {
				t.Errorf("%s: a revisit of profile %q with %d bytes of body; want identical-payload-digest, headers only", where, h["Warc-Profile"], len(body))
			}
		case "warcinfo":
			if h["Content-Type"] != "application/warc-fields" {
				t.Errorf("%s: warcinfo of Content-Type %q", where, h["Content-Type"])
			}
		}
		out = append(out, rec)
	}
}

func sha1Base32(b []byte) string {
	sum := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
}
