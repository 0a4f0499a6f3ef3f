package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/devstack"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/devstack/eslite"
	"github.com/trawlerhq/trawler/internal/devstack/hbaselite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/workflows"

	"github.com/trawlerhq/trawler/internal/sites/demo"
)

const taskQueue = "console-tests"

// stack is the package's one embedded world: Temporal, the demo site, Redis, Kafka,
// MongoDB (FerretDB), Elasticsearch (eslite), HBase (hbaselite), a worker storing to all of them, and the
// console in front.
var stack struct {
	dir      string
	temporal *devstack.Stack
	client   client.Client
	worker   *engine.Worker
	site     string
	siteOpt  demosite.Options
	redis    *miniredis.Miniredis
	kafka    []string
	mongo    string
	es       string
	hbase    string
	cfg      Config
	console  *httptest.Server
	stops    []func() error
}

const temporalUI = "http://temporal-ui.test"

var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

func TestMain(m *testing.M) {
	code := 1
	if err := startStack(); err != nil {
		fmt.Fprintln(os.Stderr, "start the embedded stack:", err)
	} else {
		code = m.Run()
	}
	stopStack()
	if code == 0 {
		os.RemoveAll(stack.dir)
	} else {
		fmt.Fprintln(os.Stderr, "test data kept in", stack.dir)
	}
	os.Exit(code)
}

func startStack() error {
	var err error
	if stack.dir, err = os.MkdirTemp("", "trawler-console-"); err != nil {
		return err
	}
	if stack.temporal, err = devstack.StartTemporal(context.Background(), devstack.Options{DataDir: stack.dir, UIPort: -1}); err != nil {
		return err
	}
	stack.siteOpt = demosite.Options{Pages: 3}
	var stop func() error
	if stack.site, stop, err = demosite.Start("127.0.0.1:0", stack.siteOpt); err != nil {
		return err
	}
	stack.stops = append(stack.stops, stop)
	if stack.redis, err = miniredis.Run(); err != nil {
		return err
	}
	if stack.kafka, stop, err = devstack.StartKafka(stack.dir); err != nil {
		return err
	}
	stack.stops = append(stack.stops, stop)
	if stack.mongo, stop, err = devstack.StartMongo(stack.dir); err != nil {
		return err
	}
	stack.stops = append(stack.stops, stop)
	if stack.es, stop, err = eslite.Start(stack.dir, "127.0.0.1:0"); err != nil {
		return err
	}
	stack.stops = append(stack.stops, stop)
	if stack.hbase, stop, err = hbaselite.Start(stack.dir, "127.0.0.1:0"); err != nil {
		return err
	}
	stack.stops = append(stack.stops, stop)
	ep := stack.temporal.Endpoints
	if stack.client, err = client.Dial(client.Options{HostPort: ep.Temporal, Namespace: ep.Namespace, Logger: sdklog.NewStructuredLogger(quiet)}); err != nil {
		return err
	}
	if stack.worker, err = engine.NewWorker(stack.client, engine.WorkerOptions{TaskQueue: taskQueue, OutDir: stack.dir + "/out",
		Redis: stack.redis.Addr(), Mongo: stack.mongo, ES: stack.es, HBase: stack.hbase, Log: quiet, Fetch: fetch.Options{AllowPrivate: true},
		// Namespaces sized for the test's items, not ten million: the dedup page reads
		// every bucket of every namespace, and the security tests call every page.
		DedupExpected: 20_000}); err != nil {
		return err
	}
	if err := stack.worker.Start(); err != nil {
		return err
	}
	stack.cfg = Config{Temporal: stack.client, Namespace: ep.Namespace, TaskQueue: taskQueue, TemporalUI: temporalUI,
		Redis: stack.redis.Addr(), Kafka: stack.kafka, Mongo: stack.mongo, ES: stack.es, HBase: stack.hbase,
		Sets:   []string{"base_url=" + stack.site},
		Tuning: workflows.Tuning{RetryBase: 100 * time.Millisecond, RetryMax: time.Second, HeartbeatTimeout: 3 * time.Second},
		Log:    quiet}
	srv, err := New(stack.cfg)
	if err != nil {
		return err
	}
	stack.stops = append(stack.stops, srv.Close)
	stack.console = httptest.NewServer(srv)
	return nil
}

