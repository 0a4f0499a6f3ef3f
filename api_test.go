package trawler_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// forbidden are what a program built on Trawler's public packages must not link: the
// embedded servers of the dev stack and the benchmarks' peer crawler.
var forbidden = []string{"github.com/trawlerhq/trawler/internal/devstack", "github.com/gocolly/colly"}

// publicPackages are the packages outside internal/, tests/ and cmd/ that a program
// can import (the module root holds tests only).
func publicPackages(t *testing.T) []listed {
	var public []listed
	for _, p := range goList(t, "./...") {
		rel := strings.TrimPrefix(p.ImportPath, "github.com/trawlerhq/trawler")
		if strings.Contains(rel+"/", "/internal/") || strings.HasPrefix(rel, "/tests") || strings.HasPrefix(rel, "/cmd/") || len(p.GoFiles) == 0 {
			continue
		}
		public = append(public, p)
	}
	return public
}

// Every public package says what it is for (go doc shows its package comment) and has
// a runnable example: a func Example… whose output go test checks.
func TestPublicPackagesHaveDocAndRunnableExample(t *testing.T) {
	for _, p := range publicPackages(t) {
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("%s has no package comment; add a doc.go whose comment says what the package is for", p.ImportPath)
		}
		runnable := false
		for _, f := range append(p.TestGoFiles, p.XTestGoFiles...) {
			src, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(src, []byte("\nfunc Example")) && bytes.Contains(src, []byte("// Output:")) {
				runnable = true
			}
		}
		if !runnable {
			t.Errorf("%s has no runnable example; add an example_test.go with a func Example… ending in an // Output: comment", p.ImportPath)
		}
	}
}

// The public packages (everything outside internal/, tests/ and cmd/) link neither the
// dev stack nor Colly; the message names the import chain that brings one in.
func TestPublicPackagesLinkNoDevStackNorColly(t *testing.T) {
	var public []string
	for _, p := range publicPackages(t) {
		public = append(public, p.ImportPath)
	}
	for _, want := range []string{"github.com/trawlerhq/trawler/crawl", "github.com/trawlerhq/trawler/fetch", "github.com/trawlerhq/trawler/cli", "github.com/trawlerhq/trawler/worker"} {
		if !slices.Contains(public, want) {
			t.Fatalf("public packages %v lack %s", public, want)
		}
	}
	for _, pkg := range public {
		graph := map[string][]string{}
		for _, p := range goList(t, "-deps", pkg) {
			graph[p.ImportPath] = p.Imports
		}
		for dep := range graph {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("public package %s links %s: %s\n  move what needs it under internal/, or out of the public package's imports", pkg, dep, strings.Join(importChain(graph, pkg, dep), " → "))
				}
			}
		}
	}
}

type listed struct {
	ImportPath                string
	Imports                   []string
	Dir, Doc                  string
	GoFiles                   []string
	TestGoFiles, XTestGoFiles []string
}

// goList runs `go list -json args…` and decodes its stream of packages.
func goList(t *testing.T, args ...string) []listed {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			return pkgs
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
}

// importChain is the shortest chain of imports from pkg to dep.
func importChain(graph map[string][]string, pkg, dep string) []string {
	prev := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == dep {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		for _, i := range graph[p] {
			if _, seen := prev[i]; !seen {
				prev[i] = p
				queue = append(queue, i)
			}
		}
	}
	return []string{pkg, "…", dep}
}
