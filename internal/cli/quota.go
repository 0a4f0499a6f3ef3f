package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/quota"
)

func quotaCmd(s *Settings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Set and show the page and item budgets of tenants",
		Long: `Budgets bound what crawling costs. A chain sets its own in its file:

  quota: {pages: 5000, items: 20000, pages_per_day: 50000, items_per_day: 200000}

and a tenant's budgets, set here, apply to every chain of the tenant: pages and items
per run, and per UTC day across all its runs. Every worker leases budget in blocks from
the shared Redis, so no budget is overspent however many workers share it. A run that
reaches a budget stops cleanly: its status is quota_reached and its summary counts the
inputs left unrun.

A change applies to batches already running within ` + quota.SyncEvery.String() + ` (each batch
reads the budgets again that often) and to every batch started after it at once.
"Spent" counts the pages run and items stored, never what a batch holds leased and
unused; while batches run it may trail them by up to ` + quota.SyncEvery.String() + `.`,
		Example: `  trawler quota set acme --pages-per-day 100000 --items-per-day 500000 --data .data/dev
  trawler quota set acme --clear pages-per-day --data .data/dev
  trawler quota show acme --chain demo --data .data/dev --json`,
	}
	change := quota.Change{Set: map[string]int{}}
	set := &cobra.Command{
		Use:   "set TENANT",
		Short: "Set or remove some of a tenant's budgets; the others stay as they are",
		Long: `Sets the budgets named by flags and removes those named by --clear. Budgets not named
stay as they are. A budget is a whole number above 0; --clear NAME removes the limit
(NAME is one of ` + quota.BudgetNames() + `).`,
		Example: `  trawler quota set acme --pages 5000 --data .data/dev
  trawler quota set acme --clear pages --clear items-per-day --data .data/dev`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rdb, err := s.RedisClient("keeps the budgets")
			if err != nil {
				return err
			}
			defer rdb.Close()
			q, err := quota.New(rdb, 0).ChangeTenant(cmd.Context(), args[0], change)
			if err != nil {
				return err
			}
			if s.JSON {
				return PrintJSON(map[string]any{"tenant": args[0], "quota": q})
			}
			fmt.Printf("tenant %s: %s\n", args[0], describeQuota(q))
			return nil
		},
	}
	for _, b := range quota.Budgets {
		set.Flags().Var(limitFlag{b.Name, change.Set}, b.Name, b.Doc)
	}
	set.Flags().StringArrayVar(&change.Clear, "clear", nil, "remove a budget's limit (repeat for more): one of "+quota.BudgetNames())

	var chain string
	show := &cobra.Command{
		Use:   "show TENANT",
		Short: "A tenant's budgets and what it (and one chain) spent today",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rdb, err := s.RedisClient("keeps the budgets")
			if err != nil {
				return err
			}
			defer rdb.Close()
			m := quota.New(rdb, 0)
			budgets, err := m.Tenant(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			today, err := m.TenantUsage(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := map[string]any{"tenant": args[0], "quota": budgets, "today": today}
			var chainToday quota.Usage
			if chain != "" {
				if chainToday, err = m.ChainUsage(cmd.Context(), args[0], chain); err != nil {
					return err
				}
				out["chain"], out["chain_today"] = chain, chainToday
			}
			if s.JSON {
				return PrintJSON(out)
			}
			fmt.Printf("tenant %s: %s\n  today: %d pages, %d items\n", args[0], describeQuota(budgets), today.Pages, today.Items)
			if chain != "" {
				fmt.Printf("  chain %s today: %d pages, %d items\n", chain, chainToday.Pages, chainToday.Items)
			}
			return nil
		},
	}
	show.Flags().StringVar(&chain, "chain", "", "also show what this chain spent today")
	cmd.AddCommand(set, show)
	return cmd
}

func describeQuota(q crawl.Quota) string {
	lim := func(n int) string {
		if n == 0 {
			return "unlimited"
		}
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("pages per run %s, items per run %s, pages per day %s, items per day %s",
		lim(q.Pages), lim(q.Items), lim(q.PagesPerDay), lim(q.ItemsPerDay))
}

// limitFlag is a budget flag of `quota set`: it records the budget only when given, so
// the budgets a command does not name stay as they are, and refuses what is not a
// positive whole number with the fix.
type limitFlag struct {
	name string
	set  map[string]int
}

func (f limitFlag) String() string {
	if n, ok := f.set[f.name]; ok {
		return fmt.Sprint(n)
	}
	return ""
}

func (f limitFlag) Set(v string) error {
	n, err := quota.ParseLimit(f.name, v)
	if err != nil {
		return err
	}
	f.set[f.name] = n
	return nil
}

func (f limitFlag) Type() string { return "N" }
