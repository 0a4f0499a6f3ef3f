package crawl

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
)

// The field tags Out.Scan reads:
//
//	css:"sel"         the element: its text, or every match for a slice field
//	attr:"href"       an attribute of it instead of its text; without css: the
//	                  attribute of the element scanned itself (an entry of Out.Each)
//	regex:"(\\d+)"    the first group of a pattern over the value (the whole match
//	                  when it has none); a value it does not match counts as empty
//	type:"url"        a link, made absolute against the page (and declared a url)
//	layout:"2006-01-02"  how a time.Time field is written (default: RFC 3339 and the
//	                     common layouts of pages, see ParseTime; "unix", "unix_ms")
//	required:"true"   an empty value fails the input, naming the field
//	json:"name"       the field's name in the stored item (default: lower case);
//	                  json:"name,omitempty" leaves a zero value (a nil pointer) out
//	                  of the item instead of storing it
//	doc:"…"           the field's line in the task's output schema
//
// A value that is there but does not convert to the field's type (an int field that
// reads "n/a") fails the input with the field, the value and the type. Tags that cannot
// work (a selector or pattern that does not compile, a misspelled key, required or
// regex on a field nothing reads, a field of a type Scan cannot fill) make HTMLTask and
// JSONTask tasks refuse to register, naming the struct, the field and the fix.

// scanField is one struct field with its parsed tags.
type scanField struct {
	index    int
	name     string
	css      string
	match    goquery.Matcher // css, compiled once per type, not once per item
	attr     string
	re       *regexp.Regexp
	url      bool
	layout   string
	required bool
	omitzero bool
	doc      string
}

// scanned says whether Scan fills the field: it names an element or an attribute.
func (sf scanField) scanned() bool { return sf.css != "" || sf.attr != "" }

// scanTags are the tag keys Scan, FieldsOf and DataOf read.
var scanTags = []string{"css", "attr", "regex", "type", "layout", "required", "json", "doc"}

// foreignTags are keys other libraries read that lie within two edits of one of
// scanTags, so they are not taken for a misspelling.
var foreignTags = map[string]bool{"bson": true, "db": true}

type typeFields struct {
	fields []scanField
	err    error
}

var scanCache sync.Map // reflect.Type → typeFields

// fieldsOfType parses T's tags once per type; a field whose tags cannot work is left
// out and named in the error (see checkTags).
func fieldsOfType(t reflect.Type) ([]scanField, error) {
	if v, ok := scanCache.Load(t); ok {
		tf := v.(typeFields)
		return tf.fields, tf.err
	}
	var out []scanField
	var errs []error
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := strings.ToLower(f.Name)
		j, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if j == "-" {
			continue
		} else if j != "" {
			name = j
		}
		sf := scanField{index: i, name: name, css: f.Tag.Get("css"), attr: f.Tag.Get("attr"), omitzero: strings.Contains(","+opts+",", ",omitempty,"),
			url: f.Tag.Get("type") == "url", layout: f.Tag.Get("layout"), required: f.Tag.Get("required") == "true", doc: f.Tag.Get("doc")}
		var err error
		if r := f.Tag.Get("regex"); r != "" {
			if sf.re, err = regexp.Compile(r); err != nil {
				err = fmt.Errorf("regex:%q does not compile: %v; fix the pattern (backslashes doubled inside the tag)", r, err)
			}
		}
		if err == nil {
			err = checkTags(f, sf)
		}
		if err == nil && sf.css != "" {
			sf.match = cascadia.MustCompile(sf.css) // checkTags parsed it
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err))
			continue
		}
		out = append(out, sf)
	}
	tf := typeFields{out, errors.Join(errs...)}
	scanCache.Store(t, tf)
	return tf.fields, tf.err
}

