package generic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
)

// siteVisit is one page a site crawl fetched and what it emitted.
type siteVisit struct {
	url   string
	next  []string // "task url"
	notes []string
}

// crawlSite runs generic.site from its seed and then over every input it routes to
// itself, breadth first, as a step consuming its own outputs does (with no run-wide
// seen-set: a page two pages link to is fetched twice).
func crawlSite(t *testing.T, p crawl.Params) (visits []siteVisit, outOfScope, trapped int, rules map[string]int) {
	t.Helper()
	queue := []crawl.Input{{}}
	for len(queue) > 0 {
		if len(visits) == 100 {
			t.Fatalf("still %d inputs after 100 pages: a loop was not stopped", len(queue))
		}
		in := queue[0]
		queue = queue[1:]
		res := mustRun(t, Site, p, in)
		v := siteVisit{url: in.URL, notes: res.Notes}
		for _, n := range res.Next {
			v.next = append(v.next, n.Task+" "+n.URL)
			if n.Task == SiteTask {
				queue = append(queue, n)
			}
		}
		visits = append(visits, v)
		if res.Skipped != 0 {
			t.Errorf("%s: skipped %d; links are not records", in.URL, res.Skipped)
		}
		outOfScope += res.OutOfScope
		trapped += res.Trapped
		rules = crawl.AddCounts(rules, res.TrapRules)
	}
	return visits, outOfScope, trapped, rules
}

