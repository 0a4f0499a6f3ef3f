package generic

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"

	"github.com/trawlerhq/trawler/crawl"
)

// shop serves a messy paged list: relative, protocol-relative and absolute links, an
// empty ad row, a row with unclosed tags, prices with currency signs and separators,
// local times, and a rel=next link on pages 1 and 2.
func shop(t *testing.T) (base string) {
	var host string
	srv := site(t, map[string]any{
		"/list": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			switch r.URL.Query().Get("p") {
			case "", "1":
				fmt.Fprintf(w, `<html><head><title>Shop</title></head><body>
<div class="row"><h2><a href="item/1">  Alpha  </a></h2><span class="price">¥1,234</span><span class="date">2024-01-02 10:00</span><span class="tag">a</span><span class="tag"> b </span></div>
<div class="row ad"></div>
<div class=row><h2><a href=//%s/item/2>Beta</a></h2><span class=price>N/A</span><p>unclosed <b>bold</div>
<div class="row"><h2><a href="http://%s/item/3?x=1#frag">Gamma &amp; Co</a></h2><span class="price">99</span></div>
<a rel="next" href="/list?p=2">next</a>
</body></html>`, host, host)
			case "2":
				fmt.Fprint(w, `<div class="row"><h2><a href="/item/4">Delta</a></h2></div><a rel="next" href="?p=3">next</a>`)
			case "3":
				fmt.Fprint(w, `<div class="row"><h2><a href="/item/5">Epsilon</a></h2></div>`)
			default:
				http.NotFound(w, r)
			}
		},
	})
	host = strings.TrimPrefix(srv.URL, "http://")
	return srv.URL
}

const shopParams = `
urls: ['/list?p=1']
items: div.row
fields:
  name: {css: h2 a, required: true}
  link: {css: h2 a, attr: href, type: url}
  price: {css: .price, type: int, replace: ['[¥,]', '']}
  date: {css: .date, type: date, layout: "2006-01-02 15:04", tz: Asia/Shanghai}
  tags: {css: .tag, type: list}
  note: {css: .nothing, default: none}
key: {css: h2 a, attr: href, type: url}
next: a[rel=next]
`

func TestHTMLListMessyPage(t *testing.T) {
	base := shop(t)
	p := params(t, HTMLListTask, shopParams+"base_url: "+base)
	res := mustRun(t, HTMLList, p, crawl.Input{URL: base + "/list?p=1"})
	host := strings.TrimPrefix(base, "http://")
	want := []map[string]any{
		{"name": "Alpha", "link": base + "/item/1", "price": int64(1234), "date": "2024-01-02T02:00:00Z", "tags": []any{"a", "b"}, "note": "none"},
		{"name": "Beta", "link": "http://" + host + "/item/2", "price": nil, "date": nil, "tags": []any{}, "note": "none"},
		{"name": "Gamma & Co", "link": base + "/item/3?x=1#frag", "price": int64(99), "date": nil, "tags": []any{}, "note": "none"},
	}
	if len(res.Items) != len(want) {
		t.Fatalf("%d items, want %d: %+v", len(res.Items), len(want), res.Items)
	}
	for i, w := range want {
		wantData(t, fmt.Sprintf("item %d", i+1), res.Items[i].Data, w)
		if res.Items[i].Key != w["link"] || res.Items[i].URL != base+"/list?p=1" {
			t.Errorf("item %d: key %q url %q", i+1, res.Items[i].Key, res.Items[i].URL)
		}
	}
	if res.Skipped != 1 {
		t.Errorf("skipped %d, want 1 (the empty ad row)", res.Skipped)
	}
	if len(res.Next) != 1 {
		t.Fatalf("next %+v, want the second page", res.Next)
	}
	n := res.Next[0]
	if n.URL != base+"/list?p=2" || n.Task != HTMLListTask || n.Var(VarPage) != "2" || n.Var(VarFor) != "s" {
		t.Errorf("next page input %+v", n)
	}
	if got := seenOf(n); len(got) != 1 || !got.has(base+"/list?p=1#top") {
		t.Errorf("seen %v should hold page 1", got)
	}
}

