// Package archive writes the raw HTTP exchanges of the pages of steps with `archive:`
// as WARC 1.1 files, with a CDXJ index beside each, to a directory or object storage
// (gocloud.dev/blob: file://, s3://).
//
// A worker keeps one Writer per destination (Writers), shared by all its batches. Each
// run gets its own files, under TENANT/RUN/ in the destination, so a run's pages are a
// listing away. A file holds a warcinfo record and, for each page, a request record and
// a response record — or a revisit record (identical payload digest) when the page's
// payload is the one last archived for its URL — each record its own gzip member. A file
// is finished when it reaches its size, its age, or the worker stops: it is written
// under a temporary name and renamed (uploaded, for object storage) whole when closed,
// and only then is its index written, so no index line ever points into an unfinished
// file. Records are written here (record.go) and read back by github.com/nlnwa/gowarc.
package archive

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nlnwa/gowarc/v3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/s3blob" // s3:// destinations

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/monitor"
)

// Page is who fetched an archived page, for its index line.
type Page struct {
	Tenant, RunID, Step, Task string
}

// Writers are a worker's open archives, one per destination and settings.
type Writers struct {
	Log *slog.Logger
	// Software names the writer in each file's warcinfo record.
	Software string

	mu     sync.Mutex
	open   map[crawl.Archive]*Writer
	tag    string // tells this worker's file names from other workers'
	seq    atomic.Int64
	closed bool
}

// NewWriters returns a worker's archives; Close finishes their files.
func NewWriters(log *slog.Logger) *Writers {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return &Writers{Log: cmp.Or(log, slog.Default()), Software: "Trawler", open: map[crawl.Archive]*Writer{}, tag: hex.EncodeToString(b)}
}

