package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/archive"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/stream"
)

type reparseFlags struct {
	run, step, url, since, until, store string
	sets                                []string
	dryRun, fetchMissing, allowPartial  bool
	examples                            int
}

func reparseCmd(s *Settings) *cobra.Command {
	var f reparseFlags
	cmd := &cobra.Command{
		Use:   "reparse CHAIN.yaml --run RUN_ID [--step STEP] [--url PATTERN] [--since T --until T] [--dry-run] [--fetch-missing]",
		Short: "Run a chain over the pages a run archived (archive:) instead of the network",
		Long: `Reparse runs the chain file as it is now — its params, selectors and the tasks of
this build — over the pages run RUN_ID archived (the chain's archive:), without
fetching them again. It is a run like any other: a new run id, on the workers of the
task queue, its records through dedup and into the stores; only each request is
answered from the archive, looked up by canonical URL in the run's CDXJ index. The
chain's routing works unchanged, so the detail pages a list page leads to are read from
the archive too. A page the run did not archive is not fetched: it fails with cause
not_archived and is listed at the end (the run is then partial, exit 2) — unless
--fetch-missing, which fetches it (and archives it under the new run).

--url (a regular expression on the page URL), --since and --until (when the page was
fetched) narrow the archived pages that answer; any other counts as not archived.
--step runs that one step alone, once per archived page of that step (from its URL:
what the page that led there handed it besides is not archived), and nothing
downstream of it.

--dry-run writes nothing: this command runs the chain itself, over the archive, and
compares what it extracts now with the records run RUN_ID stored (read back from
--store, as ` + "`trawler export`" + ` reads them): per field, how many records differ, with
examples. Workers and the archive must be able to read the archive.to of the chain's
steps; a step without archive: cannot be re-parsed.`,
		Example: `  trawler reparse examples/demo.yaml --run demo-20261122-071001-5e0c1a --data .data/dev --dry-run
  trawler reparse examples/demo.yaml --run demo-20261122-071001-5e0c1a --data .data/dev
  trawler reparse shop.yaml --run shop-20261122-071001-5e0c1a --step detail --url '/p/[0-9]+$' --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReparse(cmd.Context(), s, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.run, "run", "", "the run `RUN_ID` whose archived pages to re-parse (required)")
	fl.StringVar(&f.step, "step", "", "run only this step `STEP`, over its archived pages")
	fl.StringVar(&f.url, "url", "", "only archived pages whose URL matches this regular expression `PATTERN`")
	fl.StringVar(&f.since, "since", "", "only pages fetched at or after `TIME` (RFC 3339) or this long ago (24h)")
	fl.StringVar(&f.until, "until", "", "only pages fetched before `TIME` (RFC 3339) or this long ago (1h)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "store nothing: print, per field, how many records differ from what the run stored")
	fl.BoolVar(&f.fetchMissing, "fetch-missing", false, "fetch the pages the run did not archive instead of failing them")
	fl.StringVar(&f.store, "store", "jsonl", "with --dry-run: the store to read the run's records from: jsonl, mongo, es or hbase")
	fl.IntVar(&f.examples, "examples", 3, "with --dry-run: differing records to show per field")
	fl.StringArrayVar(&f.sets, "set", nil, "override a param: step.param=value or param=value (repeatable)")
	fl.BoolVar(&f.allowPartial, "allow-partial", false, "exit 0 when some pages failed or were not archived")
	return cmd
}

func runReparse(ctx context.Context, s *Settings, file string, f reparseFlags) error {
	if f.run == "" {
		return errors.New("--run RUN_ID: name the run whose archived pages to re-parse (`trawler status` lists runs)")
	}
	now := time.Now()
	since, err := parseSince(f.since, now)
	if err != nil {
		return err
	}
	until, err := parseSince(f.until, now)
	if err != nil {
		return fmt.Errorf("--until %q: give a time (2026-11-22T07:00:00Z, 2026-11-22) or how long ago (24h, 90m)", f.until)
	}
	plan, err := s.loadChainFile(ctx, file, f.sets)
	if err != nil {
		return err
	}
	sel := crawl.Reparse{Run: f.run, URL: f.url, Since: since, Until: until, FetchMissing: f.fetchMissing}
	readers, err := reparsePlan(ctx, file, plan, sel, f.step)
	defer func() {
		for _, r := range readers {
			r.Close()
		}
	}()
	if err != nil {
		return err
	}
	if f.dryRun {
		return dryRun(ctx, s, plan, readers, f)
	}
	c, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	sinks, err := openSinks(s)
	if err != nil {
		return err
	}
	defer sinks.Close()
	res, err := RunAndWait(ctx, s, c, plan, sinks)
	if err != nil {
		return err
	}
	log := ""
	if s.Out != "" {
		log = filepath.Join(s.Out, jsonl.FailuresFile)
	}
	failed, err := engine.Failures(ctx, c, res.RunID, log)
	if err != nil {
		return err
	}
	missing := []string{}
	for _, fl := range failed {
		if fl.Class == crawl.CauseNotArchived {
			missing = append(missing, fl.Input.URL)
		}
	}
	slices.Sort(missing)
	if s.JSON {
		if err := PrintJSON(struct {
			*Result
			Of      string   `json:"reparse_of"`
			Missing []string `json:"not_archived"`
		}{res, f.run, missing}); err != nil {
			return err
		}
	} else {
		if err := res.Print(false); err != nil {
			return err
		}
		fmt.Printf("  re-parsed the pages of run %s; %d page(s) not in its archive%s\n", f.run, len(missing), listed(missing))
	}
	return res.exit(f.allowPartial)
}

// listed is the pages, one a line, after a colon; nothing when there are none.
func listed(pages []string) string {
	var b bytes.Buffer
	for i, p := range pages {
		if i == 0 {
			b.WriteString(":")
		}
		b.WriteString("\n    " + crawl.RedactURL(p))
	}
	return b.String()
}

// reparsePlan makes plan a reparse of sel.Run: each step answers from the archive its
// archive: names (a shared source would answer from what another run fetched, so none
// is), and with step, that step alone runs, once per page of it the run archived. It
// returns the archives, read once here so a wrong run or destination is an error
// before anything starts.
func reparsePlan(ctx context.Context, file string, plan *crawl.Plan, sel crawl.Reparse, step string) (map[string]*archive.Reader, error) {
	readers := map[string]*archive.Reader{}
	if step != "" {
		i := slices.IndexFunc(plan.Steps, func(st crawl.PlanStep) bool { return st.ID == step })
		if i < 0 {
			ids := make([]string, len(plan.Steps))
			for k, st := range plan.Steps {
				ids[k] = st.ID
			}
			return nil, fmt.Errorf("--step %s: %s has no such step; its steps: %v", step, file, ids)
		}
		st := plan.Steps[i]
		st.Root, st.Consumers, st.SeedDuplicates, st.Seeds = true, nil, 0, []crawl.Input{}
		plan.Steps = []crawl.PlanStep{st}
	}
	for i := range plan.Steps {
		st := &plan.Steps[i]
		if st.Archive == nil {
			return readers, fmt.Errorf("%s: step %s has no archive:, so where run %s archived its pages is unknown; give the chain the archive: {to: …} that run had", file, st.ID, sel.Run)
		}
		sel.From = st.Archive.To
		st.Reparse, st.Shared = &sel, 0
		r := readers[sel.From]
		if r == nil {
			var err error
			if r, err = archive.OpenReader(ctx, sel, plan.TenantOrDefault()); err != nil {
				return readers, err
			}
			readers[sel.From] = r
		}
		if step == "" {
			continue
		}
		for _, e := range r.Pages() {
			if e.Step == st.ID {
				st.Seeds = append(st.Seeds, crawl.Input{URL: e.URL})
			}
		}
		if len(st.Seeds) == 0 {
			return readers, fmt.Errorf("--step %s: run %s archived no page of step %s%s", step, sel.Run, step, narrowed(sel))
		}
	}
	return readers, nil
}

// narrowed says which flags narrowed the archived pages, for messages.
func narrowed(sel crawl.Reparse) string {
	if sel.URL == "" && sel.Since.IsZero() && sel.Until.IsZero() {
		return ""
	}
	return " that --url, --since and --until select"
}

// fieldDiff is one field's differences between a dry run and the stored records.
type fieldDiff struct {
	Differ   int           `json:"differ"`
	Examples []diffExample `json:"examples,omitempty"`
}

type diffExample struct {
	Biz    string `json:"biz"`
	Key    string `json:"key"`
	URL    string `json:"url,omitempty"`
	Stored any    `json:"stored"`
	Now    any    `json:"now"`
}

// dryRunResult is what `trawler reparse --dry-run` prints.
type dryRunResult struct {
	Run   string `json:"run"`
	Pages int    `json:"pages"` // pages read from the archive
	// NotArchived are the pages the chain led to that the run did not archive; Failed
	// the pages whose task failed on the archived answer.
	NotArchived []string        `json:"not_archived"`
	Failed      []crawl.Failure `json:"failed,omitempty"`
	Extracted   int             `json:"extracted"` // records the chain extracts now
	Stored      int             `json:"stored"`    // records the run stored
	Compared    int             `json:"compared"`  // records in both, by biz and key
	// OnlyExtracted are records the run did not store (dedup found them unchanged, or
	// the new code finds them); OnlyStored records the new code no longer finds.
	OnlyExtracted int                  `json:"only_extracted"`
	OnlyStored    int                  `json:"only_stored"`
	Fields        map[string]fieldDiff `json:"fields"`
}

// dryRun runs the chain in this process over the archive, storing nothing, and
// compares what it extracts with the records the run stored.
func dryRun(ctx context.Context, s *Settings, plan *crawl.Plan, readers map[string]*archive.Reader, f reparseFlags) error {
	out := dryRunResult{Run: f.run, NotArchived: []string{}, Fields: map[string]fieldDiff{}}
	now, err := walkChain(ctx, s, plan, readers, &out)
	if err != nil {
		return err
	}
	stored, err := storedRecords(ctx, s, plan, f)
	if err != nil {
		return err
	}
	out.Extracted, out.Stored = len(now), len(stored)
	for _, k := range slices.Sorted(maps.Keys(now)) {
		it := now[k]
		old, ok := stored[k]
		if !ok {
			out.OnlyExtracted++
			continue
		}
		out.Compared++
		for _, name := range slices.Sorted(maps.Keys(union(it.Data, old.Data))) {
			d := out.Fields[name]
			if a, b := normalized(old.Data[name]), normalized(it.Data[name]); !bytes.Equal(a, b) {
				d.Differ++
				if len(d.Examples) < f.examples {
					d.Examples = append(d.Examples, diffExample{Biz: it.Biz, Key: it.Key, URL: it.URL, Stored: old.Data[name], Now: it.Data[name]})
				}
			}
			out.Fields[name] = d
		}
	}
	for k := range stored {
		if _, ok := now[k]; !ok {
			out.OnlyStored++
		}
	}
	if s.JSON {
		return PrintJSON(out)
	}
	printDryRun(out)
	return nil
}

// union is the keys of both maps.
func union(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// normalized is a value as a store gives it back: its JSON (an int64 and the float64
// JSON reads it as compare equal, as do a time and its text).
func normalized(v any) []byte {
	b, _ := json.Marshal(v)
	var back any
	if json.Unmarshal(b, &back) == nil {
		b, _ = json.Marshal(back)
	}
	return b
}

func printDryRun(r dryRunResult) {
	fmt.Printf("dry run over the archive of run %s (nothing stored): %d pages read, %d not in the archive%s\n", r.Run, r.Pages, len(r.NotArchived), listed(r.NotArchived))
	for _, fl := range r.Failed {
		fmt.Printf("  failed [%s] %s: %s\n", fl.Step, fl.Input.Describe(), fl.Cause)
	}
	fmt.Printf("  %d records extracted now, %d stored by the run, %d compared; %d only extracted now, %d only stored\n",
		r.Extracted, r.Stored, r.Compared, r.OnlyExtracted, r.OnlyStored)
	fmt.Printf("  %-20s %8s\n", "field", "differ")
	for _, name := range slices.Sorted(maps.Keys(r.Fields)) {
		d := r.Fields[name]
		fmt.Printf("  %-20s %8d\n", name, d.Differ)
		for _, e := range d.Examples {
			was, _ := json.Marshal(e.Stored)
			is, _ := json.Marshal(e.Now)
			fmt.Printf("      %s %s: %s → %s\n", e.Biz, e.Key, was, is)
		}
	}
}

// walkChain runs the plan's steps in this process over the archive, following the
// chain's routing as a run does (each step's page once, unless revisit: true), and
// returns the records of the steps that store, by biz and key.
func walkChain(ctx context.Context, s *Settings, plan *crawl.Plan, readers map[string]*archive.Reader, out *dryRunResult) (map[string]crawl.Item, error) {
	type lane struct {
		task crawl.Task
		env  *crawl.Env
	}
	lanes := make([]lane, len(plan.Steps))
	var services crawl.Services
	crawl.Provide(&services, stream.HubService, stream.NewHub())
	var queue []crawl.Routed
	for i, st := range plan.Steps {
		task, ok := crawl.Default.Get(st.Task)
		if !ok {
			return nil, fmt.Errorf("step %s: task %s is not in this build", st.ID, st.Task)
		}
		var missing crawl.Fetcher
		if st.Reparse.FetchMissing {
			missing = fetch.New(fetch.Options{AllowAddrs: s.stackSite()})
		}
		mws, err := crawl.BuildMiddlewares(st.Middlewares)
		if err != nil {
			return nil, fmt.Errorf("step %s: %w", st.ID, err)
		}
		env := &crawl.Env{Params: st.Params, Fetcher: crawl.Wrap(readers[st.Reparse.From].Fetcher(missing), mws...), Log: s.Logger(),
			Chain: plan.Chain, Step: st.ID, RunID: "dry-run", Tenant: plan.TenantOrDefault(), Services: services}
		if p, ok := task.(crawl.Preparer); ok {
			if env.Prepared, err = p.Prepare(st.Params); err != nil {
				return nil, fmt.Errorf("step %s: %w", st.ID, err)
			}
		}
		lanes[i] = lane{task, env}
		if st.Root {
			seeds := st.Seeds
			if len(seeds) == 0 {
				seeds = []crawl.Input{{}}
			}
			for _, in := range seeds {
				queue = append(queue, crawl.Routed{Step: i, Input: in})
			}
		}
	}
	items := map[string]crawl.Item{}
	seen := map[string]bool{}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		st := plan.Steps[r.Step]
		if r.Input.URL != "" && !st.Revisit {
			k := fmt.Sprint(r.Step, " ", r.Input.URL)
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		l := lanes[r.Step]
		tctx, cancel := context.WithTimeout(ctx, cmp.Or(st.Timeout, crawl.DefaultTimeout))
		res, err := l.task.Run(tctx, l.env, r.Input)
		cancel()
		var na *archive.NotArchivedError
		switch {
		case errors.As(err, &na):
			out.NotArchived = append(out.NotArchived, na.URL)
			continue
		case err != nil:
			out.Failed = append(out.Failed, crawl.Failure{Step: st.ID, Input: r.Input, Attempts: 1, Cause: err.Error(), Class: crawl.CauseOf(err)})
			continue
		}
		out.Pages++
		if len(st.Store) > 0 {
			for _, it := range res.Items {
				it.Biz = st.RecordBiz()
				items[it.Biz+"\x00"+it.Key] = it
			}
		}
		next, _ := st.Route(r.Input, res)
		queue = append(queue, next...)
	}
	slices.Sort(out.NotArchived)
	return items, nil
}

// storedRecords reads back the records the run stored, by biz and key, from --store the
// way `trawler export` reads them.
func storedRecords(ctx context.Context, s *Settings, plan *crawl.Plan, f reparseFlags) (map[string]crawl.Item, error) {
	out := map[string]crawl.Item{}
	bizes := map[string]bool{}
	for _, st := range plan.Steps {
		if len(st.Store) > 0 {
			bizes[st.RecordBiz()] = true
		}
	}
	read := func(biz string) error {
		src, err := openExportSource(ctx, s, exportFlags{from: f.store, runID: f.run, biz: biz, tenant: plan.TenantOrDefault()}, time.Time{}, false)
		if err != nil {
			return err
		}
		if src.close != nil {
			defer src.close()
		}
		return src.each(ctx, func(it crawl.Item) error {
			if it.RunID == f.run && bizes[it.Biz] {
				out[it.Biz+"\x00"+it.Key] = it
			}
			return nil
		})
	}
	if f.store == "jsonl" { // one scan of every file
		return out, read("")
	}
	for _, biz := range slices.Sorted(maps.Keys(bizes)) {
		if err := read(biz); err != nil {
			return nil, err
		}
	}
	return out, nil
}
