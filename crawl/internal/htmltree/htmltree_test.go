package htmltree

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/html"
)

// dump writes a tree in a form where any difference html.Parse would make shows,
// checking on the way that every link between nodes agrees with its reverse.
func dump(t testing.TB, n *html.Node) string {
	var sb strings.Builder
	var walk func(n *html.Node, depth int)
	walk = func(n *html.Node, depth int) {
		fmt.Fprintf(&sb, "%s%d %d %q %q", strings.Repeat("  ", depth), n.Type, n.DataAtom, n.Data, n.Namespace)
		for _, a := range n.Attr {
			fmt.Fprintf(&sb, " [%q %q=%q]", a.Namespace, a.Key, a.Val)
		}
		sb.WriteByte('\n')
		var prev *html.Node
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Parent != n || c.PrevSibling != prev {
				t.Fatalf("broken links at %q under %q", c.Data, n.Data)
			}
			walk(c, depth+1)
			prev = c
		}
		if n.LastChild != prev {
			t.Fatalf("LastChild of %q is not its last child", n.Data)
		}
	}
	walk(n, 0)
	return sb.String()
}

// sameTree fails unless the fast path's tree for page, when it takes the page, is
// html.Parse's; it reports whether the fast path took it.
func sameTree(t testing.TB, page string) bool {
	t.Helper()
	fast := parseNested([]byte(page))
	if fast == nil {
		return false
	}
	want, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("html.Parse failed where the fast path did not: %v\npage: %q", err, page)
	}
	if got, w := dump(t, fast), dump(t, want); got != w {
		t.Fatalf("trees differ for %q\nfast path:\n%s\nhtml.Parse:\n%s", page, got, w)
	}
	return true
}

// pages are shapes the fast path must take, and build as html.Parse does.
var pages = []string{
	``,
	`<!DOCTYPE html>`,
	"<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>Demo &amp; News</title></head>\n<body>\n<div class=\"header\"><a href=\"/news?p=1&amp;q=2\">Demo News</a></div>\n</body>\n</html>\n",
	"<!doctype html><html><head>\n  <link rel=stylesheet href=/a.css>\n  <script src=\"/a.js\"></script>\n  <script>var a = \"</b>\" + 1 < 2;</script>\n  <style>a > b { color: red }</style>\n</head>\n<body class=\"x\">\n<!-- a comment -->\n<article class=\"story\" data-id=\"7\"><h1 class=\"title\">A &lt; B&nbsp;&copy;</h1><div class=\"text\">\n<p>one</p>\n<p>two <b>bold <i>both</i></b> <a href=x title='t' class=c>link</a></p>\n</div></article>\n<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul>\n<dl><dt>t</dt><dd>d</dd></dl>\n<form action=/s><input name=q><button type=submit>Go</button></form>\n<img src=a.png alt=\"\"><br/><hr>\n<my-widget data-x=1>custom</my-widget>\n<span>a < b and c <= d</span>\n</body>\n</html>\n<!-- after -->\n",
	`<ul><li>no html, head or body</li></ul>`,
	`just text & more`,
	`<title>t</title><p>implied everything`,
	"<html>\n<head>\n</head>\n<body>\n</body>\n</html>",
	"<html><body></body> \n</html> \n",
	"<p>unclosed <b>formatting",
	`<a href="/x?a=1&amp;b=2" data-v='&quot;q&quot;'>q</a>`,
	`<a href="/x?a=1&b=2&page=3&#38;x" title="&copy; &unknown; a & b">raw ampersands</a>`,
	`<div><p>one</p><div>two</div></div>`,
	`<h1>a</h1><h2>b</h2><section><h3>c</h3></section>`,
	`<nav><a class="b" href="/a" id="c">x</a></nav>`,
	`<main><header>h</header><footer>f</footer><aside>a</aside></main>`,
	"<body><p>x</p></body><!-- tail -->",
	`<DIV CLASS="Up">upper case</DIV>`,
	`<p><span><em>x</em></span></p><p>y</p>`,
	manyAttributes(maxAttrs),
	"<table class=t>\n<tr><td class=title><a href=/1>one</a></td><td>2</td></tr>\n<tr><th>h</th></tr>\n</table>",
	"<table><thead><tr><th>a</th></tr></thead><tbody><tr><td>1<table><tr><td>nested</td></tr></table></td></tr></tbody></table>",
	"<table><tr><td>the row left open</td></table><table><td>implied row group and row</td></table>",
	"<pre>\ncode &lt;b&gt;\n</pre><pre>no newline</pre><listing>\nx</listing>",
	"<textarea name=t>\nfirst &amp; line</textarea>",
	"<noscript><img src=pixel.gif></noscript><iframe src=x><p>not parsed</iframe><noembed>a</noembed>",
	"<head><noscript><link rel=stylesheet href=a.css></noscript></head>",
	"<p>a paragraph the next block ends<div>block</div><p>one<p>two<h2>t</h2><ul><li>a<li>b<p>c<li>d</ul>",
	"<dl><dt>term<dd>definition<dt>term</dl><div><p>ended by its block's end tag</div><form><p>x</form>",
	"<!DOCTYPE html><p>with a doctype, a table ends the paragraph<table><tr><td>x</td></tr></table>",
	"<table><tbody><tr><td>a</td><tbody><tr><td>b</td></tr><tr><td>c</td><thead><tr><th>d</th></table>",
	`<p>icon <svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 24 24" aria-hidden="true" class="i"><defs><linearGradient id=g gradientUnits=userSpaceOnUse><stop offset=0 stop-color="#fff"/></linearGradient></defs><path d="M0 0h24v24H0z" fill="url(#g)"/><use xlink:href="#s"></use><text x=1 y=2>a &amp; b</text></svg> after</p>`,
	"<!DOCTYPE html>\r\n<html>\r\n<body class=\"a\r\nb\">\r\n<p\rid=x>CR LF\r\nand a lone CR\r<!-- c\r\n -->&#13;</p>\r\n<pre>\r\nx</pre><textarea>\r\ny</textarea></body></html>\r\n",
	"<form><select name=s><option value=1 selected>One<option value=2>Two</option><optgroup label=g><option>3</optgroup></select></form>",
}

