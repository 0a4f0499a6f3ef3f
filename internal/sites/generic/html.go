package generic

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"github.com/antchfx/htmlquery"
	"github.com/antchfx/xpath"
	"golang.org/x/net/html"
	"golang.org/x/text/encoding"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch/charset"
)

const selectorDoc = "CSS, or XPath when it starts with / ./ ../ or ( ; or a mapping {css: …} or {xpath: …}"

var htmlListSpec = crawl.TaskSpec{
	Name:  HTMLListTask,
	Doc:   "an HTML list page: an item per `items` match with its `fields`, next pages (next or next_template, bounded by max_pages), detail links for the next step",
	Seeds: seedInputs,
	Params: []crawl.Param{
		urlsParam,
		baseURLParam,
		{Name: "items", Type: crawl.Object, Required: true, Doc: "selector of the item elements: " + selectorDoc},
		fieldsParam("field name → field spec read inside each item; a CSS selector string is the shorthand", true),
		keyParam,
		detailParam,
		detailTaskParam(HTMLDetailTask),
		{Name: "next", Type: crawl.Object, Doc: "selector of the next-page link, read as its href (or a field spec with another attr)"},
		{Name: "next_template", Type: crawl.String, Doc: "next-page URL with a {page} placeholder, e.g. /list?p={page}, relative to the page; followed while pages have items"},
		{Name: "start_page", Type: crawl.Int, Default: 1, Doc: "number of the first page (the {page} of the start URLs)"},
		{Name: "max_pages", Type: crawl.Int, Default: 0, Doc: "stop after this many pages per start URL (0: no limit but loops, empty pages and the step's max_depth)"},
		headersParam,
		encodingParam,
	},
	Output:  commonOutput,
	Timeout: 30 * time.Second,
	Retries: 3,
	HTML:    true,
}

var htmlDetailSpec = crawl.TaskSpec{
	Name:  HTMLDetailTask,
	Doc:   "an HTML detail page: one item with its `fields`; fields carried from the list page fill what the page lacks",
	Seeds: seedInputs,
	Params: []crawl.Param{
		urlsParam,
		baseURLParam,
		fieldsParam("field name → field spec read from the whole page; a CSS selector string is the shorthand", true),
		keyParam,
		{Name: "canonical", Type: crawl.Bool, Default: false, Doc: "without `key:`, key the record by the page's <link rel=\"canonical\"> when it names one (made canonical, see docs/tasks.md, \"Canonical URLs\"), so every address of one page is one record"},
		headersParam,
		encodingParam,
	},
	Output:  commonOutput,
	Timeout: 30 * time.Second,
	Retries: 3,
	HTML:    true,
}

// The HTML tasks.
var (
	HTMLList   = configTask(htmlListSpec, buildHTMLList, runHTMLList)
	HTMLDetail = configTask(htmlDetailSpec, buildHTMLDetail, runHTMLDetail)
)

type htmlListConfig struct {
	common
	itemRules
	enc       encoding.Encoding
	items     *fieldSpec
	next      *fieldSpec
	template  string
	startPage int
	maxPages  int
}

func buildHTMLList(p crawl.Params) (*htmlListConfig, []error) {
	c := &htmlListConfig{}
	var errs, e []error
	c.common, errs = parseCommon(HTMLListTask, p)
	c.items, e = parseSelector(p, "items", srcHTML)
	errs = append(errs, e...)
	c.itemRules, e = parseItemRules(HTMLListTask, p, srcHTML, nil, HTMLDetailTask)
	errs = append(errs, e...)
	c.next, e = parseOptionalSpec(p, "next", srcHTML, nil)
	errs = append(errs, e...)
	if c.next != nil && c.next.attr == "" {
		c.next.attr = "href"
	}
	c.template = strings.TrimSpace(str(p["next_template"]))
	if c.template != "" {
		if c.next != nil {
			errs = append(errs, fmt.Errorf("param next_template: set next or next_template, not both"))
		}
		if !strings.Contains(c.template, "{page}") {
			errs = append(errs, fmt.Errorf("param next_template: %q has no {page}; put {page} where the page number goes, e.g. /list?p={page}", c.template))
		} else if _, err := url.Parse(strings.ReplaceAll(c.template, "{page}", "1")); err != nil {
			errs = append(errs, fmt.Errorf("param next_template: bad URL %q: %v", c.template, err))
		}
	}
	c.startPage = intParam(p, "start_page", 1)
	c.maxPages = intParam(p, "max_pages", 0)
	errs = append(errs, checkNonNegative(p, "max_pages")...)
	c.enc, e = parseEncodingParam(p["encoding"])
	errs = append(errs, e...)
	return c, errs
}

