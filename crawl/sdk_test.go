package crawl_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
)

type story struct {
	ID     int       `json:"id"`
	Title  string    `css:"h1.title" required:"true"`
	Score  int       `css:".score" regex:"([\\d,]+)"`
	Link   string    `json:"url" css:"a.url" attr:"href" type:"url"`
	Posted time.Time `json:"time" css:"time" attr:"datetime"`
	Tags   []string  `css:".tag"`
	Ratio  float64   `css:".ratio"`
}

const storyPage = `<html><head><base href="/news/"></head><body>
<h1 class="title"> Hello  </h1><span class="score">1,204 points</span>
<a class="url" href="../out/far#frag">link</a><time datetime="2026-11-20T10:00:00+08:00">x</time>
<span class="tag">a</span><span class="tag">b</span><span class="ratio">0.25</span>
<a class="comments" href="c?p=1">comments</a>
<ul><li><a href="/x/1">1</a></li><li><a href="https://other.example/2">2</a></li><li><a href="mailto:x@y">m</a></li></ul>
</body></html>`

// site serves storyPage behind a redirect, a page lacking the title, one whose score
// does not convert, and a 404.
func site(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/item/7":
			http.Redirect(w, r, "/s/item/7", http.StatusFound)
		case "/s/item/7":
			w.Write([]byte(storyPage))
		case "/untitled":
			w.Write([]byte(`<p class="score">3</p>`))
		case "/bad-ratio":
			w.Write([]byte(`<h1 class="title">t</h1><span class="ratio">n/a</span>`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

var storyTask = crawl.HTMLTask("demo.sdkstory", func(p *crawl.Page, out *crawl.Out[story]) error {
	s := out.Scan(p)
	if s != nil {
		s.ID = crawl.Params{"id": p.Match(`/item/(\d+)`)}.Int("id")
	}
	out.Item("demo:story:"+p.Match(`/item/(\d+)`), s)
	p.Follow("a.comments", "comments")
	p.FollowAll("ul li", "demo.page", map[string]any{"from": "list"})
	return nil
})

func runTask(t *testing.T, task crawl.Task, u string) (crawl.Result, error) {
	t.Helper()
	env := &crawl.Env{Fetcher: fetch.New(fetch.Options{Timeout: 5 * time.Second, Retries: -1, AllowPrivate: true}), Params: crawl.Params{}}
	return task.Run(context.Background(), env, crawl.Input{URL: u})
}

func TestHTMLTaskScansFollowsAndDeclaresItsSchema(t *testing.T) {
	srv := site(t)
	res, err := runTask(t, storyTask, srv.URL+"/item/7")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 1 {
		t.Fatalf("items %+v", res.Items)
	}
	it := res.Items[0]
	want := map[string]any{
		"id": 7, "title": "Hello", "score": 1204, "url": srv.URL + "/out/far", "time": "2026-11-20T02:00:00Z",
		"tags": []string{"a", "b"}, "ratio": 0.25,
	}
	if it.Key != "demo:story:7" || it.URL != srv.URL+"/s/item/7" || !reflect.DeepEqual(it.Data, want) {
		t.Errorf("item %s %s %#v\nwant data %#v", it.Key, it.URL, it.Data, want)
	}
	// Links resolve against the page's <base>, itself relative to the final URL.
	var got []string
	for _, in := range res.Next {
		got = append(got, in.Task+" "+in.URL+" "+in.Var("from"))
	}
	wantNext := []string{
		"comments " + srv.URL + "/news/c?p=1 ",
		"demo.page " + srv.URL + "/x/1 list",
		"demo.page https://other.example/2 list",
	}
	if !reflect.DeepEqual(got, wantNext) {
		t.Errorf("next:\n got  %q\n want %q", got, wantNext)
	}
	schema := map[string]crawl.Type{}
	for _, f := range storyTask.Spec().Output {
		schema[f.Name] = f.Type
	}
	wantSchema := map[string]crawl.Type{"id": crawl.Int, "title": crawl.String, "score": crawl.Int, "url": crawl.URL, "time": crawl.Time, "tags": crawl.List, "ratio": crawl.Float}
	if !reflect.DeepEqual(schema, wantSchema) {
		t.Errorf("schema %v, want %v", schema, wantSchema)
	}
}

func TestHTMLTaskFailures(t *testing.T) {
	srv := site(t)
	for path, want := range map[string]string{
		"/untitled":  "demo.sdkstory: " + srv.URL + "/untitled: missing required field title (nothing matches \"h1.title\")",
		"/bad-ratio": "demo.sdkstory: " + srv.URL + "/bad-ratio: field ratio: \"n/a\" is not float64",
		"/gone":      "GET " + srv.URL + "/gone: HTTP 404 Not Found",
	} {
		_, err := runTask(t, storyTask, srv.URL+path)
		if err == nil || !strings.HasPrefix(err.Error(), want) || !crawl.IsPermanent(err) {
			t.Errorf("%s: error %v (permanent %v), want one starting %q", path, err, crawl.IsPermanent(err), want)
		}
	}
	// A task may accept a status: a 404 that means "deleted" is skipped, not failed.
	gone := crawl.HTMLTask("demo.sdkgone", func(p *crawl.Page, out *crawl.Out[story]) error {
		if p.Status == http.StatusNotFound {
			out.Skip(1)
			return nil
		}
		out.Item("k", out.Scan(p))
		return nil
	}, crawl.AcceptStatus(func(s int) bool { return s == http.StatusNotFound }))
	res, err := runTask(t, gone, srv.URL+"/gone")
	if err != nil || res.Skipped != 1 || len(res.Items) != 0 {
		t.Errorf("accepted 404: %+v, %v; want it skipped", res, err)
	}
}

// TestFollowRoutesByStepOrTask: an input named after a step id reaches that step only;
// one named after a task reaches every step running it.
func TestFollowRoutesByStepOrTask(t *testing.T) {
	reg := crawl.NewRegistry()
	reg.Register(storyTask, crawl.HTMLTask("demo.sdkpage", func(*crawl.Page, *crawl.Out[story]) error { return nil }))
	c, err := crawl.Load("r.yaml", []byte(`
name: r
steps:
  - id: list
    task: demo.sdkstory
  - id: comments
    task: demo.sdkpage
    from: list
  - id: other
    task: demo.sdkpage
    from: list
`), crawl.LoadOptions{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(reg)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := p.Steps[0].Route(crawl.Input{}, crawl.Result{Next: []crawl.Input{
		{URL: "https://a.example/1", Task: "comments"},
		{URL: "https://a.example/2", Task: "demo.sdkpage"},
	}})
	var got []string
	for _, r := range out {
		got = append(got, p.Steps[r.Step].ID+" "+r.Input.URL)
	}
	want := []string{"comments https://a.example/1", "comments https://a.example/2", "other https://a.example/2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("routed %q, want %q", got, want)
	}
}

func TestEachScansListEntries(t *testing.T) {
	type comment struct {
		Author string `css:".author" required:"true"`
		Text   string `css:".text"`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`<div class="c" data-id="1"><b class="author">ann</b><p class="text">hi</p></div><div class="c" data-id="2"><b class="author">bob</b></div>`))
	}))
	defer srv.Close()
	task := crawl.HTMLTask("demo.sdkcomments", func(p *crawl.Page, out *crawl.Out[comment]) error {
		out.Each("div.c", func(e *goquery.Selection, _ *comment) string { return "c:" + e.AttrOr("data-id", "") })
		return nil
	})
	res, err := runTask(t, task, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 2 || res.Items[0].Key != "c:1" || res.Items[1].Data["author"] != "bob" || res.Items[1].Data["text"] != "" {
		t.Errorf("items %+v", res.Items)
	}
}

// The README's example task, run on a two-page site.
type quote struct {
	Text   string   `css:".text" required:"true"`
	Author string   `css:".author"`
	Tags   []string `css:".tag"`
}

var quotesPage = crawl.HTMLTask("quotes.page", func(p *crawl.Page, out *crawl.Out[quote]) error {
	out.Each(".quote", func(q *goquery.Selection, _ *quote) string { return "quotes:" + q.AttrOr("id", "") })
	p.Follow("li.next a", "quotes.page")
	return nil
}, crawl.URLOf(func(crawl.Params, crawl.Input) (string, error) { return "https://quotes.example/page/1", nil }))

func TestReadmeQuotesTask(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`<div class="quote" id="q1"><span class="text">To be</span><small class="author">W.S.</small><a class="tag">life</a></div>
<div class="quote" id="q2"><span class="text">Or not</span></div><ul><li class="next"><a href="/page/2/">Next</a></li></ul>`))
	}))
	defer srv.Close()
	res, err := runTask(t, quotesPage, srv.URL+"/page/1/")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 2 || res.Items[0].Key != "quotes:q1" || !reflect.DeepEqual(res.Items[0].Data, map[string]any{"text": "To be", "author": "W.S.", "tags": []string{"life"}}) ||
		res.Items[1].Data["author"] != "" || res.Items[1].Data["tags"] != nil && len(res.Items[1].Data["tags"].([]string)) != 0 {
		t.Errorf("items %+v", res.Items)
	}
	if len(res.Next) != 1 || res.Next[0].URL != srv.URL+"/page/2/" || res.Next[0].Task != "quotes.page" {
		t.Errorf("next %+v", res.Next)
	}
}

