package hackernews

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/tests/fixture/hn"
)

// testFetcher is a minimal crawl.Fetcher over net/http that hands every status to the
// task unretried, to test the task's own reading of statuses.
type testFetcher struct{ client http.Client }

func (f *testFetcher) Fetch(ctx context.Context, req *crawl.Request) (*crawl.Response, error) {
	r, err := http.NewRequestWithContext(ctx, req.Method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return nil, err
	}
	resp, err := f.client.Do(r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	return &crawl.Response{URL: resp.Request.URL.String(), Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

func fixtureEnv(t *testing.T, extra crawl.Params) *crawl.Env {
	t.Helper()
	base, stop := hn.Start()
	t.Cleanup(stop)
	p := crawl.Params{"base_url": base + "/v0"}
	for k, v := range extra {
		p[k] = v
	}
	return &crawl.Env{Params: p, Fetcher: fetch.New(fetch.Options{AllowPrivate: true})}
}

// roundTrip passes an input through JSON, as workflow history does.
func roundTrip(t *testing.T, in crawl.Input) crawl.Input {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out crawl.Input
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// crawlTree runs feed → item → item (each: kids) down to maxDepth levels of comments, the
// way a chain with a self-consuming `each: kids` step would.
func crawlTree(t *testing.T, env *crawl.Env, maxDepth int) (items map[string]crawl.Item, stories, comments, skipped int) {
	t.Helper()
	ctx := context.Background()
	feed, err := Feed.Run(ctx, env, crawl.Input{})
	if err != nil {
		t.Fatal(err)
	}
	if len(feed.Items) != 0 || feed.Skipped != 0 {
		t.Fatalf("feed stored %d items, skipped %d", len(feed.Items), feed.Skipped)
	}
	queue := make([]crawl.Input, 0, len(feed.Next))
	for _, in := range feed.Next {
		queue = append(queue, roundTrip(t, in))
	}
	items = map[string]crawl.Item{}
	for len(queue) > 0 {
		in := queue[0]
		queue = queue[1:]
		res, err := Item.Run(ctx, env, in)
		if err != nil {
			t.Fatalf("item %v: %v", in.Value, err)
		}
		if len(res.Next) != 0 {
			t.Fatalf("item %v emitted inputs", in.Value)
		}
		skipped += res.Skipped
		for _, it := range res.Items {
			if _, dup := items[it.Key]; dup {
				t.Fatalf("%s stored twice", it.Key)
			}
			items[it.Key] = it
			if in.Depth == 0 {
				stories++
			} else {
				comments++
			}
			if maxDepth >= 0 && in.Depth >= maxDepth {
				continue
			}
			kids, _ := it.Data["kids"].([]int)
			for _, k := range kids {
				queue = append(queue, roundTrip(t, crawl.Input{Value: k, Parent: it.Key, Depth: in.Depth + 1}))
			}
		}
	}
	return items, stories, comments, skipped
}

func TestCrawlMatchesExpected(t *testing.T) {
	for _, tc := range []struct {
		list         string
		limit, depth int
	}{
		{"topstories", 30, 3},
		{"topstories", 30, 0},
		{"topstories", 30, 1},
		{"topstories", 3, -1},
		{"newstories", 30, 3},
		{"beststories", 2, 2},
	} {
		t.Run(fmt.Sprintf("%s/%d/%d", tc.list, tc.limit, tc.depth), func(t *testing.T) {
			env := fixtureEnv(t, crawl.Params{"list": tc.list, "limit": tc.limit})
			items, s, c, k := crawlTree(t, env, tc.depth)
			ws, wc, wk := hn.Expected(tc.list, tc.limit, tc.depth)
			if s != ws || c != wc || k != wk {
				t.Fatalf("crawl stored %d stories, %d comments, skipped %d; Expected %d, %d, %d", s, c, k, ws, wc, wk)
			}
			for key, it := range items {
				id := int(it.Data["id"].(int))
				src, ok := hn.Lookup(id)
				if !ok || src.Skipped() || key != fmt.Sprintf("hn:item:%d", id) {
					t.Fatalf("stored %s from fixture item %+v", key, src)
				}
			}
		})
	}
	if s, c, k := hn.Expected("topstories", 30, 3); s != 4 || c != 11 || k != 6 {
		t.Fatalf("hn.Expected(topstories, 30, 3) = %d, %d, %d", s, c, k)
	}
}

func TestFeed(t *testing.T) {
	env := fixtureEnv(t, crawl.Params{"list": "topstories", "limit": 4})
	res, err := Feed.Run(context.Background(), env, crawl.Input{})
	if err != nil {
		t.Fatal(err)
	}
	var got []any
	for _, in := range res.Next {
		if in.URL != "" || in.Task != "" || in.Vars != nil {
			t.Fatalf("feed input carries more than the id: %+v", in)
		}
		got = append(got, in.Value)
	}
	want := []any{int64(1001), int64(1002), int64(1003), int64(1004)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("feed emitted %v, want %v", got, want)
	}

	// Defaults (topstories, limit 30) apply when the caller passes none but base_url.
	env.Params = crawl.Params{"base_url": env.Params["base_url"]}
	res, err = Feed.Run(context.Background(), env, crawl.Input{})
	if err != nil || len(res.Next) != len(hn.Lists["topstories"]) {
		t.Fatalf("defaults: %v, %d inputs", err, len(res.Next))
	}
}

func TestFeedRejectsUnknownList(t *testing.T) {
	env := fixtureEnv(t, crawl.Params{"list": "jobstories"})
	_, err := Feed.Run(context.Background(), env, crawl.Input{})
	if !crawl.IsPermanent(err) {
		t.Fatalf("error %v, want a permanent error", err)
	}
	for _, l := range Lists {
		if !strings.Contains(err.Error(), l) {
			t.Fatalf("error %q does not list %s", err, l)
		}
	}
	env.Params["list"] = "newstories"
	env.Params["limit"] = "lots"
	if _, err := Feed.Run(context.Background(), env, crawl.Input{}); !crawl.IsPermanent(err) {
		t.Fatalf("bad limit: error %v, want a permanent error", err)
	}
}

func TestItemSkips(t *testing.T) {
	env := fixtureEnv(t, nil)
	for _, id := range []int{1003, 1004, 2002, 3002, 4004, hn.NullID, 987654} {
		res, err := Item.Run(context.Background(), env, crawl.Input{Value: id})
		if err != nil {
			t.Fatalf("item %d: %v", id, err)
		}
		if res.Skipped != 1 || len(res.Items) != 0 || len(res.Next) != 0 {
			t.Fatalf("item %d: %+v, want skipped", id, res)
		}
	}
}

func TestItemFields(t *testing.T) {
	env := fixtureEnv(t, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		value any
		want  map[string]any
	}{
		{int64(1001), map[string]any{
			"id": 1001, "type": "story", "by": "alice", "time": int(hn.Items[1001].Time),
			"title": "Fixture: a story with a deep thread", "url": "https://example.com/deep-thread",
			"score": 120, "descendants": 6, "kids": []int{2001, 2002, 2003},
		}},
		// An Ask story has text and no url; a story without comments has descendants 0, no kids.
		{float64(1002), map[string]any{
			"id": 1002, "type": "story", "by": "heidi", "time": int(hn.Items[1002].Time),
			"title": "Ask HN: What fixture data do you use?", "text": "We keep writing the same trees by hand.<p>What do you do?",
			"score": 45, "descendants": 2, "kids": []int{2004},
		}},
		{"1005", map[string]any{
			"id": 1005, "type": "story", "by": "niaj", "time": int(hn.Items[1005].Time),
			"title": "Quiet news with no comments", "url": "https://example.org/quiet", "score": 3, "descendants": 0,
		}},
		{json.Number("3001"), map[string]any{
			"id": 3001, "type": "comment", "by": "carol", "time": int(hn.Items[3001].Time),
			"parent": 2001, "text": "A reply &amp; a <i>question</i>.", "kids": []int{4001},
		}},
		{4001, map[string]any{
			"id": 4001, "type": "comment", "by": "dave", "time": int(hn.Items[4001].Time),
			"parent": 3001, "text": "Third level.",
		}},
	} {
		res, err := Item.Run(ctx, env, crawl.Input{Value: tc.value})
		if err != nil {
			t.Fatalf("value %v: %v", tc.value, err)
		}
		if len(res.Items) != 1 || res.Skipped != 0 || len(res.Next) != 0 {
			t.Fatalf("value %v: %+v", tc.value, res)
		}
		it := res.Items[0]
		id := tc.want["id"].(int)
		if it.Key != fmt.Sprintf("hn:item:%d", id) || it.URL != fmt.Sprintf("https://news.ycombinator.com/item?id=%d", id) {
			t.Fatalf("item %d: key %q url %q", id, it.Key, it.URL)
		}
		if !reflect.DeepEqual(it.Data, tc.want) {
			t.Fatalf("item %d:\n got %#v\nwant %#v", id, it.Data, tc.want)
		}
		for name := range it.Data {
			if _, ok := Item.Spec().Field(name); !ok {
				t.Fatalf("item %d: field %s not declared", id, name)
			}
		}
	}
}

func TestItemBadInput(t *testing.T) {
	env := fixtureEnv(t, nil)
	for _, v := range []any{nil, "abc", 1.5, -3, 0, map[string]any{}} {
		if _, err := Item.Run(context.Background(), env, crawl.Input{Value: v}); !crawl.IsPermanent(err) {
			t.Errorf("value %#v: error %v, want a permanent error", v, err)
		}
	}
}

func TestBadResponses(t *testing.T) {
	bodies := map[string]string{
		"/item/1.json": `{"id": 1, "type": "story", "title": "unterminated`,
		"/item/2.json": `[1, 2, 3]`,
		"/item/3.json": `{"id": 3, "type": "comment", "kids": "many"}`,
		"/item/4.json": `{"id": 4, "time": "yesterday"}`,
		"/item/5.json": ``,
		"/item/6.json": `{"id": 7}`,
		"/item/7.json": `{"id": 7, "by": 12}`,
		"/item/8.json": `{"id": 8} {"id": 9}`,
		"/item/9.json": " null \n",

		"/topstories.json":  `[1, 2, "three"]`,
		"/newstories.json":  `{"not": "a list"}`,
		"/beststories.json": `[1, 2.5]`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/item/500.json":
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		case "/item/429.json":
			w.Header().Set("Retry-After", "2")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		body, ok := bodies[r.URL.Path]
		if !ok {
			http.Error(w, `{"error": "Permission denied"}`, http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	env := &crawl.Env{Params: crawl.Params{"base_url": srv.URL + "/"}, Fetcher: fetch.New(fetch.Options{AllowPrivate: true})}
	// A plain fetcher with only the status check over it: statuses mean the same.
	raw := &crawl.Env{Params: env.Params, Fetcher: crawl.Wrap(&testFetcher{}, fetch.StatusCheck())}
	ctx := context.Background()

	for id := 1; id <= 8; id++ {
		_, err := Item.Run(ctx, env, crawl.Input{Value: id})
		if !crawl.IsPermanent(err) {
			t.Errorf("item %d (%q): error %v, want a permanent error", id, bodies[fmt.Sprintf("/item/%d.json", id)], err)
		}
	}
	if res, err := Item.Run(ctx, env, crawl.Input{Value: 9}); err != nil || res.Skipped != 1 {
		t.Errorf("padded null: %+v, %v", res, err)
	}
	if _, err := Item.Run(ctx, env, crawl.Input{Value: 10}); !crawl.IsPermanent(err) {
		t.Errorf("401: error %v, want a permanent error", err)
	}
	if _, err := Item.Run(ctx, raw, crawl.Input{Value: 10}); !crawl.IsPermanent(err) {
		t.Errorf("401 handed through: error %v, want a permanent error", err)
	}
	if _, err := Item.Run(ctx, raw, crawl.Input{Value: 500}); err == nil || crawl.IsPermanent(err) {
		t.Errorf("500: error %v, want a retryable error", err)
	}
	_, err := Item.Run(ctx, raw, crawl.Input{Value: 429})
	if err == nil || crawl.IsPermanent(err) || crawl.RetryDelay(err) != 2*time.Second {
		t.Errorf("429: error %v (delay %v), want a retry after 2s", err, crawl.RetryDelay(err))
	}
	for _, list := range Lists {
		env.Params["list"] = list
		if _, err := Feed.Run(ctx, env, crawl.Input{}); !crawl.IsPermanent(err) {
			t.Errorf("%s: error %v, want a permanent error", list, err)
		}
	}
	env.Params["base_url"] = "ftp://example.com"
	if _, err := Feed.Run(ctx, env, crawl.Input{}); !crawl.IsPermanent(err) {
		t.Errorf("bad base_url: error %v, want a permanent error", err)
	}
}

func TestSpecs(t *testing.T) {
	for _, name := range []string{FeedTask, ItemTask} {
		task, ok := crawl.Default.Get(name)
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		spec := task.Spec()
		if spec.Doc == "" || spec.Timeout <= 0 || spec.Retries <= 0 {
			t.Errorf("%s: incomplete spec", name)
		}
		for _, p := range spec.Params {
			if p.Doc == "" || p.Type == "" {
				t.Errorf("%s: param %s lacks a type or doc", name, p.Name)
			}
		}
		if p, _ := spec.Param("base_url"); p.Default != DefaultBaseURL {
			t.Errorf("%s: base_url default %v", name, p.Default)
		}
	}
	if f, ok := Item.Spec().Field("kids"); !ok || f.Type != crawl.List {
		t.Errorf("kids field: %+v", f)
	}
	if len(Feed.Spec().Output) != 0 {
		t.Errorf("hackernews.feed declares output but stores nothing")
	}
}
