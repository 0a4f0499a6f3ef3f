package demosite

import (
	"bytes"
	"errors"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Handler returns the demo site. It serves
//
//	GET /news?p=N                 feed page N (1..Pages) of PerPage stories
//	GET /item/ID                  story page
//	GET /item/ID/comments?p=N     comments page N of story ID
//	GET /robots.txt               allows everything
//
// A FaultRetryAfter remembers per handler which stories were already requested.
func Handler(o Options) http.Handler {
	return newSite(o)
}

// Start serves the demo site on addr ("127.0.0.1:0" for a free port) and returns its base
// URL (no trailing slash) and a function that stops it, cutting any hanging or streaming
// responses short.
func Start(addr string, o Options) (baseURL string, stop func() error, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	s := newSite(o)
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var (
		once    sync.Once
		stopErr error
	)
	stop = func() error {
		once.Do(func() {
			close(s.quit)
			stopErr = srv.Close()
			if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) && stopErr == nil {
				stopErr = serr
			}
		})
		return stopErr
	}
	return "http://" + ln.Addr().String(), stop, nil
}

type site struct {
	o    Options
	mux  *http.ServeMux
	quit chan struct{}

	mu   sync.Mutex
	seen map[int]bool // stories with FaultRetryAfter already answered once
}

func newSite(o Options) *site {
	s := &site{o: o.WithDefaults(), quit: make(chan struct{}), seen: map[int]bool{}}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/news?p=1", http.StatusFound)
	})
	s.mux.HandleFunc("GET /robots.txt", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("User-agent: *\nAllow: /\n"))
	})
	s.mux.HandleFunc("GET /news", s.feed)
	s.mux.HandleFunc("GET /item/{id}", s.story)
	s.mux.HandleFunc("GET /item/{id}/comments", s.comments)
	s.addFormats()
	s.addProtected()
	s.addStreams()
	s.addJS()
	s.addActionPages()
	s.addLoginPages()
	return s
}

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.o.Latency > 0 {
		select {
		case <-time.After(s.o.Latency):
		case <-r.Context().Done():
			return
		case <-s.quit:
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// pageParam reads ?p=, defaulting to 1; ok is false for a malformed or out-of-range page.
func pageParam(r *http.Request, last int) (int, bool) {
	v := r.URL.Query().Get("p")
	if v == "" {
		return 1, true
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > last {
		return 0, false
	}
	return p, true
}

func (s *site) storyParam(w http.ResponseWriter, r *http.Request) (Story, bool) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil {
		http.NotFound(w, r)
		return Story{}, false
	}
	st, ok := s.o.Story(id)
	if !ok {
		http.NotFound(w, r)
		return Story{}, false
	}
	return st, true
}

func (s *site) feed(w http.ResponseWriter, r *http.Request) { s.feedOf(w, r, false) }

// feedOf serves a news page; a mixed one links its even stories to their pages built
// by script.
func (s *site) feedOf(w http.ResponseWriter, r *http.Request, mixed bool) {
	p, ok := pageParam(r, s.o.Pages)
	if !ok {
		http.NotFound(w, r)
		return
	}
	data := feedPage{Page: p, Rank: (p - 1) * s.o.PerPage, Mixed: mixed}
	for id := data.Rank + 1; id <= p*s.o.PerPage; id++ {
		if s.o.Edits.deleted(id) != 0 {
			continue
		}
		st, _ := s.o.Story(id)
		data.Stories = append(data.Stories, st)
	}
	if p < s.o.Pages {
		data.Next = p + 1
	}
	render(w, feedTmpl, data)
}

func (s *site) story(w http.ResponseWriter, r *http.Request) {
	st, ok := s.storyParam(w, r)
	if !ok {
		return
	}
	if s.o.Live != nil {
		s.o.Live.visit(st.ID)
	}
	if s.o.Edits.serveDeleted(w, st.ID) {
		return
	}
	switch s.o.Faults[st.ID] {
	case FaultStatus500:
		http.Error(w, "internal server error", http.StatusInternalServerError)
		return
	case FaultRetryAfter:
		if s.firstRequest(st.ID) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
	case FaultHang:
		select {
		case <-r.Context().Done():
		case <-s.quit:
		}
		return
	case FaultHugeBody:
		s.huge(w, r, st)
		return
	case FaultTruncated:
		var buf bytes.Buffer
		if err := storyTmpl.Execute(&buf, st); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		page := buf.Bytes()
		if i := bytes.Index(page, []byte(`<h1 class="title"`)); i >= 0 {
			page = page[:i+len(`<h1 class="ti`)]
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
		return
	}
	render(w, storyTmpl, st)
}

func (s *site) firstRequest(id int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[id] {
		return false
	}
	s.seen[id] = true
	return true
}

// huge streams HugeBodySize bytes of a never-ending story page, in chunks, without a
// Content-Length, until done or the client goes away.
func (s *site) huge(w http.ResponseWriter, r *http.Request, st Story) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	head := "<!DOCTYPE html>\n<html><body><article class=\"story\" data-id=\"" + strconv.Itoa(st.ID) +
		"\"><h1 class=\"title\">" + template.HTMLEscapeString(st.Title) + "</h1><div class=\"text\">\n"
	line := "<p>" + strings.Repeat("All work and no play makes a very long page. ", 20) + "</p>\n"
	chunk := []byte(strings.Repeat(line, (64<<10)/len(line)+1))
	rc := http.NewResponseController(w)
	left := HugeBodySize
	first := []byte(head)
	for left > 0 {
		b := chunk
		if first != nil {
			b, first = first, nil
		}
		if len(b) > left {
			b = b[:left]
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.quit:
			return
		default:
		}
		n, err := w.Write(b)
		left -= n
		if err != nil {
			return
		}
		_ = rc.Flush()
	}
}

func (s *site) comments(w http.ResponseWriter, r *http.Request) {
	st, ok := s.storyParam(w, r)
	if !ok {
		return
	}
	pages := s.o.CommentPages(st.ID)
	p, ok := pageParam(r, pages)
	if !ok {
		http.NotFound(w, r)
		return
	}
	all := s.o.Comments(st.ID)
	lo := (p - 1) * s.o.CommentsPerPage
	hi := min(lo+s.o.CommentsPerPage, len(all))
	data := commentsPage{Story: st, Page: p, Comments: all[lo:hi]}
	if p < pages {
		data.Next = p + 1
	}
	render(w, commentsTmpl, data)
}

func render(w http.ResponseWriter, t *template.Template, data any) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = w.Write(buf.Bytes())
}

type feedPage struct {
	Page    int
	Rank    int // rank of the first story minus one
	Stories []Story
	Next    int  // next page, 0 on the last
	Mixed   bool // the /mixed list: even stories link to their pages built by script
}

type commentsPage struct {
	Story    Story
	Page     int
	Comments []Comment
	Next     int
}

var funcs = template.FuncMap{
	"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"age":     age,
	"host": func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil {
			return ""
		}
		return u.Host
	},
	"add": func(a, b int) int { return a + b },
	// storyPath links a story's page: on the mixed list, the even ones are built by script.
	"storyPath": func(mixed bool, id int) string {
		if mixed && JSStory(id) {
			return "/js/item/" + strconv.Itoa(id)
		}
		return "/item/" + strconv.Itoa(id)
	},
	"commentsLabel": func(n int) string {
		if n == 0 {
			return "discuss"
		}
		return plural(n, "comment")
	},
}

