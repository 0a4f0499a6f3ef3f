package activities

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/dedup"
	"github.com/trawlerhq/trawler/internal/external"
	"github.com/trawlerhq/trawler/internal/itemjson"
	"github.com/trawlerhq/trawler/internal/storage"
	"github.com/trawlerhq/trawler/internal/tracing"
)

// The item pipeline: what becomes of the items a finished input yields, in named stages,
// each a small function below.
//
//	stamp   every item gets its id, biz, fetch time, content hash, chain, run and tenant
//	dedup   which items go on: new ones, changed ones unless the step stores only new
//	        items, and a key twice in one group once
//	quota   which of those the tenant's, chain's and run's item budgets pay for
//	route   the inputs each input hands to the steps that consume it (less the pages a
//	        recrawl step plans itself)
//	write   every sink of the step, in order
//	changes the change events of a step with `changes: kafka`: one per stored record
//	        dedup judged changed, its old values read from HBase (activities/changes.go)
//	record  the dedup entries of what was stored (unchanged items move their last-seen
//	        time), after the write: a crash in between makes items new again, never lost;
//	        then the next visit of each page of a recrawl step (activities/recrawl.go)
//
// stamp runs as each input finishes (runOne); store runs the rest over a group of
// finished inputs.

// stamp gives every item of one input what a stored record carries besides the task's
// fields. The id is a hash of run and key, so every attempt of the input gives its items
// the same ids and a copy a failed write left in a store is the same record. The user
// info of the URLs the task read (a base_url with user:password@) is taken out of the
// item's url, key and fields here, once for every task: no store holds a password, and
// rotating one does not make every record new.
func stamp(b crawl.Batch, items []crawl.Item, now time.Time) error {
	for k := range items {
		it := &items[k]
		if it.Key == "" {
			return fmt.Errorf("task %s returned an item without a key; set Item.Key to a stable natural id", b.Step.Task)
		}
		// A key outlives its page (the jsonl sink's index holds a run's keys), and a key
		// taken from a field's text may be a slice of the whole page (crawl.ParseHTML
		// shares one copy of it among its text nodes): a copy of its own frees the page.
		it.Key, it.URL = strings.Clone(crawl.StripUserinfo(it.Key)), crawl.StripUserinfo(it.URL)
		stripUserinfo(it.Data)
		it.ID = itemID(b.RunID, it.Key)
		it.Biz = b.Step.RecordBiz()
		it.TS = now
		it.Hash = contentHash(it.Data)
		it.Chain, it.RunID, it.Tenant = b.Chain, b.RunID, b.Tenant
	}
	return nil
}

// stripUserinfo takes the user info out of the URLs in an item's fields, in place: a
// link resolved against a page fetched with user:password@ carries it.
func stripUserinfo(v any) any {
	switch x := v.(type) {
	case string:
		return crawl.StripUserinfo(x)
	case map[string]any:
		for k, e := range x {
			// Nested values change in place; a string is stored back only when it had
			// user info (stripping only shortens), not every field of every item.
			if s, ok := e.(string); !ok {
				stripUserinfo(e)
			} else if c := crawl.StripUserinfo(s); len(c) != len(s) {
				x[k] = c
			}
		}
	case []any:
		for i, e := range x {
			x[i] = stripUserinfo(e)
		}
	case []string:
		for i, e := range x {
			x[i] = crawl.StripUserinfo(e)
		}
	}
	return v
}

// contentHash is a short, stable hash of an item's fields: of their JSON as json.Marshal
// writes it (keys sorted), so hashes kept by dedup stay valid across versions.
func contentHash(data map[string]any) string {
	e := itemjson.Get()
	defer e.Release()
	var b []byte // data that cannot be encoded hashes as nothing, as json.Marshal's nil did
	if e.Map(data) == nil {
		b = e.Buf.Bytes()
	}
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:8])
}

// store runs dedup, quota and route once per input, then write and record once per
// group. When a stage fails part-way, calling store again with the same group resumes
// where it stopped: judged inputs keep their verdicts and budget, sinks already written
// are not written twice.
func (a *Activities) store(ctx context.Context, b crawl.Batch, sinks []storage.Sink, group []outcome, budget *batchQuota) error {
	dd := a.dedupOn(b.Step)
	if err := a.judge(ctx, b, dd, sinks, group, budget); err != nil {
		return err
	}
	if err := write(ctx, b, sinks, group); err != nil {
		return err
	}
	if !dd {
		return nil
	}
	if err := a.publishChanges(ctx, b, group); err != nil {
		return err
	}
	if err := a.record(ctx, b, group); err != nil {
		return err
	}
	return a.replan(ctx, b, group)
}