// Attribute values become URLs, keys and ids that outlive the page: a slice of the
// page's copy would keep all of it in memory with them.
func TestAttributeValuesDoNotHoldThePage(t *testing.T) {
	page := `<p class=c><a href="/item/1" data-id='1'>the text</a> and <img alt=x></p>`
	doc := parseNested([]byte(page))
	if doc == nil {
		t.Fatal("the fast path left the page to html.Parse")
	}
	var text string
	var values []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode && n.Data == "the text" {
			text = n.Data
		}
		for _, a := range n.Attr {
			values = append(values, a.Val)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	// Text is a slice of the page's copy; where that copy lies follows from it.
	start := uintptr(unsafe.Pointer(unsafe.StringData(text))) - uintptr(strings.Index(page, "the text"))
	for _, v := range values {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(v))); p >= start && p < start+uintptr(len(page)) {
			t.Errorf("attribute value %q is a slice of the page's copy", v)
		}
	}
	if len(values) != 4 {
		t.Fatalf("got %d attribute values, want 4", len(values))
	}
}

// A page larger than the slabs' first estimates: nodes and attributes come in chunks.
func TestALargePageBuildsHTMLParsesTree(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("<ul>")
	for i := range 5000 {
		fmt.Fprintf(&sb, "<li class=item data-i=%d><a href=/%d title='item %d'>item %d</a> <b>new</b></li>\n", i, i, i, i)
	}
	sb.WriteString("</ul>")
	if !sameTree(t, sb.String()) {
		t.Fatal("the fast path left a large plain page to html.Parse")
	}
}

func TestFastPathTakesPlainPagesAndBuildsHTMLParsesTree(t *testing.T) {
	for _, page := range pages {
		if !sameTree(t, page) {
			t.Errorf("the fast path left a plain page to html.Parse: %q", page)
		}
	}
}

// leftToHTMLParse are pages whose trees need rules the fast path does not have.
var leftToHTMLParse = []string{
	`<table>text before the table</table>`,
	`<table><caption>c</caption></table>`,
	`<p>without a doctype, a table opens inside the paragraph<table><tr><td>x</td></tr></table>`,
	`<table><tr><td>a<td>b</tr></table>`,
	`<table><div>moved</div></table>`,
	`<p><span>a block in a paragraph's span<div>block</div>`,
	`<b><i>misnested</b></i>`,
	`<div><span>x</div>`,
	`<ul><li><b>a formatting element open in a list item<li>b</ul>`,
	`<p><span><pre>x</pre>`,
	`<select><option>a<div>content html.Parse takes in a select</div></select>`,
	`<select><option>a<select>`,
	`<svg><foreignObject><div>HTML again inside an svg</div></foreignObject></svg>`,
	`<svg><p>an HTML element breaks out of the svg</p></svg>`,
	`<svg><title>t</title></svg>`,
	`<svg><feGaussianBlur stdDeviation=2 /></svg>`,
	`<svg><path d=x></svg>`,
	`<table><svg></svg></table>`,
	"<p>nul\x00</p>",
	`<a href=x><a href=y>nested</a></a>`,
	`<div/>`,
	`<script><!-- document.write("<script></script>") --></script>`,
	`<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01//EN">`,
	`<a href="x?a=1&notify=2">a reference text would decode, an attribute not</a>`,
	`<p class=a class=b>duplicate attribute</p>`,
	`<template><p>x</p></template>`,
	`<head></head><script>between head and body</script><body></body>`,
	`<textarea/>`,
	`<!-- a -- b -->`,
	`</p>`,
	`<? pi ?>`,
	`<table><colgroup><col></colgroup></table>`,
	strings.Repeat("<div>", 600),
	manyAttributes(80),
}

