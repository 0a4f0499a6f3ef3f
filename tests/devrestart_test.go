package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/endpoints"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// devProcess starts `trawler dev` on data, on any free ports, and returns once it is up.
func devProcess(t *testing.T, bin, data string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "dev", "--data", data, "--temporal-port", "0", "--ui-port", "0", "--site-port", "0")
	cmd.Dir = ".."
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "trawler dev is up") {
			go func() { // keep reading, so that dev never blocks on its stdout
				for sc.Scan() {
				}
			}()
			return cmd
		}
	}
	t.Fatalf("trawler dev --data %s did not come up", data)
	return nil
}

// runSummary is the last line of `trawler run --wait --json`.
type runSummary struct {
	RunID     string          `json:"run_id"`
	Items     int             `json:"items"`
	Unchanged int             `json:"unchanged"`
	Failed    int             `json:"failed"`
	Sinks     map[string]int  `json:"sinks"`
	Outcome   string          `json:"outcome"`
	Failures  []crawl.Failure `json:"failures"`
	// Violations are the run's broken expectations.
	Violations []workflows.Violation `json:"violations"`
}

func parseSummary(t *testing.T, stdout, stderr string) runSummary {
	t.Helper()
	var res runSummary
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil || res.RunID == "" {
		t.Fatalf("last line is not the run's summary (%v):\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	return res
}

// `trawler dev` killed with SIGKILL, twice, loses nothing a run relied on:
//   - `trawler run --wait` started before the first kill waits for the stack to come back
//     on other ports, says so, and reads every store back at its new address;
//   - a kill right after a run ended (well within any snapshot interval) keeps its dedup
//     state: the same run again finds every item unchanged and stores none.
func TestDevKilledTwiceRunsWaitAndKeepDedup(t *testing.T) {
	bin := buildTrawler(t)
	data := t.TempDir()
	o := demosite.Options{Pages: 2, Latency: 50 * time.Millisecond}
	site := startSite(t, o)
	stories, comments := demosite.Expected(o, 2)
	want := stories + comments
	run := []string{"run", "examples/demo.yaml", "--data", data, "--set", "base_url=" + site, "--set", "feed.pages=2", "--wait", "--json"}

	dev := devProcess(t, bin, data)
	before, err := endpoints.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	waiting := exec.Command(bin, run...)
	waiting.Dir = ".."
	var stdout, stderr syncBuffer
	waiting.Stdout, waiting.Stderr = &stdout, &stderr
	if err := waiting.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = waiting.Process.Kill() })
	if !poll(time.Minute, func() bool { return strings.Contains(stdout.String(), `"progress"`) }) {
		t.Fatalf("no progress from trawler run:\n%s\n%s", stdout.String(), stderr.String())
	}
	if err := dev.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dev.Wait()
	dev = devProcess(t, bin, data)
	after, err := endpoints.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	if after.Temporal == before.Temporal || after.ES == before.ES {
		t.Fatalf("the restarted stack kept Temporal %s and es %s; the test needs them moved", after.Temporal, after.ES)
	}
	err = waiting.Wait()
	if err != nil {
		t.Fatalf("trawler run --wait across the restart: %v\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "lost Temporal at "+before.Temporal) || !strings.Contains(stderr.String(), "the stack is back, Temporal at "+after.Temporal) {
		t.Errorf("stderr does not tell of the wait for the stack:\n%s", stderr.String())
	}
	first := parseSummary(t, stdout.String(), stderr.String())
	// Items a killed attempt stored after its last checkpoint are found unchanged by the
	// retry, so the summary splits them between items and unchanged; the stores below
	// must hold each exactly once.
	if first.Items+first.Unchanged != want || first.Failed != 0 {
		t.Errorf("run across the restart: %d items + %d unchanged, %d failed; want %d, 0", first.Items, first.Unchanged, first.Failed, want)
	}
	for _, sink := range []string{"jsonl", "kafka", "mongo", "es", "hbase"} {
		if first.Sinks[sink] != want {
			t.Errorf("sink %s read back %d records of the run across the restart, want %d (%v)", sink, first.Sinks[sink], want, first.Sinks)
		}
	}

	// The dedup state of a run that just ended survives a kill at once.
	if err := dev.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dev.Wait()
	devProcess(t, bin, data)
	out, errOut, code := trawler(t, run...)
	if code != 0 {
		t.Fatalf("run after the second kill: exit %d\n%s", code, errOut)
	}
	again := parseSummary(t, out, errOut)
	if again.Unchanged != want || again.Failed != 0 {
		t.Errorf("the same run after a kill: %d unchanged, %d failed; want all %d unchanged", again.Unchanged, again.Failed, want)
	}
	for sink, n := range again.Sinks {
		if n != 0 {
			t.Errorf("sink %s got %d records again, want none", sink, n)
		}
	}
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
