// Package demo holds the tasks for the bundled demo site (internal/devstack/demosite): a
// paging feed (demo.feed) that hands story links to demo.story, which stores each story
// and hands its first comments page to demo.comments, which stores the comments and pages
// through the rest. The tasks are registered in the default registry.
package demo

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/PuerkitoBio/goquery"

	"trawler/crawl"
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

var feedSpec = crawl.TaskSpec{
	Name: FeedTask,
	Doc:  "walk the demo site's news feed pages and emit every story link (stores nothing)",
	Params: []crawl.Param{
		baseURLParam,
		{Name: "pages", Type: crawl.Int, Default: 3, Doc: "how many feed pages to follow, starting at page 1"},
	},
	Timeout: 20 * time.Second,
	Retries: 3,
}

var storySpec = crawl.TaskSpec{
	Name: StoryTask,
	Doc:  "fetch a demo story page, store the story and emit its first comments page",
	Params: []crawl.Param{
		withDoc(baseURLParam, "root URL of the demo site, used when the input carries a story id (Value) instead of a URL"),
	},
	Output: []crawl.Field{
		{Name: "id", Type: crawl.Int, Doc: "story id"},
		{Name: "title", Type: crawl.String, Doc: "story title"},
		{Name: "url", Type: crawl.URL, Doc: "external link; empty for Ask stories"},
		{Name: "author", Type: crawl.String, Doc: "submitter's user name"},
		{Name: "score", Type: crawl.Int, Doc: "points"},
		{Name: "time", Type: crawl.Time, Doc: "submission time, RFC 3339"},
		{Name: "comments", Type: crawl.Int, Doc: "number of comments"},
		{Name: "text", Type: crawl.String, Doc: "story text; empty for link stories"},
	},
	Timeout: 20 * time.Second,
	Retries: 3,
}

var commentsSpec = crawl.TaskSpec{
	Name: CommentsTask,
	Doc:  "fetch a demo comments page, store its comments and emit the next comments page",
	Params: []crawl.Param{
		withDoc(baseURLParam, "root URL of the demo site, used when the input carries a story id (Value) instead of a URL"),
	},
	Output: []crawl.Field{
		{Name: "id", Type: crawl.Int, Doc: "comment id"},
		{Name: "story", Type: crawl.Int, Doc: "id of the story the comment belongs to"},
		{Name: "author", Type: crawl.String, Doc: "commenter's user name"},
		{Name: "text", Type: crawl.String, Doc: "comment text"},
	},
	Timeout: 20 * time.Second,
	Retries: 3,
}

// The demo tasks.
var (
	Feed     = crawl.TaskFunc(feedSpec, runFeed)         // walks the feed pages
	Story    = crawl.TaskFunc(storySpec, runStory)       // stores one story
	Comments = crawl.TaskFunc(commentsSpec, runComments) // stores one comments page
)

func withDoc(p crawl.Param, doc string) crawl.Param {
	p.Doc = doc
	return p
}

// StoryKey is the key a story is stored under.
func StoryKey(id int) string { return "demo:story:" + strconv.Itoa(id) }

// CommentKey is the key a comment is stored under.
func CommentKey(id int) string { return "demo:comment:" + strconv.Itoa(id) }

