// Package console serves Trawler's HTTP API and web console from one handler: runs
// (list, start, cancel, live detail), chain validation, schedules, the hot store's
// records, search, dedup stats, the fleet's host budgets, health and metrics, and the
// browser pages that use them. The pages are Go templates and plain JavaScript embedded in the binary; they
// hold no data themselves and read everything through the API, with the same token.
//
// Access: the API needs a bearer token when one is configured, and Listen refuses to
// bind anything but loopback without one. A read-only token (for analysts) may read
// everything and search, but not start, cancel or schedule runs.
package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/internal/redisurl"
	"github.com/trawlerhq/trawler/internal/storage/es"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
	kafkasink "github.com/trawlerhq/trawler/internal/storage/kafka"
	"github.com/trawlerhq/trawler/internal/storage/mongo"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// Config says where the console finds the cluster. Empty store fields turn the matching
// endpoints off: they answer 503 naming the setting to give.
type Config struct {
	Temporal   client.Client // required
	Namespace  string        // for Temporal Web UI links (default "default")
	TaskQueue  string        // where started runs go (default workflows.DefaultTaskQueue)
	TemporalUI string        // base URL of the Temporal Web UI; empty: no links
	Redis      string        // host:port of the dedup Redis
	Kafka      []string      // brokers, for /healthz
	Mongo      string        // URI of the hot store
	ES         string        // URL of Elasticsearch
	HBase      string        // ZooKeeper quorum of HBase, for record history
	// RedisAuth, KafkaAuth and ESAuth are the stores' credentials and TLS settings
	// (the same the worker uses; see internal/redisurl for the Redis address forms).
	RedisAuth redisurl.Options
	KafkaAuth kafkasink.Auth
	ESAuth    es.Auth
	// Token is the full-access bearer token, ReadToken the read-only one; with neither,
	// the API is open (Listen then binds loopback only).
	Token, ReadToken string
	// Sets are the overrides the chain editor and the schedule form suggest, e.g.
	// base_url of the dev stack's demo site: shown as a placeholder, never sent unless
	// the user types them.
	Sets []string
	// Tuning is given to every run the console starts (tests shorten backoffs).
	Tuning workflows.Tuning
	// MaxBody is the largest request body the API reads, in bytes (default
	// DefaultMaxBody); a larger one is answered 413.
	MaxBody int64
	// AuthFailLimit is how many bad tokens one address may send in ten minutes before
	// it is answered 429 with a doubling wait (default DefaultAuthFailLimit).
	AuthFailLimit int
	Log           *slog.Logger
}

// Server is the console: an http.Handler plus the store clients it opened.
type Server struct {
	cfg Config
	mux *http.ServeMux
	// routes lists every pattern registered on mux, in order: tests walk it, so a
	// route cannot escape the access checks by being left off a list.
	routes []Route
	mongo  *mongo.Reader
	es     *es.Client
	redis  redis.UniversalClient
	hbase  *hbase.Sink
	beats  beats // worker heartbeats seen, for the fleet picture
	// principals are the tokens made by `trawler token create`, kept in Redis; nil
	// without Redis, when only the console's own tokens are accepted.
	principals *Principals
	audit      *Audit // nil without Redis
	throttle   *throttle
}