// dedupOn reports whether a step's items go through dedup on this worker.
func (a *Activities) dedupOn(step crawl.PlanStep) bool {
	return a.Dedup != nil && step.Dedup != crawl.DedupOff
}

// judge runs the dedup, quota and route stages for the inputs of the group not judged
// yet, and keeps their outcome on each input.
func (a *Activities) judge(ctx context.Context, b crawl.Batch, dd bool, sinks []storage.Sink, group []outcome, budget *batchQuota) error {
	if len(group) == 0 || group[len(group)-1].judged {
		return nil
	}
	var verdicts []dedup.Verdict
	if dd {
		var err error
		if verdicts, err = a.lookup(ctx, b, group); err != nil {
			return err
		}
	}
	kept, unchanged := dedupStage(b.Step.Dedup, group, verdicts)
	var changed map[string]bool
	if b.Step.Changes != "" {
		changed = changedKeys(group, verdicts)
	}
	expectStage(b.Step.Expect, group, verdicts)
	for p := range group {
		o := &group[p]
		if o.judged {
			continue
		}
		items := kept[p]
		if len(sinks) > 0 {
			allowed, dropped, err := quotaStage(ctx, budget, items)
			if err != nil {
				return err
			}
			items, o.dropped = allowed, dropped
		}
		o.kept, o.Unchanged, o.Items = items, unchanged[p], len(items)
		o.changed = changed
		o.Out, o.DepthLimited = route(b.Step, o.input, items, o.result.Next)
		o.judged = true
	}
	a.skipPlanned(ctx, b, group)
	return nil
}

// dedupNamespace is where a step's dedup entries live: one namespace per tenant and biz.
func dedupNamespace(b crawl.Batch) string { return b.Tenant + ":" + b.Step.RecordBiz() }

// lookup asks dedup for a verdict on every item of the group, in order. Items are known
// by their canonical key (crawl.ItemKey); an item new under it whose key was not canonical
// is looked up again as given, as dedup kept it before keys were canonical, and keeps
// that verdict, so upgrading stores no record again.
func (a *Activities) lookup(ctx context.Context, b crawl.Batch, group []outcome) ([]dedup.Verdict, error) {
	var entries []dedup.Entry
	for _, o := range group {
		for _, it := range o.result.Items {
			entries = append(entries, dedup.Entry{Key: crawl.ItemKey(it.Key), Content: it.Hash})
		}
	}
	if len(entries) == 0 {
		return nil, nil
	}
	vs, err := a.Dedup.Lookup(ctx, dedupNamespace(b), entries)
	if err != nil {
		return nil, crawl.Dependency("redis (dedup)", err)
	}
	var again []int
	var given []dedup.Entry
	k := 0
	for _, o := range group {
		for _, it := range o.result.Items {
			if vs[k].State == dedup.New && entries[k].Key != it.Key {
				again = append(again, k)
				given = append(given, dedup.Entry{Key: it.Key, Content: it.Hash})
			}
			k++
		}
	}
	if len(given) == 0 {
		return vs, nil
	}
	old, err := a.Dedup.Lookup(ctx, dedupNamespace(b), given)
	if err != nil {
		return nil, crawl.Dependency("redis (dedup)", err)
	}
	for j, k := range again {
		vs[k] = old[j]
	}
	return vs, nil
}

// dedupStage decides which items of each input go on, given dedup's verdicts on every
// item of the group in order (nil: dedup is off): unchanged items stop, changed ones
// stop when the step's mode is new, and a key twice in one group goes on once. It
// returns, per input of the group, the items that go on and how many stopped; inputs
// already judged get nothing, but their keys count as seen.
func dedupStage(mode string, group []outcome, verdicts []dedup.Verdict) (kept [][]crawl.Item, stopped []int) {
	kept, stopped = make([][]crawl.Item, len(group)), make([]int, len(group))
	seen := map[string]bool{}
	k := 0
	for p, o := range group {
		// Most inputs keep every item: kept[p] is then the result's own slice, and a
		// copy is made only from the first item dropped.
		all := true
		for j, it := range o.result.Items {
			key := crawl.ItemKey(it.Key)
			keep := !seen[key]
			if verdicts != nil {
				switch verdicts[k].State {
				case dedup.Unchanged:
					keep = false
				case dedup.Changed:
					keep = keep && mode == crawl.DedupChanged
				}
				k++
			}
			seen[key] = true
			switch {
			case o.judged:
			case keep:
				if !all {
					kept[p] = append(kept[p], it)
				}
			default:
				if all {
					kept[p], all = slices.Clip(o.result.Items[:j]), false
				}
				stopped[p]++
			}
		}
		if all && !o.judged {
			kept[p] = o.result.Items
		}
	}
	return kept, stopped
}

