package devstack

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const (
	testTaskQueue = "devstack-test"
	resumeSignal  = "resume"
	stateQuery    = "state"
)

// resumableWorkflow runs one activity, then waits for a signal, sleeps on a
// durable timer and runs a second activity with the signal's payload.
func resumableWorkflow(ctx workflow.Context, name string) (string, error) {
	state := "starting"
	if err := workflow.SetQueryHandler(ctx, stateQuery, func() (string, error) { return state, nil }); err != nil {
		return "", err
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})

	var first string
	if err := workflow.ExecuteActivity(ctx, "greet", name).Get(ctx, &first); err != nil {
		return "", err
	}
	state = "waiting"

	var who string
	workflow.GetSignalChannel(ctx, resumeSignal).Receive(ctx, &who)
	state = "resumed"
	if err := workflow.Sleep(ctx, 500*time.Millisecond); err != nil {
		return "", err
	}

	var second string
	if err := workflow.ExecuteActivity(ctx, "greet", who).Get(ctx, &second); err != nil {
		return "", err
	}
	return first + " / " + second, nil
}

func greet(ctx context.Context, name string) (string, error) {
	return "hello " + name + " (attempt " + strconv.Itoa(int(activity.GetInfo(ctx).Attempt)) + ")", nil
}

func quietSDKLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func startWorker(t *testing.T, e Endpoints) (client.Client, worker.Worker) {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: e.Temporal, Namespace: e.Namespace, Logger: quietSDKLogger()})
	if err != nil {
		t.Fatalf("dial %s: %v", e.Temporal, err)
	}
	w := worker.New(c, testTaskQueue, worker.Options{StickyScheduleToStartTimeout: time.Second})
	w.RegisterWorkflow(resumableWorkflow)
	w.RegisterActivityWithOptions(greet, activity.RegisterOptions{Name: "greet"})
	if err := w.Start(); err != nil {
		c.Close()
		t.Fatalf("start worker: %v", err)
	}
	return c, w
}

// TestRestartResumesRun is the key property of the package: a workflow run
// left unfinished when the stack stops carries on after a new stack starts on
// the same data directory.
func TestRestartResumesRun(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	begin := time.Now()
	st, err := StartTemporal(ctx, Options{DataDir: dir, Log: testLogger(t)})
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	t.Logf("first start (fresh database) took %v", time.Since(begin))
	stopped := false
	defer func() {
		if !stopped {
			_ = st.Stop()
		}
	}()

	if st.Endpoints.Temporal == "" || st.Endpoints.Namespace != "default" || !strings.HasPrefix(st.Endpoints.TemporalUI, "http://") {
		t.Fatalf("unexpected endpoints %+v", st.Endpoints)
	}
	onDisk, err := ReadEndpoints(dir)
	if err != nil {
		t.Fatalf("read endpoints of running stack: %v", err)
	}
	if !reflect.DeepEqual(onDisk, st.Endpoints) {
		t.Fatalf("endpoints.json = %+v, stack reports %+v", onDisk, st.Endpoints)
	}

	t.Run("web UI answers", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/"} {
			resp, err := http.Get(st.Endpoints.TemporalUI + path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: status %s", path, resp.Status)
			}
		}
	})

	t.Run("second stack on the same directory is refused", func(t *testing.T) {
		begin := time.Now()
		other, err := StartTemporal(ctx, Options{DataDir: dir, UIPort: -1})
		if err == nil {
			_ = other.Stop()
			t.Fatal("second StartTemporal on a directory in use succeeded")
		}
		dbPath := filepath.Join(dir, DatabaseFile)
		for _, want := range []string{dbPath, "another running stack", "--data"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
		if took := time.Since(begin); took > 2*time.Second {
			t.Errorf("refusal took %v", took)
		}
		// The refused start must not have disturbed the running stack.
		if _, err := ReadEndpoints(dir); err != nil {
			t.Errorf("endpoints.json gone after refused start: %v", err)
		}
	})

	c1, w1 := startWorker(t, st.Endpoints)
	run, err := c1.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "resume-me", TaskQueue: testTaskQueue}, resumableWorkflow, "before")
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	waitState(ctx, t, c1, run.GetID(), "waiting")
	w1.Stop()
	c1.Close()

	begin = time.Now()
	if err := st.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stopped = true
	t.Logf("stop took %v", time.Since(begin))
	if err := st.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if _, err := ReadEndpoints(dir); err == nil {
		t.Fatal("endpoints.json still present after Stop")
	}

	begin = time.Now()
	st2, err := StartTemporal(ctx, Options{DataDir: dir, UIPort: -1, Log: testLogger(t)})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Logf("restart (existing database) took %v", time.Since(begin))
	defer func() { _ = st2.Stop() }()
	if st2.Endpoints.TemporalUI != "" {
		t.Fatalf("UI endpoint %q with UIPort -1", st2.Endpoints.TemporalUI)
	}

	c2, w2 := startWorker(t, st2.Endpoints)
	defer c2.Close()
	defer w2.Stop()
	if err := c2.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), resumeSignal, "after"); err != nil {
		t.Fatalf("signal after restart: %v", err)
	}
	var result string
	if err := c2.GetWorkflow(ctx, run.GetID(), run.GetRunID()).Get(ctx, &result); err != nil {
		t.Fatalf("workflow result after restart: %v", err)
	}
	want := "hello before (attempt 1) / hello after (attempt 1)"
	if result != want {
		t.Fatalf("result = %q, want %q", result, want)
	}
	t.Logf("restart, reconnect, signal and result took %v", time.Since(begin))
}

