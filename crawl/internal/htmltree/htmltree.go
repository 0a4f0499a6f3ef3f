// Package htmltree parses HTML pages into the tree golang.org/x/net/html builds, faster
// for the plain, well-nested markup most pages are made of.
//
// HTML5 tree construction is long because of broken markup: misnested formatting
// tags, content moved out of tables, elements reopened after a stray end tag. A page
// whose tags nest as written needs none of that, and its tree can be built in one pass
// over one copy of the page: nodes come from slabs, and text and attribute values are
// slices of that copy instead of a string each. Parse builds such a page itself, and
// hands any page with a construct it does not handle, at the first sign of one, to
// html.Parse. So the tree is always html.Parse's tree (a random-page test and a fuzz
// target hold the two parsers to that), only cheaper to build for most pages.
//
// What the fast path takes: a doctype of "html"; html, head and body, written or
// implied; head content (meta, link, base, title, script, style, noscript); blocks,
// lists, headings, paragraphs, forms and buttons; formatting, phrasing and custom
// elements; void elements; tables, with the row groups and rows a page may leave out;
// select and its options; inline SVG's common elements and attributes; pre, textarea
// and the raw-text elements; comments; character references. An end tag
// must close the element opened last, but for the paragraphs and list items a block's
// end tag closes; a start tag may close an open paragraph or list item only where it
// was opened last (or with only non-formatting elements after it). Template, math,
// HTML inside an svg, frames, content html.Parse moves out of a table, a NUL anywhere,
// a malformed tag and the like go to html.Parse.
package htmltree

