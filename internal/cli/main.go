// Package cli is the trawler command: every subcommand, its flags and its output. The
// binary's main (cmd/trawler) only calls Main.
package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/endpoints"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/redisurl"
	"github.com/trawlerhq/trawler/internal/tracing"

	_ "github.com/trawlerhq/trawler/internal/sites/demo"
	_ "github.com/trawlerhq/trawler/internal/sites/generic"
	_ "github.com/trawlerhq/trawler/internal/sites/hackernews"
)

// embeddedOnly are the commands that start embedded servers (dev, demo) or the
// benchmarks' peer crawler: Trawler's own binary registers them (internal/devcli), a
// production build and a site's binary built on the public cli package do not link them.
var embeddedOnly = []string{"demo", "dev", "bench"}

var embedded = map[string]func(*Settings) *cobra.Command{}

// AddEmbedded registers one of the embeddedOnly commands; internal/devcli does, from
// its init.
func AddEmbedded(name string, cmd func(*Settings) *cobra.Command) {
	if !slices.Contains(embeddedOnly, name) {
		panic("cli.AddEmbedded: " + name + " is not one of " + strings.Join(embeddedOnly, ", "))
	}
	embedded[name] = cmd
}

// notInThisBinary stands for an embeddedOnly command this binary does not carry and
// says where it is.
func notInThisBinary(name string) *cobra.Command {
	return &cobra.Command{
		Use:    name,
		Short:  "(not in this binary: it is in Trawler's own, see `" + name + " --help`)",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("trawler %s starts embedded servers, which this binary does not carry (a production build, or a site's binary built on the public cli package); run it from Trawler's own binary: go run github.com/trawlerhq/trawler/cmd/trawler %s (a checkout: go run ./cmd/trawler %s)", name, name, name)
		},
	}
}

// Main runs the trawler command with the process's arguments and exits with its status.
func Main() {
	// Workers, dev and bench are long crawls of short-lived garbage; the other commands
	// end before the setting matters.
	engine.TuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, os.Args[1:]); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			os.Exit(int(exit))
		}
		// Errors quote addresses (--es, --mongo, --redis …) that may carry a password.
		fmt.Fprintln(os.Stderr, "trawler:", crawl.RedactText(err.Error()))
		os.Exit(1)
	}
}

