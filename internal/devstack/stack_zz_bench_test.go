package devstack

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

func fanOut(ctx workflow.Context, n int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var fs []workflow.Future
	for i := 0; i < n; i++ {
		fs = append(fs, workflow.ExecuteActivity(ctx, noop, i))
	}
	sum := 0
	for _, f := range fs {
		var v int
		if err := f.Get(ctx, &v); err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

func noop(ctx context.Context, i int) (int, error) { return i, nil }

func TestZZThroughput(t *testing.T) {
	ctx := context.Background()
	st, err := StartTemporal(ctx, Options{DataDir: t.TempDir(), UIPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	c, err := client.Dial(client.Options{HostPort: st.Endpoints.Temporal, Logger: quietSDKLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := worker.New(c, "tp", worker.Options{MaxConcurrentActivityExecutionSize: 1000, MaxConcurrentActivityTaskPollers: 16, MaxConcurrentWorkflowTaskPollers: 8})
	w.RegisterWorkflow(fanOut)
	w.RegisterActivity(noop)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const wfs, per = 40, 100
	begin := time.Now()
	var runs []client.WorkflowRun
	for i := 0; i < wfs; i++ {
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "tp"}, fanOut, per)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	for _, r := range runs {
		if err := r.Get(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	d := time.Since(begin)
	t.Logf("%d activities in %v = %.0f/s", wfs*per, d, float64(wfs*per)/d.Seconds())
}
