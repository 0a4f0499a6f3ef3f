package generic

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // time zones work on hosts without a zoneinfo database

	"github.com/andybalholm/cascadia"
	"github.com/antchfx/htmlquery"
	"github.com/antchfx/xmlquery"
	"github.com/antchfx/xpath"
	"github.com/tidwall/gjson"
	"golang.org/x/net/html"

	"github.com/trawlerhq/trawler/crawl"
)

// A field spec says where a value is and how to turn it into a typed field:
//
//	title: h1.title                                   # shorthand: CSS text (HTML), XPath (XML),
//	                                                  # JSON path (JSON, feeds), column name (CSV)
//	link:  {css: a.more, attr: href, type: url}
//	score: {css: .score, type: int, regex: '(\d+) points'}
//	date:  {xpath: //time/@datetime, type: date, layout: "2006-01-02 15:04", tz: Asia/Shanghai}
//	price: {path: offer.price, type: float, replace: [",", ""], default: 0, required: true}
//
// The steps, in order: select (css|xpath|path|column, or the item itself when none is
// given), read (attr: text, html, outer_html or an attribute name), trim, regex (the first
// capture group, or the whole match), replace (regex → replacement), split (lists), then
// convert to the type. An empty result, a regex that does not match or a value that does
// not convert counts as missing: the default is used, or the item fails when required.

// The source kinds a field spec can read.
type srcKind int

const (
	srcHTML srcKind = iota
	srcXML
	srcJSON // JSON documents and feeds (normalized to JSON)
	srcCSV
)

// Field types.
const (
	typeAuto   = "" // text as text; JSON values keep their JSON type
	typeString = "string"
	typeInt    = "int"
	typeFloat  = "float"
	typeBool   = "bool"
	typeDate   = "date"
	typeURL    = "url"
	typeList   = "list"
)

var fieldTypes = []string{typeString, typeInt, typeFloat, typeBool, typeDate, typeURL, typeList}

var commonSpecKeys = []string{"type", "of", "layout", "tz", "trim", "regex", "replace", "split", "default", "required"}

func specKeys(src srcKind) []string {
	var own []string
	switch src {
	case srcHTML:
		own = []string{"css", "xpath", "attr"}
	case srcXML:
		own = []string{"xpath", "attr"}
	case srcJSON:
		own = []string{"path"}
	case srcCSV:
		own = []string{"column"}
	}
	return append(own, commonSpecKeys...)
}

func specHint(src srcKind) string {
	switch src {
	case srcHTML:
		return "a CSS selector, an XPath starting with / ./ ../ or (, or a mapping like {css: .price, type: float}"
	case srcXML:
		return "an XPath or a mapping like {xpath: price, type: float}"
	case srcJSON:
		return "a JSON path or a mapping like {path: price, type: float}"
	}
	return "a column name, a column index (0 is the first) or a mapping like {column: price, type: float}"
}

func fieldsExample(src srcKind) string {
	switch src {
	case srcHTML:
		return "{title: h1.title, price: {css: .price, type: float}}"
	case srcXML:
		return "{title: dc:title, id: {xpath: '@id', type: int}}"
	case srcJSON:
		return "{title: data.title, price: {path: price, type: float}}"
	}
	return "{title: title, price: {column: 3, type: float}}"
}

// typeAliases are names people reach for; they get a suggestion, not a silent pass.
var typeAliases = map[string]string{
	"integer": typeInt, "number": typeFloat, "double": typeFloat, "decimal": typeFloat, "boolean": typeBool,
	"str": typeString, "text": typeString, "link": typeURL, "href": typeURL, "array": typeList, "timestamp": typeDate,
}

// fieldSpec is one parsed, compiled field spec. It is immutable once built and safe for
// concurrent use.
type fieldSpec struct {
	name  string
	where string // "fields.title", "key", "next"

	kind   string // css, xpath, path, column, or "" for the item itself
	expr   string // the selector, path or column name as written
	css    cascadia.Selector
	xp     *xpathExpr
	column int // index; -1 when by name

	attr     string
	typ      string
	of       string // element type of a list
	layout   string
	loc      *time.Location
	trim     bool
	re       *regexp.Regexp
	replFrom *regexp.Regexp
	replTo   string
	split    string
	def      any
	hasDef   bool
	required bool
}

