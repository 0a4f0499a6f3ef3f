package eslite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

const maxResultWindow = 10000

func decodeSource(v any) map[string]any {
	s, _ := v.(string)
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	_ = dec.Decode(&m)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

// sourceValues returns the values at a dotted path of _source, arrays flattened.
func sourceValues(src map[string]any, path string) []any {
	var out []any
	var walk func(v any, rest string)
	walk = func(v any, rest string) {
		if arr, ok := v.([]any); ok {
			for _, x := range arr {
				walk(x, rest)
			}
			return
		}
		if rest == "" {
			if v != nil {
				out = append(out, v)
			}
			return
		}
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if x, ok := m[rest]; ok {
			walk(x, "")
			return
		}
		for i := 0; i < len(rest); i++ {
			if rest[i] == '.' {
				if x, ok := m[rest[:i]]; ok {
					walk(x, rest[i+1:])
				}
			}
		}
	}
	walk(src, path)
	return out
}

// typedValue converts a _source value to the field's type: string, float64, time (as
// epoch millis float64) or bool.
func typedValue(fi fieldInfo, v any) (any, bool) {
	switch fi.Type {
	case "text", "keyword":
		if _, ok := v.(map[string]any); ok {
			return nil, false
		}
		return scalarString(v), true
	case "long", "double":
		if s, isStr := v.(string); isStr && fi.ESType == "token_count" {
			// A token_count field holds the number of tokens of its text.
			return float64(len(analyze(s))), true
		}
		f, ok := toFloat(v)
		if ok && fi.Type == "long" {
			f = math.Trunc(f)
		}
		return f, ok
	case "date":
		t, err := parseDateFormat(v, fi.DateFormat)
		if err != nil {
			return nil, false
		}
		return float64(t.UnixMilli()), true
	case "boolean":
		b, ok := toBool(v)
		return b, ok
	}
	return nil, false
}

func fieldValues(fi fieldInfo, src map[string]any) []any {
	var out []any
	for _, v := range sourceValues(src, fi.Src) {
		if tv, ok := typedValue(fi, v); ok {
			out = append(out, tv)
		}
	}
	return out
}

func jsonNumber(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}

func sortValues(specs []sortSpec, d *scoredDoc) []any {
	out := make([]any, 0, len(specs))
	for _, sp := range specs {
		switch sp.field {
		case "_score":
			out = append(out, d.score)
			continue
		case "_doc", "_id":
			out = append(out, d.id)
			continue
		}
		vals := sortSource(sp, d)
		if len(vals) == 0 && sp.missingValue != nil {
			vals = []any{sp.missingValue}
		}
		if len(vals) == 0 && sp.format != "" {
			// A formatted sort has no value to print for a missing one.
			out = append(out, nil)
			continue
		}
		if len(vals) == 0 {
			if sp.desc {
				out = append(out, math.MinInt64)
			} else {
				out = append(out, math.MaxInt64)
			}
			continue
		}
		best := vals[0]
		for _, v := range vals[1:] {
			if c := compareValues(v, best); (c < 0 && !sp.desc) || (c > 0 && sp.desc) {
				best = v
			}
		}
		switch b := best.(type) {
		case float64:
			if sp.format != "" && sp.fi.Type == "date" {
				out = append(out, formatDate(b, sp.format, time.UTC))
				continue
			}
			out = append(out, jsonNumber(b))
		case bool:
			if b {
				out = append(out, 1)
			} else {
				out = append(out, 0)
			}
		default:
			out = append(out, b)
		}
	}
	return out
}

func compareValues(a, b any) int {
	switch x := a.(type) {
	case float64:
		y, _ := b.(float64)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case string:
		y, _ := b.(string)
		return strings.Compare(x, y)
	case bool:
		y, _ := b.(bool)
		if x == y {
			return 0
		}
		if !x {
			return -1
		}
		return 1
	}
	return 0
}

// ---- _source filtering ----

type sourceFilter struct {
	includes, excludes []string
}

func parseSourceFilter(v any) (*sourceFilter, error) {
	switch t := v.(type) {
	case *sourceFilter:
		return t, nil
	case nil:
		return &sourceFilter{}, nil
	case bool:
		if !t {
			return nil, nil
		}
		return &sourceFilter{}, nil
	case string:
		return &sourceFilter{includes: []string{t}}, nil
	case []any:
		f := &sourceFilter{}
		for _, x := range t {
			f.includes = append(f.includes, scalarString(x))
		}
		return f, nil
	case []string:
		return &sourceFilter{includes: t}, nil
	case map[string]any:
		f := &sourceFilter{}
		for k, x := range t {
			var list []string
			for _, y := range clauses(x) {
				list = append(list, scalarString(y))
			}
			switch k {
			case "includes", "include":
				f.includes = list
			case "excludes", "exclude":
				f.excludes = list
			default:
				return nil, parsingErr("[_source] does not support [%s] (includes, excludes)", k)
			}
		}
		return f, nil
	}
	return nil, parsingErr("[_source] malformed: [%v]", v)
}

func pathMatches(patterns []string, path string, prefixOK bool) bool {
	for _, p := range patterns {
		if globMatch(p, path) || strings.HasPrefix(path, p+".") {
			return true
		}
		if prefixOK && strings.HasPrefix(p, path+".") {
			return true
		}
	}
	return false
}

func (f *sourceFilter) apply(src map[string]any) map[string]any {
	if len(f.includes) == 0 && len(f.excludes) == 0 {
		return src
	}
	var walk func(m map[string]any, prefix string) map[string]any
	walk = func(m map[string]any, prefix string) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			path := prefix + k
			if len(f.excludes) > 0 && pathMatches(f.excludes, path, false) {
				continue
			}
			inc := len(f.includes) == 0 || pathMatches(f.includes, path, false)
			if sub, ok := v.(map[string]any); ok && !inc && pathMatches(f.includes, path, true) {
				if r := walk(sub, path+"."); len(r) > 0 {
					out[k] = r
				}
				continue
			}
			if sub, ok := v.(map[string]any); ok && inc && len(f.excludes) > 0 {
				out[k] = walk(sub, path+".")
				continue
			}
			if inc {
				out[k] = v
			}
		}
		return out
	}
	return walk(src, "")
}