// checkTags is the first mistake in one field's tags, worded with its fix.
func checkTags(f reflect.StructField, sf scanField) error {
	keys, ok := tagKeys(f.Tag)
	if !ok {
		return fmt.Errorf("tag `%s` is not key:\"value\" pairs separated by spaces (no space after the colon); `go vet` shows where", f.Tag)
	}
	for _, k := range keys {
		if slices.Contains(scanTags, k) || foreignTags[k] {
			continue
		}
		if c := Closest(k, scanTags); c != "" {
			return fmt.Errorf("tag key %q is not one Trawler reads (did you mean %q?)", k, c)
		}
		for _, c := range scanTags {
			if strings.HasPrefix(k, c) || strings.HasPrefix(c, k) {
				return fmt.Errorf("tag key %q is not one Trawler reads (did you mean %q?)", k, c)
			}
		}
	}
	if sf.css != "" {
		if _, err := cascadia.ParseGroup(sf.css); err != nil {
			return fmt.Errorf("css:%q is not a CSS selector: %v; fix the selector", sf.css, err)
		}
	}
	if typ, ok := f.Tag.Lookup("type"); ok && typ != "url" {
		return fmt.Errorf("type:%q: the only type tag is type:\"url\"; the field's Go type gives the others", typ)
	}
	if req, ok := f.Tag.Lookup("required"); ok && req != "true" && req != "false" {
		return fmt.Errorf("required:%q: write required:\"true\"", req)
	}
	ft := f.Type
	if ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	if sf.layout != "" && ft != reflect.TypeFor[time.Time]() {
		return fmt.Errorf("layout:%q is for time.Time fields, and this one is %s; drop the layout", sf.layout, f.Type)
	}
	if !sf.scanned() {
		for _, k := range []string{"required", "regex", "layout"} {
			if v, ok := f.Tag.Lookup(k); ok && (k != "required" || v == "true") {
				return fmt.Errorf("%s:%q but nothing reads the field: give it css:\"…\" (or attr:\"…\" for an attribute of the element scanned), or drop %s", k, v, k)
			}
		}
		return nil
	}
	if !scannable(f.Type) {
		return fmt.Errorf("Scan cannot fill a %s field; make it a string, number, bool, time.Time, a pointer to one, or []string, or drop css: and attr: and fill it in the task", f.Type)
	}
	return nil
}

