package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/scaffold"
	"github.com/trawlerhq/trawler/internal/sites/generic"
)

func runCLI(t *testing.T, args ...string) error {
	t.Helper()
	root := newRoot()
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return root.ExecuteContext(ctx)
}

// `trawler new site` writes a package that compiles, vets and passes its own test, and a
// chain file that its test validates; it refuses bad names and existing packages.
func TestNewSitePackageBuildsAndPassesItsTest(t *testing.T) {
	const name = "zz_scaffoldtest"
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(repo, "sites", name)
	if _, err := os.Stat(pkg); err == nil {
		t.Fatalf("%s exists before the test; remove it", pkg)
	}
	t.Cleanup(func() { _ = os.RemoveAll(pkg) })
	examples := t.TempDir()
	if err := runCLI(t, "new", "site", name, "--dir", filepath.Join(repo, "sites"), "--examples", examples); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{name + ".go", name + "_test.go", "testdata/news-1.html", "testdata/item-1.html"} {
		if _, err := os.Stat(filepath.Join(pkg, f)); err != nil {
			t.Fatalf("not written: %v", err)
		}
	}
	chain, err := os.ReadFile(filepath.Join(examples, name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"task: " + name + ".feed", "task: " + name + ".detail", "base_url: ${demo_site:-http://127.0.0.1:8089}"} {
		if !strings.Contains(string(chain), want) {
			t.Fatalf("chain file lacks %q:\n%s", want, chain)
		}
	}

	for _, args := range [][]string{
		{"vet", "./sites/" + name},
		{"test", "-count=1", "-v", "./sites/" + name},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[0] == "test" {
			for _, test := range []string{"TestFeedFollowsEntriesAndNextPage", "TestDetailStoresTheEntry", "TestDetailFailsWithoutTitle", "TestChainFileIsValid"} {
				if !strings.Contains(string(out), "--- PASS: "+test) {
					t.Fatalf("%s did not pass:\n%s", test, out)
				}
			}
		}
	}

	// Refusals: an existing package, and names that are no lowercase Go identifier.
	err = runCLI(t, "new", "site", name, "--dir", filepath.Join(repo, "sites"), "--examples", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("existing package: %v", err)
	}
	if err := runCLI(t, "new", "site", name, "--dir", filepath.Join(repo, "sites"), "--examples", examples, "--force"); err != nil {
		t.Fatalf("--force: %v", err)
	}
	for _, bad := range []string{"Acme", "1news", "my-site", "func", "generic"} {
		if err := runCLI(t, "new", "site", bad, "--dir", t.TempDir(), "--examples", t.TempDir()); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
}

// `trawler new chain` on the demo site finds the story list, its links to story pages
// and the More link, writes a valid chain, and its list step extracts exactly the
// stories of the first page.
func TestNewChainOnDemoSite(t *testing.T) {
	o := demosite.Options{Pages: 3, PerPage: 7}
	base, stop, err := demosite.Start("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	out := filepath.Join(t.TempDir(), "chains", "news.yaml")
	c, data := newChainFile(t, out, base+"/news?p=1", "--name", "news")
	var file struct {
		Steps []struct {
			ID     string         `yaml:"id"`
			Task   string         `yaml:"task"`
			Params map[string]any `yaml:"params"`
		} `yaml:"steps"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Steps) != 2 || file.Steps[0].Task != generic.HTMLListTask || file.Steps[1].Task != generic.HTMLDetailTask {
		t.Fatalf("steps %+v, want generic.html_list then generic.html_detail", file.Steps)
	}
	lp := file.Steps[0].Params
	if lp["items"] != "tr.athing" || lp["next"] != "a.morelink" || lp["detail"] != "link" || lp["max_pages"] != 3 {
		t.Fatalf("list params %v: want items tr.athing, next a.morelink, detail link, max_pages 3", lp)
	}
	dp := fmt.Sprint(file.Steps[1].Params)
	if !strings.Contains(dp, "h1.title") || !strings.Contains(dp, "article.story") {
		t.Fatalf("detail params %s: want title h1.title, text article.story", dp)
	}

	// The list step as a worker runs it.
	res := runFirstStep(t, c, generic.HTMLList)
	var gotURLs, wantURLs, gotTitles, wantTitles []string
	next := ""
	for _, in := range res.Next {
		switch in.Task {
		case generic.HTMLDetailTask:
			gotURLs = append(gotURLs, in.URL)
			gotTitles = append(gotTitles, fmt.Sprint(carried(in)["title"]))
		default:
			next = in.URL
		}
	}
	for id := 1; id <= o.PerPage; id++ {
		s, _ := o.Story(id)
		wantURLs = append(wantURLs, fmt.Sprintf("%s/item/%d", base, id))
		wantTitles = append(wantTitles, s.Title)
	}
	if len(res.Items) != 0 || !reflect.DeepEqual(gotURLs, wantURLs) || !reflect.DeepEqual(gotTitles, wantTitles) {
		t.Fatalf("first page: %d items, detail links %v with titles %q;\nwant the page's stories %v, %q", len(res.Items), gotURLs, gotTitles, wantURLs, wantTitles)
	}
	if next != base+"/news?p=2" {
		t.Fatalf("next page %q, want %s/news?p=2 (inputs %+v)", next, base, res.Next)
	}

	// An existing file is kept unless --force.
	if err := runCLI(t, "new", "chain", base+"/news?p=1", "--allow-private", "--out", out); err == nil {
		t.Fatal("overwrote an existing file without --force")
	}
	// Without --allow-private the fetch guard refuses the loopback site.
	t.Setenv("TRAWLER_ALLOW_PRIVATE", "")
	if err := runCLI(t, "new", "chain", base+"/news?p=1", "--out", filepath.Join(t.TempDir(), "x.yaml")); err == nil {
		t.Fatal("fetched a loopback address without --allow-private")
	}
}

// newChainFile runs `trawler new chain URL --allow-private --out out ARGS…` and returns
// the written chain, which must validate.
func newChainFile(t *testing.T, out, pageURL string, args ...string) (*crawl.Chain, []byte) {
	t.Helper()
	if err := runCLI(t, append([]string{"new", "chain", pageURL, "--allow-private", "--out", out}, args...)...); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", data)
	c, err := crawl.Load(out, data, crawl.LoadOptions{Sinks: knownSinks})
	if err != nil {
		t.Fatalf("written chain does not validate: %v\n%s", err, data)
	}
	return c, data
}

// runFirstStep runs the chain's first step as a worker does: compiled params, through
// JSON as in history, no input but its start URLs.
func runFirstStep(t *testing.T, c *crawl.Chain, task crawl.Task) crawl.Result {
	t.Helper()
	plan, err := c.Compile(nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(plan.Steps[0].Params)
	var params crawl.Params
	if err := json.Unmarshal(raw, &params); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env := &crawl.Env{Params: params, Fetcher: fetch.New(fetch.Options{Retries: -1, AllowPrivate: true})}
	res, err := task.Run(ctx, env, crawl.Input{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// carried is the list item's fields riding along to its detail page.
func carried(in crawl.Input) map[string]any {
	m, _ := in.Vars[generic.VarFields].(map[string]any)
	return m
}

// `trawler new chain` on the demo site's JSON API finds the stories array, their id and
// the next link, writes a valid generic.json chain, and its step stores exactly the
// stories of the first page and follows the second.
func TestNewChainOnDemoJSONAPI(t *testing.T) {
	o := demosite.Options{Pages: 3, PerPage: 7}
	base, stop, err := demosite.Start("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	out := filepath.Join(t.TempDir(), "api.yaml")
	c, data := newChainFile(t, out, base+"/api/stories?page=1", "--name", "api", "--max-pages", "2")
	var file struct {
		Steps []struct {
			Task   string         `yaml:"task"`
			Store  []string       `yaml:"store"`
			Params map[string]any `yaml:"params"`
		} `yaml:"steps"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Steps) != 1 || file.Steps[0].Task != generic.JSONTask || !reflect.DeepEqual(file.Steps[0].Store, []string{"all"}) {
		t.Fatalf("steps %+v, want one generic.json step storing all", file.Steps)
	}
	p := file.Steps[0].Params
	if p["items"] != "stories" || fmt.Sprint(p["key"]) != "map[path:id]" || p["next_path"] != "next" || p["has_more_path"] != "has_more" || p["max_pages"] != 2 {
		t.Fatalf("params %v: want items stories, key {path: id}, next_path next, has_more_path has_more, max_pages 2", p)
	}
	if _, ok := p["fields"]; ok {
		t.Fatalf("params %v: want no fields (every key of the item as it is)", p)
	}

	// The step as a worker runs it.
	res := runFirstStep(t, c, generic.JSON)
	var keys, wantKeys []string
	for _, it := range res.Items {
		keys = append(keys, it.Key)
	}
	for id := 1; id <= o.PerPage; id++ {
		wantKeys = append(wantKeys, fmt.Sprint(id))
	}
	if !reflect.DeepEqual(keys, wantKeys) {
		t.Fatalf("first page: item keys %v, want the page's story ids %v", keys, wantKeys)
	}
	if len(res.Next) != 1 || res.Next[0].URL != base+"/api/stories?page=2&per_page=7" {
		t.Fatalf("next %+v, want %s/api/stories?page=2&per_page=7", res.Next, base)
	}

	// --json shows the JSON findings and no HTML list.
	js, _ := json.Marshal(newChainResult{File: out, JSON: &scaffold.JSONFindings{Items: scaffold.JSONArray{Path: "stories"}}})
	if strings.Contains(string(js), `"list"`) || !strings.Contains(string(js), `"json":{`) {
		t.Fatalf("--json result %s: want json findings and no list", js)
	}
}

// The "next:" line of `trawler new chain` is a command that works as pasted: it keeps the
// --allow-private and --data the chain was written with.
func TestNewChainNextHintKeepsFlags(t *testing.T) {
	base, stop, err := demosite.Start("127.0.0.1:0", demosite.Options{Pages: 2, PerPage: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	out := filepath.Join(t.TempDir(), "news.yaml")
	data := t.TempDir()
	var runErr error
	printed := captureStdout(t, func() {
		runErr = runCLI(t, "new", "chain", base+"/news?p=1", "--allow-private", "--data", data, "--out", out)
	})
	if runErr != nil {
		t.Fatal(runErr)
	}
	want := fmt.Sprintf("next: trawler try generic.html_list --params %s --allow-private --data %s; trawler run %s --data %s --wait\n", out, data, out, data)
	if !strings.Contains(printed, want) {
		t.Fatalf("printed\n%s\nwant the line\n%s", printed, want)
	}
}

// With --base-url the chain starts at another site with the demo site's selectors:
// `new site` says so instead of offering a `trawler run` that finds nothing.
func TestNewSiteBaseURLDoesNotClaimTheChainRuns(t *testing.T) {
	dir := t.TempDir()
	var err error
	printed := captureStdout(t, func() {
		err = runCLI(t, "new", "site", "acme", "--base-url", "https://news.acme.example", "--dir", filepath.Join(dir, "sites"), "--examples", dir)
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(printed, "--data .data/dev --wait") || !strings.Contains(printed, "The chain starts at https://news.acme.example, but its selectors are the demo site's: change them in ") {
		t.Fatalf("printed:\n%s", printed)
	}
}
