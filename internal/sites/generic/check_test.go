package generic

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

type checkCase struct {
	task, params string
	want         []string
}

var checkCases = []checkCase{
	{HTMLListTask, "items: div\nfields: {title: 'h1['}", []string{
		`param fields.title: bad CSS selector "h1[": expected identifier, found EOF instead; fix the selector`,
	}},
	{HTMLListTask, "items: 'div >'\nfields: {title: h1}", []string{
		`param items: bad CSS selector "div >": expected selector, found EOF instead; fix the selector`,
	}},
	{HTMLListTask, "items: {css: div, type: int}\nfields: {title: h1}", []string{
		"param items: only css or xpath apply here, not `type`",
	}},
	{HTMLListTask, "items: {attr: href}\nfields: {title: h1}", []string{
		"param items: only css or xpath apply here, not `attr`",
	}},
	{HTMLListTask, "items: div\nfields: {title: '//a['}", []string{
		`param fields.title: bad XPath "//a[": expression must evaluate to a node-set; fix the expression`,
	}},
	{HTMLListTask, "items: div\nfields: {title: {xpath: '//a[', css: a}}", []string{
		`param fields.title: give css or xpath, not both`,
	}},
	{HTMLListTask, "items: div\nfields: {title: {csss: h1}}", []string{
		"param fields.title: unknown key `csss` (did you mean \"css\"?); valid keys: css, xpath, attr, type, of, layout, tz, trim, regex, replace, split, default, required",
	}},
	{HTMLListTask, "items: div\nfields: {title: {path: a.b}}", []string{
		"param fields.title: unknown key `path` (did you mean \"xpath\"?); valid keys: css, xpath, attr, type, of, layout, tz, trim, regex, replace, split, default, required",
	}},
	{HTMLListTask, "items: div\nfields: {title: [h1, h2]}", []string{
		`param fields.title: want a CSS selector, an XPath starting with / ./ ../ or (, or a mapping like {css: .price, type: float}, got a list`,
	}},
	{HTMLListTask, "items: div\nfields: [h1]", []string{
		`param fields: want a mapping of field name to field spec, like {title: h1.title, price: {css: .price, type: float}}, got a list`,
	}},
	{HTMLListTask, "items: div\nfields: {score: {css: b, type: integer}}", []string{
		`param fields.score: unknown type "integer" (did you mean "int"?); use one of string, int, float, bool, date, url, list`,
	}},
	{HTMLListTask, "items: div\nfields: {score: {css: b, regex: '(\\d+'}}", []string{
		"param fields.score: bad regex \"(\\\\d+\": missing closing ): `(\\d+`; fix the pattern",
	}},
	{HTMLListTask, "items: div\nfields: {score: {css: b, replace: [',']}}", []string{
		`param fields.score: replace wants [from, to]: a regex and its replacement, got a list of 1`,
	}},
	{HTMLListTask, "items: div\nfields: {score: {css: b, replace: ['[', '']}}", []string{
		"param fields.score: bad regex \"[\" in replace: missing closing ]: `[`; fix the pattern",
	}},
	{HTMLListTask, "items: div\nfields: {when: {css: b, type: date, layout: YYYY-MM-DD}}", []string{
		`param fields.when: bad date layout "YYYY-MM-DD": write it with Go's reference time (Mon Jan 2 15:04:05 MST 2006), e.g. 2006-01-02 or 2006-01-02 15:04:05, or use unix / unix_ms`,
	}},
	{HTMLListTask, "items: div\nfields: {when: {css: b, type: date, tz: Asia/Shang}}", []string{
		`param fields.when: unknown time zone "Asia/Shang"; use an IANA name like Asia/Shanghai, Europe/Berlin or UTC`,
	}},
	{HTMLListTask, "items: div\nfields: {when: {css: b, layout: '2006-01-02'}}", []string{
		`param fields.when: layout applies to dates; add type: date`,
	}},
	{HTMLListTask, "items: div\nfields: {x: {css: b, required: yes please}}", []string{
		`param fields.x: required must be true or false, got "yes please"`,
	}},
	{HTMLListTask, "items: div\nfields: {x: {css: b, of: int}}", []string{
		"param fields.x: `of` gives the element type of a list; add type: list or remove it",
	}},
	{HTMLListTask, "items: div\nfields: {x: {css: b, type: list, of: list}}", []string{
		`param fields.x: unknown element type "list"; use one of string, int, float, bool, date, url`,
	}},
	{HTMLListTask, "items: div\nfields: {x: {css: b, split: ','}}", []string{
		`param fields.x: split makes a list; add type: list`,
	}},
	{HTMLListTask, "items: div\nfields: {x: {css: b, attr: xml}}", []string{
		`param fields.x: attr xml is for XML; use text, html, outer_html or an attribute name`,
	}},
	{HTMLListTask, "items: div\nfields: {x: {css: ''}}", []string{
		`param fields.x: css is empty; give a selector, or leave css out to read the item itself`,
	}},
	{HTMLListTask, "items: div\nfields: {link: a}\ndetail: lnk", []string{
		`param detail: no field "lnk" (did you mean "link"?); fields: [link]`,
	}},
	{HTMLListTask, "items: div\nfields: {link: a}\nnext: a.next\nnext_template: '/p/{page}'", []string{
		`param next_template: set next or next_template, not both`,
	}},
	{HTMLListTask, "items: div\nfields: {link: a}\nnext_template: /p/2", []string{
		`param next_template: "/p/2" has no {page}; put {page} where the page number goes, e.g. /list?p={page}`,
	}},
	{HTMLListTask, "items: div\nfields: {link: a}\nmax_pages: -1", []string{
		`param max_pages: -1 is negative; use 0 (no limit) or more`,
	}},
	{HTMLListTask, "items: div\nfields: {link: a}\ndetail_task: Detail", []string{
		`param detail_task: "Detail" is not a task name; write it as site.task, e.g. generic.html_detail`,
	}},
	{HTMLListTask, "items: div\nfields: {link: a}\nencoding: gbkk", []string{
		`param encoding: unknown encoding "gbkk"; use a name like utf-8, gbk, gb18030, big5, shift_jis, euc-kr or iso-8859-1`,
	}},
	{HTMLListTask, "items: div\nfields: {link: a}\nurls: [/news]", []string{
		`param urls[0]: "/news" is relative and base_url is not set; give an absolute URL or set base_url`,
	}},
	{HTMLListTask, "items: div\nfields: {link: a}\nurls: ['ftp://x/y']\nbase_url: example.com", []string{
		`param base_url: want an absolute http(s) URL like https://example.com, got "example.com"`,
		`param urls[0]: "ftp://x/y" is not an http(s) URL`,
	}},
	{HTMLListTask, "items: div\nfields: {link: a}\nheaders: [a]", []string{
		`param headers: want a mapping of header name to value, like {Accept: application/json}, got a list`,
	}},
	{HTMLDetailTask, "fields: {title: 'h1['}\nkey: {css: 'a[', attr: href}", []string{
		`param fields.title: bad CSS selector "h1[": expected identifier, found EOF instead; fix the selector`,
		`param key: bad CSS selector "a[": expected identifier, found EOF instead; fix the selector`,
	}},
	{JSONTask, "items: 'data.#(x'\nfields: {a: 'b..c', c: '@nope', d: {path: x, attr: href}}", []string{
		`param items: bad JSON path "data.#(x": unclosed "("; fix the path`,
		`param fields.a: bad JSON path "b..c": empty part at offset 2 (two separators in a row, or one at an end); fix the path`,
		`param fields.c: bad JSON path "@nope": unknown modifier @nope; gjson has @reverse, @this, @flatten, @join, @keys, @values, @valid, @pretty, @ugly, @tostr, @fromstr, @group, @dig; fix the path`,
		"param fields.d: unknown key `attr`; valid keys: path, type, of, layout, tz, trim, regex, replace, split, default, required",
	}},
	{JSONTask, "fields: {a: {type: int}}", []string{
		`param fields.a: give path (a JSON path such as data.title)`,
	}},
	{JSONTask, "fields: {a: a}\npage_param: page\ncursor_path: next", []string{
		`param cursor_path: needs cursor_param, the query parameter the cursor goes into`,
		`param page_param, cursor_path: these are different paging modes; set only one`,
	}},
	{JSONTask, "fields: {a: a}\ncursor_param: c", []string{
		`param cursor_param: needs cursor_path, the gjson path of the next cursor in the response`,
	}},
	{JSONTask, "fields: {a: a}\nhas_more_path: more", []string{
		`param has_more_path: applies only with a paging mode (page_param, offset_param, cursor_path or next_path)`,
	}},
	{CSVTask, "fields: {a: a}\ndelimiter: ';;'", []string{
		`param delimiter: want one character such as , ; | or tab, got ";;"`,
	}},
	{CSVTask, "header: false", []string{
		`param fields: without a header row, map the columns by index, e.g. {title: 1, score: {column: 2, type: int}}`,
	}},
	{CSVTask, "header: false\nfields: {a: title, b: 2}", []string{
		`param fields.a: column "title" is a name, but header is false; use an index (0 is the first column)`,
	}},
	{CSVTask, "fields: {a: {column: -1}}", []string{
		`param fields.a: column: want a header name or an index (0 is the first column), got -1`,
	}},
	{XMLTask, "items: //dc:item\nfields: {t: 'x:title', u: {xpath: '@href', attr: html}}\nnamespaces: {dc: 'http://purl.org/dc/elements/1.1/', e: ''}", []string{
		`param namespaces.e: want the namespace URI, got ""`,
		"param fields.t: XPath \"x:title\" uses the prefix x:, which namespaces does not declare; add `x: <namespace URI>` under namespaces",
		`param fields.u: attr html is for HTML; use text, xml or an attribute name`,
	}},
	{XMLTask, "items: //item\nfields: {t: title}\nnamespaces: [a]", []string{
		`param namespaces: want a mapping of prefix to namespace URI, like {dc: "http://purl.org/dc/elements/1.1/"}, got a list`,
	}},
	{FeedTask, "fields: {t: {css: h1}}", []string{
		"param fields.t: unknown key `css`; valid keys: path, type, of, layout, tz, trim, regex, replace, split, default, required",
	}},
	{SitemapTask, "include: ['(']\nexclude: [ok, '[']\nlastmod_after: last week\nto_task: x", []string{
		"param include[0]: bad regex \"(\": missing closing ): `(`; fix the pattern",
		"param exclude[1]: bad regex \"[\": missing closing ]: `[`; fix the pattern",
		`param lastmod_after: cannot read "last week"; write a date like 2025-01-31, an RFC 3339 time like 2025-01-31T08:00:00Z, or a duration back from now like 720h`,
		`param to_task: "x" is not a task name; write it as site.task, e.g. generic.html_detail`,
	}},
	{SiteTask, "urls: [https://example.com/]\ninclude: ['re:/p/(\\d+']\nscope: everywhere\nmax_pages: -1", []string{
		"param scope: unknown scope \"everywhere\"; use host (the start URL's host), domain (its registrable domain) or prefix (under the start URL's directory)",
		"param include[0]: bad regex \"/p/(\\\\d+\": missing closing ): `/p/(\\d+`; fix the pattern",
		`param max_pages: -1 is negative; use 0 (no limit) or more`,
	}},
	{SiteTask, "urls: [https://example.com/]\nscope: hosts\nexclude: [/ok/*, 'products/*']\nto: [re:ok]\ndetail_task: Detail", []string{
		`param scope: unknown scope "hosts" (did you mean "host"?); use host (the start URL's host), domain (its registrable domain) or prefix (under the start URL's directory)`,
		`param exclude[1]: "products/*" is not a pattern; write a glob starting with / for the path (/products/*), one starting with https:// for the whole link, or re: and a regexp (re:/p/[0-9]+$)`,
		`param detail_task: "Detail" is not a task name; write it as site.task, e.g. generic.html_detail`,
	}},
	{SiteTask, "sitemaps: [/sitemap.xml]\ncalendar_years: -2", []string{
		`param sitemaps[0]: "/sitemap.xml" is relative and base_url is not set; give an absolute URL or set base_url`,
		`param calendar_years: -2 is negative; use 0 (no limit) or more`,
	}},
}

