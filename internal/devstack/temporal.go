package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/primitives/timestamp"
	"go.temporal.io/server/common/resolver"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

const (
	clusterName = "active"

	// numHistoryShards is persisted in the database on first start and can
	// never change afterwards for that database.
	numHistoryShards = 4

	namespaceRetention = 7 * 24 * time.Hour

	// highRPS is used for every request and persistence rate limit: a single
	// developer machine must be able to push ~1000 activities/s through the
	// server, and SQLite, not the limiter, should be the bottleneck.
	highRPS = 100_000

	// taskPollRPS is how often a history shard may read its task queues per second.
	taskPollRPS = 1000
)

// dynamicConfig returns the in-memory dynamic config of the embedded server.
// Everything not listed keeps the server default.
func dynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		// Fair dispatch between keys sharing a task queue.
		dynamicconfig.MatchingEnableFairness.Key(): true,
		// One partition per task queue: on a single server, partitions only split a
		// queue's backlog into parts that each hand out their own tasks, so a poller on a
		// part holding only low-priority work takes it while urgent work waits elsewhere.
		// With one, priority and fairness order the whole queue.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,

		// A worker that completes a workflow task gets the activities it scheduled in the
		// same reply instead of polling for them: one round trip less per batch, which
		// is most of the latency of a chain of one-page batches (paging).
		dynamicconfig.EnableActivityEagerExecution.Key(): true,

		// The history service reads each shard's task queues at most MaxPollRPS times a
		// second (default 20). A workflow task that follows an activity's completion is
		// such a task, so the default costs a hop through the server up to 50 ms (38 ms
		// on average, measured with `trawler bench hops`) of pure waiting. One machine's
		// SQLite easily takes the reads.
		dynamicconfig.TransferProcessorMaxPollRPS.Key():   taskPollRPS,
		dynamicconfig.TimerProcessorMaxPollRPS.Key():      taskPollRPS,
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key(): taskPollRPS,
		dynamicconfig.OutboundProcessorMaxPollRPS.Key():   taskPollRPS,

		// Request rate limits.
		dynamicconfig.FrontendRPS.Key():                                  highRPS,
		dynamicconfig.FrontendMaxNamespaceRPSPerInstance.Key():           highRPS,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 1000,
		dynamicconfig.HistoryRPS.Key():                                   highRPS,
		dynamicconfig.MatchingRPS.Key():                                  highRPS,

		// Persistence rate limits.
		dynamicconfig.FrontendPersistenceMaxQPS.Key(): highRPS,
		dynamicconfig.HistoryPersistenceMaxQPS.Key():  highRPS,
		dynamicconfig.MatchingPersistenceMaxQPS.Key(): highRPS,
		dynamicconfig.WorkerPersistenceMaxQPS.Key():   highRPS,

		// Keep enough workflows in memory for a busy local run.
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key(): 8192,

		// Nobody else talks to this server: no need to drain on shutdown,
		// and no periodic calls home.
		dynamicconfig.FrontendShutdownDrainDuration.Key():           time.Duration(0),
		dynamicconfig.FrontendShutdownFailHealthCheckDuration.Key(): time.Duration(0),
		dynamicconfig.MatchingShutdownDrainDuration.Key():           time.Duration(0),
		dynamicconfig.HistoryShutdownDrainDuration.Key():            time.Duration(0),
		dynamicconfig.EnableServerVersionCheck.Key():                false,
	}
}

// sqliteConfig is the persistence configuration shared by the main store and
// the visibility store. Both point at the same file, and the server's SQLite
// plugin keeps one pooled connection per distinct configuration for the life
// of the process, so every service (and every restart in this process) shares
// it. generation tells apart database files that successively lived at the
// same path (see dbGeneration).
func sqliteConfig(dbPath string, generation int) *config.SQL {
	return &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: dbPath,
		ConnectAttributes: map[string]string{
			"mode": "rwc",
			// WAL keeps commits cheap and durable across a crash of
			// this process, which is what lets a restart resume runs.
			"journal_mode": "wal",
			"synchronous":  "normal",
			// Another process holding the file makes us fail after a
			// few seconds instead of hanging. The generation is folded
			// in here because it changes the pool key and nothing else.
			"busy_timeout": strconv.Itoa(5000 + generation),
		},
	}
}

