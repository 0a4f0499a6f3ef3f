package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/internal/events"
)

func eventsCmd(s *Settings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Print the events of runs and chains, and the deliveries that failed",
		Long: `Every run's start and end, pause and resume, broken expectation, outage, backlog,
failure rate and exhausted budget is an event in the Redis stream trawler:events; a
deliverer (every worker with Redis, and trawler dev) sends each to the Kafka topic
trawler.events and to the webhooks configured for its tenant or chain (trawler webhook).
See docs/operating-runs.md#events-and-notifications.`,
	}
	var tenant string
	var types []string
	var n int
	var follow bool
	tail := &cobra.Command{
		Use:   "tail",
		Short: "Print the newest events, oldest first; --follow keeps printing new ones",
		Example: `  trawler events tail --data .data/dev
  trawler events tail --follow --tenant acme --type run_failed,expectation_broken --json --data .data/dev`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, t := range types {
				if !slices.Contains(events.Types, t) {
					return fmt.Errorf("--type %s: not an event type; the types are %s", t, strings.Join(events.Types, ", "))
				}
			}
			rdb, err := s.RedisClient("keeps the events")
			if err != nil {
				return err
			}
			defer rdb.Close()
			f := events.Filter{Tenant: tenant, Types: types}
			out := cmd.OutOrStdout()
			// The newest entry before printing, so --follow starts right after it.
			newest := "0-0"
			if last, err := rdb.XRevRangeN(cmd.Context(), events.Stream, "+", "-", 1).Result(); err == nil && len(last) > 0 {
				newest = last[0].ID
			}
			list, err := events.Last(cmd.Context(), rdb, f, n)
			if err != nil {
				return err
			}
			for _, e := range list {
				if err := printEvent(out, s.JSON, e); err != nil {
					return err
				}
			}
			if !follow {
				return nil
			}
			return events.Follow(cmd.Context(), rdb, f, newest, func(e events.Event) error { return printEvent(out, s.JSON, e) })
		},
	}
	tail.Flags().StringVar(&tenant, "tenant", "", "only this tenant's events")
	tail.Flags().StringSliceVar(&types, "type", nil, "only events of these types ("+strings.Join(events.Types, ", ")+")")
	tail.Flags().IntVarP(&n, "n", "n", 20, "how many of the newest events to print first")
	tail.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing events as they come, until Ctrl-C")
	var deadN int
	dead := &cobra.Command{
		Use:   "dead",
		Short: "List the webhook and Kafka deliveries that failed every attempt (the dead-letter log)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rdb, err := s.RedisClient("keeps the events")
			if err != nil {
				return err
			}
			defer rdb.Close()
			list, err := events.Dead(cmd.Context(), rdb, deadN)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, d := range list {
				if s.JSON {
					if err := writeJSONTo(out, d); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintf(out, "%s %s → %s after %d attempts: %s\n    %s\n", d.At.Format("2006-01-02 15:04:05Z"), d.Event.ID, d.Receiver, d.Attempts, d.Error, events.Text(d.Event))
			}
			return nil
		},
	}
	dead.Flags().IntVarP(&deadN, "n", "n", 50, "how many of the newest to list")
	cmd.AddCommand(tail, dead)
	return cmd
}

func printEvent(w io.Writer, asJSON bool, e events.Event) error {
	if asJSON {
		return writeJSONTo(w, e)
	}
	_, err := fmt.Fprintln(w, e.ID, events.Text(e))
	return err
}

func webhookCmd(s *Settings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Configure the webhooks a tenant's (or one chain's) events are POSTed to",
		Long: `A webhook receives the events of one tenant, or of one chain of it, as JSON (or as a
Slack message with --format slack), signed with HMAC-SHA256 when it has a secret:
--secret-env names the environment variable of the deliverer that holds the secret,
which is never stored. A chain file's notify: configures its chain's webhooks too.
See docs/operating-runs.md#events-and-notifications.`,
	}
	var w events.Webhook
	add := &cobra.Command{
		Use:   "add URL",
		Short: "POST the tenant's (or chain's) events to URL",
		Example: `  trawler webhook add https://hooks.example.com/trawler --tenant acme --secret-env ACME_HOOK_SECRET --data .data/dev
  trawler webhook add https://hooks.slack.com/services/T0/B0/X --tenant acme --chain shop --events run_failed,expectation_broken --format slack --data .data/dev`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w.URL = args[0]
			if bad := w.Check(); len(bad) > 0 {
				return fmt.Errorf("%s", strings.Join(bad, "; "))
			}
			rdb, err := s.RedisClient("keeps the webhooks")
			if err != nil {
				return err
			}
			defer rdb.Close()
			if err := events.AddWebhook(cmd.Context(), rdb, w); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "webhook %s receives the events of %s\n", w.Shown(), scopeName(w))
			return nil
		},
	}
	add.Flags().StringVar(&w.Tenant, "tenant", "", "the tenant whose events it receives (default: the default tenant)")
	add.Flags().StringVar(&w.Chain, "chain", "", "only this chain's events")
	add.Flags().StringVar(&w.SecretEnv, "secret-env", "", "environment variable of the deliverer holding the signing secret")
	add.Flags().StringSliceVar(&w.Events, "events", nil, "only these event types (default: all)")
	add.Flags().StringVar(&w.Format, "format", "", "slack: post {\"text\": …}; default: the event as JSON")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the configured webhooks (URLs with credentials masked)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rdb, err := s.RedisClient("keeps the webhooks")
			if err != nil {
				return err
			}
			defer rdb.Close()
			ws, err := events.ListWebhooks(cmd.Context(), rdb)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, w := range ws {
				w.URL = w.Shown()
				if s.JSON {
					if err := writeJSONTo(out, w); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintf(out, "%s  %s  events=%s format=%s secret_env=%s source=%s\n", w.URL, scopeName(w),
					orAll(strings.Join(w.Events, ",")), orAll(w.Format), w.SecretEnv, w.Source)
			}
			return nil
		},
	}
	var rmTenant, rmChain string
	remove := &cobra.Command{
		Use:   "remove URL",
		Short: "Stop posting to URL",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rdb, err := s.RedisClient("keeps the webhooks")
			if err != nil {
				return err
			}
			defer rdb.Close()
			ok, err := events.RemoveWebhook(cmd.Context(), rdb, rmTenant, rmChain, args[0])
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("no webhook %s for %s: see `trawler webhook list`", events.Webhook{URL: args[0]}.Shown(), scopeName(events.Webhook{Tenant: rmTenant, Chain: rmChain}))
			}
			return nil
		},
	}
	remove.Flags().StringVar(&rmTenant, "tenant", "", "the webhook's tenant")
	remove.Flags().StringVar(&rmChain, "chain", "", "the webhook's chain")
	cmd.AddCommand(add, list, remove)
	return cmd
}

func scopeName(w events.Webhook) string {
	name := "tenant " + w.Tenant
	if w.Tenant == "" {
		name = "the default tenant"
	}
	if w.Chain != "" {
		name += ", chain " + w.Chain
	}
	return name
}

func orAll(s string) string {
	if s == "" {
		return "all"
	}
	return s
}