const pageHead = `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Demo News</title></head>
<body>
<div class="header"><a href="/news?p=1">Demo News</a></div>
`

var feedTmpl = template.Must(template.New("feed").Funcs(funcs).Parse(pageHead + `<table class="itemlist">
{{- $rank := .Rank}}
{{- range $i, $s := .Stories}}
<tr class="athing" id="{{$s.ID}}">
  <td class="rank">{{add $rank (add $i 1)}}.</td>
  <td class="title"><span class="titleline"><a href="{{storyPath $.Mixed $s.ID}}">{{$s.Title}}</a>{{if $s.URL}} <span class="sitestr">({{host $s.URL}})</span>{{end}}</span></td>
</tr>
<tr><td></td><td class="subtext"><span class="score" id="score_{{$s.ID}}">{{$s.Score}} points</span> by <a class="hnuser" href="/user/{{$s.Author}}">{{$s.Author}}</a> <span class="age" title="{{rfc3339 $s.Time}}"><a href="/item/{{$s.ID}}">{{age $s.Time}}</a></span> | <a href="/item/{{$s.ID}}/comments?p=1">{{commentsLabel $s.Comments}}</a></td></tr>
{{- end}}
</table>
{{if .Next}}<a class="morelink" href="{{if .Mixed}}/mixed{{end}}/news?p={{.Next}}" rel="next">More</a>
{{end}}</body>
</html>
`))

var storyTmpl = template.Must(template.New("story").Funcs(funcs).Parse(pageHead + `<article class="story" id="story-{{.ID}}" data-id="{{.ID}}">
<h1 class="title">{{.Title}}</h1>
{{if .URL}}<p class="link"><a class="url" href="{{.URL}}">{{.URL}}</a></p>
{{end}}<p class="meta"><span class="score">{{.Score}} points</span> by <a class="author" href="/user/{{.Author}}">{{.Author}}</a> <time datetime="{{rfc3339 .Time}}">{{age .Time}}</time> | <span class="comments">{{commentsLabel .Comments}}</span></p>
{{if .Text}}<div class="text">{{.Text}}</div>
{{end}}{{if .Comments}}<a class="comments-link" href="/item/{{.ID}}/comments?p=1">Read the {{commentsLabel .Comments}}</a>
{{end}}</article>
</body>
</html>
`))

var commentsTmpl = template.Must(template.New("comments").Funcs(funcs).Parse(pageHead + `<h1>Comments on <a class="story" href="/item/{{.Story.ID}}">{{.Story.Title}}</a></h1>
<div class="comments" data-story="{{.Story.ID}}" data-page="{{.Page}}">
{{- range .Comments}}
<div class="comment" id="c{{.ID}}" data-id="{{.ID}}" data-story="{{.Story}}">
  <span class="comhead"><a class="author" href="/user/{{.Author}}">{{.Author}}</a> on <a class="parent" href="/item/{{.Story}}">story {{.Story}}</a></span>
  <div class="text">{{.Text}}</div>
</div>
{{- end}}
</div>
{{if .Next}}<a class="morelink" href="/item/{{.Story.ID}}/comments?p={{.Next}}" rel="next">More comments</a>
{{end}}</body>
</html>
`))