// A small site with cross-links, tracking parameters, an off-site link and the usual
// traps: each page emits its in-scope links once, canonical, product pages go to the
// detail step, and every dropped link is counted under its rule.
func TestSiteFollowsLinksInScopeAndDropsTraps(t *testing.T) {
	year := time.Now().Year() + 1 // the last year calendar_years: 1 allows
	many := make([]string, 17)
	for i := range many {
		many[i] = fmt.Sprintf("f%d=%d", i, i)
	}
	hits := map[string]int{}
	count := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			hits[r.URL.RequestURI()]++
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			h(w, r)
		}
	}
	page := func(body string) http.HandlerFunc {
		return count(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/" && r.URL.Path != "/about" && r.URL.Path != "/blog/tag" {
				http.NotFound(w, r)
				return
			}
			fmt.Fprint(w, body)
		})
	}
	srv := site(t, map[string]any{
		"/": page(`<html><body>
			<a href="/">home</a> <a href="#top">top</a> <a href="mailto:shop@example.com">mail</a>
			<a href="/about">about</a>
			<a href="/about?utm_source=news&amp;utm_medium=mail">about, from the newsletter</a>
			<a href="/products/1">one</a> <a href="/products/2?utm_campaign=x">two</a>
			<a href="http://other.example/x">elsewhere</a>
			<a href="/a/b/a/b/a/b">deeper and deeper</a>
			<a href="/long?q=` + strings.Repeat("x", 2100) + `">long</a>
			<a href="/cal?y=` + strconv.Itoa(year) + `&amp;m=11">calendar</a>
			<a href="/private/x">private</a>
			<a href="/search?` + strings.Join(many, "&amp;") + `">facets</a>
		</body></html>`),
		// Its links resolve against <base>: ../ is the home page.
		"/about": page(`<html><head><base href="/blog/"></head><body>
			<a href="../">home</a> <a href="../products/1">one</a>
			<a href="tag?t=1">t1</a> <a href="tag?t=2">t2</a> <a href="tag?t=3">t3</a> <a href="tag?t=4">t4</a>
		</body></html>`),
		"/blog/tag": page(`<a href="/about">about</a> <a href="/products/2">two</a>
			<a href="/blog/tag?t=1">t1</a> <a href="/blog/tag?t=2">t2</a>`),
		// Every month links the next one, for ever.
		"/cal": count(func(w http.ResponseWriter, r *http.Request) {
			y, _ := strconv.Atoi(r.URL.Query().Get("y"))
			m, _ := strconv.Atoi(r.URL.Query().Get("m"))
			if m++; m > 12 {
				y, m = y+1, 1
			}
			fmt.Fprintf(w, `<a href="/">home</a> <a href="/cal?y=%d&amp;m=%d">next month</a>`, y, m)
		}),
	})
	p := params(t, SiteTask, fmt.Sprintf(`
urls: ['%s/']
to: ['/products/*']
exclude: ['/private/**']
max_query_variants: 2
calendar_years: 1`, srv.URL))
	visits, outOfScope, trapped, rules := crawlSite(t, p)

	s := srv.URL
	cal := func(m, y int) string { return fmt.Sprintf("%s/cal?m=%d&y=%d", s, m, y) }
	detail := "generic.html_detail "
	self := "generic.site "
	want := []siteVisit{
		{url: "", next: []string{detail + s + "/products/1", detail + s + "/products/2", self + s + "/about", self + cal(11, year)}, notes: []string{
			s + "/: dropped 1 link: longer than max_url_length (trap rule length)",
			s + "/: dropped 1 link: repeating path segments (trap rule repeat)",
			s + "/: dropped 1 link: more than max_params query parameters (trap rule params)",
		}},
		{url: s + "/about", next: []string{detail + s + "/products/1", self + s + "/blog/tag?t=1", self + s + "/blog/tag?t=2"}, notes: []string{
			s + "/about: dropped 2 links: more than max_query_variants query strings for one path on the page (trap rule variants)",
		}},
		{url: cal(11, year), next: []string{self + cal(12, year)}},
		{url: s + "/blog/tag?t=1", next: []string{detail + s + "/products/2", self + s + "/blog/tag?t=2"}},
		{url: s + "/blog/tag?t=2", next: []string{detail + s + "/products/2", self + s + "/blog/tag?t=1"}},
		{url: cal(12, year), notes: []string{
			cal(12, year) + ": dropped 1 link: a date beyond calendar_years from now (trap rule calendar)",
		}},
		// The cross-linked tags, each reached from the other: neither goes back up its own path.
		{url: s + "/blog/tag?t=2", next: []string{detail + s + "/products/2"}},
		{url: s + "/blog/tag?t=1", next: []string{detail + s + "/products/2"}},
	}
	if !reflect.DeepEqual(visits, want) {
		for i := range max(len(visits), len(want)) {
			var g, w siteVisit
			if i < len(visits) {
				g = visits[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("visit %d:\n got  %q %q %q\n want %q %q %q", i, g.url, g.next, g.notes, w.url, w.next, w.notes)
			}
		}
	}
	// The off-site and the excluded link are out of scope; the rest fell into traps.
	if outOfScope != 2 || trapped != 6 || fmt.Sprint(rules) != "map[calendar:1 length:1 params:1 repeat:1 variants:2]" {
		t.Errorf("out of scope %d, trapped %d by rule %v; want 2, and 6: calendar, length, params and repeat 1 each, variants 2", outOfScope, trapped, rules)
	}
	// robots.txt is asked first (the fetcher's politeness); never a product page, an
	// off-site or a dropped link.
	wantHits := map[string]int{"/robots.txt": 1, "/": 1, "/about": 1, "/blog/tag?t=1": 2, "/blog/tag?t=2": 2,
		fmt.Sprintf("/cal?m=11&y=%d", year): 1, fmt.Sprintf("/cal?m=12&y=%d", year): 1}
	if !reflect.DeepEqual(hits, wantHits) {
		t.Errorf("the site served %v, want %v", hits, wantHits)
	}
}

// max_pages bounds the pages one start URL leads to: each page shares what is left
// among its links, and the links beyond the budget are counted.
func TestSiteMaxPagesBoundsOneStartsCrawl(t *testing.T) {
	pages := map[string]any{"/": `<a href="/p1">1</a><a href="/p2">2</a><a href="/p3">3</a><a href="/p4">4</a>`}
	for i := 1; i <= 4; i++ {
		pages[fmt.Sprintf("/p%d", i)] = fmt.Sprintf(`<a href="/q%da">a</a><a href="/q%db">b</a>`, i, i)
	}
	srv := site(t, pages)
	p := params(t, SiteTask, fmt.Sprintf("urls: ['%s/']\nmax_pages: 4", srv.URL))
	visits, outOfScope, trapped, rules := crawlSite(t, p)
	var got []string
	for _, v := range visits[1:] {
		got = append(got, strings.TrimPrefix(v.url, srv.URL))
	}
	if want := []string{"/p1", "/p2", "/p3"}; len(visits) != 4 || !reflect.DeepEqual(got, want) {
		t.Errorf("fetched the start page and %q, want %q", got, want)
	}
	if len(visits[0].notes) != 0 {
		t.Errorf("notes %q: links beyond the budget are counted, not noted", visits[0].notes)
	}
	if outOfScope != 7 || trapped != 0 || rules != nil {
		t.Errorf("out of scope %d, trapped %d; want 7 (/p4, then both links of /p1, /p2, /p3) and 0", outOfScope, trapped)
	}
}