// Run runs the trawler command with args (without the program name) until it ends or ctx
// is done. A command that printed its own message returns an error whose text is only
// "exit N", N being the status Main exits with.
func Run(ctx context.Context, args []string) error {
	// go-redis logs every failed dial to stderr on its own; the command's error already
	// says what is wrong, once, with the address masked.
	redis.SetLogger(quietRedis{})
	root := newRoot()
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// exitError ends the process with a code after the command printed its own message.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// settings are where a command finds Temporal and writes its output. Each resolves by
// one rule (settings.go): its flag, then its TRAWLER_* environment variable, then the
// endpoints.json of a running `trawler dev` named by --data, then its default.
type Settings struct {
	Data      string
	Temporal  string
	Namespace string
	TaskQueue string
	Out       string
	Redis     string
	Kafka     string // brokers of the kafka sink, comma-separated
	ES        string // URL of the es sink's Elasticsearch
	HBase     string // ZooKeeper quorum of the hbase sink
	Mongo     string // URI of the mongo sink
	auth      authSettings
	JSON      bool
	verbose   bool
	otlp      string // where traces go: an OTLP/gRPC collector's HOST:PORT, or stderr
	// secretParams names query parameters, besides crawl.DefaultSecretParams, whose
	// values are masked wherever a URL is shown.
	secretParams string
	stopTrace    func(context.Context) error
	sources      map[string]string // flag name → where resolve found its value
	off          map[string]bool   // flag name → the store is left out (storeOff)
}

func newRoot() *cobra.Command {
	s := &Settings{}
	root := &cobra.Command{
		Use:   "trawler",
		Short: "Durable crawl chains on Temporal",
		Long: `Trawler runs crawl chains: small per-site tasks (feed → detail → comments) declared in
a YAML chain file, each run as a Temporal activity over batches of inputs, each chain as
a Temporal workflow, so a crawl survives crashed workers and restarts.

Start here:
  trawler demo                          run the bundled demo end to end on embedded servers
  trawler dev --data .data/dev          embedded stack + worker, until Ctrl-C
  trawler validate examples/*.yaml      check chain files (file:line and the fix)
  trawler run examples/demo.yaml --data .data/dev --wait
  trawler status --data .data/dev       list runs; trawler status RUN_ID for one

Settings come from flags, then TRAWLER_* environment variables (TRAWLER_TEMPORAL,
TRAWLER_NAMESPACE, TRAWLER_TASK_QUEUE, TRAWLER_DATA, TRAWLER_OUT, TRAWLER_REDIS,
TRAWLER_KAFKA, TRAWLER_MONGO, and one per credential flag: TRAWLER_REDIS_PASSWORD_FILE
…), then the endpoints.json that a running 'trawler dev --data DIR' writes into DIR,
then defaults, each setting on its own; 'trawler config show' prints where each came from.
Secrets are read from files (--redis-password-file, --kafka-password-file,
--es-password-file, --es-api-key-file, --mongo-password-file,
--temporal-api-key-file), never from flag values.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&s.Data, "data", "", "data directory `DIR` of a trawler dev stack (its endpoints.json names the servers) [TRAWLER_DATA]")
	pf.StringVar(&s.Temporal, "temporal", "", "Temporal frontend host:port (default from --data, else 127.0.0.1:7233) [TRAWLER_TEMPORAL]")
	pf.StringVar(&s.Namespace, "namespace", "", "Temporal namespace (default \"default\") [TRAWLER_NAMESPACE]")
	pf.StringVar(&s.TaskQueue, "task-queue", "", "Temporal task queue of the workers (default \"trawler\") [TRAWLER_TASK_QUEUE]")
	pf.StringVar(&s.Out, "out", "", "directory of the jsonl sink (default <data>/out) [TRAWLER_OUT]")
	pf.StringVar(&s.Redis, "redis", "", "Redis of dedup, pools and quotas: host:port, redis://[user:password@]host:port[/db], rediss://…, redis-sentinel://[user:password@]h1:26379,h2:26379/MASTER or redis-cluster://[user:password@]h1:6379,h2:6379 (default from --data; none: dedup off) [TRAWLER_REDIS]")
	pf.StringVar(&s.HBase, "hbase", "", "ZooKeeper quorum of the hbase sink and of trawler history, HOST:PORT[,HOST:PORT…] (default from --data; none: no hbase sink) [TRAWLER_HBASE]")
	pf.StringVar(&s.ES, "es", "", "Elasticsearch URL of the es sink and of trawler search (default from --data; none: no es sink) [TRAWLER_ES]")
	pf.StringVar(&s.Kafka, "kafka", "", "Kafka brokers of the kafka sink, HOST:PORT[,HOST:PORT…] (default from --data; none: no kafka sink) [TRAWLER_KAFKA]")
	pf.StringVar(&s.Mongo, "mongo", "", "MongoDB URI of the mongo sink, mongodb://… (default from --data; none: no mongo sink) [TRAWLER_MONGO]")
	s.auth.register(pf)
	pf.BoolVar(&s.JSON, "json", false, "machine-readable output: JSON lines, the last one the result")
	pf.BoolVarP(&s.verbose, "verbose", "v", false, "log worker and client details to stderr")
	pf.StringVar(&s.otlp, "otlp", "", "send OpenTelemetry traces (workflow → batch activity → each fetch and store write) to this OTLP/gRPC collector `HOST:PORT` (https://HOST:PORT for TLS), or print each span to stderr with --otlp stderr [TRAWLER_OTLP]")
	pf.StringVar(&s.secretParams, "secret-params", "", "more query parameters whose values are secrets, `NAME[,NAME…]`, masked wherever a URL is shown (besides "+strings.Join(crawl.DefaultSecretParams, ", ")+") [TRAWLER_SECRET_PARAMS]")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := s.apply(s.earlyTable(), nil); err != nil {
			return err
		}
		crawl.SetSecretParams(strings.Split(s.secretParams, ","))
		if s.otlp == "" {
			return nil
		}
		var err error
		s.stopTrace, err = tracing.Start(cmd.Context(), s.otlp, "trawler-"+cmd.Name(), os.Stderr)
		return err
	}
	root.PersistentPostRunE = func(cmd *cobra.Command, _ []string) error {
		if s.stopTrace == nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 5*time.Second)
		defer cancel()
		return s.stopTrace(ctx) // sends what is still buffered
	}
	root.AddCommand(workerCmd(s), runCmd(s), statusCmd(s), validateCmd(s), scheduleCmd(s), dedupCmd(s), quotaCmd(s), tryCmd(s), itemsCmd(s), searchCmd(s), consoleCmd(s), historyCmd(s), poolCmd(s), newCmd(s), exportCmd(s), tokenCmd(s), auditCmd(s), configCmd(s), controlCmd(s, engine.ActionPause), controlCmd(s, engine.ActionResume), rerunCmd(s), reparseCmd(s), archiveCmd(), eventsCmd(s), webhookCmd(s))
	for _, name := range embeddedOnly {
		if add := embedded[name]; add != nil {
			root.AddCommand(add(s))
		} else {
			root.AddCommand(notInThisBinary(name))
		}
	}
	return root
}

// stackSite is the address of the demo site of the stack that --data (or TRAWLER_DATA)
// names, from its endpoints.json: try and new chain fetch it without --allow-private,
// since it is the stack's own site, while every other loopback port stays refused.
func (s *Settings) stackSite() []netip.AddrPort {
	data := s.DataDir("")
	if data == "" {
		return nil
	}
	ep, err := endpoints.Read(data)
	if err != nil || ep.DemoSite == "" {
		return nil
	}
	u, err := url.Parse(ep.DemoSite)
	if err != nil {
		return nil
	}
	ap, err := netip.ParseAddrPort(u.Host)
	if err != nil {
		return nil
	}
	return []netip.AddrPort{ap}
}

func (s *Settings) Logger() *slog.Logger {
	level := slog.LevelWarn
	if s.verbose {
		level = slog.LevelInfo
	}
	return slog.New(redactingHandler{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})})
}

// connect resolves the settings and dials Temporal.
func (s *Settings) connect(ctx context.Context) (client.Client, error) {
	if err := s.Resolve(); err != nil {
		return nil, err
	}
	return s.Dial(ctx)
}

// dial connects to Temporal, failing fast with a hint when nothing answers.
func (s *Settings) Dial(ctx context.Context) (client.Client, error) {
	auth, err := s.temporalAuth()
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opts := engine.ClientOptions(s.Temporal, s.Namespace, auth)
	opts.Logger = sdklog.NewStructuredLogger(s.Logger())
	c, err := client.DialContext(dctx, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (namespace %s): %v\n  start a local stack with `trawler dev --data .data/dev` and pass --data .data/dev, or point --temporal / TRAWLER_TEMPORAL at your cluster", s.Temporal, s.Namespace, err)
	}
	return c, nil
}

// redisClient resolves the settings and opens the Redis that holds dedup state, pools
// and quotas; what names what the command needs it for, in the error when none is set.
// It pings, so a server that is down or refuses the password says so here, with the
// setting to fix.
func (s *Settings) RedisClient(what string) (redis.UniversalClient, error) {
	if err := s.Resolve(); err != nil {
		return nil, err
	}
	if s.Redis == "" {
		return nil, fmt.Errorf("no Redis %s: pass --redis HOST:PORT or redis://… (or --data of a running `trawler dev`)", what)
	}
	return s.OpenRedis(0, true)
}

// openRedis opens the resolved --redis with its password file and CA; poolSize 0 keeps
// go-redis's default. With ping it checks the server answers and takes the password.
func (s *Settings) OpenRedis(poolSize int, ping bool) (redis.UniversalClient, error) {
	o, err := s.redisOptions()
	if err != nil {
		return nil, err
	}
	o.PoolSize = poolSize
	rdb, err := redisurl.Open(s.Redis, o)
	if err != nil {
		return nil, err
	}
	if !ping {
		return rdb, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := redisurl.Ping(ctx, rdb, s.Redis); err != nil {
		rdb.Close()
		return nil, err
	}
	return rdb, nil
}