// dbFiles remembers, per database path, which file the server's pooled
// connection for that path was opened on. The pool never closes connections,
// so if the file is deleted (or replaced) between two stacks in the same
// process, reusing the old pool entry would silently keep writing to the
// deleted file; a new generation gets a fresh connection instead. Comparing
// files by identity is reliable here because the pooled connection keeps the
// old file open, so its inode cannot be reused by the new file.
var dbFiles = struct {
	sync.Mutex
	m map[string]dbFile
}{m: map[string]dbFile{}}

type dbFile struct {
	generation int
	info       os.FileInfo // nil until the file has been opened
}

// dbGeneration returns the connection generation to use for dbPath now.
func dbGeneration(dbPath string) int {
	dbFiles.Lock()
	defer dbFiles.Unlock()
	prev, seen := dbFiles.m[dbPath]
	if !seen {
		return 0
	}
	cur, err := os.Stat(dbPath)
	if prev.info != nil && (err != nil || !os.SameFile(prev.info, cur)) {
		prev.generation++
		prev.info = nil
		dbFiles.m[dbPath] = prev
	}
	return prev.generation
}

// rememberDBFile records the file the generation's connection is open on.
func rememberDBFile(dbPath string, generation int) {
	info, err := os.Stat(dbPath)
	if err != nil {
		return
	}
	dbFiles.Lock()
	defer dbFiles.Unlock()
	dbFiles.m[dbPath] = dbFile{generation: generation, info: info}
}

// prepareDatabase creates the schema on first use and registers the
// namespace if it does not exist yet. It runs before the server starts so the
// namespace is there as soon as the frontend answers.
func prepareDatabase(dbPath string, generation int, namespace string) error {
	cfg := sqliteConfig(dbPath, generation)
	defer rememberDBFile(dbPath, generation)
	db, err := sql.NewSQLAdminDB(sqlplugin.DbKindUnknown, cfg, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return databaseError(dbPath, "opening", err)
	}
	defer func() { _ = db.Close() }()

	tables, err := db.ListTables(dbPath)
	if err != nil {
		return databaseError(dbPath, "reading", err)
	}
	switch {
	case len(tables) == 0:
		if err := sqliteschema.SetupSchemaOnDB(db); err != nil {
			return databaseError(dbPath, "creating the schema in", err)
		}
	case !slices.Contains(tables, "executions") || !slices.Contains(tables, "executions_visibility"):
		return fmt.Errorf("devstack: %s exists but does not hold a Temporal database (tables: %s); move it away or use another --data directory", dbPath, strings.Join(tables, ", "))
	}

	nsConfig, err := sqliteschema.NewNamespaceConfig(clusterName, namespace, false, nil)
	if err != nil {
		return fmt.Errorf("devstack: namespace %q: %w", namespace, err)
	}
	nsConfig.Detail.Config.Retention = timestamp.DurationPtr(namespaceRetention)
	if err := sqliteschema.CreateNamespaces(cfg, nsConfig); err != nil {
		return databaseError(dbPath, "registering namespace "+strconv.Quote(namespace)+" in", err)
	}
	return nil
}

// databaseError turns low level SQLite failures into messages that name the
// file and say what to do.
func databaseError(dbPath, doing string, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY"):
		return fmt.Errorf("devstack: %s is locked by another process: stop the other Temporal server or `trawler dev` using it, or use another --data directory: %w", dbPath, err)
	case strings.Contains(msg, "file is not a database") || strings.Contains(msg, "malformed"):
		return fmt.Errorf("devstack: %s is not a usable SQLite database: move it away (the stack will create a new one) or use another --data directory: %w", dbPath, err)
	case strings.Contains(msg, "readonly") || strings.Contains(msg, "read-only") || strings.Contains(msg, "unable to open"):
		return fmt.Errorf("devstack: cannot write %s: check its permissions or use another --data directory: %w", dbPath, err)
	}
	return fmt.Errorf("devstack: %s %s: %w", doing, dbPath, err)
}

// serverPorts are the TCP ports of one server incarnation.
type serverPorts struct {
	frontend, history, matching, worker int
}