// TestCheckMessages runs each case through the chain loader, as `trawler validate` does:
// every problem comes back at once, on the line of the param it names, with the fix.
func TestCheckMessages(t *testing.T) {
	for _, tc := range checkCases {
		_, err := loadParams(tc.task, tc.params)
		var got []string
		if err != nil {
			var ps crawl.Problems
			if !errors.As(err, &ps) {
				t.Fatalf("%s %q: %v is not a list of problems", tc.task, tc.params, err)
			}
			for _, p := range ps {
				got = append(got, p.String())
			}
		}
		var want []string
		for _, w := range tc.want {
			want = append(want, fmt.Sprintf(`chain.yaml:%d: step "s": %s`, paramLineOf(tc.params, w), w))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s with %q:\n got  %s\n want %s", tc.task, tc.params, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
		}
	}
}

// Good params check clean, for every task.
func TestCheckAcceptsGoodParams(t *testing.T) {
	for task, p := range map[string]string{
		HTMLListTask:   "urls: ['/news?p=1']\nbase_url: https://example.com\nitems: 'tr.athing, li.item'\nfields: {link: {css: 'a[href]', attr: href, type: url}, n: {xpath: 'count(.//b)', type: int}}\ndetail: link\nnext: {xpath: '//a[@rel=\"next\"]'}\nmax_pages: 3\nencoding: gb18030\nheaders: {Accept-Language: zh-CN}",
		HTMLDetailTask: "fields: {t: {css: h1, type: date, layout: '2006年01月02日', tz: Asia/Shanghai, regex: '(\\d+)', replace: [a, b], default: 0, required: true}}\nkey: {css: 'link[rel=canonical]', attr: href}",
		JSONTask:       "items: 'data.items|@reverse'\nfields: {a: 'b.#(c==\"d\").e', t: {path: ts, type: date, layout: unix_ms}}\noffset_param: offset\nhas_more_path: meta.more",
		CSVTask:        "fields: {a: 0, b: {column: name, type: list, split: ';'}}\ndelimiter: tab",
		XMLTask:        "items: //a:entry\nnamespaces: {a: 'http://www.w3.org/2005/Atom'}\nfields: {t: a:title, l: 'a:link/@href'}",
		FeedTask:       "fields: {t: title, c: {path: categories, type: list}}\ndetail: t",
		SiteTask:       "urls: [/]\nsitemaps: [/sitemap.xml.gz]\nbase_url: https://example.com\nscope: domain\ninclude: ['/shop/**', 're:[?&]page=[0-9]+$']\nexclude: ['/shop/*/print']\nto: ['https://example.com/shop/p/*']\nmax_pages: 500\nmax_url_length: 512\ncalendar_years: 0",
		SitemapTask:    "include: ['/item/\\d+$']\nexclude: ['\\?']\nlastmod_after: 2025-01-31\nto_task: generic.html_detail",
	} {
		if _, err := loadParams(task, p); err != nil {
			t.Errorf("%s: %v", task, err)
		}
	}
}

