package demosite

import (
	"net/http"
	"strconv"
)

// Pages built by JavaScript, for crawls that render (`render:`). Their HTML is an
// empty shell: a script fetches the data from /js/api/… and builds the same markup as
// the plain pages (tr.athing rows, article.story), so the same selectors read both.
//
//	/js/news?p=N      the news list, built by script, with its "More" link
//	/js/item/ID       a story page, built by script
//	/js/hang          a page whose script never ends: it never finishes loading
//	/mixed/news?p=N   a plain list whose odd stories link to plain pages and even
//	                  stories to /js/item/ID: `render: auto` renders only the even ones
func (s *site) addJS() {
	s.mux.HandleFunc("GET /js/news", s.jsShell(`
fetch("/js/api/news" + location.search).then(r => r.json()).then(d => {
  const list = document.getElementById("list");
  d.stories.forEach((st, i) => {
    const tr = el("tr", "athing"); tr.id = st.id;
    const rank = el("td", "rank", (d.rank + i + 1) + ".");
    const td = el("td", "title"), span = el("span", "titleline"), a = el("a", "", st.title);
    a.href = "/js/item/" + st.id;
    span.append(a); td.append(span); tr.append(rank, td); list.append(tr);
  });
  if (d.next) { const m = el("a", "morelink", "More"); m.href = "/js/news?p=" + d.next; m.rel = "next"; document.body.append(m); }
});`, `<table class="itemlist" id="list"></table>`))
	s.mux.HandleFunc("GET /js/item/{id}", func(w http.ResponseWriter, r *http.Request) {
		st, ok := s.storyParam(w, r)
		if !ok {
			return
		}
		script := `
fetch("/js/api/item/` + strconv.Itoa(st.ID) + `").then(r => r.json()).then(st => {
  const art = el("article", "story"); art.id = "story-" + st.id; art.dataset.id = st.id;
  const meta = el("p", "meta"), author = el("a", "author", st.author);
  author.href = "/user/" + st.author;
  meta.append(el("span", "score", st.score + " points"), " by ", author);
  art.append(el("h1", "title", st.title), meta);
  if (st.text) art.append(el("div", "text", st.text));
  document.body.append(art);
});`
		if s.o.Faults[st.ID] == FaultScriptHang && s.firstRequest(st.ID) {
			script = `while (true) {}`
		}
		s.jsShell(script, "")(w, r)
	})
	s.mux.HandleFunc("GET /js/hang", s.jsShell(`while (true) {}`, ""))
	s.mux.HandleFunc("GET /js/api/news", func(w http.ResponseWriter, r *http.Request) {
		p, ok := pageParam(r, s.o.Pages)
		if !ok {
			http.NotFound(w, r)
			return
		}
		type row struct {
			ID    int    `json:"id"`
			Title string `json:"title"`
		}
		out := struct {
			Rank    int   `json:"rank"`
			Stories []row `json:"stories"`
			Next    int   `json:"next,omitempty"`
		}{Rank: (p - 1) * s.o.PerPage}
		for id := out.Rank + 1; id <= p*s.o.PerPage; id++ {
			st, _ := s.o.Story(id)
			out.Stories = append(out.Stories, row{st.ID, st.Title})
		}
		if p < s.o.Pages {
			out.Next = p + 1
		}
		writeJSON(w, http.StatusOK, out)
	})
	s.mux.HandleFunc("GET /js/api/item/{id}", func(w http.ResponseWriter, r *http.Request) {
		st, ok := s.storyParam(w, r)
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": st.ID, "title": st.Title, "author": st.Author, "score": st.Score, "text": st.Text})
	})
	s.mux.HandleFunc("GET /mixed/news", func(w http.ResponseWriter, r *http.Request) { s.feedOf(w, r, true) })
}

// jsShell serves a page whose body is built by script after it loads.
func (s *site) jsShell(script, body string) http.HandlerFunc {
	page := []byte(pageHead + body + `
<script>
function el(tag, cls, text) { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
` + script + `
</script>
</body>
</html>
`)
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	}
}

// JSStory reports whether the mixed list links story id to its page built by script.
func JSStory(id int) bool { return id%2 == 0 }
