// Package jsonl is the file sink: one `<dir>/<biz>.jsonl` per task, one item per line.
//
// It is idempotent across retried batches and safe for several worker processes on one
// machine: every write takes an exclusive flock on the file, first reads what other
// writers appended since it last looked, drops items whose (run_id, key) is already in
// the file, repairs a torn last line left by a killed writer, and appends the rest. A run
// therefore holds each key once. Records survive a killed process (they are in the page
// cache when Write returns); they are not fsynced, so a power loss may cost the last
// writes — production deployments keep their durable copy in Kafka, MongoDB and HBase.
package jsonl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/itemjson"
)

// FailuresFile is the name of the file failed inputs are recorded in.
const FailuresFile = "_failures.jsonl"

// Sink writes items to JSONL files in one directory.
type Sink struct {
	dir   string
	mu    sync.Mutex
	files map[string]*file
}

// file indexes the lines of one file by run, for the runs written to lately: a worker
// that lives for months writing millions of items holds the keys of its current runs,
// not of every run it ever wrote. A run left idle for runIdle is dropped from the index,
// keeping only where its lines begin; a write to it later (a batch retried after a long
// outage) reads its lines again from there.
type file struct {
	mu      sync.Mutex
	path    string
	offset  int64 // bytes of the file already indexed
	runs    map[string]*runLines
	dropped map[string]int64 // runs dropped from the index: the offset of their first line
	swept   time.Time        // when idle runs were last dropped
}

// runLines is the ids of one run's lines in a file (see record).
type runLines struct {
	ids   map[string]struct{}
	first int64 // the offset of the run's first line
	used  time.Time
}

// runIdle is how long a run is not written to before its index is dropped.
var runIdle = 10 * time.Minute

// Open returns a sink writing under dir (created if missing).
func Open(dir string) (*Sink, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("jsonl sink: create %s: %w", dir, err)
	}
	return &Sink{dir: dir, files: map[string]*file{}}, nil
}

// Name implements storage.Sink.
func (s *Sink) Name() string { return "jsonl" }

// Dir is the directory the files live in.
func (s *Sink) Dir() string { return s.dir }

// Path is the file holding items of one biz (site.task).
func (s *Sink) Path(biz string) string { return filepath.Join(s.dir, biz+".jsonl") }

func (s *Sink) file(name string) *file {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[name]
	if !ok {
		f = &file{path: filepath.Join(s.dir, name), runs: map[string]*runLines{}, dropped: map[string]int64{}}
		s.files[name] = f
	}
	return f
}

