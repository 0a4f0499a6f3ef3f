// Package demo holds the tasks for the bundled demo site (internal/devstack/demosite): a
// paging feed (demo.feed) that hands story links to demo.story, which stores each story
// and hands its first comments page to demo.comments, which stores the comments and pages
// through the rest. The tasks are registered in the default registry.
package demo

import (
	"cmp"

	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/trawlerhq/trawler/crawl"
)

// DefaultBaseURL is where `trawler` serves the demo site unless told otherwise.
const DefaultBaseURL = "http://127.0.0.1:8089"

// Task names.
const (
	FeedTask     = "demo.feed"
	StoryTask    = "demo.story"
	CommentsTask = "demo.comments"
)

func init() {
	crawl.Register(Feed, Story, Comments)
}

var baseURLParam = crawl.Param{
	Name:    "base_url",
	Type:    crawl.URL,
	Default: DefaultBaseURL,
	Doc:     "root URL of the demo site, without a trailing slash",
}

// The demo tasks, written on the task SDK (crawl.HTMLTask): each is one function over a
// fetched, parsed page.
var (
	Feed     = crawl.HTMLTask(FeedTask, feed, crawl.Doc("walk the demo site's news feed pages and emit every story link (stores nothing)"), crawl.Limits(20*time.Second, 3), crawl.WithParams(baseURLParam, pagesParam), crawl.Prepare(feedPages), crawl.URLOf(feedURL))
	Story    = crawl.HTMLTask(StoryTask, story, crawl.Doc("fetch a demo story page, store the story and emit its first comments page"), crawl.Limits(20*time.Second, 3), crawl.WithParams(byIDParam), crawl.URLOf(byID("/item/%d")))
	Comments = crawl.HTMLTask(CommentsTask, comments, crawl.Doc("fetch a demo comments page, store its comments and emit the next comments page"), crawl.Limits(20*time.Second, 3), crawl.WithParams(byIDParam), crawl.URLOf(byID("/item/%d/comments?p=1")))
)

var (
	pagesParam = crawl.Param{Name: "pages", Type: crawl.Int, Default: 3, Doc: "how many feed pages to follow, starting at page 1"}
	byIDParam  = withDoc(baseURLParam, "root URL of the demo site, used when the input carries a story id (Value) instead of a URL")
)

func withDoc(p crawl.Param, doc string) crawl.Param {
	p.Doc = doc
	return p
}

// StoryKey is the key a story is stored under.
func StoryKey(id int) string { return "demo:story:" + strconv.Itoa(id) }

// CommentKey is the key a comment is stored under.
func CommentKey(id int) string { return "demo:comment:" + strconv.Itoa(id) }

// feedPages checks the pages param once per batch.
func feedPages(p crawl.Params) (any, error) {
	n, ok := crawl.AsInt(p["pages"])
	if !ok || n < 1 {
		return nil, fmt.Errorf("param pages must be a whole number of at least 1, got %v", p["pages"])
	}
	return n, nil
}

// feedURL is the first feed page, for the empty input a chain starts with.
func feedURL(p crawl.Params, in crawl.Input) (string, error) {
	if in.Value != nil {
		return "", fmt.Errorf("input %s: the feed starts from its first page or a feed page URL", in.Describe())
	}
	base, err := baseOf(p)
	return base + "/news?p=1", err
}

// byID builds a page URL from a story id handed over as the input's Value.
func byID(path string) func(crawl.Params, crawl.Input) (string, error) {
	return func(p crawl.Params, in crawl.Input) (string, error) {
		id, ok := crawl.AsInt(in.Value)
		if s, isStr := in.Value.(string); isStr {
			n, err := strconv.Atoi(s)
			id, ok = n, err == nil
		}
		if !ok || id <= 0 {
			return "", fmt.Errorf("input has neither a URL nor a numeric id (got %s)", in.Describe())
		}
		base, err := baseOf(p)
		return base + fmt.Sprintf(path, id), err
	}
}

// baseOf is the base_url param without a trailing slash, checked.
func baseOf(p crawl.Params) (string, error) {
	raw := strings.TrimRight(fmt.Sprint(cmp.Or(p["base_url"], any(DefaultBaseURL))), "/")
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("param base_url: want an absolute http(s) URL, got %q", raw)
	}
	return raw, nil
}

func feed(p *crawl.Page, _ *crawl.Out[struct{}]) error {
	if p.Doc.Find("table.itemlist").Length() == 0 {
		p.Fail("not a feed page (no table.itemlist)")
		return nil
	}
	p.Doc.Find("tr.athing").EachWithBreak(func(i int, row *goquery.Selection) bool {
		link := row.Find("span.titleline > a, td.title a").First()
		if !p.FollowEl(link, StoryTask) {
			p.Fail("story row %d (id %q) has no title link", i+1, row.AttrOr("id", ""))
			return false
		}
		return true
	})
	page := 1
	if n, ok := crawl.AsInt(p.Input.Vars["page"]); ok {
		page = n
	} else if n, err := strconv.Atoi(p.Var("p")); err == nil {
		page = n
	}
	if pages, _ := p.Prepared.(int); page < pages {
		p.Follow("a.morelink", FeedTask, map[string]any{"page": page + 1})
	}
	return nil
}