// isXPath reports whether a shorthand HTML selector is XPath rather than CSS: CSS never
// starts with / or (, and "./" or "../" cannot start a CSS selector either.
func isXPath(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "/") || strings.HasPrefix(s, "(") || strings.HasPrefix(s, "./") ||
		strings.HasPrefix(s, "../") || s == "." || s == ".."
}

// parseSpec parses one field spec; ns are XML namespaces (prefix → URI).
func parseSpec(where, name string, v any, src srcKind, ns map[string]string) (*fieldSpec, []error) {
	f := &fieldSpec{name: name, where: where, column: -1, trim: true}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("param "+where+": "+format, args...))
	}
	var m map[string]any
	switch x := v.(type) {
	case string:
		switch src {
		case srcHTML:
			if isXPath(x) {
				m = map[string]any{"xpath": x}
			} else {
				m = map[string]any{"css": x}
			}
		case srcXML:
			m = map[string]any{"xpath": x}
		case srcJSON:
			m = map[string]any{"path": x}
		case srcCSV:
			m = map[string]any{"column": x}
		}
	case int, int64, float64:
		if src != srcCSV {
			bad("want %s, got the number %v", specHint(src), x)
			return nil, errs
		}
		m = map[string]any{"column": x}
	case map[string]any:
		m = x
	default:
		bad("want %s, got %s", specHint(src), describe(v))
		return nil, errs
	}
	valid := specKeys(src)
	for _, k := range sortedKeys(m) {
		if !containsStr(valid, k) {
			bad("unknown key `%s`%s; valid keys: %s", k, crawl.Suggest(k, valid), strings.Join(valid, ", "))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}

	// Where the value is.
	_, hasCSS := m["css"]
	_, hasXPath := m["xpath"]
	if hasCSS && hasXPath {
		bad("give css or xpath, not both")
	}
	switch {
	case hasCSS:
		f.kind, f.expr = "css", strings.TrimSpace(str(m["css"]))
		if f.expr == "" {
			bad("css is empty; give a selector, or leave css out to read the item itself")
		} else if sel, err := cascadia.Compile(f.expr); err != nil {
			bad("bad CSS selector %q: %v; fix the selector", f.expr, err)
		} else {
			f.css = sel
		}
	case hasXPath:
		f.kind, f.expr = "xpath", strings.TrimSpace(str(m["xpath"]))
		if f.expr == "" {
			bad("xpath is empty; give an expression, or leave xpath out to read the item itself")
		} else if x, err := compileXPath(f.expr, ns, src == srcXML); err != nil {
			bad("%v", err)
		} else {
			f.xp = x
		}
	case m["path"] != nil:
		f.kind, f.expr = "path", str(m["path"])
		if err := checkJSONPath(f.expr); err != nil {
			bad("bad JSON path %q: %v; fix the path", f.expr, err)
		}
	case m["column"] != nil:
		f.kind = "column"
		switch c := m["column"].(type) {
		case string:
			f.expr = strings.TrimSpace(c)
			if f.expr == "" {
				bad("column is empty; give a header name or an index (0 is the first column)")
			}
		default:
			n, ok := crawl.AsInt(c)
			if !ok || n < 0 {
				bad("column: want a header name or an index (0 is the first column), got %s", describe(c))
			}
			f.column, f.expr = n, strconv.Itoa(n)
		}
	default:
		switch src {
		case srcJSON:
			bad("give path (a JSON path such as data.title)")
		case srcCSV:
			bad("give column (a header name, or an index where 0 is the first column)")
		}
		// HTML and XML: the item node itself.
	}

	// How to read it.
	if a, ok := m["attr"]; ok {
		f.attr = strings.TrimSpace(str(a))
		if f.attr == "" {
			bad("attr is empty; use text, html or an attribute name such as href")
		}
		if src == srcXML && (f.attr == "html" || f.attr == "outer_html") {
			bad("attr %s is for HTML; use text, xml or an attribute name", f.attr)
		}
		if src == srcHTML && f.attr == "xml" {
			bad("attr xml is for XML; use text, html, outer_html or an attribute name")
		}
	}

	// What it becomes.
	if t, ok := m["type"]; ok {
		f.typ = strings.ToLower(strings.TrimSpace(str(t)))
		if f.typ == "time" || f.typ == "datetime" {
			f.typ = typeDate
		}
		if !containsStr(fieldTypes, f.typ) {
			hint := crawl.Suggest(f.typ, fieldTypes)
			if alias, ok := typeAliases[f.typ]; ok {
				hint = fmt.Sprintf(" (did you mean %q?)", alias)
			}
			bad("unknown type %s%s; use one of %s", describe(t), hint, strings.Join(fieldTypes, ", "))
		}
	}
	if o, ok := m["of"]; ok {
		f.of = strings.ToLower(strings.TrimSpace(str(o)))
		if f.typ != typeList {
			bad("`of` gives the element type of a list; add type: list or remove it")
		} else if f.of == typeList || !containsStr(fieldTypes, f.of) {
			bad("unknown element type %s; use one of string, int, float, bool, date, url", describe(o))
		}
	}
	isDate := f.typ == typeDate || f.of == typeDate
	if l, ok := m["layout"]; ok {
		f.layout = str(l)
		if !isDate {
			bad("layout applies to dates; add type: date")
		} else if err := checkLayout(f.layout); err != nil {
			bad("%v", err)
		}
	}
	if z, ok := m["tz"]; ok {
		name := strings.TrimSpace(str(z))
		if !isDate {
			bad("tz applies to dates; add type: date")
		} else if loc, err := time.LoadLocation(name); err != nil || name == "" {
			bad("unknown time zone %q; use an IANA name like Asia/Shanghai, Europe/Berlin or UTC", name)
		} else {
			f.loc = loc
		}
	}
	if t, ok := m["trim"]; ok {
		b, isBool := t.(bool)
		if !isBool {
			bad("trim must be true or false, got %s", describe(t))
		}
		f.trim = b
	}
	if r, ok := m["regex"]; ok {
		pat := str(r)
		re, err := regexp.Compile(pat)
		if err != nil {
			bad("bad regex %q: %s; fix the pattern", pat, reError(err))
		} else {
			f.re = re
		}
	}
	if r, ok := m["replace"]; ok {
		l := anyList(r)
		if len(l) != 2 {
			got := describe(r)
			if _, isList := r.([]any); isList {
				got = fmt.Sprintf("a list of %d", len(l))
			}
			bad("replace wants [from, to]: a regex and its replacement, got %s", got)
		} else {
			from, to := str(l[0]), str(l[1])
			re, err := regexp.Compile(from)
			if err != nil {
				bad("bad regex %q in replace: %s; fix the pattern", from, reError(err))
			} else {
				f.replFrom, f.replTo = re, to
			}
		}
	}
	if s, ok := m["split"]; ok {
		f.split = str(s)
		if f.typ != typeList {
			bad("split makes a list; add type: list")
		} else if f.split == "" {
			bad("split is empty; give the separator, e.g. \",\"")
		}
	}
	if d, ok := m["default"]; ok {
		f.def, f.hasDef = d, true
	}
	if r, ok := m["required"]; ok {
		b, isBool := r.(bool)
		if !isBool {
			bad("required must be true or false, got %s", describe(r))
		}
		f.required = b
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return f, nil
}

func reError(err error) string {
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}

var layoutProbe = time.Date(2017, time.November, 28, 21, 37, 49, 0, time.FixedZone("X", 3*3600))

// checkLayout accepts Go reference-time layouts and the names unix and unix_ms.
func checkLayout(layout string) error {
	switch strings.ToLower(layout) {
	case "unix", "unix_ms":
		return nil
	}
	s := layoutProbe.Format(layout)
	if s == layout {
		return fmt.Errorf("bad date layout %q: write it with Go's reference time (Mon Jan 2 15:04:05 MST 2006), e.g. 2006-01-02 or 2006-01-02 15:04:05, or use unix / unix_ms", layout)
	}
	if _, err := time.Parse(layout, s); err != nil {
		return fmt.Errorf("bad date layout %q: %v", layout, err)
	}
	return nil
}

// fieldSet is the parsed `fields` param, in name order.
type fieldSet []*fieldSpec

func (fs fieldSet) get(name string) *fieldSpec {
	for _, f := range fs {
		if f.name == name {
			return f
		}
	}
	return nil
}

// parseFields parses a `fields` mapping.
func parseFields(v any, src srcKind, ns map[string]string) (fieldSet, []error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, []error{fmt.Errorf("param fields: want a mapping of field name to field spec, like %s, got %s", fieldsExample(src), describe(v))}
	}
	var fs fieldSet
	var errs []error
	for _, name := range sortedKeys(m) {
		if strings.TrimSpace(name) == "" {
			errs = append(errs, fmt.Errorf("param fields: a field has an empty name"))
			continue
		}
		f, ferrs := parseSpec("fields."+name, name, m[name], src, ns)
		errs = append(errs, ferrs...)
		if f != nil {
			fs = append(fs, f)
		}
	}
	return fs, errs
}

