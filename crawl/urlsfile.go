package crawl

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// URLsFile is a step's `urls_file:`, start URLs kept in a file beside the chain: one URL
// a line (blank lines and # comments skipped), or a column of a CSV file.
type URLsFile struct {
	Path   string
	Column string // a CSV column, by header name or 1-based number; "" for a text file
	Line   int
}

// MaxURLsFile bounds a urls_file: a plan carries its seeds, and larger lists belong in
// a sitemap or a feeding step.
const MaxURLsFile = 8 << 20

var urlsFileKeys = []string{"path", "column"}

// urlsFile reads a step's `urls_file:`: a path, or {path, column}.
func (l *loader) urlsFile(v *yaml.Node, where string) *URLsFile {
	f := &URLsFile{Line: v.Line}
	if v.Kind == yaml.ScalarNode {
		f.Path = v.Value
	} else {
		l.fields(v, where+".urls_file", urlsFileKeys, func(key string, v *yaml.Node) {
			switch key {
			case "path":
				f.Path = l.str(v, "urls_file.path")
			case "column":
				f.Column = l.str(v, "urls_file.column")
			}
		})
	}
	if strings.TrimSpace(f.Path) == "" {
		l.add(v.Line, "%s: urls_file needs a path, e.g. urls_file: seeds.txt (one URL a line) or {path: seeds.csv, column: url}", where)
		return nil
	}
	return f
}

// addURLsFile appends the URLs of s's urls_file to its `urls` param. Every bad line is
// a problem naming the file and its line.
func (l *loader) addURLsFile(s *Step, spec TaskSpec, where string) {
	f := s.URLsFile
	if !slices.ContainsFunc(spec.Params, func(p Param) bool { return p.Name == "urls" }) {
		l.add(f.Line, "%s: task %s takes no `urls` param, which urls_file fills; give the URLs to the step that starts the crawl", where, spec.Name)
		return
	}
	if l.opts.ReadFile == nil {
		l.add(f.Line, "%s: urls_file is read only where the chain is loaded from a file (trawler run, validate, schedule); here, list the URLs under params.urls", where)
		return
	}
	data, err := l.opts.ReadFile(f.Path)
	if err != nil {
		l.add(f.Line, "%s: urls_file %s: %v", where, f.Path, err)
		return
	}
	if len(data) > MaxURLsFile {
		l.add(f.Line, "%s: urls_file %s is larger than %d MiB; split it into several runs, or serve the URLs as a sitemap and start from generic.sitemap", where, f.Path, MaxURLsFile>>20)
		return
	}
	urls, problems := parseURLsFile(f, data)
	for _, p := range problems {
		p.File = f.Path
		l.problems = append(l.problems, p)
	}
	if len(problems) > 0 {
		return
	}
	if len(urls) == 0 {
		l.add(f.Line, "%s: urls_file %s holds no URL", where, f.Path)
		return
	}
	if s.Params == nil {
		s.Params = map[string]any{}
	}
	var all []any
	switch have := s.Params["urls"].(type) {
	case []any:
		all = append(all, have...)
	case string:
		all = append(all, have)
	}
	for _, u := range urls {
		all = append(all, u)
	}
	s.Params["urls"] = all
}

// parseURLsFile reads the URLs of a text or CSV urls_file; problems carry the line in
// the file (the caller sets their File).
func parseURLsFile(f *URLsFile, data []byte) ([]string, []Problem) {
	var urls []string
	var problems []Problem
	check := func(line int, raw string) {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			if len(problems) < 20 {
				problems = append(problems, Problem{Line: line, Msg: fmt.Sprintf("%q is not an absolute http(s) URL; write one URL a line, like https://example.com/page", RedactText(raw))})
			}
			return
		}
		urls = append(urls, raw)
	}
	csvFile := f.Column != "" || strings.HasSuffix(strings.ToLower(f.Path), ".csv")
	if !csvFile {
		for i, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			check(i+1, line)
		}
		return urls, problems
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	col := 0
	for row := 0; ; row++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := r.FieldPos(0)
		if err != nil {
			return nil, []Problem{{Line: line, Msg: fmt.Sprintf("not CSV: %v", err)}}
		}
		if row == 0 {
			if n, err := strconv.Atoi(f.Column); err == nil && n >= 1 {
				col = n - 1
			} else if f.Column != "" {
				col = slices.IndexFunc(rec, func(h string) bool { return strings.EqualFold(strings.TrimSpace(h), f.Column) })
				if col < 0 {
					return nil, []Problem{{Line: line, Msg: fmt.Sprintf("no column %q in the header (%s)%s", f.Column, strings.Join(rec, ", "), Suggest(f.Column, rec))}}
				}
				continue // the header names the column
			}
			if col < len(rec) && !strings.Contains(rec[col], "://") {
				continue // a header row
			}
		}
		if col >= len(rec) || strings.TrimSpace(rec[col]) == "" {
			continue
		}
		check(line, strings.TrimSpace(rec[col]))
	}
	return urls, problems
}
