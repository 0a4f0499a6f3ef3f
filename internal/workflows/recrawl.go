package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trawlerhq/trawler/crawl"
)

// seedDue queues, on a fresh run, the pages its recrawl steps plan to visit now, most
// overdue first, ahead of anything upstream steps find. Plans without recrawl steps
// issue nothing here. If the claim fails, the run goes on with what its listings find:
// the due pages stay due for the next run.
func (r *runner) seedDue(ctx workflow.Context) {
	if r.in.Seeded || !hasRecrawl(&r.plan) {
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: r.in.TaskQueue, StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	var due []crawl.Routed
	if err := workflow.ExecuteActivity(actx, RecrawlDueActivity, r.plan).Get(ctx, &due); err != nil {
		workflow.GetLogger(ctx).Warn("recrawl: due pages not claimed; this run visits only what its listings find", "err", err)
	}
	now := workflow.Now(ctx)
	for _, d := range due {
		r.queues[d.Step] = append(r.queues[d.Step], Pending{Step: d.Step, Work: crawl.Work{Input: d.Input}, Since: now})
		r.sum.Steps[d.Step].Due++
	}
}

func hasRecrawl(p *crawl.Plan) bool {
	for _, s := range p.Steps {
		if s.Recrawl != nil {
			return true
		}
	}
	return false
}
