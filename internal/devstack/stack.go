// Package devstack runs the servers trawler depends on inside the trawler
// process itself, so that `trawler demo`, `trawler dev` and the tests work with
// a single command on a fresh machine: no Docker, no separately installed
// Temporal CLI, no external database.
//
// StartTemporal embeds a complete Temporal server (frontend, history,
// matching and worker services) backed by one SQLite file under a data
// directory, plus the Temporal web UI. Because state lives in that file, a
// stack stopped (or killed) and started again on the same directory picks up
// every unfinished workflow run where it left off.
//
// The addresses a running stack serves are published in
// <DataDir>/endpoints.json (see Endpoints) so that other trawler commands can
// find them. Production deployments do not use this package: they point the
// very same Temporal clients and workers at a real cluster.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/temporal"
)

// Files kept in the data directory.
const (
	DatabaseFile = "temporal.db"   // SQLite database: persistence and visibility
	LogFile      = "temporal.log"  // the server's own log (warnings and errors)
	LockFile     = "temporal.lock" // held while a stack uses the directory
)

const (
	loopback         = "127.0.0.1"
	defaultNamespace = "default"

	// readyTimeout bounds the wait for the frontend (and UI) to answer once
	// the server reports it has started.
	readyTimeout = 30 * time.Second
	// startAttempts is how many times a start is retried when a port picked
	// as free was taken by someone else before the server bound it.
	startAttempts = 3
)

// Options configures StartTemporal.
type Options struct {
	// DataDir holds the SQLite database (<DataDir>/temporal.db), the server
	// log (<DataDir>/temporal.log) and <DataDir>/endpoints.json. Required;
	// created if missing.
	DataDir string
	// Host is the IP address the frontend and the UI listen on. Default
	// "127.0.0.1". Internal services always stay on loopback.
	Host string
	// TemporalPort is the frontend gRPC port; 0 picks a free port.
	TemporalPort int
	// UIPort is the web UI port; 0 picks a free port, -1 disables the UI.
	UIPort int
	// Namespace is registered (7 days retention) if missing. Default
	// "default".
	Namespace string
	// Log receives a few short messages about the stack itself; nil discards
	// them. The server's own logs go to <DataDir>/temporal.log at warn level.
	Log *slog.Logger
}

// Stack is a running embedded Temporal server (and web UI).
type Stack struct {
	// Endpoints lists the addresses the stack serves; it is also written
	// to <DataDir>/endpoints.json.
	Endpoints Endpoints

	dataDir string
	log     *slog.Logger
	server  temporal.Server
	ui      *uiserver.Server
	uiDone  chan struct{}
	logFile *os.File
	lock    *dirLock

	stopOnce sync.Once
	stopErr  error
}

