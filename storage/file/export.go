package file

import (
	"context"
	"fmt"
	"io"

	"trawler/crawl"
)

// Each streams records to fn until it returns an error or the records end.
type Each func(ctx context.Context, fn func(crawl.Item) error) error

// ExportOptions configure Export.
type ExportOptions struct {
	Format Format
	// Fields are the data columns of CSV and Parquet (a task's declared output); nil
	// infers them from the first Sample records.
	Fields []crawl.Field
	// Sample is how many records are read before the columns are inferred (default 1000).
	Sample int
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

// Export writes the records each yields to w in the format, holding at most Sample
// records in memory (only while it infers the columns) and a Parquet row group.
func Export(ctx context.Context, w io.Writer, each Each, o ExportOptions) (ExportResult, error) {
	if o.Sample <= 0 {
		o.Sample = 1000
	}
	if o.Every <= 0 {
		o.Every = 1000
	}
	cw := &counter{w: w}
	var res ExportResult
	var rw RecordWriter
	var sample []crawl.Item
	start := func() error {
		fields := o.Fields
		if fields == nil {
			fields = InferFields(sample)
		}
		var err error
		rw, err = NewWriter(cw, o.Format, Columns(fields))
		if err != nil {
			return err
		}
		for i := range sample {
			if err := write(rw, &sample[i], &res, o); err != nil {
				return err
			}
		}
		sample = nil
		return nil
	}
	err := each(ctx, func(it crawl.Item) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if rw == nil {
			sample = append(sample, it)
			if len(sample) < o.Sample && o.Fields == nil && o.Format != JSONL {
				return nil
			}
			return start()
		}
		return write(rw, &it, &res, o)
	})
	if err == nil && rw == nil {
		err = start() // fewer records than the sample, or none: the file still gets its header
	}
	if err != nil {
		if rw != nil {
			_ = rw.Flush()
		}
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
