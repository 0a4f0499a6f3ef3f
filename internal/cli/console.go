package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/internal/console"
	"github.com/trawlerhq/trawler/internal/endpoints"
)

// defaultConsoleAddr is where `trawler console`, `trawler dev` and `trawler demo` serve
// the console; dev and demo take any free port when it is taken.
const DefaultConsoleAddr = "127.0.0.1:8090"

func consoleCmd(s *Settings) *cobra.Command {
	var listen, token, readToken, tokenFile, readTokenFile, ui string
	var maxBody int64
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console and HTTP API for a Temporal cluster and its stores",
		Long: `Serve the web console and its HTTP API: runs with live progress, rates and failure
causes; a chain editor that checks as you type and starts runs; schedules; search over
Elasticsearch; the records of the MongoDB hot store; dedup stats; /healthz (every store's
reachability) and /metrics (Prometheus); with HBase, every record's version history.

The console talks to the servers the settings name (flags, TRAWLER_* variables, or the
endpoints.json of --data): Temporal, Redis, Kafka, MongoDB, Elasticsearch and HBase; the pages
of a store that is not configured say which setting to give.

Access: it listens on 127.0.0.1 by default. To listen anywhere else, give a bearer token
(--token or TRAWLER_TOKEN); API clients then send "Authorization: Bearer TOKEN", and the
browser asks for it once. --read-token (TRAWLER_READ_TOKEN) is a second token for
analysts: it can search and read runs, items, history and pools (with their secrets
masked), but not start, cancel or schedule runs, nor see pool values (?reveal=1).
--token-file and --read-token-file (TRAWLER_TOKEN_FILE, TRAWLER_READ_TOKEN_FILE) read a
token from a file instead, which keeps it out of the process list and shell history.
Request bodies are capped at --max-body bytes (1 MiB).`,
		Example: `  trawler console --data .data/dev
  trawler console --temporal temporal.internal:7233 --namespace crawl --es http://es1:9200 \
      --mongo "mongodb://m1,m2,m3/?replicaSet=rs0" --listen 0.0.0.0:8090 --token "$TOKEN" --read-token "$ANALYST_TOKEN"
  trawler console --data .data/dev --listen 0.0.0.0:8090 --token-file /etc/trawler/token --read-token-file /etc/trawler/read-token
  curl -H "Authorization: Bearer $TOKEN" http://console.internal:8090/api/runs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if token, err = consoleToken(token, tokenFile, "token"); err != nil {
				return err
			}
			if readToken, err = consoleToken(readToken, readTokenFile, "read-token"); err != nil {
				return err
			}
			if ui == "" {
				ui = os.Getenv("TRAWLER_TEMPORAL_UI")
			}
			if err := console.CheckAccess(listen, token); err != nil {
				return err
			}
			c, err := s.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			if ui == "" && s.Data != "" {
				if ep, err := endpoints.Read(s.Data); err == nil {
					ui = ep.TemporalUI
				}
			}
			cfg := s.ConsoleConfig(c, ui)
			if cfg.RedisAuth, err = s.redisOptions(); err != nil {
				return err
			}
			auth, err := s.storeAuth()
			if err != nil {
				return err
			}
			cfg.KafkaAuth, cfg.ESAuth = auth.Kafka, auth.ES
			cfg.Token, cfg.ReadToken, cfg.MaxBody = token, readToken, maxBody
			srv, err := console.New(cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			return srv.Listen(cmd.Context(), listen, func(url string) {
				if s.JSON {
					_ = PrintJSON(map[string]string{"console": url})
					return
				}
				fmt.Printf("console %s (Ctrl-C to stop)\n", url)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", DefaultConsoleAddr, "HOST:PORT to serve on; anything but loopback needs --token")
	f.StringVar(&token, "token", "", "bearer token for full access (start, cancel, schedule) [TRAWLER_TOKEN]")
	f.StringVar(&readToken, "read-token", "", "bearer token for read-only access: search, runs, items, history [TRAWLER_READ_TOKEN]")
	f.StringVar(&tokenFile, "token-file", "", "file holding the full-access token, instead of --token [TRAWLER_TOKEN_FILE]")
	f.StringVar(&readTokenFile, "read-token-file", "", "file holding the read-only token, instead of --read-token [TRAWLER_READ_TOKEN_FILE]")
	f.Int64Var(&maxBody, "max-body", console.DefaultMaxBody, "largest request body the API reads, in bytes; larger ones get 413")
	f.StringVar(&ui, "temporal-ui", "", "base URL of the Temporal Web UI, for links to a run's workflow (default from --data) [TRAWLER_TEMPORAL_UI]")
	return cmd
}

// consoleToken resolves one of the console's tokens: --NAME or --NAME-file, else
// TRAWLER_NAME or TRAWLER_NAME_FILE (flags win over the environment; two sources at one
// level are refused, so it is clear which token is in force).
func consoleToken(value, file, name string) (string, error) {
	if value != "" || file != "" {
		return console.Token(value, file, "--"+name, "--"+name+"-file")
	}
	env := "TRAWLER_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	return console.Token(os.Getenv(env), os.Getenv(env+"_FILE"), env, env+"_FILE")
}

// consoleConfig is the console's view of resolved settings.
func (s *Settings) ConsoleConfig(c client.Client, temporalUI string) console.Config {
	return console.Config{Temporal: c, Namespace: s.Namespace, TaskQueue: s.TaskQueue, TemporalUI: temporalUI,
		Redis: s.Redis, Kafka: s.KafkaBrokers(), Mongo: s.Mongo, ES: s.ES, HBase: s.HBase, Log: s.Logger()}
}