// StartTemporal starts the embedded Temporal server (and the web UI unless
// opts.UIPort is -1), waits until the frontend answers and the namespace is
// usable, writes <DataDir>/endpoints.json and returns. It fails fast, with a
// message naming the file and the fix, when the data directory is not
// writable or another running stack uses it.
func StartTemporal(ctx context.Context, opts Options) (*Stack, error) {
	begin := time.Now()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dataDir := opts.DataDir
	if err := checkDataDir(dataDir); err != nil {
		return nil, err
	}

	dbPath := filepath.Join(dataDir, DatabaseFile)
	lock, err := lockDataDir(dataDir, dbPath)
	if err != nil {
		return nil, err
	}
	s := &Stack{dataDir: dataDir, log: opts.Log, lock: lock}
	ok := false
	defer func() {
		if !ok {
			_ = s.release()
		}
	}()

	logPath := filepath.Join(dataDir, LogFile)
	s.logFile, err = os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devstack: opening server log %s: %w; check permissions or use another --data directory", logPath, err)
	}
	serverLog := slogServerLogger{l: slog.New(slog.NewJSONHandler(s.logFile, &slog.HandlerOptions{Level: slog.LevelWarn}))}

	dbGen := dbGeneration(dbPath)
	if err := prepareDatabase(dbPath, dbGen, opts.Namespace); err != nil {
		return nil, err
	}

	// Frontend clients dial a concrete address even when listening on all
	// interfaces.
	dialHost := opts.Host
	if ip := net.ParseIP(dialHost); ip != nil && ip.IsUnspecified() {
		dialHost = loopback
	}

	if opts.TemporalPort > 0 {
		if err := checkPortFree(opts.Host, opts.TemporalPort); err != nil {
			return nil, fmt.Errorf("devstack: Temporal port %d on %s is not available (%v); pick another port or stop whatever uses it", opts.TemporalPort, opts.Host, err)
		}
	}
	uiPort := opts.UIPort
	if uiPort > 0 {
		if err := checkPortFree(opts.Host, uiPort); err != nil {
			return nil, fmt.Errorf("devstack: web UI port %d on %s is not available (%v); pick another port, or -1 to run without the UI", uiPort, opts.Host, err)
		}
	}

	var ports serverPorts
	for attempt := 1; ; attempt++ {
		if ports, err = pickServerPorts(opts.Host, opts.TemporalPort); err != nil {
			return nil, err
		}
		err = s.startServer(opts.Host, dialHost, dbPath, dbGen, ports, serverLog)
		if err == nil {
			break
		}
		if attempt < startAttempts && isAddrInUse(err) {
			s.log.Debug("port taken while starting Temporal, retrying", "error", err)
			continue
		}
		return nil, fmt.Errorf("devstack: starting Temporal server on %s: %w (server log: %s)", dbPath, err, logPath)
	}
	frontendAddr := net.JoinHostPort(dialHost, strconv.Itoa(ports.frontend))
	s.Endpoints = Endpoints{Temporal: frontendAddr, Namespace: opts.Namespace}

	if uiPort != -1 {
		if uiPort == 0 {
			if uiPort, err = freePort(opts.Host); err != nil {
				return nil, err
			}
		}
		s.startUI(opts.Host, uiPort, frontendAddr, opts.Namespace)
		s.Endpoints.TemporalUI = "http://" + net.JoinHostPort(dialHost, strconv.Itoa(uiPort))
	}

	readyCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := waitFrontend(readyCtx, frontendAddr, opts.Namespace); err != nil {
		return nil, fmt.Errorf("devstack: Temporal server on %s did not become ready: %w (server log: %s)", frontendAddr, err, logPath)
	}
	if s.ui != nil {
		if err := waitHTTP(readyCtx, s.Endpoints.TemporalUI+"/healthz", s.uiDone); err != nil {
			return nil, fmt.Errorf("devstack: web UI on %s did not become ready: %w", s.Endpoints.TemporalUI, err)
		}
	}

	if err := WriteEndpoints(dataDir, s.Endpoints); err != nil {
		return nil, err
	}
	ok = true
	s.log.Info("temporal started",
		"address", s.Endpoints.Temporal,
		"namespace", s.Endpoints.Namespace,
		"ui", s.Endpoints.TemporalUI,
		"data", dbPath,
		"took", time.Since(begin).Round(time.Millisecond))
	return s, nil
}

// Stop stops the web UI and the server, removes <DataDir>/endpoints.json and
// releases the data directory, so that a new stack (in this process or
// another one) can start on it right away. It is safe to call more than once;
// later calls return the first call's result.
func (s *Stack) Stop() error {
	if s == nil {
		return nil
	}
	s.stopOnce.Do(func() {
		begin := time.Now()
		var errs []error
		if err := removeEndpoints(s.dataDir); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, s.release())
		s.stopErr = errors.Join(errs...)
		s.log.Info("temporal stopped", "took", time.Since(begin).Round(time.Millisecond))
	})
	return s.stopErr
}

// release stops whatever has been started so far and frees the data
// directory. It is used by Stop and on failed starts.
func (s *Stack) release() error {
	var errs []error
	if s.ui != nil {
		s.ui.Stop()
		select {
		case <-s.uiDone:
		case <-time.After(5 * time.Second):
		}
		s.ui = nil
	}
	if s.server != nil {
		if err := s.server.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("devstack: stopping Temporal server: %w", err))
		}
		s.server = nil
	}
	if s.logFile != nil {
		_ = s.logFile.Sync()
		if err := s.logFile.Close(); err != nil {
			errs = append(errs, err)
		}
		s.logFile = nil
	}
	if s.lock != nil {
		if err := s.lock.release(); err != nil {
			errs = append(errs, err)
		}
		s.lock = nil
	}
	return errors.Join(errs...)
}

// startServer builds and starts one server incarnation on the given ports.
// On failure nothing of it is left running.
func (s *Stack) startServer(host, dialHost, dbPath string, dbGen int, ports serverPorts, serverLog slogServerLogger) (err error) {
	defer func() {
		// The server reports some startup problems by panicking (for
		// instance from dependency injection); turn them into errors.
		if r := recover(); r != nil {
			err = fmt.Errorf("server panicked during start: %v", r)
		}
	}()
	srv, err := buildServer(host, dialHost, dbPath, dbGen, ports, serverLog)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		_ = srv.Stop()
		return err
	}
	s.server = srv
	return nil
}