// expectStage counts, for the step's expectations, the fields of every item each input
// of the group not judged yet produced, and how many dedup judged new (verdicts in the
// order of the group's items; nil: dedup is off and no item counts as new). Counting
// here, once per input, keeps the expectations a matter of sums: nothing is scanned
// when the run ends.
func expectStage(e *crawl.Expect, group []outcome, verdicts []dedup.Verdict) {
	counter := crawl.NewCounter(e)
	if counter == nil {
		return
	}
	k := 0
	for p := range group {
		o := &group[p]
		items := o.result.Items
		if !o.judged {
			o.Expect = counter.Count(items)
			for j := range items {
				if verdicts != nil && verdicts[k+j].State == dedup.New {
					o.Expect.New++
				}
			}
		}
		if verdicts != nil {
			k += len(items)
		}
	}
}

// quotaStage spends one item of the budgets per item and keeps what they pay for; the
// keys of the rest are dropped: not stored, and so not recorded as seen either.
func quotaStage(ctx context.Context, budget *batchQuota, items []crawl.Item) (allowed []crawl.Item, dropped []string, err error) {
	if allowed, err = budget.keep(ctx, items); err != nil {
		return nil, nil, crawl.Dependency("redis (quota)", err)
	}
	for _, it := range items[len(allowed):] {
		dropped = append(dropped, it.Key)
	}
	return allowed, dropped, nil
}

// route hands an input's stored items and its next inputs to the consuming steps.
func route(step crawl.PlanStep, in crawl.Input, items []crawl.Item, next []crawl.Input) ([]crawl.Routed, int) {
	return step.Route(in, crawl.Result{Items: items, Next: next})
}

// write stores the group's kept items in every sink of the step, in order; a sink the
// group has passed already is not written again.
func write(ctx context.Context, b crawl.Batch, sinks []storage.Sink, group []outcome) error {
	n := 0
	for _, o := range group {
		n += len(o.kept)
	}
	items := make([]crawl.Item, 0, n)
	for _, o := range group {
		items = append(items, o.kept...)
	}
	if len(items) == 0 {
		return nil
	}
	if b.Step.PoolSite != "" {
		ctx = external.WithPoolSite(ctx, b.Step.PoolSite)
	}
	for _, s := range sinks {
		if group[0].passed(s.Name()) {
			continue
		}
		if d, ok := s.(storage.Schemas); ok && len(b.Step.Output) > 0 {
			d.Declare(b.Step.RecordBiz(), b.Step.Output)
		}
		if err := writeSink(ctx, s, items); err != nil {
			return crawl.Dependency("store "+s.Name(), fmt.Errorf("store %d items of step %s in %s: %w", len(items), b.Step.ID, s.Name(), err))
		}
		group[0].pass(s.Name())
	}
	return nil
}

// writeSink writes one sink, in a span of its own when tracing is on.
func writeSink(ctx context.Context, s storage.Sink, items []crawl.Item) error {
	ctx, span := tracing.Tracer().Start(ctx, "store "+s.Name(), trace.WithAttributes(attribute.Int("trawler.items", len(items))))
	defer span.End()
	err := s.Write(ctx, items)
	if err != nil {
		span.SetStatus(codes.Error, crawl.RedactText(err.Error()))
	}
	return err
}

// record notes every judged item as seen (unchanged ones move their last-seen time),
// except those the budget dropped, once per group.
func (a *Activities) record(ctx context.Context, b crawl.Batch, group []outcome) error {
	if group[0].passed(recordStage) {
		return nil
	}
	var entries []dedup.Entry
	for _, o := range group {
		for _, it := range o.result.Items {
			if !slices.Contains(o.dropped, it.Key) {
				entries = append(entries, dedup.Entry{Key: crawl.ItemKey(it.Key), Content: it.Hash})
			}
		}
	}
	if len(entries) > 0 {
		if err := a.Dedup.Record(ctx, dedupNamespace(b), entries); err != nil {
			return crawl.Dependency("redis (dedup)", err)
		}
	}
	group[0].pass(recordStage)
	return nil
}

// recordStage is the record stage's name among a group's passed stages.
const recordStage = "\x00dedup"

// passed and pass keep, on a group's first outcome, the write and record stages (each
// sink by name, and recordStage) the group has passed, so a retried store skips them.
func (o *outcome) passed(stage string) bool { return slices.Contains(o.stages, stage) }
func (o *outcome) pass(stage string)        { o.stages = append(o.stages, stage) }
