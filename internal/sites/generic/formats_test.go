package generic

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/trawlerhq/trawler/crawl"
)

func TestCSV(t *testing.T) {
	gbkCSV, _ := simplifiedchinese.GBK.NewEncoder().String("编号;名称;价格\n1;苹果;3,5\n2;梨;4\n")
	base := site(t, map[string]any{
		// A BOM, quoted cells with commas, quotes and a newline, a ragged row, a blank line,
		// a stray quote, and header names with spaces around them.
		"/export.csv": typed("text/csv", []byte("\xEF\xBB\xBF id , name ,price,updated,tags\n"+
			"1,\"Widget, large\",\"1,299.00\",2024-03-01,a|b\n"+
			"2,\"He said \"\"hi\"\"\nand left\",5,,\n"+
			"\n"+
			"3,Short row\n"+
			"4,O\"Brien,7,2024-03-04,c\n")),
		"/noheader.tsv": typed("text/tab-separated-values", []byte("# exported 2024-03-05\nA\t10\nB\t20\n")),
		"/gbk.csv":      typed("text/csv", []byte(gbkCSV)),
		"/gbk-header":   typed("text/csv; charset=gbk", []byte(gbkCSV)),
		"/empty.csv":    typed("text/csv", nil),
	}).URL
	p := params(t, CSVTask, `
urls: [`+base+`/export.csv]
fields:
  id: {column: id, type: int}
  name: name
  price: {column: price, type: float}
  updated: {column: 3, type: date}
  tags: {column: tags, type: list, split: '|'}
key: id
`)
	res := mustRun(t, CSV, p, crawl.Input{})
	if got := keys(res.Items); !reflect.DeepEqual(got, []string{"1", "2", "3", "4"}) {
		t.Fatalf("keys %v", got)
	}
	want := []map[string]any{
		{"id": int64(1), "name": "Widget, large", "price": 1299.0, "updated": "2024-03-01T00:00:00Z", "tags": []any{"a", "b"}},
		{"id": int64(2), "name": "He said \"hi\"\nand left", "price": 5.0, "updated": nil, "tags": []any{}},
		{"id": int64(3), "name": "Short row", "price": nil, "updated": nil, "tags": []any{}},
		{"id": int64(4), "name": "O\"Brien", "price": 7.0, "updated": "2024-03-04T00:00:00Z", "tags": []any{"c"}},
	}
	for i, w := range want {
		wantData(t, fmt.Sprintf("row %d", i+1), res.Items[i].Data, w)
	}

	// No header, tab-separated, a note line skipped, columns by index; positional keys.
	p = params(t, CSVTask, "urls: ["+base+"/noheader.tsv]\nheader: false\ndelimiter: tab\nskip_rows: 1\nfields: {name: 0, n: {column: 1, type: int}}")
	res = mustRun(t, CSV, p, crawl.Input{})
	if got := keys(res.Items); !reflect.DeepEqual(got, []string{base + "/noheader.tsv#row1", base + "/noheader.tsv#row2"}) {
		t.Fatalf("keys %v", got)
	}
	wantData(t, "tsv row 2", res.Items[1].Data, map[string]any{"name": "B", "n": int64(20)})

	// GBK by param or by the Content-Type charset; without fields, every column by name.
	for _, tc := range []struct{ path, extra string }{{"/gbk.csv", "\nencoding: gbk"}, {"/gbk-header", ""}} {
		p = params(t, CSVTask, "urls: ["+base+tc.path+"]\ndelimiter: ';'"+tc.extra)
		res = mustRun(t, CSV, p, crawl.Input{})
		if len(res.Items) != 2 {
			t.Fatalf("%s: %d items", tc.path, len(res.Items))
		}
		wantData(t, tc.path, res.Items[0].Data, map[string]any{"编号": "1", "名称": "苹果", "价格": "3,5"})
	}

	// An empty file is no items; a column the header lacks fails with the columns listed.
	p = params(t, CSVTask, "urls: ["+base+"/empty.csv]\nfields: {a: a}")
	if res = mustRun(t, CSV, p, crawl.Input{}); len(res.Items) != 0 {
		t.Errorf("empty file: %+v", res)
	}
	p = params(t, CSVTask, "urls: ["+base+"/export.csv]\nfields: {title: titel}")
	_, err := runTask(t, CSV, p, crawl.Input{})
	if want := "generic.csv: " + base + `/export.csv: param fields.title: no column "titel" in the header; columns: id, name, price, updated, tags`; err == nil || err.Error() != want || !crawl.IsPermanent(err) {
		t.Errorf("error %v, want permanent %q", err, want)
	}
}

