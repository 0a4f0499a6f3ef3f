package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// expectChain writes the demo chain over site (feed pages, then stories) with the given
// `expect:` lines on its story step, as the test's own tenant.
func expectChain(t *testing.T, site string, pages int, expect string) string {
	t.Helper()
	yaml := fmt.Sprintf(`name: expect
tenant: %s
defaults:
  params: {base_url: '%s'}
steps:
  - id: feed
    task: demo.feed
    from: feed
    max_depth: 10
    params: {pages: %d}
  - id: story
    task: demo.story
    from: feed
    expect:
%s`, tenantOf(t), site, pages, expect)
	path := filepath.Join(t.TempDir(), "expect.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A site redesign takes the link off 9 stories in 10 from story 3 on: the run stores every
// story, and ends completed_with_violations naming the url field and its coverage, in its
// summary and in `trawler status` (text and --json). With on_violation: fail it fails.
func TestExpectationsCatchFieldGoneBlank(t *testing.T) {
	t.Parallel()
	site := startSite(t, demosite.Options{Pages: 2, PerPage: 10, LinksGoneFrom: 3})
	rules := "      coverage: {url: 0.95}\n      fields:\n        score: {type: int, min: 1}\n        url: {match: '^https://'}\n"
	want := workflows.Violation{Step: "story", Rule: "coverage", Field: "url", Want: 0.95, Got: 0.1,
		Detail: "coverage of url 0.10 < 0.95 (2 of 20 items have it)"}

	code, res := runWait(t, expectChain(t, site, 2, rules))
	if code != 5 || res.Outcome != workflows.OutcomeViolations || res.Items != 20 {
		t.Fatalf("exit %d, outcome %q, %d items; want 5, %s, 20 (%+v)", code, res.Outcome, res.Items, workflows.OutcomeViolations, res)
	}
	if len(res.Violations) != 1 || res.Violations[0] != want {
		t.Fatalf("violations %+v\nwant [%+v]", res.Violations, want)
	}
	st, _ := runStatus(t, res.RunID)
	if st.Progress == nil || st.Progress.Outcome != workflows.OutcomeViolations || len(st.Progress.Violations) != 1 || st.Progress.Violations[0] != want {
		t.Fatalf("status --json: %+v", st.Progress)
	}
	stdout, stderr, code := trawler(t, append([]string{"status", res.RunID}, stackFlags()...)...)
	if code != 0 || !strings.Contains(stdout, "completed, COMPLETED WITH VIOLATIONS") ||
		!strings.Contains(stdout, "  broken expectations:\n    step story: coverage of url 0.10 < 0.95 (2 of 20 items have it)\n") {
		t.Fatalf("status exit %d:\n%s%s", code, stdout, stderr)
	}

	code, res = runWait(t, expectChain(t, site, 2, rules+"      on_violation: fail\n"))
	want.Fail = true
	if code != 3 || res.Outcome != workflows.OutcomeFailed || len(res.Violations) != 1 || res.Violations[0] != want {
		t.Fatalf("on_violation: fail: exit %d, outcome %q, violations %+v; want 3, failed, [%+v]", code, res.Outcome, res.Violations, want)
	}
}

// A run that produces fewer items than its step's minimum breaks it: an absolute one, and
// one relative to the chain's earlier completed runs (half the site gone since).
func TestExpectationsMinimumItems(t *testing.T) {
	t.Parallel()
	site := startSite(t, demosite.Options{Pages: 2, PerPage: 10})
	code, res := runWait(t, expectChain(t, site, 2, "      min_items: 50\n"))
	want := workflows.Violation{Step: "story", Rule: "min_items", Want: 50, Got: 20, Detail: "min_items: 20 items < 50"}
	if code != 5 || res.Outcome != workflows.OutcomeViolations || len(res.Violations) != 1 || res.Violations[0] != want {
		t.Fatalf("exit %d, outcome %q, violations %+v; want 5, %s, [%+v]", code, res.Outcome, res.Violations, workflows.OutcomeViolations, want)
	}

	relative := "      min_items: {fraction: 0.8, of_last: 3}\n"
	code, res = runWait(t, expectChain(t, site, 2, relative))
	if code != 0 || res.Outcome != workflows.OutcomeCompleted || len(res.Violations) != 0 {
		t.Fatalf("first run with a relative minimum has no history to fall short of: exit %d, %+v", code, res)
	}
	code, res = runWait(t, expectChain(t, site, 1, relative))
	want = workflows.Violation{Step: "story", Rule: "min_items", Want: 16, Got: 10,
		Detail: "min_items: 10 items < 16 (0.8 of the mean 20.0 of the last 1 completed runs)"}
	if code != 5 || len(res.Violations) != 1 || res.Violations[0] != want {
		t.Fatalf("one feed page of two: exit %d, violations %+v; want 5, [%+v]", code, res.Violations, want)
	}
}
