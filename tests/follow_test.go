package tests

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// A worker SIGKILLed while its batch follows the feed page after page, and the stories
// of those pages (story: follow: true), and their comments pages in the story batches:
// the batch is retried on another worker from its checkpoint (the pages and stories it
// followed included), the run completes, and every store holds each item exactly once.
// The feed took far fewer activities than it has pages, so the pages were followed on
// the worker.
func TestKilledWorkerMidFollowLosesNothing(t *testing.T) {
	bin := buildTrawler(t)
	k, m := hotReaders(t)
	const feedPages = 30
	// 80 ms a page: the feed batch follows its pages for over two seconds.
	o := demosite.Options{Pages: feedPages, PerPage: 3, Latency: 80 * time.Millisecond}
	site := startSite(t, o)
	const queue = "follow-kill-test"
	out := filepath.Join(shared.dir, "follow-kill-out")
	workers := map[int]*exec.Cmd{}
	for range 3 {
		w := workerProcess(t, bin, queue, out, "--kafka", strings.Join(hot.kafka, ","), "--mongo", hot.mongo)
		workers[w.Process.Pid] = w
	}
	p := storeHot(plan(t, "demo.yaml", "", "base_url="+site, fmt.Sprintf("feed.pages=%d", feedPages)))
	p.Steps[1].Follow, p.Steps[2].Follow = true, true
	id := start(t, p, queue)

	victim, batch := runningBatch(t, id, workers, "feed/")
	// The kill comes once a checkpoint holds followed pages done (more than the batch
	// was handed), so the retry has a checkpointed part to skip.
	handed := len(scheduledBatches(t, id, batch)[batch].Work)
	eventually(t, time.Minute, "batch "+batch+" checkpointing followed pages", func() bool {
		return len(checkpointedDone(t, id, batch)) > handed
	})
	if err := workers[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = workers[victim].Wait()
	t.Logf("killed worker %d while it ran %s", victim, batch)

	s := wait(t, id, 3*time.Minute)
	if _, _, _, failed := s.Totals(); failed != 0 {
		t.Errorf("%d inputs failed: %+v", failed, s.Failures)
	}
	if attempt, by := finalAttempt(t, id, batch); attempt < 2 || strings.HasPrefix(by, fmt.Sprintf("%d@", victim)) {
		t.Errorf("batch %s finished in attempt %d by %q; want a retry on another worker", batch, attempt, by)
	}
	// A story the killed attempt stored but had not checkpointed yet is run again and
	// found unchanged: stored once, counted as unchanged.
	stories, _ := demosite.Expected(o, feedPages)
	if feed, story := s.Steps[0], s.Steps[1]; feed.Pages != feedPages || story.Pages != stories || story.Items+story.Unchanged != stories {
		t.Errorf("feed step ran %d pages, story step %d pages with %d items (%d unchanged); want %d, then %d and %d", feed.Pages, story.Pages, story.Items, story.Unchanged, feedPages, stories, stories)
	}
	js, err := jsonl.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	assertHotStored(t, id, o, feedPages, js, k, m)
	if n := batchesOf(t, id, "feed/"); n >= feedPages/2 {
		t.Errorf("the feed's %d pages took %d activities; following should need a few", feedPages, n)
	} else {
		t.Logf("the feed's %d pages took %d activities", feedPages, n)
	}
}

// batchesOf counts the batch activities a run scheduled for the step whose activity ids
// start with prefix.
func batchesOf(t *testing.T, runID, prefix string) int {
	t.Helper()
	n := 0
	it := shared.client.GetWorkflowHistory(context.Background(), runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && strings.HasPrefix(a.GetActivityId(), prefix) {
			n++
		}
	}
	return n
}

// Following changes how many hops go through the server, nothing else: the demo chain
// under a page budget that is not a multiple of the lease block, behind a per-host rate
// limit, then in full (dedup stores only what the budget left), then again (everything
// unchanged) gives the same counts with and without following, with the feed's stories
// and the stories' comments followed too (follow: true).
func TestFollowingChangesNothingButHops(t *testing.T) {
	const feedPages, budget = 8, 47
	o := demosite.Options{Pages: feedPages, PerPage: 5}
	site := startSite(t, o)
	stories, comments := demosite.Expected(o, feedPages)
	queue := "follow-same"
	polite := fastFetch
	polite.RateLimit = 400 // requests per second to the site, the whole worker
	testWorker(t, engine.WorkerOptions{TaskQueue: queue, MaxBatches: 4, Redis: shared.redis.Addr(), Fetch: polite, Identity: "follow-same"})

	type counts struct {
		Status                  string
		Pages, Items, Unchanged int
	}
	crawlThrice := func(tenant string, follow int) (out [3]counts) {
		tune := fast
		tune.FollowInputs = follow
		for i := range out {
			p := plan(t, "demo.yaml", "", "base_url="+site, fmt.Sprintf("feed.pages=%d", feedPages))
			p.Tenant = tenant
			p.Steps[1].Follow, p.Steps[2].Follow = true, true
			if i == 0 {
				p.Quota = crawl.Quota{Pages: budget}
			}
			s := wait(t, startTuned(t, p, queue, tune), 2*time.Minute)
			pages, items, _, failed := s.Totals()
			if failed != 0 {
				t.Fatalf("%s run %d: %d failed: %+v", tenant, i+1, failed, s.Failures)
			}
			out[i] = counts{Status: s.Status, Pages: pages, Items: items, Unchanged: s.Unchanged()}
		}
		return out
	}
	on := crawlThrice("follow-on", 0)
	off := crawlThrice("follow-off", -1)
	t.Logf("followed %+v, not followed %+v", on, off)
	for i, name := range []string{"under the budget", "in full", "again"} {
		if on[i].Status != off[i].Status || on[i].Pages != off[i].Pages {
			t.Errorf("%s: followed %+v, not followed %+v", name, on[i], off[i])
		}
	}
	if on[0].Status != workflows.StatusQuotaReached || on[0].Pages != budget {
		t.Errorf("under a budget of %d pages: %+v", budget, on[0])
	}
	for _, c := range [][3]counts{on, off} {
		if c[0].Items+c[1].Items != stories+comments || c[2].Items != 0 || c[2].Unchanged != stories+comments {
			t.Errorf("items %d + %d then %d (%d unchanged); want %d in all, then 0 with every one unchanged",
				c[0].Items, c[1].Items, c[2].Items, c[2].Unchanged, stories+comments)
		}
	}
}