func TestHTMLListFollowsNextPagesFromTheSeed(t *testing.T) {
	base := shop(t)
	p := params(t, HTMLListTask, shopParams+"base_url: "+base)
	all, visited := follow(t, HTMLList, p, 10)
	if want := []string{base + "/list?p=2", base + "/list?p=3"}; !reflect.DeepEqual(visited, want) {
		t.Errorf("visited %v, want %v", visited, want)
	}
	if got := len(all.Items); got != 5 {
		t.Errorf("%d items, want 5: %v", got, keys(all.Items))
	}
	p = params(t, HTMLListTask, shopParams+"base_url: "+base+"\nmax_pages: 2")
	all, visited = follow(t, HTMLList, p, 10)
	if len(visited) != 1 || len(all.Items) != 4 {
		t.Errorf("max_pages 2: visited %v, %d items; want page 2 only and 4 items", visited, len(all.Items))
	}
}

// loops serves pages whose next links never end or lead back.
func loops(t *testing.T) string {
	return site(t, map[string]any{
		"/infinite": func(w http.ResponseWriter, r *http.Request) {
			var n int
			fmt.Sscan(r.URL.Query().Get("p"), &n)
			fmt.Fprintf(w, `<ul><li>page %d</li></ul><a class="next" href="/infinite?p=%d">more</a>`, n, n+1)
		},
		"/cycle/a": `<ul><li>a</li></ul><a class="next" href="b">next</a>`,
		"/cycle/b": `<ul><li>b</li></ul><a class="next" href="c">next</a>`,
		"/cycle/c": `<ul><li>c</li></ul><a class="next" href="/cycle/a#again">next</a>`,
		"/self":    `<ul><li>me</li></ul><a class="next" href="#top">top</a>`,
		"/tmpl": func(w http.ResponseWriter, r *http.Request) {
			var n int
			fmt.Sscan(r.URL.Query().Get("p"), &n)
			if n > 3 {
				fmt.Fprint(w, `<ul></ul><p>No more stories.</p>`)
				return
			}
			fmt.Fprintf(w, `<ul><li>t%d</li></ul>`, n)
		},
	}).URL
}

func TestHTMLListStopsEndlessNextLinks(t *testing.T) {
	base := loops(t)
	cases := []struct {
		name, params string
		visited      []string // after the seed
		items        int
	}{
		{"max_pages", "urls: ['/infinite?p=1']\nmax_pages: 4\nnext: a.next", []string{"/infinite?p=2", "/infinite?p=3", "/infinite?p=4"}, 4},
		{"cycle", "urls: [/cycle/a]\nnext: a.next", []string{"/cycle/b", "/cycle/c"}, 3},
		{"self", "urls: [/self]\nnext: a.next", nil, 1},
		{"template until empty", "urls: ['/tmpl?p=1']\nnext_template: '?p={page}'", []string{"/tmpl?p=2", "/tmpl?p=3", "/tmpl?p=4"}, 3},
		{"template max_pages", "urls: ['/tmpl?p=1']\nnext_template: '/tmpl?p={page}'\nmax_pages: 2", []string{"/tmpl?p=2"}, 2},
		{"start_page", "urls: ['/tmpl?p=3']\nnext_template: '/tmpl?p={page}'\nstart_page: 3\nmax_pages: 5", []string{"/tmpl?p=4"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := params(t, HTMLListTask, "base_url: "+base+"\nitems: li\nfields: {text: {attr: text}}\n"+tc.params)
			all, visited := follow(t, HTMLList, p, 20)
			var want []string
			for _, v := range tc.visited {
				want = append(want, base+v)
			}
			if !reflect.DeepEqual(visited, want) {
				t.Errorf("visited %v, want %v", visited, want)
			}
			if len(all.Items) != tc.items {
				t.Errorf("%d items, want %d", len(all.Items), tc.items)
			}
		})
	}
}