// scannable says whether setField (or Scan's []string case) can fill a field of type t.
func scannable(t reflect.Type) bool {
	if t.Kind() == reflect.Slice {
		return t.Elem().Kind() == reflect.String
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// tagKeys lists a struct tag's keys as reflect.StructTag.Get reads them; ok is false
// when the tag is malformed, so Get would silently miss what follows.
func tagKeys(tag reflect.StructTag) (keys []string, ok bool) {
	s := string(tag)
	for {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			return keys, true
		}
		i := 0
		for i < len(s) && s[i] > ' ' && s[i] != ':' && s[i] != '"' && s[i] != 0x7f {
			i++
		}
		if i == 0 || i+1 >= len(s) || s[i] != ':' || s[i+1] != '"' {
			return keys, false
		}
		keys = append(keys, s[:i])
		s = s[i+1:]
		i = 1
		for i < len(s) && s[i] != '"' {
			if s[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(s) {
			return keys, false
		}
		s = s[i+1:]
	}
}

// CheckTags is what is wrong with T's field tags, one line a field, or nil. HTMLTask
// and JSONTask check their item type with it; a test may check any other type.
func CheckTags[T any]() error {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		return nil
	}
	_, err := fieldsOfType(t)
	return err
}

// FieldsOf is the output schema of items of type T.
func FieldsOf[T any]() []Field {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []Field
	fields, _ := fieldsOfType(t)
	for _, sf := range fields {
		ft := t.Field(sf.index).Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem() // an optional value of the pointed-to type
		}
		typ := Object
		switch {
		case sf.url:
			typ = URL
		case ft == reflect.TypeFor[time.Time]():
			typ = Time
		case ft.Kind() == reflect.String:
			typ = String
		case ft.Kind() >= reflect.Int && ft.Kind() <= reflect.Uint64:
			typ = Int
		case ft.Kind() == reflect.Float32 || ft.Kind() == reflect.Float64:
			typ = Float
		case ft.Kind() == reflect.Bool:
			typ = Bool
		case ft.Kind() == reflect.Slice:
			typ = List
		}
		doc := sf.doc
		if doc == "" && sf.css != "" {
			doc = "read from " + sf.css
		}
		out = append(out, Field{Name: sf.name, Type: typ, Doc: doc})
	}
	return out
}

// DataOf is an item's Data from a struct: every exported field under its name, times as
// RFC 3339 in UTC (nil when zero), pointers as what they point to (nil when nil), and
// fields tagged omitempty left out when zero.
func DataOf(v any) map[string]any {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() == reflect.Map {
		if m, ok := rv.Interface().(map[string]any); ok {
			return m
		}
	}
	data := map[string]any{}
	if rv.Kind() != reflect.Struct {
		return data
	}
	fields, _ := fieldsOfType(rv.Type())
	for _, sf := range fields {
		f := rv.Field(sf.index)
		if sf.omitzero && f.IsZero() {
			continue
		}
		if f.Kind() == reflect.Pointer {
			if f.IsNil() {
				data[sf.name] = nil
				continue
			}
			f = f.Elem()
		}
		fv := f.Interface()
		if t, ok := fv.(time.Time); ok {
			if t.IsZero() {
				fv = nil
			} else {
				fv = t.UTC().Format(time.RFC3339)
			}
		}
		data[sf.name] = fv
	}
	return data
}

// Scan fills the tagged fields of the struct v points to from sel, resolving links
// against base; its error names the field and what went wrong, or the tags that cannot
// work.
func Scan(sel *goquery.Selection, base *url.URL, v any) error {
	rv := reflect.ValueOf(v).Elem()
	fields, err := fieldsOfType(rv.Type())
	if err != nil {
		return err
	}
	for _, sf := range fields {
		if !sf.scanned() {
			continue
		}
		fv := rv.Field(sf.index)
		if fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String {
			found := sel
			if sf.match != nil {
				found = sel.FindMatcher(sf.match)
			}
			var vals []string
			for _, n := range found.Nodes {
				if s := sf.value(n, base); s != "" {
					vals = append(vals, s)
				}
			}
			if len(vals) == 0 && sf.required {
				return sf.missing()
			}
			fv.Set(reflect.ValueOf(vals))
			continue
		}
		s := sf.value(sf.first(sel), base)
		if s == "" {
			if sf.required {
				return sf.missing()
			}
			continue
		}
		if err := setField(fv, s, sf.layout); err != nil {
			return fmt.Errorf("field %s: %q is not %s: %v", sf.name, s, fv.Type(), err)
		}
	}
	return nil
}

// missing is the error of a required field that found nothing.
func (sf scanField) missing() error {
	if sf.css == "" {
		return fmt.Errorf("missing required field %s (the element has no %s attribute)", sf.name, sf.attr)
	}
	return fmt.Errorf("missing required field %s (nothing matches %q)", sf.name, sf.css)
}

// first is the element a scalar field reads in sel: the first match of its css in
// document order (what sel.FindMatcher(match).First() is, without collecting every
// match), or sel's first element without css; nil when there is none.
func (sf scanField) first(sel *goquery.Selection) *html.Node {
	if sf.match == nil {
		if len(sel.Nodes) == 0 {
			return nil
		}
		return sel.Nodes[0]
	}
	for _, n := range sel.Nodes {
		if m := cascadia.Query(n, sf.match); m != nil {
			return m
		}
	}
	return nil
}

// value is what one element gives a field: its attribute or trimmed text, narrowed by
// the field's pattern, made absolute for a url field.
func (sf scanField) value(n *html.Node, base *url.URL) string {
	if n == nil {
		return ""
	}
	var s string
	if sf.attr != "" {
		s = attrOf(n, sf.attr)
	} else {
		s = NodeText(n)
	}
	s = strings.TrimSpace(s)
	if sf.re != nil {
		m := sf.re.FindStringSubmatch(s)
		switch {
		case m == nil:
			return ""
		case len(m) > 1:
			s = m[1]
		default:
			s = m[0]
		}
	}
	if sf.url && s != "" && base != nil {
		if u, err := base.Parse(s); err == nil {
			u.Fragment = ""
			s = u.String()
		}
	}
	return s
}

// setField converts s to the field's type.
func setField(fv reflect.Value, s, layout string) error {
	if fv.Kind() == reflect.Pointer {
		v := reflect.New(fv.Type().Elem())
		if err := setField(v.Elem(), s, layout); err != nil {
			return err
		}
		fv.Set(v)
		return nil
	}
	if fv.Type() == reflect.TypeFor[time.Time]() {
		t, ok := ParseTime(s, layout, nil)
		if !ok && layout != "" {
			return fmt.Errorf("%q is not a time in layout %q", s, layout)
		}
		if !ok {
			return fmt.Errorf("%q is not a time in a layout Trawler knows; give the field a layout:\"…\" tag", s)
		}
		fv.Set(reflect.ValueOf(t))
		return nil
	}
	switch fv.Kind() {
	case reflect.String:
		fv.SetString(s)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := ParseInt(s)
		if !ok {
			return fmt.Errorf("%q is not a number", s)
		}
		fv.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := ParseInt(s)
		if !ok || n < 0 {
			return fmt.Errorf("%q is not a number of 0 or more", s)
		}
		fv.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		f, ok := ParseFloat(s)
		if !ok {
			return fmt.Errorf("%q is not a number", s)
		}
		fv.SetFloat(f)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		fv.SetBool(b)
	default:
		return fmt.Errorf("a %s field cannot be scanned; fill it in the task", fv.Type())
	}
	return nil
}

var numberNoise = strings.NewReplacer(",", "", "_", "", " ", "", "\u00a0", "", "\u202f", "", "'", "")

// currency trims currency signs around a number: ￥2,859.34, $12, 12 €.
func currency(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.Is(unicode.Sc, r) || unicode.IsSpace(r) })
}

