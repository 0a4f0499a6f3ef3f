package engine

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/internal/workflows"
)

// recentRuns is the activity (workflows.RecentRunsActivity) that reads the step counts of
// a chain's last runs that completed with outcome completed, newest first: the history
// its expectations compare a run with. Runs with violations, partial or failed ones are
// left out, so one bad run does not lower the bar for the next.
func recentRuns(c client.Client) func(context.Context, workflows.RecentRunsRequest) ([]workflows.PastRun, error) {
	return func(ctx context.Context, req workflows.RecentRunsRequest) ([]workflows.PastRun, error) {
		runs, err := ListRuns(ctx, c, ListOptions{Chain: req.Chain, Tenant: req.Tenant, State: "completed", Limit: 3 * req.Last})
		if err != nil {
			return nil, err
		}
		var out []workflows.PastRun
		for _, r := range runs {
			if len(out) == req.Last {
				break
			}
			if r.RunID == req.RunID {
				continue
			}
			var s workflows.Summary
			if err := c.GetWorkflow(ctx, r.RunID, "").Get(ctx, &s); err != nil {
				return nil, fmt.Errorf("read the summary of run %s: %w", r.RunID, err)
			}
			if s.Outcome != workflows.OutcomeCompleted {
				continue
			}
			p := workflows.PastRun{RunID: r.RunID, Items: map[string]int{}}
			for _, st := range s.Steps {
				p.Items[st.ID] = st.Items + st.Unchanged
			}
			out = append(out, p)
		}
		return out, nil
	}
}
