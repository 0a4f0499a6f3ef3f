package tests

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// The ring shop on three worker processes, with the worker running the list batch —
// which follows the ring category after category — SIGKILLed mid-ring. The batch is
// retried on another worker from the checkpoint its last heartbeat left on the server.
//
// What may be fetched twice, and nothing else: the category pages the killed attempt
// fetched after that checkpoint. Their outcomes died with the worker, so the retry runs
// them again; they are exactly the pages the site had served by the kill that the
// checkpoint does not hold as done, and no page is fetched more than twice. The
// checkpointed part is never fetched again. The product pages are fetched once each:
// the killed attempt handed nothing on (its outputs go back only with its result), its
// claims in the seen-set are the batch's own and so the retry's, and the products the
// checkpoint already lists as handed on are not handed on again when a category page
// run again lists them. The counts are exact, as in the run without a kill: the killed
// attempt's uncheckpointed counts died with it. Every product is stored once.
func TestRingShopKilledWorkerRefetchesOnlyUncheckpointedPages(t *testing.T) {
	bin := buildTrawler(t)
	// 150 ms a page: the list batch follows the ring for over four seconds and
	// heartbeats its checkpoint on the way.
	shop := newRingShop(30, 30, 150*time.Millisecond)
	srv := httptest.NewServer(shop)
	defer srv.Close()
	const queue = "seen-kill"
	out := filepath.Join(shared.dir, "seen-kill-out")
	workers := map[int]*exec.Cmd{}
	for range 3 {
		w := workerProcess(t, bin, queue, out)
		workers[w.Process.Pid] = w
	}
	id := start(t, plan(t, "ring-shop.yaml", ringChain(srv.URL, "")), queue)

	// The kill comes once the server holds a checkpoint with category pages the batch
	// followed, so there is a checkpointed part that must not be fetched again.
	victim, batch := runningBatch(t, id, workers, "list/")
	eventually(t, time.Minute, "batch "+batch+" checkpointing followed category pages", func() bool { return len(checkpointedDone(t, id, batch)) >= 3 })
	if err := workers[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = workers[victim].Wait()
	before := shop.served()
	// Read before the retry can start (a heartbeat timeout later), this is at most what
	// the retry resumes from: a page it holds as done is done for the retry too.
	done := checkpointedDone(t, id, batch)
	t.Logf("killed worker %d running %s after %d category pages; its checkpoint holds %d as done", victim, batch, countPrefix(before, "/cat/"), len(done))

	s := wait(t, id, 3*time.Minute)
	noFailures(t, s)
	if attempt, by := finalAttempt(t, id, batch); attempt < 2 || strings.HasPrefix(by, fmt.Sprintf("%d@", victim)) {
		t.Errorf("batch %s finished in attempt %d by %q; want a retry on another worker", batch, attempt, by)
	}
	hits := shop.served()
	again := 0
	for c := 1; c <= shop.categories; c++ {
		path := fmt.Sprintf("/cat/%d", c)
		switch n := hits[path]; {
		case n == 1:
		case n == 2 && before[path] > 0 && !done[path]:
			again++
		case n == 2 && done[path]:
			t.Errorf("%s fetched twice though the killed batch had checkpointed it as done", path)
		default:
			t.Errorf("%s fetched %d times (%d before the kill); want once, or twice if the killed attempt fetched it after its checkpoint", path, n, before[path])
		}
	}
	for p := 1; p <= shop.products; p++ {
		if n := hits[fmt.Sprintf("/product/%d", p)]; n != 1 {
			t.Errorf("/product/%d fetched %d times, want once", p, n)
		}
	}
	t.Logf("%d category pages fetched again by the retry, at most the %d the killed attempt fetched after its checkpoint",
		again, countPrefix(before, "/cat/")-len(done))
	assertRingCounts(t, shop, s)
	js, err := jsonl.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	assertRingStored(t, shop, sinkItems(t, js, id))
}

// The ring shop with one list batch per category page (no following) and a workflow
// that continues as new every few dozen history events: the run continues as new
// several times while it is still discovering, and still fetches every page once, with
// the same duplicate counts as in one workflow run. The seen-set is the run's, not the
// workflow run's.
func TestRingShopContinueAsNewFetchesEveryPageOnce(t *testing.T) {
	shop := newRingShop(10, 50, 0)
	srv := httptest.NewServer(shop)
	defer srv.Close()
	p := plan(t, "ring-shop.yaml", ringChain(srv.URL, "    batch: 5\n"))
	tune := fast
	tune.ContinueAsNewAt = 40
	tune.FollowInputs = -1
	id := startTuned(t, p, taskQueue, tune)
	first := currentRun(t, id)
	waitServed(t, shop, fmt.Sprintf("/cat/%d", shop.categories))
	if currentRun(t, id) == first {
		t.Errorf("the run had not continued as new by its last category page")
	}
	s := wait(t, id, 3*time.Minute)
	noFailures(t, s)
	if s.Continued < 3 {
		t.Errorf("the run continued as new %d times, want several", s.Continued)
	}
	assertRingFetchedOnce(t, shop, s)
	assertRingStored(t, shop, items(t, id))
}

// The ring shop with `follow: true` on the product step: the list batch runs product
// pages itself, as many as the step's concurrency starts at once, and hands the rest
// back. Every page is still fetched once, and the counts are those of the run without
// following.
func TestRingShopFollowFetchesEveryPageOnce(t *testing.T) {
	shop := newRingShop(10, 50, 0)
	srv := httptest.NewServer(shop)
	defer srv.Close()
	id := start(t, plan(t, "ring-shop.yaml", ringChain(srv.URL, "    follow: true\n    concurrency: 4\n")), taskQueue)
	s := wait(t, id, 2*time.Minute)
	noFailures(t, s)
	assertRingFetchedOnce(t, shop, s)
	assertRingStored(t, shop, items(t, id))
	handed := 0
	for _, b := range scheduledBatches(t, id, "product/") {
		handed += len(b.Work)
	}
	if handed >= shop.products {
		t.Errorf("product batches were handed %d inputs: the list batch followed none of the %d products", handed, shop.products)
	}
	t.Logf("%d of %d product pages run in the list batch", shop.products-handed, shop.products)
}

// waitServed waits until the site has served path.
func waitServed(t *testing.T, shop *ringShop, path string) {
	t.Helper()
	eventually(t, 2*time.Minute, "the site serving "+path, func() bool { return shop.served()[path] > 0 })
}

// currentRun is the id of the workflow run a run is in now.
func currentRun(t *testing.T, id string) string {
	t.Helper()
	d, err := shared.client.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// checkpointedDone is the set of paths a running batch's last heartbeat checkpointed
// as done: its own inputs, then those it followed, by the checkpoint's index ranges.
func checkpointedDone(t *testing.T, runID, activityID string) map[string]bool {
	t.Helper()
	d, err := shared.client.DescribeWorkflowExecution(context.Background(), runID, "")
	if err != nil {
		t.Fatal(err)
	}
	var cp struct {
		Done     [][2]int     `json:"done"`
		Followed []crawl.Work `json:"followed"`
	}
	for _, pa := range d.GetPendingActivities() {
		if pa.GetActivityId() == activityID && pa.GetHeartbeatDetails() != nil {
			if err := converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &cp); err != nil {
				t.Fatalf("checkpoint of %s: %v", activityID, err)
			}
		}
	}
	b, ok := scheduledBatches(t, runID, activityID)[activityID]
	if !ok {
		t.Fatalf("no batch %s in the history of %s", activityID, runID)
	}
	inputs := append(b.Work, cp.Followed...)
	done := map[string]bool{}
	for _, r := range cp.Done {
		for i := r[0]; i <= r[1] && i < len(inputs); i++ {
			u, err := url.Parse(inputs[i].Input.URL)
			if err != nil {
				t.Fatal(err)
			}
			done[u.Path] = true
		}
	}
	return done
}

// scheduledBatches decodes the batches a run's current workflow run scheduled whose
// activity ids start with prefix, by activity id.
func scheduledBatches(t *testing.T, runID, prefix string) map[string]crawl.Batch {
	t.Helper()
	out := map[string]crawl.Batch{}
	it := shared.client.GetWorkflowHistory(context.Background(), runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && workflows.IsBatchActivity(a.GetActivityType().GetName()) &&
			strings.HasPrefix(a.GetActivityId(), prefix) {
			var b crawl.Batch
			if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &b); err != nil {
				t.Fatalf("batch %s: %v", a.GetActivityId(), err)
			}
			out[a.GetActivityId()] = b
		}
	}
	return out
}
