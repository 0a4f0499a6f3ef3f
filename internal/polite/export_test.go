package polite

import (
	"context"
	"time"

	"github.com/trawlerhq/trawler/fetch"
)

// TakeSlots asks Redis for up to want slots of bud at once, as Take's one request per
// worker and host does for the others waiting, and returns how many it was granted.
func (f *Fleet) TakeSlots(ctx context.Context, bud fetch.Budget, want int) (int, error) {
	ls, _, _, _, err := f.take(ctx, f.budget(bud.Key), bud, time.Time{}, false, want)
	return len(ls), err
}