import (
	"bytes"
	"slices"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Parse returns the tree html.Parse builds for page.
func Parse(page []byte) (*html.Node, error) {
	if doc := parseNested(page); doc != nil {
		return doc, nil
	}
	return html.Parse(bytes.NewReader(page))
}

// maxDepth stays under html.Parse's limit of 512 open elements, so that a page that
// deep gets html.Parse's own error.
const maxDepth = 480

// maxAttrs bounds the attributes of a tag the fast path reads: it looks for a
// duplicate among those before, which is quadratic in a tag's attributes.
const maxAttrs = 64

// The insertion modes of the HTML5 tree construction that the fast path meets.
const (
	modeInitial = iota
	modeBeforeHTML
	modeBeforeHead
	modeInHead
	modeAfterHead
	modeInBody
	modeAfterBody
	modeAfterAfterBody
)

const whitespace = " \t\n\f"

// builder builds one page's tree; its methods return false at the first construct it
// leaves to html.Parse.
type builder struct {
	s     string // the page's copy, line ends made LF: text, comments and uncommon names slice it
	mode  int
	doc   *html.Node
	html  *html.Node
	open  []*html.Node // the stack of open elements, html first
	nodes []html.Node  // slab the next nodes come from
	attrs []html.Attribute

	quirks     bool                           // no doctype: a table opens inside a paragraph
	paragraphs int                            // open p elements
	buttons    int                            // open button elements
	selects    int                            // open select elements
	form       bool                           // a form is open
	formatting [len(formattingElements)]uint8 // open formatting elements, by formattingIndex
}

// parseNested returns the page's tree, or nil when the page holds something the fast
// path leaves to html.Parse.
func parseNested(page []byte) *html.Node {
	if bytes.IndexByte(page, 0) >= 0 {
		return nil // html.Parse drops or replaces it, by where it stands
	}
	s := string(page)
	if strings.IndexByte(s, '\r') >= 0 {
		// html.Parse reads CR LF and a lone CR as LF everywhere: in text, attribute
		// values and comments (before references are decoded, so "&#13;" stays a CR),
		// and as whitespace inside tags.
		s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	}
	b := &builder{s: s, open: make([]*html.Node, 0, 32), quirks: true}
	// Slabs sized for the usual page: an element per start tag and about as many text
	// nodes, about one attribute per '='; more come in chunks.
	b.nodes = make([]html.Node, 0, min(8+bytes.Count(page, []byte{'<'})*3/2, 4096))
	b.attrs = make([]html.Attribute, 0, min(8+bytes.Count(page, []byte{'='}), 4096))
	b.doc = b.node(html.DocumentNode, 0, "")
	if !b.run() {
		return nil
	}
	return b.doc
}

func (b *builder) node(t html.NodeType, a atom.Atom, data string) *html.Node {
	if len(b.nodes) == cap(b.nodes) {
		b.nodes = make([]html.Node, 0, 256)
	}
	b.nodes = append(b.nodes, html.Node{Type: t, DataAtom: a, Data: data})
	return &b.nodes[len(b.nodes)-1]
}

func appendChild(parent, n *html.Node) {
	n.Parent = parent
	if last := parent.LastChild; last != nil {
		last.NextSibling = n
		n.PrevSibling = last
	} else {
		parent.FirstChild = n
	}
	parent.LastChild = n
}

func (b *builder) current() *html.Node { return b.open[len(b.open)-1] }

// addText appends text to parent, joined to a text node it ends with, as html.Parse
// does.
func (b *builder) addText(parent *html.Node, text string) {
	if text == "" {
		return
	}
	if last := parent.LastChild; last != nil && last.Type == html.TextNode {
		last.Data += text
		return
	}
	appendChild(parent, b.node(html.TextNode, 0, text))
}

// tag is a start or end tag as read from the page.
type tag struct {
	end, selfClosing bool
	a                atom.Atom
	name             string
	attr             []html.Attribute
}

// run reads the page token by token and builds the tree; false means html.Parse's turn.
func (b *builder) run() bool {
	s, i := b.s, 0
	for i < len(s) {
		if end := textEnd(s, i); end > i {
			if !b.text(s[i:end]) {
				return false
			}
			i = end
			continue
		}
		// A tag, a comment or a doctype starts at i.
		switch c := s[i+1]; {
		case c == '!':
			next, ok := b.markup(i)
			if !ok {
				return false
			}
			i = next
		default:
			t, next, ok := b.readTag(i)
			if !ok {
				return false
			}
			if next, ok = b.tag(t, next); !ok {
				return false
			}
			i = next
		}
		if len(b.open) > maxDepth {
			return false
		}
	}
	return b.eof()
}

// textEnd returns where the text starting at i ends: at the next '<' that opens a tag,
// a comment or a doctype (or that is malformed markup the fast path leaves alone).
func textEnd(s string, i int) int {
	for {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			return len(s)
		}
		i += j
		if i+1 < len(s) {
			if c := s[i+1]; isLetter(c) || c == '/' || c == '!' || c == '?' {
				return i
			}
		}
		i++
	}
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// markup reads a comment or the doctype at i.
func (b *builder) markup(i int) (int, bool) {
	s := b.s
	if strings.HasPrefix(s[i:], "<!--") {
		body := i + 4
		if strings.HasPrefix(s[body:], ">") || strings.HasPrefix(s[body:], "->") {
			return 0, false
		}
		j := strings.Index(s[body:], "--")
		if j < 0 || !strings.HasPrefix(s[body+j:], "-->") {
			return 0, false // "--" inside a comment, or "--!>": html.Parse decides
		}
		b.comment(s[body : body+j])
		return body + j + 3, true
	}
	if b.mode != modeInitial || len(s) < i+9 || !strings.EqualFold(s[i+2:i+9], "doctype") {
		return 0, false
	}
	j := i + 9
	for j < len(s) && strings.IndexByte(whitespace, s[j]) >= 0 {
		j++
	}
	if !strings.HasPrefix(s[j:], "html") {
		return 0, false
	}
	j += 4
	for j < len(s) && strings.IndexByte(whitespace, s[j]) >= 0 {
		j++
	}
	if j == len(s) || s[j] != '>' {
		return 0, false
	}
	appendChild(b.doc, b.node(html.DoctypeNode, 0, "html"))
	b.mode = modeBeforeHTML
	b.quirks = false
	return j + 1, true
}

func (b *builder) comment(data string) {
	var parent *html.Node
	switch b.mode {
	case modeInitial, modeBeforeHTML, modeAfterAfterBody:
		parent = b.doc
	case modeAfterBody:
		parent = b.html
	default:
		parent = b.current()
	}
	appendChild(parent, b.node(html.CommentNode, 0, data))
}

// readTag reads the start or end tag at i.
func (b *builder) readTag(i int) (tag, int, bool) {
	s := b.s
	var t tag
	j := i + 1
	if s[j] == '/' {
		t.end = true
		j++
	}
	if j >= len(s) || !isLetter(s[j]) {
		return t, 0, false // "</>", "</ ", "<?": bogus comments and such
	}
	start := j
	j, upper := scanName(s, j, &tagNameBytes)
	t.name, t.a = name(s[start:j], upper)
	attrStart := len(b.attrs)
	for {
		for j < len(s) && strings.IndexByte(whitespace, s[j]) >= 0 {
			j++
		}
		if j == len(s) {
			return t, 0, false
		}
		switch c := s[j]; {
		case c == '>', c == '/':
			if c == '/' {
				if j+1 == len(s) || s[j+1] != '>' || t.end {
					return t, 0, false
				}
				t.selfClosing = true
				j++
			}
			// The tag's attributes, capped so that appending to them copies.
			if len(b.attrs) > attrStart {
				t.attr = b.attrs[attrStart:len(b.attrs):len(b.attrs)]
			}
			return t, j + 1, !t.end || t.attr == nil
		case j > start && strings.IndexByte(whitespace, s[j-1]) < 0:
			return t, 0, false // an attribute must follow whitespace
		}
		var ok bool
		if j, ok = b.readAttr(j, &attrStart); !ok {
			return t, 0, false
		}
	}
}

// Bytes of tag and attribute names besides ASCII letters and digits that the fast path
// reads (html.Parse takes more, left to it).
var tagNameBytes, attrNameBytes = nameBytes("-"), nameBytes("-_:.@")

func nameBytes(extra string) (set [256]bool) {
	for c := '0'; c <= 'z'; c++ {
		set[c] = c <= '9' || c >= 'a' || c >= 'A' && c <= 'Z'
	}
	for _, c := range []byte(extra) {
		set[c] = true
	}
	return set
}

// scanName returns where the name at j ends, and whether it holds an upper-case letter.
func scanName(s string, j int, set *[256]bool) (end int, upper bool) {
	for ; j < len(s) && set[s[j]]; j++ {
		upper = upper || s[j] >= 'A' && s[j] <= 'Z'
	}
	return j, upper
}

// name returns a tag or attribute name in lower case, as html.Parse stores it.
func name(raw string, upper bool) (string, atom.Atom) {
	if upper {
		raw = strings.ToLower(raw)
	}
	if a := atom.Lookup([]byte(raw)); a != 0 {
		return a.String(), a
	}
	return raw, 0
}

// readAttr reads one attribute at j into b.attrs; the tag's attributes so far start at
// *attrStart.
func (b *builder) readAttr(j int, attrStart *int) (int, bool) {
	s := b.s
	start := j
	j, upper := scanName(s, j, &attrNameBytes)
	if j == start || s[start] == '-' || s[start] == '.' {
		return 0, false
	}
	key, _ := name(s[start:j], upper)
	if len(b.attrs)-*attrStart >= maxAttrs {
		return 0, false // a hostile tag: its duplicates are looked for with a map there
	}
	for _, a := range b.attrs[*attrStart:] {
		if a.Key == key {
			return 0, false // html.Parse keeps the first; rare enough to leave to it
		}
	}
	k := j
	for k < len(s) && strings.IndexByte(whitespace, s[k]) >= 0 {
		k++
	}
	val := ""
	if k < len(s) && s[k] == '=' {
		k++
		for k < len(s) && strings.IndexByte(whitespace, s[k]) >= 0 {
			k++
		}
		if k == len(s) {
			return 0, false
		}
		switch q := s[k]; q {
		case '"', '\'':
			e := strings.IndexByte(s[k+1:], q)
			if e < 0 {
				return 0, false
			}
			val = s[k+1 : k+1+e]
			j = k + 2 + e
		default:
			e := k
			for e < len(s) && strings.IndexByte(whitespace+">", s[e]) < 0 {
				if strings.IndexByte("\"'<=`", s[e]) >= 0 {
					return 0, false
				}
				e++
			}
			if e == k {
				return 0, false
			}
			val, j = s[k:e], e
		}
		var ok bool
		if val, ok = unescapeAttr(val); !ok {
			return 0, false
		}
	}
	if len(b.attrs) == cap(b.attrs) {
		// A new chunk, with the tag's attributes so far, which must stay together.
		chunk := make([]html.Attribute, 0, 256)
		b.attrs = append(chunk, b.attrs[*attrStart:]...)
		*attrStart = 0
	}
	b.attrs = append(b.attrs, html.Attribute{Key: key, Val: val})
	return j, true
}

// unescapeAttr decodes an attribute value's character references as html.Parse does.
// In attributes it decodes only a whole named reference, and none before '=', where
// text also decodes a known prefix ("&notify=1", "&quot0;"); the fast path decodes a
// value as text when every named reference in it decodes alike both ways: whole, or
// not at all ("?a=1&b=2").
//
// The value is a string of its own, not a slice of the page: attribute values become
// URLs, keys and ids that outlive the page (a sink's index, a host's budget), and a
// slice would keep the whole page in memory with them.
func unescapeAttr(v string) (string, bool) {
	if strings.IndexByte(v, '&') < 0 {
		return strings.Clone(v), true
	}
	for i := 0; i < len(v); i++ {
		if v[i] != '&' || i+1 < len(v) && v[i+1] == '#' {
			continue // numeric references decode alike in text and attributes
		}
		k := i + 1
		for k < len(v) && (isLetter(v[k]) || v[k] >= '0' && v[k] <= '9') {
			k++
		}
		if k == i+1 {
			continue // a lone '&' stays as it is
		}
		if k < len(v) && v[k] == ';' {
			k++
		}
		ref := v[i:k]
		switch ref {
		case "&amp;", "&lt;", "&gt;", "&quot;", "&apos;", "&nbsp;":
			continue
		}
		// Decoded whole, the reference leaves no rest of its name and ';'; a
		// reference without ';' decoded at all may decode otherwise in an attribute.
		decoded := html.UnescapeString(ref)
		if decoded != ref && (!strings.HasSuffix(ref, ";") || strings.HasSuffix(decoded, ";")) {
			return "", false
		}
	}
	return html.UnescapeString(v), true
}

// text handles the text between two tags.
func (b *builder) text(t string) bool {
	for {
		if b.mode == modeInBody {
			return b.textInBody(t)
		}
		// These modes treat leading whitespace apart, and a reference could decode to
		// some.
		rest := strings.TrimLeft(t, whitespace)
		if strings.HasPrefix(rest, "&") {
			return false
		}
		switch b.mode {
		case modeAfterBody, modeAfterAfterBody:
			if rest == "" {
				b.addText(b.current(), t)
				return true
			}
			b.mode = modeInBody
			continue
		}
		switch b.mode {
		case modeInHead, modeAfterHead:
			b.addText(b.current(), t[:len(t)-len(rest)])
		}
		if rest == "" {
			return true
		}
		t = rest
		if !b.implied() {
			return false
		}
	}
}

// textInBody adds text where the body's rules put it.
func (b *builder) textInBody(t string) bool {
	cur := b.current()
	switch cur.DataAtom {
	case atom.Table, atom.Tbody, atom.Thead, atom.Tfoot, atom.Tr:
		if strings.Trim(t, whitespace) != "" {
			return false // html.Parse moves it before the table (foster parenting)
		}
		b.addText(cur, t)
		return true
	case atom.Pre, atom.Listing:
		d := unescape(t)
		if cur.FirstChild == nil {
			d = dropFirstNewline(d)
		}
		b.addText(cur, d)
		return true
	}
	b.addText(cur, unescape(t))
	return true
}

// dropFirstNewline drops a newline right after <pre>, <listing> or <textarea>, which is
// not content, as html.Parse does: a CR (only "&#13;" leaves one), then an LF.
func dropFirstNewline(d string) string {
	return strings.TrimPrefix(strings.TrimPrefix(d, "\r"), "\n")
}

func unescape(t string) string {
	if strings.IndexByte(t, '&') < 0 {
		return t
	}
	return html.UnescapeString(t)
}

// implied moves one mode on toward the body, creating the element a page may leave
// out, as html.Parse does for anything a mode does not expect.
func (b *builder) implied() bool {
	switch b.mode {
	case modeInitial, modeBeforeHTML:
		b.startHTML(nil)
	case modeBeforeHead:
		b.startHead(nil)
	case modeInHead:
		b.pop()
		b.mode = modeAfterHead
	case modeAfterHead:
		b.startBody(nil)
	default:
		return false
	}
	return true
}

func (b *builder) startHTML(attr []html.Attribute) {
	b.html = b.node(html.ElementNode, atom.Html, "html")
	b.html.Attr = attr
	appendChild(b.doc, b.html)
	b.open = append(b.open, b.html)
	b.mode = modeBeforeHead
}

func (b *builder) startHead(attr []html.Attribute) {
	b.push(atom.Head, "head", attr)
	b.mode = modeInHead
}

func (b *builder) startBody(attr []html.Attribute) {
	b.push(atom.Body, "body", attr)
	b.mode = modeInBody
}

func (b *builder) push(a atom.Atom, name string, attr []html.Attribute) *html.Node {
	n := b.node(html.ElementNode, a, name)
	n.Attr = attr
	appendChild(b.current(), n)
	b.open = append(b.open, n)
	return n
}

func (b *builder) pop() *html.Node {
	n := b.current()
	b.open = b.open[:len(b.open)-1]
	return n
}

// eof ends the tree as html.Parse does at the end of the page: html, head and body
// exist whatever the page left out.
func (b *builder) eof() bool {
	for b.mode < modeInBody {
		if !b.implied() {
			return false
		}
	}
	return true
}

// tag handles a start or end tag; next is where the page goes on after it.
func (b *builder) tag(t tag, next int) (int, bool) {
	for {
		switch b.mode {
		case modeInitial, modeBeforeHTML:
			if !t.end && t.a == atom.Html {
				b.startHTML(t.attr)
				return next, true
			}
		case modeBeforeHead:
			if !t.end && t.a == atom.Head {
				b.startHead(t.attr)
				return next, true
			}
			if !t.end && t.a == atom.Html {
				return 0, false
			}
		case modeInHead:
			if t.end {
				if t.a == atom.Head {
					b.pop()
					b.mode = modeAfterHead
					return next, true
				}
				break
			}
			switch t.a {
			case atom.Meta, atom.Link, atom.Base, atom.Basefont, atom.Bgsound:
				b.void(t)
				return next, true
			case atom.Title, atom.Script, atom.Style, atom.Noscript, atom.Noframes:
				return b.rawText(t, next)
			case atom.Head, atom.Html, atom.Template:
				return 0, false
			}
		case modeAfterHead:
			if !t.end && t.a == atom.Body {
				b.startBody(t.attr)
				return next, true
			}
			if !t.end {
				switch t.a {
				case atom.Html, atom.Head, atom.Frameset, atom.Base, atom.Basefont, atom.Bgsound, atom.Link,
					atom.Meta, atom.Noframes, atom.Script, atom.Style, atom.Template, atom.Title:
					return 0, false // html.Parse puts these back in the head
				}
			}
		case modeInBody:
			return b.inBody(t, next)
		case modeAfterBody, modeAfterAfterBody:
			if t.a == atom.Html {
				if t.end && b.mode == modeAfterBody {
					b.mode = modeAfterAfterBody
					return next, true
				}
				return 0, false
			}
			b.mode = modeInBody
			continue
		}
		// What a mode before the body does not expect implies the next element; an
		// end tag other than these is ignored by html.Parse (left to it).
		if t.end && t.a != atom.Head && t.a != atom.Body && t.a != atom.Html && t.a != atom.Br {
			return 0, false
		}
		if !b.implied() {
			return 0, false
		}
	}
}

// void inserts an element that has no end tag.
func (b *builder) void(t tag) {
	appendChild(b.current(), b.element(t))
}

func (b *builder) element(t tag) *html.Node {
	n := b.node(html.ElementNode, t.a, t.name)
	n.Attr = t.attr
	return n
}

// rawText inserts an element whose content is text up to its end tag: title and
// textarea, whose references are decoded, and script, style, noscript and the like,
// taken as written.
func (b *builder) rawText(t tag, next int) (int, bool) {
	if t.selfClosing {
		return 0, false
	}
	s := b.s
	e := next
	for {
		k := strings.Index(s[e:], "</")
		if k < 0 {
			return 0, false
		}
		e += k
		if len(s) >= e+2+len(t.name) && strings.EqualFold(s[e+2:e+2+len(t.name)], t.name) {
			break
		}
		e += 2
	}
	end := e + 2 + len(t.name)
	if end == len(s) || s[end] != '>' {
		return 0, false
	}
	body := s[next:e]
	if t.a == atom.Script && strings.Contains(body, "<!--") {
		return 0, false // script data's escaped states
	}
	switch t.a {
	case atom.Title:
		body = unescape(body)
	case atom.Textarea:
		body = dropFirstNewline(unescape(body))
	}
	n := b.element(t)
	appendChild(b.current(), n)
	if body != "" {
		appendChild(n, b.node(html.TextNode, 0, body))
	}
	return end + 1, true
}

// formattingElements are the elements html.Parse tracks in its list of active
// formatting elements (nobr, the one more, is left to it).
var formattingElements = [...]atom.Atom{atom.A, atom.B, atom.Big, atom.Code, atom.Em, atom.Font, atom.I,
	atom.S, atom.Small, atom.Strike, atom.Strong, atom.Tt, atom.U}

// formattingIndex is a's place in formattingElements, -1 for other elements.
func formattingIndex(a atom.Atom) int { return slices.Index(formattingElements[:], a) }

// inBody handles a tag in the body.
func (b *builder) inBody(t tag, next int) (int, bool) {
	if b.current().Namespace == "svg" {
		return b.inSVG(t, next)
	}
	if isTablePart(b.current().DataAtom) {
		return b.inTable(t, next)
	}
	if b.selects > 0 {
		return b.inSelect(t, next)
	}
	if !t.end && t.a == atom.Svg {
		return b.svgElement(t, next)
	}
	if t.end {
		return b.endInBody(t, next)
	}
	if t.selfClosing && !isVoid(t.a) {
		return 0, false
	}
	switch t.a {
	case atom.Meta, atom.Link, atom.Base, atom.Basefont, atom.Bgsound,
		atom.Area, atom.Br, atom.Embed, atom.Img, atom.Wbr, atom.Input, atom.Param, atom.Source, atom.Track:
		b.void(t)
		return next, true
	case atom.Hr:
		if !b.closeParagraph() {
			return 0, false
		}
		b.void(t)
		return next, true
	case atom.Title, atom.Script, atom.Style, atom.Noscript, atom.Noframes, atom.Iframe, atom.Noembed, atom.Textarea:
		return b.rawText(t, next)
	case atom.Xmp:
		if !b.closeParagraph() {
			return 0, false
		}
		return b.rawText(t, next)
	case atom.Table:
		// Without a doctype (quirks mode) a table opens inside an open paragraph.
		if b.paragraphs > 0 && b.quirks || !b.closeParagraph() {
			return 0, false
		}
	case atom.Pre, atom.Listing:
		if !b.closeParagraph() {
			return 0, false
		}
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Center, atom.Details, atom.Dialog,
		atom.Dir, atom.Div, atom.Dl, atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer, atom.Header,
		atom.Hgroup, atom.Main, atom.Menu, atom.Nav, atom.Ol, atom.Section, atom.Summary, atom.Ul, atom.Search:
		if !b.closeParagraph() {
			return 0, false
		}
	case atom.P:
		if !b.closeParagraph() {
			return 0, false
		}
		b.paragraphs++
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		if !b.closeParagraph() || isHeading(b.current().DataAtom) {
			return 0, false
		}
	case atom.Li, atom.Dd, atom.Dt:
		if !b.closeListItem(t.a) || !b.closeParagraph() {
			return 0, false
		}
	case atom.Form:
		if b.form || !b.closeParagraph() {
			return 0, false
		}
		b.form = true
	case atom.Button:
		if b.buttons > 0 {
			return 0, false
		}
		b.buttons++
	case atom.Select:
		b.selects++
	case 0, atom.Span, atom.Abbr, atom.Acronym, atom.Bdi, atom.Bdo, atom.Cite, atom.Data, atom.Dfn,
		atom.Ins, atom.Del, atom.Kbd, atom.Label, atom.Mark, atom.Meter, atom.Output, atom.Picture,
		atom.Progress, atom.Q, atom.Ruby, atom.Samp, atom.Sub, atom.Sup, atom.Time, atom.Var,
		atom.Canvas, atom.Audio, atom.Video, atom.Map, atom.Slot, atom.Legend, atom.Datalist:
		// "any other start tag": inserted where it stands
	default:
		f := formattingIndex(t.a)
		if f < 0 || b.formatting[f] > 0 {
			return 0, false // not taken, or a formatting element nested in its like
		}
		b.formatting[f]++
		// html.Parse sorts a formatting element's attributes in place.
		slices.SortFunc(t.attr, func(x, y html.Attribute) int {
			if c := strings.Compare(x.Key, y.Key); c != 0 {
				return c
			}
			return strings.Compare(x.Val, y.Val)
		})
	}
	b.push(t.a, t.name, t.attr)
	return next, true
}

// svgNames are the SVG elements the fast path builds, by the lower-case name the page's
// tag gives, with the name html.Parse gives them (HTML's adjustments of SVG names).
// Others (title, desc and foreignObject, whose content is HTML again; the filter
// primitives) are left to html.Parse, as are HTML elements inside an svg.
var svgNames = map[string]string{
	"svg": "svg", "g": "g", "path": "path", "circle": "circle", "rect": "rect", "line": "line",
	"polyline": "polyline", "polygon": "polygon", "ellipse": "ellipse", "defs": "defs", "use": "use",
	"symbol": "symbol", "stop": "stop", "mask": "mask", "pattern": "pattern", "image": "image",
	"text": "text", "tspan": "tspan", "marker": "marker",
	"lineargradient": "linearGradient", "radialgradient": "radialGradient", "clippath": "clipPath",
}

// svgAttrNames are the SVG attributes the fast path takes besides data-* and aria-*,
// with the name html.Parse gives them.
var svgAttrNames = map[string]string{
	"d": "d", "fill": "fill", "fill-rule": "fill-rule", "fill-opacity": "fill-opacity", "stroke": "stroke",
	"stroke-width": "stroke-width", "stroke-linecap": "stroke-linecap", "stroke-linejoin": "stroke-linejoin",
	"stroke-miterlimit": "stroke-miterlimit", "stroke-dasharray": "stroke-dasharray",
	"stroke-dashoffset": "stroke-dashoffset", "stroke-opacity": "stroke-opacity", "clip-rule": "clip-rule",
	"clip-path": "clip-path", "mask": "mask", "opacity": "opacity", "cx": "cx", "cy": "cy", "r": "r",
	"rx": "rx", "ry": "ry", "x": "x", "y": "y", "x1": "x1", "x2": "x2", "y1": "y1", "y2": "y2", "fx": "fx",
	"fy": "fy", "width": "width", "height": "height", "points": "points", "transform": "transform",
	"class": "class", "id": "id", "style": "style", "role": "role", "focusable": "focusable",
	"version": "version", "offset": "offset", "stop-color": "stop-color", "stop-opacity": "stop-opacity",
	"href": "href", "color": "color", "display": "display", "visibility": "visibility",
	"font-size": "font-size", "font-family": "font-family", "font-weight": "font-weight",
	"text-anchor": "text-anchor", "dominant-baseline": "dominant-baseline", "xmlns": "xmlns",
	"viewbox": "viewBox", "preserveaspectratio": "preserveAspectRatio", "gradientunits": "gradientUnits",
	"gradienttransform": "gradientTransform", "spreadmethod": "spreadMethod", "clippathunits": "clipPathUnits",
	"patternunits": "patternUnits", "patterntransform": "patternTransform", "maskunits": "maskUnits",
	"markerwidth": "markerWidth", "markerheight": "markerHeight", "refx": "refX", "refy": "refY",
	"pathlength": "pathLength", "textlength": "textLength",
}

// svgElement inserts an SVG element, its name and attributes adjusted as html.Parse
// adjusts them; a self-closing one is closed at once.
func (b *builder) svgElement(t tag, next int) (int, bool) {
	name, ok := svgNames[t.name]
	if !ok {
		return 0, false
	}
	for i, a := range t.attr {
		switch {
		case strings.HasPrefix(a.Key, "data-"), strings.HasPrefix(a.Key, "aria-"):
		case svgAttrNames[a.Key] != "":
			t.attr[i].Key = svgAttrNames[a.Key]
		case a.Key == "xlink:href", a.Key == "xmlns:xlink", a.Key == "xml:space", a.Key == "xml:lang":
			ns, key, _ := strings.Cut(a.Key, ":")
			t.attr[i].Namespace, t.attr[i].Key = ns, key
		default:
			return 0, false
		}
	}
	a := t.a
	if name != t.name {
		a = atom.Lookup([]byte(name))
	}
	n := b.node(html.ElementNode, a, name)
	n.Namespace, n.Attr = "svg", t.attr
	appendChild(b.current(), n)
	if !t.selfClosing {
		b.open = append(b.open, n)
	}
	return next, true
}

// inSVG handles a tag inside an svg: its elements, and end tags that close the element
// opened last.
func (b *builder) inSVG(t tag, next int) (int, bool) {
	if !t.end {
		return b.svgElement(t, next)
	}
	if !strings.EqualFold(b.current().Data, t.name) {
		return 0, false
	}
	b.pop()
	return next, true
}

// inSelect handles a tag inside a select: its options and option groups, and the end
// tags that close them; anything else inside is left to html.Parse.
func (b *builder) inSelect(t tag, next int) (int, bool) {
	cur := func() atom.Atom { return b.current().DataAtom }
	if t.end {
		switch t.a {
		case atom.Select:
			return b.endInBody(t, next)
		case atom.Optgroup:
			if cur() == atom.Option {
				b.pop()
			}
		}
		if cur() != t.a || t.a != atom.Option && t.a != atom.Optgroup {
			return 0, false
		}
		b.pop()
		return next, true
	}
	switch t.a {
	case atom.Option, atom.Optgroup:
		// An option ends the open option; an option group ends the open group too.
		if cur() == atom.Option {
			b.pop()
		}
		if t.a == atom.Optgroup && cur() == atom.Optgroup {
			b.pop()
		}
		if t.selfClosing || cur() != atom.Select && cur() != atom.Optgroup {
			return 0, false
		}
		b.push(t.a, t.name, t.attr)
		return next, true
	}
	return 0, false
}

func isTablePart(a atom.Atom) bool {
	switch a {
	case atom.Table, atom.Tbody, atom.Thead, atom.Tfoot, atom.Tr:
		return true
	}
	return false
}

// inTable handles a tag met where a table's rows are being built (the current node is
// a table, a row group or a row). Rows and cells may leave out tbody and tr, as
// html.Parse then adds them; a cell is built by the body's rules.
func (b *builder) inTable(t tag, next int) (int, bool) {
	cur := func() atom.Atom { return b.current().DataAtom }
	if t.end {
		switch t.a {
		case atom.Table, atom.Tbody, atom.Thead, atom.Tfoot:
			// Closing a table or a row group closes an open row and group inside it.
			if cur() == atom.Tr {
				b.pop()
			}
			if t.a == atom.Table && (cur() == atom.Tbody || cur() == atom.Thead || cur() == atom.Tfoot) {
				b.pop()
			}
		}
		if cur() != t.a || t.a == 0 {
			return 0, false
		}
		b.pop()
		return next, true
	}
	if t.selfClosing {
		return 0, false
	}
	switch t.a {
	case atom.Script, atom.Style:
		return b.rawText(t, next)
	case atom.Input:
		for _, a := range t.attr {
			if a.Key == "type" && strings.EqualFold(a.Val, "hidden") {
				b.void(t)
				return next, true
			}
		}
		return 0, false
	case atom.Tbody, atom.Thead, atom.Tfoot:
		if cur() == atom.Tr {
			b.pop()
		}
		if cur() != atom.Table {
			b.pop() // the open row group ends where the next begins
		}
	case atom.Tr:
		switch cur() {
		case atom.Tr:
			b.pop()
		case atom.Table:
			b.push(atom.Tbody, "tbody", nil)
		}
	case atom.Td, atom.Th:
		if cur() == atom.Table {
			b.push(atom.Tbody, "tbody", nil)
		}
		if cur() != atom.Tr {
			b.push(atom.Tr, "tr", nil)
		}
	default:
		return 0, false // caption, columns, and content html.Parse moves before the table
	}
	b.push(t.a, t.name, t.attr)
	return next, true
}

// closeParagraph closes an open p before a start tag that ends it, when the p is the
// element opened last; false leaves the page to html.Parse.
func (b *builder) closeParagraph() bool {
	if b.paragraphs == 0 {
		return true
	}
	if b.current().DataAtom != atom.P {
		return false
	}
	b.pop()
	b.paragraphs--
	return true
}

// closeListItem closes an open li (or dd, dt) before a new one where html.Parse does:
// the nearest one open with no special element but address, div or p opened after
// it. What was opened after it closes with it, unless a formatting element is among
// that, which html.Parse would open again (left to it).
func (b *builder) closeListItem(a atom.Atom) bool {
	for i := len(b.open) - 1; i >= 0; i-- {
		switch n := b.open[i].DataAtom; {
		case n == atom.Li && a == atom.Li, (n == atom.Dd || n == atom.Dt) && a != atom.Li:
			for _, e := range b.open[i+1:] {
				if formattingIndex(e.DataAtom) >= 0 {
					return false
				}
				if e.DataAtom == atom.P {
					b.paragraphs--
				}
			}
			b.open = b.open[:i]
			return true
		case n == atom.Address || n == atom.Div || n == atom.P:
		case isSpecial(n):
			return true
		}
	}
	return true
}

// endImplied closes the paragraphs, list items and options left open inside an element
// whose end tag comes, as html.Parse does before a block's, a form's, a select's or a
// list item's end tag (a list item's closes only paragraphs); it stops at the element
// itself.
func (b *builder) endImplied(a atom.Atom) {
	for {
		switch cur := b.current().DataAtom; {
		case cur == atom.P:
			b.paragraphs--
		case (cur == atom.Li || cur == atom.Dd || cur == atom.Dt || cur == atom.Option || cur == atom.Optgroup) &&
			a != atom.Li && a != atom.Dd && a != atom.Dt:
		default:
			return
		}
		b.pop()
	}
}

func (b *builder) endInBody(t tag, next int) (int, bool) {
	cur := b.current()
	switch t.a {
	case atom.Body, atom.Html:
		if cur.DataAtom != atom.Body {
			return 0, false
		}
		b.mode = modeAfterBody
		if t.a == atom.Html {
			b.mode = modeAfterAfterBody
		}
		return next, true
	}
	switch t.a {
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Button, atom.Center, atom.Details,
		atom.Dialog, atom.Dir, atom.Div, atom.Dl, atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer,
		atom.Header, atom.Hgroup, atom.Listing, atom.Main, atom.Menu, atom.Nav, atom.Ol, atom.Pre, atom.Search,
		atom.Section, atom.Summary, atom.Ul, atom.Form, atom.Li, atom.Dd, atom.Dt, atom.Select:
		b.endImplied(t.a)
		cur = b.current()
	}
	if cur.Data != t.name || cur.Namespace != "" || len(b.open) <= 2 {
		return 0, false // an end tag that closes anything but the last element opened
	}
	switch t.a {
	case atom.P:
		b.paragraphs--
	case atom.Form:
		b.form = false
	case atom.Button:
		b.buttons--
	case atom.Select:
		b.selects--
	default:
		if f := formattingIndex(t.a); f >= 0 {
			b.formatting[f]--
		}
	}
	b.pop()
	return next, true
}

func isVoid(a atom.Atom) bool {
	switch a {
	case atom.Area, atom.Base, atom.Basefont, atom.Bgsound, atom.Br, atom.Embed, atom.Hr, atom.Img,
		atom.Input, atom.Link, atom.Meta, atom.Param, atom.Source, atom.Track, atom.Wbr:
		return true
	}
	return false
}

func isHeading(a atom.Atom) bool {
	switch a {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		return true
	}
	return false
}

// isSpecial reports the elements golang.org/x/net/html counts as "special" that can
// stand open on the fast path's stack (it does not count search).
func isSpecial(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Body, atom.Button, atom.Center,
		atom.Dd, atom.Details, atom.Dir, atom.Div, atom.Dl, atom.Dt, atom.Fieldset, atom.Figcaption,
		atom.Figure, atom.Footer, atom.Form, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6,
		atom.Head, atom.Header, atom.Hgroup, atom.Html, atom.Li, atom.Main, atom.Menu, atom.Nav, atom.Ol,
		atom.P, atom.Section, atom.Summary, atom.Ul, atom.Pre, atom.Listing, atom.Table, atom.Tbody, atom.Thead,
		atom.Tfoot, atom.Tr, atom.Td, atom.Th, atom.Xmp, atom.Iframe, atom.Noembed, atom.Noscript, atom.Textarea,
		atom.Select:
		return true
	}
	return false
}