func TestHTMLListXPathAndPositionalKeys(t *testing.T) {
	base := site(t, map[string]any{
		"/x": `<table><tr class="hd"><th>Name</th></tr>
<tr><td><a href="/p/1" title="first">One</a></td><td>1.5</td><td>yes</td></tr>
<tr><td><a href="/p/2">Two</a></td><td>2</td><td>off</td></tr></table>`,
	}).URL
	p := params(t, HTMLListTask, `
urls: [`+base+`/x]
items: //tr[td]
fields:
  name: ./td[1]/a
  href: {xpath: './td[1]/a/@href', type: url}
  title: {xpath: './td[1]/a', attr: title}
  price: {xpath: './td[2]', type: float}
  ok: {xpath: './td[3]', type: bool}
  cells: {xpath: 'count(./td)', type: int}
`)
	res := mustRun(t, HTMLList, p, crawl.Input{})
	if got := keys(res.Items); !reflect.DeepEqual(got, []string{base + "/x#1", base + "/x#2"}) {
		t.Fatalf("keys %v", got)
	}
	wantData(t, "row 1", res.Items[0].Data, map[string]any{"name": "One", "href": base + "/p/1", "title": "first", "price": 1.5, "ok": true, "cells": int64(3)})
	wantData(t, "row 2", res.Items[1].Data, map[string]any{"name": "Two", "href": base + "/p/2", "title": nil, "price": 2.0, "ok": false, "cells": int64(3)})
}

func TestHTMLListDetailLinksCarryFields(t *testing.T) {
	base := shop(t)
	p := params(t, HTMLListTask, `
base_url: `+base+`
urls: ['/list?p=1']
items: div.row
fields:
  link: {css: h2 a, attr: href, type: url}
  price: {css: .price, type: int, replace: ['[¥,]', '']}
  tags: {css: .tag, type: list}
detail: link
`)
	res := mustRun(t, HTMLList, p, crawl.Input{})
	if len(res.Items) != 0 || res.Skipped != 1 {
		t.Fatalf("a list with detail stores nothing: %d items, %d skipped", len(res.Items), res.Skipped)
	}
	host := strings.TrimPrefix(base, "http://")
	if got, want := urls(res.Next), []string{base + "/item/1", "http://" + host + "/item/2", base + "/item/3?x=1#frag"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("detail links %v, want %v", got, want)
	}
	first := res.Next[0]
	if first.Task != HTMLDetailTask || first.Var(VarVia) != "s" {
		t.Errorf("detail input %+v: want Task %s and via s", first, HTMLDetailTask)
	}
	wantData(t, "carried", first.Vars[VarFields].(map[string]any), map[string]any{"link": base + "/item/1", "price": int64(1234), "tags": []any{"a", "b"}})
	if _, ok := res.Next[1].Vars[VarFields].(map[string]any)["price"]; ok {
		t.Errorf("a missing field is not carried: %+v", res.Next[1].Vars)
	}
	// Routed back to the list step itself (detail_task: ""), the step passes it over.
	again, err := runTask(t, HTMLList, p, first)
	if err != nil || len(again.Items)+len(again.Next)+again.Skipped != 0 {
		t.Errorf("own detail input: %+v, %v; want nothing", again, err)
	}
	// The detail page fills in what it finds; the carried fields fill the rest.
	detail := site(t, map[string]any{
		"/item/1": `<h1>Alpha</h1><span class="price">1 200</span>`,
	}).URL
	first.URL = detail + "/item/1"
	dp := params(t, HTMLDetailTask, "fields: {title: h1, price: {css: .price, type: int}, stock: {css: .stock, type: int}}")
	dres, err := runAs(t, "story", HTMLDetail, dp, first)
	if err != nil {
		t.Fatal(err)
	}
	if len(dres.Items) != 1 || dres.Items[0].Key != detail+"/item/1" {
		t.Fatalf("detail result %+v", dres)
	}
	wantData(t, "merged", dres.Items[0].Data, map[string]any{"title": "Alpha", "price": int64(1200), "stock": nil, "link": base + "/item/1", "tags": []any{"a", "b"}})
}

