// Package hackernews holds the tasks for the Hacker News Firebase API
// (https://github.com/HackerNews/API): hackernews.feed reads a story list and emits the
// ids, hackernews.item stores one story or comment. Comment trees are crawled by chain
// steps that fan out an item's kids (`each: kids`) into hackernews.item again. The tasks
// are registered in the default registry.
package hackernews

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"trawler/crawl"
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

var feedSpec = crawl.TaskSpec{
	Name: FeedTask,
	Doc:  "read a Hacker News story list and emit the first ids for hackernews.item (stores nothing)",
	Params: []crawl.Param{
		baseURLParam,
		{Name: "list", Type: crawl.String, Default: "topstories", Doc: "story list: " + strings.Join(Lists, ", ")},
		{Name: "limit", Type: crawl.Int, Default: 30, Doc: "how many ids to emit from the top of the list (0: all of them)"},
	},
	Timeout: 20 * time.Second,
	Retries: 3,
}

var itemSpec = crawl.TaskSpec{
	Name:   ItemTask,
	Doc:    "fetch one Hacker News item by id (input value) and store it; null, deleted and dead items are skipped",
	Params: []crawl.Param{baseURLParam},
	Output: []crawl.Field{
		{Name: "id", Type: crawl.Int, Doc: "item id"},
		{Name: "type", Type: crawl.String, Doc: "story, comment, job, poll or pollopt"},
		{Name: "by", Type: crawl.String, Doc: "author's user name"},
		{Name: "time", Type: crawl.Int, Doc: "creation time, Unix seconds"},
		{Name: "title", Type: crawl.String, Doc: "story, poll or job title"},
		{Name: "url", Type: crawl.URL, Doc: "the story's link"},
		{Name: "text", Type: crawl.String, Doc: "comment, story or poll text (HTML)"},
		{Name: "score", Type: crawl.Int, Doc: "story score or poll votes"},
		{Name: "descendants", Type: crawl.Int, Doc: "total comment count of a story or poll"},
		{Name: "parent", Type: crawl.Int, Doc: "id of the parent comment or story"},
		{Name: "kids", Type: crawl.List, Doc: "ids of the item's direct comments, in ranked order"},
	},
	Timeout: 20 * time.Second,
	Retries: 3,
}

// The Hacker News tasks.
var (
	Feed = crawl.TaskFunc(feedSpec, runFeed) // emits story ids from a list
	Item = crawl.TaskFunc(itemSpec, runItem) // stores one item
)

// ItemKey is the key an item is stored under.
func ItemKey(id int64) string { return "hn:item:" + strconv.FormatInt(id, 10) }

// ItemURL is the item's page on the Hacker News site.
func ItemURL(id int64) string {
	return "https://news.ycombinator.com/item?id=" + strconv.FormatInt(id, 10)
}

func runFeed(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	base, err := baseURL(env, feedSpec)
	if err != nil {
		return crawl.Result{}, err
	}
	list := strings.TrimSpace(fmt.Sprint(param(env, feedSpec, "list")))
	if !slices.Contains(Lists, list) {
		return crawl.Result{}, crawl.Permanentf("%s: param list: %q is not one of %s", FeedTask, list, strings.Join(Lists, ", "))
	}
	limit, ok := toInt64(param(env, feedSpec, "limit"))
	if !ok {
		return crawl.Result{}, crawl.Permanentf("%s: param limit: want an integer, got %v", FeedTask, param(env, feedSpec, "limit"))
	}

	u := base + "/" + list + ".json"
	body, err := getJSON(ctx, env, u)
	if err != nil {
		return crawl.Result{}, err
	}
	var raw []json.Number
	if err := decode(body, &raw); err != nil {
		return crawl.Result{}, crawl.Permanentf("%s: %s: want a JSON array of ids: %v", FeedTask, u, err)
	}
	if limit > 0 && int64(len(raw)) > limit {
		raw = raw[:limit]
	}
	res := crawl.Result{Next: make([]crawl.Input, 0, len(raw))}
	for i, n := range raw {
		id, err := n.Int64()
		if err != nil || id <= 0 {
			return crawl.Result{}, crawl.Permanentf("%s: %s: element %d (%s) is not an item id", FeedTask, u, i, n)
		}
		res.Next = append(res.Next, crawl.Input{Value: id})
	}
	return res, nil
}

