package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/workflows"
	"github.com/trawlerhq/trawler/tests/fixture/hn"
)

// TestExampleHistoriesReplay runs the example chains, then replays their histories
// (root and partitions) against the workflow code in this build: a non-deterministic
// change to workflow code fails here. With TRAWLER_RECORD_HISTORIES=1 it also saves the
// histories to internal/workflows/testdata, where workflows' replay test keeps checking that
// future builds can still finish runs started by this one.
func TestExampleHistoriesReplay(t *testing.T) {
	site := startSite(t, demosite.Options{Pages: 2, Faults: map[int]demosite.Fault{4: demosite.FaultStatus500, 6: demosite.FaultRetryAfter}})
	base, stop := hn.Start()
	defer stop()
	runs := map[string]string{}
	runs["demo"] = start(t, plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=2"), taskQueue)
	runs["hackernews"] = start(t, plan(t, "hackernews.yaml", "", "base_url="+base), taskQueue)
	// A chain with a recrawl step starts by claiming its due pages.
	runs["recrawl"] = start(t, plan(t, "recrawl.yaml", "", "base_url="+site, "feed.pages=1"), taskQueue)
	// A run big enough to partition and continue as new.
	p := plan(t, "tree.yaml", `
name: tree
defaults: {batch: 10}
steps:
  - id: node
    task: synth.node
    from: node
    max_depth: 2
    params: {widths: [40, 5]}
`)
	id, err := engine.Start(context.Background(), shared.client, p, engine.RunOptions{TaskQueue: taskQueue,
		Tuning: workflows.Tuning{SplitAt: 30, PartitionSize: 15, ContinueAsNewAt: 60, RetryBase: fast.RetryBase}})
	if err != nil {
		t.Fatal(err)
	}
	runs["tree"] = id
	// A run whose chain budget runs out stops early (quota_reached).
	capped := plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=2")
	capped.Quota.Pages = 5
	runs["quota"] = start(t, capped, taskQueue)
	// A run whose store is missing on the worker waits for it, then ends on max_outage.
	lost := plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=1")
	lost.MaxOutage = 2 * time.Second
	for i := range lost.Steps {
		lost.Steps[i].Store = []string{"mongo"}
	}
	runs["outage"] = start(t, lost, taskQueue)
	for name, id := range runs {
		s := wait(t, id, 2*time.Minute)
		switch name {
		case "quota":
			if s.Status != workflows.StatusQuotaReached {
				t.Errorf("quota run ended %s, want %s", s.Status, workflows.StatusQuotaReached)
			}
		case "outage":
			if s.Status != workflows.StatusOutage || !strings.Contains(s.Reason, "store mongo") {
				t.Errorf("outage run ended %s (%s), want %s naming store mongo", s.Status, s.Reason, workflows.StatusOutage)
			}
		}
	}
	for name, id := range runs {
		keepHistories(t, name, id)
	}
}

// keepHistories replays every workflow history of a run (root, continued runs and
// partitions) against the workflow code in this build, so a non-deterministic change
// fails here. With TRAWLER_RECORD_HISTORIES=<label> it also saves them to
// internal/workflows/testdata/histories as <label>-<name>-NN.json, where the workflows package's
// replay test keeps checking that later builds can finish runs started by this one.
func keepHistories(t *testing.T, name, id string) {
	t.Helper()
	label := os.Getenv("TRAWLER_RECORD_HISTORIES")
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(workflows.ChainWorkflow, workflow.RegisterOptions{Name: workflows.ChainWorkflowName})
	dir := filepath.Join("..", "internal", "workflows", "testdata", "histories")
	index := map[string]workflows.RecordedRun{}
	if b, err := os.ReadFile(filepath.Join(dir, "index.json")); err == nil {
		_ = json.Unmarshal(b, &index) // add to what earlier builds recorded
	}
	histories := historiesOf(t, id)
	if len(histories) == 0 {
		t.Fatalf("no histories for %s", id)
	}
	for i, h := range histories {
		opts := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: h.id, RunID: h.run}}
		if err := replayer.ReplayWorkflowHistoryWithOptions(nil, h.history, opts); err != nil {
			t.Errorf("%s history %d (%s) does not replay: %v", name, i, h.id, err)
		}
		if label == "" {
			continue
		}
		b, err := protojson.MarshalOptions{Indent: " "}.Marshal(h.history)
		if err != nil {
			t.Fatal(err)
		}
		file := fmt.Sprintf("%s-%s-%02d.json", label, name, i)
		index[file] = workflows.RecordedRun{WorkflowID: h.id, RunID: h.run}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: %d workflow histories replayed", name, len(histories))
	if label != "" {
		b, _ := json.MarshalIndent(index, "", " ")
		if err := os.WriteFile(filepath.Join(dir, "index.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type recorded struct {
	id, run string
	history *historypb.History
}

// historiesOf returns the full history of every workflow run of one chain run: the
// root's runs (continued as new) and its partitions', found by workflow id prefix.
func historiesOf(t *testing.T, runID string) []recorded {
	t.Helper()
	var out []recorded
	lengths := waitVisible(t, runID, 1)
	keys := make([]string, 0, len(lengths))
	for key := range lengths {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		id, run, _ := strings.Cut(key, "@")
		var events []*historypb.HistoryEvent
		it := shared.client.GetWorkflowHistory(context.Background(), id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, e)
		}
		out = append(out, recorded{id: id, run: run, history: &historypb.History{Events: events}})
	}
	return out
}
