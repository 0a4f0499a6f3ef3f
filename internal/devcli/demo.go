//go:build !production

package devcli

import (
	"context"
	"fmt"
	"github.com/trawlerhq/trawler/internal/cli"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/console"
	"github.com/trawlerhq/trawler/internal/devstack"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/devstack/eslite"
	"github.com/trawlerhq/trawler/internal/devstack/hbaselite"
	"github.com/trawlerhq/trawler/internal/engine"
)

// stack is the embedded world of `trawler demo` and `trawler dev`: Temporal on a SQLite
// file, the demo site, Redis, Kafka, a MongoDB-compatible server, and (optionally) a
// worker.
type stack struct {
	temporal  *devstack.Stack
	redis     *miniredis.Miniredis
	redisStop func() error // saves a kept Redis (keepRedis) and stops it
	siteStop  func() error
	kafkaStop func() error
	mongoStop func() error
	esStop    func() error
	hbaseStop func() error
	worker    *engine.Worker
	ep        devstack.Endpoints
}

type stackOptions struct {
	data string
	ui   bool
	// Preferred ports (any free port when 0 or taken): `trawler dev` keeps Temporal on
	// 7233 and the UI on 8233 so workers find it with default settings, across restarts.
	temporalPort int
	uiPort       int
	sitePort     int // 0 = any free port
	sitePages    int
	worker       bool
	// keepRedis keeps the embedded Redis in data across stacks (`trawler dev`): dedup
	// entries, recrawl plans, budgets and pools outlive a restart.
	keepRedis bool
}

func startStack(ctx context.Context, s *cli.Settings, o stackOptions) (*stack, error) {
	uiPort := -1
	if o.ui {
		uiPort = portIfFree(o.uiPort)
	}
	// Kafka and MongoDB come back on their previous ports when free, so workers started
	// with --data before a restart still find them.
	prev, _ := devstack.ReadEndpoints(o.data)
	ts, err := devstack.StartTemporal(ctx, devstack.Options{DataDir: o.data, TemporalPort: portIfFree(o.temporalPort), UIPort: uiPort, Log: s.Logger()})
	if err != nil {
		return nil, err
	}
	st := &stack{temporal: ts, ep: ts.Endpoints}
	siteURL, siteStop, err := demosite.Start(fmt.Sprintf("127.0.0.1:%d", o.sitePort), demosite.Options{Pages: o.sitePages})
	if err != nil && o.sitePort != 0 { // the usual port is taken: any port will do
		siteURL, siteStop, err = demosite.Start("127.0.0.1:0", demosite.Options{Pages: o.sitePages})
	}
	if err != nil {
		st.stop()
		return nil, fmt.Errorf("start the demo site: %w", err)
	}
	st.siteStop = siteStop
	st.ep.DemoSite = siteURL
	// Dedup state, recrawl plans, budgets and pools live in an in-process Redis, for the
	// life of the stack or, kept in data, across stacks.
	if o.keepRedis {
		st.redis, st.redisStop, err = devstack.StartRedis(o.data, 10*time.Second)
	} else {
		st.redis, err = miniredis.Run()
	}
	if err != nil {
		st.stop()
		return nil, fmt.Errorf("start the embedded Redis: %w", err)
	}
	st.ep.Redis = st.redis.Addr()
	// Hot storage: Kafka (kfake) and MongoDB (FerretDB on SQLite), files under data.
	var kafkaPorts []int
	if len(prev.Kafka) == devstack.KafkaBrokers {
		for _, a := range prev.Kafka {
			kafkaPorts = append(kafkaPorts, portIfFree(portOf(a)))
		}
	}
	if st.ep.Kafka, st.kafkaStop, err = devstack.StartKafkaOn(o.data, kafkaPorts); err != nil {
		st.stop()
		return nil, err
	}
	mongoAddr := "127.0.0.1:0"
	if p := portIfFree(portOf(strings.TrimSuffix(strings.TrimPrefix(prev.Mongo, "mongodb://"), "/"))); p != 0 {
		mongoAddr = fmt.Sprintf("127.0.0.1:%d", p)
	}
	if st.ep.Mongo, st.mongoStop, err = devstack.StartMongoOn(o.data, mongoAddr); err != nil {
		st.stop()
		return nil, err
	}
	// Search: eslite, an Elasticsearch-compatible server over bleve, indexes under data.
	if st.ep.ES, st.esStop, err = eslite.Start(o.data, "127.0.0.1:0"); err != nil {
		st.stop()
		return nil, fmt.Errorf("start the embedded Elasticsearch: %w", err)
	}
	// Full history: hbaselite, a single-node HBase over bbolt, back on its ZooKeeper
	// port when free so workers started with --data before a restart find it.
	hbaseAddr := "127.0.0.1:0"
	if p := portIfFree(portOf(prev.HBaseZK)); p != 0 {
		hbaseAddr = fmt.Sprintf("127.0.0.1:%d", p)
	}
	if st.ep.HBaseZK, st.hbaseStop, err = hbaselite.Start(o.data, hbaseAddr); err != nil {
		st.stop()
		return nil, fmt.Errorf("start the embedded HBase: %w", err)
	}
	if err := devstack.WriteEndpoints(o.data, st.ep); err != nil {
		st.stop()
		return nil, err
	}
	s.Temporal, s.Namespace, s.Data, s.Redis = st.ep.Temporal, st.ep.Namespace, o.data, st.ep.Redis
	s.Kafka, s.Mongo, s.ES, s.HBase = strings.Join(st.ep.Kafka, ","), st.ep.Mongo, st.ep.ES, st.ep.HBaseZK
	if err := s.Resolve(); err != nil {
		st.stop()
		return nil, err
	}
	return st, nil
}

