package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/external"
)

func poolCmd(s *Settings) *cobra.Command {
	var tenant, site string
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Inspect and fill the resource pools (proxies, user agents, cookies, device ids)",
		Long: `Tasks that declare needs (proxy, user_agent, cookie, device_id, sign) borrow from Redis
pools, one per tenant, site and kind. Farming chains fill them (store: [pool:cookie]); these
commands list them, show each item's health, and add or remove items by hand.

Items are secrets (a session cookie, a proxy's password, a device id), so every listing
shows an item's id — the name it was given with --name, a farming item's key, or a short
hash of its value (h-…) — and its value masked: proxies as http://bob:***@host:3129,
cookies as their names and length. Only --reveal (pool show, pool list) prints values.

A pool's settings travel with it: --target (what farming fills it to), --max-uses (requests
one item serves at once), --min-interval (least time between two uses of one item),
--cooldown (how long a ban lasts), --ttl (life of an added item). Site "*" is a tenant's
shared pool, used for proxies and user agents when a site has none of its own.`,
		Example: `  trawler pool list --data .data/dev
  trawler pool stats cookie --site demo --data .data/dev
  trawler pool show cookie demo:session:reader2 --site demo --reveal --data .data/dev
  trawler pool add proxy http://10.0.0.7:3128 http://10.0.0.8:3128 --site '*' --data .data/dev
  trawler pool add cookie --site demo --target 5 --min-interval 500ms --data .data/dev
  trawler pool add sign --site demo --signer http://signer.internal/sign --data .data/dev
  trawler pool remove cookie demo:session:reader2 --site demo --data .data/dev`,
	}
	cmd.PersistentFlags().StringVar(&tenant, "tenant", crawl.DefaultTenant, "tenant whose pools to use")
	cmd.PersistentFlags().StringVar(&site, "site", "", "site of the pool (the part of a task name before the dot), or * for the tenant's shared pool")
	open := func() (*external.Pools, func(), error) {
		rdb, err := s.RedisClient("holds the pools")
		if err != nil {
			return nil, nil, err
		}
		return external.NewPools(rdb, s.Logger()), func() { rdb.Close() }, nil
	}
	kindArg := func(arg string) (external.Kind, error) {
		k, err := external.ParseKind(arg)
		if err == nil && site == "" {
			err = fmt.Errorf("which site's %s pool? add --site SITE (e.g. --site demo), or --site '*' for the tenant's shared pool", k)
		}
		return k, err
	}

	// kindPool checks a KIND argument and opens the pools.
	kindPool := func(arg string) (external.Kind, *external.Pools, func(), error) {
		k, err := kindArg(arg)
		if err != nil {
			return "", nil, nil, err
		}
		p, done, err := open()
		return k, p, done, err
	}

	var reveal bool
	list := &cobra.Command{
		Use:   "list",
		Short: "Every pool with its size, free, in-use and banned items and target",
		Long: `Lists every pool with its size, usable, free, in-use and banned items, target and the
check-outs that found nothing free. With --reveal, every item follows its pool, with its id
and its value as stored: for moving pools elsewhere; keep the output as secret as the pools.`,
		Example: "  trawler pool list --data .data/dev --json\n  trawler pool list --reveal --data .data/dev",
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
			if reveal {
				for i, st := range all {
					if all[i], err = p.Reveal(cmd.Context(), st.Tenant, st.Site, st.Kind); err != nil {
						return err
					}
				}
			}
			w := cmd.OutOrStdout()
			if s.JSON {
				return writeJSONTo(w, all)
			}
			if len(all) == 0 {
				fmt.Fprintln(w, "no pools yet; run a farming chain (examples/farm.yaml) or `trawler pool add KIND VALUE… --site SITE`")
				return nil
			}
			fmt.Fprintf(w, "%-12s %-10s %-10s %6s %6s %6s %6s %6s %6s %6s\n", "tenant", "site", "kind", "size", "usable", "free", "in_use", "banned", "target", "waits")
			for _, st := range all {
				fmt.Fprintf(w, "%-12s %-10s %-10s %6d %6d %6d %6d %6d %6d %6d\n", st.Tenant, st.Site, st.Kind, st.Size, st.Usable, st.Free, st.InUse, st.Banned, st.Target, st.Counts["waits"])
				for _, it := range st.Items {
					fmt.Fprintf(w, "  %s  %s\n", it.ID, it.Value)
				}
			}
			return nil
		},
	}
	list.Flags().BoolVar(&reveal, "reveal", false, "also print every item's id and value as stored (cookies, proxy passwords, device ids): secrets")

	stats := &cobra.Command{
		Use:   "stats KIND",
		Short: "One pool's settings, counters and every item's health",
		Long: `Shows a pool's settings and counters (uses, successes, failures, bans, throttles, items
dropped and expired, check-outs that found nothing free) and, per item, its uses, health
(0–1, recent requests weigh most), bans and when it is free again.`,
		Example: "  trawler pool stats cookie --site demo --data .data/dev",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, p, done, err := kindPool(args[0])
			if err != nil {
				return err
			}
			defer done()
			st, err := p.Stats(cmd.Context(), tenant, site, k, true)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if s.JSON {
				return writeJSONTo(w, st)
			}
			c := st.Config
			fmt.Fprintf(w, "pool %s (tenant %s, site %s): %d items, %d usable, %d free, %d in use, %d banned; target %d\n", k, tenant, site, st.Size, st.Usable, st.Free, st.InUse, st.Banned, st.Target)
			fmt.Fprintf(w, "  settings: %s\n", c.Settings())
			if c.Signer != "" {
				fmt.Fprintf(w, "  signer: %s\n", c.Signer)
			}
			fmt.Fprintf(w, "  counts: %v\n", st.Counts)
			if !st.LastWait.IsZero() {
				fmt.Fprintf(w, "  last check-out that found nothing free: %s\n", st.LastWait.Local().Format(time.DateTime))
			}
			for _, it := range st.Items {
				fmt.Fprintf(w, "  %-28s %-30s uses %-5d ok %-5d fail %-3d bans %-2d throttled %-3d health %.2f  %s\n", clip(it.ID, 28), clip(it.Value, 30), it.Uses, it.OK, it.Failures, it.Bans, it.Throttles, it.Health, itemState(it))
			}
			return nil
		},
	}

	show := &cobra.Command{
		Use:   "show KIND ID",
		Short: "One item of a pool: its value (masked unless --reveal), bindings, counters and state",
		Long: `Shows one item, named by its id (as pool stats lists it) or by its value: its value masked
(a proxy's password, a cookie's values, a device id), the attributes that bind it (a cookie's
device id and user agent), its counters and whether it is free. --reveal prints the value and
the attributes as stored.`,
		Example: "  trawler pool show cookie demo:session:reader2 --site demo --data .data/dev\n  trawler pool show proxy h-3f2a9c1b7d0e --site '*' --reveal --data .data/dev",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, p, done, err := kindPool(args[0])
			if err != nil {
				return err
			}
			defer done()
			// Read the values only to find an item given by value; print them only on --reveal.
			all, err := p.Reveal(cmd.Context(), tenant, site, k)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(all.Items, func(it external.ItemStats) bool {
				return it.ID == args[1] || it.Value == args[1] || it.ID == external.ItemID(args[1])
			})
			if i < 0 {
				return fmt.Errorf("pool %s (tenant %s, site %s) has no item %q; `trawler pool stats %s --site %s` lists the ids", k, tenant, site, args[1], k, site)
			}
			it := all.Items[i]
			if !reveal {
				masked, err := p.Stats(cmd.Context(), tenant, site, k, true)
				if err != nil {
					return err
				}
				j := slices.IndexFunc(masked.Items, func(m external.ItemStats) bool { return m.ID == it.ID })
				if j < 0 {
					return fmt.Errorf("pool %s (tenant %s, site %s): item %s went away while it was read; try again", k, tenant, site, it.ID)
				}
				it = masked.Items[j]
			}
			w := cmd.OutOrStdout()
			if s.JSON {
				return writeJSONTo(w, it)
			}
			fmt.Fprintf(w, "%s %s (tenant %s, site %s)\n  value: %s\n", k, it.ID, tenant, site, it.Value)
			for _, name := range slices.Sorted(maps.Keys(it.Attrs)) {
				fmt.Fprintf(w, "  %s: %s\n", name, it.Attrs[name])
			}
			fmt.Fprintf(w, "  added %s", it.Added.Local().Format(time.DateTime))
			if !it.Expires.IsZero() {
				fmt.Fprintf(w, ", expires %s", it.Expires.Local().Format(time.DateTime))
			}
			fmt.Fprintf(w, "\n  uses %d, ok %d, failures %d, bans %d, throttled %d, health %.2f; %s\n", it.Uses, it.OK, it.Failures, it.Bans, it.Throttles, it.Health, itemState(it))
			return nil
		},
	}
	show.Flags().BoolVar(&reveal, "reveal", false, "print the value and attributes as stored (a secret: the cookie, the proxy's password)")

	var cfg external.Config
	var fromFile, name string
	add := &cobra.Command{
		Use:   "add KIND [VALUE…]",
		Short: "Add items to a pool (values as arguments, or one per line with --file), and change its settings",
		Long: `Adds items to the pool of KIND for --tenant and --site: proxy URLs, user-agent strings, Cookie
header values or device ids. An item's id is the --name given to it (one value), else a short
hash of its value (h-…), so listings never show the value; adding a value again, or a name
again, replaces that item. The settings flags change the pool's settings for every worker;
without values, only the settings change.`,
		Example: `  trawler pool add user_agent "Mozilla/5.0 (X11; Linux x86_64) …" --site '*'
  trawler pool add cookie "sid=…" --name reader7 --site demo
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
			if name != "" && len(values) != 1 {
				return fmt.Errorf("--name names one item: give exactly one value with it (got %d), or leave --name out and the items get hashed ids", len(values))
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
				items[i] = external.Resource{ID: name, Value: v}
			}
			if len(items) > 0 {
				if err := p.Add(cmd.Context(), tenant, site, k, items...); err != nil {
					return err
				}
			}
			// The settings flags given, as given: what this command changed besides items.
			set := map[string]string{}
			var changed []string
			cmd.Flags().Visit(func(f *pflag.Flag) {
				if f.Name != "file" && f.Name != "name" && f.Name != "signer" && cmd.LocalNonPersistentFlags().Lookup(f.Name) != nil {
					set[f.Name] = f.Value.String()
					changed = append(changed, f.Name+" "+f.Value.String())
				}
			})
			w := cmd.OutOrStdout()
			if s.JSON {
				return writeJSONTo(w, map[string]any{"tenant": tenant, "site": site, "kind": k, "added": len(items), "settings": set})
			}
			if k == external.Sign {
				fmt.Fprintf(w, "site %s of tenant %s signs with %s\n", site, tenant, crawl.RedactURL(cfg.Signer))
				return nil
			}
			did := fmt.Sprintf("added %d item(s)", len(items))
			if len(changed) > 0 {
				did += "; set " + strings.Join(changed, ", ")
			}
			fmt.Fprintf(w, "pool %s (tenant %s, site %s): %s\n", k, tenant, site, did)
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
	f.StringVar(&name, "name", "", "id of the one item added (e.g. the account a cookie belongs to); default: a hash of its value")

	var all bool
	remove := &cobra.Command{
		Use:     "remove KIND [ID|VALUE…]",
		Short:   "Remove items from a pool by id (or by value), or the whole pool with --all",
		Example: "  trawler pool remove proxy h-3f2a9c1b7d0e --site '*'\n  trawler pool remove proxy http://10.0.0.7:3128 --site '*'\n  trawler pool remove cookie --site demo --all",
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
			if s.JSON {
				return writeJSONTo(cmd.OutOrStdout(), map[string]any{"tenant": tenant, "site": site, "kind": k, "removed": n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pool %s (tenant %s, site %s): removed %d item(s)\n", k, tenant, site, n)
			return nil
		},
	}
	remove.Flags().BoolVar(&all, "all", false, "remove the whole pool, its counters and settings")
	cmd.AddCommand(list, stats, show, add, remove)
	return cmd
}

// itemState says whether an item is free, and if not, until when it rests.
func itemState(it external.ItemStats) string {
	switch {
	case !it.BannedTil.IsZero():
		return "banned until " + it.BannedTil.Local().Format(time.TimeOnly)
	case it.InUse > 0:
		return fmt.Sprintf("in use ×%d", it.InUse)
	case !it.FreeAt.IsZero():
		return "resting until " + it.FreeAt.Local().Format(time.TimeOnly)
	}
	return "free"
}

// writeJSONTo writes v as one line of JSON to w (the command's output, so tests read it).
func writeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
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