// Write implements storage.Sink.
func (s *Sink) Write(ctx context.Context, items []crawl.Item) error {
	enc := itemEncoder{itemjson.Get()}
	defer enc.Release()
	for _, group := range byBiz(items) {
		if err := ctx.Err(); err != nil {
			return err
		}
		// The group's lines go one after the other into the encoder's buffer, which is
		// then the block to append when the file holds none of them yet.
		enc.Buf.Reset()
		recs := make([]record, len(group))
		for i, it := range group {
			start := enc.Buf.Len()
			if _, err := enc.encode(it); err != nil {
				return fmt.Errorf("jsonl sink: encode item %s: %w", it.Key, err)
			}
			enc.Buf.WriteByte('\n')
			recs[i] = record{run: it.RunID, id: it.Key, line: enc.Buf.Bytes()[start:]}
		}
		if err := s.file(group[0].Biz+".jsonl").append(recs, enc.Buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// byBiz splits items by biz (one file each), in the order of their biz names.
func byBiz(items []crawl.Item) [][]crawl.Item {
	if len(items) == 0 || !slices.ContainsFunc(items, func(it crawl.Item) bool { return it.Biz != items[0].Biz }) {
		return [][]crawl.Item{items} // the common case: a step's items share one biz
	}
	groups := map[string][]crawl.Item{}
	for _, it := range items {
		groups[it.Biz] = append(groups[it.Biz], it)
	}
	out := make([][]crawl.Item, 0, len(groups))
	for _, biz := range slices.Sorted(maps.Keys(groups)) {
		out = append(out, groups[biz])
	}
	return out
}

// WriteFailures implements storage.FailureLog: one line per failed input, kept once per
// run, step and input.
func (s *Sink) WriteFailures(_ context.Context, runID string, failures []crawl.Failure) error {
	recs := make([]record, len(failures))
	for i, f := range failures {
		f = f.Redacted()
		line, err := json.Marshal(struct {
			RunID string `json:"run_id"`
			crawl.Failure
		}{runID, f})
		if err != nil {
			return err
		}
		in, _ := json.Marshal(f.Input)
		recs[i] = record{run: runID, id: f.Step + "\x00" + string(in), line: append(line, '\n')}
	}
	return s.file(FailuresFile).append(recs, nil)
}

// record is one line to append (its newline included) and what identifies it within
// its run: an item's key, a failure's step and input.
type record struct {
	run, id string
	line    []byte
}

// identity is how a line is recognised when the file is re-read.
type identity struct {
	RunID string          `json:"run_id"`
	Key   string          `json:"key"`
	Step  string          `json:"step"`
	Input json.RawMessage `json:"input"`
}

// String is the line's id within its run (record.id).
func (id identity) String() string {
	if id.Key != "" {
		return id.Key
	}
	var in bytes.Buffer
	if err := json.Compact(&in, id.Input); err != nil {
		in.Write(id.Input)
	}
	return id.Step + "\x00" + in.String()
}

// append writes the records the file does not hold yet. block, when not nil, is all
// their lines in order: written as it is when none is in the file already.
func (f *file) append(recs []record, block []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fh, err := os.OpenFile(f.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("jsonl sink: open %s: %w", f.path, err)
	}
	defer fh.Close()
	if err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("jsonl sink: lock %s: %w", f.path, err)
	}
	defer syscall.Flock(int(fh.Fd()), syscall.LOCK_UN)
	end, err := f.catchUp(fh)
	if err != nil {
		return err
	}
	kept := 0
	var run *runLines
	for i, r := range recs {
		if i == 0 || r.run != recs[i-1].run { // a write's records are mostly of one run
			if run, err = f.run(fh, r.run, end); err != nil {
				return err
			}
		}
		if _, dup := run.ids[r.id]; dup {
			recs[i].line = nil
			continue
		}
		run.ids[r.id] = struct{}{}
		kept++
	}
	f.dropIdle()
	if kept == 0 {
		return nil
	}
	if block == nil || kept < len(recs) {
		block = nil
		for _, r := range recs {
			block = append(block, r.line...)
		}
	}
	if _, err := fh.WriteAt(block, end); err != nil {
		// A write that fails (a full disk) leaves its records unseen, so the batch's
		// retry stores them: those kept here were not seen before this write.
		for _, r := range recs {
			if l := f.runs[r.run]; r.line != nil && l != nil {
				delete(l.ids, r.id)
			}
		}
		return fmt.Errorf("jsonl sink: write %s: %w", f.path, err)
	}
	f.offset = end + int64(len(block))
	return nil
}

// catchUp indexes lines appended since the last look (by this or another process) and
// cuts off a torn last line. It returns the offset to append at.
func (f *file) catchUp(fh *os.File) (int64, error) {
	st, err := fh.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if size < f.offset { // truncated or replaced behind our back: re-index from scratch
		f.offset, f.runs, f.dropped = 0, map[string]*runLines{}, map[string]int64{}
	}
	if size == f.offset {
		return size, nil
	}
	// What the file held before this process first looked is noted by run, where each
	// begins, not indexed: a run is read again when it is written to (run), so a worker
	// that starts beside a large file indexes the runs it writes, not the file.
	first := f.offset == 0
	pos, err := f.eachLine(fh, f.offset, size, func(at int64, id identity) {
		_, dropped := f.dropped[id.RunID]
		switch {
		case dropped: // read again when written to
		case first && f.runs[id.RunID] == nil:
			f.dropped[id.RunID] = at
		default:
			f.lines(id.RunID, at).ids[id.String()] = struct{}{}
		}
	})
	if err != nil {
		return 0, err
	}
	if pos < size { // a writer died mid-line: drop the fragment
		if err := fh.Truncate(pos); err != nil {
			return 0, fmt.Errorf("jsonl sink: repair torn line in %s: %w", f.path, err)
		}
	}
	f.offset = pos
	return pos, nil
}

// lines is the index of a run the file holds, begun at offset at when new.
func (f *file) lines(run string, at int64) *runLines {
	l := f.runs[run]
	if l == nil {
		l = &runLines{ids: map[string]struct{}{}, first: at}
		f.runs[run] = l
	}
	l.used = time.Now()
	return l
}

// run is the index of a run about to be written at offset end: a run dropped from the
// index has its lines read again first, from where they begin up to end.
func (f *file) run(fh *os.File, run string, end int64) (*runLines, error) {
	first, dropped := f.dropped[run]
	if !dropped {
		return f.lines(run, end), nil
	}
	l := f.lines(run, first)
	if _, err := f.eachLine(fh, first, end, func(_ int64, id identity) {
		if id.RunID == run {
			l.ids[id.String()] = struct{}{}
		}
	}); err != nil {
		delete(f.runs, run)
		return nil, err
	}
	delete(f.dropped, run)
	return l, nil
}

// eachLine calls fn with the offset and identity of every complete line of the file
// between from and to (a line that is no record is skipped), and returns the offset
// after the last complete line: short of to when a writer died mid-line.
func (f *file) eachLine(fh *os.File, from, to int64, fn func(at int64, id identity)) (int64, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(fh, from, to-from), 1<<20)
	pos := from
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			var id identity
			if json.Unmarshal(line, &id) == nil {
				fn(pos, id)
			}
			pos += int64(len(line))
		}
		if err == io.EOF {
			return pos, nil
		}
		if err != nil {
			return 0, fmt.Errorf("jsonl sink: read %s: %w", f.path, err)
		}
	}
}

