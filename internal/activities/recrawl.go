package activities

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/recrawl"
)

// Steps with a `recrawl:` policy visit a page when its plan says it is due (see
// internal/recrawl). Three hooks make that so:
//
//   - RecrawlDue, an activity each run starts with, claims the due pages of its recrawl
//     steps, which become those steps' first inputs;
//   - skipPlanned, in the item pipeline's route stage, drops inputs an upstream step
//     hands a recrawl step when the step already plans that page: it comes when due;
//   - replan, after the record stage, plans each page a recrawl step visited from
//     dedup's verdicts on its records;
//   - forgetGone, as a batch gives up on inputs, drops the plans of pages that are gone
//     for good (404, 410): the listing hands them on again if they come back.

// recrawlNamespace is where a step's plans live: per tenant and biz, like dedup's.
func recrawlNamespace(tenant, biz string) string { return tenant + ":" + biz }

// RecrawlDue claims, for every recrawl step of the plan, up to its per_run pages that
// are due now, most overdue first, and returns them as inputs of those steps. Its
// registered name is workflows.RecrawlDueActivity.
func (a *Activities) RecrawlDue(ctx context.Context, plan crawl.Plan) ([]crawl.Routed, error) {
	if a.Recrawl == nil {
		return nil, errors.New("this worker has no Redis (--redis): it keeps no recrawl plans, so it cannot tell which pages are due")
	}
	var out []crawl.Routed
	for i, s := range plan.Steps {
		if s.Recrawl == nil {
			continue
		}
		due, err := a.Recrawl.Claim(ctx, recrawlNamespace(plan.Tenant, s.RecordBiz()), *s.Recrawl, s.Recrawl.PerRun)
		if err != nil {
			return out, err
		}
		for _, in := range due {
			out = append(out, crawl.Routed{Step: i, Input: withCredentials(in, s.Params)})
		}
	}
	return out, nil
}

// withCredentials gives a claimed page the user info that a URL among the step's
// params (a base_url with user:password@) has for the page's scheme and host. Plans
// keep no user info, so a revisit goes out with the credentials the chain gives now.
func withCredentials(in crawl.Input, params map[string]any) crawl.Input {
	page, err := url.Parse(in.URL)
	if err != nil || page.User != nil || page.Host == "" {
		return in
	}
	for _, name := range slices.Sorted(maps.Keys(params)) {
		s, ok := params[name].(string)
		if !ok || !strings.Contains(s, "@") {
			continue
		}
		if p, err := url.Parse(s); err == nil && p.User != nil && p.Scheme == page.Scheme && p.Host == page.Host {
			page.User = p.User
			in.URL = page.String()
			return in
		}
	}
	return in
}

// skipPlanned drops, from what the inputs of a group hand on, the inputs of recrawl
// steps whose page already has a plan. If Redis does not answer, they go on: a page
// visited once too often costs a fetch, never a record.
func (a *Activities) skipPlanned(ctx context.Context, b crawl.Batch, group []outcome) {
	if a.Recrawl == nil {
		return
	}
	bizs := map[int]string{}
	for _, c := range b.Step.Consumers {
		if c.Recrawl {
			bizs[c.Step] = c.RecordBiz()
		}
	}
	if len(bizs) == 0 {
		return
	}
	for step, biz := range bizs {
		var ins []crawl.Input
		for _, o := range group {
			for _, r := range o.Out {
				if r.Step == step {
					ins = append(ins, r.Input)
				}
			}
		}
		known, err := a.Recrawl.Known(ctx, recrawlNamespace(b.Tenant, biz), ins)
		if err != nil {
			a.Log.Warn("recrawl: cannot tell planned pages from new ones; visiting all", "chain", b.Chain, "step", b.Step.ID, "err", err)
			return
		}
		k := 0
		for p := range group {
			o := &group[p]
			kept := o.Out[:0]
			for _, r := range o.Out {
				if r.Step == step {
					k++
					if known[k-1] {
						continue
					}
				}
				kept = append(kept, r)
			}
			o.Out = kept
		}
	}
}

// replan plans each page the group visited, once per group: a page whose records
// include a new or changed one (stored, or kept out by a budget) found a change.
func (a *Activities) replan(ctx context.Context, b crawl.Batch, group []outcome) error {
	if a.Recrawl == nil || b.Step.Recrawl == nil || group[0].passed(replanStage) {
		return nil
	}
	visits := make([]recrawl.Visit, len(group))
	for p, o := range group {
		visits[p] = recrawl.Visit{Input: o.input, Changed: len(o.kept)+len(o.dropped) > 0}
	}
	if err := a.Recrawl.Visited(ctx, recrawlNamespace(b.Tenant, b.Step.RecordBiz()), *b.Step.Recrawl, visits); err != nil {
		return crawl.Dependency("redis (recrawl)", fmt.Errorf("plan the next visits of step %s: %w", b.Step.ID, err))
	}
	group[0].pass(replanStage)
	return nil
}

// replanStage is the replan stage's name among a group's passed stages.
const replanStage = "\x00recrawl"

// forgetGone drops the plans of the pages a recrawl step gave up on because the site
// says they are gone (404, 410). If Redis does not answer, the plans stay: such a page
// is tried again when its lease ends.
func (a *Activities) forgetGone(ctx context.Context, b crawl.Batch, gone []crawl.Input) {
	if a.Recrawl == nil || b.Step.Recrawl == nil || len(gone) == 0 {
		return
	}
	if err := a.Recrawl.Drop(ctx, recrawlNamespace(b.Tenant, b.Step.RecordBiz()), gone); err != nil {
		a.Log.Warn("recrawl: cannot drop the plans of pages that are gone", "chain", b.Chain, "step", b.Step.ID, "pages", len(gone), "err", err)
	}
}

// isGone reports whether a failure's cause says the page no longer exists.
func isGone(c crawl.Cause) bool { return c == crawl.CauseHTTP404 || c == crawl.CauseHTTP410 }