// manyAttributes is a tag with n distinct attributes.
func manyAttributes(n int) string {
	var sb strings.Builder
	sb.WriteString("<p")
	for i := range n {
		fmt.Fprintf(&sb, " a%d=%d", i, i)
	}
	sb.WriteString(">a tag with more attributes than the fast path reads</p>")
	return sb.String()
}

func TestFastPathLeavesOtherMarkupToHTMLParse(t *testing.T) {
	for _, page := range leftToHTMLParse {
		if parseNested([]byte(page)) != nil {
			t.Errorf("the fast path took a page it has no rules for: %q", page)
		}
		got, err := Parse([]byte(page))
		want, werr := html.Parse(strings.NewReader(page))
		if (err != nil) != (werr != nil) {
			t.Fatalf("Parse(%q) error %v, html.Parse %v", page, err, werr)
		}
		if err == nil && dump(t, got) != dump(t, want) {
			t.Errorf("Parse(%q) differs from html.Parse", page)
		}
	}
}

func TestTooDeepAPageFailsAsHTMLParseDoes(t *testing.T) {
	page := []byte(strings.Repeat("<span>", 600))
	_, err := Parse(page)
	if err == nil || !strings.Contains(err.Error(), "exceeds 512") {
		t.Fatalf("a page nested 600 deep: err %v, want html.Parse's depth error", err)
	}
}

// Random pages are made of balanced elements, text and a few loose tokens: mostly
// well-formed, with every kind of trouble the fast path must either build right or
// leave alone.
var (
	elements = []string{"div", "p", "span", "a", "b", "i", "em", "strong", "code", "small", "ul", "ol", "li",
		"dl", "dt", "dd", "h1", "h2", "section", "article", "nav", "header", "footer", "form", "button", "label",
		"time", "x-card", "search", "dialog", "address", "table", "table", "tbody", "thead", "tr", "tr", "td", "td", "th",
		"caption", "pre", "listing", "xmp", "iframe", "noembed", "select", "select", "option", "option", "optgroup", "svg", "nobr", "template",
		"noscript", "textarea", "title", "script", "style", "html", "head", "body", "DIV", "Span", "TD"}
	attributes = []string{"", "", " class=c", ` href="?a=1&copy=2&not;&notx&b=3&#38&#x26;z"`, " v='&amp&ampx&quot0;&semi;&AMP;&fjlig;'", ` href="/x?a=1&amp;b=2"`, ` href="?a=1&b=2"`, " id=a id=b", " data-x='1' href=\"2\" id=3 hidden",
		` title="a > b"`, " CLASS=Up", ` v='&lt;'`, " a=1 b=2 c=3", " x= \"y\"", "/", " a=b/", ` @click="go()"`, " :k=v"}
	texts = []string{"text", " ", "\n", "\t", "  \n ", "\r\n", "\r", " \r\n\r", "&#13;", "&amp;", "&lt;", "&nbsp;", "&copy", "&#32;", "&#x41;", "&bogus;",
		"a < b", "a<", "x&y", "<!-- c -->", "<!---->", "<img src=a alt=\"\">", "<br>", "<br/>", "<hr>", "<input name=q>",
		"<meta charset=utf-8>", "<link rel=x href=y>", "\n\n", "<input type=hidden name=h>", "<input type=HIDDEN>"}
	loose = []string{"<!DOCTYPE html>", "<!doctype html >", "<!DOCTYPE HTML>", "<!DOCTYPE html PUBLIC \"x\">",
		"</html>", "</head>", "</body>", "</p>", "</li>", "</br>", "<li>", "<p>", "</b>", "<!-- a -- b -->", "<!-->", "<?x?>",
		"</>", "< p>", "<p/>", "<div/>", "\r\n", "\x00", "<script><!--x--></script>", "</div>", "<html>", "<head>", "<body>"}
)

func randomNodes(r *rand.Rand, sb *strings.Builder, depth int) {
	for n := r.IntN(4); n >= 0; n-- {
		switch k := r.IntN(100); {
		case k < 3:
			sb.WriteString(loose[r.IntN(len(loose))])
		case k < 45 || depth > 6:
			sb.WriteString(texts[r.IntN(len(texts))])
		default:
			el := elements[r.IntN(len(elements))]
			sb.WriteString("<" + el + attributes[r.IntN(len(attributes))] + ">")
			switch {
			case el == "select" && r.IntN(2) == 0:
				randomOptions(r, sb)
			case el == "svg" && r.IntN(4) > 0:
				randomSVG(r, sb, depth+1)
			default:
				randomNodes(r, sb, depth+1)
			}
			// Paragraphs and list items often go without their end tags.
			switch omit := r.IntN(20); {
			case omit == 0:
			case omit < 10 && (el == "p" || el == "li" || el == "dd" || el == "dt"):
			default:
				sb.WriteString("</" + el + ">")
			}
		}
	}
}

