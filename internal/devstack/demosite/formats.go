package demosite

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// The machine-readable side of the demo site, for the config-driven spiders. Everything
// is computed from Options.Story, so tests can predict what a crawl must store:
//
//	GET /api/stories?page=N[&per_page=K]   JSON page N: {page, pages, per_page, total, has_more,
//	GET /api/stories?cursor=C               next_cursor, next, stories: [...]}; a page past the
//	                                        end is empty; C comes from next_cursor
//	GET /export/stories.csv                 every story, UTF-8 with a BOM, a header row
//	GET /export/stories.xml                 every story, namespaced XML (prefixes s: and dc:)
//	GET /feed.rss, /feed.atom               the front page's stories (RSS 2.0, Atom 1.0)
//	GET /sitemap.xml                        a sitemap index of /sitemaps/stories-1.xml,
//	                                        /sitemaps/stories-2.xml.gz (gzip) and /sitemaps/pages.xml
//	GET /gbk/news?p=N, /gbk/item/ID         the feed and story pages in Chinese, GBK-encoded,
//	                                        declared only in <meta> tags
//
// Story times are Story.Time; the GBK pages show them in Asia/Shanghai local time.

// Namespaces of /export/stories.xml.
const (
	ExportNS = "https://demo.trawler.dev/ns/export"
	StoryNS  = "https://demo.trawler.dev/ns/story"
	DCNS     = "http://purl.org/dc/elements/1.1/"
)

// Kind is a story's category: "ask", "show" or "link".
func (s Story) Kind() string {
	switch s.ID % 10 {
	case 0:
		return "ask"
	case 3:
		return "show"
	}
	return "link"
}

// GUID is the story's RSS guid; AtomID its Atom entry id.
func (s Story) GUID() string   { return "demo-story-" + strconv.Itoa(s.ID) }
func (s Story) AtomID() string { return "tag:demo.trawler.dev,2025:story-" + strconv.Itoa(s.ID) }

var (
	zhAdjectives = []string{"安静的", "隐藏的", "惊人的", "缓慢的", "微小的", "被遗忘的", "实用的", "不讲理的", "优雅的", "脆弱的", "便携的", "诚实的"}
	zhNouns      = []string{"编译器", "调度器", "数据库", "缓存", "垃圾回收器", "解析器", "内核", "电子表格", "协议", "灯塔", "自行车", "打字机", "望远镜"}
)

// ZhTitle is the story's title on the GBK pages.
func (s Story) ZhTitle() string {
	return fmt.Sprintf("第%d号：%s%s与%s", s.ID, pick(zhAdjectives, s.ID*5), pick(zhNouns, s.ID*3), pick(zhNouns, s.ID*3+4))
}

// ZhText is the story's body on its GBK page.
func (s Story) ZhText() string {
	return fmt.Sprintf("关于%s的讨论，共%d条评论。", pick(zhNouns, s.ID*3), s.Comments)
}

// Shanghai is the time zone of the GBK pages.
var Shanghai = time.FixedZone("CST", 8*3600)

// APICursor is the cursor /api/stories hands out for page n.
func APICursor(n int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("page:" + strconv.Itoa(n)))
}

func (s *site) addFormats() {
	s.mux.HandleFunc("GET /api/stories", s.apiStories)
	s.mux.HandleFunc("GET /export/stories.csv", s.csvExport)
	s.mux.HandleFunc("GET /export/stories.xml", s.xmlExport)
	s.mux.HandleFunc("GET /feed.rss", s.rssFeed)
	s.mux.HandleFunc("GET /feed.atom", s.atomFeed)
	s.mux.HandleFunc("GET /sitemap.xml", s.sitemapIndex)
	s.mux.HandleFunc("GET /sitemaps/{name}", s.sitemapFile)
	s.mux.HandleFunc("GET /gbk/news", s.gbkFeed)
	s.mux.HandleFunc("GET /gbk/item/{id}", s.gbkStory)
}

func (s *site) stories(from, to int) []Story {
	var out []Story
	for id := max(from, 1); id <= min(to, s.o.Stories()); id++ {
		st, _ := s.o.Story(id)
		out = append(out, st)
	}
	return out
}

