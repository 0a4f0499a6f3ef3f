package generic

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/mmcdole/gofeed"
	"github.com/tidwall/gjson"
	"golang.org/x/net/html"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch/charset"
)

// feedFields are what an entry of any feed format becomes, and what generic.feed stores
// when `fields` is not set.
var feedFields = []crawl.Field{
	{Name: "title", Type: crawl.String, Doc: "entry title"},
	{Name: "link", Type: crawl.URL, Doc: "entry link, absolute"},
	{Name: "guid", Type: crawl.String, Doc: "RSS guid, Atom id or JSON Feed id"},
	{Name: "published", Type: crawl.Time, Doc: "publication time, RFC 3339 in UTC (pubDate, published, date_published)"},
	{Name: "updated", Type: crawl.Time, Doc: "last update, RFC 3339 in UTC"},
	{Name: "author", Type: crawl.String, Doc: "first author's name (author, dc:creator)"},
	{Name: "description", Type: crawl.String, Doc: "RSS description, Atom summary, JSON Feed summary"},
	{Name: "content", Type: crawl.String, Doc: "full content (content:encoded, Atom content, content_html)"},
	{Name: "categories", Type: crawl.List, Doc: "categories or tags"},
}

// Besides feedFields, `fields` paths may read these.
var feedExtraFields = []crawl.Field{
	{Name: "authors", Type: crawl.List, Doc: "every author's name"},
	{Name: "links", Type: crawl.List, Doc: "every link of the entry, absolute"},
	{Name: "image", Type: crawl.URL, Doc: "the entry's image"},
	{Name: "enclosures", Type: crawl.List, Doc: "enclosures: objects with url, type, length"},
	{Name: "feed_title", Type: crawl.String, Doc: "the feed's title"},
	{Name: "feed_link", Type: crawl.URL, Doc: "the feed's home page"},
}

var feedSpec = crawl.TaskSpec{
	Name:  FeedTask,
	Doc:   "an RSS 0.9x/1.0/2.0, Atom or JSON Feed: an item per entry (title, link, guid, published, author, description, content, categories…), keyed by guid or link",
	Seeds: seedInputs,
	Params: []crawl.Param{
		urlsParam,
		baseURLParam,
		fieldsParam("field name → field spec, a gjson path over the entry's normalized fields (title, link, guid, published, updated, author, authors, description, content, categories, image, enclosures, feed_title, feed_link); omitted: title, link, guid, published, updated, author, description, content, categories", false),
		keyParam,
		detailParam,
		detailTaskParam(""),
		headersParam,
	},
	Output:  append(append([]crawl.Field{}, feedFields...), feedExtraFields...),
	Timeout: 30 * time.Second,
	Retries: 3,
	Check:   checker(buildFeed),
	Schema:  fieldsSchema(feedFields),
}

// Feed is the generic.feed task.
var Feed = configTask(feedSpec, buildFeed, runFeed)

type feedConfig struct {
	common
	itemRules
}

func buildFeed(p crawl.Params) (*feedConfig, []error) {
	c := &feedConfig{}
	var errs, e []error
	c.common, errs = parseCommon(FeedTask, p)
	c.itemRules, e = parseItemRules(FeedTask, p, srcJSON, nil, "")
	errs = append(errs, e...)
	return c, errs
}

func runFeed(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	return runPages(env, in, FeedTask, buildFeed, func(c *feedConfig, u string, start bool) (crawl.Result, error) {
		return c.page(ctx, env, u)
	})
}