// storyPage is what a story page holds; ParseStory and the story task read it.
type storyPage struct {
	ID       int       `json:"id" doc:"story id"`
	Title    string    `json:"title" css:"h1.title" required:"true" doc:"story title"`
	URL      string    `json:"url" css:"a.url" attr:"href" doc:"external link; empty for Ask stories"`
	Author   string    `json:"author" css:".meta .author" required:"true" doc:"submitter's user name"`
	Score    int       `json:"score" css:".meta .score" regex:"^(\\d+)" required:"true" doc:"points"`
	Time     time.Time `json:"time" css:"time[datetime]" attr:"datetime" required:"true" doc:"submission time, RFC 3339"`
	Comments int       `json:"comments" css:".meta .comments" regex:"^(\\d+)" doc:"number of comments (0 for \"discuss\")"`
	Text     string    `json:"text" css:"div.text" doc:"story text; empty for link stories"`
}

var storyPath = regexp.MustCompile(`/item/(\d+)/?$`)

func story(p *crawl.Page, out *crawl.Out[storyPage]) error {
	id, ok := pathID(p, storyPath)
	if !ok {
		return nil
	}
	art := p.Doc.Find("article.story").First()
	s := out.ScanIn(art)
	if s == nil {
		return nil
	}
	if art.Find(".meta .comments").Length() == 0 {
		p.Fail("missing required field comments")
		return nil
	}
	s.ID = id
	out.Item(StoryKey(id), s)
	if s.Comments > 0 {
		next := p.Abs(art.Find("a.comments-link").First().AttrOr("href", fmt.Sprintf("/item/%d/comments?p=1", id)))
		p.Emit(crawl.Input{URL: next, Parent: StoryKey(id), Vars: map[string]any{"story": id, "page": 1}}, CommentsTask)
	}
	return nil
}

// ParseStory reads a story's fields from its page's article element; it also returns
// the comment count, which decides whether comment pages follow. A missing field is a
// permanent error naming it and the page. (The Colly side of `trawler bench` uses it.)
func ParseStory(art *goquery.Selection, u string, id int) (crawl.Item, int, error) {
	var s storyPage
	base, _ := url.Parse(u)
	if err := crawl.Scan(art, base, &s); err != nil {
		return crawl.Item{}, 0, crawl.Permanentf("%s: %s: %v", StoryTask, u, err)
	}
	s.ID = id
	return crawl.Item{Key: StoryKey(id), URL: u, Data: crawl.DataOf(&s)}, s.Comments, nil
}

type comment struct {
	ID     int    `json:"id" doc:"comment id"`
	Story  int    `json:"story" doc:"id of the story the comment belongs to"`
	Author string `json:"author" css:".author" required:"true" doc:"commenter's user name"`
	Text   string `json:"text" css:"div.text" doc:"comment text"`
}

var commentsPath = regexp.MustCompile(`/item/(\d+)/comments/?$`)

func comments(p *crawl.Page, out *crawl.Out[comment]) error {
	story, ok := pathID(p, commentsPath)
	if !ok {
		return nil
	}
	list := p.Doc.Find("div.comments").First()
	if list.Length() == 0 {
		p.Fail("not a comments page (no div.comments)")
		return nil
	}
	list.Find("div.comment").EachWithBreak(func(i int, e *goquery.Selection) bool {
		id, err := strconv.Atoi(e.AttrOr("data-id", ""))
		if err != nil || id <= 0 {
			p.Fail("comment %d: missing required field id", i+1)
			return false
		}
		c := out.ScanIn(e)
		if c == nil {
			return false
		}
		c.ID, c.Story = id, story
		if v, ok := e.Attr("data-story"); ok {
			if c.Story, err = strconv.Atoi(v); err != nil || c.Story <= 0 {
				p.Fail("comment %d: bad story id %q", id, v)
				return false
			}
		}
		out.ItemAt(CommentKey(id), p.URL+"#c"+strconv.Itoa(id), c)
		return true
	})
	page := 1
	if n, ok := crawl.AsInt(p.Input.Vars["page"]); ok {
		page = n
	} else if n, err := strconv.Atoi(p.Var("p")); err == nil {
		page = n
	}
	parent := cmp.Or(p.Input.Parent, StoryKey(story))
	if href, ok := p.Doc.Find("a.morelink").First().Attr("href"); ok {
		p.Emit(crawl.Input{URL: p.Abs(href), Parent: parent, Vars: map[string]any{"story": story, "page": page + 1}}, CommentsTask)
	}
	return nil
}

// pathID reads the story id from the page's URL path, failing the page when the URL is
// not one the task serves.
func pathID(p *crawl.Page, path *regexp.Regexp) (int, bool) {
	u, err := url.Parse(p.Input.URL)
	if p.Input.URL == "" || err != nil {
		u, err = url.Parse(p.URL)
	}
	if err == nil {
		if m := path.FindStringSubmatch(u.Path); m != nil {
			id, _ := strconv.Atoi(m[1])
			return id, true
		}
	}
	p.Fail("input URL %q does not look like %s", p.URL, path)
	return 0, false
}