// startUI runs the web UI in the background. The UI server's Start blocks
// until Stop. It binds the port itself and treats a failure to bind as fatal
// for the process, which is why the port is checked (or picked) right before.
func (s *Stack) startUI(host string, port int, frontendAddr, namespace string) {
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // the UI joins host and port itself
	}
	s.ui = buildUI(host, port, frontendAddr, namespace)
	s.uiDone = make(chan struct{})
	ui, done := s.ui, s.uiDone
	go func() {
		defer close(done)
		if err := ui.Start(); err != nil {
			s.log.Warn("temporal web UI stopped", "error", err)
		}
	}()
}

func (o Options) withDefaults() (Options, error) {
	if strings.TrimSpace(o.DataDir) == "" {
		return o, errors.New("devstack: Options.DataDir is required")
	}
	abs, err := filepath.Abs(o.DataDir)
	if err != nil {
		return o, fmt.Errorf("devstack: data directory %q: %w", o.DataDir, err)
	}
	if strings.ContainsAny(abs, "?#") {
		return o, fmt.Errorf("devstack: data directory %s: the path must not contain '?' or '#'; use another --data directory", abs)
	}
	o.DataDir = abs
	switch o.Host {
	case "":
		o.Host = loopback
	case "localhost":
		// The server needs an IP address, not a name.
		o.Host = loopback
	}
	if net.ParseIP(o.Host) == nil {
		return o, fmt.Errorf("devstack: host %q is not an IP address", o.Host)
	}
	if o.TemporalPort < 0 || o.TemporalPort > 65535 {
		return o, fmt.Errorf("devstack: invalid Temporal port %d", o.TemporalPort)
	}
	if o.UIPort < -1 || o.UIPort > 65535 {
		return o, fmt.Errorf("devstack: invalid web UI port %d (use 0 for any free port, -1 for no UI)", o.UIPort)
	}
	if o.Namespace == "" {
		o.Namespace = defaultNamespace
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// checkDataDir creates dir if needed and makes sure files can be created in
// it, so that a read-only location fails here with a clear message instead of
// deep inside SQLite.
func checkDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("devstack: cannot create data directory %s: %w; pass a writable directory with --data", dir, err)
	}
	probe, err := os.CreateTemp(dir, ".write-test-*")
	if err != nil {
		return fmt.Errorf("devstack: data directory %s is not writable: %w; fix its permissions or pass a writable directory with --data", dir, err)
	}
	name := probe.Name()
	_ = probe.Close()
	_ = os.Remove(name)

	dbPath := filepath.Join(dir, DatabaseFile)
	if f, err := os.OpenFile(dbPath, os.O_RDWR, 0); err == nil {
		_ = f.Close()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("devstack: cannot open %s for writing: %w; fix its permissions or pass another --data directory", dbPath, err)
	}
	return nil
}

// pickServerPorts chooses the ports of one server incarnation. All probes are
// held open together so the ports are distinct.
func pickServerPorts(host string, frontend int) (serverPorts, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	listen := func(h string) (int, error) {
		l, err := net.Listen("tcp", net.JoinHostPort(h, "0"))
		if err != nil {
			return 0, fmt.Errorf("devstack: no free TCP port on %s: %w", h, err)
		}
		listeners = append(listeners, l)
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	var p serverPorts
	var err error
	p.frontend = frontend
	if p.frontend == 0 {
		if p.frontend, err = listen(host); err != nil {
			return p, err
		}
	}
	for _, port := range []*int{&p.history, &p.matching, &p.worker} {
		if *port, err = listen(loopback); err != nil {
			return p, err
		}
	}
	return p, nil
}

// freePort returns a port that was free on host a moment ago.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("devstack: no free TCP port on %s: %w", host, err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func checkPortFree(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

// waitFrontend polls the frontend until it describes the namespace.
func waitFrontend(ctx context.Context, addr, namespace string) error {
	nc, err := client.NewNamespaceClient(client.Options{
		HostPort: addr,
		Logger:   sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return err
	}
	defer nc.Close()
	var lastErr error
	for {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := nc.Describe(callCtx, namespace)
		cancel()
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitHTTP polls url until it answers 200. done closing means the server
// behind url exited.
func waitHTTP(ctx context.Context, url string, done <-chan struct{}) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	var lastErr error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %s", resp.Status)
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), lastErr)
		case <-done:
			return fmt.Errorf("server exited (last error: %v)", lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