// parseOptionalSpec parses a single-spec param such as key or next; nil when unset.
func parseOptionalSpec(p map[string]any, param string, src srcKind, ns map[string]string) (*fieldSpec, []error) {
	v, ok := p[param]
	if !ok || v == nil || v == "" {
		return nil, nil
	}
	return parseSpec(param, param, v, src, ns)
}

// ---- XPath ----

// xpathExpr is a compiled XPath. A compiled expression keeps evaluation state, so
// concurrent evaluations of one expression take turns.
type xpathExpr struct {
	mu  sync.Mutex
	src string
	e   *xpath.Expr
}

// compileXPath compiles an XPath; with checkPrefixes every namespace prefix it uses must
// be declared in ns (an undeclared one would silently match nothing).
func compileXPath(src string, ns map[string]string, checkPrefixes bool) (*xpathExpr, error) {
	if checkPrefixes {
		for _, prefix := range xpathPrefixes(src) {
			if _, ok := ns[prefix]; !ok {
				return nil, fmt.Errorf("XPath %q uses the prefix %s:, which namespaces does not declare; add `%s: <namespace URI>` under namespaces", src, prefix, prefix)
			}
		}
	}
	e, err := xpath.CompileWithNS(src, ns)
	if err != nil {
		return nil, fmt.Errorf("bad XPath %q: %s; fix the expression", src, strings.TrimSuffix(err.Error(), "."))
	}
	return &xpathExpr{src: src, e: e}, nil
}

