package tests

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// ringShop is a shop whose category pages each list the same products and link the
// next category, the last back to the first: a ring. It counts the requests per path.
type ringShop struct {
	categories, products int
	latency              time.Duration // each page takes this long to serve
	mu                   sync.Mutex
	hits                 map[string]int
}

func newRingShop(categories, products int, latency time.Duration) *ringShop {
	return &ringShop{categories: categories, products: products, latency: latency, hits: map[string]int{}}
}

// served is how many times each path has been requested so far.
func (s *ringShop) served() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.hits)
}

func (s *ringShop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	s.mu.Unlock()
	time.Sleep(s.latency)
	var c, p int
	switch {
	case fmt1(r.URL.Path, "/cat/%d", &c) && c >= 1 && c <= s.categories:
		var b strings.Builder
		b.WriteString("<html><body><ul>")
		for j := 1; j <= s.products; j++ {
			fmt.Fprintf(&b, `<li class="product"><a href="/product/%d">Product %d</a></li>`, j, j)
		}
		fmt.Fprintf(&b, `</ul><a class="next" href="/cat/%d">next</a></body></html>`, c%s.categories+1)
		fmt.Fprint(w, b.String())
	case fmt1(r.URL.Path, "/product/%d", &p) && p >= 1 && p <= s.products:
		fmt.Fprintf(w, "<html><body><h1>Product %d</h1></body></html>", p)
	default:
		http.NotFound(w, r)
	}
}

func fmt1(path, format string, n *int) bool {
	_, err := fmt.Sscanf(path, format, n)
	return err == nil
}

// The ring shop: 10 category pages, each listing the same 50 products and linking the
// next category. Every page is fetched once per run — 10 category pages and 50 product
// pages, where each product link is handed to the detail step 10 times — and the 450
// product links the run had already handed on are counted as skipped duplicates. The
// start URL listed twice is one fetch too.
func TestRingShopFetchesEveryPageOnce(t *testing.T) {
	shop := newRingShop(10, 50, 0)
	srv := httptest.NewServer(shop)
	defer srv.Close()
	id := start(t, plan(t, "ring-shop.yaml", ringChain(srv.URL, "")), taskQueue)
	s := wait(t, id, 2*time.Minute)
	noFailures(t, s)
	assertRingFetchedOnce(t, shop, s)
	assertRingStored(t, shop, items(t, id))

	// `trawler status` shows them per step, in text and JSON.
	common := []string{"--data", shared.dir}
	out, stderr, code := trawler(t, append([]string{"status", id}, common...)...)
	if code != 0 {
		t.Fatalf("status exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "duplicates") || !regexp.MustCompile(`(?m)^\s+product\s+50\s+50\s+0\s+0\s+450\s`).MatchString(out) {
		t.Errorf("status does not show the product step's 450 duplicates:\n%s", out)
	}
	out, stderr, code = trawler(t, append([]string{"status", id, "--json"}, common...)...)
	if code != 0 || !strings.Contains(out, `"id":"product"`) || !strings.Contains(out, `"duplicates_skipped":450`) {
		t.Errorf("status --json: exit %d, lacks the product step's \"duplicates_skipped\":450: %s %s", code, out, stderr)
	}
}

// ringChain is the ring shop's chain: a list step that pages through the ring from its
// first category (listed twice, once with a fragment) and hands every product link to
// a detail step; productExtra is appended to the detail step's settings.
func ringChain(base, productExtra string) string {
	return fmt.Sprintf(`name: ring-shop
defaults:
  params:
    base_url: %s
steps:
  - id: list
    task: generic.html_list
    from: list
    max_depth: 100
    params:
      urls: ['/cat/1', '/cat/1#top']
      items: li.product
      fields:
        link: {css: a, attr: href, type: url}
      detail: link
      next: a.next
  - id: product
    task: generic.html_detail
    from: list
    params:
      fields:
        name: {css: h1, required: true}
%s`, base, productExtra)
}

// assertRingFetchedOnce checks that the site served every category and product page
// exactly once and that the run's counts say so: each category page hands on every
// product link, of which only those of the first are new; the rest, and the start URL
// listed twice, are skipped duplicates.
func assertRingFetchedOnce(t *testing.T, shop *ringShop, s *workflows.Summary) {
	t.Helper()
	hits := shop.served()
	for c := 1; c <= shop.categories; c++ {
		if n := hits[fmt.Sprintf("/cat/%d", c)]; n != 1 {
			t.Errorf("/cat/%d fetched %d times, want once", c, n)
		}
	}
	fetched := 0
	for p := 1; p <= shop.products; p++ {
		n := hits[fmt.Sprintf("/product/%d", p)]
		fetched += n
		if n != 1 {
			t.Errorf("/product/%d fetched %d times, want once", p, n)
		}
	}
	if fetched != shop.products {
		t.Errorf("the site served %d product pages for %d products", fetched, shop.products)
	}
	assertRingCounts(t, shop, s)
}

// assertRingCounts checks the run's per-step counts of the ring shop: every page once,
// and the product links after the first category page's, and the start URL listed
// twice, skipped as duplicates.
func assertRingCounts(t *testing.T, shop *ringShop, s *workflows.Summary) {
	t.Helper()
	list, product := stepStats(s, "list"), stepStats(s, "product")
	if list.Pages != shop.categories || product.Pages != shop.products {
		t.Errorf("pages: list %d product %d, want %d and %d", list.Pages, product.Pages, shop.categories, shop.products)
	}
	if want := shop.categories*shop.products - shop.products; product.DuplicatesSkipped != want {
		t.Errorf("product duplicates_skipped = %d, want %d", product.DuplicatesSkipped, want)
	}
	if list.DuplicatesSkipped != 1 {
		t.Errorf("list duplicates_skipped = %d, want 1 (the start URL listed twice)", list.DuplicatesSkipped)
	}
}

// assertRingStored checks that a run stored every product once, and nothing else.
func assertRingStored(t *testing.T, shop *ringShop, got map[string]map[string]crawl.Item) {
	t.Helper()
	if n := len(got["ring_shop.product"]); n != shop.products || len(got) != 1 {
		t.Errorf("stored %d ring_shop.product items (bizs %v), want %d", n, sortedKeysOf(got["ring_shop.product"]), shop.products)
	}
}

// eventsSite is a site section with the usual mess: cross-links to the same events with
// tracking parameters, links off the section and off the host, and a calendar whose
// "next month" link goes on forever. It starts in October of next year, so with
// calendar_years: 1 three months are in range and the fourth is a trap. It counts the
// requests per path and query.
type eventsSite struct {
	year int
	mu   sync.Mutex
	hits map[string]int
}

func (s *eventsSite) served() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.hits)
}

