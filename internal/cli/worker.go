package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/storage"
)

// openSinks opens every sink the settings configure (jsonl with --out, kafka with
// --kafka, mongo with --mongo), e.g. to read a run's records back.
func openSinks(s *Settings) (storage.Set, error) {
	auth, err := s.storeAuth()
	if err != nil {
		return nil, err
	}
	// The file sink's finished files are read back when TRAWLER_FILE_DIR names them.
	files := engine.FileOptions{Dir: strings.TrimSpace(os.Getenv("TRAWLER_FILE_DIR"))}
	return engine.OpenSinks(engine.SinkOptions{OutDir: s.Out, Kafka: s.KafkaBrokers(), Mongo: s.Mongo, ES: s.ES, HBase: s.HBase, File: files, Auth: auth, Log: s.Logger()})
}

// kafkaBrokers splits --kafka.
func (s *Settings) KafkaBrokers() []string {
	var out []string
	for _, b := range strings.Split(s.Kafka, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// sinksLine says where a worker stores items, for its start-up message.
func (s *Settings) sinksLine() string {
	parts := []string{"jsonl " + s.Out}
	if s.Kafka != "" {
		parts = append(parts, "kafka "+s.Kafka)
	}
	if s.Mongo != "" {
		parts = append(parts, "mongo "+s.Mongo)
	}
	if s.ES != "" {
		parts = append(parts, "es "+s.ES)
	}
	if s.HBase != "" {
		parts = append(parts, "hbase "+s.HBase)
	}
	return crawl.RedactText(strings.Join(parts, ", ")) // URIs may carry passwords
}

func workerCmd(s *Settings) *cobra.Command {
	var maxBatches int
	var hostConcurrency int
	var frontier bool
	var dedupExpected int64
	var tuned bool
	var targetCPU, targetMem float64
	var capa capacityFlags
	var watch watchFlags
	var hot engine.HotOptions
	var private privateFlag
	var files fileSinkFlags
	var browser BrowserFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker: executes chain workflows and batch activities until interrupted",
		Long: `Run a worker against a Temporal cluster (or a running ` + "`trawler dev`" + ` stack with --data).
Workers are stateless: start as many as you like on as many machines as you like; each
polls the task queue, runs batches, and stores items in the configured sinks. Killing a
worker costs only its in-flight batches, which Temporal retries elsewhere after their
heartbeat timeout and which resume from their last stored input.

Steps with render: (pages built by JavaScript) run only on workers with a browser: a
worker with one polls the render queue (<task-queue>@render) too, and renders with at
most --browsers Chromium processes of --tabs pages each, each replaced after
--browser-pages pages or above --browser-mb MiB, so its memory stays within
browsers × (browser-mb + tabs × 64) MiB. Debian's chromium is used when installed;
--browser none leaves rendering to other workers.`,
		Example: `  trawler worker --data .data/dev
  TRAWLER_TEMPORAL=temporal.internal:7233 TRAWLER_NAMESPACE=crawl trawler worker --out /var/lib/trawler/out
  trawler worker --temporal temporal.internal:7233 --out /var/lib/trawler/out \
    --kafka kafka-1:9092,kafka-2:9092,kafka-3:9092 --kafka-replication 3 \
    --mongo "mongodb://mongo-1,mongo-2,mongo-3/?replicaSet=rs0" --hot-retention 720h
  trawler worker --data .data/dev --metrics 127.0.0.1:9464 \
    --alert-webhook https://hooks.example.com/trawler --alert-backlog 100000 --alert-failure-rate 0.2
  trawler worker --data .data/dev --allow-private --browsers 4 --tabs 2 --browser-mb 768   # a rendering worker
  trawler worker --data .data/dev --allow-private --browser none                          # plain pages only`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := s.Resolve(); err != nil {
				return err
			}
			allowPrivate, err := private.resolve(cmd)
			if err != nil {
				return err
			}
			if s.Out == "" {
				return fmt.Errorf("the worker needs --out DIR (or TRAWLER_OUT, or --data of a dev stack) for the jsonl sink")
			}
			if hostConcurrency < 0 {
				return fmt.Errorf("--host-concurrency %d: use 1 or more requests in flight per host, or 0 for the default (%d)", hostConcurrency, crawl.DefaultHostConcurrency)
			}
			// Credentials first: a missing secret file is a setting to fix, not a
			// server to wait for.
			redisAuth, err := s.redisOptions()
			if err != nil {
				return err
			}
			storeAuth, err := s.storeAuth()
			if err != nil {
				return err
			}
			fileOpts, err := files.options()
			if err != nil {
				return err
			}
			browserOpts, err := browser.Options(cmd)
			if err != nil {
				return err
			}
			declared, err := capa.resources()
			if err != nil {
				return err
			}
			c, err := s.Dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			w, err := engine.NewWorker(c, engine.WorkerOptions{TaskQueue: s.TaskQueue, OutDir: s.Out, MaxBatches: maxBatches,
				Redis: s.Redis, RedisAuth: redisAuth, NoFrontier: !frontier, DedupExpected: dedupExpected,
				ResourceTuned: tuned, TargetCPU: targetCPU, TargetMem: targetMem, Capacity: declared,
				Kafka: s.KafkaBrokers(), Mongo: s.Mongo, ES: s.ES, HBase: s.HBase, File: fileOpts, Auth: storeAuth, Hot: hot, Log: s.Logger(),
				Fetch: fetch.Options{AllowPrivate: allowPrivate, HostConcurrency: hostConcurrency}, Browser: browserOpts})
			if err != nil {
				return err
			}
			if err := w.Start(); err != nil {
				return err
			}
			if err := watch.start(cmd.Context(), s, c); err != nil {
				w.Stop()
				return err
			}
			fmt.Fprintf(os.Stderr, "worker polling task queue %q on %s (namespace %s); items → %s\n", s.TaskQueue, s.Temporal, s.Namespace, s.sinksLine()+fileLine(fileOpts)+browserLine(browserOpts))
			<-cmd.Context().Done()
			w.Stop()
			return nil
		},
	}
	browser.Add(cmd)
	cmd.Flags().Int64Var(&dedupExpected, "dedup-expected", 0, "with --redis: the items a dedup namespace this worker is the first to use is sized for (default 10,000,000); a namespace's buckets are fixed when it is made (docs/dedup.md)")
	cmd.Flags().BoolVar(&frontier, "frontier", true, "with --redis: each step fetches a URL at most once per run (the run's seen-set, docs/frontier.md); --frontier=false hands every step every input, as revisit: true does")
	cmd.Flags().IntVar(&maxBatches, "max-batches", 16, "batch activities this worker runs at once (with --tune-resources: at most)")
	cmd.Flags().IntVar(&hostConcurrency, "host-concurrency", 0, fmt.Sprintf("requests in flight at one host when neither the chain's politeness: nor the task sets a concurrency; with --redis it is the fleet's limit, every worker on that Redis taking slots from one budget per host (0: the default, %d)", crawl.DefaultHostConcurrency))
	cmd.Flags().BoolVar(&tuned, "tune-resources", false, "let the machine's CPU and memory use decide how many batches run at once, 1 to --max-batches (Temporal's resource-based tuner)")
	cmd.Flags().Float64Var(&targetCPU, "target-cpu", 0.8, "with --tune-resources: the machine CPU use (0–1) the worker aims at")
	cmd.Flags().Float64Var(&targetMem, "target-mem", 0.8, "with --tune-resources: the machine memory use (0–1) the worker aims at")
	capa.add(cmd)
	watch.add(cmd, "")
	private.add(cmd, "chains on this worker may fetch loopback and private addresses (10/8, 172.16/12, 192.168/16, fc00::/7 …); link-local and cloud metadata stay refused")
	cmd.Flags().IntVar(&hot.KafkaPartitions, "kafka-partitions", 3, "partitions of a topic the kafka sink creates")
	cmd.Flags().IntVar(&hot.KafkaReplication, "kafka-replication", 1, "replication factor of a topic the kafka sink creates")
	files.add(cmd)
	cmd.Flags().DurationVar(&hot.Retention, "hot-retention", 30*24*time.Hour, "how long MongoDB keeps a record after its last fetch (TTL index on ts)")
	return cmd
}

// privateFlag is --allow-private, which TRAWLER_ALLOW_PRIVATE sets when the flag is not
// given. Only the operator of a process decides it: nothing in a chain can.
type privateFlag struct{ allow bool }

func (p *privateFlag) add(cmd *cobra.Command, usage string) {
	cmd.Flags().BoolVar(&p.allow, "allow-private", false, usage+" [TRAWLER_ALLOW_PRIVATE]")
}

func (p *privateFlag) resolve(cmd *cobra.Command) (bool, error) {
	if cmd.Flags().Changed("allow-private") {
		return p.allow, nil
	}
	v := strings.TrimSpace(os.Getenv("TRAWLER_ALLOW_PRIVATE"))
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("TRAWLER_ALLOW_PRIVATE=%q: want 1 or 0 (true or false)", v)
	}
	return b, nil
}