func TestHTMLDetail(t *testing.T) {
	base := site(t, map[string]any{
		"/a/1": `<!doctype html><html><head><base href="/base/"></head><body>
<article data-sku=" SKU-7 "><h1 class="title">Widget <small>new</small></h1>
<div class="body"><p>One</p><p>Two</p></div>
<img src="img/w.png"><img src="//cdn.example/w2.png"><img src="data:image/png;base64,AAAA">
<a class="js" href="javascript:void(0)">buy</a>
<span class="rating">4.5 / 5</span><time>14 Mar 2025</time></article>`,
		"/a/broken": `<html><body><h2>Not a product</h2>`,
	}).URL
	p := params(t, HTMLDetailTask, `
fields:
  title: {css: h1.title, required: true}
  heading: {css: h1.title, regex: '^(\w+)'}
  body: {css: div.body, attr: html}
  outer: {css: h1 small, attr: outer_html}
  images: {css: img, attr: src, type: list, of: url}
  buy: {css: a.js, attr: href, type: url}
  rating: {css: .rating, type: float, regex: '([\d.]+) /'}
  day: {css: time, type: date}
  raw: {css: h1 small, trim: false}
key: {css: article, attr: data-sku}
`)
	res := mustRun(t, HTMLDetail, p, crawl.Input{URL: base + "/a/1"})
	if len(res.Items) != 1 || res.Items[0].Key != "SKU-7" || res.Items[0].URL != base+"/a/1" {
		t.Fatalf("items %+v", res.Items)
	}
	wantData(t, "detail", res.Items[0].Data, map[string]any{
		"title":   "Widget new",
		"heading": "Widget",
		"body":    "<p>One</p><p>Two</p>",
		"outer":   "<small>new</small>",
		"images":  []any{base + "/base/img/w.png", "http://cdn.example/w2.png"},
		"buy":     nil,
		"rating":  4.5,
		"day":     "2025-03-14T00:00:00Z",
		"raw":     "new",
	})
	_, err := runTask(t, HTMLDetail, p, crawl.Input{URL: base + "/a/broken"})
	want := "generic.html_detail: " + base + `/a/broken: required field title is missing: css "h1.title" matched nothing`
	if err == nil || err.Error() != want || !crawl.IsPermanent(err) {
		t.Fatalf("error %v (permanent %v), want permanent %q", err, crawl.IsPermanent(err), want)
	}
	// No key spec: the URL is the key; an input may carry the URL as its value.
	p = params(t, HTMLDetailTask, "base_url: "+base+"\nfields: {title: h1}")
	res = mustRun(t, HTMLDetail, p, crawl.Input{Value: "/a/1"})
	if res.Items[0].Key != base+"/a/1" || res.Items[0].Data["title"] != "Widget new" {
		t.Fatalf("value input: %+v", res.Items[0])
	}
	// A seed without urls says what to do.
	_, err = runTask(t, HTMLDetail, p, crawl.Input{})
	if err == nil || !strings.Contains(err.Error(), "set param urls") || !crawl.IsPermanent(err) {
		t.Fatalf("seed without urls: %v", err)
	}
}

func TestRequiredFieldFailsTheListPage(t *testing.T) {
	base := site(t, map[string]any{"/l": `<div class="r"><b>x</b><i>1</i></div><div class="r"><i>2</i></div>`}).URL
	p := params(t, HTMLListTask, "urls: ["+base+"/l]\nitems: div.r\nfields: {name: {css: b, required: true}, n: {css: i, type: int}}")
	_, err := runTask(t, HTMLList, p, crawl.Input{})
	want := "generic.html_list: " + base + `/l: item 2: required field name is missing: css "b" matched nothing`
	if err == nil || err.Error() != want || !crawl.IsPermanent(err) {
		t.Fatalf("error %v, want permanent %q", err, want)
	}
}