// Sitemaps start a crawl too: an index's child sitemaps come back to the step, the
// pages they list are sorted as links.
func TestSiteFromSitemaps(t *testing.T) {
	srv := site(t, map[string]any{
		"/sitemap.xml": typed("application/xml", []byte(`<sitemapindex><sitemap><loc>/pages.xml</loc></sitemap></sitemapindex>`)),
		"/pages.xml": typed("application/xml", []byte(`<urlset>
			<url><loc>/products/3</loc></url><url><loc>/about?utm_source=x</loc></url>
			<url><loc>http://other.example/y</loc></url><url><loc>/products/3</loc></url></urlset>`)),
		"/about": `<a href="/products/4">four</a>`,
	})
	p := params(t, SiteTask, fmt.Sprintf("sitemaps: ['%s/sitemap.xml']\nto: ['/products/*']", srv.URL))
	visits, outOfScope, trapped, _ := crawlSite(t, p)
	s := srv.URL
	want := []siteVisit{
		{url: "", next: []string{"generic.site " + s + "/pages.xml"}},
		{url: s + "/pages.xml", next: []string{"generic.html_detail " + s + "/products/3", "generic.site " + s + "/about"}},
		{url: s + "/about", next: []string{"generic.html_detail " + s + "/products/4"}},
	}
	if !reflect.DeepEqual(visits, want) || outOfScope != 1 || trapped != 0 {
		t.Errorf("got %q (out of scope %d, trapped %d)\nwant %q (1 out of scope)", visits, outOfScope, trapped, want)
	}
}

// How scope, include, exclude and to sort single links.
func TestSiteSortsLinks(t *testing.T) {
	for _, tc := range []struct {
		params, root, link string
		want               string // follow, detail, both, or the rule that drops it
	}{
		{"scope: host", "https://www.example.co.uk/", "https://shop.example.co.uk/a", "scope"},
		{"scope: domain", "https://www.example.co.uk/", "https://shop.example.co.uk/a", "follow"},
		{"scope: domain", "https://www.example.co.uk/", "https://other.co.uk/a", "scope"},
		{"scope: domain", "http://127.0.0.1:8080/", "http://127.0.0.1:8080/a", "follow"},
		{"scope: prefix", "https://example.com/docs/intro", "https://example.com/docs/api/x", "follow"},
		{"scope: prefix", "https://example.com/docs/intro", "https://example.com/blog/", "scope"},
		{"scope: prefix", "https://example.com/docs/", "https://example.com/docs", "scope"},
		{"include: ['/docs/**']", "https://example.com/", "https://example.com/docs/a/b", "follow"},
		{"include: ['/docs/*']", "https://example.com/", "https://example.com/docs/a/b", "include"},
		{"include: ['/list?page=*']", "https://example.com/", "https://example.com/list?page=2", "follow"},
		{"include: ['re:/p/[0-9]+$']", "https://example.com/", "https://example.com/p/12", "follow"},
		{"include: ['https://example.com/p/*']", "https://example.com/", "https://example.com/p/12?x=1", "follow"},
		{"include: ['https://example.com/p/*?x=2']", "https://example.com/", "https://example.com/p/12?x=1", "include"},
		{"include: ['https://example.com/p/*']", "https://example.com/", "https://example.com/p/12/reviews", "include"},
		{"exclude: ['/p/*']\nto: ['/p/*']", "https://example.com/", "https://example.com/p/1", "exclude"},
		{"to: ['/p/*']", "https://example.com/", "https://example.com/p/1", "detail"},
		{"to: ['/p/*']\ninclude: ['/p/*', '/cat/*']", "https://example.com/", "https://example.com/p/1", "both"},
		{"to: ['/p/*']\ninclude: ['/cat/*']", "https://example.com/", "https://example.com/p/1", "detail"},
		{"max_params: 2", "https://example.com/", "https://example.com/s?a=1&b=2&c=3", "params"},
		{"max_url_length: 0", "https://example.com/", "https://example.com/" + strings.Repeat("x", 3000), "follow"},
		{"calendar_years: 2", "https://example.com/", fmt.Sprintf("https://example.com/events/%d/01/", time.Now().Year()-3), "calendar"},
		{"calendar_years: 2", "https://example.com/", fmt.Sprintf("https://example.com/events/%d/01/", time.Now().Year()-2), "follow"},
		{"calendar_years: 2", "https://example.com/", fmt.Sprintf("https://example.com/e?date=%d-01-05", time.Now().Year()+3), "calendar"},
		{"calendar_years: 0", "https://example.com/", "https://example.com/e?year=1990", "follow"},
		{"calendar_years: 2", "https://example.com/", "https://example.com/p/1990", "follow"},
		{"calendar_years: 2", "https://example.com/", "https://example.com/a/b/c/b/d/b", "repeat"},
	} {
		c, errs := buildSite(params(t, SiteTask, tc.params))
		if len(errs) > 0 {
			t.Fatalf("%s: %v", tc.params, errs)
		}
		root, _ := url.Parse(tc.root)
		tr := c.newTriage(branch{root: root}, tc.root)
		tr.add(tc.link)
		got := ""
		switch {
		case len(tr.follow) == 1 && len(tr.detail) == 1:
			got = "both"
		case len(tr.follow) == 1:
			got = "follow"
		case len(tr.detail) == 1:
			got = "detail"
		}
		for rule := range tr.dropped {
			got += rule
		}
		if got != tc.want {
			t.Errorf("%s, root %s: %s is %q, want %q", tc.params, tc.root, tc.link, got, tc.want)
		}
	}
}

