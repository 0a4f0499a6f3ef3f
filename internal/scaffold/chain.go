package scaffold

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"
	"gopkg.in/yaml.v3"
)

// Candidate is a group of repeated sibling elements (same tag and classes) that
// contain links: a possible list of items.
type Candidate struct {
	Selector string  `json:"selector"`
	Count    int     `json:"count"`
	Link     string  `json:"link"`      // the item's main link, relative to the item ("" the item itself)
	LinkText float64 `json:"link_text"` // average characters of its text
	Score    float64 `json:"score"`
	Why      string  `json:"why"`
}

// ListFindings is what a list page says about itself.
type ListFindings struct {
	Candidates []Candidate `json:"candidates"` // best first, at most 5
	Items      Candidate   `json:"items"`
	Title      string      `json:"title"` // selector of the title inside an item
	TitleWhy   string      `json:"title_why"`
	Next       string      `json:"next"` // selector of the next-page link; "" none found
	NextWhy    string      `json:"next_why"`
	Links      []string    `json:"links"` // the items' links, absolute, in page order
	Detail     bool        `json:"detail"`
	DetailWhy  string      `json:"detail_why"`
}

// DetailFindings is what a detail page says about itself.
type DetailFindings struct {
	URL      string `json:"url"`
	Title    string `json:"title"`
	TitleWhy string `json:"title_why"`
	Text     string `json:"text"`
	TextWhy  string `json:"text_why"`
}

// AnalyzeList finds the list on a page: repeated siblings with links, ranked by how many
// there are and how much text their main link carries; the title inside an item; the
// next-page link; and whether the items link to detail pages of the same site.
func AnalyzeList(doc *goquery.Document, page *url.URL) (ListFindings, error) {
	var f ListFindings
	groups := map[*html.Node]map[string][]*html.Node{}
	doc.Find("body *").Each(func(_ int, s *goquery.Selection) {
		n := s.Get(0)
		if n.Parent == nil || skipTag[n.Data] {
			return
		}
		k := elemSel(n)
		if groups[n.Parent] == nil {
			groups[n.Parent] = map[string][]*html.Node{}
		}
		groups[n.Parent][k] = append(groups[n.Parent][k], n)
	})
	var cands []Candidate
	for parent, byKey := range groups {
		for key, nodes := range byKey {
			if len(nodes) < 3 {
				continue
			}
			c, ok := candidate(doc, parent, key, nodes)
			if ok {
				cands = append(cands, c)
			}
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].Score != cands[j].Score {
			return cands[i].Score > cands[j].Score
		}
		return cands[i].Selector < cands[j].Selector
	})
	if len(cands) == 0 {
		return f, fmt.Errorf("no list found: no group of 3 or more sibling elements with the same tag and class that contain links")
	}
	if len(cands) > 5 {
		cands = cands[:5]
	}
	f.Candidates = cands
	f.Items = cands[0]
	f.Title, f.TitleWhy = f.Items.Link, "the text of the item's main link"
	items := doc.Find(f.Items.Selector)
	if h := commonChild(items, "h1, h2, h3, h4, h5, h6"); h != "" {
		f.Title, f.TitleWhy = h, "a heading in every item"
	}
	if f.Title == "" {
		f.TitleWhy = "the text of the item, which is itself the link"
	}
	// The items' links, and whether they lead to pages of this site.
	seen := map[string]bool{}
	same := 0
	items.Each(func(_ int, s *goquery.Selection) {
		a := s
		if f.Items.Link != "" {
			a = s.Find(f.Items.Link).First()
		}
		href, ok := a.Attr("href")
		if !ok {
			return
		}
		u, err := page.Parse(strings.TrimSpace(href))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return
		}
		u.Fragment = ""
		abs := u.String()
		f.Links = append(f.Links, abs)
		if u.Host == page.Host && abs != page.String() && !seen[abs] {
			same++
		}
		seen[abs] = true
	})
	switch {
	case len(f.Links) == 0:
		f.DetailWhy = "the items have no usable links"
	case same*5 >= len(f.Links)*4:
		f.Detail = true
		f.DetailWhy = fmt.Sprintf("%d of %d item links are distinct pages on %s", same, len(f.Links), page.Host)
	default:
		f.DetailWhy = fmt.Sprintf("only %d of %d item links are distinct pages on %s: the items are stored from the list", same, len(f.Links), page.Host)
	}
	f.Next, f.NextWhy = findNext(doc)
	return f, nil
}

