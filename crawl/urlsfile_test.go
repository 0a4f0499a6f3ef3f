package crawl_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

func urlsRegistry() *crawl.Registry {
	reg := crawl.NewRegistry()
	noop := func(context.Context, *crawl.Env, crawl.Input) (crawl.Result, error) { return crawl.Result{}, nil }
	reg.Register(
		crawl.TaskFunc(crawl.TaskSpec{Name: "shop.list", Params: []crawl.Param{{Name: "urls", Type: crawl.List}}}, noop),
		crawl.TaskFunc(crawl.TaskSpec{Name: "shop.item"}, noop),
	)
	return reg
}

// loadWithFiles loads a chain whose files live in dir, as `trawler run` reads them.
func loadWithFiles(dir, src string) (*crawl.Chain, error) {
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	return crawl.Load("shop.yaml", []byte(src), crawl.LoadOptions{Registry: urlsRegistry(), ReadFile: read})
}

// A step's urls_file adds its URLs to the step's urls: a text file (comments and blank
// lines skipped) or a CSV column by header name or number.
func TestURLsFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("seeds.txt", "# start pages\nhttps://shop.example/a\n\n  https://shop.example/b  \n")
	write("seeds.csv", "name,link\nA,https://shop.example/c\nB,\"https://shop.example/d?x=1,2\"\n")
	for _, tc := range []struct{ step, want string }{
		{"urls_file: seeds.txt\n    params: {urls: [https://shop.example/first]}", "https://shop.example/first https://shop.example/a https://shop.example/b"},
		{"urls_file: {path: seeds.csv, column: link}", "https://shop.example/c https://shop.example/d?x=1,2"},
		{"urls_file: {path: seeds.csv, column: 2}", "https://shop.example/c https://shop.example/d?x=1,2"},
	} {
		c, err := loadWithFiles(dir, "name: shop\nsteps:\n  - id: list\n    task: shop.list\n    "+tc.step+"\n")
		if err != nil {
			t.Fatalf("%s: %v", tc.step, err)
		}
		var got []string
		for _, u := range c.Steps[0].Params["urls"].([]any) {
			got = append(got, u.(string))
		}
		if !reflect.DeepEqual(got, strings.Fields(tc.want)) {
			t.Errorf("%s: urls %q, want %q", tc.step, got, tc.want)
		}
	}
}

// Every mistake names the file and line to fix: the chain's for the key, the URL file's
// for a bad URL in it.
func TestURLsFileProblems(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.txt"), []byte("https://shop.example/a\nshop.example/b\nftp://x/y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "s.csv"), []byte("name,link\nA,https://shop.example/c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		step string
		want []string
	}{
		{"urls_file: bad.txt", []string{
			`bad.txt:2: "shop.example/b" is not an absolute http(s) URL; write one URL a line, like https://example.com/page`,
			`bad.txt:3: "ftp://x/y" is not an absolute http(s) URL; write one URL a line, like https://example.com/page`}},
		{"urls_file: missing.txt", []string{`shop.yaml:5: step "list": urls_file missing.txt: open ` + filepath.Join(dir, "missing.txt") + `: no such file or directory`}},
		{"urls_file: {path: s.csv, column: lnk}", []string{`s.csv:1: no column "lnk" in the header (name, link) (did you mean "link"?)`}},
		{"urls_file: {column: link}", []string{`shop.yaml:5: step 1: urls_file needs a path, e.g. urls_file: seeds.txt (one URL a line) or {path: seeds.csv, column: url}`}},
	} {
		_, err := loadWithFiles(dir, "name: shop\nsteps:\n  - id: list\n    task: shop.list\n    "+tc.step+"\n")
		if err == nil || err.Error() != strings.Join(tc.want, "\n") {
			t.Errorf("%s:\n got  %v\n want %s", tc.step, err, strings.Join(tc.want, "\n"))
		}
	}
	// A task without urls, and a loader that reads no files (the console).
	_, err := loadWithFiles(dir, "name: shop\nsteps:\n  - id: item\n    task: shop.item\n    urls_file: bad.txt\n")
	if want := `shop.yaml:5: step "item": task shop.item takes no ` + "`urls`" + ` param, which urls_file fills; give the URLs to the step that starts the crawl`; err == nil || err.Error() != want {
		t.Errorf("a task without urls: %v", err)
	}
	_, err = crawl.Load("shop.yaml", []byte("name: shop\nsteps:\n  - id: list\n    task: shop.list\n    urls_file: /etc/passwd\n"), crawl.LoadOptions{Registry: urlsRegistry()})
	if want := `shop.yaml:5: step "list": urls_file is read only where the chain is loaded from a file (trawler run, validate, schedule); here, list the URLs under params.urls`; err == nil || err.Error() != want {
		t.Errorf("no files to read: %v", err)
	}
}
