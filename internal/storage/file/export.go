package file

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/trawlerhq/trawler/crawl"
)

// Each streams records to fn until it returns an error or the records end. Export calls
// it twice for CSV and Parquet, so it must stream the same records each time.
type Each func(ctx context.Context, fn func(crawl.Item) error) error

// ExportOptions configure Export.
type ExportOptions struct {
	Format Format
	// Fields are data columns known before reading (a registered task's declared
	// output), first in their order and type; every other field the records hold gets
	// a column too, after them.
	Fields []crawl.Field
	// Progress, when set, is called with the number of records written so far, every
	// so often and once at the end.
	Progress func(written int64)
	// Every is how many records pass between Progress calls (default 1000).
	Every int64
}

// ExportResult is what Export wrote.
type ExportResult struct {
	Records int64
	Bytes   int64
}

// Export writes the records each yields to w in the format, holding one record and a
// Parquet row group in memory. CSV and Parquet columns are fixed by a first pass over
// the records: every data field any of them holds gets a column, so none is dropped; a
// field that shows up only in the second pass (a record stored in between) stops the
// export with an error naming it, never a silently missing value.
func Export(ctx context.Context, w io.Writer, each Each, o ExportOptions) (ExportResult, error) {
	if o.Every <= 0 {
		o.Every = 1000
	}
	var cols []Column
	if o.Format != JSONL {
		fields, err := scanFields(ctx, each, o.Fields)
		if err != nil {
			return ExportResult{}, err
		}
		cols = Columns(fields)
	}
	has := map[string]bool{}
	for _, c := range cols {
		has[c.data] = true
	}
	cw := &counter{w: w}
	var res ExportResult
	rw, err := NewWriter(cw, o.Format, cols)
	if err != nil {
		return res, err
	}
	err = each(ctx, func(it crawl.Item) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if cols != nil {
			if err := covered(&it, has); err != nil {
				return err
			}
		}
		return write(rw, &it, &res, o)
	})
	if err != nil {
		_ = rw.Flush()
		res.Bytes = cw.n
		return res, err
	}
	if err := rw.Close(); err != nil {
		return res, fmt.Errorf("finish the %s output: %w", o.Format, err)
	}
	res.Bytes = cw.n
	if o.Progress != nil {
		o.Progress(res.Records)
	}
	return res, nil
}

// scanFields is the first pass: the known fields, then every other data field of the
// records, in the order they first appear, typed by their values.
func scanFields(ctx context.Context, each Each, known []crawl.Field) ([]crawl.Field, error) {
	var seen fieldTypes
	if err := each(ctx, func(it crawl.Item) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		seen.add(it.Data)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the records for their columns: %w", err)
	}
	out := slices.Clone(known)
	for _, f := range seen.fields() {
		if !slices.ContainsFunc(known, func(k crawl.Field) bool { return k.Name == f.Name }) {
			out = append(out, f)
		}
	}
	return out, nil
}

// covered reports a data field of it that has no column.
func covered(it *crawl.Item, has map[string]bool) error {
	for _, n := range sortedNames(it.Data) {
		if !has[n] {
			return fmt.Errorf("record %s %s has field %q, which no record had when the columns were chosen (it was stored during the export); export again, or as jsonl", it.Biz, it.Key, n)
		}
	}
	return nil
}

func sortedNames(data map[string]any) []string {
	names := make([]string, 0, len(data))
	for n := range data {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func write(rw RecordWriter, it *crawl.Item, res *ExportResult, o ExportOptions) error {
	if err := rw.Write(it); err != nil {
		return err
	}
	res.Records++
	if res.Records%o.Every == 0 {
		if o.Format != Parquet { // Parquet ends a row group every rowGroupRows itself
			if err := rw.Flush(); err != nil {
				return err
			}
		}
		if o.Progress != nil {
			o.Progress(res.Records)
		}
	}
	return nil
}
