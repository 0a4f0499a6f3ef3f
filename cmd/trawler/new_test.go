package main

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

	"trawler/crawl"
	"trawler/fetch"
	"trawler/internal/devstack/demosite"
	"trawler/sites/generic"
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
	if err := runCLI(t, "new", "chain", base+"/news?p=1", "--allow-private", "--name", "news", "--out", out); err != nil {
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

	// The list step as a worker runs it: compiled params, through JSON as in history.
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
	res, err := generic.HTMLList.Run(ctx, env, crawl.Input{})
	if err != nil {
		t.Fatal(err)
	}
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

// carried is the list item's fields riding along to its detail page.
func carried(in crawl.Input) map[string]any {
	m, _ := in.Vars[generic.VarFields].(map[string]any)
	return m
}