func TestHTMLEncodings(t *testing.T) {
	gbk, _ := simplifiedchinese.GBK.NewEncoder().String(`<html><head><meta charset="gbk"><title>x</title></head><body><h1>你好，世界</h1></body></html>`)
	gb2312, _ := simplifiedchinese.GBK.NewEncoder().String(`<html><head><meta http-equiv="Content-Type" content="text/html; charset=gb2312"></head><body><h1>简体中文</h1></body></html>`)
	gb18030, _ := simplifiedchinese.GB18030.NewEncoder().String(`<meta charset="GB18030"><h1>𠀀汉字</h1>`)
	big5, _ := traditionalchinese.Big5.NewEncoder().String(`<html><body><h1>繁體中文</h1></body></html>`)
	sjis, _ := japanese.ShiftJIS.NewEncoder().String(`<html><body><h1>日本語のページ</h1></body></html>`)
	base := site(t, map[string]any{
		"/gbk":               typed("text/html", []byte(gbk)),
		"/gb2312":            typed("", []byte(gb2312)),
		"/gb18030":           typed("text/html", []byte(gb18030)),
		"/big5":              typed("text/html; charset=Big5", []byte(big5)),
		"/sjis":              typed("text/html; charset=Shift_JIS", []byte(sjis)),
		"/latin1":            typed("text/html; charset=ISO-8859-1", []byte("<h1>Caf\xe9 cr\xe8me</h1>")),
		"/bom":               typed("text/html", append([]byte("\xEF\xBB\xBF"), []byte("<h1>Ünïcödé</h1>")...)),
		"/utf8":              typed("text/html", []byte("<h1>plain UTF-8: żółw</h1>")),
		"/header":            typed("text/html; charset=utf-8", []byte(`<meta charset="gbk"><h1>头</h1>`)),
		"/forced":            typed("text/html; charset=utf-8", []byte(gbk)),
		"/undeclared-latin1": typed("text/html", []byte("<h1>na\xefve</h1>")),
	}).URL
	for _, tc := range []struct{ path, extra, want string }{
		{"/gbk", "", "你好，世界"},
		{"/gb2312", "", "简体中文"},
		{"/gb18030", "", "𠀀汉字"},
		{"/big5", "", "繁體中文"},
		{"/sjis", "", "日本語のページ"},
		{"/latin1", "", "Café crème"},
		{"/bom", "", "Ünïcödé"},
		{"/utf8", "", "plain UTF-8: żółw"},
		{"/header", "", "头"}, // the header wins over <meta>; the page is UTF-8
		{"/forced", "\nencoding: gbk", "你好，世界"},
		{"/undeclared-latin1", "", "naïve"},
	} {
		p := params(t, HTMLDetailTask, "fields: {title: h1}"+tc.extra)
		res := mustRun(t, HTMLDetail, p, crawl.Input{URL: base + tc.path})
		if got := res.Items[0].Data["title"]; got != tc.want {
			t.Errorf("%s: title %q, want %q", tc.path, got, tc.want)
		}
	}
}

