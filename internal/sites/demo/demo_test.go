package demo

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
)

func startSite(t *testing.T, o demosite.Options) string {
	t.Helper()
	base, stop, err := demosite.Start("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return base
}

// newEnv runs tasks through the real fetcher; a short backoff keeps the in-process
// retries of the fault tests quick.
func newEnv(base string, extra crawl.Params) *crawl.Env {
	p := crawl.Params{"base_url": base}
	for k, v := range extra {
		p[k] = v
	}
	return &crawl.Env{Params: p, Fetcher: fetch.New(fetch.Options{Backoff: 10 * time.Millisecond, AllowPrivate: true})}
}

// rawEnv runs tasks through a plain fetcher that retries nothing, with the fetcher's
// one status check (fetch.StatusCheck) as its only layer: what a status means does not
// depend on the rest of the engine's chain.
func rawEnv(base string) *crawl.Env {
	return &crawl.Env{Params: crawl.Params{"base_url": base}, Fetcher: crawl.Wrap(newTestFetcher(), fetch.StatusCheck())}
}

// crawlAll runs the three tasks the way a demo chain would (feed consuming itself, story
// consuming feed, comments consuming story and itself), routing each emitted input by its
// Task, and returns the stored items by key.
func crawlAll(t *testing.T, env *crawl.Env) map[string]crawl.Item {
	t.Helper()
	ctx := context.Background()
	tasks := map[string]crawl.Task{FeedTask: Feed, StoryTask: Story, CommentsTask: Comments}
	type job struct {
		task string
		in   crawl.Input
	}
	queue := []job{{FeedTask, crawl.Input{}}}
	items := map[string]crawl.Item{}
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		res, err := tasks[j.task].Run(ctx, env, j.in)
		if err != nil {
			t.Fatalf("%s %s: %v", j.task, j.in.Describe(), err)
		}
		for _, it := range res.Items {
			if _, dup := items[it.Key]; dup {
				t.Fatalf("%s stored twice", it.Key)
			}
			items[it.Key] = it
		}
		for _, next := range res.Next {
			if _, ok := tasks[next.Task]; !ok {
				t.Fatalf("%s emitted an input for unknown task %q", j.task, next.Task)
			}
			queue = append(queue, job{next.Task, next})
		}
	}
	return items
}

func count(items map[string]crawl.Item) (stories, comments int) {
	for k := range items {
		switch {
		case strings.HasPrefix(k, "demo:story:"):
			stories++
		case strings.HasPrefix(k, "demo:comment:"):
			comments++
		}
	}
	return stories, comments
}

func storyData(s demosite.Story) map[string]any {
	return map[string]any{
		"id":       s.ID,
		"title":    s.Title,
		"url":      s.URL,
		"author":   s.Author,
		"score":    s.Score,
		"time":     s.Time.UTC().Format(time.RFC3339),
		"comments": s.Comments,
		"text":     s.Text,
	}
}

func TestCrawlStoresWhatExpectedSays(t *testing.T) {
	for _, tc := range []struct {
		name  string
		o     demosite.Options
		pages int
	}{
		{"defaults", demosite.Options{}, 3},
		{"small", demosite.Options{Pages: 2, PerPage: 4, CommentsPerPage: 7}, 2},
		{"pages beyond the last", demosite.Options{Pages: 2, PerPage: 3, CommentsPerPage: 50}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := startSite(t, tc.o)
			items := crawlAll(t, newEnv(base, crawl.Params{"pages": tc.pages}))
			s, c := count(items)
			ws, wc := demosite.Expected(tc.o, tc.pages)
			if s != ws || c != wc {
				t.Fatalf("stored %d stories, %d comments; want %d, %d", s, c, ws, wc)
			}
			if s+c != len(items) {
				t.Fatalf("%d items with unexpected keys", len(items)-s-c)
			}
			// Every field of every story, and every comment, matches the generator.
			for id := 1; id <= ws; id++ {
				want, _ := tc.o.Story(id)
				it, ok := items[StoryKey(id)]
				if !ok {
					t.Fatalf("story %d not stored", id)
				}
				if !reflect.DeepEqual(it.Data, storyData(want)) {
					t.Fatalf("story %d:\n got %v\nwant %v", id, it.Data, storyData(want))
				}
				if it.URL != fmt.Sprintf("%s/item/%d", base, id) {
					t.Fatalf("story %d URL %q", id, it.URL)
				}
				for _, c := range tc.o.Comments(id) {
					it, ok := items[CommentKey(c.ID)]
					if !ok {
						t.Fatalf("comment %d of story %d not stored", c.ID, id)
					}
					want := map[string]any{"id": c.ID, "story": c.Story, "author": c.Author, "text": c.Text}
					if !reflect.DeepEqual(it.Data, want) {
						t.Fatalf("comment %d:\n got %v\nwant %v", c.ID, it.Data, want)
					}
				}
			}
		})
	}
}