// parseSelector parses a param that selects elements: a selector string or a mapping
// with css or xpath only.
func parseSelector(p crawl.Params, name string, src srcKind) (*fieldSpec, []error) {
	v := p[name]
	if v == nil || v == "" {
		return nil, nil
	}
	if m, ok := v.(map[string]any); ok {
		for _, k := range sortedKeys(m) {
			if k != "css" && k != "xpath" {
				return nil, []error{fmt.Errorf("param %s: only css or xpath apply here, not `%s`", name, k)}
			}
		}
	}
	f, errs := parseSpec(name, name, v, src, nil)
	if f != nil && f.kind == "" {
		return nil, []error{fmt.Errorf("param %s: give a selector: %s", name, selectorDoc)}
	}
	return f, errs
}

func runHTMLList(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	return runPages(env, in, HTMLListTask, buildHTMLList, func(c *htmlListConfig, u string, start bool) (crawl.Result, error) {
		if start {
			return c.page(ctx, env, u, c.startPage, nil)
		}
		return c.page(ctx, env, u, pageNumber(in, c.startPage), seenOf(in))
	})
}

func merge(a, b crawl.Result) crawl.Result {
	a.Items = append(a.Items, b.Items...)
	a.Next = append(a.Next, b.Next...)
	a.Skipped += b.Skipped
	a.OutOfScope += b.OutOfScope
	a.Trapped += b.Trapped
	a.TrapRules = crawl.AddCounts(a.TrapRules, b.TrapRules)
	a.Notes = append(a.Notes, b.Notes...)
	return a
}

func (c *htmlListConfig) page(ctx context.Context, env *crawl.Env, u string, page int, seen seenSet) (crawl.Result, error) {
	root, base, err := getHTML(ctx, env, c.common, u, c.enc)
	if err != nil {
		return crawl.Result{}, err
	}
	items := selectHTML(c.items, root)
	col := newCollector(c.itemRules, env, u, base)
	for _, n := range items {
		n := n
		if err := col.add(func(f *fieldSpec) ([]raw, string) { return f.fromHTML(n) }, ""); err != nil {
			return crawl.Result{}, err
		}
	}
	res := col.res
	if c.maxPages > 0 && page-c.startPage+1 >= c.maxPages {
		return res, nil
	}
	next := ""
	switch {
	case c.next != nil:
		if raws, _ := c.next.fromHTML(root); len(raws) > 0 {
			if l := linksOf(strings.TrimSpace(raws[0].s), base); len(l) > 0 {
				next = l[0]
			}
		}
	case c.template != "" && len(items) > 0:
		if l := linksOf(strings.ReplaceAll(c.template, "{page}", strconv.Itoa(page+1)), base); len(l) > 0 {
			next = l[0]
		}
	}
	followPage(env, &res, HTMLListTask, u, next, page, seen)
	return res, nil
}

// selectHTML returns the nodes an items selector matches, in document order.
func selectHTML(sel *fieldSpec, root *html.Node) []*html.Node {
	switch sel.kind {
	case "css":
		return sel.css.MatchAll(root)
	case "xpath":
		var out []*html.Node
		sel.xp.eval(htmlquery.CreateXPathNavigator(root), func(nav xpath.NodeNavigator) bool {
			if hn := nav.(*htmlquery.NodeNavigator); hn.NodeType() == xpath.ElementNode {
				out = append(out, hn.Current())
			}
			return true
		})
		return out
	}
	return nil
}

