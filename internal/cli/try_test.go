package cli

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/endpoints"
)

// captureStdout runs fn and returns what it printed on standard output.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() { os.Stdout = saved }()
	fn()
	w.Close()
	os.Stdout = saved
	return <-done
}

// The example headers' `trawler try … http://127.0.0.1:8089/… --data DIR` works without
// --allow-private: the stack's endpoints.json names its demo site, and that one address
// is allowed. Any other loopback address stays refused.
func TestTryAllowsTheStacksDemoSite(t *testing.T) {
	t.Setenv("TRAWLER_ALLOW_PRIVATE", "")
	t.Setenv("TRAWLER_DATA", "")
	site, stop, err := demosite.Start("127.0.0.1:0", demosite.Options{Pages: 2, PerPage: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	other, stopOther, err := demosite.Start("127.0.0.1:0", demosite.Options{Pages: 2, PerPage: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer stopOther()
	data := t.TempDir()
	if err := endpoints.Write(data, endpoints.Endpoints{Temporal: "127.0.0.1:1", Namespace: "default", DemoSite: site}); err != nil {
		t.Fatal(err)
	}
	try := func(args ...string) (map[string]any, error) {
		var err error
		out := captureStdout(t, func() {
			err = runCLI(t, append([]string{"try", "generic.html_detail", "--set", "fields.title=h1.title", "--json"}, args...)...)
		})
		var res map[string]any
		if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &res); jerr != nil {
			t.Fatalf("try %v printed %q: %v", args, out, jerr)
		}
		return res, err
	}
	story, _ := demosite.Options{Pages: 2, PerPage: 5}.Story(3)
	res, err := try(site+"/item/3", "--data", data)
	if err != nil {
		t.Fatalf("the stack's demo site with --data: %v %v", err, res)
	}
	items, _ := res["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["data"].(map[string]any)["title"] != story.Title {
		t.Fatalf("items %v, want one with title %q", res["items"], story.Title)
	}
	res, err = try(other+"/item/3", "--data", data)
	if err == nil || !strings.Contains(res["error"].(string), "address 127.0.0.1 is loopback: this worker refuses private and loopback addresses") {
		t.Fatalf("another loopback site: %v %v, want refused", err, res)
	}
	// TRAWLER_DATA names the stack as --data does.
	t.Setenv("TRAWLER_DATA", data)
	if res, err := try(site + "/item/3"); err != nil {
		t.Fatalf("the stack's demo site with TRAWLER_DATA: %v %v", err, res)
	}
	t.Setenv("TRAWLER_DATA", "")
	// Without --data nothing names the site: refused as before.
	if _, err := try(site + "/item/3"); err == nil {
		t.Fatal("fetched a loopback address without --data or --allow-private")
	}
}

// dev, demo and bench, which use the data directory before resolving the other
// settings, find TRAWLER_DATA; --data wins over it.
func TestDataDirFromEnvironment(t *testing.T) {
	t.Setenv("TRAWLER_DATA", "/srv/trawler")
	if got := (&Settings{}).DataDir(".data/dev"); got != "/srv/trawler" {
		t.Fatalf("dataDir with TRAWLER_DATA = %q, want /srv/trawler", got)
	}
	if got := (&Settings{Data: "mine"}).DataDir(".data/dev"); got != "mine" {
		t.Fatalf("dataDir with --data mine = %q", got)
	}
	t.Setenv("TRAWLER_DATA", "")
	if got := (&Settings{}).DataDir(".data/dev"); got != ".data/dev" {
		t.Fatalf("dataDir without either = %q, want the default", got)
	}
}

// `trawler try --render` with a chain file runs the step's render.actions, printing each
// action's outcome and time, and with --screenshot DIR keeps a picture after each.
func TestTryRenderRunsTheActions(t *testing.T) {
	site, stop, err := demosite.Start("127.0.0.1:0", demosite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	chain := filepath.Join(t.TempDir(), "more.yaml")
	if err := os.WriteFile(chain, []byte(`name: more
steps:
  - id: list
    task: generic.html_list
    render:
      mode: always
      timeout: 20s
      actions:
        - click: "#consent .accept"
          optional: true
          timeout: 300ms
        - repeat:
            do: [click: button.more]
            until: {count: .item, at_least: 35}
            max: 10
    params:
      base_url: `+site+`
      urls: [/js/more]
      items: div.item
      fields:
        title: {type: string}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	shots := t.TempDir()
	out := captureStdout(t, func() {
		err = runCLI(t, "try", "generic.html_list", "--params", chain, site+"/js/more?total=35&per=10", "--render", "--allow-private", "--screenshot", shots)
	})
	if err != nil {
		t.Fatalf("try: %v\n%s", err, out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^render\.actions\[0\] +click "#consent \.accept" +\d+ms +skipped: nothing matches \(optional\)$`),
		regexp.MustCompile(`(?m)^render\.actions\[1\]\.repeat\.do\[0\] +click "button\.more" +[\d.]+m?s +ok$`),
		regexp.MustCompile(`(?m)^render\.actions\[1\] +repeat +[\d.]+m?s +until held after 3 rounds$`),
		regexp.MustCompile(`(?m)^generic\.html_list .*: 35 items,`),
	} {
		if !want.MatchString(out) {
			t.Errorf("missing %s in:\n%s", want, out)
		}
	}
	// One picture per action: the consent click, three clicks, the loop.
	pngs, _ := filepath.Glob(filepath.Join(shots, "*.png"))
	if len(pngs) != 5 {
		t.Errorf("%d screenshots in %s, want 5: %v", len(pngs), shots, pngs)
	}
}