// dropIdle drops the index of every run not written to for runIdle, now and then.
func (f *file) dropIdle() {
	now := time.Now()
	if now.Sub(f.swept) < runIdle/10 {
		return
	}
	f.swept = now
	for run, l := range f.runs {
		if now.Sub(l.used) >= runIdle {
			delete(f.runs, run)
			f.dropped[run] = l.first
		}
	}
}

// Count implements storage.Sink: the records of a run across all item files.
func (s *Sink) Count(_ context.Context, runID string) (int, error) {
	n := 0
	err := s.Scan(func(it crawl.Item) error {
		if it.RunID == runID {
			n++
		}
		return nil
	})
	return n, err
}

// Scan calls fn for every item in every item file.
func (s *Sink) Scan(fn func(crawl.Item) error) error {
	names, err := filepath.Glob(filepath.Join(s.dir, "*.jsonl"))
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.HasPrefix(filepath.Base(name), "_") {
			continue
		}
		if err := ReadFile(name, func(it crawl.Item) error { return fn(it) }); err != nil {
			return err
		}
	}
	return nil
}

// ReadFile decodes every complete line of one JSONL file (a torn last line, left by a
// writer that was killed, is not a record and is skipped).
func ReadFile(path string, fn func(crawl.Item) error) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	r := bufio.NewReaderSize(fh, 1<<20)
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if err == io.EOF {
			return nil // b, if any, is a torn fragment
		}
		if err != nil {
			return err
		}
		var it crawl.Item
		if err := json.Unmarshal(b, &it); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if err := fn(it); err != nil {
			return err
		}
	}
}

// Close implements storage.Sink.
func (s *Sink) Close() error { return nil }

// itemEncoder writes items as json.Marshal does, byte for byte, into one buffer for a
// write (see itemjson).
type itemEncoder struct{ *itemjson.Encoder }

// encode returns the item's line, valid until the encoder's buffer is reset. It writes
// crawl.Item's fields in their order as its json tags say (TestItemLinesAreJSONMarshal
// sets every field and compares with json.Marshal).
func (e itemEncoder) encode(it crawl.Item) ([]byte, error) {
	start := e.Buf.Len()
	b := &e.Buf
	b.WriteString(`{"id":"`)
	e.Int(it.ID)
	b.WriteString(`","biz":`)
	e.String(it.Biz)
	b.WriteString(`,"key":`)
	e.String(it.Key)
	if it.URL != "" {
		b.WriteString(`,"url":`)
		e.String(it.URL)
	}
	b.WriteString(`,"ts":"`)
	ts, err := it.TS.AppendText(b.AvailableBuffer()) // what MarshalJSON writes, unquoted
	if err != nil {
		return nil, fmt.Errorf("json: error calling MarshalJSON for type time.Time: %w", err)
	}
	b.Write(ts)
	b.WriteString(`","hash":`)
	e.String(it.Hash)
	b.WriteString(`,"flag":`)
	e.Int(int64(it.Flag))
	b.WriteString(`,"chain":`)
	e.String(it.Chain)
	b.WriteString(`,"run_id":`)
	e.String(it.RunID)
	b.WriteString(`,"tenant":`)
	e.String(it.Tenant)
	b.WriteString(`,"data":`)
	if err := e.Map(it.Data); err != nil {
		return nil, err
	}
	b.WriteByte('}')
	return b.Bytes()[start:], nil
}