// ---- highlighting ----

// highlighter marks the query's terms in a hit's fields. Values are returned whole, one
// fragment per value.
type highlighter struct {
	fields         []hlField
	pre, post      string
	requireMatch   bool
	maxOffset      int // the request's max_analyzed_offset; 0 when unset
	maxOffsetGiven bool
}

type hlField struct {
	name      string
	pre, post string
	query     *qctx // a highlight_query's terms, when the field has one
	unified   bool
}

func tagOpt(x any, def string) (string, error) {
	tags := clauses(x)
	if len(tags) == 0 {
		return "", badRequest("illegal_argument_exception", "pre_tags or post_tags must not be empty")
	}
	if s := scalarString(tags[0]); s != "" {
		return s, nil
	}
	return def, nil
}

func parseHighlight(v any, t *target) (*highlighter, error) {
	if v == nil {
		return nil, nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, parsingErr("[highlight] malformed")
	}
	h := &highlighter{pre: "<em>", post: "</em>", requireMatch: true}
	typ := "unified"
	var err error
	for k, x := range o {
		switch k {
		case "pre_tags":
			if h.pre, err = tagOpt(x, "<em>"); err != nil {
				return nil, err
			}
		case "post_tags":
			if h.post, err = tagOpt(x, "</em>"); err != nil {
				return nil, err
			}
		case "require_field_match":
			h.requireMatch = boolOpt(x)
		case "type":
			typ = scalarString(x)
		case "max_analyzed_offset":
			n, ok := toFloat(x)
			if !ok || n == 0 || n < -1 {
				return nil, badRequest("illegal_argument_exception", "[max_analyzed_offset] must be a positive integer, or -1")
			}
			h.maxOffset, h.maxOffsetGiven = int(n), n > 0
		case "fields", "fragment_size", "number_of_fragments", "encoder", "order", "tags_schema", "no_match_size",
			"boundary_scanner", "boundary_chars", "boundary_max_scan", "fragmenter", "phrase_limit", "highlight_query",
			"boundary_scanner_locale", "fragment_offset", "force_source", "options", "matched_fields":
		default:
			return nil, parsingErr("[highlight] option [%s] is not supported by eslite", k)
		}
	}
	var entries []map[string]any
	var names []string
	switch fs := o["fields"].(type) {
	case map[string]any:
		for n, e := range fs {
			names = append(names, n)
			m, _ := e.(map[string]any)
			entries = append(entries, m)
		}
	case []any:
		for _, e := range fs {
			if m, ok := e.(map[string]any); ok {
				for n, x := range m {
					names = append(names, n)
					mm, _ := x.(map[string]any)
					entries = append(entries, mm)
				}
			}
		}
	default:
		return nil, parsingErr("[highlight] [fields] malformed")
	}
	for i, n := range names {
		opts := entries[i]
		ft := typ
		if x, ok := opts["type"]; ok {
			ft = scalarString(x)
		}
		mk := func(name string) (hlField, error) {
			f := hlField{name: name, pre: h.pre, post: h.post, unified: ft == "unified"}
			if x, ok := opts["pre_tags"]; ok {
				if f.pre, err = tagOpt(x, h.pre); err != nil {
					return f, err
				}
			}
			if x, ok := opts["post_tags"]; ok {
				if f.post, err = tagOpt(x, h.post); err != nil {
					return f, err
				}
			}
			if hq, ok := opts["highlight_query"]; ok {
				qc := &qctx{fields: t.fields, now: time.Now(), t: t}
				if _, err := qc.translate(hq); err != nil {
					return f, err
				}
				f.query = qc
			}
			return f, nil
		}
		var matched []string
		if strings.ContainsAny(n, "*?") {
			for fn, fi := range t.fields {
				if (fi.Type == "text" || fi.Type == "keyword") && globMatch(n, fn) {
					matched = append(matched, fn)
				}
			}
		} else {
			matched = []string{n}
		}
		for _, name := range matched {
			f, err := mk(name)
			if err != nil {
				return nil, err
			}
			h.fields = append(h.fields, f)
		}
	}
	sort.Slice(h.fields, func(i, j int) bool { return h.fields[i].name < h.fields[j].name })
	return h, nil
}

