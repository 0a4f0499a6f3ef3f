package workflows

import (
	"strings"

	"trawler/crawl"
)

// SiteQueueOf is the task queue a step's batches go to, for workers polling base: the
// queue of the step's site (base@site) when the step has an affinity, else base.
func SiteQueueOf(s crawl.PlanStep, base string) string {
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