func TestDefaultCounts(t *testing.T) {
	if s, c := demosite.Expected(demosite.Options{}, 3); s != 90 || c != 1980 {
		t.Fatalf("Expected(defaults, 3) = %d, %d", s, c)
	}
}

func TestFeedEmits(t *testing.T) {
	o := demosite.Options{Pages: 3, PerPage: 5}
	base := startSite(t, o)
	env := newEnv(base, crawl.Params{"pages": 2})
	ctx := context.Background()

	res, err := Feed.Run(ctx, env, crawl.Input{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 0 {
		t.Fatalf("feed stored %d items", len(res.Items))
	}
	if len(res.Next) != 6 {
		t.Fatalf("feed page 1 emitted %d inputs, want 5 stories + 1 page", len(res.Next))
	}
	for i, in := range res.Next[:5] {
		if want := fmt.Sprintf("%s/item/%d", base, i+1); in.URL != want || in.Task != StoryTask {
			t.Errorf("input %d = %+v, want story %s", i, in, want)
		}
	}
	page2 := res.Next[5]
	if page2.Task != FeedTask || page2.URL != base+"/news?p=2" || page2.Vars["page"] != 2 {
		t.Fatalf("next page input = %+v", page2)
	}

	// Page 2 of pages=2 emits its stories and no further page, even though a More link exists.
	page2.Vars["page"] = float64(2) // as after a JSON round trip
	res, err = Feed.Run(ctx, env, page2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Next) != 5 {
		t.Fatalf("feed page 2 emitted %d inputs, want 5", len(res.Next))
	}
	for _, in := range res.Next {
		if in.Task != StoryTask {
			t.Fatalf("unexpected input %+v", in)
		}
	}

	// The last page has no More link: no page input even with a larger pages param.
	env = newEnv(base, crawl.Params{"pages": 10})
	res, err = Feed.Run(ctx, env, crawl.Input{URL: base + "/news?p=3", Task: FeedTask, Vars: map[string]any{"page": 3}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Next) != 5 {
		t.Fatalf("last feed page emitted %d inputs, want 5", len(res.Next))
	}
}

func TestFeedParams(t *testing.T) {
	base := startSite(t, demosite.Options{Pages: 2, PerPage: 2})
	ctx := context.Background()
	for _, p := range []crawl.Params{{"pages": 0}, {"pages": "many"}, {"base_url": "not a url"}} {
		env := newEnv(base, p)
		if _, err := Feed.Run(ctx, env, crawl.Input{}); !crawl.IsPermanent(err) {
			t.Errorf("params %v: error %v, want a permanent error", p, err)
		}
	}
	// Declared defaults apply when the caller passes no params at all.
	env := &crawl.Env{Fetcher: fetch.New(fetch.Options{AllowPrivate: true})}
	_, err := Feed.Run(ctx, env, crawl.Input{URL: base + "/news?p=1"})
	if err != nil {
		t.Fatal(err)
	}
}

func TestStoryFields(t *testing.T) {
	o := demosite.Options{}
	base := startSite(t, o)
	env := newEnv(base, nil)
	ctx := context.Background()
	for _, id := range []int{10, 13, 45, 44} {
		want, _ := o.Story(id)
		res, err := Story.Run(ctx, env, crawl.Input{URL: fmt.Sprintf("%s/item/%d", base, id), Task: StoryTask})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Items) != 1 || res.Items[0].Key != StoryKey(id) {
			t.Fatalf("story %d: items %+v", id, res.Items)
		}
		if got := res.Items[0].Data; !reflect.DeepEqual(got, storyData(want)) {
			t.Fatalf("story %d:\n got %v\nwant %v", id, got, storyData(want))
		}
		if want.Comments == 0 {
			if len(res.Next) != 0 {
				t.Fatalf("story %d without comments emitted %+v", id, res.Next)
			}
			continue
		}
		wantNext := crawl.Input{
			URL:    fmt.Sprintf("%s/item/%d/comments?p=1", base, id),
			Task:   CommentsTask,
			Parent: StoryKey(id),
			Vars:   map[string]any{"story": id, "page": 1},
		}
		if len(res.Next) != 1 || !reflect.DeepEqual(res.Next[0], wantNext) {
			t.Fatalf("story %d emitted %+v, want %+v", id, res.Next, wantNext)
		}
	}
	// Story 10 is an Ask story: no external URL, text with characters that need escaping.
	s10, _ := o.Story(10)
	if s10.URL != "" || !strings.Contains(s10.Text, "<") || !strings.Contains(s10.Title, "&") {
		t.Fatalf("generator changed: story 10 = %+v", s10)
	}
}

func TestStoryByValue(t *testing.T) {
	o := demosite.Options{}
	base := startSite(t, o)
	env := newEnv(base, nil)
	for _, v := range []any{7, int64(7), float64(7), "7"} {
		res, err := Story.Run(context.Background(), env, crawl.Input{Value: v})
		if err != nil {
			t.Fatalf("Value %T: %v", v, err)
		}
		if len(res.Items) != 1 || res.Items[0].Key != "demo:story:7" {
			t.Fatalf("Value %T: items %+v", v, res.Items)
		}
	}
	for _, in := range []crawl.Input{{}, {Value: "x"}, {Value: 1.5}, {URL: base + "/news?p=1"}} {
		if _, err := Story.Run(context.Background(), env, in); !crawl.IsPermanent(err) {
			t.Errorf("input %+v: error %v, want a permanent error", in, err)
		}
	}
	if _, err := Story.Run(context.Background(), env, crawl.Input{Value: 100000}); !crawl.IsPermanent(err) {
		t.Errorf("unknown story: error %v, want a permanent error (404)", err)
	}
}

func TestCommentsPaging(t *testing.T) {
	o := demosite.Options{CommentsPerPage: 20}
	base := startSite(t, o)
	env := newEnv(base, nil)
	ctx := context.Background()
	const id = 6 // 42 comments: pages of 20, 20, 2
	in := crawl.Input{URL: fmt.Sprintf("%s/item/%d/comments?p=1", base, id), Task: CommentsTask, Parent: StoryKey(id), Vars: map[string]any{"story": id, "page": 1}}
	var sizes []int
	var got []crawl.Item
	for page := 1; ; page++ {
		res, err := Comments.Run(ctx, env, in)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(res.Items))
		got = append(got, res.Items...)
		if len(res.Next) == 0 {
			break
		}
		next := res.Next[0]
		want := crawl.Input{
			URL:    fmt.Sprintf("%s/item/%d/comments?p=%d", base, id, page+1),
			Task:   CommentsTask,
			Parent: StoryKey(id),
			Vars:   map[string]any{"story": id, "page": page + 1},
		}
		if len(res.Next) != 1 || !reflect.DeepEqual(next, want) {
			t.Fatalf("page %d emitted %+v, want %+v", page, res.Next, want)
		}
		in = next
	}
	if !reflect.DeepEqual(sizes, []int{20, 20, 2}) {
		t.Fatalf("page sizes %v, want [20 20 2]", sizes)
	}
	for i, c := range o.Comments(id) {
		it := got[i]
		if it.Key != CommentKey(c.ID) || it.URL != fmt.Sprintf("%s/item/%d/comments?p=%d#c%d", base, id, i/20+1, c.ID) {
			t.Fatalf("comment %d: key %q url %q", c.ID, it.Key, it.URL)
		}
		if it.Data["text"] != c.Text || !strings.Contains(c.Text, "<not>") {
			t.Fatalf("comment %d text %q, want %q", c.ID, it.Data["text"], c.Text)
		}
	}
}

func TestFaults(t *testing.T) {
	o := demosite.Options{Faults: map[int]demosite.Fault{
		1: demosite.FaultStatus500,
		2: demosite.FaultRetryAfter,
		3: demosite.FaultTruncated,
		4: demosite.FaultHugeBody,
		5: demosite.FaultHang,
		6: demosite.FaultRetryAfter,
	}}
	base := startSite(t, o)
	env := newEnv(base, nil)
	ctx := context.Background()
	story := func(id int) crawl.Input { return crawl.Input{URL: fmt.Sprintf("%s/item/%d", base, id)} }

	t.Run("truncated", func(t *testing.T) {
		_, err := Story.Run(ctx, env, story(3))
		if !crawl.IsPermanent(err) {
			t.Fatalf("error %v, want a permanent error", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "title") || !strings.Contains(msg, story(3).URL) {
			t.Fatalf("error %q should name the field and the URL", msg)
		}
	})
	t.Run("status500", func(t *testing.T) {
		_, err := Story.Run(ctx, env, story(1))
		var fe *fetch.Error
		if err == nil || crawl.IsPermanent(err) || !errors.As(err, &fe) || fe.Status != 500 {
			t.Fatalf("error %v, want a retryable 500", err)
		}
	})
	t.Run("retry-after", func(t *testing.T) {
		// The fetcher waits out the short Retry-After itself.
		res, err := Story.Run(ctx, env, story(2))
		if err != nil || len(res.Items) != 1 {
			t.Fatalf("%v, %d items", err, len(res.Items))
		}
	})
	t.Run("huge-body", func(t *testing.T) {
		_, err := Story.Run(ctx, env, story(4))
		if !errors.Is(err, fetch.ErrBodyTooLarge) || !crawl.IsPermanent(err) {
			t.Fatalf("error %v, want a permanent body-too-large error", err)
		}
	})
	t.Run("hang", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := Story.Run(ctx, env, story(5))
		if !errors.Is(err, context.DeadlineExceeded) || crawl.IsPermanent(err) {
			t.Fatalf("error %v, want a retryable deadline error", err)
		}
	})

	// Statuses read by the status check alone, over a fetcher that hands them through.
	raw := rawEnv(base)
	t.Run("raw-status500", func(t *testing.T) {
		_, err := Story.Run(ctx, raw, story(1))
		if err == nil || crawl.IsPermanent(err) || !strings.Contains(err.Error(), "500") {
			t.Fatalf("error %v, want a retryable 500", err)
		}
	})
	t.Run("raw-retry-after", func(t *testing.T) {
		_, err := Story.Run(ctx, raw, story(6))
		if err == nil || crawl.IsPermanent(err) || crawl.RetryDelay(err) != time.Second {
			t.Fatalf("first attempt: error %v (delay %v), want a retry after 1s", err, crawl.RetryDelay(err))
		}
		res, err := Story.Run(ctx, raw, story(6))
		if err != nil || len(res.Items) != 1 {
			t.Fatalf("second attempt: %v, %d items", err, len(res.Items))
		}
	})
	t.Run("raw-not-found", func(t *testing.T) {
		_, err := Story.Run(ctx, raw, crawl.Input{URL: base + "/item/99999"})
		if !crawl.IsPermanent(err) {
			t.Fatalf("error %v, want a permanent 404", err)
		}
	})
	t.Run("raw-huge-body", func(t *testing.T) {
		_, err := Story.Run(ctx, raw, story(4))
		if !errors.Is(err, errTooLarge) {
			t.Fatalf("error %v, want the fetcher's size error", err)
		}
	})
}

// A crawl over faulty stories stores what Expected says once the failing inputs are
// dropped and the 429 is retried.
func TestCrawlWithFaults(t *testing.T) {
	o := demosite.Options{Pages: 2, PerPage: 5, Faults: map[int]demosite.Fault{
		1: demosite.FaultStatus500, 2: demosite.FaultRetryAfter, 3: demosite.FaultTruncated,
		6: demosite.FaultHugeBody, 7: demosite.FaultHang,
	}}
	base := startSite(t, o)
	env := newEnv(base, crawl.Params{"pages": 2})
	tasks := map[string]crawl.Task{FeedTask: Feed, StoryTask: Story, CommentsTask: Comments}
	queue := []crawl.Input{{Task: FeedTask}}
	items := map[string]crawl.Item{}
	failed := 0
	for len(queue) > 0 {
		in := queue[0]
		queue = queue[1:]
		var res crawl.Result
		var err error
		for attempt, holds := 0, 0; attempt < 3; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			res, err = tasks[in.Task].Run(ctx, env, in)
			cancel()
			// The site's 429 paused the host: as the engine does, run the input again
			// after the pause without spending an attempt.
			if wait, held := crawl.HeldFor(err); held && holds < 10 {
				holds++
				attempt--
				time.Sleep(wait)
				continue
			}
			if err == nil || crawl.IsPermanent(err) {
				break
			}
		}
		if err != nil {
			failed++
			continue
		}
		for _, it := range res.Items {
			items[it.Key] = it
		}
		queue = append(queue, res.Next...)
	}
	s, c := count(items)
	ws, wc := demosite.Expected(o, 2)
	if s != ws || c != wc {
		t.Fatalf("stored %d stories, %d comments; want %d, %d", s, c, ws, wc)
	}
	if failed != 4 {
		t.Fatalf("%d inputs failed, want 4", failed)
	}
}

func TestSpecs(t *testing.T) {
	for _, name := range []string{FeedTask, StoryTask, CommentsTask} {
		task, ok := crawl.Default.Get(name)
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		spec := task.Spec()
		if spec.Name != name || spec.Doc == "" || spec.Timeout <= 0 || spec.Retries <= 0 {
			t.Errorf("%s: incomplete spec %+v", name, spec)
		}
		for _, p := range spec.Params {
			if p.Doc == "" || p.Type == "" {
				t.Errorf("%s: param %s lacks a type or doc", name, p.Name)
			}
		}
		for _, f := range spec.Output {
			if f.Doc == "" || f.Type == "" {
				t.Errorf("%s: field %s lacks a type or doc", name, f.Name)
			}
		}
	}
	if len(Feed.Spec().Output) != 0 {
		t.Errorf("demo.feed declares output fields but stores nothing")
	}
}