var skipTag = map[string]bool{"script": true, "style": true, "noscript": true, "template": true, "svg": true, "br": true, "hr": true, "option": true, "meta": true, "link": true}

// elemSel is tag.class1.class2 (classes sorted), the identity of a sibling group.
func elemSel(n *html.Node) string {
	sel := n.Data
	for _, a := range n.Attr {
		if a.Key == "class" {
			cls := strings.Fields(a.Val)
			sort.Strings(cls)
			for _, c := range cls {
				if cssIdent.MatchString(c) {
					sel += "." + c
				}
			}
		}
	}
	return sel
}

var cssIdent = regexp.MustCompile(`^-?[A-Za-z_][A-Za-z0-9_-]*$`)

func idOf(n *html.Node) string {
	for _, a := range n.Attr {
		if a.Key == "id" && cssIdent.MatchString(a.Val) {
			return a.Val
		}
	}
	return ""
}

// candidate scores one group of siblings, or refuses it: too few contain links, or no
// selector matches exactly the group.
func candidate(doc *goquery.Document, parent *html.Node, key string, nodes []*html.Node) (Candidate, bool) {
	sel := key
	if doc.Find(sel).Length() != len(nodes) {
		ps := elemSel(parent)
		if id := idOf(parent); id != "" {
			ps = parent.Data + "#" + id
		}
		sel = ps + " > " + key
		if doc.Find(sel).Length() != len(nodes) {
			return Candidate{}, false
		}
	}
	// The main link: the path (relative to the item) found in most items, with the most
	// text.
	type stat struct {
		items int
		text  int
	}
	stats := map[string]*stat{}
	withLink := 0
	for _, n := range nodes {
		s := goquery.NewDocumentFromNode(n).Selection
		found := map[string]bool{}
		if n.Data == "a" && hasHref(n) {
			found[""] = true
			st := stats[""]
			if st == nil {
				st = &stat{}
				stats[""] = st
			}
			st.items++
			st.text += utf8.RuneCountInString(strings.TrimSpace(s.Text()))
		}
		s.Find("a[href]").Each(func(_ int, a *goquery.Selection) {
			p := relPath(n, a.Get(0))
			if found[p] {
				return
			}
			found[p] = true
			st := stats[p]
			if st == nil {
				st = &stat{}
				stats[p] = st
			}
			st.items++
			st.text += utf8.RuneCountInString(strings.TrimSpace(a.Text()))
		})
		if len(found) > 0 {
			withLink++
		}
	}
	if withLink*5 < len(nodes)*4 {
		return Candidate{}, false
	}
	best, bestText := "", -1.0
	for p, st := range stats {
		if st.items*5 < len(nodes)*4 {
			continue
		}
		avg := float64(st.text) / float64(st.items)
		if avg > bestText || (avg == bestText && p < best) {
			best, bestText = p, avg
		}
	}
	if bestText < 0 {
		return Candidate{}, false
	}
	text := bestText
	if text > 80 {
		text = 80
	}
	score := float64(len(nodes)) * (1 + text)
	why := fmt.Sprintf("%d siblings <%s> in <%s>, every one with a link (%q, %.0f characters of text on average)", len(nodes), key, parent.Data, linkShown(best), bestText)
	if inChrome(parent) {
		score /= 10
		why += "; inside navigation, ranked down"
	}
	return Candidate{Selector: sel, Count: len(nodes), Link: best, LinkText: bestText, Score: score, Why: why}, true
}

func linkShown(p string) string {
	if p == "" {
		return "the item itself"
	}
	return p
}

func hasHref(n *html.Node) bool {
	for _, a := range n.Attr {
		if a.Key == "href" {
			return true
		}
	}
	return false
}

// relPath is the selector of n's descendant d, relative to n: the tags and classes of
// every element on the way, child combinators between them.
func relPath(n, d *html.Node) string {
	var parts []string
	for x := d; x != nil && x != n; x = x.Parent {
		parts = append([]string{elemSel(x)}, parts...)
	}
	return strings.Join(parts, " > ")
}

