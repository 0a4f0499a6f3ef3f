package crawl_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
)

// The smallest list → detail pair: StartAt names the first page, FollowTask stores
// nothing and needs no Out, and PageItem keys an item by its page's canonical URL.
func TestStartAtFollowTaskAndPageItem(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/list":
			fmt.Fprint(w, `<a class="entry" href="/post/1?utm_source=x">1</a><a class="entry" href="/post/2">2</a>`)
		default:
			fmt.Fprintf(w, `<h1>Post %s</h1>`, r.URL.Path)
		}
	}))
	defer srv.Close()
	list := crawl.FollowTask("small.list", func(p *crawl.Page) error {
		p.FollowAll("a.entry", "small.post")
		return nil
	}, crawl.StartAt(srv.URL+"/list"))
	type post struct {
		Title string `css:"h1" required:"true"`
	}
	detail := crawl.HTMLTask("small.post", func(p *crawl.Page, out *crawl.Out[post]) error {
		out.PageItem(out.Scan(p))
		return nil
	})

	if p, ok := list.Spec().Param("start_url"); !ok || p.Default != srv.URL+"/list" || p.Type != crawl.URL {
		t.Fatalf("StartAt declares start_url %+v", p)
	}
	if len(list.Spec().Output) != 0 {
		t.Fatalf("a FollowTask declares output %+v", list.Spec().Output)
	}
	env := &crawl.Env{Fetcher: fetch.New(fetch.Options{Timeout: 5 * time.Second, Retries: -1, AllowPrivate: true}), Params: crawl.Params{}}
	res, err := list.Run(context.Background(), env, crawl.Input{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 0 || len(res.Next) != 2 || res.Next[0].URL != srv.URL+"/post/1?utm_source=x" || res.Next[1].Task != "small.post" {
		t.Fatalf("list: %d items, next %+v", len(res.Items), res.Next)
	}
	// A chain's start_url wins over the default.
	env.Params = crawl.Params{"start_url": srv.URL + "/post/9"}
	if _, err := list.Run(context.Background(), env, crawl.Input{}); err != nil {
		t.Fatal(err)
	}
	env.Params = crawl.Params{}
	res, err = detail.Run(context.Background(), env, res.Next[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 1 || res.Items[0].Key != srv.URL+"/post/1" || res.Items[0].Data["title"] != "Post /post/1" {
		t.Fatalf("detail items %+v, want one keyed %s/post/1 (tracking parameter dropped)", res.Items, srv.URL)
	}
}

// Add refuses a second task under a name with an error that says so, adds nothing of a
// refused call, and takes the very same task again as a no-op.
func TestRegistryAddRefusesDuplicateNames(t *testing.T) {
	r := crawl.NewRegistry()
	a := crawl.FollowTask("dup.list", func(*crawl.Page) error { return nil })
	b := crawl.FollowTask("dup.list", func(*crawl.Page) error { return nil })
	other := crawl.FollowTask("dup.other", func(*crawl.Page) error { return nil })
	if err := r.Add(a); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(a); err != nil {
		t.Fatalf("the same task again: %v", err)
	}
	err := r.Add(other, b)
	if err == nil || err.Error() != `task "dup.list" registered twice: two different tasks have this name; rename one: a task's name is unique in a binary` {
		t.Fatalf("duplicate: %v", err)
	}
	if _, ok := r.Get("dup.other"); ok {
		t.Fatal("a refused Add added dup.other")
	}
	if err := r.Add(crawl.FollowTask("Bad", func(*crawl.Page) error { return nil })); err == nil || err.Error() != `task name "Bad" must look like site.task (lowercase letters, digits, _)` {
		t.Fatalf("bad name: %v", err)
	}
}