// termsFor returns the terms and prefixes that highlight a field.
func (h *highlighter) termsFor(c *qctx, f hlField) (map[string]bool, []string) {
	src := c
	if f.query != nil {
		src = f.query
	}
	if h.requireMatch && f.query == nil {
		return src.hl[f.name], src.hlPrefix[f.name]
	}
	terms := map[string]bool{}
	var prefixes []string
	for _, m := range src.hl {
		for t := range m {
			terms[t] = true
		}
	}
	for _, p := range src.hlPrefix {
		prefixes = append(prefixes, p...)
	}
	return terms, prefixes
}

func (h *highlighter) apply(c *qctx, src map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for _, f := range h.fields {
		fi, ok := c.fields[f.name]
		if !ok || (fi.Type != "text" && fi.Type != "keyword") {
			continue
		}
		terms, prefixes := h.termsFor(c, f)
		if len(terms) == 0 && len(prefixes) == 0 {
			continue
		}
		match := func(tok string) bool {
			if terms[tok] {
				return true
			}
			for _, p := range prefixes {
				if strings.HasPrefix(tok, p) {
					return true
				}
			}
			return false
		}
		limit := 0
		if c.t != nil && len(c.t.ixs) > 0 {
			limit = c.t.intSetting("highlight.max_analyzed_offset", 0)
		}
		withOffsets := f.unified && c.t != nil && fieldHasOffsets(c.t, fi.Src)
		var frags []any
		for _, v := range sourceValues(src, fi.Src) {
			s := scalarString(v)
			if fi.Type == "keyword" {
				if fi.IgnoreAbove > 0 && len(s) > fi.IgnoreAbove {
					continue
				}
				if match(s) {
					frags = append(frags, f.pre+s+f.post)
				}
				continue
			}
			upto := len(s)
			switch {
			case h.maxOffsetGiven:
				upto = h.maxOffset
			case limit > 0 && len(s) > limit && !withOffsets:
				return nil, badRequest("illegal_argument_exception", "The length [%d] of field [%s] in doc[0]/index[%s] exceeds the [index.highlight.max_analyzed_offset] limit [%d]. To avoid this error, set the query parameter [max_analyzed_offset] to a value less than index setting [%d] and this will tolerate long field values by truncating them.", len(s), f.name, c.t.ixs[0].name, limit, limit)
			}
			if frag, ok := mark(s, upto, match, f.pre, f.post); ok {
				frags = append(frags, frag)
			}
		}
		if len(frags) > 0 {
			out[f.name] = frags
		}
	}
	return out, nil
}

// fieldHasOffsets reports whether a text field is indexed with offsets, which lets the
// unified highlighter skip re-analysis (and its length limit).
func fieldHasOffsets(t *target, path string) bool {
	for _, ix := range t.ixs {
		m := ix.snapshotMeta()
		props, _ := m.Mappings["properties"].(map[string]any)
		cur := props
		parts := strings.Split(path, ".")
		for i, p := range parts {
			def, _ := cur[p].(map[string]any)
			if def == nil {
				break
			}
			if i == len(parts)-1 {
				if def["index_options"] == "offsets" || strings.Contains(fmt.Sprint(def["term_vector"]), "offsets") {
					return true
				}
			}
			cur, _ = def["properties"].(map[string]any)
		}
	}
	return false
}

// mark wraps the matching tokens that start before upto.
func mark(s string, upto int, match func(string) bool, pre, post string) (string, bool) {
	var b bytes.Buffer
	last := 0
	hit := false
	for _, tok := range textAnalyzer.Analyze([]byte(s)) {
		if tok.Start >= upto || !match(string(tok.Term)) {
			continue
		}
		hit = true
		b.WriteString(s[last:tok.Start])
		b.WriteString(pre)
		b.WriteString(s[tok.Start:tok.End])
		b.WriteString(post)
		last = tok.End
	}
	b.WriteString(s[last:])
	return b.String(), hit
}