// xpathPrefixes lists the namespace prefixes of element and attribute names in an XPath
// (prefix:name), skipping string literals, axes (child::) and function names.
func xpathPrefixes(src string) []string {
	var out []string
	isName := func(c byte) bool {
		return c == '_' || c == '-' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c == '"' || c == '\'' {
			if j := strings.IndexByte(src[i+1:], c); j >= 0 {
				i += j + 1
			} else {
				return out
			}
			continue
		}
		if !isName(c) || (c >= '0' && c <= '9') || c == '.' || c == '-' {
			continue
		}
		j := i
		for j < len(src) && isName(src[j]) {
			j++
		}
		word := src[i:j]
		if j+1 < len(src) && src[j] == ':' && src[j+1] != ':' && (i == 0 || src[i-1] != ':') {
			next := src[j+1]
			if next == '*' || next == '_' || next >= 'a' && next <= 'z' || next >= 'A' && next <= 'Z' || next >= 0x80 {
				if !containsStr(out, word) {
					out = append(out, word)
				}
			}
		}
		i = j - 1
	}
	return out
}

// eval runs the expression at nav: each is called for every node of a node-set result
// (stop by returning false); a scalar result (string(), count(), …) is returned as text.
func (x *xpathExpr) eval(nav xpath.NodeNavigator, each func(xpath.NodeNavigator) bool) (scalar string, isScalar bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch r := x.e.Evaluate(nav).(type) {
	case *xpath.NodeIterator:
		for r.MoveNext() {
			if !each(r.Current()) {
				break
			}
		}
		return "", false
	case string:
		return r, true
	case float64:
		if math.IsNaN(r) {
			return "", true
		}
		return strconv.FormatFloat(r, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(r), true
	default:
		return fmt.Sprint(r), true
	}
}

// ---- JSON paths ----

// checkJSONPath catches what makes a gjson path silently match nothing: empty parts,
// unbalanced brackets and quotes, unknown @modifiers.
func checkJSONPath(path string) error {
	if strings.TrimSpace(path) == "" {
		return fmt.Errorf("it is empty")
	}
	var stack []byte
	inStr := false
	start := 0
	part := func(end int) error {
		p := path[start:end]
		if p == "" {
			if start == 0 && strings.HasPrefix(path, "..") {
				return nil // JSON lines: ..#
			}
			return fmt.Errorf("empty part at offset %d (two separators in a row, or one at an end)", start)
		}
		if p[0] == '@' {
			name := p[1:]
			if i := strings.IndexByte(name, ':'); i >= 0 {
				name = name[:i]
			}
			if !gjson.ModifierExists(name, nil) {
				return fmt.Errorf("unknown modifier @%s; gjson has @reverse, @this, @flatten, @join, @keys, @values, @valid, @pretty, @ugly, @tostr, @fromstr, @group, @dig", name)
			}
		}
		return nil
	}
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c == '\\' {
			i++
			continue
		}
		if inStr {
			if c == '"' {
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			if len(stack) > 0 {
				inStr = true
			}
		case '(', '[', '{':
			stack = append(stack, c)
		case ')', ']', '}':
			want := map[byte]byte{')': '(', ']': '[', '}': '{'}[c]
			if len(stack) == 0 || stack[len(stack)-1] != want {
				return fmt.Errorf("unbalanced %q at offset %d", string(c), i)
			}
			stack = stack[:len(stack)-1]
		case '.', '|':
			if len(stack) == 0 {
				if start == 0 && i < 2 && strings.HasPrefix(path, "..") {
					start = i + 1
					continue
				}
				if err := part(i); err != nil {
					return err
				}
				start = i + 1
			}
		}
	}
	if inStr {
		return fmt.Errorf("unclosed string")
	}
	if len(stack) > 0 {
		return fmt.Errorf("unclosed %q", string(stack[len(stack)-1]))
	}
	return part(len(path))
}

// ---- reading values ----

// raw is one selected value before conversion: text, or a JSON value.
type raw struct {
	s    string
	j    gjson.Result
	json bool
}

// fromHTML selects the spec's values under (or at) the item node n.
func (f *fieldSpec) fromHTML(n *html.Node) ([]raw, string) {
	if n == nil {
		return nil, "there is no item"
	}
	all := f.typ == typeList
	var out []raw
	read := func(n *html.Node) bool {
		if s, ok := readHTML(n, f.attr); ok {
			out = append(out, raw{s: s})
		}
		return all || len(out) == 0
	}
	switch f.kind {
	case "css":
	children:
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode {
				continue
			}
			for _, m := range f.css.MatchAll(c) {
				if !read(m) {
					break children
				}
			}
		}
	case "xpath":
		var seen int
		s, scalar := f.xp.eval(htmlquery.CreateXPathNavigator(n), func(nav xpath.NodeNavigator) bool {
			seen++
			hn := nav.(*htmlquery.NodeNavigator)
			switch hn.NodeType() {
			case xpath.AttributeNode, xpath.TextNode:
				out = append(out, raw{s: hn.Value()})
				return all
			}
			return read(hn.Current())
		})
		if scalar {
			return []raw{{s: s}}, ""
		}
		if len(out) == 0 && seen > 0 {
			return nil, fmt.Sprintf("xpath %q matched, but without %s", f.expr, attrName(f.attr))
		}
	default:
		read(n)
	}
	if len(out) == 0 {
		if f.kind == "" {
			return nil, fmt.Sprintf("the item has no %s", attrName(f.attr))
		}
		if f.kind == "css" && f.attr != "" && f.attr != "text" && f.attr != "html" && f.attr != "outer_html" {
			return nil, fmt.Sprintf("css %q matched nothing with attribute %s", f.expr, f.attr)
		}
		return nil, fmt.Sprintf("%s %q matched nothing", f.kind, f.expr)
	}
	return out, ""
}

