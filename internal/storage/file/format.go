// Package file writes items as files analysts open directly: JSON Lines, CSV or
// Parquet. It holds the encoders `trawler export` uses and the `file` sink, which writes
// every task's items to rotated files under one directory.
//
// CSV and Parquet have fixed columns: the record fields id, biz, key, url, ts, hash,
// chain, run_id and tenant, then the data fields flattened one level (data.title,
// data.points …). Export chooses them in a first pass over the records (every field any
// record holds, after a registered task's declared ones); the file sink from a task's
// declared schema, else from its first batch, and starts a new file with more columns
// when a later batch brings a field. A nested value (a list, an object) is its JSON
// text. JSON Lines keeps every item exactly as the jsonl sink writes it.
//
// Parquet columns are typed: id is int64, ts a timestamp (microseconds, UTC), an int
// field int64, a float field double, a bool field boolean, a time field a timestamp,
// everything else a string; the data columns are optional (null when a record lacks the
// field).
package file

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/trawlerhq/trawler/crawl"
)

// Format is a file format.
type Format string

// The formats.
const (
	JSONL   Format = "jsonl"
	CSV     Format = "csv"
	Parquet Format = "parquet"
)

// Formats lists the formats, for messages.
var Formats = []Format{JSONL, CSV, Parquet}

// ParseFormat reads a format name (jsonl, csv, parquet; "json" and "ndjson" are JSON Lines).
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "jsonl", "ndjson", "json":
		return JSONL, nil
	case "csv":
		return CSV, nil
	case "parquet", "pq":
		return Parquet, nil
	}
	return "", fmt.Errorf("unknown format %q: use jsonl, csv or parquet", s)
}

// FormatOf is the format a file name's extension names (.jsonl, .ndjson, .json, .csv,
// .parquet), and false for any other.
func FormatOf(path string) (Format, bool) {
	ext := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	if ext == "" {
		return "", false
	}
	f, err := ParseFormat(ext)
	return f, err == nil
}

// Ext is the file extension of a format, without the dot.
func (f Format) Ext() string { return string(f) }

// Column is one column of a CSV or Parquet file.
type Column struct {
	Name string     // "id", "ts", "data.title" …
	Type crawl.Type // how Parquet stores it
	data string     // the data field, for data columns
}

// RecordColumns are the item's own fields, the first columns of every CSV and Parquet file.
var RecordColumns = []Column{
	{Name: "id", Type: crawl.Int}, {Name: "biz", Type: crawl.String}, {Name: "key", Type: crawl.String},
	{Name: "url", Type: crawl.String}, {Name: "ts", Type: crawl.Time}, {Name: "hash", Type: crawl.String},
	{Name: "chain", Type: crawl.String}, {Name: "run_id", Type: crawl.String}, {Name: "tenant", Type: crawl.String},
}

// Columns are the columns for items whose data has these fields: the record columns,
// then data.<field> in the given order.
func Columns(fields []crawl.Field) []Column {
	out := append([]Column(nil), RecordColumns...)
	seen := map[string]bool{}
	for _, f := range fields {
		if f.Name == "" || seen[f.Name] {
			continue
		}
		seen[f.Name] = true
		out = append(out, Column{Name: "data." + f.Name, Type: f.Type, data: f.Name})
	}
	return out
}

// InferFields derives data fields from sample items, for a task with no declared
// schema: names in the order they first appear (each item's names sorted), each typed
// by the values seen (a number is an int unless some sampled value has a fraction; a
// string is a time when every sampled value is an RFC 3339 time).
func InferFields(items []crawl.Item) []crawl.Field {
	var ft fieldTypes
	for _, it := range items {
		ft.add(it.Data)
	}
	return ft.fields()
}

// fieldTypes gathers the data fields of records one at a time, as InferFields describes.
type fieldTypes struct {
	order []string
	types map[string]crawl.Type
}

func (ft *fieldTypes) add(data map[string]any) {
	if ft.types == nil {
		ft.types = map[string]crawl.Type{}
	}
	for _, n := range sortedNames(data) {
		t, ok := ft.types[n]
		if !ok {
			ft.order = append(ft.order, n)
		}
		ft.types[n] = merge(t, typeOf(data[n]))
	}
}

func (ft *fieldTypes) fields() []crawl.Field {
	out := make([]crawl.Field, len(ft.order))
	for i, n := range ft.order {
		t := ft.types[n]
		if t == "" {
			t = crawl.String // only nulls seen
		}
		out[i] = crawl.Field{Name: n, Type: t}
	}
	return out
}

// merge combines the type seen so far with the type of one more value.
func merge(have, v crawl.Type) crawl.Type {
	switch {
	case v == "":
		return have
	case have == "" || have == v:
		return v
	case (have == crawl.Int && v == crawl.Float) || (have == crawl.Float && v == crawl.Int):
		return crawl.Float
	case (have == crawl.Time || have == crawl.URL) && v == crawl.String, have == crawl.String && (v == crawl.Time || v == crawl.URL):
		return crawl.String
	}
	return crawl.Object // mixed kinds: JSON text
}