// inChrome reports whether n is inside navigation, a header or a footer.
func inChrome(n *html.Node) bool {
	for x := n; x != nil; x = x.Parent {
		if x.Type == html.ElementNode && (x.Data == "nav" || x.Data == "header" || x.Data == "footer") {
			return true
		}
	}
	return false
}

// commonChild is the relative selector of an element matching sel present in at least
// four in five items, or "".
func commonChild(items *goquery.Selection, sel string) string {
	count := map[string]int{}
	items.Each(func(_ int, s *goquery.Selection) {
		if h := s.Find(sel).First(); h.Length() > 0 {
			count[relPath(s.Get(0), h.Get(0))]++
		}
	})
	best, n := "", 0
	for p, c := range count {
		if c > n || (c == n && p < best) {
			best, n = p, c
		}
	}
	if n*5 < items.Length()*4 {
		return ""
	}
	return best
}

var nextText = regexp.MustCompile(`(?i)^\s*(next( page)?|more|older( posts| entries)?|下一页|下页|次へ|»|›|>|→)\s*[»›>→]?\s*$`)

// findNext finds the next-page link: rel=next first, then a link whose text says so.
func findNext(doc *goquery.Document) (string, string) {
	if a := doc.Find("a[rel~=next][href]").First(); a.Length() > 0 {
		sel := "a[rel~=next]"
		if s := elemSel(a.Get(0)); s != "a" && doc.Find(s).Length() == 1 {
			sel = s
		}
		return sel, fmt.Sprintf("a link with rel=next (%q → %s)", strings.TrimSpace(a.Text()), a.AttrOr("href", ""))
	}
	if l := doc.Find("link[rel~=next][href]").First(); l.Length() > 0 {
		return "link[rel~=next]", fmt.Sprintf("<link rel=next> in the head (%s)", l.AttrOr("href", ""))
	}
	var sel, why string
	doc.Find("a[href]").EachWithBreak(func(_ int, a *goquery.Selection) bool {
		t := strings.TrimSpace(a.Text())
		if !nextText.MatchString(t) {
			return true
		}
		sel = elemSel(a.Get(0))
		if doc.Find(sel).Length() != 1 {
			sel = fmt.Sprintf("a:contains(%q)", t)
		}
		why = fmt.Sprintf("a link whose text is %q (→ %s)", t, a.AttrOr("href", ""))
		return false
	})
	if sel == "" {
		return "", "no link with rel=next or a text like Next, More, 下一页, »"
	}
	return sel, why
}

