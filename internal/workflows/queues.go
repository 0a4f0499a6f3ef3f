package workflows

import (
	"strings"

	"github.com/trawlerhq/trawler/crawl"
)

// SiteQueueOf is the task queue a step's batches go to, for workers polling base: the
// render queue (RenderQueue) when the step renders pages, the queue of the step's site
// (base@site) when it has an affinity, else base.
func SiteQueueOf(s crawl.PlanStep, base string) string {
	if s.Render.Renders() {
		return RenderQueue(base)
	}
	if s.Affinity == nil {
		return base
	}
	site, _, _ := strings.Cut(s.Task, ".")
	return base + "@" + site
}

// siteQueues lists the site queues a plan's steps send batches to, for workers of base.
func siteQueues(p *crawl.Plan, base string) []crawl.SiteQueue {
	seen := map[string]bool{}
	var out []crawl.SiteQueue
	for _, st := range p.Steps {
		if q := SiteQueueOf(st, base); st.Affinity != nil && !seen[q] {
			seen[q] = true
			out = append(out, crawl.SiteQueue{Queue: q, Affinity: *st.Affinity})
		}
	}
	return out
}

// RenderQueue is the task queue of the batches of steps that render pages: only
// workers with a browser poll it, so a worker without one never gets them.
func RenderQueue(base string) string { return base + "@render" }
