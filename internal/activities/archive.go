package activities

import (
	"errors"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/archive"
)

// archiveOf is what keeps the exchanges of a step with `archive:`: the worker's writer
// of its destination, for the batch's run and step. A destination the worker cannot
// write fails the batch's inputs with the reason.
func (a *Activities) archiveOf(b crawl.Batch) (fetch.Recorder, error) {
	if b.Step.Archive == nil {
		return nil, nil
	}
	if a.Archives == nil {
		return nil, errors.New("step " + b.Step.ID + " has `archive:`, and this worker keeps no archives")
	}
	w, err := a.Archives.Get(*b.Step.Archive)
	if err != nil {
		return nil, err
	}
	return w.Recorder(archive.Page{Tenant: b.Tenant, RunID: b.RunID, Step: b.Step.ID, Task: b.Step.Task}), nil
}
