package console

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
)

// web holds the console's templates and static files: no build step, nothing fetched
// from elsewhere.
//
//go:embed web
var web embed.FS

// page is what a template renders; the page's script reads the rest from the API.
type page struct {
	Title string
	Name  string            // selects the script's page function (body data-page)
	Data  map[string]string // data-* attributes of the page's main element
}

// pageNames are the templates under web/templates, each filling in "content".
var pageNames = []string{"dashboard", "run", "chains", "schedules", "search", "items", "record", "archived", "pools"}

func (s *Server) pages() {
	tmpls := map[string]*template.Template{}
	for _, name := range pageNames {
		tmpls[name] = template.Must(template.ParseFS(web, "web/templates/layout.html", "web/templates/"+name+".html"))
	}
	render := func(name, title string, data func(r *http.Request) map[string]string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			p := page{Title: title, Name: name, Data: map[string]string{}}
			if data != nil {
				p.Data = data(r)
			}
			var buf bytes.Buffer
			if err := tmpls[name].ExecuteTemplate(&buf, "layout", p); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(buf.Bytes())
		}
	}
	s.open("GET /{$}", render("dashboard", "Runs", nil))
	s.open("GET /runs/{id}", render("run", "Run", func(r *http.Request) map[string]string {
		return map[string]string{"run": r.PathValue("id")}
	}))
	s.open("GET /chains", render("chains", "Chain editor", nil))
	s.open("GET /schedules", render("schedules", "Schedules", nil))
	s.open("GET /search", render("search", "Search", nil))
	s.open("GET /items", render("items", "Items", nil))
	s.open("GET /items/{biz}/{key...}", render("record", "Record", func(r *http.Request) map[string]string {
		return map[string]string{"biz": r.PathValue("biz"), "key": r.PathValue("key")}
	}))
	s.open("GET /archive/{biz}/{key...}", render("archived", "Archived response", func(r *http.Request) map[string]string {
		return map[string]string{"biz": r.PathValue("biz"), "key": r.PathValue("key")}
	}))
	s.open("GET /pools", render("pools", "Pools and dedup", nil))
	static, _ := fs.Sub(web, "web/static")
	s.open("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
}