// AnalyzeDetail finds a detail page's title and main text.
func AnalyzeDetail(doc *goquery.Document, u string) DetailFindings {
	d := DetailFindings{URL: u}
	if h := doc.Find("h1").First(); h.Length() > 0 {
		d.Title = elemSel(h.Get(0))
		if doc.Find(d.Title).First().Get(0) != h.Get(0) {
			d.Title = "h1"
		}
		d.TitleWhy = fmt.Sprintf("the page's first <h1> (%q)", clip(strings.TrimSpace(h.Text()), 60))
	} else {
		d.Title, d.TitleWhy = "title", "no <h1>: the document's <title>"
	}
	for _, c := range []string{"article", "main", "[role=main]", "[itemprop=articleBody]"} {
		if e := doc.Find(c).First(); e.Length() > 0 {
			d.Text = c
			if s := elemSel(e.Get(0)); strings.Contains(s, ".") && doc.Find(s).Length() == 1 {
				d.Text = s
			}
			d.TextWhy = fmt.Sprintf("the page's <%s> (%d characters of text)", e.Get(0).Data, utf8.RuneCountInString(strings.TrimSpace(e.Text())))
			return d
		}
	}
	// Else the element with the most paragraph text.
	best, most := "", 0
	doc.Find("body div, body section").Each(func(_ int, s *goquery.Selection) {
		n := 0
		s.ChildrenFiltered("p").Each(func(_ int, p *goquery.Selection) { n += len(strings.TrimSpace(p.Text())) })
		if n > most {
			if sel := elemSel(s.Get(0)); doc.Find(sel).Length() == 1 {
				best, most = sel, n
			}
		}
	})
	if best != "" {
		d.Text, d.TextWhy = best, fmt.Sprintf("the element with the most paragraph text (%d characters)", most)
		return d
	}
	d.Text, d.TextWhy = "body", "no article, main or paragraphs: the whole body"
	return d
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// ChainOptions name the chain ChainYAML writes.
type ChainOptions struct {
	Name     string
	URL      *url.URL // the list page
	MaxPages int
}

// ChainYAML writes a chain: a generic.html_list step over the list (and its next pages),
// and a generic.html_detail step over its items' pages when they link to detail pages.
func ChainYAML(o ChainOptions, l ListFindings, d *DetailFindings) ([]byte, error) {
	start := o.URL.RequestURI()
	link := map[string]any{"attr": "href", "type": "url"}
	if l.Items.Link != "" {
		link = map[string]any{"css": l.Items.Link, "attr": "href", "type": "url"}
	}
	title := map[string]any{"attr": "text"} // the item's own text
	if l.Title != "" {
		title = map[string]any{"css": l.Title}
	}
	list := map[string]any{
		"urls":   []string{start},
		"items":  l.Items.Selector,
		"fields": map[string]any{"title": title, "link": link},
		"key":    link,
	}
	if l.Next != "" {
		list["next"] = l.Next
		list["max_pages"] = o.MaxPages
	}
	listStep := map[string]any{"id": "list", "task": "generic.html_list", "params": list}
	if l.Next != "" {
		listStep["from"] = "list"
		listStep["max_depth"] = 100
	}
	steps := []any{listStep}
	if l.Detail && d != nil {
		list["detail"] = "link"
		delete(list, "key")
		steps = append(steps, map[string]any{"id": "detail", "task": "generic.html_detail", "from": "list", "store": []string{"all"},
			"params": map[string]any{"fields": map[string]any{
				"title": map[string]any{"css": d.Title, "required": true},
				"text":  map[string]any{"css": d.Text},
			}}})
	} else {
		listStep["store"] = []string{"all"}
	}
	return encodeChain(o, "generic.html_list", "selectors", steps)
}

// encodeChain writes the chain file: a comment saying where it came from and how to
// check it, the site's root as the default base_url, and the steps.
func encodeChain(o ChainOptions, task, adjust string, steps []any) ([]byte, error) {
	base := &url.URL{Scheme: o.URL.Scheme, Host: o.URL.Host}
	chain := map[string]any{"name": o.Name, "defaults": map[string]any{"params": map[string]any{"base_url": base.String()}}, "steps": steps}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: written by `trawler new chain %s`.\n", o.Name, o.URL)
	fmt.Fprintf(&b, "# Check what it extracts with `trawler try %s --params THIS_FILE`,\n# adjust the %s, then `trawler validate` and `trawler run` it.\n", task, adjust)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(orderedChain(chain)); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// orderedChain puts name, defaults and steps first and every step's id, task, from
// first, so the file reads like the examples.
func orderedChain(c map[string]any) *yaml.Node {
	return toNode(c, []string{"name", "defaults", "steps", "id", "task", "from", "max_depth", "store", "params",
		"urls", "items", "fields", "key", "detail", "next", "next_path", "cursor_path", "cursor_param", "page_param", "start_page", "offset_param",
		"has_more_path", "max_pages", "title", "link", "text", "css", "path", "attr", "type", "required"})
}

func toNode(v any, order []string) *yaml.Node {
	switch x := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		rank := func(k string) int {
			for i, o := range order {
				if o == k {
					return i
				}
			}
			return len(order)
		}
		sort.Slice(keys, func(i, j int) bool {
			if ri, rj := rank(keys[i]), rank(keys[j]); ri != rj {
				return ri < rj
			}
			return keys[i] < keys[j]
		})
		flow := true
		for _, k := range keys {
			if _, isMap := x[k].(map[string]any); isMap {
				flow = false
			}
			if _, isList := x[k].([]any); isList {
				flow = false
			}
		}
		if flow && len(keys) <= 4 {
			n.Style = yaml.FlowStyle
		}
		for _, k := range keys {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, toNode(x[k], order))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range x {
			n.Content = append(n.Content, toNode(e, order))
		}
		return n
	case []string:
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, e := range x {
			n.Content = append(n.Content, toNode(e, order))
		}
		return n
	default:
		var n yaml.Node
		_ = n.Encode(v)
		return &n
	}
}