func attrName(attr string) string {
	if attr == "" || attr == "text" {
		return "text"
	}
	return "attribute " + attr
}

// readHTML reads a node as text, inner or outer HTML, or one of its attributes.
func readHTML(n *html.Node, attr string) (string, bool) {
	switch attr {
	case "", "text":
		return crawl.NodeText(n), true
	case "html":
		var b bytes.Buffer
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			_ = html.Render(&b, c)
		}
		return b.String(), true
	case "outer_html":
		var b bytes.Buffer
		_ = html.Render(&b, n)
		return b.String(), true
	}
	for _, a := range n.Attr {
		if a.Key == attr {
			return a.Val, true
		}
	}
	return "", false
}

// fromXML selects the spec's values under (or at) the item node n.
func (f *fieldSpec) fromXML(n *xmlquery.Node) ([]raw, string) {
	all := f.typ == typeList
	var out []raw
	read := func(n *xmlquery.Node) bool {
		if s, ok := readXML(n, f.attr); ok {
			out = append(out, raw{s: s})
		}
		return all || len(out) == 0
	}
	switch f.kind {
	case "xpath":
		var seen int
		s, scalar := f.xp.eval(xmlquery.CreateXPathNavigator(n), func(nav xpath.NodeNavigator) bool {
			seen++
			xn := nav.(*xmlquery.NodeNavigator)
			switch xn.NodeType() {
			case xpath.AttributeNode, xpath.TextNode:
				out = append(out, raw{s: xn.Value()})
				return all
			}
			return read(xn.Current())
		})
		if scalar {
			return []raw{{s: s}}, ""
		}
		if len(out) == 0 {
			if seen > 0 {
				return nil, fmt.Sprintf("xpath %q matched, but without %s", f.expr, attrName(f.attr))
			}
			return nil, fmt.Sprintf("xpath %q matched nothing", f.expr)
		}
	default:
		read(n)
		if len(out) == 0 {
			return nil, fmt.Sprintf("the item has no %s", attrName(f.attr))
		}
	}
	return out, ""
}

