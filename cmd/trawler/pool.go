package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"trawler/crawl"
	"trawler/external"
)

func poolCmd(s *settings) *cobra.Command {
	var tenant, site string
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Inspect and fill the resource pools (proxies, user agents, cookies, device ids)",
		Long: `Tasks that declare needs (proxy, user_agent, cookie, device_id, sign) borrow from Redis
pools, one per tenant, site and kind. Farming chains fill them (store: [pool:cookie]); these
commands list them, show each item's health, and add or remove items by hand.

A pool's settings travel with it: --target (what farming fills it to), --max-uses (requests
one item serves at once), --min-interval (least time between two uses of one item),
--cooldown (how long a ban lasts), --ttl (life of an added item). Site "*" is a tenant's
shared pool, used for proxies and user agents when a site has none of its own.`,
		Example: `  trawler pool list --data .data/dev
  trawler pool stats cookie --site demo --data .data/dev
  trawler pool add proxy http://10.0.0.7:3128 http://10.0.0.8:3128 --site '*' --data .data/dev
  trawler pool add cookie --site demo --target 5 --min-interval 500ms --data .data/dev
  trawler pool add sign --site demo --signer http://signer.internal/sign --data .data/dev
  trawler pool remove cookie demo:session:reader2 --site demo --data .data/dev`,
	}
	cmd.PersistentFlags().StringVar(&tenant, "tenant", crawl.DefaultTenant, "tenant whose pools to use")
	cmd.PersistentFlags().StringVar(&site, "site", "", "site of the pool (the part of a task name before the dot), or * for the tenant's shared pool")
	open := func() (*external.Pools, func(), error) {
		rdb, err := s.redisClient("holds the pools")
		if err != nil {
			return nil, nil, err
		}
		return external.NewPools(rdb, s.logger()), func() { rdb.Close() }, nil
	}
	kindArg := func(arg string) (external.Kind, error) {
		k, err := external.ParseKind(arg)
		if err == nil && site == "" {
			err = fmt.Errorf("which site's %s pool? add --site SITE (e.g. --site demo), or --site '*' for the tenant's shared pool", k)
		}
		return k, err
	}

	list := &cobra.Command{
		Use:     "list",
		Short:   "Every pool with its size, free, in-use and banned items and target",
		Example: "  trawler pool list --data .data/dev --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, done, err := open()
			if err != nil {
				return err
			}
			defer done()
			all, err := p.List(cmd.Context(), "")
			if err != nil {
				return err
			}
			if s.json {
				return printJSON(all)
			}
			if len(all) == 0 {
				fmt.Println("no pools yet; run a farming chain (examples/farm.yaml) or `trawler pool add KIND VALUE… --site SITE`")
				return nil
			}
			fmt.Printf("%-12s %-10s %-10s %6s %6s %6s %6s %6s %6s %6s\n", "tenant", "site", "kind", "size", "usable", "free", "in_use", "banned", "target", "waits")
			for _, st := range all {
				fmt.Printf("%-12s %-10s %-10s %6d %6d %6d %6d %6d %6d %6d\n", st.Tenant, st.Site, st.Kind, st.Size, st.Usable, st.Free, st.InUse, st.Banned, st.Target, st.Counts["waits"])
			}
			return nil
		},
	}

	stats := &cobra.Command{
		Use:   "stats KIND",
		Short: "One pool's settings, counters and every item's health",
		Long: `Shows a pool's settings and counters (uses, successes, failures, bans, throttles, items
dropped and expired, check-outs that found nothing free) and, per item, its uses, health
(0–1, recent requests weigh most), bans and when it is free again.`,
		Example: "  trawler pool stats cookie --site demo --data .data/dev",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := kindArg(args[0])
			if err != nil {
				return err
			}
			p, done, err := open()
			if err != nil {
				return err
			}
			defer done()
			st, err := p.Stats(cmd.Context(), tenant, site, k, true)
			if err != nil {
				return err
			}
			if s.json {
				return printJSON(st)
			}
			c := st.Config
			fmt.Printf("pool %s (tenant %s, site %s): %d items, %d usable, %d free, %d in use, %d banned; target %d\n", k, tenant, site, st.Size, st.Usable, st.Free, st.InUse, st.Banned, st.Target)
			fmt.Printf("  settings: max_uses %d, min_interval %s, ban_after %d, cooldown %s, drop_after %d, rotation %s\n", c.MaxUses, c.MinInterval, c.BanAfter, c.Cooldown, c.DropAfter, c.Rotation)
			fmt.Printf("  counts: %v\n", st.Counts)
			if !st.LastWait.IsZero() {
				fmt.Printf("  last check-out that found nothing free: %s\n", st.LastWait.Local().Format(time.DateTime))
			}
			for _, it := range st.Items {
				state := "free"
				switch {
				case !it.BannedTil.IsZero():
					state = "banned until " + it.BannedTil.Local().Format(time.TimeOnly)
				case it.InUse > 0:
					state = fmt.Sprintf("in use ×%d", it.InUse)
				case !it.FreeAt.IsZero():
					state = "resting until " + it.FreeAt.Local().Format(time.TimeOnly)
				}
				fmt.Printf("  %-28s uses %-5d ok %-5d fail %-3d bans %-2d throttled %-3d health %.2f  %s\n", clip(it.ID, 28), it.Uses, it.OK, it.Failures, it.Bans, it.Throttles, it.Health, state)
			}
			return nil
		},
	}

	var cfg external.Config
	var fromFile string
	add := &cobra.Command{
		Use:   "add KIND [VALUE…]",
		Short: "Add items to a pool (values as arguments, or one per line with --file), and change its settings",
		Long: `Adds items to the pool of KIND for --tenant and --site: proxy URLs, user-agent strings, Cookie
header values or device ids. An item's id is its value. The settings flags change the pool's
settings for every worker; without values, only the settings change.`,
		Example: `  trawler pool add user_agent "Mozilla/5.0 (X11; Linux x86_64) …" --site '*'
  trawler pool add proxy --file proxies.txt --site news --cooldown 10m
  trawler pool add device_id --site demo --target 5`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := kindArg(args[0])
			if err != nil {
				return err
			}
			values := args[1:]
			if fromFile != "" {
				more, err := readLines(fromFile)
				if err != nil {
					return err
				}
				values = append(values, more...)
			}
			if k == external.Sign && len(values) > 0 {
				return fmt.Errorf("sign has no items: choose the signer with --signer NAME|URL")
			}
			if cfg.Signer != "" && k != external.Sign {
				return fmt.Errorf("--signer applies to the sign resource only: trawler pool add sign --site %s --signer %s", site, cfg.Signer)
			}
			p, done, err := open()
			if err != nil {
				return err
			}
			defer done()
			if err := p.Configure(cmd.Context(), tenant, site, k, cfg); err != nil {
				return fmt.Errorf("pool %s settings: %w", k, err)
			}
			items := make([]external.Resource, len(values))
			for i, v := range values {
				items[i] = external.Resource{Value: v}
			}
			if len(items) > 0 {
				if err := p.Add(cmd.Context(), tenant, site, k, items...); err != nil {
					return err
				}
			}
			if s.json {
				return printJSON(map[string]any{"tenant": tenant, "site": site, "kind": k, "added": len(items)})
			}
			if k == external.Sign {
				fmt.Printf("site %s of tenant %s signs with %s\n", site, tenant, cfg.Signer)
				return nil
			}
			fmt.Printf("pool %s (tenant %s, site %s): added %d item(s)\n", k, tenant, site, len(items))
			return nil
		},
	}
	f := add.Flags()
	f.IntVar(&cfg.Target, "target", 0, "size farming fills the pool to (farming steps stop early there)")
	f.IntVar(&cfg.MaxUses, "max-uses", 0, "requests one item serves at once (-1: unlimited)")
	f.DurationVar(&cfg.MinInterval, "min-interval", 0, "least time between two uses of one item, e.g. 500ms (-1ns: none)")
	f.IntVar(&cfg.BanAfter, "ban-after", 0, "failed requests in a row that ban an item (-1: never)")
	f.DurationVar(&cfg.Cooldown, "cooldown", 0, "how long a banned item rests, e.g. 10m")
	f.IntVar(&cfg.DropAfter, "drop-after", 0, "bans that remove an item for good (-1: never)")
	f.DurationVar(&cfg.TTL, "ttl", 0, "life of an added item without an expiry of its own, e.g. 24h")
	f.StringVar(&cfg.Rotation, "rotation", "", "how free items are picked: lru or health")
	f.StringVar(&cfg.Signer, "signer", "", "sign only: a registered signer's name or a signing service's URL")
	f.StringVar(&fromFile, "file", "", "read values from this file, one per line (- for stdin)")

	var all bool
	remove := &cobra.Command{
		Use:     "remove KIND [ID…]",
		Short:   "Remove items from a pool by id, or the whole pool with --all",
		Example: "  trawler pool remove proxy http://10.0.0.7:3128 --site '*'\n  trawler pool remove cookie --site demo --all",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := kindArg(args[0])
			if err != nil {
				return err
			}
			if all == (len(args) > 1) {
				return fmt.Errorf("name the items to remove by id (see `trawler pool stats %s --site %s`), or pass --all for the whole pool", k, site)
			}
			p, done, err := open()
			if err != nil {
				return err
			}
			defer done()
			n := 0
			if all {
				st, err := p.Stats(cmd.Context(), tenant, site, k, false)
				if err != nil {
					return err
				}
				n = st.Size
				err = p.Clear(cmd.Context(), tenant, site, k)
				if err != nil {
					return err
				}
			} else if n, err = p.Remove(cmd.Context(), tenant, site, k, args[1:]...); err != nil {
				return err
			}
			if s.json {
				return printJSON(map[string]any{"tenant": tenant, "site": site, "kind": k, "removed": n})
			}
			fmt.Printf("pool %s (tenant %s, site %s): removed %d item(s)\n", k, tenant, site, n)
			return nil
		},
	}
	remove.Flags().BoolVar(&all, "all", false, "remove the whole pool, its counters and settings")
	cmd.AddCommand(list, stats, add, remove)
	return cmd
}

func readLines(file string) ([]string, error) {
	r := os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}
