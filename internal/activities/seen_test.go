package activities

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/seen"
	"github.com/trawlerhq/trawler/internal/storage"
)

// withSeenSet gives activities that run tasks with a run's seen-set (on miniredis) and
// store in a jsonl sink "lists".
func withSeenSet(t *testing.T, tasks ...crawl.Task) (*Activities, *seen.Set) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	set, err := seen.Open(context.Background(), rdb, seen.Config{Expected: 1000})
	if err != nil {
		t.Fatal(err)
	}
	reg := crawl.NewRegistry()
	for _, task := range tasks {
		reg.Register(task)
	}
	return &Activities{Registry: reg, Sinks: storage.Set{"lists": newFlaky(t, "lists")}, Seen: set,
		Fetcher: fetch.New(fetch.Options{AllowPrivate: true, Retries: -1, MaxRetryWait: -1})}, set
}

// An input another batch handed back (crawl.Input.Claim) has its outputs claimed as
// that batch: the links a dead attempt of it claimed are handed on, not dropped as seen.
// The same input without the claim finds them taken. An input that leaves a batch to be
// retried carries the batch's claim, and so does an output its batch had claimed before.
func TestHandedBackInputsClaimAsTheirBatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		for i := range 3 {
			fmt.Fprintf(w, `<a class="detail" href="/d%d">d%d</a>`, i, i)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	a, set := withSeenSet(t, listTask, titleTask)
	list := crawl.PlanStep{ID: "list", Task: "follow.list", Timeout: time.Second, Concurrency: 2, Retries: 2, Store: []string{"lists"},
		Consumers: []crawl.Consumer{{Step: 1, ID: "detail", Task: titleTask.Spec().Name}}}
	batch := func(run string, in crawl.Input) crawl.Batch {
		return crawl.Batch{Chain: "seen", Tenant: "t", RunID: run, Step: list, StepIdx: 0, Work: []crawl.Work{{Input: in}}}
	}
	// A batch that died after fetching the list claimed its three links.
	var keys []string
	for i := range 3 {
		k, _ := seenKey(1, crawl.Input{URL: fmt.Sprintf("%s/d%d", srv.URL, i)})
		keys = append(keys, k)
	}
	// In r1 it had claimed two of them, in r2 all three.
	if _, err := set.Claimer("shop", "r1", "wf/list/7").Claim(ctx, keys[:2]); err != nil {
		t.Fatal(err)
	}
	if _, err := set.Claimer("shop", "r2", "wf/list/7").Claim(ctx, keys); err != nil {
		t.Fatal(err)
	}

	res, err := runBatchActivity(t, a, batch("r1", crawl.Input{URL: srv.URL + "/list", Claim: "wf/list/7"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Out) != 3 || len(res.Duplicates) > 1 && res.Duplicates[1] != 0 {
		t.Errorf("handed back with the dead batch's claim: %d links handed on, duplicates %v; want 3 and none", len(res.Out), res.Duplicates)
	}
	// The dead batch may have run what it claimed: those go on with its claim, so what
	// it claimed from them is handed on too; the link no one had claimed carries none.
	var claims []string
	for _, out := range res.Out {
		claims = append(claims, strings.TrimPrefix(out.Input.URL, srv.URL)+"="+out.Input.Claim)
	}
	if fmt.Sprint(claims) != "[/d0=wf/list/7 /d1=wf/list/7 /d2=]" {
		t.Errorf("outputs and their claims %v; want /d0 and /d1 with wf/list/7, /d2 with none", claims)
	}

	res, err = runBatchActivity(t, a, batch("r2", crawl.Input{URL: srv.URL + "/list"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Out) != 0 || len(res.Duplicates) < 2 || res.Duplicates[1] != 3 {
		t.Errorf("without the claim: %d links handed on, duplicates %v; want 0 and 3 for step 1", len(res.Out), res.Duplicates)
	}

	res, err = runBatchActivity(t, a, batch("r3", crawl.Input{URL: srv.URL + "/down"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Retry) != 1 || res.Retry[0].Input.Claim == "" {
		t.Fatalf("a failed input to retry: %+v; want it back with the batch's claim", res.Retry)
	}
}

// rowIDs is a list page's item whose ids an each: step takes.
type rowIDs struct {
	IDs []string `json:"ids"`
}

var rowsTask = crawl.HTMLTask("seen.rows", func(p *crawl.Page, out *crawl.Out[rowIDs]) error {
	p.FollowAll("a.detail", "detail")
	out.Item("rows:"+p.URL, &rowIDs{IDs: []string{"a", "b"}})
	return nil
})

// Pages that finish at once claim their links ahead, side by side, and the links an
// each: step takes from their items when their group is stored: each link still goes on
// once, whichever page led to it first, and every other is counted a duplicate of its step.
func TestPagesFinishingTogetherHandOnEachLinkOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 5 {
			fmt.Fprintf(w, `<a class="detail" href="/d%d">d%d</a>`, i, i)
		}
	}))
	defer srv.Close()
	a, _ := withSeenSet(t, rowsTask)
	list := crawl.PlanStep{ID: "list", Task: "seen.rows", Timeout: time.Second, Concurrency: 4, Store: []string{"lists"},
		Consumers: []crawl.Consumer{{Step: 1, ID: "detail", Task: "detail"}, {Step: 2, ID: "row", Each: "ids"}}}
	var work []crawl.Work
	for i := range 8 {
		work = append(work, crawl.Work{Input: crawl.Input{URL: fmt.Sprintf("%s/list%d", srv.URL, i)}})
	}
	res, err := runBatchActivity(t, a, crawl.Batch{Chain: "seen", Tenant: "t", RunID: "r1", Step: list, Work: work})
	if err != nil {
		t.Fatal(err)
	}
	handed := map[string]int{}
	for _, out := range res.Out {
		what := strings.TrimPrefix(out.Input.URL, srv.URL)
		if out.Input.Value != nil {
			what = fmt.Sprint(out.Input.Value)
		}
		handed[fmt.Sprint(out.Step, " ", what)]++
	}
	want := map[string]int{"1 /d0": 1, "1 /d1": 1, "1 /d2": 1, "1 /d3": 1, "1 /d4": 1, "2 a": 1, "2 b": 1}
	if fmt.Sprint(handed) != fmt.Sprint(want) {
		t.Errorf("handed on %v; want each link once: %v", handed, want)
	}
	if fmt.Sprint(res.Duplicates) != "[0 35 14]" {
		t.Errorf("duplicates per step %v; want [0 35 14] (8 pages × 5 links − 5, 8 × 2 ids − 2)", res.Duplicates)
	}
}