func readXML(n *xmlquery.Node, attr string) (string, bool) {
	switch attr {
	case "", "text":
		return n.InnerText(), true
	case "xml":
		return n.OutputXML(false), true
	}
	for _, a := range n.Attr {
		name := a.Name.Local
		if a.Name.Space != "" {
			name = a.Name.Space + ":" + name
		}
		if name == attr || a.Name.Local == attr {
			return a.Value, true
		}
	}
	return "", false
}

// fromJSON selects the spec's value in a JSON item.
func (f *fieldSpec) fromJSON(item gjson.Result) ([]raw, string) {
	r := item.Get(f.expr)
	if !r.Exists() {
		return nil, fmt.Sprintf("path %q is absent", f.expr)
	}
	if r.Type == gjson.Null {
		return nil, fmt.Sprintf("path %q is null", f.expr)
	}
	return []raw{{j: r, json: true}}, ""
}

// fromCSV reads the cell at index col of a row.
func (f *fieldSpec) fromCSV(row []string, col int) ([]raw, string) {
	if col < 0 || col >= len(row) {
		return nil, fmt.Sprintf("column %s is absent from this row (%d columns)", f.expr, len(row))
	}
	return []raw{{s: row[col]}}, ""
}

// ---- converting values ----

// value turns selected values into the field's typed value. A missing value (nothing
// selected, empty, no regex match, not convertible) takes the default; a required field
// without one returns an error naming the field and why.
func (f *fieldSpec) value(raws []raw, why string, base *url.URL) (any, error) {
	if f.typ == typeList {
		out := []any{}
		for _, r := range f.elements(raws) {
			// An element that does not read (a javascript: link among images) is left
			// out of the list.
			v, m := f.one(r, f.of, base)
			switch {
			case m.why == "":
				out = append(out, v)
			case why == "":
				why = m.why
			}
		}
		if len(out) > 0 {
			return out, nil
		}
		if why == "" {
			why = "the list is empty"
		}
		return f.missing(why, out)
	}
	if len(raws) == 0 {
		return f.missing(why, nil)
	}
	v, m := f.one(raws[0], f.typ, base)
	if m.unreadable && !f.hasDef {
		return f.unreadable(m)
	}
	if m.why != "" {
		return f.missing(m.why, nil)
	}
	return v, nil
}

// miss says why a value is not there; unreadable when it is there but does not read as
// the field's type (text in a number field).
type miss struct {
	why        string
	unreadable bool
}