func stopStack() {
	if stack.console != nil {
		stack.console.Close()
	}
	if stack.worker != nil {
		stack.worker.Stop()
	}
	for i := len(stack.stops) - 1; i >= 0; i-- {
		_ = stack.stops[i]()
	}
	if stack.redis != nil {
		stack.redis.Close()
	}
	if stack.client != nil {
		stack.client.Close()
	}
	if stack.temporal != nil {
		_ = stack.temporal.Stop()
	}
}

// call sends a request to a console and decodes its JSON answer.
func call(t *testing.T, base, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d, not a JSON object: %s", method, path, res.StatusCode, raw)
	}
	return res.StatusCode, out
}

// api calls the shared console without a token.
func api(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	return call(t, stack.console.URL, method, path, "", body)
}

// demoSource is the demo chain as a user would edit it in the console: stored in
// MongoDB and Elasticsearch too, as tenant tenant.
func demoSource(t *testing.T, tenant string) string {
	t.Helper()
	src, err := examples.Files.ReadFile("demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The story step stores in jsonl, mongo and es, the comments in jsonl alone.
	s := strings.Replace(string(src), "store: [all]", "store: [jsonl, mongo, es]", 1)
	s = strings.Replace(s, "store: [all]", "store: [jsonl]", 1)
	return regexp.MustCompile(`(?m)^#? ?tenant: .*$`).ReplaceAllString(s, "tenant: "+tenant)
}

// storedRun is one demo run (one feed page, tenant "console") that stored to every
// store; tests that read items, search or dedup share it.
var storedRun struct {
	once sync.Once
	id   string
	err  error
}

const storedTenant = "console"

func demoRun(t *testing.T) string {
	t.Helper()
	storedRun.once.Do(func() {
		status, out := api(t, "POST", "/api/runs", map[string]any{"source": demoSource(t, storedTenant), "file": "demo.yaml",
			"sets": []string{"base_url=" + stack.site, "feed.pages=1"}})
		if status != http.StatusCreated {
			storedRun.err = fmt.Errorf("start: %d %v", status, out)
			return
		}
		storedRun.id = out["run_id"].(string)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, storedRun.err = engine.Wait(ctx, stack.client, storedRun.id, nil)
	})
	if storedRun.err != nil {
		t.Fatal(storedRun.err)
	}
	return storedRun.id
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// history is two crawls of one feed page, as tenant "history" into jsonl and HBase only,
// the second from a copy of the site where stories 1 and 2 gained a point: their records
// have two versions in HBase.
var history struct {
	once sync.Once
	err  error
}

// twoVersions makes the history crawls once and returns the key of story 1.
// historyStory is the story whose history twoVersions writes: on the feed's second page,
// which the other tests' runs (one feed page) never reach. Its HBase rows are the history
// tenant's own anyway; the story keeps the test independent of what others crawl.
const historyStory = 31

// historyTenant is the tenant of the history crawls: its HBase rows are its own.
const historyTenant = "history"

func twoVersions(t *testing.T) string {
	t.Helper()
	history.once.Do(func() {
		upvoted := stack.siteOpt
		upvoted.Upvoted = map[int]bool{historyStory: true, historyStory + 1: true}
		site, stop, err := demosite.Start("127.0.0.1:0", upvoted)
		if err != nil {
			history.err = err
			return
		}
		defer stop()
		src := strings.Replace(demoSource(t, historyTenant), "store: [jsonl, mongo, es]", "store: [jsonl, hbase]", 1)
		for _, base := range []string{stack.site, site} {
			status, out := api(t, "POST", "/api/runs", map[string]any{"source": src, "sets": []string{"base_url=" + base, "feed.pages=2"}})
			if status != http.StatusCreated {
				history.err = fmt.Errorf("start: %d %v", status, out)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			_, err := engine.Wait(ctx, stack.client, out["run_id"].(string), nil)
			cancel()
			if err != nil {
				history.err = err
				return
			}
		}
	})
	if history.err != nil {
		t.Fatal(history.err)
	}
	return demo.StoryKey(historyStory)
}
