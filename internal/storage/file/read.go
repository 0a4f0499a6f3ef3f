package file

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
)

// ReadFile reads back the items of a file the sink or Export wrote, in the format its
// name says. JSON Lines gives the items as written; CSV gives data values as text;
// Parquet gives them typed, lists and objects as their JSON text.
func ReadFile(path string, fn func(crawl.Item) error) error {
	name := strings.TrimSuffix(path, PartialExt)
	f, ok := FormatOf(name)
	if !ok {
		return fmt.Errorf("%s: not a .jsonl, .csv or .parquet file", path)
	}
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	switch f {
	case JSONL:
		return jsonl.ReadFile(path, fn)
	case CSV:
		return readCSV(fh, path, fn)
	}
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	return readParquet(fh, st.Size(), path, fn)
}

// setRecordField sets an item field from its text; it reports whether name is one.
func setRecordField(it *crawl.Item, name, v string) (bool, error) {
	switch name {
	case "id":
		if v == "" {
			return true, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		it.ID = n
		return true, err
	case "biz":
		it.Biz = v
	case "key":
		it.Key = v
	case "url":
		it.URL = v
	case "ts":
		if v == "" {
			return true, nil
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		it.TS = t
		return true, err
	case "hash":
		it.Hash = v
	case "chain":
		it.Chain = v
	case "run_id":
		it.RunID = v
	case "tenant":
		it.Tenant = v
	default:
		return false, nil
	}
	return true, nil
}

func readCSV(r io.Reader, path string, fn func(crawl.Item) error) error {
	cr := csv.NewReader(bufio.NewReaderSize(r, 1<<20))
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	head = append([]string(nil), head...)
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) && errors.Is(pe.Err, io.ErrUnexpectedEOF) {
			return nil // a torn last line
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		it := crawl.Item{Data: map[string]any{}}
		for i, v := range rec {
			if i >= len(head) {
				break
			}
			if d, ok := strings.CutPrefix(head[i], "data."); ok {
				if v != "" {
					it.Data[d] = v
				}
				continue
			}
			if _, err := setRecordField(&it, head[i], v); err != nil {
				return fmt.Errorf("%s: column %s: %w", path, head[i], err)
			}
		}
		if err := fn(it); err != nil {
			return err
		}
	}
}

func readParquet(r io.ReaderAt, size int64, path string, fn func(crawl.Item) error) error {
	pf, err := parquet.OpenFile(r, size)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	cols := pf.Schema().Columns()
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = strings.Join(c, ".")
	}
	pr := parquet.NewReader(pf)
	defer pr.Close()
	rows := make([]parquet.Row, 256)
	for {
		n, err := pr.ReadRows(rows)
		for _, row := range rows[:n] {
			it := crawl.Item{Data: map[string]any{}}
			for _, v := range row {
				ci := v.Column()
				if ci < 0 || ci >= len(names) || v.IsNull() {
					continue
				}
				name := names[ci]
				switch name {
				case "id":
					it.ID = v.Int64()
					continue
				case "ts":
					it.TS = time.UnixMicro(v.Int64()).UTC()
					continue
				}
				if ok, _ := setRecordField(&it, name, v.String()); ok {
					continue
				}
				d := strings.TrimPrefix(name, "data.")
				switch v.Kind() {
				case parquet.Int64, parquet.Int32:
					if isTimestamp(pf.Schema(), cols[ci]) {
						it.Data[d] = time.UnixMicro(v.Int64()).UTC()
					} else {
						it.Data[d] = v.Int64()
					}
				case parquet.Double, parquet.Float:
					it.Data[d] = v.Double()
				case parquet.Boolean:
					it.Data[d] = v.Boolean()
				default:
					it.Data[d] = v.String()
				}
			}
			if err := fn(it); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

func isTimestamp(s *parquet.Schema, path []string) bool {
	leaf, ok := s.Lookup(path...)
	if !ok {
		return false
	}
	lt := leaf.Node.Type().LogicalType()
	if lt == nil {
		return false
	}
	_, ok = lt.Value.(*format.TimestampType)
	return ok
}
