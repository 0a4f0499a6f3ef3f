package yamltest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/internal/devstack/eslite"
	"github.com/trawlerhq/trawler/internal/devstack/eslite/yamltest"
)

// TestElasticsearchYAML runs Elasticsearch's YAML REST tests against a fresh eslite when
// ESLITE_YAML_DIR names a directory holding one sub-directory per API (bulk, search, ...)
// of the suite's *.yml files. It prints passed/ran/skipped per directory; with
// ESLITE_YAML_VERBOSE=1 it also prints each failing test and why. It reports, it does
// not fail: the figures are what the package doc quotes. ESLITE_YAML_MIN (a percentage)
// makes it fail below that pass rate.
func TestElasticsearchYAML(t *testing.T) {
	root := os.Getenv("ESLITE_YAML_DIR")
	if root == "" {
		t.Skip("set ESLITE_YAML_DIR to a directory of Elasticsearch YAML REST test directories")
	}
	url, stop, err := eslite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	dirs, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range dirs {
		if d.IsDir() {
			names = append(names, d.Name())
		}
	}
	sort.Strings(names)
	only := os.Getenv("ESLITE_YAML_ONLY")
	r := &yamltest.Runner{URL: url}
	verbose := os.Getenv("ESLITE_YAML_VERBOSE") != ""
	var sumPass, sumRan, sumSkip int
	var table strings.Builder
	fmt.Fprintf(&table, "%-24s %7s %5s %8s %6s\n", "directory", "passed", "ran", "skipped", "pass%")
	for _, n := range names {
		if only != "" && !strings.Contains(n, only) {
			continue
		}
		res, err := r.RunDir(filepath.Join(root, n))
		if err != nil {
			t.Fatal(err)
		}
		pass, ran, skip := 0, 0, 0
		for _, x := range res {
			switch x.Status {
			case "pass":
				pass++
				ran++
			case "fail":
				ran++
				if verbose {
					t.Logf("FAIL %s/%s %q: %s", x.Dir, x.File, x.Name, x.Reason)
				}
			case "skip":
				skip++
				if verbose {
					t.Logf("SKIP %s/%s %q: %s", x.Dir, x.File, x.Name, x.Reason)
				}
			}
		}
		sumPass, sumRan, sumSkip = sumPass+pass, sumRan+ran, sumSkip+skip
		fmt.Fprintf(&table, "%-24s %7d %5d %8d %5.1f%%\n", n, pass, ran, skip, pct(pass, ran))
	}
	fmt.Fprintf(&table, "%-24s %7d %5d %8d %5.1f%%\n", "total", sumPass, sumRan, sumSkip, pct(sumPass, sumRan))
	t.Log("\n" + table.String())
	if min := os.Getenv("ESLITE_YAML_MIN"); min != "" {
		var want float64
		fmt.Sscan(min, &want)
		if got := pct(sumPass, sumRan); got < want {
			t.Fatalf("pass rate %.1f%% is below %s%%", got, min)
		}
	}
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}