// unreadable is a value that is there but does not read as the field's type: a
// required field fails the item; any other is stored as null with a note (an
// unreadableNote error, which extract collects), so a page that changed its format is
// not hidden behind quiet nulls.
func (f *fieldSpec) unreadable(m miss) (any, error) {
	if f.required {
		return nil, fmt.Errorf("required field %s: %s", f.name, m.why)
	}
	return nil, unreadableNote{fmt.Sprintf("field %s: %s, stored as null; clean it with regex: or replace:, or give the field a default:", f.name, m.why)}
}

// unreadableNote is not a failure: the item is stored, and the note says what was off.
type unreadableNote struct{ note string }

func (n unreadableNote) Error() string { return n.note }

func (f *fieldSpec) missing(why string, zero any) (any, error) {
	if f.hasDef {
		return f.def, nil
	}
	if f.required {
		return nil, fmt.Errorf("required field %s is missing: %s", f.name, why)
	}
	return zero, nil
}

// elements expands list values: JSON arrays into their elements, split text into parts.
func (f *fieldSpec) elements(raws []raw) []raw {
	var out []raw
	for _, r := range raws {
		switch {
		case r.json && r.j.IsArray():
			for _, e := range r.j.Array() {
				out = append(out, raw{j: e, json: true})
			}
		case f.split != "":
			s := r.s
			if r.json {
				s = r.j.String()
			}
			for _, part := range strings.Split(s, f.split) {
				out = append(out, raw{s: part})
			}
		default:
			out = append(out, r)
		}
	}
	return out
}

// textOps reports whether the spec edits text (then JSON values are read as text).
func (f *fieldSpec) textOps() bool { return f.re != nil || f.replFrom != nil }

// one converts a single value to typ; a non-empty reason means it is missing.
func (f *fieldSpec) one(r raw, typ string, base *url.URL) (any, miss) {
	if r.json {
		if r.j.Type == gjson.Null {
			return nil, miss{why: "the value is null"}
		}
		if r.j.Type != gjson.String && !f.textOps() {
			return f.native(r.j, typ, base)
		}
		r = raw{s: r.j.String()}
	}
	s := r.s
	if f.trim {
		s = strings.TrimSpace(s)
	}
	if f.re != nil {
		m := f.re.FindStringSubmatch(s)
		if m == nil {
			return nil, miss{why: fmt.Sprintf("regex %q does not match %q", f.re.String(), clip(s))}
		}
		if len(m) > 1 {
			s = m[1]
		} else {
			s = m[0]
		}
		if f.trim {
			s = strings.TrimSpace(s)
		}
	}
	if f.replFrom != nil {
		s = f.replFrom.ReplaceAllString(s, f.replTo)
		if f.trim {
			s = strings.TrimSpace(s)
		}
	}
	if s == "" {
		return nil, miss{why: "the value is empty"}
	}
	return f.convert(s, typ, base)
}

// native converts a JSON number, bool, object or array.
func (f *fieldSpec) native(j gjson.Result, typ string, base *url.URL) (any, miss) {
	switch typ {
	case typeAuto:
		return jsonValue(j), miss{}
	case typeString:
		if j.IsObject() || j.IsArray() {
			return j.Raw, miss{}
		}
		return j.String(), miss{}
	case typeInt:
		switch j.Type {
		case gjson.Number:
			if n, ok := integral(j); ok {
				return n, miss{}
			}
			return nil, miss{why: fmt.Sprintf("%s is not a whole number", j.Raw), unreadable: true}
		case gjson.True:
			return int64(1), miss{}
		case gjson.False:
			return int64(0), miss{}
		}
	case typeFloat:
		switch j.Type {
		case gjson.Number:
			return j.Float(), miss{}
		case gjson.True:
			return 1.0, miss{}
		case gjson.False:
			return 0.0, miss{}
		}
	case typeBool:
		switch j.Type {
		case gjson.True, gjson.False:
			return j.Bool(), miss{}
		case gjson.Number:
			return j.Float() != 0, miss{}
		}
	case typeDate, typeURL:
		if j.Type == gjson.Number {
			return f.convert(j.Raw, typ, base)
		}
	}
	return nil, miss{why: fmt.Sprintf("cannot read %s as %s", clip(j.Raw), typeName(typ)), unreadable: true}
}

func typeName(t string) string {
	if t == typeAuto {
		return "a value"
	}
	return t
}