func (c *feedConfig) page(ctx context.Context, env *crawl.Env, u string) (crawl.Result, error) {
	resp, err := c.fetch(ctx, env, u)
	if err != nil {
		return crawl.Result{}, err
	}
	// RSS and Atom are decoded to UTF-8 here, as the parsers do not always honour the
	// declared encoding; a JSON feed as text (byte-order mark, Content-Type charset).
	decode := charset.XML
	if t := bytes.TrimLeft(resp.Body, " \t\r\n\xef\xbb\xbf"); len(t) > 0 && t[0] == '{' {
		decode = charset.Text
	}
	body, err := decode(resp.Body, resp.Header.Get("Content-Type"), nil)
	if err != nil {
		return crawl.Result{}, crawl.Permanentf("%s: %s: %v", FeedTask, u, err)
	}
	feed, err := gofeed.NewParser().Parse(bytes.NewReader(body))
	if err != nil {
		return crawl.Result{}, crawl.Permanentf("%s: %s: not an RSS, Atom or JSON feed: %v", FeedTask, u, err)
	}
	base := finalURL(resp, u)
	col := newCollector(c.itemRules, env, u, base)
	for _, it := range feed.Items {
		if it == nil {
			continue
		}
		entry := normalizeEntry(feed, it, base)
		var j gjson.Result
		get := func(f *fieldSpec) ([]raw, string) {
			if !j.Exists() {
				b, _ := json.Marshal(entry)
				j = gjson.ParseBytes(b)
			}
			return f.fromJSON(j)
		}
		natural := str(entry["guid"])
		if natural == "" {
			natural = str(entry["link"])
		}
		if len(c.fields) > 0 {
			if err := col.add(get, natural); err != nil {
				return crawl.Result{}, err
			}
			continue
		}
		col.n++
		data := make(map[string]any, len(feedFields))
		for _, f := range feedFields {
			data[f.Name] = entry[f.Name]
		}
		if err := col.addData(data, get, natural); err != nil {
			return crawl.Result{}, err
		}
	}
	return col.res, nil
}

// normalizeEntry maps a feed entry of any format to one set of fields; absent values are
// nil (lists are empty).
func normalizeEntry(feed *gofeed.Feed, it *gofeed.Item, base *url.URL) map[string]any {
	text := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	// Titles are plain text, but feeds write them as HTML too (Atom type="html", RSS
	// titles with escaped markup): keep the text, without tags or entities.
	plain := func(s string) any {
		if strings.ContainsAny(s, "<&") {
			if n, err := html.Parse(strings.NewReader(s)); err == nil {
				s = strings.Join(strings.Fields(crawl.NodeText(n)), " ")
			}
		}
		return text(s)
	}
	link := func(s string) any {
		if s == "" {
			return nil
		}
		if l, ok := resolveLink(base, s); ok {
			return l
		}
		return nil
	}
	when := func(parsed *time.Time, raw string) any {
		if parsed != nil && !parsed.IsZero() {
			return parsed.UTC().Format(time.RFC3339Nano)
		}
		return text(raw)
	}
	authors := []any{}
	for _, a := range it.Authors {
		if a != nil && a.Name != "" {
			authors = append(authors, a.Name)
		} else if a != nil && a.Email != "" {
			authors = append(authors, a.Email)
		}
	}
	if len(authors) == 0 && it.Author != nil && it.Author.Name != "" {
		authors = append(authors, it.Author.Name)
	}
	if len(authors) == 0 && it.DublinCoreExt != nil {
		for _, c := range it.DublinCoreExt.Creator {
			authors = append(authors, c)
		}
	}
	var author any
	if len(authors) > 0 {
		author = authors[0]
	}
	categories := []any{}
	for _, c := range it.Categories {
		if c != "" {
			categories = append(categories, c)
		}
	}
	links := []any{}
	for _, l := range it.Links {
		if v := link(l); v != nil {
			links = append(links, v)
		}
	}
	var image any
	if it.Image != nil {
		image = link(it.Image.URL)
	}
	enclosures := []any{}
	for _, e := range it.Enclosures {
		if e != nil && e.URL != "" {
			enclosures = append(enclosures, map[string]any{"url": link(e.URL), "type": e.Type, "length": e.Length})
		}
	}
	mainLink := link(it.Link)
	if mainLink == nil && len(links) > 0 {
		mainLink = links[0]
	}
	return map[string]any{
		"title":       plain(it.Title),
		"link":        mainLink,
		"links":       links,
		"guid":        text(it.GUID),
		"published":   when(it.PublishedParsed, it.Published),
		"updated":     when(it.UpdatedParsed, it.Updated),
		"author":      author,
		"authors":     authors,
		"description": text(it.Description),
		"content":     text(it.Content),
		"categories":  categories,
		"image":       image,
		"enclosures":  enclosures,
		"feed_title":  plain(feed.Title),
		"feed_link":   link(feed.Link),
	}
}