func typeOf(v any) crawl.Type {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		if _, err := time.Parse(time.RFC3339Nano, t); err == nil {
			return crawl.Time
		}
		return crawl.String
	case time.Time:
		return crawl.Time
	case bool:
		return crawl.Bool
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return crawl.Int
	case float32:
		return typeOf(float64(t))
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return crawl.Int
		}
		return crawl.Float
	case json.Number:
		if _, err := t.Int64(); err == nil {
			return crawl.Int
		}
		return crawl.Float
	}
	return crawl.Object
}

// value is the raw value of a column of an item.
func (c Column) value(it *crawl.Item) any {
	if c.data != "" {
		return it.Data[c.data]
	}
	switch c.Name {
	case "id":
		return it.ID
	case "biz":
		return it.Biz
	case "key":
		return it.Key
	case "url":
		return it.URL
	case "ts":
		return it.TS
	case "hash":
		return it.Hash
	case "chain":
		return it.Chain
	case "run_id":
		return it.RunID
	case "tenant":
		return it.Tenant
	}
	return nil
}

// Text is a value as CSV shows it: strings as they are, numbers in plain decimal
// notation, times in RFC 3339, nil empty, lists and objects as JSON.
func Text(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case bool:
		return strconv.FormatBool(t)
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(t), 'f', -1, 32)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return fmt.Sprint(t)
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano)
	}
	if tm, ok := asTime(v); ok {
		return tm.UTC().Format(time.RFC3339Nano)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// asTime reads a time from a time.Time, an RFC 3339 string or a type with a Time
// method (BSON dates).
func asTime(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t, true
	case string:
		tm, err := time.Parse(time.RFC3339Nano, t)
		return tm, err == nil
	case interface{ Time() time.Time }:
		return t.Time(), true
	}
	return time.Time{}, false
}

func asFloat(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case float32:
		return float64(t), true
	case int:
		return float64(t), true
	case int8:
		return float64(t), true
	case int16:
		return float64(t), true
	case int32:
		return float64(t), true
	case int64:
		return float64(t), true
	case uint:
		return float64(t), true
	case uint8:
		return float64(t), true
	case uint16:
		return float64(t), true
	case uint32:
		return float64(t), true
	case uint64:
		return float64(t), true
	case json.Number:
		f, err := t.Float64()
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		return f, err == nil
	}
	return 0, false
}

func asInt(v any) (int64, bool) {
	switch t := v.(type) {
	case int:
		return int64(t), true
	case int8:
		return int64(t), true
	case int16:
		return int64(t), true
	case int32:
		return int64(t), true
	case int64:
		return t, true
	case uint8:
		return int64(t), true
	case uint16:
		return int64(t), true
	case uint32:
		return int64(t), true
	case json.Number:
		if n, err := t.Int64(); err == nil {
			return n, true
		}
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64); err == nil {
			return n, true
		}
	}
	if f, ok := asFloat(v); ok && f == math.Trunc(f) && math.Abs(f) <= 1<<63 {
		return int64(f), true
	}
	return 0, false
}

func asBool(v any) (bool, bool) {
	switch t := v.(type) {
	case bool:
		return t, true
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(t))
		return b, err == nil
	}
	return false, false
}

// RecordWriter writes items to one file.
type RecordWriter interface {
	Write(it *crawl.Item) error
	// Flush pushes buffered records to the underlying writer (a Parquet writer ends
	// its row group).
	Flush() error
	// Close flushes and finishes the file (Parquet's footer); it does not close the
	// underlying writer.
	Close() error
	// Size is how many bytes the file holds so far, counting what is buffered.
	Size() int64
}

// NewWriter returns a writer of the format to w; cols are the CSV and Parquet columns
// (see Columns), unused for JSON Lines.
func NewWriter(w io.Writer, f Format, cols []Column) (RecordWriter, error) {
	cw := &counter{w: w}
	switch f {
	case JSONL:
		return &jsonlWriter{c: cw, bw: bufio.NewWriterSize(cw, 1<<16)}, nil
	case CSV:
		bw := bufio.NewWriterSize(cw, 1<<16)
		w := &csvWriter{c: cw, bw: bw, cw: csv.NewWriter(bw), cols: cols, row: make([]string, len(cols))}
		head := make([]string, len(cols))
		for i, c := range cols {
			head[i] = c.Name
		}
		if err := w.cw.Write(head); err != nil {
			return nil, err
		}
		return w, nil
	case Parquet:
		return newParquetWriter(cw, cols)
	}
	return nil, fmt.Errorf("unknown format %q: use jsonl, csv or parquet", f)
}

// counter counts the bytes written through it.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type jsonlWriter struct {
	c  *counter
	bw *bufio.Writer
}

func (w *jsonlWriter) Write(it *crawl.Item) error {
	b, err := json.Marshal(it)
	if err != nil {
		return fmt.Errorf("encode %s %s: %w", it.Biz, it.Key, err)
	}
	w.bw.Write(b)
	return w.bw.WriteByte('\n')
}