// jsonValue is a JSON value as Go: whole numbers become int64, objects and arrays
// maps and slices.
func jsonValue(j gjson.Result) any {
	switch j.Type {
	case gjson.Number:
		if n, ok := integral(j); ok {
			return n
		}
		return j.Float()
	case gjson.String:
		return j.Str
	case gjson.True:
		return true
	case gjson.False:
		return false
	case gjson.Null:
		return nil
	}
	if j.IsArray() {
		arr := j.Array()
		out := make([]any, len(arr))
		for i, e := range arr {
			out[i] = jsonValue(e)
		}
		return out
	}
	m := map[string]any{}
	j.ForEach(func(k, v gjson.Result) bool {
		m[k.String()] = jsonValue(v)
		return true
	})
	return m
}

func integral(j gjson.Result) (int64, bool) {
	if n, err := strconv.ParseInt(j.Raw, 10, 64); err == nil {
		return n, true
	}
	f := j.Float()
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f), true
	}
	return 0, false
}

// convert turns text into typ.
func (f *fieldSpec) convert(s, typ string, base *url.URL) (any, miss) {
	switch typ {
	case typeAuto, typeString:
		return s, miss{}
	case typeInt:
		if n, ok := crawl.ParseInt(s); ok {
			return n, miss{}
		}
	case typeFloat:
		if x, ok := crawl.ParseFloat(s); ok {
			return x, miss{}
		}
	case typeBool:
		switch strings.ToLower(s) {
		case "true", "yes", "y", "on", "1":
			return true, miss{}
		case "false", "no", "n", "off", "0":
			return false, miss{}
		}
	case typeDate:
		if t, ok := crawl.ParseTime(s, f.layout, f.loc); ok {
			return t.Format(time.RFC3339Nano), miss{}
		}
		if f.layout != "" { // the layout given is the first thing to check
			return nil, miss{why: fmt.Sprintf("cannot read %q as date in layout: %q", clip(s), f.layout), unreadable: true}
		}
	case typeURL:
		if u, ok := resolveLink(base, s); ok {
			return u, miss{}
		}
	}
	return nil, miss{why: fmt.Sprintf("cannot read %q as %s", clip(s), typ), unreadable: true}
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

// resolveLink makes a link absolute against base; script and data links are not links.
func resolveLink(base *url.URL, s string) (string, bool) {
	s = strings.TrimSpace(s)
	u, err := url.Parse(s)
	if err != nil {
		return "", false
	}
	switch strings.ToLower(u.Scheme) {
	case "javascript", "data", "vbscript":
		return "", false
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	return u.String(), true
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ---- items ----

// extract computes every field of one item; get selects a spec's raw values.
// allMissing is true when no field selected anything (a separator row, an ad slot); with
// skipEmpty such an item comes back without data or error, even with required fields.
func extract(fs fieldSet, base *url.URL, skipEmpty bool, get func(*fieldSpec) ([]raw, string)) (data map[string]any, allMissing bool, notes []string, err error) {
	type sel struct {
		raws []raw
		why  string
	}
	sels := make([]sel, len(fs))
	allMissing = len(fs) > 0
	for i, f := range fs {
		sels[i].raws, sels[i].why = get(f)
		if len(sels[i].raws) > 0 {
			allMissing = false
		}
	}
	if allMissing && skipEmpty {
		return nil, true, nil, nil
	}
	data = make(map[string]any, len(fs))
	for i, f := range fs {
		v, err := f.value(sels[i].raws, sels[i].why, base)
		var note unreadableNote
		switch {
		case errors.As(err, &note):
			notes = append(notes, note.note)
		case err != nil:
			return nil, false, nil, err
		}
		data[f.name] = v
	}
	return data, allMissing, notes, nil
}

// keyOf evaluates a key spec; "" when it has no value.
func keyOf(key *fieldSpec, base *url.URL, get func(*fieldSpec) ([]raw, string)) (string, error) {
	if key == nil {
		return "", nil
	}
	raws, why := get(key)
	v, err := key.value(raws, why, base)
	if err != nil {
		return "", err
	}
	switch x := v.(type) {
	case nil:
		return "", nil
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, ","), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	return fmt.Sprint(v), nil
}
