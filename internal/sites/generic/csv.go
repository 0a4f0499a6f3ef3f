package generic

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch/charset"
)

var csvSpec = crawl.TaskSpec{
	Name:  CSVTask,
	Doc:   "a CSV file: an item per row, columns mapped to fields by header name or index",
	Seeds: seedInputs,
	Params: []crawl.Param{
		urlsParam,
		baseURLParam,
		fieldsParam("field name → column: a header name, an index where 0 is the first column, or a field spec like {column: price, type: float}; omitted: every column by its header name, as text", false),
		keyParam,
		detailParam,
		detailTaskParam(""),
		{Name: "delimiter", Type: crawl.String, Default: ",", Doc: "the column separator: one character, or tab"},
		{Name: "header", Type: crawl.Bool, Default: true, Doc: "the first row (after skip_rows) names the columns"},
		{Name: "skip_rows", Type: crawl.Int, Default: 0, Doc: "lines to skip before the header or the first row (titles, notes)"},
		encodingParam,
		headersParam,
	},
	Output:  commonOutput,
	Timeout: 60 * time.Second,
	Retries: 3,
	Check:   checker(buildCSV),
}

// CSV is the generic.csv task.
var CSV = configTask(csvSpec, buildCSV, runCSV)

type csvConfig struct {
	common
	itemRules
	delim    rune
	header   bool
	skipRows int
	enc      encoding.Encoding
}

func buildCSV(p crawl.Params) (*csvConfig, []error) {
	c := &csvConfig{delim: ','}
	var errs, e []error
	c.common, errs = parseCommon(CSVTask, p)
	c.itemRules, e = parseItemRules(CSVTask, p, srcCSV, nil, "")
	errs = append(errs, e...)
	if v, ok := p["delimiter"]; ok {
		d := str(v)
		switch strings.ToLower(d) {
		case `\t`, "tab", "\t":
			c.delim = '\t'
		default:
			r, size := utf8.DecodeRuneInString(d)
			if d == "" || size != len(d) || r == '"' || r == '\r' || r == '\n' || r == utf8.RuneError {
				errs = append(errs, fmt.Errorf("param delimiter: want one character such as , ; | or tab, got %q", d))
			} else {
				c.delim = r
			}
		}
	}
	c.header = boolParam(p, "header", true)
	c.skipRows = intParam(p, "skip_rows", 0)
	errs = append(errs, checkNonNegative(p, "skip_rows")...)
	if !c.header {
		if len(c.fields) == 0 && str(p["detail"]) == "" {
			errs = append(errs, fmt.Errorf("param fields: without a header row, map the columns by index, e.g. {title: 1, score: {column: 2, type: int}}"))
		}
		specs := append(fieldSet{}, c.fields...)
		if c.key != nil {
			specs = append(specs, c.key)
		}
		for _, f := range specs {
			if f.column < 0 {
				errs = append(errs, fmt.Errorf("param %s: column %q is a name, but header is false; use an index (0 is the first column)", f.where, f.expr))
			}
		}
	}
	c.enc, e = parseEncodingParam(p["encoding"])
	errs = append(errs, e...)
	return c, errs
}

func runCSV(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	return runPages(env, in, CSVTask, buildCSV, func(c *csvConfig, u string, start bool) (crawl.Result, error) {
		return c.page(ctx, env, u)
	})
}

func (c *csvConfig) page(ctx context.Context, env *crawl.Env, u string) (crawl.Result, error) {
	resp, err := c.fetch(ctx, env, u)
	if err != nil {
		return crawl.Result{}, err
	}
	body, err := charset.Text(resp.Body, resp.Header.Get("Content-Type"), c.enc)
	if err != nil {
		return crawl.Result{}, crawl.Permanentf("%s: %s: %v", CSVTask, u, err)
	}
	body = bytes.ToValidUTF8(body, []byte("\uFFFD"))
	r := csv.NewReader(bytes.NewReader(body))
	r.Comma = c.delim
	r.LazyQuotes = true
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	bad := func(err error) error {
		return crawl.Permanentf("%s: %s: %v", CSVTask, u, err)
	}
	for i := 0; i < c.skipRows; i++ {
		if _, err := r.Read(); err != nil {
			if errors.Is(err, io.EOF) {
				return crawl.Result{}, nil
			}
			return crawl.Result{}, bad(err)
		}
	}
	var names []string
	if c.header {
		row, err := r.Read()
		if errors.Is(err, io.EOF) {
			return crawl.Result{}, nil // an empty file
		}
		if err != nil {
			return crawl.Result{}, bad(err)
		}
		for _, h := range row {
			names = append(names, strings.TrimSpace(strings.TrimPrefix(h, "\uFEFF")))
		}
	}
	// Where each field's column is in this file.
	cols := map[*fieldSpec]int{}
	specs := append(fieldSet{}, c.fields...)
	if c.key != nil {
		specs = append(specs, c.key)
	}
	for _, f := range specs {
		if f.column >= 0 {
			cols[f] = f.column
			continue
		}
		idx := columnIndex(names, f.expr)
		if idx < 0 {
			return crawl.Result{}, crawl.Permanentf("%s: %s: param %s: no column %q in the header; columns: %s", CSVTask, u, f.where, f.expr, strings.Join(names, ", "))
		}
		cols[f] = idx
	}
	base := finalURL(resp, u)
	col := newCollector(c.itemRules, env, u, base)
	line := 0
	for {
		row, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return crawl.Result{}, bad(err)
		}
		line++
		if len(row) == 1 && strings.TrimSpace(row[0]) == "" {
			continue // a blank line
		}
		rowKey := u + "#row" + strconv.Itoa(line)
		get := func(f *fieldSpec) ([]raw, string) { return f.fromCSV(row, cols[f]) }
		if len(c.fields) > 0 {
			if err := col.add(get, rowKey); err != nil {
				return crawl.Result{}, err
			}
			continue
		}
		col.n++
		data := make(map[string]any, len(names))
		for i, name := range names {
			if name == "" {
				continue
			}
			if i < len(row) {
				data[name] = row[i]
			} else {
				data[name] = nil
			}
		}
		if err := col.addData(data, get, rowKey); err != nil {
			return crawl.Result{}, err
		}
	}
	return col.res, nil
}

// columnIndex finds a header name: exactly, else ignoring case and surrounding space.
func columnIndex(names []string, want string) int {
	for i, n := range names {
		if n == want {
			return i
		}
	}
	for i, n := range names {
		if strings.EqualFold(strings.TrimSpace(n), strings.TrimSpace(want)) {
			return i
		}
	}
	return -1
}