func (s *eventsSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.RequestURI()]++
	s.mu.Unlock()
	var y, m, e int
	switch _, err := fmt.Sscanf(r.URL.Path, "/events/cal/%d-%d", &y, &m); {
	case r.URL.Path == "/events":
		fmt.Fprintf(w, `<html><body><a href="/events/cal/%d-10">calendar</a>
<a href="/events/e/1">one</a> <a href="/events/e/2?utm_source=nav&utm_medium=menu">two</a> <a href="/events/e/2">two again</a>
<a href="https://elsewhere.example/x">elsewhere</a> <a href="/news">news</a></body></html>`, s.year)
	case err == nil:
		ny, nm := y, m+1
		if nm == 13 {
			ny, nm = y+1, 1
		}
		fmt.Fprintf(w, `<html><body><a href="/events/cal/%d-%02d">next month</a> <a href="/events/e/%d?fbclid=x%d">event</a> <a href="/events">all events</a></body></html>`, ny, nm, m%3+1, m)
	case fmt1(r.URL.Path, "/events/e/%d", &e) && e >= 1 && e <= 3:
		fmt.Fprintf(w, `<html><body><h1>Event %d</h1><a href="/events/e/%d">next event</a></body></html>`, e, e%3+1)
	default:
		http.NotFound(w, r)
	}
}

// generic.site on a section with cross-links, tracking parameters and a calendar trap:
// exactly the in-scope pages are fetched, once each; the calendar's fourth month is
// dropped by the calendar rule and the links off the section are out of scope, and
// status names the rule.
func TestSiteCrawlFetchesEachPageOnceAndCountsTrapsByRule(t *testing.T) {
	site := &eventsSite{year: time.Now().Year() + 1, hits: map[string]int{}}
	srv := httptest.NewServer(site)
	defer srv.Close()
	chain := fmt.Sprintf(`name: events
defaults:
  params:
    base_url: %s
steps:
  - id: site
    task: generic.site
    from: site
    max_depth: 20
    params:
      urls: ['/events']
      scope: host
      include: ['/events', '/events/cal/*']
      to: ['/events/e/*']
      calendar_years: 1
  - id: event
    task: generic.html_detail
    from: site
    params:
      fields:
        name: {css: h1, required: true}
`, srv.URL)
	id := start(t, plan(t, "events.yaml", chain), taskQueue)
	s := wait(t, id, 2*time.Minute)
	noFailures(t, s)

	want := map[string]int{"/robots.txt": 1, "/events": 1, "/events/e/1": 1, "/events/e/2": 1, "/events/e/3": 1}
	for m := 10; m <= 12; m++ {
		want[fmt.Sprintf("/events/cal/%d-%d", site.year, m)] = 1
	}
	if got := site.served(); !maps.Equal(got, want) {
		t.Errorf("the site served %v\nwant each in-scope page once, and robots.txt: %v", got, want)
	}
	sp, ev := stepStats(s, "site"), stepStats(s, "event")
	if sp.Pages != 4 || sp.TrapDropped != 1 || !maps.Equal(sp.TrapRules, map[string]int{"calendar": 1}) || sp.OutOfScope != 2 {
		t.Errorf("site step: %d pages, %d trap-dropped by rule %v, %d out of scope; want 4, 1 by calendar, and 2 (off the host, off the section)",
			sp.Pages, sp.TrapDropped, sp.TrapRules, sp.OutOfScope)
	}
	if ev.Pages != 3 || ev.Items != 3 {
		t.Errorf("event step: %d pages, %d items; want 3 and 3", ev.Pages, ev.Items)
	}
	if got := items(t, id)["events.event"]; len(got) != 3 {
		t.Errorf("stored %d events (%v), want 3", len(got), sortedKeysOf(got))
	}
	out, stderr, code := trawler(t, "status", id, "--data", shared.dir)
	if code != 0 || !strings.Contains(out, "1 dropped as crawler traps (calendar 1)") {
		t.Errorf("status (exit %d) does not name the trap rule:\n%s%s", code, out, stderr)
	}
}
