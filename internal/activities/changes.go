package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/changes"
	"github.com/trawlerhq/trawler/internal/dedup"
)

// The change events of a step with `changes: kafka` (internal/changes): the changes
// stage of the item pipeline, after write and before record, sends one for each stored
// record dedup judged changed and notes the records of the pages a recrawl step
// visited; summarizeStep sends one for each record of a page that is gone.

// checkChanges refuses a step with `changes: kafka` on a worker that cannot send its
// events, or when the step does not write the HBase its old values come from.
func (a *Activities) checkChanges(step crawl.PlanStep) error {
	if step.Changes == "" {
		return nil
	}
	if a.Changes == nil {
		return errors.New("step " + step.ID + " has `changes: kafka`, and this worker cannot send change events: start it with --kafka (where they go), --hbase (where old values come from) and --redis")
	}
	if !slices.Contains(step.Store, "hbase") {
		return fmt.Errorf("step %s has `changes: kafka`, which reads the old values of changed records from HBase, and it stores in %v only; add hbase to its store", step.ID, step.Store)
	}
	return nil
}

// changedKeys are the canonical keys of the group's items dedup judged changed.
func changedKeys(group []outcome, verdicts []dedup.Verdict) map[string]bool {
	keys := map[string]bool{}
	k := 0
	for _, o := range group {
		for _, it := range o.result.Items {
			if k < len(verdicts) && verdicts[k].State == dedup.Changed {
				keys[crawl.ItemKey(it.Key)] = true
			}
			k++
		}
	}
	return keys
}

// changesStep is where a batch's events come from.
func changesStep(b crawl.Batch) changes.Step {
	return changes.Step{Tenant: b.Tenant, Biz: b.Step.RecordBiz(), RunID: b.RunID, ID: b.Step.ID}
}

// publishChanges is the changes stage, once per group.
func (a *Activities) publishChanges(ctx context.Context, b crawl.Batch, group []outcome) error {
	if b.Step.Changes == "" || a.Changes == nil || group[0].passed(changesStage) {
		return nil
	}
	var items []crawl.Item
	var pages []changes.Page
	for _, o := range group {
		for _, it := range o.kept {
			if o.changed[crawl.ItemKey(it.Key)] {
				items = append(items, it)
			}
		}
		if b.Step.Recrawl != nil && len(o.kept) > 0 {
			pg := changes.Page{Input: o.input}
			for _, it := range o.result.Items {
				pg.Keys = append(pg.Keys, it.Key)
			}
			pages = append(pages, pg)
		}
	}
	st := changesStep(b)
	if err := a.Changes.Changed(ctx, st, items); err != nil {
		return err
	}
	if err := a.Changes.Remember(ctx, st, pages); err != nil {
		return err
	}
	group[0].pass(changesStage)
	return nil
}

// changesStage is the changes stage's name among a group's passed stages.
const changesStage = "\x00changes"

// publishRemoved sends the removed events of the pages a recrawl step gave up on
// because the site says they are gone.
func (a *Activities) publishRemoved(ctx context.Context, b crawl.Batch, gone []changes.Gone) error {
	if b.Step.Changes == "" || b.Step.Recrawl == nil || a.Changes == nil {
		return nil
	}
	return a.Changes.Removed(ctx, changesStep(b), gone)
}

// goneStatus is the status a gone page answered.
func goneStatus(c crawl.Cause) int {
	if c == crawl.CauseHTTP410 {
		return 410
	}
	return 404
}
