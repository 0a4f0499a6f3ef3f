package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/recrawl"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
)

func historyCmd(s *Settings) *cobra.Command {
	var biz, tenant string
	var versions int
	cmd := &cobra.Command{
		Use:   "history KEY",
		Short: "Show every stored version of one record (from HBase), newest first, with what changed",
		Long: `Show how one record changed over time: the versions the hbase sink stored (one per
crawl that found the record new or changed), newest first. Each version lists its fetch
time, the run that stored it and its fields; a field that differs from the version before
it is marked with * and shows the value it had (removed fields say so).

KEY is the item key (e.g. demo:story:5). --biz names the task that stored it (site.task,
e.g. demo.story), which makes this a single read; without it the key's row range is
scanned for the tasks that hold it, and a key stored by several tasks needs --biz.

History is per tenant, like dedup: --tenant (default "default") picks whose versions to
show, and another tenant's crawls of the same record are not among them.

The HBase cluster comes from --hbase (its ZooKeeper quorum), then TRAWLER_HBASE, then the
"hbase_zk" field of --data's endpoints.json (a running 'trawler dev'). --json prints the
record as one JSON object: {"tenant","biz","key","versions":[{"ts","run_id","hash","url",
"fields","changed"}]}, field values as JSON.

When the record's step has a recrawl policy and Redis is known (--redis, TRAWLER_REDIS
or --data), the record's plan follows: when its page is visited next, the interval and
what it is estimated from (--json: "recrawl").`,
		Example: `  trawler history demo:story:5 --data .data/dev
  trawler history demo:story:5 --biz demo.story --versions 3 --data .data/dev
  trawler history demo:story:5 --tenant acme --data .data/dev
  trawler history hn:item:8863 --hbase zk1:2181,zk2:2181 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if versions < 0 {
				return fmt.Errorf("--versions %d: use 1 or more, or 0 for all", versions)
			}
			if err := s.Resolve(); err != nil {
				return err
			}
			if s.HBase == "" {
				return errors.New("no HBase to read from: pass --hbase HOST:PORT (its ZooKeeper quorum), set TRAWLER_HBASE, or --data DIR of a running `trawler dev`")
			}
			sink, err := hbase.Open(hbase.Config{ZK: s.HBase, Timeout: 15 * time.Second, Log: s.Logger()})
			if err != nil {
				return err
			}
			defer sink.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			if err := sink.Reachable(ctx); err != nil {
				return err
			}
			key := args[0]
			if biz == "" {
				if biz, err = findBiz(ctx, sink, tenant, key); err != nil {
					return err
				}
			}
			rec, err := sink.History(ctx, tenant, biz, key, versions)
			if err != nil {
				return err
			}
			plans, err := s.recrawlPlans(ctx, rec)
			if err != nil {
				return err
			}
			if s.JSON {
				return PrintJSON(struct {
					*hbase.Record
					Recrawl []recordPlan `json:"recrawl,omitempty"`
				}{rec, plans})
			}
			printHistory(rec)
			printPlans(plans)
			return nil
		},
	}
	cmd.Flags().StringVar(&biz, "biz", "", "task that stored the record, site.task (default: looked up by key)")
	cmd.Flags().IntVar(&versions, "versions", 0, "newest versions to show (0: all)")
	cmd.Flags().StringVar(&tenant, "tenant", crawl.DefaultTenant, "tenant whose history to show: `TENANT` (each tenant's versions are kept apart)")
	return cmd
}

// findBiz finds the one task holding a record of tenant with this key.
func findBiz(ctx context.Context, sink *hbase.Sink, tenant, key string) (string, error) {
	bizes, err := sink.Find(ctx, tenant, key)
	if err != nil {
		return "", err
	}
	switch len(bizes) {
	case 0:
		return "", fmt.Errorf("no record with key %q of tenant %s in HBase table %s; check the key (e.g. demo:story:5), --tenant and that its step stores to hbase", key, tenant, hbase.Table)
	case 1:
		return bizes[0], nil
	}
	return "", fmt.Errorf("key %q is stored by several tasks (%s): pick one with --biz", key, strings.Join(bizes, ", "))
}

// recordPlan is the recrawl plan of the page a record comes from, in one namespace.
type recordPlan struct {
	Namespace string        `json:"namespace"`
	Page      string        `json:"page"`
	Policy    crawl.Recrawl `json:"policy"`
	recrawl.Plan
	Interval     string  `json:"interval"`
	ChangesPerHr float64 `json:"changes_per_hour"`
}

// recrawlPlans looks up the plan of the record's page (its newest version's URL) in the
// recrawl namespace of its tenant and task (namespaces are per tenant, like the record's
// history); none without Redis or a plan.
func (s *Settings) recrawlPlans(ctx context.Context, rec *hbase.Record) ([]recordPlan, error) {
	if s.Redis == "" || len(rec.Versions) == 0 || rec.Versions[0].URL == "" {
		return nil, nil
	}
	rdb, err := s.OpenRedis(0, false)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	p := recrawl.New(rdb, nil)
	pols, err := p.Policies(ctx)
	if err != nil {
		return nil, err
	}
	page := crawl.Input{URL: rec.Versions[0].URL}
	var out []recordPlan
	for _, ns := range slices.Sorted(maps.Keys(pols)) {
		// A run whose plan names no tenant keeps its plans under ":task", and its
		// records in the default tenant's rows.
		if ns != rec.Tenant+":"+rec.Biz && (!crawl.IsDefaultTenant(rec.Tenant) || ns != ":"+rec.Biz) {
			continue
		}
		pl, ok, err := p.Lookup(ctx, ns, page)
		if err != nil {
			return nil, err
		}
		if ok {
			pol := pols[ns]
			out = append(out, recordPlan{Namespace: ns, Page: page.URL, Policy: pol, Plan: pl,
				Interval: crawl.FormatDuration(pl.Interval(pol)), ChangesPerHr: RoundTo(pl.Rate(pol), 4)})
		}
	}
	return out, nil
}

// printPlans shows when the record's page is visited next, and why then.
func printPlans(plans []recordPlan) {
	for _, p := range plans {
		when := p.Due.UTC().Format("2006-01-02 15:04 MST")
		if d := time.Until(p.Due).Round(time.Minute); d > 0 {
			when += " (in " + crawl.FormatDuration(d) + ")"
		} else {
			when += " (due now)"
		}
		state := ""
		if p.Leased {
			state = "; claimed by a run, not visited yet"
		}
		fmt.Printf("\nnext visit %s  [recrawl %s]%s\n  every %s: %d change(s) seen in %s watched, ~%.2f changes/h; policy min %s, max %s, target_miss %g\n",
			when, p.Namespace, state, p.Interval, p.Changes, crawl.FormatDuration(p.Observed), p.ChangesPerHr,
			crawl.FormatDuration(p.Policy.Min), crawl.FormatDuration(p.Policy.Max), p.Policy.TargetMiss)
	}
}

// printHistory prints the versions newest first, each field on its line; a changed
// field is marked * and shows its previous value.
func printHistory(rec *hbase.Record) {
	n := len(rec.Versions)
	fmt.Printf("%s (%s): %d version%s, newest first\n", rec.Key, rec.Biz, n, plural(n))
	for i, v := range rec.Versions {
		var older *hbase.Version
		if i+1 < n {
			older = &rec.Versions[i+1]
		}
		note := ""
		switch {
		case older == nil && i == 0:
			note = "  (only version)"
		case older == nil:
			note = "  (oldest shown)"
		case len(v.Changed) == 0:
			note = "  (no field changed)"
		default:
			note = fmt.Sprintf("  (%d changed: %s)", len(v.Changed), strings.Join(v.Changed, ", "))
		}
		fmt.Printf("\n%s  run %s%s\n", v.TS.Format("2006-01-02 15:04:05.000 MST"), v.RunID, note)
		names := make([]string, 0, len(v.Fields))
		width := 0
		for f := range v.Fields {
			names = append(names, f)
			width = max(width, len(f))
		}
		if older != nil {
			for f := range older.Fields {
				if _, ok := v.Fields[f]; !ok {
					names = append(names, f)
					width = max(width, len(f))
				}
			}
		}
		sort.Strings(names)
		for _, f := range names {
			mark, val, was := " ", "", ""
			cur, has := v.Fields[f]
			if has {
				val = clip(string(cur), 80)
			}
			if older != nil {
				prev, had := older.Fields[f]
				switch {
				case !has:
					mark, val = "*", "(removed, was "+clip(string(prev), 80)+")"
				case !had:
					mark, was = "*", "  (new)"
				case string(prev) != string(cur):
					mark, was = "*", "  (was "+clip(string(prev), 80)+")"
				}
			}
			fmt.Printf("  %s %-*s  %s%s\n", mark, width, f, val, was)
		}
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