// buildServer assembles an in-process Temporal server: frontend, history,
// matching and worker services on loopback, static membership, SQLite
// persistence and visibility on the same file.
func buildServer(host, dialHost, dbPath string, dbGen int, ports serverPorts, logger log.Logger) (temporal.Server, error) {
	frontendAddr := net.JoinHostPort(dialHost, strconv.Itoa(ports.frontend))
	internal := func(port int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: loopback}}
	}

	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 10 * time.Second
	conf.Global.Membership.BroadcastAddress = loopback
	conf.Persistence.DefaultStore = "sqlite"
	conf.Persistence.VisibilityStore = "sqlite"
	conf.Persistence.NumHistoryShards = numHistoryShards
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite": {SQL: sqliteConfig(dbPath, dbGen)}}
	conf.ClusterMetadata = &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontendAddr,
				// Only used on the very first start; afterwards the
				// ID stored in the database wins.
				ClusterID: primitives.NewUUID().String(),
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{
		string(primitives.FrontendService): {RPC: config.RPC{GRPCPort: ports.frontend, BindOnIP: host}},
		string(primitives.HistoryService):  internal(ports.history),
		string(primitives.MatchingService): internal(ports.matching),
		string(primitives.WorkerService):   internal(ports.worker),
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontendAddr

	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("devstack: authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("devstack: claim mapper: %w", err)
	}

	hostPort := func(port int) static.Hosts {
		return static.SingleLocalHost(net.JoinHostPort(loopback, strconv.Itoa(port)))
	}
	return temporal.NewServer(
		temporal.WithConfig(&conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: static.SingleLocalHost(frontendAddr),
			primitives.HistoryService:  hostPort(ports.history),
			primitives.MatchingService: hostPort(ports.matching),
			primitives.WorkerService:   hostPort(ports.worker),
		}),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dynamicConfig()),
	)
}

// isAddrInUse reports whether err is a failure to bind a port that someone
// else grabbed between our probe and the server's listen.
func isAddrInUse(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "address already in use")
}

// buildUI returns the Temporal web UI pointed at the frontend.
func buildUI(host string, port int, frontendAddr, namespace string) *uiserver.Server {
	return uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: frontendAddr,
		EnableUI:            true,
		DefaultNamespace:    namespace,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true,
	}))
}

// slogServerLogger adapts log/slog to the server's logger interface. It is
// used with a handler writing to <DataDir>/temporal.log.
type slogServerLogger struct {
	l *slog.Logger
}

var (
	_ log.Logger     = slogServerLogger{}
	_ log.WithLogger = slogServerLogger{}
)

func (s slogServerLogger) Debug(msg string, tags ...tag.Tag) { s.log(slog.LevelDebug, msg, tags) }
func (s slogServerLogger) Info(msg string, tags ...tag.Tag)  { s.log(slog.LevelInfo, msg, tags) }
func (s slogServerLogger) Warn(msg string, tags ...tag.Tag)  { s.log(slog.LevelWarn, msg, tags) }
func (s slogServerLogger) Error(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

// DPanic, Panic and Fatal are logged as errors: an embedded server must never
// take the host process down.
func (s slogServerLogger) DPanic(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }
func (s slogServerLogger) Panic(msg string, tags ...tag.Tag)  { s.log(slog.LevelError, msg, tags) }
func (s slogServerLogger) Fatal(msg string, tags ...tag.Tag)  { s.log(slog.LevelError, msg, tags) }

func (s slogServerLogger) With(tags ...tag.Tag) log.Logger {
	args := make([]any, len(tags))
	for i, t := range tags {
		args[i] = slog.Any(t.Key(), t.Value())
	}
	return slogServerLogger{l: s.l.With(args...)}
}

// SLog lets server components that want an *slog.Logger use ours directly.
func (s slogServerLogger) SLog() *slog.Logger { return s.l }

func (s slogServerLogger) log(level slog.Level, msg string, tags []tag.Tag) {
	ctx := context.Background()
	if !s.l.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, len(tags))
	for i, t := range tags {
		v := t.Value()
		if err, ok := v.(error); ok && err != nil {
			v = err.Error()
		}
		attrs[i] = slog.Any(t.Key(), v)
	}
	s.l.LogAttrs(ctx, level, msg, attrs...)
}