// The example chain on the demo site, tried as a new user would, its outputs routed by
// the chain's own plan (consumers by task, max_depth): the site step crawls the news
// pages only and hands every story to the story step once per page.
func TestSiteExampleOnTheDemoSite(t *testing.T) {
	base, stop, err := demosite.Start("127.0.0.1:0", demosite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	data, _ := examples.Files.ReadFile("generic-site.yaml")
	c, err := crawl.Load("examples/generic-site.yaml", data, crawl.LoadOptions{Sets: []string{"base_url=" + base}})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := c.Compile(nil)
	if err != nil {
		t.Fatal(err)
	}
	step := plan.Steps[0]
	raw, _ := json.Marshal(step.Params)
	var p crawl.Params
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	var pages, stories []string
	skipped := 0
	queue := append([]crawl.Input(nil), step.Seeds...)
	for len(queue) > 0 {
		in := queue[0]
		queue = queue[1:]
		pages = append(pages, strings.TrimPrefix(in.URL, base))
		res, err := runAs(t, step.ID, Site, p, in)
		if err != nil {
			t.Fatal(err)
		}
		skipped += res.OutOfScope + res.Trapped
		routed, limited := step.Route(in, res)
		if limited > 0 {
			t.Errorf("%s: %d inputs beyond max_depth", in.URL, limited)
		}
		for _, r := range routed {
			switch plan.Steps[r.Step].ID {
			case "site":
				queue = append(queue, r.Input)
			case "story":
				stories = append(stories, strings.TrimPrefix(r.Input.URL, base))
			}
		}
	}
	want := []string{"/news?p=1", "/news?p=2", "/news?p=3", "/news?p=4", "/news?p=5", "/news?p=6", "/news?p=7", "/news?p=8", "/news?p=9", "/news?p=10"}
	if !reflect.DeepEqual(pages, want) {
		t.Errorf("crawled %q, want %q", pages, want)
	}
	var wantStories []string
	for i := 1; i <= 300; i++ {
		wantStories = append(wantStories, fmt.Sprintf("/item/%d", i))
	}
	if !reflect.DeepEqual(stories, wantStories) {
		t.Errorf("%d stories handed over (%q…), want /item/1 … /item/300 once each", len(stories), stories[:min(len(stories), 5)])
	}
	// Each page's other links (comments, users, the stories' own sites) are dropped by
	// include or scope, and counted.
	if skipped != 490 {
		t.Errorf("%d links dropped, want 490", skipped)
	}
}