// A worker given params that skipped validation fails the input permanently with the
// same messages.
func TestBadParamsFailTheInputPermanently(t *testing.T) {
	p := crawl.Params{"items": "div", "fields": map[string]any{"title": "h1["}}
	_, err := runTask(t, HTMLList, p, crawl.Input{URL: "http://127.0.0.1:1/x"})
	want := `generic.html_list: bad params (run ` + "`trawler validate`" + ` on the chain file): param fields.title: bad CSS selector "h1[": expected identifier, found EOF instead; fix the selector`
	if err == nil || err.Error() != want || !crawl.IsPermanent(err) {
		t.Fatalf("error %v, want permanent %q", err, want)
	}
	// The Check hook sees raw params too (with defaults applied by the loader).
	if errs := HTMLList.Spec().Check(crawl.Params{"items": "div", "fields": map[string]any{"a": map[string]any{"css": "b", "type": "integer"}}}); len(errs) != 1 ||
		errs[0].Error() != `param fields.a: unknown type "integer" (did you mean "int"?); use one of string, int, float, bool, date, url, list` {
		t.Fatalf("Check: %v", errs)
	}
}

// paramLineOf is the line, in the chain loadParams writes, of the top-level param a
// problem names ("param fields.title: …" → the line of fields:); the params start on
// line 6.
func paramLineOf(params, problem string) int {
	name := strings.TrimPrefix(problem, "param ")
	name = name[:strings.IndexAny(name, ".[:, ")]
	for i, line := range strings.Split(strings.Trim(params, "\n"), "\n") {
		if strings.HasPrefix(line, name+":") {
			return 6 + i
		}
	}
	return 3
}

// A problem inside a block mapping points at the field's own line, not its param's or
// its step's.
func TestCheckPointsAtTheFieldsLine(t *testing.T) {
	_, err := loadParams(HTMLListTask, "items: div\nfields:\n  title: h1\n  score:\n    css: .s\n    type: intt")
	want := `chain.yaml:9: step "s": param fields.score: unknown type "intt" (did you mean "int"?); use one of string, int, float, bool, date, url, list`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}
