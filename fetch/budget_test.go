package fetch_test

import (
	"testing"
	"time"

	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/budgettest"
)

func localBudget(key string) fetch.Budget {
	return fetch.Budget{Key: "http://" + key + ".test:80", Concurrency: 1, Lease: time.Minute, PauseWait: time.Second}
}

// An urgent request (the next page of a paged list) takes the host's next free slot
// before the requests that were waiting already; the host's limit holds throughout.
func TestUrgentRequestsGoFirst(t *testing.T) {
	budgettest.UrgentGoesFirst(t, fetch.LocalBudgets(), localBudget("urgent"))
}

func TestUrgentRequestsDoNotStarveTheRest(t *testing.T) {
	budgettest.UrgentDoesNotStarve(t, fetch.LocalBudgets(), localBudget("starve"))
}
