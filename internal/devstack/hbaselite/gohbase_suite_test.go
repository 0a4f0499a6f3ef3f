package hbaselite_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/internal/devstack/hbaselite"
)

// suiteSkips are the tests of gohbase's integration suite that hbaselite cannot pass,
// with the reason; the package doc lists the same. They are skipped by name, so every
// other test of the suite has to pass.
var suiteSkips = map[string]string{
	"TestChangingRegionServers": "starts and stops region servers with $HBASE_HOME/bin/local-regionservers.sh of an HBase installation; hbaselite is one process",
}

// suiteScannerLease is the scanner lease the suite assumes (its scannerLease constant):
// TestScannerTimeout waits two leases and expects the scanner gone.
const suiteScannerLease = 5 * time.Second

// TestGohbaseSuite runs gohbase's own integration suite (the test files with the
// integration build tag of the pinned module, read from the module cache; nothing is
// copied) against a started hbaselite, and requires it to pass.
func TestGohbaseSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gohbase's integration suite (about a minute)")
	}
	// The go command that runs this test: go test puts its GOROOT/bin first on PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH: %v", err)
	}
	dir := moduleDir(t, goBin, "github.com/tsuna/gohbase")
	tests := suiteTests(t, dir)
	for name := range suiteSkips {
		if !slices.Contains(tests, name) {
			t.Errorf("skip list names %s, which the suite no longer has", name)
		}
	}
	srv, err := hbaselite.Run(hbaselite.Options{DataDir: t.TempDir(), ScannerLease: suiteScannerLease})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()

	var skips []string
	for name := range suiteSkips {
		skips = append(skips, name)
	}
	slices.Sort(skips)
	// The inner go test picks its own flags: no race detector (the suite is a client
	// and the server under test runs in this process), the normal build cache, and the
	// module's requirements from this repository's go.mod and go.sum.
	args := []string{"test", "-tags", "integration", "-count=1", "-v", "-timeout", "5m",
		"-run", "^(" + strings.Join(tests, "|") + ")$", "-skip", "^(" + strings.Join(skips, "|") + ")$",
		"github.com/tsuna/gohbase", "-args", "-host=" + srv.ZK()}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	runErr := cmd.Run()

	passed, failed, selfSkipped, lines := suiteResults(out.Bytes())
	t.Logf("go %s", strings.Join(args, " "))
	t.Logf("results:\n%s", strings.Join(lines, "\n"))
	t.Logf("gohbase integration suite against hbaselite: %d of %d tests pass, %d skipped by name (%s), %d failed, in %s",
		len(passed), len(tests), len(skips), strings.Join(skips, ", "), len(failed), time.Since(start).Round(time.Second))
	if runErr != nil || len(failed) > 0 {
		t.Errorf("the suite failed (%v); failing: %s\n%s", runErr, strings.Join(failed, ", "), tail(out.String(), 30000))
	}
	// A test that skips itself did not pass either.
	if got := len(passed) + len(skips); got != len(tests) {
		t.Errorf("%d tests passed and %d were skipped by name, but the suite has %d (skipped by themselves: %s):\n%s",
			len(passed), len(skips), len(tests), strings.Join(selfSkipped, ", "), tail(out.String(), 30000))
	}
}

// moduleDir is where a module of this repository's build list sits in the module cache.
func moduleDir(t *testing.T, goBin, mod string) string {
	out, err := exec.Command(goBin, "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("%s is not in the module cache (run go mod download): %v", mod, err)
	}
	return string(bytes.TrimSpace(out))
}

var (
	integrationTag = regexp.MustCompile(`(?m)^//go:build .*\bintegration\b`)
	testFunc       = regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
)

// suiteTests lists the tests of the module's files built only with the integration tag.
func suiteTests(t *testing.T, dir string) []string {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !integrationTag.Match(src) {
			continue
		}
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			tests = append(tests, string(m[1]))
		}
	}
	if len(tests) == 0 {
		t.Fatalf("no integration tests found in %s", dir)
	}
	slices.Sort(tests)
	return tests
}

// suiteResults reads the top-level results of a go test -v run, and their lines.
func suiteResults(out []byte) (passed, failed, skipped, lines []string) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || !strings.HasPrefix(sc.Text(), "--- ") {
			continue // subtests are indented
		}
		lines = append(lines, sc.Text())
		switch f[1] {
		case "PASS:":
			passed = append(passed, f[2])
		case "FAIL:":
			failed = append(failed, f[2])
		case "SKIP:":
			skipped = append(skipped, f[2])
		}
	}
	return passed, failed, skipped, lines
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
