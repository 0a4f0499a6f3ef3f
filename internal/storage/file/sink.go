package file

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// PartialExt ends the name of a file still being written; it is renamed to its final
// name once finished, so a reader that skips *.partial never sees a torn file.
const PartialExt = ".partial"

// Options configure a Sink.
type Options struct {
	Dir    string
	Format Format // default JSONL
	// RotateSize finishes a file once it holds this many bytes (0: no size limit);
	// RotateEvery finishes a file this long after it was started (0: no time limit).
	// Without either, a task's file is finished when the sink closes.
	RotateSize  int64
	RotateEvery time.Duration
	// Specs give a task's declared output schema, the first data columns of its CSV
	// and Parquet files; a task without one gets columns inferred from its first batch.
	// A field with no column yet starts a new file that has one (see Sink).
	Specs func(biz string) (crawl.TaskSpec, bool)
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
	Log *slog.Logger
}

// Sink is the `file` sink: every task's items go to files under
// <dir>/<site.task>/<yyyymmdd-hhmmss>-<n>.<ext>, a new one when the current one reaches
// RotateSize or RotateEvery. A file is written as <name>.partial and renamed when it
// is finished (on rotation and on Close), after its Parquet footer and an fsync.
//
// CSV and Parquet files have fixed columns, so an item with a data field its file has
// no column for finishes that file, and the next one gets the old columns then the
// batch's new fields: no field is dropped, and each file's header fits all its rows.
// A task's columns only grow; a file started by size or time rotation keeps them.
//
// Items reach the file when Write returns (Parquet buffers up to a row group): a
// process that dies leaves its current files as *.partial, which readers skip. A
// JSON Lines or CSV partial file holds every complete line written and can be renamed
// by hand; a Parquet one, without its footer, cannot be read. The sink therefore keeps
// at least once, not exactly once: a retried batch that was already written to a file
// that has since rotated is written again (with the same ids); within one file a
// record of a run is written once, and so is a batch retried across one rotation.
type Sink struct {
	o Options

	mu     sync.Mutex
	open   map[string]*current
	closed bool
}

type current struct {
	biz     string
	final   string
	f       *os.File
	w       RecordWriter
	fields  []crawl.Field   // the data columns (nil for JSON Lines)
	has     map[string]bool // their names
	started time.Time
	seen    map[string]struct{} // run_id + "\x00" + key
	prev    map[string]struct{} // seen of the file before, for a batch retried across a rotation
}

// Open returns a sink writing under o.Dir (created if missing).
func Open(o Options) (*Sink, error) {
	if o.Dir == "" {
		return nil, errors.New("file sink: no directory (--file-dir DIR)")
	}
	if o.Format == "" {
		o.Format = JSONL
	}
	f, err := ParseFormat(string(o.Format))
	if err != nil {
		return nil, fmt.Errorf("file sink: --file-format: %w", err)
	}
	o.Format = f
	if o.RotateSize < 0 || o.RotateEvery < 0 {
		return nil, errors.New("file sink: --file-rotate-size and --file-rotate-every take 0 (no limit) or more")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("file sink: create %s: %w", o.Dir, err)
	}
	return &Sink{o: o, open: map[string]*current{}}, nil
}

// Name implements storage.Sink.
func (s *Sink) Name() string { return "file" }

// Dir is the directory the sink writes under.
func (s *Sink) Dir() string { return s.o.Dir }

// Format is the format of the files.
func (s *Sink) Format() Format { return s.o.Format }

// AtLeastOnce implements storage.AtLeastOnce.
func (s *Sink) AtLeastOnce() {}

// Write implements storage.Sink: the batch's items are appended to their tasks'
// current files (rotating first when one is due) and flushed to the files.
func (s *Sink) Write(ctx context.Context, items []crawl.Item) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("file sink: closed")
	}
	byBiz := map[string][]int{}
	var bizs []string
	for i, it := range items {
		if _, ok := byBiz[it.Biz]; !ok {
			bizs = append(bizs, it.Biz)
		}
		byBiz[it.Biz] = append(byBiz[it.Biz], i)
	}
	sort.Strings(bizs)
	for _, biz := range bizs {
		if err := ctx.Err(); err != nil {
			return err
		}
		sample := make([]crawl.Item, 0, len(byBiz[biz]))
		for _, i := range byBiz[biz] {
			sample = append(sample, items[i])
		}
		for _, i := range byBiz[biz] {
			c, err := s.current(biz, sample, &items[i])
			if err != nil {
				return err
			}
			id := items[i].RunID + "\x00" + items[i].Key
			if _, dup := c.seen[id]; dup {
				continue
			}
			if _, dup := c.prev[id]; dup {
				continue
			}
			if err := c.w.Write(&items[i]); err != nil {
				return fmt.Errorf("file sink: %s: %w", c.final, err)
			}
			c.seen[id] = struct{}{}
		}
		if c := s.open[biz]; c != nil && s.o.Format != Parquet {
			if err := c.w.Flush(); err != nil {
				return fmt.Errorf("file sink: write %s: %w", c.final+PartialExt, err)
			}
		}
	}
	return nil
}