func origin(r *http.Request) string { return "http://" + r.Host }

func write(w http.ResponseWriter, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

type apiStory struct {
	ID        int      `json:"id"`
	Title     string   `json:"title"`
	URL       *string  `json:"url"`
	By        string   `json:"by"`
	Score     int      `json:"score"`
	Time      int64    `json:"time"`
	CreatedAt string   `json:"created_at"`
	Comments  int      `json:"comments"`
	Text      *string  `json:"text"`
	Tags      []string `json:"tags"`
}

type apiPage struct {
	Page       int        `json:"page"`
	Pages      int        `json:"pages"`
	PerPage    int        `json:"per_page"`
	Total      int        `json:"total"`
	HasMore    bool       `json:"has_more"`
	NextCursor *string    `json:"next_cursor"`
	Next       *string    `json:"next"`
	Stories    []apiStory `json:"stories"`
}

func (s *site) apiStories(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	per := s.o.PerPage
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			apiError(w, "per_page must be 1 to 100")
			return
		}
		per = n
	}
	page := 1
	switch {
	case q.Has("cursor") && q.Get("cursor") != "":
		raw, err := base64.RawURLEncoding.DecodeString(q.Get("cursor"))
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(raw), "page:"))
		if err != nil || err2 != nil || !strings.HasPrefix(string(raw), "page:") || n < 1 {
			apiError(w, "bad cursor")
			return
		}
		page = n
	case q.Get("page") != "":
		n, err := strconv.Atoi(q.Get("page"))
		if err != nil || n < 1 {
			apiError(w, "page must be a positive number")
			return
		}
		page = n
	}
	total := s.o.Stories()
	pages := (total + per - 1) / per
	out := apiPage{Page: page, Pages: pages, PerPage: per, Total: total, HasMore: page < pages, Stories: []apiStory{}}
	for _, st := range s.stories((page-1)*per+1, page*per) {
		a := apiStory{ID: st.ID, Title: st.Title, By: st.Author, Score: st.Score, Time: st.Time.Unix(),
			CreatedAt: st.Time.UTC().Format(time.RFC3339), Comments: st.Comments, Tags: []string{st.Kind()}}
		if st.URL != "" {
			u := st.URL
			a.URL = &u
		}
		if st.Text != "" {
			t := st.Text
			a.Text = &t
		}
		out.Stories = append(out.Stories, a)
	}
	if out.HasMore {
		c := APICursor(page + 1)
		next := fmt.Sprintf("/api/stories?page=%d&per_page=%d", page+1, per)
		out.NextCursor, out.Next = &c, &next
	}
	body, _ := json.Marshal(out)
	write(w, "application/json", body)
}

func apiError(w http.ResponseWriter, msg string) {
	body, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
}

// CSVTime is the layout of the time column of /export/stories.csv (UTC).
const CSVTime = "2006-01-02 15:04:05"

func (s *site) csvExport(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	buf.WriteString("\uFEFF") // as spreadsheet programs write it
	cw := csv.NewWriter(&buf)
	_ = cw.Write([]string{"id", "title", "url", "author", "score", "time", "comments", "kind", "text"})
	for _, st := range s.stories(1, s.o.Stories()) {
		_ = cw.Write([]string{strconv.Itoa(st.ID), st.Title, st.URL, st.Author, strconv.Itoa(st.Score),
			st.Time.UTC().Format(CSVTime), strconv.Itoa(st.Comments), st.Kind(), st.Text})
	}
	cw.Flush()
	w.Header().Set("Content-Disposition", `attachment; filename="stories.csv"`)
	write(w, "text/csv; charset=utf-8", buf.Bytes())
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func (s *site) xmlExport(w http.ResponseWriter, r *http.Request) {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, "<export xmlns=%q xmlns:s=%q xmlns:dc=%q generated=%q>\n", ExportNS, StoryNS, DCNS, epoch.Format(time.RFC3339))
	for _, st := range s.stories(1, s.o.Stories()) {
		fmt.Fprintf(&b, "  <s:story id=\"%d\" kind=\"%s\">\n", st.ID, st.Kind())
		fmt.Fprintf(&b, "    <dc:title>%s</dc:title>\n", esc(st.Title))
		fmt.Fprintf(&b, "    <dc:creator>%s</dc:creator>\n", esc(st.Author))
		fmt.Fprintf(&b, "    <dc:date>%s</dc:date>\n", st.Time.UTC().Format(time.RFC3339))
		if st.URL != "" {
			fmt.Fprintf(&b, "    <s:link href=\"%s\"/>\n", esc(st.URL))
		}
		fmt.Fprintf(&b, "    <s:score>%d</s:score>\n    <s:comments>%d</s:comments>\n", st.Score, st.Comments)
		if st.Text != "" {
			fmt.Fprintf(&b, "    <s:text><![CDATA[%s]]></s:text>\n", st.Text)
		}
		b.WriteString("  </s:story>\n")
	}
	b.WriteString("</export>\n")
	write(w, "application/xml; charset=utf-8", b.Bytes())
}