func waitState(ctx context.Context, t *testing.T, c client.Client, id, want string) {
	t.Helper()
	var last string
	var lastErr error
	for ctx.Err() == nil {
		v, err := c.QueryWorkflow(ctx, id, "", stateQuery)
		if err == nil {
			if err = v.Get(&last); err == nil && last == want {
				return
			}
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("workflow %s never reached state %q (last %q, error %v)", id, want, last, lastErr)
}

func TestEndpointsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	in := Endpoints{Temporal: "127.0.0.1:7233", Namespace: "default", TemporalUI: "http://127.0.0.1:8233", DemoSite: "http://127.0.0.1:8080",
		Kafka: []string{"127.0.0.1:9092"}, Mongo: "mongodb://127.0.0.1:27017/"}
	if err := WriteEndpoints(dir, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadEndpoints(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("read %+v, wrote %+v", out, in)
	}

	fi, err := os.Stat(EndpointsPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	raw, err := os.ReadFile(EndpointsPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "\n  \"temporal\": \"127.0.0.1:7233\"") {
		t.Errorf("not indented JSON:\n%s", raw)
	}

	// Overwrite with fewer fields: omitted ones disappear, no temp files stay.
	if err := WriteEndpoints(dir, Endpoints{Temporal: "127.0.0.1:1", Namespace: "ns"}); err != nil {
		t.Fatal(err)
	}
	raw, _ = os.ReadFile(EndpointsPath(dir))
	if strings.Contains(string(raw), "demo_site") || strings.Contains(string(raw), "temporal_ui") || strings.Contains(string(raw), "kafka") {
		t.Errorf("empty optional fields written:\n%s", raw)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("data directory holds %d entries, want only %s", len(entries), EndpointsFile)
	}
}

func TestReadEndpointsMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadEndpoints(dir)
	if err == nil {
		t.Fatal("ReadEndpoints on an empty directory succeeded")
	}
	for _, want := range []string{EndpointsPath(dir), "start `trawler dev --data " + dir + "` first"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestStartRejectsUnusableDataDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	begin := time.Now()
	st, err := StartTemporal(ctx, Options{DataDir: filepath.Join(file, "data"), UIPort: -1})
	if err == nil {
		_ = st.Stop()
		t.Fatal("StartTemporal under a regular file succeeded")
	}
	if !strings.Contains(err.Error(), filepath.Join(file, "data")) || !strings.Contains(err.Error(), "--data") {
		t.Errorf("error %q does not name the directory and the fix", err)
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("failure took %v", took)
	}

	if _, err := StartTemporal(ctx, Options{}); err == nil || !strings.Contains(err.Error(), "DataDir") {
		t.Errorf("missing DataDir: got %v", err)
	}
}

// TestStartAfterDataDirRemoved checks that a stack started after its data
// directory was wiped (in the same process) gets a fresh database instead of
// the previous one.
func TestStartAfterDataDirRemoved(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	st, err := StartTemporal(ctx, Options{DataDir: dir, UIPort: -1, Namespace: "wiped"})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	c, err := client.Dial(client.Options{HostPort: st.Endpoints.Temporal, Namespace: "wiped", Logger: quietSDKLogger()})
	if err != nil {
		_ = st.Stop()
		t.Fatalf("dial: %v", err)
	}
	_, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "old-run", TaskQueue: testTaskQueue}, resumableWorkflow, "x")
	c.Close()
	if err != nil {
		_ = st.Stop()
		t.Fatalf("start workflow: %v", err)
	}
	if err := st.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	st, err = StartTemporal(ctx, Options{DataDir: dir, UIPort: -1, Namespace: "wiped"})
	if err != nil {
		t.Fatalf("start on wiped directory: %v", err)
	}
	defer func() { _ = st.Stop() }()
	if _, err := os.Stat(filepath.Join(dir, DatabaseFile)); err != nil {
		t.Fatalf("no new database file: %v", err)
	}
	c, err = client.Dial(client.Options{HostPort: st.Endpoints.Temporal, Namespace: "wiped", Logger: quietSDKLogger()})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	if _, err := c.DescribeWorkflowExecution(ctx, "old-run", ""); err == nil {
		t.Fatal("workflow from the deleted database is still visible")
	}
}

func TestRedisKeepsItsDataAcrossStacks(t *testing.T) {
	dir := t.TempDir()
	m, stop, err := StartRedis(dir, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	m.Set("s", "v")
	m.HSet("h", "f1", "1", "f2", "-8388608")
	m.SetAdd("set", "a", "b")
	m.ZAdd("z", 1.5e15, "http://a.test/1")
	m.Push("l", "x", "y")
	m.Set("ttl", "soon")
	m.SetTTL("ttl", time.Minute)
	before := m.Dump()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	m, stop, err = StartRedis(dir, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if after := m.Dump(); after != before {
		t.Fatalf("after a restart:\n%s\nbefore:\n%s", after, before)
	}
	if ttl := m.TTL("ttl"); ttl != time.Minute {
		t.Errorf("ttl %s, want 1m kept", ttl)
	}
}