func runItem(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	base, err := baseURL(env, itemSpec)
	if err != nil {
		return crawl.Result{}, err
	}
	id, ok := toInt64(in.Value)
	if !ok || id <= 0 {
		return crawl.Result{}, crawl.Permanentf("%s: input value %s is not an item id", ItemTask, describe(in.Value))
	}
	u := fmt.Sprintf("%s/item/%d.json", base, id)
	body, err := getJSON(ctx, env, u)
	if err != nil {
		return crawl.Result{}, err
	}
	if string(bytes.TrimSpace(body)) == "null" {
		return crawl.Result{Skipped: 1}, nil // no such item
	}
	var obj map[string]any
	if err := decode(body, &obj); err != nil {
		return crawl.Result{}, crawl.Permanentf("%s: %s: want a JSON object or null: %v", ItemTask, u, err)
	}
	if obj == nil {
		return crawl.Result{Skipped: 1}, nil
	}
	if truthy(obj["deleted"]) || truthy(obj["dead"]) {
		return crawl.Result{Skipped: 1}, nil
	}

	data := map[string]any{"id": int(id)}
	bad := func(field string, want string) error {
		return crawl.Permanentf("%s: %s: field %s: want %s, got %s", ItemTask, u, field, want, describe(obj[field]))
	}
	if v, ok := obj["id"]; ok {
		got, ok := toInt64(v)
		if !ok {
			return crawl.Result{}, bad("id", "an integer")
		}
		if got != id {
			return crawl.Result{}, crawl.Permanentf("%s: %s: answered item %d instead", ItemTask, u, got)
		}
	}
	for _, f := range []string{"type", "by", "title", "url", "text"} {
		if v, ok := obj[f]; ok && v != nil {
			s, ok := v.(string)
			if !ok {
				return crawl.Result{}, bad(f, "a string")
			}
			data[f] = s
		}
	}
	for _, f := range []string{"time", "score", "descendants", "parent"} {
		if v, ok := obj[f]; ok && v != nil {
			n, ok := toInt64(v)
			if !ok {
				return crawl.Result{}, bad(f, "an integer")
			}
			data[f] = int(n)
		}
	}
	if v, ok := obj["kids"]; ok && v != nil {
		arr, ok := v.([]any)
		if !ok {
			return crawl.Result{}, bad("kids", "a list of ids")
		}
		kids := make([]any, 0, len(arr))
		for _, k := range arr {
			n, ok := toInt64(k)
			if !ok || n <= 0 {
				return crawl.Result{}, bad("kids", "a list of ids")
			}
			kids = append(kids, int(n))
		}
		data["kids"] = kids
	}
	return crawl.Result{Items: []crawl.Item{{Key: ItemKey(id), URL: ItemURL(id), Data: data}}}, nil
}

// decode parses exactly one JSON value, keeping numbers exact.
func decode(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty body")
		}
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func truthy(v any) bool {
	b, ok := v.(bool)
	return ok && b
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

// getJSON fetches u. The fetcher fails statuses other than 2xx, retryable when a retry
// may cure them, with Retry-After honoured.
func getJSON(ctx context.Context, env *crawl.Env, u string) ([]byte, error) {
	resp, err := env.Get(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return resp.Body, nil
}

// param returns a step param, falling back to the task's declared default when the
// caller did not apply defaults.
func param(env *crawl.Env, spec crawl.TaskSpec, name string) any {
	if v, ok := env.Params[name]; ok && v != nil {
		return v
	}
	if p, ok := spec.Param(name); ok {
		return p.Default
	}
	return nil
}

func baseURL(env *crawl.Env, spec crawl.TaskSpec) (string, error) {
	raw := strings.TrimRight(strings.TrimSpace(fmt.Sprint(param(env, spec, "base_url"))), "/")
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", crawl.Permanentf("%s: param base_url: want an absolute http(s) URL, got %q", spec.Name, raw)
	}
	return raw, nil
}
