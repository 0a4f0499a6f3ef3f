package activities

import (
	"context"
	"errors"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/affinity"
)

// RegisterSites tells the workers which site queues a run sends batches to, so they
// probe those sites and poll the queues of the ones they reach well. Its registered
// name is workflows.RegisterSitesActivity.
func (a *Activities) RegisterSites(ctx context.Context, sites []crawl.SiteQueue) error {
	if a.Sites == nil {
		return errors.New("this worker has no Redis (--redis): it cannot register site queues; steps with an affinity need the Redis all workers share")
	}
	regs := make([]affinity.Site, len(sites))
	for i, s := range sites {
		regs[i] = affinity.Site{SiteQueue: s}
	}
	return a.Sites.Register(ctx, regs)
}