// randomSVG writes an svg's content: SVG elements, attributes HTML adjusts and not,
// and now and then an HTML element or an integration point.
func randomSVG(r *rand.Rand, sb *strings.Builder, depth int) {
	names := []string{"g", "path", "circle", "rect", "use", "text", "linearGradient", "clipPath", "stop", "defs",
		"svg", "title", "foreignObject", "div", "b", "feBlend", "font", "a"}
	attrs := []string{"", ` d="M0 0"`, " viewBox='0 0 1 1'", " VIEWBOX=1", ` xlink:href="#a"`, " xml:space=x", " xmlns:foo=y",
		" fill=red stroke-width=2", " data-x=1 aria-label=y", " gradientUnits=u", " stdDeviation=1", " color=c", " xmlns=z"}
	for n := r.IntN(4); n >= 0; n-- {
		if r.IntN(3) == 0 || depth > 6 {
			sb.WriteString(texts[r.IntN(len(texts))])
			continue
		}
		el := names[r.IntN(len(names))]
		sb.WriteString("<" + el + attrs[r.IntN(len(attrs))])
		if r.IntN(3) == 0 {
			sb.WriteString("/>")
			continue
		}
		sb.WriteString(">")
		randomSVG(r, sb, depth+1)
		if r.IntN(15) > 0 {
			sb.WriteString("</" + el + ">")
		}
	}
}

// randomOptions writes a select's options and groups, their end tags often left out.
func randomOptions(r *rand.Rand, sb *strings.Builder) {
	for n := r.IntN(5); n >= 0; n-- {
		el := []string{"option", "option", "optgroup", "option value=x", "hr", "p"}[r.IntN(6)]
		sb.WriteString("<" + el + ">" + texts[r.IntN(len(texts))])
		if r.IntN(2) == 0 {
			sb.WriteString("</" + strings.Fields(el)[0] + ">")
		}
	}
}

func randomPage(r *rand.Rand) string {
	var sb strings.Builder
	if r.IntN(2) == 0 {
		sb.WriteString("<!DOCTYPE html>\n")
	}
	if r.IntN(2) == 0 {
		sb.WriteString("<html><head><title>t</title></head>\n<body>")
		randomNodes(r, &sb, 0)
		sb.WriteString("</body></html>\n")
	} else {
		randomNodes(r, &sb, 0)
	}
	return sb.String()
}

// TestRandomPagesBuildHTMLParsesTree holds the fast path to html.Parse on many random
// pages: whenever it takes one, the trees must be the same. (Run with other seeds, two
// million more pages found one difference that these did not, an svg in a table: it
// is among the pages left to html.Parse above.)
func TestRandomPagesBuildHTMLParsesTree(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	taken := 0
	for range n {
		if sameTree(t, randomPage(r)) {
			taken++
		}
	}
	// Most random pages hold some trouble; enough must be taken that the check means
	// something.
	if taken < n/20 {
		t.Fatalf("the fast path took %d of %d random pages; the check needs more", taken, n)
	}
	t.Logf("the fast path took %d of %d random pages", taken, n)
}

func FuzzFastPathBuildsHTMLParsesTree(f *testing.F) {
	for _, p := range append(pages, leftToHTMLParse...) {
		f.Add([]byte(p))
	}
	f.Fuzz(func(t *testing.T, page []byte) {
		sameTree(t, string(page))
	})
}

func BenchmarkParse(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>Comments</title></head>\n<body>\n<div class=\"comments\">\n")
	for i := range 40 {
		fmt.Fprintf(&sb, "<div class=\"comment\" id=\"c%d\" data-id=\"%d\">\n  <span class=\"comhead\"><a class=\"author\" href=\"/user/u%d\">u%d</a> on <a class=\"parent\" href=\"/item/1\">story 1</a></span>\n  <div class=\"text\">Comment number %d says &quot;hello&quot; to everyone here.</div>\n</div>\n", i, i, i, i, i)
	}
	sb.WriteString("</div>\n<a class=\"morelink\" href=\"/item/1/comments?p=2\" rel=\"next\">More comments</a>\n</body>\n</html>\n")
	page := []byte(sb.String())
	if parseNested(page) == nil {
		b.Fatal("the fast path did not take the benchmark's page")
	}
	b.Run("htmltree", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Parse(page); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("x-net-html", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := html.Parse(bytes.NewReader(page)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