// New opens clients for the configured stores (none is contacted yet) and builds the
// routes.
func New(cfg Config) (*Server, error) {
	if cfg.Temporal == nil {
		return nil, errors.New("console: no Temporal client")
	}
	if cfg.ReadToken != "" && cfg.Token == "" {
		return nil, errors.New("a read-only token needs a full-access token too (--token / TRAWLER_TOKEN): someone must be able to start runs")
	}
	if cfg.ReadToken != "" && cfg.ReadToken == cfg.Token {
		return nil, errors.New("the read-only token equals the full-access token: give them different values")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = workflows.DefaultTaskQueue
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxBody < 0 {
		return nil, fmt.Errorf("max body %d bytes: give a positive size, or 0 for the default %s", cfg.MaxBody, byteSize(DefaultMaxBody))
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	cfg.TemporalUI = strings.TrimSuffix(cfg.TemporalUI, "/")
	if cfg.AuthFailLimit <= 0 {
		cfg.AuthFailLimit = DefaultAuthFailLimit
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), throttle: newThrottle(cfg.AuthFailLimit, cfg.Log)}
	var err error
	if cfg.Mongo != "" {
		if s.mongo, err = mongo.OpenReader(cfg.Mongo, ""); err != nil {
			return nil, err
		}
	}
	if cfg.ES != "" {
		addr := cfg.ES
		if !strings.Contains(addr, "://") {
			addr = "http://" + addr
		}
		if s.es, err = cfg.ESAuth.NewClient([]string{addr}, nil); err != nil {
			s.Close()
			return nil, fmt.Errorf("elasticsearch client for %s: %w", addr, err)
		}
	}
	if cfg.HBase != "" {
		if s.hbase, err = hbase.Open(hbase.Config{ZK: cfg.HBase, Timeout: 10 * time.Second, Log: cfg.Log}); err != nil {
			s.Close()
			return nil, err
		}
	}
	if cfg.Redis != "" {
		o := cfg.RedisAuth
		o.DialTimeout = 3 * time.Second
		if s.redis, err = redisurl.Open(cfg.Redis, o); err != nil {
			s.Close()
			return nil, err
		}
		s.principals = NewPrincipals(s.redis)
		if s.audit, err = NewAudit(s.redis, cfg.Kafka, cfg.KafkaAuth, cfg.Log); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.register()
	return s, nil
}

// Route is a pattern the console serves. Open routes need no token: the pages, their
// static files and /healthz, which hold no data; every other route is behind authorize.
type Route struct {
	Pattern string // as given to http.ServeMux: "POST /api/runs/{id}/cancel"
	Open    bool
}

// Method is the route's method, "" for a pattern that matches every method.
func (r Route) Method() string {
	m, _, ok := strings.Cut(r.Pattern, " ")
	if !ok {
		return ""
	}
	return m
}

// Routes lists every route the console serves.
func (s *Server) Routes() []Route { return slices.Clone(s.routes) }

// api registers a route behind the token check. It is the only way to register a
// route that reads data or changes anything.
func (s *Server) api(pattern string, h http.HandlerFunc) {
	s.routes = append(s.routes, Route{Pattern: pattern})
	s.mux.Handle(pattern, s.authorize(pattern, h))
}

// open registers a route that needs no token. Only GET routes outside /api/ and
// /metrics may be open: a route that changes something or serves data cannot be
// registered here by mistake.
func (s *Server) open(pattern string, h http.Handler) {
	method, path, _ := strings.Cut(pattern, " ")
	if method != http.MethodGet || strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/metrics") {
		panic("console: route " + pattern + " must be registered with api (behind the token check)")
	}
	s.routes = append(s.routes, Route{Pattern: pattern, Open: true})
	s.mux.Handle(pattern, h)
}

func (s *Server) register() {
	api := s.api
	api("GET /api/runs", s.listRuns)
	api("POST /api/runs", s.startRun)
	api("GET /api/runs/{id}", s.runDetail)
	api("POST /api/runs/{id}/cancel", s.cancelRun)
	api("POST /api/runs/{id}/pause", s.controlRun("pause"))
	api("POST /api/runs/{id}/resume", s.controlRun("resume"))
	api("GET /api/runs/{id}/chain", s.runChain)
	api("GET /api/fleet", s.fleet)
	api("GET /api/capacity", s.capacityReport)
	api("GET /api/chains", s.listChains)
	api("GET /api/chains/registered/{name}", s.registeredChain)
	api("POST /api/chains/validate", s.validateChain)
	api("GET /api/schedules", s.listSchedules)
	api("POST /api/schedules", s.createSchedule)
	api("POST /api/schedules/{id}/pause", s.pauseSchedule)
	api("POST /api/schedules/{id}/unpause", s.unpauseSchedule)
	api("POST /api/schedules/{id}/trigger", s.triggerSchedule)
	api("PUT /api/schedules/{id}/chain", s.updateScheduleChain)
	api("POST /api/schedules/{id}/backfill", s.backfillSchedule)
	api("DELETE /api/schedules/{id}", s.deleteSchedule)
	api("GET /api/items", s.listItems)
	api("GET /api/items/{biz}/{key...}", s.getItem)
	api("GET /api/history/{biz}/{key...}", s.itemHistory)
	api("GET /api/archive/{biz}/{key...}", s.archivedResponse)
	api("GET /api/search", s.search)
	api("POST /api/search", s.search)
	api("GET /api/dedup", s.dedupStats)
	api("GET /api/recrawl", s.recrawlStats)
	api("GET /api/hosts", s.hostBudgets)
	api("GET /api/pools", s.pools)
	api("GET /api/pools/{tenant}/{site}/{kind}", s.pools)
	api("GET /api/audit", s.auditLog)
	api("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no API endpoint %s %s; the endpoints are listed in docs/console.md", r.Method, r.URL.Path), "path")
	})
	api("GET /metrics", promhttp.Handler().ServeHTTP)
	s.open("GET /healthz", http.HandlerFunc(s.healthz))
	s.pages()
}

// ServeHTTP implements http.Handler. Every request's body is capped at MaxBody.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.limitBody(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Close closes the store clients (not the Temporal client, which the caller owns).
func (s *Server) Close() error {
	var errs []error
	if s.audit != nil {
		s.audit.Close()
	}
	if s.mongo != nil {
		errs = append(errs, s.mongo.Close())
	}
	if s.redis != nil {
		errs = append(errs, s.redis.Close())
	}
	if s.hbase != nil {
		errs = append(errs, s.hbase.Close())
	}
	return errors.Join(errs...)
}

// CheckAccess refuses an address other than loopback when no token guards the API.
func CheckAccess(addr, token string) error {
	if token != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT, e.g. 127.0.0.1:8090", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--listen %s is reachable from other machines: give a bearer token with --token (or TRAWLER_TOKEN), or listen on 127.0.0.1", addr)
}

// Listen binds addr (after CheckAccess) and serves until ctx ends. ready, when set, gets
// the console's base URL once the port is bound.
func (s *Server) Listen(ctx context.Context, addr string, ready func(url string)) error {
	if err := CheckAccess(addr, s.cfg.Token); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("console: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	if ready != nil {
		ready(BaseURL(ln.Addr().String()))
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// BaseURL is the http:// URL of a listening address; an unspecified host becomes
// 127.0.0.1 so the URL can be opened on this machine.
func BaseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
