package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"trawler/engine"
	"trawler/internal/devstack/demosite"
)

// buildTrawler builds the real binary once for the tests that run worker processes.
func buildTrawler(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(shared.dir, "trawler")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/trawler")
	cmd.Dir = ".."
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build ./cmd/trawler: %v", err)
	}
	return bin
}

// workerProcess starts `trawler worker` as its own process on a task queue.
func workerProcess(t *testing.T, bin, queue string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "worker", "--temporal", shared.stack.Endpoints.Temporal, "--namespace", shared.stack.Endpoints.Namespace,
		"--task-queue", queue, "--out", shared.sink.Dir(), "--redis", shared.redis.Addr())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// waitPages polls a run's progress until it has processed at least n pages.
func waitPages(t *testing.T, id string, n int) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		st, err := engine.Describe(context.Background(), shared.client, id)
		if err == nil && st.Progress != nil {
			if pages, _, _, _ := st.Progress.Totals(); pages >= n {
				return pages
			}
			if st.State != "running" {
				t.Fatalf("run ended (%s) before reaching %d pages", st.State, n)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("run %s did not reach %d pages", id, n)
	return 0
}

func TestKilledWorkerLosesNothing(t *testing.T) {
	bin := buildTrawler(t)
	// A site that takes 40 ms a page keeps batches in flight when the worker dies.
	o := demosite.Options{Pages: 6, Latency: 40 * time.Millisecond}
	site := startSite(t, o)
	const queue = "kill-test"
	first := workerProcess(t, bin, queue)
	id := start(t, plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=6"), queue)
	at := waitPages(t, id, 60)
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	t.Logf("killed the worker after %d pages", at)
	workerProcess(t, bin, queue)
	s := wait(t, id, 3*time.Minute)
	keys := stored(t, id)
	assertDemoStored(t, keys, o, 6)
	if _, _, _, failed := s.Totals(); failed != 0 {
		t.Errorf("%d inputs failed: %+v", failed, s.Failures)
	}
}

func TestServerRestartResumesTheRun(t *testing.T) {
	o := demosite.Options{Pages: 6, Latency: 40 * time.Millisecond}
	site := startSite(t, o)
	id := start(t, plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=6"), taskQueue)
	at := waitPages(t, id, 60)
	// Stop worker and server while the run is in flight, then bring both back on the
	// same SQLite file (and port, as `trawler dev` does).
	port := shared.port
	stopShared()
	if err := startShared(port); err != nil {
		t.Fatalf("restart on the same data dir: %v", err)
	}
	t.Logf("restarted the server after %d pages", at)
	s := wait(t, id, 3*time.Minute)
	keys := stored(t, id)
	assertDemoStored(t, keys, o, 6)
	if pages, _, _, failed := s.Totals(); failed != 0 || pages <= at {
		t.Errorf("after restart: pages %d (had %d before), failed %d", pages, at, failed)
	}
}
