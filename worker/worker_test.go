package worker_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/worker"
)

// temporal is the package's one embedded Temporal server.
var temporal *devstack.Stack

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "trawler-worker-")
	if err != nil {
		panic(err)
	}
	temporal, err = devstack.StartTemporal(context.Background(), devstack.Options{DataDir: dir, UIPort: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start embedded Temporal:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = temporal.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// A worker started with worker.Run runs the tasks it was given: a chain of a list task
// and a detail task stores exactly one item per linked page, and Run returns nil once
// its context is done.
func TestRunRunsItsTasks(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/list" {
			for i := 1; i <= 5; i++ {
				fmt.Fprintf(w, `<a class="post" href="/post/%d">post %d</a>`, i, i)
			}
			return
		}
		fmt.Fprintf(w, `<h1>Title of %s</h1>`, r.URL.Path)
	}))
	defer site.Close()
	type post struct {
		Title string `css:"h1" required:"true"`
	}
	list := crawl.FollowTask("wtest.list", func(p *crawl.Page) error {
		p.FollowAll("a.post", "wtest.post")
		return nil
	}, crawl.StartAt(site.URL+"/list"))
	detail := crawl.HTMLTask("wtest.post", func(p *crawl.Page, out *crawl.Out[post]) error {
		out.PageItem(out.Scan(p))
		return nil
	})

	out := t.TempDir()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(ctx, worker.Config{Temporal: temporal.Endpoints.Temporal, Namespace: temporal.Endpoints.Namespace,
			TaskQueue: "wtest", OutDir: out, AllowPrivate: true}, list, detail)
	}()
	// The tasks are the worker's own: the process-wide registry does not learn them.
	if _, ok := crawl.Default.Get("wtest.list"); ok {
		t.Fatal("worker.Run registered its tasks in crawl.Default")
	}

	// The process starting the chain knows the tasks too, as `trawler run` of the same
	// binary does.
	reg := crawl.NewRegistry()
	reg.Register(list, detail)
	chain, err := crawl.Load("posts.yaml", []byte("name: posts\nsteps:\n  - id: list\n    task: wtest.list\n  - id: post\n    task: wtest.post\n    from: list\n"),
		crawl.LoadOptions{Registry: reg, Sinks: engine.KnownSinks})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := chain.Compile(reg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(client.Options{HostPort: temporal.Endpoints.Temporal, Namespace: temporal.Endpoints.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := engine.Start(context.Background(), c, plan, engine.RunOptions{TaskQueue: "wtest"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := engine.Wait(wctx, c, id, nil); err != nil {
		t.Fatalf("run %s: %v", id, err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("worker.Run: %v", err)
	}

	js, err := jsonl.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if err := js.Scan(func(it crawl.Item) error {
		got[it.Key] = fmt.Sprint(it.Data["title"])
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[site.URL+"/post/3"] != "Title of /post/3" {
		t.Fatalf("stored %v, want the 5 posts keyed by URL", got)
	}
}
