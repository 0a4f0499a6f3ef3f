// Package hackernews holds the tasks for the Hacker News Firebase API
// (https://github.com/HackerNews/API): hackernews.feed reads a story list and emits the
// ids, hackernews.item stores one story or comment. Comment trees are crawled by chain
// steps that fan out an item's kids (`each: kids`) into hackernews.item again. The tasks
// are registered in the default registry.
package hackernews

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// DefaultBaseURL is the public API root.
const DefaultBaseURL = "https://hacker-news.firebaseio.com/v0"

// Task names.
const (
	FeedTask = "hackernews.feed"
	ItemTask = "hackernews.item"
)

// Lists are the story lists hackernews.feed accepts.
var Lists = []string{"topstories", "newstories", "beststories"}

func init() {
	crawl.Register(Feed, Item)
}

var baseURLParam = crawl.Param{
	Name:    "base_url",
	Type:    crawl.URL,
	Default: DefaultBaseURL,
	Doc:     "root of the Hacker News API, without a trailing slash",
}

// ItemData is a stored Hacker News item: what the API gives, with fields the item lacks left
// out (a comment has no title, a story without comments no kids).
type ItemData struct {
	ID          int    `json:"id" doc:"item id"`
	Type        string `json:"type,omitempty" doc:"story, comment, job, poll or pollopt"`
	By          string `json:"by,omitempty" doc:"author's user name"`
	Time        int    `json:"time,omitempty" doc:"creation time, Unix seconds"`
	Title       string `json:"title,omitempty" doc:"story, poll or job title"`
	URL         string `json:"url,omitempty" type:"url" doc:"the story's link"`
	Text        string `json:"text,omitempty" doc:"comment, story or poll text (HTML)"`
	Score       *int   `json:"score,omitempty" doc:"story score or poll votes"`
	Descendants *int   `json:"descendants,omitempty" doc:"total comment count of a story or poll"`
	Parent      int    `json:"parent,omitempty" doc:"id of the parent comment or story"`
	Kids        []int  `json:"kids,omitempty" doc:"ids of the item's direct comments, in ranked order"`
}

// The Hacker News tasks.
var (
	// Feed emits story ids from a list; it stores nothing.
	Feed = crawl.JSONTask(FeedTask, feed,
		crawl.Doc("read a Hacker News story list and emit the first ids for hackernews.item (stores nothing)"),
		crawl.WithParams(baseURLParam,
			crawl.Param{Name: "list", Type: crawl.String, Default: "topstories", Doc: "story list: " + strings.Join(Lists, ", ")},
			crawl.Param{Name: "limit", Type: crawl.Int, Default: 30, Doc: "how many ids to emit from the top of the list (0: all of them)"}),
		crawl.Limits(20*time.Second, 3), crawl.Prepare(feedParams), crawl.URLOf(feedURL))
	// Item stores one item, by the id its input carries.
	Item = crawl.JSONTask(ItemTask, item,
		crawl.Doc("fetch one Hacker News item by id (input value) and store it; null, deleted and dead items are skipped"),
		crawl.WithParams(baseURLParam), crawl.Limits(20*time.Second, 3), crawl.URLOf(itemURL))
)

// ItemKey is the key an item is stored under.
func ItemKey(id int64) string { return "hn:item:" + strconv.FormatInt(id, 10) }

// ItemURL is the item's page on the Hacker News site.
func ItemURL(id int64) string {
	return "https://news.ycombinator.com/item?id=" + strconv.FormatInt(id, 10)
}

// feedParams checks the list and limit params once per batch.
func feedParams(p crawl.Params) (any, error) {
	list := strings.TrimSpace(fmt.Sprint(p["list"]))
	if !slices.Contains(Lists, list) {
		return nil, fmt.Errorf("param list: %q is not one of %s", list, strings.Join(Lists, ", "))
	}
	limit, ok := toInt64(p["limit"])
	if !ok || limit < 0 {
		return nil, fmt.Errorf("param limit: want a whole number (0: all), got %v", p["limit"])
	}
	return int(limit), nil
}

func feedURL(p crawl.Params, _ crawl.Input) (string, error) {
	base, err := baseURL(p)
	return base + "/" + strings.TrimSpace(fmt.Sprint(p["list"])) + ".json", err
}

func feed(p *crawl.Page, _ *crawl.Out[struct{}]) error {
	var ids []json.Number
	if err := p.Decode(&ids); err != nil {
		return err
	}
	if limit := p.Prepared.(int); limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	for i, n := range ids {
		id, err := n.Int64()
		if err != nil || id <= 0 {
			p.Fail("element %d (%s) is not an item id", i, n)
			return nil
		}
		p.Emit(crawl.Input{Value: id}, "")
	}
	return nil
}

func itemURL(p crawl.Params, in crawl.Input) (string, error) {
	base, err := baseURL(p)
	if err != nil {
		return "", err
	}
	id, ok := toInt64(in.Value)
	if !ok || id <= 0 {
		return "", fmt.Errorf("input value %s is not an item id", describe(in.Value))
	}
	return fmt.Sprintf("%s/item/%d.json", base, id), nil
}

func item(p *crawl.Page, out *crawl.Out[ItemData]) error {
	if p.Null() {
		out.Skip(1) // no such item
		return nil
	}
	var v struct {
		ItemData
		Deleted, Dead bool
	}
	if err := p.Decode(&v); err != nil {
		return err
	}
	id, _ := toInt64(p.Input.Value)
	switch {
	case v.Deleted || v.Dead:
		out.Skip(1)
		return nil
	case v.ID != 0 && int64(v.ID) != id:
		p.Fail("answered item %d instead", v.ID)
		return nil
	case slices.ContainsFunc(v.Kids, func(k int) bool { return k <= 0 }):
		p.Fail("field kids: want a list of ids, got %v", v.Kids)
		return nil
	}
	v.ID = int(id)
	out.ItemAt(ItemKey(id), ItemURL(id), &v.ItemData)
	return nil
}

// toInt64 accepts the forms an id takes on its way here: Go ints, float64 after a JSON
// round trip, json.Number, and numeric strings.
func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), true
		}
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		return i, err == nil
	}
	return 0, false
}

func describe(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	if v == nil {
		return "nothing"
	}
	return fmt.Sprintf("%v (%T)", v, v)
}

// baseURL is the base_url param, checked: an absolute http(s) URL, without a trailing slash.
func baseURL(p crawl.Params) (string, error) {
	raw := strings.TrimRight(strings.TrimSpace(fmt.Sprint(p["base_url"])), "/")
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("param base_url: want an absolute http(s) URL, got %q", raw)
	}
	return raw, nil
}