// portOf is the port of host:port, or 0.
func portOf(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}

// portIfFree returns port if nothing listens on it, else 0 (any free port).
func portIfFree(port int) int {
	if port <= 0 {
		return 0
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return 0
	}
	ln.Close()
	return port
}

func (st *stack) startWorker(ctx context.Context, s *cli.Settings) error {
	c, err := s.Dial(ctx)
	if err != nil {
		return err
	}
	// The embedded stack's own worker crawls the demo site on loopback.
	w, err := engine.NewWorker(c, engine.WorkerOptions{TaskQueue: s.TaskQueue, OutDir: s.Out, Redis: s.Redis,
		Kafka: s.KafkaBrokers(), Mongo: s.Mongo, ES: s.ES, HBase: s.HBase, Log: s.Logger(),
		Fetch: fetch.Options{AllowPrivate: true}, Browser: cli.StackBrowser()})
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	st.worker = w
	return nil
}

// watchEvents runs the watcher, which emits the runs' and chains' events, and the
// event deliverer (Kafka topic trawler.events, webhooks) of a dev stack until ctx
// ends; stop waits for them.
func watchEvents(ctx context.Context, s *cli.Settings) (stop func(), err error) {
	c, err := s.Dial(ctx)
	if err != nil {
		return nil, err
	}
	rdb, err := s.OpenRedis(0, false)
	if err != nil {
		c.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stopDeliver, err := cli.DeliverEvents(ctx, s, rdb, nil)
	if err != nil {
		cancel()
		rdb.Close()
		c.Close()
		return nil, err
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		engine.Watch(ctx, c, rdb, engine.WatchOptions{Log: s.Logger()})
	}()
	return func() {
		cancel()
		<-watched
		stopDeliver()
		rdb.Close()
		c.Close()
	}, nil
}

func (st *stack) stop() {
	if st.worker != nil {
		st.worker.Stop() // closes its sinks before their servers go
	}
	if st.siteStop != nil {
		_ = st.siteStop()
	}
	switch {
	case st.redisStop != nil:
		_ = st.redisStop()
	case st.redis != nil:
		st.redis.Close()
	}
	if st.kafkaStop != nil {
		_ = st.kafkaStop()
	}
	if st.mongoStop != nil {
		_ = st.mongoStop()
	}
	if st.esStop != nil {
		_ = st.esStop()
	}
	if st.hbaseStop != nil {
		_ = st.hbaseStop()
	}
	_ = st.temporal.Stop()
}

func demoCmd(s *cli.Settings) *cobra.Command {
	var pages int
	var serve bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the bundled demo chain end to end on embedded servers, then exit",
		Long: `Start everything in this process — a Temporal server on a SQLite file, the bundled demo
news site, Redis, Kafka, a MongoDB-compatible server and a worker — run
examples/demo.yaml (feed pages → stories → paged comments) to completion with a progress
bar, print a summary and exit 0.

Items land in <data>/out/<site.task>.jsonl (one JSON object per line), in the Kafka
topics trawler.<site>.<task>, in the MongoDB collections trawler.<site>_<task>, and as
versions in the HBase table trawler:items (see trawler history); the summary counts what
each store holds, read back from it. Nothing needs to be installed first.

The web console serves the run while it goes (its URL is printed first, on
127.0.0.1:8090 or any free port); --serve keeps the stack and the console up after the
run, until Ctrl-C, to search and browse what was crawled.`,
		Example: `  trawler demo
  trawler demo --serve
  trawler demo --pages 10 --json | tail -1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if pages < 1 {
				return fmt.Errorf("--pages %d: use 1 or more feed pages", pages)
			}
			data := s.DataDir(filepath.Join(".data", "demo"))
			if !s.JSON {
				fmt.Fprintf(os.Stderr, "starting embedded Temporal and the demo site (data in %s)…\n", data)
			}
			st, err := startStack(cmd.Context(), s, stackOptions{data: data, sitePages: max(pages, 10), worker: true})
			if err != nil {
				return err
			}
			defer st.stop()
			if err := st.startWorker(cmd.Context(), s); err != nil {
				return err
			}
			stopEvents, err := watchEvents(cmd.Context(), s)
			if err != nil {
				return err
			}
			defer stopEvents()
			consoleURL, stopConsole, err := serveConsole(cmd.Context(), s, st)
			if err != nil {
				return err
			}
			defer stopConsole()
			if serve {
				fmt.Fprintf(os.Stderr, "console %s\n", consoleURL)
			} else {
				fmt.Fprintf(os.Stderr, "console %s (until the demo exits; --serve keeps it up after the run)\n", consoleURL)
			}
			src, err := examples.Files.ReadFile("demo.yaml")
			if err != nil {
				return err
			}
			// The chain file takes the demo site's address from the stack (${demo_site}).
			cli.StackVars = st.ep.Vars()
			plan, err := cli.LoadChain("examples/demo.yaml", src, []string{"feed.pages=" + strconv.Itoa(pages)})
			if err != nil {
				return err
			}

			c, err := s.Dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := cli.RunAndWait(cmd.Context(), s, c, plan, st.worker.Sinks)
			if err != nil {
				return err
			}
			if err := res.Print(s.JSON); err != nil {
				return err
			}
			if !s.JSON {
				fmt.Printf("  items are in %s, Kafka %s (trawler.<site>.<task>) and MongoDB %s (trawler.<site>_<task>)\n", s.Out, s.Kafka, s.Mongo)
				if serve {
					fmt.Printf("  console %s/runs/%s\n", consoleURL, res.RunID)
				} else {
					// The console lives in this process: say so before the link goes dead.
					fmt.Printf("  the console (%s) closed with the demo; trawler demo --serve keeps it up after the run\n", consoleURL)
				}
			}
			if serve {
				fmt.Fprintf(os.Stderr, "the stack and the console %s stay up; Ctrl-C to stop\n", consoleURL)
				<-cmd.Context().Done()
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&pages, "pages", 3, "feed pages to crawl (30 stories each, with their comments)")
	cmd.Flags().BoolVar(&serve, "serve", false, "keep the stack and the web console up after the run, until Ctrl-C")
	return cmd
}

func devCmd(s *cli.Settings) *cobra.Command {
	var noWorker bool
	var sitePort, temporalPort, uiPort int
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the embedded stack (Temporal + web UI + demo site + Redis, Kafka, MongoDB) and a worker until interrupted",
		Long: `Start the embedded stack and keep it running: a Temporal server on <data>/temporal.db
with its web UI, the bundled demo site, Redis (dedup, recrawl plans, budgets, pools; kept
in <data>/redis.aof, each write on disk before it is answered), Kafka (<data>/kafka) and a
MongoDB-compatible server (FerretDB on <data>/ferretdb), and a worker. The addresses are
written to <data>/endpoints.json, so other commands find them with --data:

  trawler dev --data .data/dev &
  trawler run examples/demo.yaml --data .data/dev --wait
  trawler items claim --biz demo.story --n 10 --data .data/dev

Stopping and restarting ` + "`trawler dev`" + ` on the same --data resumes unfinished runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			data := s.DataDir(filepath.Join(".data", "dev"))
			st, err := startStack(cmd.Context(), s, stackOptions{data: data, ui: true, temporalPort: temporalPort, uiPort: uiPort, sitePort: sitePort, sitePages: 50, keepRedis: true})
			if err != nil {
				return err
			}
			defer st.stop()
			if !noWorker {
				if err := st.startWorker(cmd.Context(), s); err != nil {
					return err
				}
			}
			consoleURL, stopConsole, err := serveConsole(cmd.Context(), s, st)
			if err != nil {
				return err
			}
			defer stopConsole()
			if s.JSON {
				_ = cli.PrintJSON(st.ep)
			} else {
				fmt.Printf("trawler dev is up (data in %s)\n  temporal    %s (namespace %s)\n  web ui      %s\n  demo site   %s\n  redis       %s (dedup, recrawl plans, budgets, pools; each write kept in redis.aof)\n  kafka       %s (topics trawler.<site>.<task>)\n  mongodb     %s (database trawler; FerretDB on SQLite)\n  es          %s (indexes trawler-<site>-<task>, alias trawler-items)\n  hbase       %s (ZooKeeper quorum; table trawler:items, every version)\n  items       %s\n  console     %s (runs, chain editor, schedules, search, items)\n",
					data, st.ep.Temporal, st.ep.Namespace, st.ep.TemporalUI, st.ep.DemoSite, st.ep.Redis, strings.Join(st.ep.Kafka, ","), st.ep.Mongo, st.ep.ES, st.ep.HBaseZK, s.Out, consoleURL)
				if noWorker {
					fmt.Println("  no worker: start some with `trawler worker --data " + data + "`")
				}
				fmt.Println("Ctrl-C to stop; running chains resume when you start it again.")
			}
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().BoolVar(&noWorker, "no-worker", false, "run the stack only; start workers with: trawler worker --data DIR")
	cmd.Flags().IntVar(&sitePort, "site-port", 8089, "port of the demo site (any free port if taken)")
	cmd.Flags().IntVar(&temporalPort, "temporal-port", 7233, "port of the Temporal frontend (any free port if taken)")
	cmd.Flags().IntVar(&uiPort, "ui-port", 8233, "port of the Temporal web UI (any free port if taken)")
	return cmd
}

// serveConsole serves the console of an embedded stack in the background, on
// defaultConsoleAddr or any free loopback port, until ctx ends. It returns the URL and
// a stop function.
func serveConsole(ctx context.Context, s *cli.Settings, st *stack) (string, func(), error) {
	c, err := s.Dial(ctx)
	if err != nil {
		return "", nil, err
	}
	cfg := s.ConsoleConfig(c, st.ep.TemporalUI)
	cfg.Sets = []string{"base_url=" + st.ep.DemoSite}
	srv, err := console.New(cfg)
	if err != nil {
		c.Close()
		return "", nil, err
	}
	addr := cli.DefaultConsoleAddr
	if portIfFree(portOf(addr)) == 0 {
		addr = "127.0.0.1:0"
	}
	ctx, cancel := context.WithCancel(ctx)
	urls, errs := make(chan string, 1), make(chan error, 1)
	go func() { errs <- srv.Listen(ctx, addr, func(url string) { urls <- url }) }()
	stop := func() {
		cancel()
		<-errs
		_ = srv.Close()
		c.Close()
	}
	select {
	case url := <-urls:
		return url, stop, nil
	case err := <-errs:
		cancel()
		_ = srv.Close()
		c.Close()
		return "", nil, err
	}
}