// Get is the writer of a step's archive, opened the first time: a destination that
// cannot be written (a bucket that does not exist, a directory that cannot be made) is
// an error naming it.
func (ws *Writers) Get(a crawl.Archive) (*Writer, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return nil, errors.New("the worker is stopping")
	}
	if w := ws.open[a]; w != nil {
		return w, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket, err := OpenBucket(ctx, a.To)
	if err != nil {
		return nil, err
	}
	w := &Writer{
		ws: ws, dest: a.To, bucket: bucket,
		maxBytes: int64(cmp.Or(a.MaxMB, crawl.DefaultArchiveMaxMB)) << 20,
		maxAge:   cmp.Or(a.MaxAge, crawl.DefaultArchiveMaxAge),
		files:    map[string]*file{}, last: map[string]revisitRef{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go w.rotate()
	ws.open[a] = w
	return w, nil
}

// Close finishes every open file of every archive; what it cannot finish is logged too.
func (ws *Writers) Close() error {
	ws.mu.Lock()
	ws.closed = true
	open := ws.open
	ws.open = nil
	ws.mu.Unlock()
	var errs []error
	for _, w := range open {
		if err := w.Close(); err != nil {
			ws.Log.Error("archive: files not finished", "dest", crawl.RedactURL(w.dest), "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// OpenBucket opens an `archive.to`: a directory (made when missing) or a URL, whose
// path is the prefix of every name written. An s3:// bucket that does not exist or
// cannot be reached is an error that says so.
func OpenBucket(ctx context.Context, to string) (*blob.Bucket, error) {
	if err := crawl.CheckArchiveTo(to); err != nil {
		return nil, fmt.Errorf("archive.to: %w", err)
	}
	shown := crawl.RedactURL(to)
	dir := to
	if strings.HasPrefix(to, "file://") {
		u, _ := url.Parse(to) // CheckArchiveTo parsed it
		dir = u.Path
	}
	if !strings.Contains(dir, "://") {
		// Sidecar metadata files would sit among the WARCs; temporary files are made
		// next to the final one, so that finishing a file is a rename on one disk.
		b, err := fileblob.OpenBucket(dir, &fileblob.Options{CreateDir: true, NoTempDir: true, Metadata: fileblob.MetadataDontWrite})
		if err != nil {
			return nil, fmt.Errorf("archive %s: %v; make the directory writable by the worker, or choose another", shown, err)
		}
		return b, nil
	}
	u, _ := url.Parse(to)
	prefix := strings.Trim(u.Path, "/")
	u.Path = ""
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("archive %s: %v", shown, err)
	}
	if ok, err := b.IsAccessible(ctx); err != nil || !ok {
		b.Close()
		why := "it does not exist"
		if err != nil {
			why = err.Error()
		}
		return nil, fmt.Errorf("archive %s: bucket %s cannot be written: %s; create it, or check the worker's AWS credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and the URL's region and endpoint", shown, u.Host, why)
	}
	if prefix != "" {
		b = blob.PrefixedBucket(b, prefix+"/")
	}
	return b, nil
}

// Writer writes the WARC files of one destination, for every run that archives there.
// It is safe for concurrent use.
type Writer struct {
	ws       *Writers
	dest     string
	bucket   *blob.Bucket
	maxBytes int64
	maxAge   time.Duration

	mu         sync.Mutex
	files      map[string]*file      // the file being written, by run
	last       map[string]revisitRef // the last archived response of each URL, in finished files
	gz         gzipper               // compresses each record (deflate.go)
	record     bytes.Buffer          // a record, written
	member     []byte                // a record, compressed
	head       bytes.Buffer          // a record's fields, written
	stop, done chan struct{}
}

// revisitRef is what a revisit record refers to.
type revisitRef struct {
	digest, id, uri, date string
}

// file is one WARC file being written.
type file struct {
	name    string // TENANT/RUN/STAMP-SEQ-TAG.warc.gz
	w       *blob.Writer
	buf     *bufio.Writer      // in front of w: one write per 64 KiB, not per record
	cancel  context.CancelFunc // abandons w
	size    int64
	opened  time.Time
	info    string // the warcinfo record's id
	index   []Entry
	written map[string]revisitRef // responses in this file, by URL
}

// Recorder is a fetch.Recorder that archives the exchanges of page p here.
func (w *Writer) Recorder(p Page) fetch.Recorder { return recorder{w, p} }

type recorder struct {
	w *Writer
	p Page
}

// Record archives one exchange. When the archive cannot be written the page goes on
// (its items are stored): the failure is logged and counted
// (trawler_archive_failures_total), never the page's.
func (r recorder) Record(ctx context.Context, ex *fetch.Exchange) {
	if err := r.w.Write(r.p, ex); err != nil {
		monitor.ArchiveFailures.Inc()
		r.w.ws.Log.Error("archive: page not archived", "dest", crawl.RedactURL(r.w.dest), "url", crawl.RedactURL(ex.URL), "run", r.p.RunID, "err", err)
	}
}

// Write archives one exchange of page p: a request record and a response record, or a
// revisit record when the response's payload is the one last archived for its URL.
func (w *Writer) Write(p Page, ex *fetch.Exchange) error {
	digest := payloadDigest(ex.Body)
	at := ex.At.UTC()
	date := at.Format(time.RFC3339Nano)
	var reqHead, respHead bytes.Buffer
	requestHead(&reqHead, ex.Method, ex.URL, ex.RequestProto, ex.RequestHeader)
	responseHead(&respHead, ex.Proto, ex.Status, ex.Header, len(ex.Body))
	respID := newRecordID()
	// The fields of both records: who, when, where from.
	about := func(typ, id string) fields {
		f := fields{"WARC-Type", typ, "WARC-Record-ID", id, "WARC-Date", date, "WARC-Target-URI", ex.URL}
		if ex.RemoteAddr != "" {
			f.add("WARC-IP-Address", ex.RemoteAddr)
		}
		return f
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	f, err := w.fileFor(p, at)
	if err != nil {
		return err
	}
	req := about("request", newRecordID())
	req.add("WARC-Warcinfo-ID", f.info)
	req.add("WARC-Concurrent-To", respID)
	req.add("Content-Type", "application/http;msgtype=request")
	if _, _, err := w.append(f, req, reqHead.Bytes(), ex.RequestBody); err != nil {
		return w.fail(f, err)
	}
	kind := "response"
	resp := about(kind, respID)
	resp.add("WARC-Warcinfo-ID", f.info)
	resp.add("Content-Type", "application/http;msgtype=response")
	resp.add("WARC-Payload-Digest", digest)
	block := [][]byte{respHead.Bytes(), ex.Body}
	prev, seen := f.written[ex.URL]
	if !seen {
		prev, seen = w.last[ex.URL]
	}
	if seen && prev.digest == digest {
		// The payload is the one archived before: the record holds the headers only.
		kind = "revisit"
		resp[1] = kind
		resp.add("WARC-Profile", revisitProfile)
		resp.add("WARC-Refers-To", prev.id)
		resp.add("WARC-Refers-To-Target-URI", prev.uri)
		resp.add("WARC-Refers-To-Date", prev.date)
		resp.add("WARC-Truncated", "length")
		block = block[:1]
	}
	offset, length, err := w.append(f, resp, block...)
	if err != nil {
		return w.fail(f, err)
	}
	monitor.ArchivedPages.WithLabelValues(kind).Inc()
	if kind == "response" {
		f.written[ex.URL] = revisitRef{digest: digest, id: respID, uri: ex.URL, date: date}
	}
	canonical, err := crawl.CanonicalURL(ex.URL, crawl.CanonOptions{})
	if err != nil {
		canonical = ex.URL
	}
	f.index = append(f.index, Entry{
		URL: ex.URL, Canonical: canonical, At: at, Status: statusCode(ex.Status), Digest: digest, Type: kind,
		Mime: ex.Header.Get("Content-Type"), RunID: p.RunID, Step: p.Step, Task: p.Task, Tenant: p.Tenant,
		File: f.name, Offset: offset, Length: length,
	})
	if f.size >= w.maxBytes {
		return w.finish(p.RunID, f)
	}
	return nil
}

// gowarcNew serializes making gowarc's unmarshalers: making one sets a global of
// github.com/google/uuid (EnableRandPool), a data race when archived pages are read
// back on several goroutines at once.
var gowarcNew sync.Mutex

func newUnmarshaler() gowarc.Unmarshaler {
	gowarcNew.Lock()
	defer gowarcNew.Unlock()
	return gowarc.NewUnmarshaler()
}

// fileFor is the open file of p's run, opened (with its warcinfo record) when the run
// has none.
func (w *Writer) fileFor(p Page, at time.Time) (*file, error) {
	if f := w.files[p.RunID]; f != nil {
		return f, nil
	}
	name := fmt.Sprintf("%s/%s/%s-%05d-%s.warc.gz", cmp.Or(p.Tenant, crawl.DefaultTenant), p.RunID, at.Format("20060102150405"), w.ws.seq.Add(1), w.ws.tag)
	ctx, cancel := context.WithCancel(context.Background())
	bw, err := w.bucket.NewWriter(ctx, name, &blob.WriterOptions{ContentType: "application/warc"})
	if err != nil {
		cancel()
		return nil, err
	}
	f := &file{name: name, w: bw, buf: bufio.NewWriterSize(bw, 64<<10), cancel: cancel, opened: time.Now(), written: map[string]revisitRef{}, info: newRecordID()}
	var info bytes.Buffer
	fmt.Fprintf(&info, "software: %s\r\nformat: WARC File Format 1.1\r\nconformsTo: https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\nisPartOf: %s\r\ndescription: run %s of tenant %s\r\n",
		w.ws.Software, p.RunID, p.RunID, cmp.Or(p.Tenant, crawl.DefaultTenant))
	head := fields{
		"WARC-Type", "warcinfo", "WARC-Record-ID", f.info, "WARC-Date", at.UTC().Format(time.RFC3339Nano),
		"WARC-Filename", name[strings.LastIndex(name, "/")+1:], "Content-Type", "application/warc-fields",
	}
	if _, _, err := w.append(f, head, info.Bytes()); err != nil {
		w.abandon(f)
		return nil, fmt.Errorf("warcinfo record: %w", err)
	}
	w.files[p.RunID] = f
	return f, nil
}

// append writes a record to f as one gzip member and returns where it is in the file.
// The compressor and its buffers are reused (w.mu is held).
func (w *Writer) append(f *file, rec fields, block ...[]byte) (offset, length int64, err error) {
	w.record.Reset()
	if err := writeRecord(&w.record, &w.head, rec, block...); err != nil {
		return 0, 0, err
	}
	w.member = w.gz.appendGzip(w.member[:0], w.record.Bytes())
	offset = f.size
	n, err := f.buf.Write(w.member)
	f.size += int64(n)
	return offset, int64(n), err
}

// fail drops a file that could not be written (the records it held are lost; its
// index is never written), so the run's next page starts a new one.
func (w *Writer) fail(f *file, err error) error {
	for run, g := range w.files {
		if g == f {
			delete(w.files, run)
		}
	}
	f.lost()
	w.abandon(f)
	return fmt.Errorf("writing %s: %w", f.name, err)
}

// lost counts the pages a file held that will never be read, since it is not finished:
// their items were stored, their exchanges are not archived.
func (f *file) lost() { monitor.ArchiveFailures.Add(float64(len(f.index))) }

// abandon discards a file being written: cancelling its writer leaves nothing behind.
func (w *Writer) abandon(f *file) {
	f.cancel()
	_ = f.w.Close() // with its context done, the write is abandoned, not finished
}

// finish closes a run's file (renamed or uploaded whole), then writes its index.
func (w *Writer) finish(run string, f *file) error {
	delete(w.files, run)
	defer f.cancel()
	err := f.buf.Flush()
	if err != nil {
		f.cancel() // a file without its last records is abandoned, not finished
	}
	if cerr := f.w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		f.lost()
		return fmt.Errorf("finishing %s: %w", f.name, err)
	}
	for u, ref := range f.written {
		w.last[u] = ref
	}
	if err := writeIndex(w.bucket, f); err != nil {
		return fmt.Errorf("index of %s: %w", f.name, err)
	}
	return nil
}

// rotate finishes files once they are maxAge old, until Close.
func (w *Writer) rotate() {
	defer close(w.done)
	// A file is finished within a quarter of maxAge of its time, looking at most every
	// second and at least every 100ms.
	t := time.NewTicker(min(max(w.maxAge/4, 100*time.Millisecond), time.Second))
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		for run, f := range w.files {
			if time.Since(f.opened) >= w.maxAge {
				if err := w.finish(run, f); err != nil {
					w.ws.Log.Error("archive: file not finished", "dest", crawl.RedactURL(w.dest), "err", err)
				}
			}
		}
		w.mu.Unlock()
	}
}

// Close finishes every open file and closes the destination.
func (w *Writer) Close() error {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for _, run := range slices.Sorted(maps.Keys(w.files)) {
		errs = append(errs, w.finish(run, w.files[run]))
	}
	errs = append(errs, w.bucket.Close())
	return errors.Join(errs...)
}

// statusCode is the code of a status ("404 Not Found"), 0 when it has none.
func statusCode(status string) int {
	code, _, _ := strings.Cut(status, " ")
	n, _ := strconv.Atoi(code)
	return n
}
