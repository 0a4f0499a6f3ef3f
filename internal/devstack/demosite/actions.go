package demosite

import (
	"fmt"
	"net/http"
	"strconv"
)

// Pages that need a hand before they show everything, for `render.actions`. Each
// loads its items ten or twenty at a time from /js/api/items by XHR, so what a click or
// a scroll loads is fetched through the crawler.
//
//	/js/more?total=N&per=M     a "load more" button (button.more) that adds M items
//	                           (div.item) per click and goes away when all N show
//	                           (a click while loading does nothing)
//	/js/scroll?total=N&per=M   an infinite list that adds M items whenever the window
//	                           is scrolled to its bottom, until all N show
//	/js/observe?total=N&per=M&delay=D  an infinite list that loads M more when a
//	                           sentinel below the last item comes into view, D ms later
//	                           (a debounce; default 400), until all N show
//	/js/api/items?from=F&n=M&total=N   items F+1 … F+M (at most N), as JSON
//	/js/search                 a search field (#q) and a sort (#sort); Enter in the
//	                           field shows p#searched with what was asked
//
// delay=D makes each of them load D ms after it is asked to (a debounce; /js/observe
// waits 400 by default, the others not at all). Any of them with consent=1 first shows
// a consent banner (#consent), as a wall: no item loads and no button shows until its
// button.accept is clicked. first=F numbers a page's items F+1 … F+N, so several pages
// of one crawl hold different items.
func (s *site) addActionPages() {
	s.mux.HandleFunc("GET /js/more", s.itemsPage(`
function more() {
  if (loading) return;
  later(() => load().then(() => { if (shown >= total) document.querySelector("button.more").remove(); }));
}
const b = el("button", "more", "Load more"); b.onclick = more; document.body.append(b);
load();`, 0))
	s.mux.HandleFunc("GET /js/scroll", s.itemsPage(`
window.addEventListener("scroll", () => {
  if (!loading && shown < total && innerHeight + scrollY >= document.documentElement.scrollHeight - 10) later(load);
});
load();`, 0))
	s.mux.HandleFunc("GET /js/observe", s.itemsPage(`
const sentinel = el("div", "sentinel", ""); document.body.append(sentinel);
new IntersectionObserver(entries => {
  if (entries[0].isIntersecting && !loading && shown < total) later(load);
}).observe(sentinel);
load();`, 400))
	s.mux.HandleFunc("GET /js/search", s.jsShell(`
document.getElementById("q").addEventListener("keydown", e => {
  if (e.key !== "Enter") return;
  const p = el("p", "", document.getElementById("q").value + " by " + document.getElementById("sort").value);
  p.id = "searched"; document.body.append(p);
});`, `<input id="q" name="q"> <select id="sort"><option value="top">Top</option><option value="new">Newest</option></select>`))
	s.mux.HandleFunc("GET /js/api/items", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		from, _ := strconv.Atoi(q.Get("from"))
		n, _ := strconv.Atoi(q.Get("n"))
		total, _ := strconv.Atoi(q.Get("total"))
		items := []map[string]any{}
		for i := from + 1; i <= min(from+n, total); i++ {
			items = append(items, map[string]any{"n": i, "title": fmt.Sprintf("Item %d", i)})
		}
		writeJSON(w, http.StatusOK, map[string]any{"items": items})
	})
}

// itemsPage serves a page of items loaded by script; script wires how more load, each
// time through later, which waits delay ms (the query's delay=, else defaultDelay) first
// with the page marked loading, as a debounce or a spinner does.
func (s *site) itemsPage(script string, defaultDelay int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		delay := defaultDelay
		if n, err := strconv.Atoi(q.Get("delay")); err == nil && n >= 0 {
			delay = n
		}
		total, per := 35, 10
		if n, err := strconv.Atoi(q.Get("total")); err == nil && n >= 0 {
			total = n
		}
		if n, err := strconv.Atoi(q.Get("per")); err == nil && n > 0 {
			per = n
		}
		first, _ := strconv.Atoi(q.Get("first"))
		consent := ""
		if q.Get("consent") == "1" {
			consent = `<div id="consent">We use cookies. <button class="accept">Accept</button></div>`
		}
		s.jsShell(fmt.Sprintf(`
const total = %d, per = %d, first = %d, delay = %d;
let shown = 0, loading = false;
function later(f) {
  if (delay === 0) return f();
  loading = true;
  setTimeout(f, delay);
}
function load() {
  loading = true;
  return fetch("/js/api/items?from=" + (first + shown) + "&n=" + per + "&total=" + (first + total)).then(r => r.json()).then(d => {
    const list = document.getElementById("items");
    d.items.forEach(it => { const e = el("div", "item", it.title); e.style.height = "60px"; list.append(e); });
    shown += d.items.length;
    loading = false;
  });
}
function start() {
%s
}
const wall = document.getElementById("consent");
if (wall) wall.querySelector(".accept").onclick = () => { wall.remove(); start(); };
else start();`, total, per, max(first, 0), delay, script), consent+`<div id="items"></div>`)(w, r)
	}
}
