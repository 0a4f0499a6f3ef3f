package cli

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/internal/console"
	kafkasink "github.com/trawlerhq/trawler/internal/storage/kafka"
)

func tokenCmd(s *Settings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list, rotate and revoke the console's tokens (principals with a role and tenants)",
		Long: `A console token belongs to a principal with a role:

  admin     everything, every tenant; reads the audit trail
  operator  of tenants T…: starts and cancels runs, schedules, pools of T, and reads them;
            sees pool values only when created with --reveal and asking with reveal=1
  analyst   of tenants T…: reads runs, records, search, history and (masked) pools of T
  viewer    reads everything of every tenant (as the console's --read-token), values masked

Tokens are kept in Redis only as their SHA-256 digest; a token is shown once, when it is
created or rotated. Every console reads Redis on each request, so a revoked or rotated
token is refused at once by the whole fleet. Creating, rotating and revoking are recorded
in the audit trail (trawler audit).`,
		Example: `  trawler token create --role analyst --tenant acme --name alice --data .data/dev
  trawler token create --role operator --tenant acme,globex --reveal --name ops-bot
  trawler token list --json
  trawler token rotate p-3f2a9c01b4de
  trawler token revoke p-3f2a9c01b4de`,
	}
	open := func() (*console.Principals, *console.Audit, func(), error) {
		rdb, err := s.RedisClient("keeps the console's tokens")
		if err != nil {
			return nil, nil, nil, err
		}
		a, err := console.NewAudit(rdb, nil, kafkasink.Auth{}, s.Logger())
		if err != nil {
			rdb.Close()
			return nil, nil, nil, err
		}
		return console.NewPrincipals(rdb), a, func() { rdb.Close() }, nil
	}
	record := func(ctx context.Context, a *console.Audit, action string, p console.Principal) error {
		return a.Record(ctx, console.AuditEntry{Who: "cli", Name: operatorName(), Role: console.RoleAdmin, Action: "token " + action,
			Target: "id=" + p.ID + " name=" + p.Name + " role=" + string(p.Role) + tenantsNote(p), Source: "cli"})
	}
	show := func(p console.Principal, tok, verb string) error {
		if s.JSON {
			return PrintJSON(map[string]any{"principal": p, "token": tok})
		}
		fmt.Printf("%s %s (%s%s, id %s)\n\n  %s\n\nThis token is shown once: keep it now. Clients send \"Authorization: Bearer TOKEN\".\n", verb, p.Name, p.Role, tenantsNote(p), p.ID, tok)
		return nil
	}

	var role, tenants, name string
	var reveal bool
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a principal and print its token (once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := console.Principal{Name: name, Role: console.Role(strings.ToLower(strings.TrimSpace(role))), Reveal: reveal, CreatedBy: operatorName()}
			if tenants != "" {
				for _, t := range strings.Split(tenants, ",") {
					p.Tenants = append(p.Tenants, strings.TrimSpace(t))
				}
			}
			if err := console.CheckPrincipal(&p); err != nil {
				return err // before Redis: a typo is told at once
			}
			ps, a, done, err := open()
			if err != nil {
				return err
			}
			defer done()
			p, tok, err := ps.Create(cmd.Context(), p)
			if err != nil {
				return err
			}
			if err := record(cmd.Context(), a, "create", p); err != nil {
				return err
			}
			return show(p, tok, "created")
		},
	}
	create.Flags().StringVar(&role, "role", "", "admin, operator, analyst or viewer")
	create.Flags().StringVar(&tenants, "tenant", "", "tenants of an operator or analyst, `T[,T…]`")
	create.Flags().StringVar(&name, "name", "", "whose token it is, as the audit trail names it")
	create.Flags().BoolVar(&reveal, "reveal", false, "let an operator see pool values (when a request asks with reveal=1)")

	list := &cobra.Command{
		Use:   "list",
		Short: "Every principal: id, name, role, tenants (never a token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, _, done, err := open()
			if err != nil {
				return err
			}
			defer done()
			all, err := ps.List(cmd.Context())
			if err != nil {
				return err
			}
			if s.JSON {
				return PrintJSON(map[string]any{"principals": all})
			}
			if len(all) == 0 {
				fmt.Println("no principals yet: `trawler token create --role R --name N` makes one")
				return nil
			}
			fmt.Printf("%-16s %-20s %-9s %-24s %s\n", "ID", "NAME", "ROLE", "TENANTS", "CREATED")
			for _, p := range all {
				t := strings.Join(p.Tenants, ",")
				if p.Reveal {
					t += " (reveal)"
				}
				fmt.Printf("%-16s %-20s %-9s %-24s %s\n", p.ID, p.Name, p.Role, t, p.Created.Format(time.RFC3339))
			}
			return nil
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a principal's token: every console refuses it from the next request",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ps, a, done, err := open()
			if err != nil {
				return err
			}
			defer done()
			p, err := ps.Revoke(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := record(cmd.Context(), a, "revoke", p); err != nil {
				return err
			}
			if s.JSON {
				return PrintJSON(map[string]any{"revoked": p})
			}
			fmt.Printf("revoked %s (%s, id %s)\n", p.Name, p.Role, p.ID)
			return nil
		},
	}
	rotate := &cobra.Command{
		Use:   "rotate ID",
		Short: "Give a principal a new token (shown once); the old one is refused at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ps, a, done, err := open()
			if err != nil {
				return err
			}
			defer done()
			p, tok, err := ps.Rotate(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := record(cmd.Context(), a, "rotate", p); err != nil {
				return err
			}
			return show(p, tok, "rotated")
		},
	}
	cmd.AddCommand(create, list, revoke, rotate)
	return cmd
}

