package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
)

// A site in a repository of its own, as a new user starts one: `trawler new site
// --module` writes a Go module that builds against this checkout, passes its own test,
// and its binary (trawler with the site's tasks) runs the site's chain on the stack as a
// worker process and as `run --wait`, storing one item per story of the demo site.
func TestNewSiteModuleBuildsTestsAndCrawls(t *testing.T) {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	mod := filepath.Join(t.TempDir(), "acme-crawlers")
	stdout, stderr, code := trawler(t, "new", "site", "acme", "--module", "example.com/acme-crawlers", "--dir", mod, "--replace", repo)
	if code != 0 {
		t.Fatalf("new site --module: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "wrote module example.com/acme-crawlers") {
		t.Fatalf("new site --module printed:\n%s", stdout)
	}
	main, err := os.ReadFile(filepath.Join(mod, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(main), "func main() { cli.Main(acme.Tasks...) }") {
		t.Fatalf("main.go:\n%s", main)
	}

	// The module's own commands, as its Makefile runs them; go.mod needs no tidying.
	bin := filepath.Join(mod, "bin", "acme")
	for _, args := range [][]string{{"build", "-o", bin, "."}, {"test", "-count=1", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = mod
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in the new module: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run := func(args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = mod
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("acme %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String(), errb.String()
	}
	if out, _ := run("validate", "chain.yaml"); out != "chain.yaml: ok\n" {
		t.Fatalf("validate: %q", out)
	}

	// The site's binary carries no embedded server and no peer crawler: neither their
	// modules nor the commands that need them, which say where to find them.
	mods, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"go.temporal.io/server", "github.com/gocolly/colly", "github.com/FerretDB/FerretDB"} {
		if strings.Contains(string(mods), m) {
			t.Errorf("the site's binary links %s:\n%s", m, mods)
		}
	}
	dev := exec.Command(bin, "dev")
	if msg, err := dev.CombinedOutput(); err == nil || !strings.Contains(string(msg), "run it from Trawler's own binary: go run github.com/trawlerhq/trawler/cmd/trawler dev") {
		t.Errorf("acme dev: %v\n%s", err, msg)
	}

	o := demosite.Options{Pages: 2}
	site := startSite(t, o)
	out := t.TempDir()
	workerProcess(t, bin, "acme-module", out)
	stdout, _ = run("run", "chain.yaml", "--data", shared.dir, "--task-queue", "acme-module", "--out", out,
		"--set", "base_url="+site, "--set", "feed.pages=2", "--wait", "--json")
	var res struct {
		Items  int            `json:"items"`
		Failed int            `json:"failed"`
		Sinks  map[string]int `json:"sinks"`
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil {
		t.Fatalf("last line is not the JSON summary: %v\n%s", err, stdout)
	}
	stories, _ := demosite.Expected(o, 2)
	if res.Items != stories || res.Failed != 0 || res.Sinks["jsonl"] != stories {
		t.Fatalf("run summary %+v, want %d stories stored and read back from jsonl", res, stories)
	}
}