type post struct {
	ID    int      `json:"id"`
	Title string   `json:"title,omitempty"`
	Score *int     `json:"score,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

var postTask = crawl.JSONTask("api.post", func(p *crawl.Page, out *crawl.Out[post]) error {
	if p.Null() {
		out.Skip(1)
		return nil
	}
	var v post
	if err := p.Decode(&v); err != nil {
		return err
	}
	out.Item(fmt.Sprint("api:post:", v.ID), &v)
	p.FollowURL(fmt.Sprintf("/posts/%d.json", v.ID+1), "api.post")
	return nil
})

func TestJSONTaskDecodesOmitsAndFollows(t *testing.T) {
	bodies := map[string]string{
		"/posts/1.json": `{"id": 1, "title": "first", "score": 0, "tags": ["a"]}`,
		"/posts/2.json": `{"id": 2}`,
		"/posts/3.json": " null\n",
		"/posts/4.json": `{"id": 4, "score": "lots"}`,
		"/posts/5.json": `{"id": 5} {"id": 6}`,
		"/posts/6.json": ``,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(b))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		path    string
		want    map[string]any // nil: skipped
		failure string         // the parse failure's text
	}{
		{"/posts/1.json", map[string]any{"id": 1, "title": "first", "score": 0, "tags": []string{"a"}}, ""},
		// Absent and zero differ only for pointers; omitempty leaves zero values out.
		{"/posts/2.json", map[string]any{"id": 2}, ""},
		{"/posts/3.json", nil, ""},
		{"/posts/4.json", nil, "cannot unmarshal string"},
		{"/posts/5.json", nil, "trailing data after the JSON value"},
		{"/posts/6.json", nil, "empty body"},
	} {
		res, err := runTask(t, postTask, srv.URL+tc.path)
		if tc.failure != "" {
			if !crawl.IsPermanent(err) || crawl.CauseOf(err) != crawl.CauseParse || !strings.Contains(err.Error(), tc.failure) ||
				!strings.Contains(err.Error(), "api.post: "+srv.URL+tc.path) {
				t.Errorf("%s: error %v (cause %s), want a parse failure naming the task and URL with %q", tc.path, err, crawl.CauseOf(err), tc.failure)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if tc.want == nil {
			if res.Skipped != 1 || len(res.Items) != 0 {
				t.Errorf("%s: %+v, want skipped", tc.path, res)
			}
			continue
		}
		if len(res.Items) != 1 || !reflect.DeepEqual(res.Items[0].Data, tc.want) {
			t.Errorf("%s: items %+v, want data %#v", tc.path, res.Items, tc.want)
		}
		// Links resolve against the JSON page's URL, as on an HTML page.
		if len(res.Next) != 1 || !strings.HasPrefix(res.Next[0].URL, srv.URL+"/posts/") {
			t.Errorf("%s: next %+v", tc.path, res.Next)
		}
	}
	schema := map[string]crawl.Type{}
	for _, f := range postTask.Spec().Output {
		schema[f.Name] = f.Type
	}
	if want := (map[string]crawl.Type{"id": crawl.Int, "title": crawl.String, "score": crawl.Int, "tags": crawl.List}); !reflect.DeepEqual(schema, want) {
		t.Errorf("schema %v, want %v", schema, want)
	}
}

type product struct {
	Name  string  `css:"h1" required:"true"`
	Price float64 `css:".price"`
	Note  string  `css:".note"`
}

var productTask = crawl.HTMLTask("demo.sdkproduct", func(p *crawl.Page, out *crawl.Out[product]) error {
	out.Item(p.URL, out.Scan(p))
	return nil
})

// Pages in GBK, Shift_JIS or windows-1252 are read as a browser reads them: by the
// Content-Type charset or the page's <meta> declaration, else as UTF-8 when valid.
func TestHTMLTaskReadsThePagesCharset(t *testing.T) {
	gbk := func(s string) string { out, _ := simplifiedchinese.GBK.NewEncoder().String(s); return out }
	sjis := func(s string) string { out, _ := japanese.ShiftJIS.NewEncoder().String(s); return out }
	latin := func(s string) string { out, _ := charmap.Windows1252.NewEncoder().String(s); return out }
	pages := map[string]struct{ contentType, body string }{
		"/meta-gbk":    {"text/html", gbk(`<html><head><meta charset="gbk"></head><body><h1>苹果手机</h1><span class="price">￥2,859.34</span><p class="note">包邮</p></body></html>`)},
		"/header-sjis": {"text/html; charset=Shift_JIS", sjis(`<h1>りんご</h1><span class="price">120</span><p class="note">送料無料</p>`)},
		"/http-equiv":  {"text/html", latin(`<meta http-equiv="Content-Type" content="text/html; charset=windows-1252"><h1>Café crème</h1><span class="price">3.5</span><p class="note">naïve – “quoted”</p>`)},
		"/utf8":        {"text/html", `<h1>Straße</h1><span class="price">1</span><p class="note">ok</p>`},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", p.contentType)
		w.Write([]byte(p.body))
	}))
	defer srv.Close()
	want := map[string]map[string]any{
		"/meta-gbk":    {"name": "苹果手机", "price": 2859.34, "note": "包邮"},
		"/header-sjis": {"name": "りんご", "price": 120.0, "note": "送料無料"},
		"/http-equiv":  {"name": "Café crème", "price": 3.5, "note": "naïve – “quoted”"},
		"/utf8":        {"name": "Straße", "price": 1.0, "note": "ok"},
	}
	for path, w := range want {
		res, err := runTask(t, productTask, srv.URL+path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(res.Items) != 1 || !reflect.DeepEqual(res.Items[0].Data, w) {
			t.Errorf("%s: items %+v, want data %v", path, res.Items, w)
		}
	}
}

type release struct {
	Day  time.Time `css:".day"`
	When time.Time `css:".when"`
	Unix time.Time `css:".unix" layout:"unix"`
}

// A time.Time field reads the layouts pages use without a layout tag; a date without a
// time of day keeps its calendar day.
func TestHTMLTaskReadsCommonTimes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`<p class="day">2026年12月24日</p><p class="when">Nov 20, 2026</p><p class="unix">1795000000</p>`))
	}))
	defer srv.Close()
	task := crawl.HTMLTask("demo.sdkrelease", func(p *crawl.Page, out *crawl.Out[release]) error {
		out.Item(p.URL, out.Scan(p))
		return nil
	})
	res, err := runTask(t, task, srv.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"day": "2026-12-24T00:00:00Z", "when": "2026-11-20T00:00:00Z", "unix": "2026-11-18T11:06:40Z"}
	if len(res.Items) != 1 || !reflect.DeepEqual(res.Items[0].Data, want) {
		t.Errorf("items %+v, want data %v", res.Items, want)
	}
}

// Item types whose tags cannot work: each one refuses to register, naming the struct,
// the field, the tag and the fix.
type (
	badSelector struct {
		Price string `css:"span.price["`
	}
	misspelledKey struct {
		Title string `css:"h1" requried:"true"`
	}
	misspelledPrefix struct {
		Link string `css:"a" attribute:"href"`
	}
	requiredUnread struct {
		ID int `json:"id" required:"true"`
	}
	unscannable struct {
		Seller struct{ Name string } `css:".seller" required:"true"`
	}
	badRegex struct {
		Score int `css:".score" regex:"(\\d+"`
	}
	layoutOnString struct {
		When string `css:"time" layout:"2006-01-02"`
	}
	unknownType struct {
		Score string `css:".score" type:"int"`
	}
	withForeignTags struct {
		Title string `css:"h1" bson:"title" db:"title"`
	}
)

func registerPanic(task crawl.Task) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	crawl.NewRegistry().Register(task)
	return ""
}

func TestRegisterRefusesTagsThatCannotWork(t *testing.T) {
	for _, c := range []struct {
		task crawl.Task
		want string
	}{
		{crawl.HTMLTask("shop.a", func(*crawl.Page, *crawl.Out[badSelector]) error { return nil }),
			`badSelector.Price: css:"span.price[" is not a CSS selector: `},
		{crawl.HTMLTask("shop.b", func(*crawl.Page, *crawl.Out[misspelledKey]) error { return nil }),
			`misspelledKey.Title: tag key "requried" is not one Trawler reads (did you mean "required"?)`},
		{crawl.HTMLTask("shop.c", func(*crawl.Page, *crawl.Out[misspelledPrefix]) error { return nil }),
			`misspelledPrefix.Link: tag key "attribute" is not one Trawler reads (did you mean "attr"?)`},
		{crawl.JSONTask("shop.d", func(*crawl.Page, *crawl.Out[requiredUnread]) error { return nil }),
			`requiredUnread.ID: required:"true" but nothing reads the field: give it css:"…" (or attr:"…" for an attribute of the element scanned), or drop required`},
		{crawl.HTMLTask("shop.e", func(*crawl.Page, *crawl.Out[unscannable]) error { return nil }),
			`unscannable.Seller: Scan cannot fill a struct { Name string } field; make it a string, number, bool, time.Time, a pointer to one, or []string, or drop css: and attr: and fill it in the task`},
		{crawl.HTMLTask("shop.f", func(*crawl.Page, *crawl.Out[badRegex]) error { return nil }),
			`badRegex.Score: regex:"(\\d+" does not compile: error parsing regexp: missing closing ): ` + "`(\\d+`" + `; fix the pattern (backslashes doubled inside the tag)`},
		{crawl.HTMLTask("shop.g", func(*crawl.Page, *crawl.Out[layoutOnString]) error { return nil }),
			`layoutOnString.When: layout:"2006-01-02" is for time.Time fields, and this one is string; drop the layout`},
		{crawl.HTMLTask("shop.h", func(*crawl.Page, *crawl.Out[unknownType]) error { return nil }),
			`unknownType.Score: type:"int": the only type tag is type:"url"; the field's Go type gives the others`},
	} {
		name := c.task.Spec().Name
		got := registerPanic(c.task)
		if !strings.HasPrefix(got, "crawl: task "+name+": its item's field tags cannot work:\n") || !strings.Contains(got, c.want) {
			t.Errorf("%s: Register panicked with %q, want it to name %q", name, got, c.want)
		}
		// Run unregistered (a test, `trawler try`), the task fails with the same words.
		_, err := c.task.Run(context.Background(), &crawl.Env{}, crawl.Input{URL: "http://shop.example/"})
		if err == nil || !strings.Contains(err.Error(), c.want) || crawl.CauseOf(err) != crawl.CauseConfig {
			t.Errorf("%s: Run error %v, want a config failure naming %q", name, err, c.want)
		}
	}
	ok := crawl.HTMLTask("shop.ok", func(*crawl.Page, *crawl.Out[withForeignTags]) error { return nil })
	if got := registerPanic(ok); got != "" {
		t.Errorf("bson and db tags are another library's, not misspellings: %s", got)
	}
	if err := crawl.CheckTags[story](); err != nil {
		t.Errorf("story's tags: %v", err)
	}
}

