package workflows_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/trawlerhq/trawler/internal/workflows"
)

// TestRecordedHistoriesReplay replays histories recorded by earlier builds (the example
// chains: paging, fan-out with each, retries with Retry-After, partitions, continue-as-
// new) against this build's workflow code. A change that would break runs already in
// flight fails here: guard it with workflow.GetVersion (see README, "Changing workflow
// code"). Refresh the recordings with
//
//	TRAWLER_RECORD_HISTORIES=1 go test ./tests -run ExampleHistoriesReplay
func TestRecordedHistoriesReplay(t *testing.T) {
	dir := filepath.Join("testdata", "histories")
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index map[string]workflows.RecordedRun
	if err := json.Unmarshal(b, &index); err != nil {
		t.Fatal(err)
	}
	if len(index) < 3 {
		t.Fatalf("only %d recorded histories", len(index))
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(workflows.ChainWorkflow, workflow.RegisterOptions{Name: workflows.ChainWorkflowName})
	for file, run := range index {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		var h historypb.History
		if err := protojson.Unmarshal(data, &h); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		opts := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: run.WorkflowID, RunID: run.RunID}}
		if err := r.ReplayWorkflowHistoryWithOptions(nil, &h, opts); err != nil {
			t.Errorf("%s (%s): %v", file, run.WorkflowID, err)
		}
	}
}
