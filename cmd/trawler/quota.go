package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"trawler/crawl"
	"trawler/quota"
)

func quotaCmd(s *settings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Set and show the page and item budgets of tenants",
		Long: `Budgets bound what crawling costs. A chain sets its own in its file:

  quota: {pages: 5000, items: 20000, pages_per_day: 50000, items_per_day: 200000}

and a tenant's budgets, set here, apply to every chain of the tenant: pages and items
per run, and per UTC day across all its runs. Every worker leases budget in blocks from
the shared Redis, so no budget is overspent however many workers share it. A run that
reaches a budget stops cleanly: its status is quota_reached and its summary counts the
inputs left unrun. 0 removes a limit.`,
		Example: `  trawler quota set acme --pages-per-day 100000 --items-per-day 500000 --data .data/dev
  trawler quota show acme --chain demo --data .data/dev --json`,
	}
	var q crawl.Quota
	set := &cobra.Command{
		Use:   "set TENANT",
		Short: "Set a tenant's budgets (0 removes a limit)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rdb, err := s.redisClient("keeps the budgets")
			if err != nil {
				return err
			}
			defer rdb.Close()
			if err := quota.New(rdb, 0).SetTenant(cmd.Context(), args[0], q); err != nil {
				return err
			}
			if s.json {
				return printJSON(map[string]any{"tenant": args[0], "quota": q})
			}
			fmt.Printf("tenant %s: %s\n", args[0], describeQuota(q))
			return nil
		},
	}
	set.Flags().IntVar(&q.Pages, "pages", 0, "pages per run of any chain of the tenant")
	set.Flags().IntVar(&q.Items, "items", 0, "items stored per run")
	set.Flags().IntVar(&q.PagesPerDay, "pages-per-day", 0, "pages per UTC day, all runs of the tenant together")
	set.Flags().IntVar(&q.ItemsPerDay, "items-per-day", 0, "items stored per UTC day, all runs together")

	var chain string
	show := &cobra.Command{
		Use:   "show TENANT",
		Short: "A tenant's budgets and what it (and one chain) spent today",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rdb, err := s.redisClient("keeps the budgets")
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
			if s.json {
				return printJSON(out)
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