var baseSel = cascadia.MustCompile("base[href]")

// getHTML fetches and parses an HTML page; base is what its links resolve against (the
// final URL, or its <base href>).
func getHTML(ctx context.Context, env *crawl.Env, c common, u string, enc encoding.Encoding) (*html.Node, *url.URL, error) {
	resp, err := c.fetch(ctx, env, u)
	if err != nil {
		return nil, nil, err
	}
	body, err := charset.HTML(resp.Body, resp.Header.Get("Content-Type"), enc)
	if err != nil {
		return nil, nil, crawl.Permanentf("%s: %s: %v", c.task, u, err)
	}
	root, err := crawl.ParseHTMLBytes(body)
	if err != nil {
		return nil, nil, crawl.Permanentf("%s: %s: parse HTML: %w", c.task, u, err)
	}
	base := finalURL(resp, u)
	if b := baseSel.MatchFirst(root); b != nil {
		for _, a := range b.Attr {
			if a.Key == "href" {
				if ref, err := url.Parse(strings.TrimSpace(a.Val)); err == nil {
					base = base.ResolveReference(ref)
				}
			}
		}
	}
	return root, base, nil
}

type htmlDetailConfig struct {
	common
	fields    fieldSet
	key       *fieldSpec
	canonical bool // key by rel=canonical
	enc       encoding.Encoding
}

func buildHTMLDetail(p crawl.Params) (*htmlDetailConfig, []error) {
	c := &htmlDetailConfig{}
	var errs, e []error
	c.common, errs = parseCommon(HTMLDetailTask, p)
	c.fields, e = parseFields(p["fields"], srcHTML, nil)
	errs = append(errs, e...)
	c.key, e = parseOptionalSpec(p, "key", srcHTML, nil)
	errs = append(errs, e...)
	c.canonical = boolParam(p, "canonical", false)
	c.enc, e = parseEncodingParam(p["encoding"])
	errs = append(errs, e...)
	return c, errs
}

func runHTMLDetail(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	return runPages(env, in, HTMLDetailTask, buildHTMLDetail, func(c *htmlDetailConfig, u string, start bool) (crawl.Result, error) {
		return c.page(ctx, env, u, in)
	})
}

func (c *htmlDetailConfig) page(ctx context.Context, env *crawl.Env, u string, in crawl.Input) (crawl.Result, error) {
	root, base, err := getHTML(ctx, env, c.common, u, c.enc)
	if err != nil {
		return crawl.Result{}, err
	}
	get := func(f *fieldSpec) ([]raw, string) { return f.fromHTML(root) }
	data, _, notes, err := extract(c.fields, base, false, get)
	if err != nil {
		return crawl.Result{}, crawl.Permanentf("%s: %s: %v", HTMLDetailTask, u, err)
	}
	mergeCarried(data, in)
	key, err := keyOf(c.key, base, get)
	if err != nil {
		return crawl.Result{}, crawl.Permanentf("%s: %s: key: %v", HTMLDetailTask, u, err)
	}
	if key == "" && c.key != nil {
		return crawl.Result{}, crawl.WithCause(crawl.Permanentf("%s: %s: `key: %s` finds nothing on this page; fix its %s, or leave `key:` out to key the record by its URL",
			HTMLDetailTask, u, c.key.expr, cmp.Or(c.key.kind, "selector")), crawl.CauseParse)
	}
	if key == "" && c.canonical {
		page := &crawl.Page{URL: base.String(), Doc: goquery.NewDocumentFromNode(root)}
		key, _ = crawl.CanonicalLink(page, crawl.CanonOptions{})
	}
	if key == "" {
		key = u
	}
	for i := range notes {
		notes[i] = u + ": " + notes[i]
	}
	return crawl.Result{Items: []crawl.Item{{Key: key, URL: u, Data: data}}, Notes: notes}, nil
}