// ParseInt reads an integer as pages write it: with thousands separators (1,204,
// 1 204, 1'204, 1_204), a sign, currency signs around it (￥2,859, $12, 12 €), or as a
// float with no fraction (3.0).
func ParseInt(s string) (int64, bool) {
	s = numberNoise.Replace(currency(s))
	s = strings.TrimPrefix(s, "+")
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	if x, err := strconv.ParseFloat(s, 64); err == nil && x == math.Trunc(x) && math.Abs(x) < 1<<53 {
		return int64(x), true
	}
	return 0, false
}

// ParseFloat reads a number as ParseInt does, with a fraction: ￥2,859.34 is 2859.34.
// The decimal separator is the point; a comma always separates thousands.
func ParseFloat(s string) (float64, bool) {
	s = strings.TrimPrefix(numberNoise.Replace(currency(s)), "+")
	x, err := strconv.ParseFloat(s, 64)
	return x, err == nil && !math.IsNaN(x) && !math.IsInf(x, 0)
}

// dateLayouts are tried in order when a date field gives no layout.
var dateLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05Z0700",
	"2006-01-02T15:04:05",
	"2006-01-02T15:04",
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05 -0700",
	"2006-01-02 15:04:05",
	"2006-01-02 15:04",
	"2006-01-02",
	time.RFC1123Z,
	time.RFC1123,
	"Mon, 2 Jan 2006 15:04:05 -0700",
	"Mon, 2 Jan 2006 15:04:05 MST",
	"2 Jan 2006 15:04:05 -0700",
	time.RFC850,
	time.RFC822Z,
	time.RFC822,
	time.ANSIC,
	time.UnixDate,
	time.RubyDate,
	"2006/01/02 15:04:05",
	"2006/01/02 15:04",
	"2006/01/02",
	"Jan 2, 2006",
	"January 2, 2006",
	"2 Jan 2006",
	"2 January 2006",
	"2006年1月2日 15:04:05",
	"2006年1月2日 15:04",
	"2006年1月2日",
}

// ParseTime reads s with layout (a Go layout, "unix" or "unix_ms"; "" tries the common
// layouts of pages and feeds) in loc (default UTC) and gives the instant in UTC. A value with no time of day (2026-12-24, 2026年12月24日) is a
// calendar date, not an instant: it is that date at 00:00 UTC whatever loc says, so a
// zone east of UTC does not move it to the day before.
func ParseTime(s, layout string, loc *time.Location) (time.Time, bool) {
	if loc == nil {
		loc = time.UTC
	}
	switch strings.ToLower(layout) {
	case "unix", "unix_ms":
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return time.Time{}, false
		}
		if strings.ToLower(layout) == "unix_ms" {
			return time.UnixMilli(int64(x)).UTC(), true
		}
		sec, frac := math.Modf(x)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
	case "":
		for _, l := range dateLayouts {
			if t, ok := parseIn(l, s, loc); ok {
				return t, true
			}
		}
		return time.Time{}, false
	}
	return parseIn(layout, s, loc)
}

func parseIn(layout, s string, loc *time.Location) (time.Time, bool) {
	t, err := time.ParseInLocation(layout, s, loc)
	if err != nil {
		return time.Time{}, false
	}
	if !hasClock(layout) {
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC), true
	}
	return t.UTC(), true
}

// hasClock reports whether a Go time layout reads a time of day (an hour: 15, 3, 03).
func hasClock(layout string) bool {
	return strings.Contains(layout, "15") || strings.Contains(layout, "3") || layout == time.Kitchen
}

// attrOf is the value of an element's attribute, "" when it has none (as
// goquery.Selection.AttrOr(name, "")).
func attrOf(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// NodeText is the text of a node and its descendants, as goquery.Selection.Text gives
// it, for tasks and extractors that walk html.Node trees themselves.
func NodeText(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	if n.FirstChild != nil && n.FirstChild == n.LastChild && n.FirstChild.Type == html.TextNode {
		return n.FirstChild.Data // one text child, the common case: no copy
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}