// An attr: without css: reads the element scanned itself, and a key built from an id
// that was not found fails the input instead of storing every page under "shop:product:".
func TestAttrWithoutCSSAndEmptyKeyParts(t *testing.T) {
	type product struct {
		ID   string `json:"id" attr:"data-id" required:"true"`
		Link string `json:"url" attr:"href" type:"url"`
		Name string `json:"name" css:".name"`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`<a class="p" data-id="7" href="/p/7"><b class="name">seven</b></a><a class="p" href="/p/8"><b class="name">eight</b></a>`))
	}))
	defer srv.Close()
	task := crawl.HTMLTask("shop.list", func(p *crawl.Page, out *crawl.Out[product]) error {
		out.Each("a.p", func(_ *goquery.Selection, v *product) string { return "shop:product:" + v.ID })
		return nil
	})
	_, err := runTask(t, task, srv.URL)
	want := "shop.list: " + srv.URL + ": missing required field id (the element has no data-id attribute)"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	byURL := crawl.HTMLTask("shop.item", func(p *crawl.Page, out *crawl.Out[product]) error {
		out.Item("shop:product:"+p.Match(`/p/(\d+)`), &product{Name: p.Text("h1")})
		return nil
	})
	_, err = runTask(t, byURL, srv.URL+"/item/9")
	want = "shop.item: " + srv.URL + "/item/9: item key \"shop:product:\" ends in an empty id; the value it was built from is empty (a Match pattern that does not match this URL?)"
	if err == nil || err.Error() != want || crawl.CauseOf(err) != crawl.CauseParse {
		t.Errorf("error %v, want %q", err, want)
	}
	one := crawl.HTMLTask("shop.first", func(p *crawl.Page, out *crawl.Out[product]) error {
		out.Each("a.p[data-id]", func(_ *goquery.Selection, v *product) string { return "shop:product:" + v.ID })
		return nil
	})
	res, err := runTask(t, one, srv.URL)
	if err != nil || len(res.Items) != 1 || res.Items[0].Key != "shop:product:7" || res.Items[0].Data["url"] != srv.URL+"/p/7" || res.Items[0].Data["name"] != "seven" {
		t.Errorf("items %+v, %v", res.Items, err)
	}
}
