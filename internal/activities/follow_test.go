package activities

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/storage"
)

// listTask emits every detail link of a list page for the step "detail".
var listTask = crawl.HTMLTask("follow.list", func(p *crawl.Page, out *crawl.Out[page]) error {
	p.FollowAll("a.detail", "detail")
	return nil
})

// listSite serves /list linking to /d0 … /d(links-1), each a page with its path as
// title, and a registry with the list and title tasks.
func listSite(t *testing.T, links int) (*httptest.Server, *crawl.Registry) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/list" {
			for i := range links {
				fmt.Fprintf(w, `<a class="detail" href="/d%d">d%d</a>`, i, i)
			}
			return
		}
		fmt.Fprintf(w, "<h1>%s</h1>", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	reg := crawl.NewRegistry()
	reg.Register(listTask)
	reg.Register(titleTask)
	return srv, reg
}

// A batch of a list step follows its detail links into the detail step (Batch.Downstream):
// the details are run, stored in the detail step's own store and counted in a result of
// that step, not the list's. When the detail step's store is down, the details come
// back in that step's result waiting for it, so none is lost.
func TestBatchRunsStepDownstream(t *testing.T) {
	srv, reg := listSite(t, 3)
	lists, details := newFlaky(t, "lists"), newFlaky(t, "details")
	a := &Activities{Registry: reg, Sinks: storage.Set{"lists": lists, "details": details},
		Fetcher: fetch.New(fetch.Options{AllowPrivate: true, Retries: -1, MaxRetryWait: -1})}
	list := crawl.PlanStep{ID: "list", Task: "follow.list", Timeout: time.Second, Concurrency: 2, Store: []string{"lists"},
		Consumers: []crawl.Consumer{{Step: 1, ID: "detail", Task: titleTask.Spec().Name}}}
	detail := crawl.PlanStep{ID: "detail", Task: titleTask.Spec().Name, Timeout: time.Second, Concurrency: 4, Retries: 2, Store: []string{"details"}, Follow: true}
	batch := func(run string) crawl.Batch {
		return crawl.Batch{Chain: "follow", Tenant: "t", RunID: run, Step: list, StepIdx: 0,
			Work: []crawl.Work{{Input: crawl.Input{URL: srv.URL + "/list"}}}, Outages: true, OutageHold: 200 * time.Millisecond,
			Follow: 10, FollowFor: 10 * time.Second, Downstream: []crawl.DownstreamStep{{StepIdx: 1, Step: detail}}}
	}

	res, err := runBatchActivity(t, a, batch("r1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Pages != 1 || res.Followed != 3 || len(res.Out) != 0 || len(res.Downstream) != 1 {
		t.Fatalf("list: %d pages, %d followed, %d outputs back, %d results downstream; want 1, 3, 0, 1", res.Pages, res.Followed, len(res.Out), len(res.Downstream))
	}
	if d := res.Downstream[0]; d.StepIdx != 1 || d.Pages != 3 || d.Items != 3 || len(d.Failed)+len(d.Retry)+len(d.Waiting) != 0 {
		t.Fatalf("detail: %+v; want step 1 with 3 pages and 3 items", d)
	}
	n := 0
	if err := details.Scan(func(crawl.Item) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 3 || len(lists.got) != 0 {
		t.Errorf("the detail step's store holds %d items and the list's %d; want 3 and 0", n, len(lists.got))
	}

	details.down = true
	res, err = runBatchActivity(t, a, batch("r2"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Pages != 1 || len(res.Downstream) != 1 {
		t.Fatalf("list with the detail store down: %d pages, %d results downstream; want 1 and 1", res.Pages, len(res.Downstream))
	}
	d := res.Downstream[0]
	if d.Outage == nil || d.Outage.Dependency != "store details" || len(d.Waiting)+d.Pages != 3 || len(res.Out) != 0 {
		t.Fatalf("detail with its store down: outage %+v, %d waiting, %d pages, %d back as outputs; want store details and every detail waiting or stored", d.Outage, len(d.Waiting), d.Pages, len(res.Out))
	}
}

// A lane takes a fan-out up to twice its concurrency, those running and one round
// queued behind them; the rest goes back to the workflow for the step's other batches.
func TestLaneTakesOneRoundMoreThanItRuns(t *testing.T) {
	const links, concurrency = 20, 4
	srv, reg := listSite(t, links)
	a := &Activities{Registry: reg, Sinks: storage.Set{"details": newFlaky(t, "details")},
		Fetcher: fetch.New(fetch.Options{AllowPrivate: true, Retries: -1, MaxRetryWait: -1})}
	list := crawl.PlanStep{ID: "list", Task: "follow.list", Timeout: time.Second, Concurrency: 2,
		Consumers: []crawl.Consumer{{Step: 1, ID: "detail", Task: titleTask.Spec().Name}}}
	detail := crawl.PlanStep{ID: "detail", Task: titleTask.Spec().Name, Timeout: time.Second, Concurrency: concurrency, Store: []string{"details"}, Follow: true}
	res, err := runBatchActivity(t, a, crawl.Batch{Chain: "follow", Tenant: "t", RunID: "r1", Step: list, StepIdx: 0,
		Work:   []crawl.Work{{Input: crawl.Input{URL: srv.URL + "/list"}}},
		Follow: 100, FollowFor: 10 * time.Second, Downstream: []crawl.DownstreamStep{{StepIdx: 1, Step: detail}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Followed != 2*concurrency || len(res.Out) != links-2*concurrency || len(res.Downstream) != 1 || res.Downstream[0].Pages != 2*concurrency {
		t.Fatalf("%d followed, %d back to the workflow, downstream %+v; want %d followed and run, %d back", res.Followed, len(res.Out), res.Downstream, 2*concurrency, links-2*concurrency)
	}
}