// What a messy page does to single fields: a price with a currency sign reads as a
// number; a value that does not read is stored as null with a note naming the item and
// the field; a date without a time of day stays on its calendar day whatever tz says;
// and a key that finds nothing fails the page instead of quietly keying by URL.
func TestHTMLListNotesValuesThatDoNotRead(t *testing.T) {
	srv := site(t, map[string]any{
		"/p": `<div class="row" id="a"><b>One</b><span class="price">￥2,859.34</span><i>2026年12月24日</i></div>
<div class="row" id="b"><b>Two</b><span class="price">call us</span><i>2026年1月2日</i></div>`,
		"/nokey": `<div class="row"><b>One</b></div>`,
	})
	p := params(t, HTMLListTask, `
urls: ['/p']
items: div.row
fields:
  name: {css: b}
  price: {css: .price, type: float}
  day: {css: i, type: date, tz: Asia/Shanghai}
key: {attr: id}
base_url: `+srv.URL)
	res := mustRun(t, HTMLList, p, crawl.Input{URL: srv.URL + "/p"})
	if len(res.Items) != 2 {
		t.Fatalf("items %+v", res.Items)
	}
	if got := res.Items[0].Data; got["price"] != 2859.34 || got["day"] != "2026-12-24T00:00:00Z" {
		t.Errorf("first item %v: want price 2859.34 and day 2026-12-24T00:00:00Z", got)
	}
	if got := res.Items[1].Data; got["price"] != nil || got["day"] != "2026-01-02T00:00:00Z" {
		t.Errorf("second item %v: want price null and day 2026-01-02T00:00:00Z", got)
	}
	want := srv.URL + `/p: item 2: field price: cannot read "call us" as float, stored as null; clean it with regex: or replace:, or give the field a default:`
	if len(res.Notes) != 1 || res.Notes[0] != want {
		t.Errorf("notes %q, want [%q]", res.Notes, want)
	}

	p = params(t, HTMLListTask, "urls: ['/nokey']\nitems: div.row\nfields:\n  name: {css: b}\nkey: {css: a.id}\nbase_url: "+srv.URL)
	_, err := runTask(t, HTMLList, p, crawl.Input{URL: srv.URL + "/nokey"})
	if !crawl.IsPermanent(err) || crawl.CauseOf(err) != crawl.CauseParse || !strings.Contains(err.Error(), "item 1: `key: a.id` finds nothing on this item; fix its css, or leave `key:` out to key items by URL") {
		t.Errorf("a key that finds nothing: %v", err)
	}
}

// A date that does not read in the layout the field gives names that layout, so the
// note points at the setting to fix.
func TestDateNoteNamesTheLayout(t *testing.T) {
	srv := site(t, map[string]any{"/p": `<div class="row" id="a"><b>One</b><i>24/12/2026</i></div>`})
	p := params(t, HTMLListTask, "urls: ['/p']\nitems: div.row\nfields:\n  day: {css: i, type: date, layout: '2006-01-02'}\nkey: {attr: id}\nbase_url: "+srv.URL)
	res := mustRun(t, HTMLList, p, crawl.Input{URL: srv.URL + "/p"})
	want := srv.URL + `/p: item 1: field day: cannot read "24/12/2026" as date in layout: "2006-01-02", stored as null; clean it with regex: or replace:, or give the field a default:`
	if len(res.Notes) != 1 || res.Notes[0] != want {
		t.Errorf("notes %q, want [%q]", res.Notes, want)
	}
}

// With `canonical: true` a detail page is keyed by its <link rel="canonical">, made
// canonical, so two addresses of one page are one record; a page naming none (or only
// in its body) keeps its URL as the key, and without the param the link is not read.
func TestHTMLDetailKeysByRelCanonical(t *testing.T) {
	page := `<html><head><link rel="Alternate Canonical" href="/p/7?utm_source=x&b=1&a=2#top"></head><body><h1>Seven</h1></body></html>`
	base := site(t, map[string]any{
		"/p/7":         page,
		"/p/7-preview": page,
		"/p/8":         `<html><head></head><body><link rel="canonical" href="/spoofed"><h1>Eight</h1></body></html>`,
	}).URL
	p := params(t, HTMLDetailTask, "canonical: true\nfields: {title: h1}")
	for _, path := range []string{"/p/7", "/p/7-preview"} {
		res := mustRun(t, HTMLDetail, p, crawl.Input{URL: base + path})
		if want := base + "/p/7?a=2&b=1"; res.Items[0].Key != want || res.Items[0].URL != base+path {
			t.Errorf("%s: key %q, url %q; want key %q and the page's own URL", path, res.Items[0].Key, res.Items[0].URL, want)
		}
	}
	if res := mustRun(t, HTMLDetail, p, crawl.Input{URL: base + "/p/8"}); res.Items[0].Key != base+"/p/8" {
		t.Errorf("a canonical link in the body: key %q, want the page URL", res.Items[0].Key)
	}
	plain := params(t, HTMLDetailTask, "fields: {title: h1}")
	if res := mustRun(t, HTMLDetail, plain, crawl.Input{URL: base + "/p/7-preview"}); res.Items[0].Key != base+"/p/7-preview" {
		t.Errorf("without canonical: key %q, want the page URL", res.Items[0].Key)
	}
}