func runFeed(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	spec := feedSpec
	pages, err := intParam(env, spec, "pages")
	if err != nil {
		return crawl.Result{}, err
	}
	if pages < 1 {
		return crawl.Result{}, crawl.Permanentf("%s: param pages must be at least 1, got %d", FeedTask, pages)
	}
	page, u := 1, in.URL
	if u == "" {
		base, err := baseURL(env, spec)
		if err != nil {
			return crawl.Result{}, err
		}
		u = base + "/news?p=1"
	} else if n, ok := varInt(in, "page"); ok {
		page = n
	} else if pu, err := url.Parse(u); err == nil {
		if n, err := strconv.Atoi(pu.Query().Get("p")); err == nil {
			page = n
		}
	}

	doc, _, err := getHTML(ctx, env, u)
	if err != nil {
		return crawl.Result{}, err
	}
	if doc.Find("table.itemlist").Length() == 0 {
		return crawl.Result{}, crawl.Permanentf("%s: %s: not a feed page (no table.itemlist)", FeedTask, u)
	}
	var res crawl.Result
	var rowErr error
	doc.Find("tr.athing").EachWithBreak(func(i int, row *goquery.Selection) bool {
		link := row.Find("span.titleline > a").First()
		if link.Length() == 0 {
			link = row.Find("td.title a").First()
		}
		href, ok := link.Attr("href")
		if !ok || strings.TrimSpace(href) == "" {
			rowErr = crawl.Permanentf("%s: %s: story row %d (id %q) has no title link", FeedTask, u, i+1, row.AttrOr("id", ""))
			return false
		}
		abs, err := resolve(doc, href)
		if err != nil {
			rowErr = crawl.Permanentf("%s: %s: story row %d: bad link %q: %v", FeedTask, u, i+1, href, err)
			return false
		}
		res.Next = append(res.Next, crawl.Input{URL: abs, Task: StoryTask})
		return true
	})
	if rowErr != nil {
		return crawl.Result{}, rowErr
	}
	if page < pages {
		if href, ok := doc.Find("a.morelink").First().Attr("href"); ok {
			abs, err := resolve(doc, href)
			if err != nil {
				return crawl.Result{}, crawl.Permanentf("%s: %s: bad More link %q: %v", FeedTask, u, href, err)
			}
			res.Next = append(res.Next, crawl.Input{URL: abs, Task: FeedTask, Vars: map[string]any{"page": page + 1}})
		}
	}
	return res, nil
}

var (
	storyPath    = regexp.MustCompile(`/item/(\d+)/?$`)
	commentsPath = regexp.MustCompile(`/item/(\d+)/comments/?$`)
)

// inputURL returns the page URL of an input that carries either a URL or an id in Value,
// and the id.
func inputURL(env *crawl.Env, spec crawl.TaskSpec, in crawl.Input, path *regexp.Regexp, build func(base string, id int) string) (string, int, error) {
	if in.URL != "" {
		pu, err := url.Parse(in.URL)
		if err != nil {
			return "", 0, crawl.Permanentf("%s: bad input URL %q: %v", spec.Name, in.URL, err)
		}
		m := path.FindStringSubmatch(pu.Path)
		if m == nil {
			return "", 0, crawl.Permanentf("%s: input URL %q does not look like %s", spec.Name, in.URL, path)
		}
		id, _ := strconv.Atoi(m[1])
		return in.URL, id, nil
	}
	id, ok := valueInt(in.Value)
	if !ok {
		return "", 0, crawl.Permanentf("%s: input has neither a URL nor a numeric id (got %s)", spec.Name, in.Describe())
	}
	base, err := baseURL(env, spec)
	if err != nil {
		return "", 0, err
	}
	return build(base, id), id, nil
}

func valueInt(v any) (int, bool) {
	n, ok := crawl.AsInt(v)
	return n, ok && n > 0
}

func runStory(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	u, id, err := inputURL(env, storySpec, in, storyPath, func(base string, id int) string {
		return fmt.Sprintf("%s/item/%d", base, id)
	})
	if err != nil {
		return crawl.Result{}, err
	}
	doc, _, err := getHTML(ctx, env, u)
	if err != nil {
		return crawl.Result{}, err
	}
	art := doc.Find("article.story").First()
	item, comments, err := ParseStory(art, u, id)
	if err != nil {
		return crawl.Result{}, err
	}
	key := item.Key
	res := crawl.Result{Items: []crawl.Item{item}}
	if comments > 0 {
		next := ""
		if href, ok := art.Find("a.comments-link").First().Attr("href"); ok {
			if next, err = resolve(doc, href); err != nil {
				return crawl.Result{}, crawl.Permanentf("%s: %s: bad comments link %q: %v", StoryTask, u, href, err)
			}
		} else if next, err = resolve(doc, fmt.Sprintf("/item/%d/comments?p=1", id)); err != nil {
			return crawl.Result{}, crawl.Permanent(err)
		}
		res.Next = append(res.Next, crawl.Input{
			URL:    next,
			Task:   CommentsTask,
			Parent: key,
			Vars:   map[string]any{"story": id, "page": 1},
		})
	}
	return res, nil
}