func TestXML(t *testing.T) {
	gbkXML, _ := simplifiedchinese.GBK.NewEncoder().String(`<?xml version="1.0" encoding="GBK"?><list><entry><name>苹果</name></entry></list>`)
	doc := "\xEF\xBB\xBF" + `<?xml version="1.0" encoding="UTF-8"?>
<catalog xmlns="urn:example:catalog" xmlns:p="urn:example:product" xmlns:x="http://purl.org/dc/elements/1.1/">
  <p:product sku="A-1" p:status="active">
    <x:title>Lamp &amp; shade</x:title>
    <p:price currency="EUR">19.90</p:price>
    <p:link href="/lamp"/>
    <p:tag>home</p:tag><p:tag>light</p:tag>
    <p:notes><![CDATA[<b>bright</b>]]></p:notes>
  </p:product>
  <p:product sku="B-2">
    <x:title>Chair</x:title>
    <p:price currency="EUR">n/a</p:price>
  </p:product>
  <note>not a product</note>
</catalog>`
	base := site(t, map[string]any{
		"/catalog.xml": typed("application/xml", []byte(doc)),
		"/gbk.xml":     typed("text/xml", []byte(gbkXML)),
		"/empty.xml":   typed("application/xml", []byte(`<catalog xmlns="urn:example:catalog"/>`)),
		"/broken.xml":  typed("application/xml", []byte(`<a><b>unclosed`)),
		"/sloppy.xml":  typed("application/xml", []byte(`<list><item><b>x&nbsp;&bogus; y</item><item><b>z</item></list>`)),
	}).URL
	p := params(t, XMLTask, `
urls: [`+base+`/catalog.xml]
namespaces: {prod: 'urn:example:product', dc: 'http://purl.org/dc/elements/1.1/', c: 'urn:example:catalog'}
items: /c:catalog/prod:product
fields:
  sku: '@sku'
  status: '@prod:status'
  title: dc:title
  price: {xpath: prod:price, type: float}
  currency: {xpath: prod:price, attr: currency}
  link: {xpath: prod:link/@href, type: url}
  tags: {xpath: prod:tag, type: list}
  notes: prod:notes
  titled: {xpath: 'string(dc:title)', regex: '^(\w+)'}
key: '@sku'
`)
	res := mustRun(t, XML, p, crawl.Input{})
	if got := keys(res.Items); !reflect.DeepEqual(got, []string{"A-1", "B-2"}) {
		t.Fatalf("keys %v", got)
	}
	wantData(t, "product 1", res.Items[0].Data, map[string]any{
		"sku": "A-1", "status": "active", "title": "Lamp & shade", "price": 19.9, "currency": "EUR",
		"link": base + "/lamp", "tags": []any{"home", "light"}, "notes": "<b>bright</b>", "titled": "Lamp",
	})
	wantData(t, "product 2", res.Items[1].Data, map[string]any{
		"sku": "B-2", "status": nil, "title": "Chair", "price": nil, "currency": "EUR",
		"link": nil, "tags": []any{}, "notes": nil, "titled": "Chair",
	})
	p = params(t, XMLTask, "urls: ["+base+"/gbk.xml]\nitems: //entry\nfields: {name: name}")
	if res = mustRun(t, XML, p, crawl.Input{}); len(res.Items) != 1 || res.Items[0].Data["name"] != "苹果" {
		t.Errorf("GBK-declared XML: %+v", res.Items)
	}
	p = params(t, XMLTask, "urls: ["+base+"/empty.xml]\nnamespaces: {c: 'urn:example:catalog'}\nitems: //c:product\nfields: {name: c:name}")
	if res = mustRun(t, XML, p, crawl.Input{}); len(res.Items) != 0 {
		t.Errorf("empty document: %+v", res.Items)
	}
	// Unclosed tags and HTML entities are read leniently; a cut-off document is not XML.
	p = params(t, XMLTask, "urls: ["+base+"/sloppy.xml]\nitems: //item\nfields: {text: '.'}")
	res = mustRun(t, XML, p, crawl.Input{})
	if len(res.Items) != 2 || res.Items[0].Data["text"] != "x\u00a0&bogus; y" || res.Items[1].Data["text"] != "z" {
		t.Errorf("sloppy XML: %+v", res.Items)
	}
	p = params(t, XMLTask, "urls: ["+base+"/broken.xml]\nitems: //b\nfields: {b: '.'}")
	_, err := runTask(t, XML, p, crawl.Input{})
	if want := "generic.xml: " + base + "/broken.xml: parse XML: XML syntax error on line 1: unexpected EOF"; err == nil || err.Error() != want || !crawl.IsPermanent(err) {
		t.Errorf("error %v, want permanent %q", err, want)
	}
}