// current is the file a biz's item it goes to: the open one, unless it is due to
// rotate or has no column for a field of it, else a new one. A new file's columns are
// the previous file's, else the declared schema's, else sample's; then any field of
// sample without one.
func (s *Sink) current(biz string, sample []crawl.Item, it *crawl.Item) (*current, error) {
	now := s.o.Now()
	var prev map[string]struct{}
	var fields []crawl.Field
	if c := s.open[biz]; c != nil {
		prev, fields = c.seen, c.fields
		due := (s.o.RotateSize > 0 && c.w.Size() >= s.o.RotateSize) ||
			(s.o.RotateEvery > 0 && !now.Before(c.started.Add(s.o.RotateEvery)))
		if !due && c.covers(it) {
			return c, nil
		}
		if err := s.finish(c); err != nil {
			return nil, err
		}
	}
	if strings.ContainsAny(biz, `/\`) || biz == "" || strings.HasPrefix(biz, ".") {
		return nil, fmt.Errorf("file sink: item biz %q cannot name a directory", biz)
	}
	dir := filepath.Join(s.o.Dir, biz)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("file sink: create %s: %w", dir, err)
	}
	stamp := now.UTC().Format("20060102-150405")
	var final string
	var f *os.File
	for n := 1; ; n++ {
		final = filepath.Join(dir, fmt.Sprintf("%s-%d.%s", stamp, n, s.o.Format.Ext()))
		if _, err := os.Stat(final); err == nil {
			continue
		}
		var err error
		f, err = os.OpenFile(final+PartialExt, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("file sink: create %s: %w", final+PartialExt, err)
		}
		break
	}
	var has map[string]bool
	if s.o.Format != JSONL {
		if fields == nil && s.o.Specs != nil {
			if spec, ok := s.o.Specs(biz); ok && len(spec.Output) > 0 {
				fields = spec.Output
			}
		}
		has = map[string]bool{}
		for _, fl := range fields {
			has[fl.Name] = true
		}
		fields = slices.Clip(fields)
		for _, fl := range InferFields(sample) {
			if !has[fl.Name] {
				has[fl.Name] = true
				fields = append(fields, fl)
			}
		}
	}
	w, err := NewWriter(f, s.o.Format, Columns(fields))
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("file sink: %w", err)
	}
	c := &current{biz: biz, final: final, f: f, w: w, fields: fields, has: has, started: now, seen: map[string]struct{}{}, prev: prev}
	s.open[biz] = c
	return c, nil
}

// covers reports whether the file has a column for every data field of it.
func (c *current) covers(it *crawl.Item) bool {
	if c.has == nil {
		return true // JSON Lines keeps every field
	}
	for n := range it.Data {
		if !c.has[n] {
			return false
		}
	}
	return true
}

// finish ends a file: footer, fsync, close, rename to its final name.
func (s *Sink) finish(c *current) error {
	delete(s.open, c.biz)
	partial := c.final + PartialExt
	err := c.w.Close()
	if err == nil {
		err = c.f.Sync()
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(partial, c.final)
	}
	if err != nil {
		return fmt.Errorf("file sink: finish %s: %w", partial, err)
	}
	s.o.Log.Debug("file sink: finished", "file", c.final)
	return nil
}

// Rotate finishes every open file now (the next items start new ones).
func (s *Sink) Rotate() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finishAll()
}

func (s *Sink) finishAll() error {
	bizs := make([]string, 0, len(s.open))
	for b := range s.open {
		bizs = append(bizs, b)
	}
	sort.Strings(bizs)
	var first error
	for _, b := range bizs {
		if err := s.finish(s.open[b]); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close implements storage.Sink: every open file is finished.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.finishAll()
}

// Files lists the finished files of a biz ("" for every task), oldest first.
func (s *Sink) Files(biz string) ([]string, error) {
	pattern := filepath.Join(s.o.Dir, "*", "*")
	if biz != "" {
		pattern = filepath.Join(s.o.Dir, biz, "*")
	}
	names, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	out := names[:0]
	for _, n := range names {
		if _, ok := FormatOf(n); ok && !strings.HasSuffix(n, PartialExt) {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if filepath.Dir(out[i]) != filepath.Dir(out[j]) {
			return out[i] < out[j]
		}
		return fileSeq(out[i]) < fileSeq(out[j])
	})
	return out, nil
}

// fileSeq orders files of one task: by time stamp, then by number.
func fileSeq(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	stamp, n := base, ""
	if i := strings.LastIndex(base, "-"); i > 0 {
		stamp, n = base[:i], base[i+1:]
	}
	return fmt.Sprintf("%s-%09s", stamp, n)
}

// Count implements storage.Sink: the distinct records of a run in the finished files,
// plus the files this sink has open (finished first, so they can be read).
func (s *Sink) Count(ctx context.Context, runID string) (int, error) {
	s.mu.Lock()
	if !s.closed {
		if err := s.finishAll(); err != nil {
			s.mu.Unlock()
			return 0, err
		}
	}
	s.mu.Unlock()
	files, err := s.Files("")
	if err != nil {
		return 0, err
	}
	seen := map[string]struct{}{}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		err := ReadFile(f, func(it crawl.Item) error {
			if it.RunID == runID {
				seen[it.Biz+"\x00"+it.Key] = struct{}{}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("file sink: count %s: %w", f, err)
		}
	}
	return len(seen), nil
}
