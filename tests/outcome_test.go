package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/workflows"

	_ "github.com/trawlerhq/trawler/internal/sites/generic"
)

// listSite serves a list page at /list linking to /a and /b, and a detail page at each
// path in detail; any other path answers 404.
func listSite(t *testing.T, detail ...string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/list":
			fmt.Fprint(w, `<html><body><ul><li><a href="/a">a</a></li><li><a href="/b">b</a></li></ul></body></html>`)
		case strings.Contains(strings.Join(detail, " "), r.URL.Path):
			fmt.Fprintf(w, `<html><body><h1>page %s</h1></body></html>`, r.URL.Path)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// listChain writes a two-step chain file (a list page at seed, then its detail pages)
// with the given retries per input; it runs as the test's own tenant.
func listChain(t *testing.T, base, seed string, retries int) string {
	t.Helper()
	yaml := fmt.Sprintf(`name: outcome
tenant: %s
robots: false
defaults:
  timeout: 5s
  retries: %d
  params: {base_url: '%s'}
steps:
  - id: list
    task: generic.html_list
    params:
      urls: ['%s']
      items: li
      fields:
        link: {css: a, attr: href, type: url}
      detail: link
  - id: detail
    task: generic.html_detail
    from: list
    params:
      fields:
        title: {css: h1, required: true}
`, tenantOf(t), retries, base, seed)
	path := filepath.Join(t.TempDir(), "outcome.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// stackFlags point the CLI at the package's stack and worker.
func stackFlags() []string {
	return []string{"--data", shared.dir, "--task-queue", taskQueue, "--out", shared.sink.Dir()}
}

// runWait runs `trawler run CHAIN --wait --json` and returns its exit code and the
// summary's last JSON line.
func runWait(t *testing.T, chain string, extra ...string) (int, runSummary) {
	t.Helper()
	args := append(append([]string{"run", chain, "--wait", "--json"}, extra...), stackFlags()...)
	stdout, stderr, code := trawler(t, args...)
	return code, parseSummary(t, stdout, stderr)
}

// runStatus reads `trawler status RUN_ID --json` and returns it with its raw output.
func runStatus(t *testing.T, id string) (st struct {
	State    string             `json:"state"`
	Progress *workflows.Summary `json:"progress"`
}, stdout string) {
	t.Helper()
	stdout, stderr, code := trawler(t, append([]string{"status", id, "--json"}, stackFlags()...)...)
	if code != 0 {
		t.Fatalf("status exit %d: %s", code, stderr)
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	return st, stdout
}

// `trawler run --wait` exits with the run's outcome, so a cron job or CI can tell a run
// that stored nothing from one that lost some pages and one that lost none.
func TestCLIRunExitCodeFollowsOutcome(t *testing.T) {
	t.Run("failed", func(t *testing.T) {
		code, res := runWait(t, listChain(t, listSite(t), "/missing", 0))
		if code != 3 || res.Outcome != workflows.OutcomeFailed {
			t.Fatalf("only seed answers 404: exit %d, outcome %q; want 3, failed (%+v)", code, res.Outcome, res)
		}
		if len(res.Failures) != 1 || res.Failures[0].Step != "list" || res.Failures[0].Class != crawl.CauseHTTP404 {
			t.Fatalf("failures %+v, want the list seed with http_404", res.Failures)
		}
	})
	t.Run("partial", func(t *testing.T) {
		chain := listChain(t, listSite(t, "/a"), "/list", 0)
		code, res := runWait(t, chain)
		if code != 2 || res.Outcome != workflows.OutcomePartial {
			t.Fatalf("one of two detail pages answers 404: exit %d, outcome %q; want 2, partial (%+v)", code, res.Outcome, res)
		}
		if res.Items != 1 || res.Failed != 1 || len(res.Failures) != 1 || res.Failures[0].Step != "detail" || res.Failures[0].Class != crawl.CauseHTTP404 {
			t.Fatalf("summary %+v, want 1 item and the detail page /b failed with http_404", res)
		}
		code, res = runWait(t, chain, "--allow-partial")
		if code != 0 || res.Outcome != workflows.OutcomePartial {
			t.Fatalf("--allow-partial: exit %d, outcome %q; want 0, partial", code, res.Outcome)
		}
	})
	t.Run("completed", func(t *testing.T) {
		code, res := runWait(t, listChain(t, listSite(t, "/a", "/b"), "/list", 0))
		if code != 0 || res.Outcome != workflows.OutcomeCompleted || res.Items != 2 || res.Failed != 0 {
			t.Fatalf("clean chain: exit %d, %+v; want 0, completed, 2 items", code, res)
		}
	})
}

// While an input waits to be tried again, `trawler status RUN_ID` names its step, its
// attempts so far and its last error with the cause; once the site answers again the run
// ends completed.
func TestCLIStatusShowsRetryingInput(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/list" && down.Load():
			hits.Add(1)
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		case r.URL.Path == "/list":
			fmt.Fprint(w, `<html><body><ul><li><a href="/a">a</a></li></ul></body></html>`)
		case r.URL.Path == "/a":
			fmt.Fprint(w, `<html><body><h1>page a</h1></body></html>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	chain := listChain(t, srv.URL, "/list", 20)
	stdout, stderr, code := trawler(t, append([]string{"run", chain, "--json"}, stackFlags()...)...)
	var started struct {
		RunID string `json:"run_id"`
	}
	if code != 0 || json.Unmarshal([]byte(lastLine(stdout)), &started) != nil || started.RunID == "" {
		t.Fatalf("run exit %d: %s %s", code, stdout, stderr)
	}
	id := started.RunID
	defer func() {
		down.Store(false) // a failing test still lets the run finish
	}()

	// Poll until the input has failed at least twice and waits for its next try.
	var retrying crawl.Failure
	if !poll(2*time.Minute, func() bool {
		st, stdout := runStatus(t, id)
		if st.State != "running" {
			t.Fatalf("run %s while its site is down, want running: %s", st.State, stdout)
		}
		if p := st.Progress; p != nil && len(p.Retrying) == 1 && p.Retrying[0].Attempts >= 2 {
			retrying = p.Retrying[0]
			return true
		}
		return false
	}) {
		t.Fatalf("status never listed the retrying input (site hit %d times)", hits.Load())
	}
	// The error as the worker's fetcher gave up on it: two tries per attempt (Retries: 1).
	wantErr := fmt.Sprintf("%s/list: GET %s/list: HTTP 503 Service Unavailable (2 attempts)", srv.URL, srv.URL)
	if retrying.Step != "list" || retrying.Input.URL != srv.URL+"/list" || retrying.Class != crawl.CauseHTTP5xx || retrying.Cause != wantErr {
		t.Fatalf("status --json retrying %+v\nwant step list, input %s/list, class http_5xx, error %q", retrying, srv.URL, wantErr)
	}

	// The text form says the same to a person. It is read again while the site is still
	// down, so the attempts may have grown.
	stdout, stderr, code = trawler(t, append([]string{"status", id}, stackFlags()...)...)
	if code != 0 {
		t.Fatalf("status exit %d: %s", code, stderr)
	}
	_, listed, _ := strings.Cut(stdout, "  retrying 1 input(s), last error of each:\n")
	var attempts int
	if n, _ := fmt.Sscanf(strings.TrimSpace(listed), "[list] http_5xx after %d attempt(s): ", &attempts); n != 1 || attempts < retrying.Attempts {
		t.Fatalf("status text does not list `[list] http_5xx after N attempt(s): …` with N >= %d:\n%s", retrying.Attempts, stdout)
	}
	want := fmt.Sprintf("    [list] http_5xx after %d attempt(s): %s\n", attempts, wantErr)
	if !strings.HasPrefix(listed, want) {
		t.Fatalf("status text lacks the line\n%s\n%s", want, stdout)
	}

	down.Store(false)
	eventually(t, 3*time.Minute, fmt.Sprintf("run %s finishing after its site recovered", id), func() bool {
		st, stdout := runStatus(t, id)
		if st.State == "running" {
			return false
		}
		if st.State != "completed" || st.Progress == nil || st.Progress.Outcome != workflows.OutcomeCompleted || len(st.Progress.Retrying) != 0 {
			t.Fatalf("after the site recovered: %s", stdout)
		}
		if _, items, _, failed := st.Progress.Totals(); items != 1 || failed != 0 {
			t.Fatalf("after the site recovered: %d items, %d failed; want 1, 0", items, failed)
		}
		return true
	})
}