func auditCmd(s *Settings) *cobra.Command {
	var since string
	var n int
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "The audit trail: state-changing console calls, reveals and token changes",
		Long: `Prints the audit trail the consoles keep in Redis (stream trawler:audit, about the last
100,000 entries; with Kafka, also the topic trawler.audit): who (principal id, name, role),
the tenant, the action (route or command), its target, the time, the caller's address and
the answer's status. It never holds a token or a pool value.`,
		Example: `  trawler audit --since 24h --data .data/dev
  trawler audit --since 2025-01-31T08:00:00Z --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			from, err := console.ParseSince(since, time.Now())
			if err != nil {
				return fmt.Errorf("--%w", err)
			}
			rdb, err := s.RedisClient("keeps the audit trail")
			if err != nil {
				return err
			}
			defer rdb.Close()
			return printAudit(cmd.Context(), rdb, s, from, n)
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "from this time (RFC 3339) or this long ago (24h); default every entry kept")
	cmd.Flags().IntVar(&n, "n", 1000, "at most this many entries")
	return cmd
}

func printAudit(ctx context.Context, rdb redis.UniversalClient, s *Settings, since time.Time, n int) error {
	a, err := console.NewAudit(rdb, nil, kafkasink.Auth{}, s.Logger())
	if err != nil {
		return err
	}
	entries, err := a.Read(ctx, since, n)
	if err != nil {
		return err
	}
	if s.JSON {
		for _, e := range entries {
			if err := PrintJSON(e); err != nil {
				return err
			}
		}
		return nil
	}
	if len(entries) == 0 {
		fmt.Println("no audit entries in that time")
	}
	for _, e := range entries {
		who := e.Name + " (" + string(e.Role) + ", " + e.Who + ")"
		fmt.Printf("%s  %-40s %-30s %-12s %-24s %3d  from %s\n", e.Time.Format(time.RFC3339), who, e.Action, e.Tenant, e.Target, e.Status, e.Source)
	}
	return nil
}

// operatorName is who runs the command, for the audit trail: user@host.
func operatorName() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

func tenantsNote(p console.Principal) string {
	if len(p.Tenants) == 0 {
		return ""
	}
	return " of " + strings.Join(p.Tenants, ",")
}
