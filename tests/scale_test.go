package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/workflows"
	"github.com/trawlerhq/trawler/tests/fixture/synth"
)

const treeChain = `
name: %s
defaults: {batch: 50, concurrency: 50, parallel: 8}
steps:
  - id: node
    task: synth.node
    from: node
    max_depth: %d
    params: {widths: %s}
`

// historyLengths returns the history length of every workflow run (root, partitions,
// and every run continued-as-new) whose id starts with prefix, and the ids of those
// visibility still lists as running.
func historyLengths(t *testing.T, prefix string) (out map[string]int, running []string) {
	t.Helper()
	ctx := context.Background()
	out = map[string]int{}
	var token []byte
	for {
		resp, err := shared.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowType = '%s'", workflows.ChainWorkflowName), PageSize: 1000, NextPageToken: token,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.GetExecutions() {
			id, run := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()
			if !strings.HasPrefix(id, prefix) {
				continue
			}
			if e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				running = append(running, id)
			}
			n := 0
			it := shared.client.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				if _, err := it.Next(); err != nil {
					t.Fatal(err)
				}
				n++
			}
			out[id+"@"+run] = n
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return out, running
		}
	}
}

// waitVisible waits until visibility lists at least n closed runs with the prefix
// (visibility is eventually consistent).
func waitVisible(t *testing.T, prefix string, n int) map[string]int {
	t.Helper()
	var h map[string]int
	var running []string
	// Visibility learns of a run's end a moment after it ended, longer on a loaded
	// machine: a run it still lists as running is looked at again.
	if !poll(30*time.Second, func() bool {
		h, running = historyLengths(t, prefix)
		return len(h) >= n && len(running) == 0
	}) && len(running) > 0 {
		t.Errorf("%v still running", running)
	}
	return h
}

func TestHundredThousandPagesKeepEveryHistoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("the 100,000-page soak runs without -short")
	}
	widths := []int{10, 100, 100}
	p := plan(t, "big.yaml", fmt.Sprintf(treeChain, "big", 3, "[10, 100, 100]"))
	id, err := engine.Start(context.Background(), shared.client, p, engine.RunOptions{TaskQueue: taskQueue, ID: "big-100k", Tuning: fast})
	if err != nil {
		t.Fatal(err)
	}
	s := wait(t, id, 10*time.Minute)
	want := synth.Count(widths...)
	if pages, items, _, failed := s.Totals(); pages != want || items != want || failed != 0 {
		t.Fatalf("summary pages %d items %d failed %d, want %d pages and items", pages, items, failed, want)
	}
	keys := stored(t, id)
	if len(keys) != want {
		t.Fatalf("store holds %d distinct keys, want %d", len(keys), want)
	}
	assertOnce(t, keys)
	if s.Partitions == 0 {
		t.Fatal("no partitions: the run did not spread its backlog over child workflows")
	}
	h := waitVisible(t, "big-100k", 1+s.Partitions)
	longest := 0
	for run, n := range h {
		if n >= 10000 {
			t.Errorf("%s has %d history events, the limit is 10,000", run, n)
		}
		longest = max(longest, n)
	}
	t.Logf("%d pages in %d workflow runs (%d partitions); longest history %d events", want, len(h), s.Partitions, longest)
}

func TestContinueAsNewCarriesTheRunOn(t *testing.T) {
	p := plan(t, "can.yaml", fmt.Sprintf(treeChain, "can", 2, "[20, 30]"))
	tune := fast
	tune.ContinueAsNewAt = 60 // batches of cheap pages grow (cost-sized), so a run has few events
	tune.SplitAt = 100000     // no partitions: this workflow must continue as new instead
	p.Steps[0].Batch = 5
	id, err := engine.Start(context.Background(), shared.client, p, engine.RunOptions{TaskQueue: taskQueue, ID: "can-run", Tuning: tune})
	if err != nil {
		t.Fatal(err)
	}
	s := wait(t, id, 5*time.Minute)
	want := synth.Count(20, 30)
	keys := stored(t, id)
	if len(keys) != want {
		t.Fatalf("stored %d, want %d", len(keys), want)
	}
	assertOnce(t, keys)
	if s.Continued == 0 {
		t.Fatal("the run never continued as new")
	}
	if pages, _, _, _ := s.Totals(); pages != want {
		t.Fatalf("counters lost across continue-as-new: %d pages, want %d", pages, want)
	}
	h := waitVisible(t, "can-run", s.Continued+1)
	if len(h) != s.Continued+1 {
		t.Fatalf("%d runs visible, want %d", len(h), s.Continued+1)
	}
	for run, n := range h {
		if n > 400 {
			t.Errorf("%s has %d events; continue-as-new at 150 should keep it near that", run, n)
		}
	}
}