func TestFeeds(t *testing.T) {
	rss := `<?xml version="1.0"?>
<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:content="http://purl.org/rss/1.0/modules/content/">
<channel><title>Blog</title><link>https://blog.example/</link>
<item><title>First &amp; best</title><link>/posts/1</link><guid>post-1</guid>
  <pubDate>Mon, 02 Jan 2006 15:04:05 -0700</pubDate><dc:creator>Ann</dc:creator>
  <category>go</category><category>web</category><description>Short</description>
  <content:encoded><![CDATA[<p>Long</p>]]></content:encoded></item>
<item><title>No guid</title><link>//cdn.example/posts/2</link></item>
</channel></rss>`
	atom := `<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Atom blog</title><id>urn:feed</id><updated>2024-05-01T00:00:00Z</updated>
<entry><title>Entry</title><id>urn:entry:1</id><link href="https://atom.example/e/1"/>
  <published>2024-04-30T22:00:00+02:00</published><updated>2024-05-01T10:00:00Z</updated>
  <author><name>Bo</name></author><category term="news"/><summary>Sum</summary></entry>
</feed>`
	rdf := `<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">
<channel rdf:about="https://old.example/"><title>Old</title><link>https://old.example/</link></channel>
<item rdf:about="https://old.example/a"><title>RDF item</title><link>https://old.example/a</link><dc:date>2003-12-13T18:30:02Z</dc:date></item>
</rdf:RDF>`
	jsonFeed := `{"version":"https://jsonfeed.org/version/1.1","title":"JF","items":[{"id":"jf-1","url":"https://jf.example/1","title":"JSON entry","content_html":"<p>x</p>","date_published":"2024-01-02T03:04:05Z","tags":["a"],"authors":[{"name":"Cy"}]}]}`
	base := site(t, map[string]any{
		"/rss":  typed("application/rss+xml", []byte("\xEF\xBB\xBF"+rss)),
		"/atom": typed("application/atom+xml", []byte(atom)),
		"/rdf":  typed("application/rdf+xml", []byte(rdf)),
		"/json": typed("application/feed+json", []byte(jsonFeed)),
		"/rss091": typed("text/xml", []byte(`<?xml version="1.0" encoding="ISO-8859-1"?>
<rss version="0.91"><channel><title>Old school</title><link>http://old.example/</link>
<item><title>Caf`+"\xe9"+`</title><link>http://old.example/cafe</link><description>x</description></item>
</channel></rss>`)),
		"/html": typed("text/html", []byte("<html><body>no feed</body></html>")),
	}).URL
	p := params(t, FeedTask, "base_url: "+base+"\nurls: [/rss, /atom, /rdf, /json]")
	res := mustRun(t, Feed, p, crawl.Input{})
	if got := keys(res.Items); !reflect.DeepEqual(got, []string{"post-1", "http://cdn.example/posts/2", "urn:entry:1", "https://old.example/a", "jf-1"}) {
		t.Fatalf("keys %v", got)
	}
	wantData(t, "rss item", res.Items[0].Data, map[string]any{
		"title": "First & best", "link": base + "/posts/1", "guid": "post-1", "published": "2006-01-02T22:04:05Z", "updated": nil,
		"author": "Ann", "description": "Short", "content": "<p>Long</p>", "categories": []any{"go", "web"},
	})
	wantData(t, "rss item without guid", res.Items[1].Data, map[string]any{
		"title": "No guid", "link": "http://cdn.example/posts/2", "guid": nil, "published": nil, "updated": nil,
		"author": nil, "description": nil, "content": nil, "categories": []any{},
	})
	wantData(t, "atom entry", res.Items[2].Data, map[string]any{
		"title": "Entry", "link": "https://atom.example/e/1", "guid": "urn:entry:1", "published": "2024-04-30T20:00:00Z", "updated": "2024-05-01T10:00:00Z",
		"author": "Bo", "description": "Sum", "content": nil, "categories": []any{"news"},
	})
	if d := res.Items[3].Data; d["title"] != "RDF item" || d["published"] != "2003-12-13T18:30:02Z" {
		t.Errorf("RSS 1.0 item: %v", d)
	}
	p = params(t, FeedTask, "urls: ["+base+"/rss091]")
	if old := mustRun(t, Feed, p, crawl.Input{}); len(old.Items) != 1 || old.Items[0].Key != "http://old.example/cafe" || old.Items[0].Data["title"] != "Café" {
		t.Errorf("RSS 0.91 in ISO-8859-1: %+v", old.Items)
	}
	if d := res.Items[4].Data; d["title"] != "JSON entry" || d["author"] != "Cy" || d["content"] != "<p>x</p>" || !reflect.DeepEqual(d["categories"], []any{"a"}) {
		t.Errorf("JSON Feed item: %v", d)
	}

	// Mapped fields read the normalized entry with paths.
	p = params(t, FeedTask, `
urls: [`+base+`/rss]
fields:
  headline: title
  when: {path: published, type: date}
  first_tag: categories.0
  tag_count: {path: 'categories.#', type: int}
  site: feed_title
key: link
`)
	res = mustRun(t, Feed, p, crawl.Input{})
	if got := keys(res.Items); !reflect.DeepEqual(got, []string{base + "/posts/1", "http://cdn.example/posts/2"}) {
		t.Fatalf("keys %v", got)
	}
	wantData(t, "mapped", res.Items[0].Data, map[string]any{"headline": "First & best", "when": "2006-01-02T22:04:05Z", "first_tag": "go", "tag_count": int64(2), "site": "Blog"})

	p = params(t, FeedTask, "urls: ["+base+"/html]")
	_, err := runTask(t, Feed, p, crawl.Input{})
	if err == nil || !strings.HasPrefix(err.Error(), "generic.feed: "+base+"/html: not an RSS, Atom or JSON feed: ") || !crawl.IsPermanent(err) {
		t.Errorf("not a feed: %v", err)
	}
}