func (w *jsonlWriter) Flush() error { return w.bw.Flush() }
func (w *jsonlWriter) Close() error { return w.bw.Flush() }
func (w *jsonlWriter) Size() int64  { return w.c.n + int64(w.bw.Buffered()) }

type csvWriter struct {
	c    *counter
	bw   *bufio.Writer
	cw   *csv.Writer
	cols []Column
	row  []string
}

func (w *csvWriter) Write(it *crawl.Item) error {
	for i, c := range w.cols {
		v := c.value(it)
		if c.Name == "id" {
			w.row[i] = strconv.FormatInt(it.ID, 10)
			continue
		}
		w.row[i] = Text(v)
	}
	return w.cw.Write(w.row)
}

func (w *csvWriter) Flush() error {
	w.cw.Flush()
	if err := w.cw.Error(); err != nil {
		return err
	}
	return w.bw.Flush()
}

func (w *csvWriter) Close() error { return w.Flush() }

func (w *csvWriter) Size() int64 { return w.c.n + int64(w.bw.Buffered()) }

// rowGroupRows bounds the rows a Parquet writer buffers before it writes a row group.
const rowGroupRows = 10000

type parquetWriter struct {
	pw      *parquet.GenericWriter[any]
	cols    []Column
	typ     reflect.Type
	row     reflect.Value
	pending int
}

// parquetSchema is a struct type with one field per column, in column order, tagged
// with the column name and its logical type; data columns are pointers (optional).
func parquetSchema(cols []Column) reflect.Type {
	fields := make([]reflect.StructField, len(cols))
	timeType := reflect.TypeOf(time.Time{})
	for i, c := range cols {
		var t reflect.Type
		tag := strings.ReplaceAll(c.Name, ",", "_")
		switch c.Type {
		case crawl.Int:
			t = reflect.TypeOf(int64(0))
		case crawl.Float:
			t = reflect.TypeOf(float64(0))
		case crawl.Bool:
			t = reflect.TypeOf(false)
		case crawl.Time:
			t = timeType
			tag += ",timestamp(microsecond)"
		default:
			t = reflect.TypeOf("")
		}
		if c.data != "" {
			t = reflect.PointerTo(t)
		}
		fields[i] = reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: t, Tag: reflect.StructTag(`parquet:"` + tag + `"`)}
	}
	return reflect.StructOf(fields)
}

func newParquetWriter(w io.Writer, cols []Column) (*parquetWriter, error) {
	typ := parquetSchema(cols)
	schema := parquet.SchemaOf(reflect.New(typ).Interface())
	pw := parquet.NewGenericWriter[any](w, schema, parquet.Compression(&parquet.Snappy), parquet.CreatedBy("trawler", "", ""))
	return &parquetWriter{pw: pw, cols: cols, typ: typ, row: reflect.New(typ)}, nil
}

func (w *parquetWriter) Write(it *crawl.Item) error {
	row := w.row.Elem()
	row.SetZero()
	for i, c := range w.cols {
		f := row.Field(i)
		v := c.value(it)
		if c.data != "" {
			if v == nil {
				continue
			}
			f.Set(reflect.New(f.Type().Elem()))
			f = f.Elem()
		}
		if err := setValue(f, c, v); err != nil {
			return fmt.Errorf("%s %s: %w", it.Biz, it.Key, err)
		}
	}
	if _, err := w.pw.Write([]any{w.row.Interface()}); err != nil {
		return fmt.Errorf("parquet: write %s %s: %w", it.Biz, it.Key, err)
	}
	if w.pending++; w.pending >= rowGroupRows {
		return w.Flush()
	}
	return nil
}

// setValue stores v in a column's field, converting as the column's type needs.
func setValue(f reflect.Value, c Column, v any) error {
	bad := func() error {
		return fmt.Errorf("column %s is %s (from the task's schema or the first records) but holds %s; export as jsonl or csv to keep such values", c.Name, c.Type, clip(Text(v)))
	}
	switch c.Type {
	case crawl.Int:
		n, ok := asInt(v)
		if !ok {
			return bad()
		}
		f.SetInt(n)
	case crawl.Float:
		x, ok := asFloat(v)
		if !ok {
			return bad()
		}
		f.SetFloat(x)
	case crawl.Bool:
		b, ok := asBool(v)
		if !ok {
			return bad()
		}
		f.SetBool(b)
	case crawl.Time:
		tm, ok := asTime(v)
		if !ok {
			return bad()
		}
		f.Set(reflect.ValueOf(tm.UTC()))
	default:
		f.SetString(Text(v))
	}
	return nil
}

func clip(s string) string {
	if len(s) > 60 {
		return fmt.Sprintf("%q…", s[:60])
	}
	return fmt.Sprintf("%q", s)
}

func (w *parquetWriter) Flush() error {
	if w.pending == 0 {
		return nil
	}
	w.pending = 0
	return w.pw.Flush()
}

func (w *parquetWriter) Close() error { return w.pw.Close() }

func (w *parquetWriter) Size() int64 { return w.pw.Size() }