// ParseStory reads a story's fields from its page's article element; it also returns
// the comment count, which decides whether comment pages follow. A missing field is a
// permanent error naming it and the page.
func ParseStory(art *goquery.Selection, u string, id int) (crawl.Item, int, error) {
	missing := func(field string) error {
		return crawl.Permanentf("%s: %s: missing required field %s", StoryTask, u, field)
	}
	title := strings.TrimSpace(art.Find("h1.title").First().Text())
	if title == "" {
		return crawl.Item{}, 0, missing("title")
	}
	author := strings.TrimSpace(art.Find(".meta .author").First().Text())
	if author == "" {
		return crawl.Item{}, 0, missing("author")
	}
	score, ok := leadingInt(art.Find(".meta .score").First().Text())
	if !ok {
		return crawl.Item{}, 0, missing("score")
	}
	stamp, ok := art.Find("time[datetime]").First().Attr("datetime")
	if !ok {
		return crawl.Item{}, 0, missing("time")
	}
	at, err := time.Parse(time.RFC3339, strings.TrimSpace(stamp))
	if err != nil {
		return crawl.Item{}, 0, crawl.Permanentf("%s: %s: field time: %v", StoryTask, u, err)
	}
	commentsSel := art.Find(".meta .comments").First()
	if commentsSel.Length() == 0 {
		return crawl.Item{}, 0, missing("comments")
	}
	comments, ok := leadingInt(commentsSel.Text())
	if !ok {
		comments = 0 // "discuss": no comments yet
	}
	link, _ := art.Find("a.url").First().Attr("href")
	return crawl.Item{
		Key: StoryKey(id),
		URL: u,
		Data: map[string]any{
			"id":       id,
			"title":    title,
			"url":      strings.TrimSpace(link),
			"author":   author,
			"score":    score,
			"time":     at.UTC().Format(time.RFC3339),
			"comments": comments,
			"text":     strings.TrimSpace(art.Find("div.text").First().Text()),
		},
	}, comments, nil
}

func runComments(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	u, story, err := inputURL(env, commentsSpec, in, commentsPath, func(base string, id int) string {
		return fmt.Sprintf("%s/item/%d/comments?p=1", base, id)
	})
	if err != nil {
		return crawl.Result{}, err
	}
	doc, _, err := getHTML(ctx, env, u)
	if err != nil {
		return crawl.Result{}, err
	}
	list := doc.Find("div.comments").First()
	if list.Length() == 0 {
		return crawl.Result{}, crawl.Permanentf("%s: %s: not a comments page (no div.comments)", CommentsTask, u)
	}
	parent := in.Parent
	if parent == "" {
		parent = StoryKey(story)
	}
	var res crawl.Result
	var cerr error
	list.Find("div.comment").EachWithBreak(func(i int, c *goquery.Selection) bool {
		cid, ok := valueInt(c.AttrOr("data-id", ""))
		if !ok {
			cerr = crawl.Permanentf("%s: %s: comment %d: missing required field id", CommentsTask, u, i+1)
			return false
		}
		sid := story
		if v, ok := c.Attr("data-story"); ok {
			if sid, ok = valueInt(v); !ok {
				cerr = crawl.Permanentf("%s: %s: comment %d: bad story id %q", CommentsTask, u, cid, v)
				return false
			}
		}
		author := strings.TrimSpace(c.Find(".author").First().Text())
		if author == "" {
			cerr = crawl.Permanentf("%s: %s: comment %d: missing required field author", CommentsTask, u, cid)
			return false
		}
		res.Items = append(res.Items, crawl.Item{
			Key: CommentKey(cid),
			URL: u + "#c" + strconv.Itoa(cid),
			Data: map[string]any{
				"id":     cid,
				"story":  sid,
				"author": author,
				"text":   strings.TrimSpace(c.Find("div.text").First().Text()),
			},
		})
		return true
	})
	if cerr != nil {
		return crawl.Result{}, cerr
	}
	if href, ok := doc.Find("a.morelink").First().Attr("href"); ok {
		next, err := resolve(doc, href)
		if err != nil {
			return crawl.Result{}, crawl.Permanentf("%s: %s: bad next-page link %q: %v", CommentsTask, u, href, err)
		}
		page, ok := varInt(in, "page")
		if !ok {
			page = 1
			if pu, err := url.Parse(u); err == nil {
				if n, err := strconv.Atoi(pu.Query().Get("p")); err == nil {
					page = n
				}
			}
		}
		res.Next = append(res.Next, crawl.Input{
			URL:    next,
			Task:   CommentsTask,
			Parent: parent,
			Vars:   map[string]any{"story": story, "page": page + 1},
		})
	}
	return res, nil
}