func gz(t *testing.T, s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.Bytes()
}

func TestSitemap(t *testing.T) {
	var base string
	index := func() string {
		return `<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>` + base + `/sm/posts.xml</loc><lastmod>2024-06-01</lastmod></sitemap>
  <sitemap><loc>` + base + `/sm/old.xml.gz</loc><lastmod>2020-01-01T00:00:00+00:00</lastmod></sitemap>
  <sitemap><loc>/sm/binary</loc></sitemap>
</sitemapindex>`
	}
	posts := `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc> https://ex.example/posts/1 </loc><lastmod>2024-05-30T10:00:00+02:00</lastmod></url>
  <url><loc>https://ex.example/posts/2</loc><lastmod>2023-01-01</lastmod></url>
  <url><loc>https://ex.example/posts/2</loc></url>
  <url><loc>https://ex.example/tags/go</loc></url>
  <url><loc>https://ex.example/posts/3?draft=1</loc></url>
  <url><loc>/relative/4</loc></url>
</urlset>`
	srv := site(t, map[string]any{
		"/sitemap.xml":  func(w http.ResponseWriter, r *http.Request) { typed("application/xml", []byte(index()))(w, r) },
		"/sm/posts.xml": typed("application/xml", []byte("\xEF\xBB\xBF"+posts)),
		// gzip announced by the name only, and gzip announced by nothing (magic bytes).
		"/sm/old.xml.gz": typed("application/x-gzip", gz(t, `<urlset><url><loc>https://ex.example/old/1</loc></url></urlset>`)),
		"/sm/binary":     typed("application/octet-stream", gz(t, `<urlset><url><loc>https://ex.example/bin/1</loc></url></urlset>`)),
		"/urls.txt":      typed("text/plain", []byte("# a text sitemap\nhttps://ex.example/t/1\n\nhttps://ex.example/t/2\nnot a url\n")),
		"/empty.xml":     typed("application/xml", []byte(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"></urlset>`)),
		"/page.html":     typed("text/html", []byte(`<html><body>hi</body></html>`)),
	})
	base = srv.URL

	p := params(t, SitemapTask, "urls: ["+base+"/sitemap.xml]\nto_task: generic.html_detail")
	res := mustRun(t, Sitemap, p, crawl.Input{})
	if got := urls(res.Next); !reflect.DeepEqual(got, []string{base + "/sm/posts.xml", base + "/sm/old.xml.gz", base + "/sm/binary"}) {
		t.Fatalf("child sitemaps %v", got)
	}
	for _, n := range res.Next {
		if n.Task != SitemapTask || n.Var(VarFor) != "s" {
			t.Errorf("child sitemap input %+v", n)
		}
	}
	all, visited := follow(t, Sitemap, p, 10)
	if len(visited) != 3 {
		t.Errorf("visited %v", visited)
	}
	want := []string{"https://ex.example/posts/1", "https://ex.example/posts/2", "https://ex.example/tags/go", "https://ex.example/posts/3?draft=1", base + "/relative/4", "https://ex.example/old/1", "https://ex.example/bin/1"}
	if got := urls(all.Next); !reflect.DeepEqual(got, want) {
		t.Errorf("page URLs\n got  %v\n want %v", got, want)
	}
	first := all.Next[0]
	if first.Task != HTMLDetailTask || first.Var(VarLastmod) != "2024-05-30T08:00:00Z" || first.Var(VarVia) != "s" {
		t.Errorf("page input %+v", first)
	}

	// Filters: include, exclude, lastmod_after (entries without lastmod pass).
	p = params(t, SitemapTask, "urls: ["+base+"/sm/posts.xml]\ninclude: ['/posts/']\nexclude: ['draft=']\nlastmod_after: 2024-01-01")
	res = mustRun(t, Sitemap, p, crawl.Input{})
	if got := urls(res.Next); !reflect.DeepEqual(got, []string{"https://ex.example/posts/1"}) || res.Skipped != 4 {
		t.Errorf("filtered: %v, skipped %d; want posts/1 and 4 skipped (posts/2 too old, tags/go, the draft, relative/4)", got, res.Skipped)
	}
	if res.Next[0].Task != "" {
		t.Errorf("to_task unset: Task %q, want every consumer", res.Next[0].Task)
	}
	p = params(t, SitemapTask, "urls: ["+base+"/sitemap.xml]\nlastmod_after: '2023-06-01T00:00:00Z'")
	if res = mustRun(t, Sitemap, p, crawl.Input{}); len(res.Next) != 2 || res.Skipped != 1 {
		t.Errorf("an old child sitemap is skipped: %v, skipped %d", urls(res.Next), res.Skipped)
	}

	// A text sitemap; an empty urlset; a page that is not a sitemap.
	p = params(t, SitemapTask, "urls: ["+base+"/urls.txt]")
	if res = mustRun(t, Sitemap, p, crawl.Input{}); !reflect.DeepEqual(urls(res.Next), []string{"https://ex.example/t/1", "https://ex.example/t/2"}) {
		t.Errorf("text sitemap: %v", urls(res.Next))
	}
	p = params(t, SitemapTask, "urls: ["+base+"/empty.xml]")
	if res = mustRun(t, Sitemap, p, crawl.Input{}); len(res.Next) != 0 {
		t.Errorf("empty urlset: %v", urls(res.Next))
	}
	p = params(t, SitemapTask, "urls: ["+base+"/page.html]")
	_, err := runTask(t, Sitemap, p, crawl.Input{})
	if want := "generic.sitemap: " + base + "/page.html: not a sitemap: the root element is <html>, not <urlset> or <sitemapindex>"; err == nil || err.Error() != want || !crawl.IsPermanent(err) {
		t.Errorf("error %v, want permanent %q", err, want)
	}
	// A page URL routed back to the sitemap step (to_task unset, the step consumes
	// itself) is passed over, not parsed as a sitemap.
	if again, err := runTask(t, Sitemap, p, crawl.Input{URL: "https://ex.example/posts/1", Vars: map[string]any{VarVia: "s"}}); err != nil || len(again.Next) != 0 {
		t.Errorf("own page input: %+v %v", again, err)
	}
}

// Titles are text: an Atom title of type="html" (or an RSS title with escaped markup)
// is stored without its tags and entities.
func TestFeedTitlesAreText(t *testing.T) {
	atom := `<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title type="html">News &amp;amp; views</title><id>urn:f</id><updated>2024-05-01T00:00:00Z</updated>
<entry><title type="html">Tom &amp;amp; Jerry &lt;b&gt;live&lt;/b&gt;</title><id>urn:e:1</id><link href="https://a.example/1"/><updated>2024-05-01T00:00:00Z</updated></entry>
<entry><title type="text">AT&amp;T &lt; 5</title><id>urn:e:2</id><link href="https://a.example/2"/><updated>2024-05-01T00:00:00Z</updated></entry>
</feed>`
	base := site(t, map[string]any{"/atom": typed("application/atom+xml", []byte(atom))}).URL
	res := mustRun(t, Feed, params(t, FeedTask, "urls: ["+base+"/atom]"), crawl.Input{})
	if len(res.Items) != 2 {
		t.Fatalf("items %+v", res.Items)
	}
	for i, want := range []string{"Tom & Jerry live", "AT&T < 5"} {
		if got := res.Items[i].Data["title"]; got != want {
			t.Errorf("entry %d title %q, want %q", i+1, got, want)
		}
	}
}

// A step may start from a site's robots.txt: its `Sitemap:` lines (any case, relative
// or absolute, repeated once) become the sitemaps the step reads next, and the page
// URLs they list reach the next step as from any sitemap.
func TestSitemapFromRobotsTxt(t *testing.T) {
	var base string
	srv := site(t, map[string]any{
		"/robots.txt": func(w http.ResponseWriter, r *http.Request) {
			typed("text/plain", []byte("User-agent: *\nDisallow: /private\nSitemap: "+base+"/sm/a.xml\nsitemap:/sm/b.xml\nSITEMAP: "+base+"/sm/a.xml\nSitemap: ftp://elsewhere/x.xml\n"))(w, r)
		},
		"/sm/a.xml": typed("application/xml", []byte(`<urlset><url><loc>https://ex.example/a/1</loc></url></urlset>`)),
		"/sm/b.xml": typed("application/xml", []byte(`<urlset><url><loc>https://ex.example/b/1</loc></url></urlset>`)),
	})
	base = srv.URL
	p := params(t, SitemapTask, "urls: ["+base+"/robots.txt]")
	res := mustRun(t, Sitemap, p, crawl.Input{})
	if got := urls(res.Next); !reflect.DeepEqual(got, []string{base + "/sm/a.xml", base + "/sm/b.xml"}) || res.Skipped != 1 {
		t.Fatalf("sitemaps from robots.txt: %v, skipped %d; want a.xml and b.xml, the ftp one skipped", got, res.Skipped)
	}
	for _, n := range res.Next {
		if n.Task != SitemapTask {
			t.Errorf("%s goes to %q, want this step", n.URL, n.Task)
		}
	}
	all, _ := follow(t, Sitemap, p, 10)
	if got := urls(all.Next); !reflect.DeepEqual(got, []string{"https://ex.example/a/1", "https://ex.example/b/1"}) {
		t.Errorf("page URLs %v", got)
	}

	bare := site(t, map[string]any{"/robots.txt": typed("text/plain", []byte("User-agent: *\nDisallow:\n"))})
	_, err := runTask(t, Sitemap, params(t, SitemapTask, "urls: ["+bare.URL+"/robots.txt]"), crawl.Input{})
	if err == nil || !crawl.IsPermanent(err) || !strings.Contains(err.Error(), "names no sitemap (no `Sitemap:` line); give the sitemap's URL in urls instead") {
		t.Errorf("a robots.txt without sitemaps: %v", err)
	}
}