// FeedStories is how many stories the feeds carry: the front page's.
func (o Options) FeedStories() int {
	o = o.WithDefaults()
	return min(o.PerPage, o.Stories())
}

func (s *site) rssFeed(w http.ResponseWriter, r *http.Request) {
	host := strings.TrimPrefix(origin(r), "http:")
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, "<rss version=\"2.0\" xmlns:dc=%q>\n<channel>\n<title>Demo News</title>\n<link>%s/news?p=1</link>\n<description>The front page of the demo site</description>\n", DCNS, origin(r))
	for _, st := range s.stories(1, s.o.FeedStories()) {
		desc := st.Text
		if desc == "" {
			desc = st.Title
		}
		// Links are protocol-relative, as some real feeds have them.
		fmt.Fprintf(&b, "<item>\n  <title>%s</title>\n  <link>%s/item/%d</link>\n  <guid isPermaLink=\"false\">%s</guid>\n  <pubDate>%s</pubDate>\n  <dc:creator>%s</dc:creator>\n  <category>%s</category>\n  <description>%s</description>\n</item>\n",
			esc(st.Title), host, st.ID, st.GUID(), st.Time.UTC().Format(time.RFC1123Z), esc(st.Author), st.Kind(), esc(desc))
	}
	b.WriteString("</channel>\n</rss>\n")
	write(w, "application/rss+xml; charset=utf-8", b.Bytes())
}

