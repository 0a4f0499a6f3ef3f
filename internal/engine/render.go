package engine

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch/render"
	"github.com/trawlerhq/trawler/internal/activities"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// addBrowser gives the worker its browser pool and a second Temporal worker polling
// the render queue: the batches of steps that render come only to workers with a
// browser. It takes few of them at once (one per browser, at least two): each runs
// its step's concurrency of pages, which is already more than a browser's tabs, and
// a page waiting for a tab spends its input's timeout.
func (w *Worker) addBrowser(c client.Client, acts *activities.Activities, o WorkerOptions) error {
	bo := *o.Browser
	bo.Log = o.Log
	pool, err := render.NewPool(bo)
	if err != nil {
		return err
	}
	acts.Render = &activities.Rendering{Pool: pool, Screenshots: filepath.Join(o.OutDir, "screenshots")}
	po := pool.Options()
	rw := worker.New(c, workflows.RenderQueue(o.TaskQueue), worker.Options{
		MaxConcurrentActivityExecutionSize: max(1, min(o.MaxBatches, max(2, po.Browsers))), Identity: o.Identity,
		DisableWorkflowWorker: true, WorkerStopTimeout: 5 * time.Second,
	})
	RegisterBatches(rw, acts)
	w.renderer, w.browsers = rw, pool
	o.Log.Info("browser pool ready", "browser", po.Path, "browsers", po.Browsers, "tabs", po.Tabs, "bound_mb", po.BoundMB())
	return nil
}

// renderSteps lists a plan's steps that render pages, comma-separated.
func renderSteps(p *crawl.Plan) string {
	var ids []string
	for _, st := range p.Steps {
		if st.Render.Renders() {
			ids = append(ids, st.ID)
		}
	}
	return strings.Join(ids, ",")
}

// waitingForBrowser says which batches of rendering steps no worker has taken for a
// while: none with a browser polls the render queue (a worker without one never
// takes them).
func waitingForBrowser(pending []*workflowpb.PendingActivityInfo, steps string) []string {
	if steps == "" {
		return nil
	}
	var out []string
	for _, pa := range pending {
		step, _, _ := strings.Cut(pa.GetActivityId(), "/")
		waited := time.Since(pa.GetScheduledTime().AsTime())
		if pa.GetState() != enumspb.PENDING_ACTIVITY_STATE_SCHEDULED || pa.GetLastFailure() != nil || waited < 5*time.Second ||
			!slices.Contains(strings.Split(steps, ","), step) {
			continue
		}
		out = append(out, fmt.Sprintf("batch %s waits %s for a worker with a browser: step %s renders pages, and no worker polls the render queue (<task queue>@render); start one with `trawler worker --browser PATH` (Debian's chromium)",
			pa.GetActivityId(), waited.Round(time.Second), step))
	}
	return out
}