func (s *site) atomFeed(w http.ResponseWriter, r *http.Request) {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="utf-8"?>` + "\n")
	fmt.Fprintf(&b, "<feed xmlns=\"http://www.w3.org/2005/Atom\">\n<title>Demo News</title>\n<id>tag:demo.trawler.dev,2025:feed</id>\n<updated>%s</updated>\n<link href=\"/news?p=1\"/>\n", epoch.Format(time.RFC3339))
	for _, st := range s.stories(1, s.o.FeedStories()) {
		fmt.Fprintf(&b, "<entry>\n  <title>%s</title>\n  <id>%s</id>\n  <link rel=\"alternate\" href=\"/item/%d\"/>\n  <published>%s</published>\n  <updated>%s</updated>\n  <author><name>%s</name></author>\n  <category term=\"%s\"/>\n",
			esc(st.Title), st.AtomID(), st.ID, st.Time.UTC().Format(time.RFC3339), st.Time.UTC().Format(time.RFC3339), esc(st.Author), st.Kind())
		if st.Text != "" {
			fmt.Fprintf(&b, "  <summary>%s</summary>\n", esc(st.Text))
		}
		b.WriteString("</entry>\n")
	}
	b.WriteString("</feed>\n")
	write(w, "application/atom+xml; charset=utf-8", b.Bytes())
}

// SitemapSplit is the last story id listed in /sitemaps/stories-1.xml; the rest are in
// /sitemaps/stories-2.xml.gz.
func (o Options) SitemapSplit() int { return (o.Stories() + 1) / 2 }

const sitemapNS = "http://www.sitemaps.org/schemas/sitemap/0.9"

func (s *site) sitemapIndex(w http.ResponseWriter, r *http.Request) {
	split := s.o.SitemapSplit()
	first, _ := s.o.Story(1)
	second, ok := s.o.Story(split + 1)
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, "<sitemapindex xmlns=%q>\n", sitemapNS)
	fmt.Fprintf(&b, "  <sitemap><loc>%s/sitemaps/stories-1.xml</loc><lastmod>%s</lastmod></sitemap>\n", origin(r), first.Time.UTC().Format(time.RFC3339))
	if ok {
		fmt.Fprintf(&b, "  <sitemap><loc>%s/sitemaps/stories-2.xml.gz</loc><lastmod>%s</lastmod></sitemap>\n", origin(r), second.Time.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "  <sitemap><loc>%s/sitemaps/pages.xml</loc></sitemap>\n", origin(r))
	b.WriteString("</sitemapindex>\n")
	write(w, "application/xml; charset=utf-8", b.Bytes())
}

func (s *site) sitemapFile(w http.ResponseWriter, r *http.Request) {
	split := s.o.SitemapSplit()
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, "<urlset xmlns=%q>\n", sitemapNS)
	urls := func(from, to int) {
		for _, st := range s.stories(from, to) {
			fmt.Fprintf(&b, "  <url><loc>%s/item/%d</loc><lastmod>%s</lastmod><changefreq>daily</changefreq></url>\n", origin(r), st.ID, st.Time.UTC().Format(time.RFC3339))
		}
	}
	name := r.PathValue("name")
	switch name {
	case "stories-1.xml":
		urls(1, split)
	case "stories-2.xml.gz":
		urls(split+1, s.o.Stories())
	case "pages.xml":
		for p := 1; p <= s.o.Pages; p++ {
			fmt.Fprintf(&b, "  <url><loc>%s/news?p=%d</loc></url>\n", origin(r), p)
		}
	default:
		http.NotFound(w, r)
		return
	}
	b.WriteString("</urlset>\n")
	if strings.HasSuffix(name, ".gz") {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = zw.Write(b.Bytes())
		_ = zw.Close()
		write(w, "application/x-gzip", z.Bytes())
		return
	}
	write(w, "application/xml; charset=utf-8", b.Bytes())
}

// gbk writes a page encoded in GBK; the Content-Type header names no charset, so only the
// page's own <meta> says what it is.
func gbk(w http.ResponseWriter, page string) {
	body, err := simplifiedchinese.GBK.NewEncoder().String(page)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	write(w, "text/html", []byte(body))
}

// ZhTime is how the GBK pages show a story's time (Asia/Shanghai).
const ZhTime = "2006-01-02 15:04:05"

func (s *site) gbkFeed(w http.ResponseWriter, r *http.Request) {
	p, ok := pageParam(r, s.o.Pages)
	if !ok {
		http.NotFound(w, r)
		return
	}
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"zh-CN\">\n<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html; charset=gb2312\">\n<title>演示新闻</title>\n</head>\n<body>\n<ul class=\"stories\">\n")
	for _, st := range s.stories((p-1)*s.o.PerPage+1, p*s.o.PerPage) {
		fmt.Fprintf(&b, "<li class=\"story\" data-id=\"%d\"><a class=\"title\" href=\"item/%d\">%s</a> <span class=\"score\">%d 分</span></li>\n", st.ID, st.ID, esc(st.ZhTitle()), st.Score)
	}
	b.WriteString("</ul>\n")
	if p < s.o.Pages {
		fmt.Fprintf(&b, "<a class=\"next\" href=\"?p=%d\">下一页</a>\n", p+1)
	}
	b.WriteString("</body>\n</html>\n")
	gbk(w, b.String())
}

func (s *site) gbkStory(w http.ResponseWriter, r *http.Request) {
	st, ok := s.storyParam(w, r)
	if !ok {
		return
	}
	page := fmt.Sprintf(`<!DOCTYPE html>
<html lang="zh-CN">
<head><meta charset="gbk"><title>%s</title></head>
<body>
<article class="story" data-id="%d">
<h1>%s</h1>
<p class="meta">作者：<span class="author">%s</span> 发布于 <span class="time">%s</span> 积分：<span class="score">%d</span></p>
<div class="body">%s</div>
</article>
</body>
</html>
`, esc(st.ZhTitle()), st.ID, esc(st.ZhTitle()), esc(st.Author), st.Time.In(Shanghai).Format(ZhTime), st.Score, esc(st.ZhText()))
	gbk(w, page)
}
