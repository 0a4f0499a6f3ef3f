package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/sites/demo"
)

// chromium is Debian's browser, which .ci/run installs.
const chromium = "/usr/bin/chromium"

// browser is a headless Chromium on a fresh profile. It records every uncaught
// exception and console.error of the pages it shows; the test fails on any.
type browser struct {
	ctx  context.Context
	t    *testing.T
	dir  string // where screenshots go
	mu   sync.Mutex
	errs []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s is missing: install Debian's chromium package (bash .ci/run does)", chromium)
	}
	// A fresh profile, removed by the test itself: Chromium may still be writing to it
	// when the testing package would remove a t.TempDir.
	profile, err := os.MkdirTemp("", "trawler-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium), chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 900),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 3*time.Minute)
	b := &browser{ctx: ctx, t: t, dir: artifacts(t)}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.record("exception: " + ev.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value))
				}
				b.record("console.error: " + strings.Join(args, " "))
			}
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx)
		cancelTime()
		cancelBrowser()
		cancelAlloc()
		_ = os.RemoveAll(profile)
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errs {
			t.Errorf("page error: %s", e)
		}
	})
	return b
}

func (b *browser) record(msg string) {
	b.mu.Lock()
	b.errs = append(b.errs, msg)
	b.mu.Unlock()
}

// artifacts is the directory screenshots are saved in: $TRAWLER_ARTIFACTS/<test>, or
// the test's temporary directory.
func artifacts(t *testing.T) string {
	dir := t.TempDir()
	if root := os.Getenv("TRAWLER_ARTIFACTS"); root != "" {
		dir = filepath.Join(root, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// run performs actions, failing the test with what was being done.
func (b *browser) run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v", what, err)
	}
}

// click clicks sel. A table that re-renders itself (after the last action, or on its
// refresh) can replace the node between finding and clicking it: then it clicks again,
// on the new node; nothing was clicked the first time.
func (b *browser) click(what, sel string) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		err := chromedp.Run(ctx, chromedp.Click(sel, chromedp.ByQuery))
		cancel()
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "node with given id") || time.Now().After(deadline) {
			b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
			b.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shot saves a full-page screenshot as name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	var png []byte
	if err := chromedp.Run(b.ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Error(err)
		return
	}
	b.t.Logf("screenshot %s", path)
}

// text reads an element's text.
func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.run("read "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

// waitText polls until an element's text satisfies ok.
func (b *browser) waitText(sel, what string, limit time.Duration, ok func(string) bool) string {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var s string
		err := chromedp.Run(b.ctx, chromedp.Text(sel, &s, chromedp.ByQuery, chromedp.NodeVisible))
		if err == nil && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			b.shot("timeout")
			b.t.Fatalf("waited %s for %s; %s reads %q (%v)", limit, what, sel, s, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func TestBrowserStartDemoRunFromEditor(t *testing.T) {
	b := newBrowser(t)
	base := stack.console.URL
	b.run("open the chain editor", chromedp.Navigate(base+"/chains?chain=demo"))
	b.waitText("#verdict", "the demo chain to validate", 30*time.Second, func(s string) bool { return strings.HasPrefix(s, "valid: chain demo") })
	// A typo shows the problem with its line as one types, and blocks the start.
	var src string
	b.run("read the source", chromedp.Value("#source", &src, chromedp.ByQuery))
	b.run("break the chain", chromedp.SetValue("#source", strings.Replace(src, "task: demo.story", "task: demo.stroy", 1), chromedp.ByQuery),
		chromedp.SendKeys("#source", " ", chromedp.ByQuery))
	problem := b.waitText("#problems", "the typo reported", 30*time.Second, func(s string) bool { return strings.Contains(s, "demo.stroy") })
	if !strings.Contains(problem, "line ") || !strings.Contains(problem, `did you mean "demo.story"`) {
		t.Errorf("problem %q, want its line and the fix", problem)
	}
	var disabled bool
	b.run("check start is off", chromedp.Evaluate(`document.querySelector("#start").disabled`, &disabled))
	if !disabled {
		t.Error("start is enabled for a broken chain")
	}
	b.shot("chain-editor-problem")
	b.run("fix the chain", chromedp.SetValue("#source", src, chromedp.ByQuery), chromedp.SendKeys("#source", "\n", chromedp.ByQuery),
		chromedp.SendKeys("#sets", "base_url="+stack.site+"\nfeed.pages=1", chromedp.ByQuery))
	b.waitText("#verdict", "the fixed chain to validate", 30*time.Second, func(s string) bool { return strings.HasPrefix(s, "valid: chain demo") })
	b.shot("chain-editor")
	b.run("start the run", chromedp.WaitEnabled("#start", chromedp.ByQuery), chromedp.Click("#start", chromedp.ByQuery),
		chromedp.WaitVisible("#run", chromedp.ByQuery))
	var loc string
	b.run("read the location", chromedp.Location(&loc))
	if !strings.Contains(loc, "/runs/demo-") {
		t.Fatalf("after start the browser is at %s, want a run page", loc)
	}
	runID, _ := url.PathUnescape(loc[strings.Index(loc, "/runs/")+len("/runs/"):])
	b.waitText("#state", "the run to complete", 2*time.Minute, func(s string) bool {
		if s == "failed" || s == "canceled" {
			t.Fatalf("run %s ended %s", runID, s)
		}
		return s == "completed"
	})
	stories, comments := demosite.Expected(stack.siteOpt, 1)
	steps := b.waitText("#steps tbody", "the final counts", 10*time.Second, func(s string) bool { return strings.Contains(s, "story") })
	for _, want := range []string{fmt.Sprintf("story\tdemo.story\t%d\t%d", stories, stories), fmt.Sprintf("\t%d\t", comments)} {
		if !strings.Contains(steps, want) {
			t.Errorf("steps table %q lacks %q", steps, want)
		}
	}
	var href string
	var ok bool
	b.run("read the Temporal link", chromedp.AttributeValue("#temporal-link", "href", &href, &ok, chromedp.ByQuery))
	if want := temporalUI + "/namespaces/default/workflows/" + runID; href != want {
		t.Errorf("Temporal UI link %q, want %q", href, want)
	}
	b.shot("run")
	b.run("open the dashboard", chromedp.Navigate(base+"/"), chromedp.WaitVisible(`#runs tbody tr[data-run="`+runID+`"]`, chromedp.ByQuery))
	row := b.waitText(`#runs tbody tr[data-run="`+runID+`"]`, "the run's row with counts", 10*time.Second, func(s string) bool { return strings.Contains(s, "completed") })
	if !strings.Contains(row, fmt.Sprint(stories+comments)) {
		t.Errorf("dashboard row %q lacks the %d items", row, stories+comments)
	}
	b.shot("dashboard")
}

// The editor and the schedule form suggest the demo site's base_url as a placeholder
// only: a user's own chain runs with the overrides typed, none here.
func TestBrowserSendsOnlyTypedOverrides(t *testing.T) {
	b := newBrowser(t)
	own := "name: mine\nsteps:\n  - id: feed\n    task: demo.feed\n    from: feed\n    max_depth: 10\n" +
		"    params: {pages: 1, base_url: \"" + stack.site + "/\"}\n"
	// Record the body of every run the page starts, where the run page it opens next can
	// read it; the requests still go out.
	const record = `const f = window.fetch;
		window.fetch = (u, o) => { if (String(u).endsWith("/api/runs")) sessionStorage.setItem("run", o.body); return f(u, o); }; true`
	var placeholder, typed string
	var ok bool
	b.run("open the chain editor", chromedp.Navigate(stack.console.URL+"/chains"),
		chromedp.WaitReady("#registered option[value=demo]", chromedp.ByQuery), chromedp.Evaluate(record, &ok))
	b.run("read the overrides", chromedp.Value("#sets", &typed, chromedp.ByQuery),
		chromedp.AttributeValue("#sets", "placeholder", &placeholder, &ok, chromedp.ByQuery))
	if typed != "" || placeholder != "e.g. base_url="+stack.site {
		t.Errorf("overrides start as %q with placeholder %q; want empty, suggesting base_url=%s", typed, placeholder, stack.site)
	}
	b.run("type an own chain", chromedp.SetValue("#source", own, chromedp.ByQuery), chromedp.SendKeys("#source", "\n", chromedp.ByQuery))
	b.waitText("#verdict", "the own chain to validate", 30*time.Second, func(s string) bool { return strings.HasPrefix(s, "valid: chain mine") })
	var body string
	b.run("start the run", chromedp.WaitEnabled("#start", chromedp.ByQuery), chromedp.Click("#start", chromedp.ByQuery),
		chromedp.WaitVisible("#run", chromedp.ByQuery), chromedp.Evaluate(`sessionStorage.getItem("run")`, &body))
	var sent struct {
		Source string
		Sets   []string
	}
	if err := json.Unmarshal([]byte(body), &sent); err != nil || strings.TrimSpace(sent.Source) != strings.TrimSpace(own) || len(sent.Sets) != 0 {
		t.Errorf("the run was started with %s (%v); want the own chain and no overrides", body, err)
	}
	if state := b.waitText("#state", "the run to end", 2*time.Minute, func(s string) bool { return s == "completed" || s == "failed" }); state != "completed" {
		t.Errorf("the own chain's run %s", state)
	}
	b.run("open the schedules page", chromedp.Navigate(stack.console.URL+"/schedules"),
		chromedp.WaitReady("#s-chain option", chromedp.ByQuery))
	b.waitText("#s-chain", "the chains listed", 10*time.Second, func(string) bool { return true })
	b.run("read the schedule's overrides", chromedp.Value("#s-sets", &typed, chromedp.ByQuery),
		chromedp.AttributeValue("#s-sets", "placeholder", &placeholder, &ok, chromedp.ByQuery))
	if typed != "" || placeholder != "overrides, e.g. base_url="+stack.site {
		t.Errorf("schedule overrides start as %q with placeholder %q; want empty, suggesting base_url=%s", typed, placeholder, stack.site)
	}
}

func TestBrowserSearchOpensRecord(t *testing.T) {
	demoRun(t)
	b := newBrowser(t)
	story, _ := stack.siteOpt.Story(3)
	key := demo.StoryKey(3)
	b.run("search a phrase", chromedp.Navigate(stack.console.URL+"/search"),
		chromedp.WaitVisible("#q", chromedp.ByQuery),
		chromedp.SendKeys("#q", `"`+story.Title+`"`+kb.Enter, chromedp.ByQuery))
	sel := `#results tbody tr[data-key="` + key + `"] a`
	b.run("find the story", chromedp.WaitVisible(sel, chromedp.ByQuery))
	facets := b.text("#facets")
	if !strings.Contains(facets, "biz") || !strings.Contains(facets, "demo.story") {
		t.Errorf("facets %q, want biz with demo.story", facets)
	}
	b.shot("search")
	b.run("open the record", chromedp.Click(sel, chromedp.ByQuery), chromedp.WaitVisible("#fields tbody tr", chromedp.ByQuery))
	fields := b.waitText("#fields", "the record's fields", 10*time.Second, func(s string) bool { return strings.Contains(s, "data.title") })
	if !strings.Contains(fields, story.Title) || !strings.Contains(fields, key) {
		t.Errorf("record page %q lacks the title and key", fields)
	}
	b.shot("record")
}

func TestBrowserHistoryTimeline(t *testing.T) {
	key := twoVersions(t)
	b := newBrowser(t)
	b.run("open the record", chromedp.Navigate(stack.console.URL+"/items/demo.story/"+url.PathEscape(key)+"?tenant="+historyTenant),
		chromedp.WaitVisible("#timeline svg", chromedp.ByQuery))
	var versions, changed int
	var label string
	b.run("read the timeline",
		chromedp.Evaluate(`document.querySelectorAll("#versions tbody tr").length`, &versions),
		chromedp.Evaluate(`document.querySelectorAll("#timeline circle.changed").length`, &changed),
		chromedp.Evaluate(`document.querySelector("#timeline circle.changed").getAttribute("data-field")`, &label))
	if versions != 2 || changed != 1 || label != "score" {
		t.Errorf("timeline: %d versions, %d changed dots (%q), want 2 versions and one changed score", versions, changed, label)
	}
	b.shot("record-history")
}

func TestBrowserPages(t *testing.T) {
	demoRun(t)
	b := newBrowser(t)
	base := stack.console.URL
	pages := []struct{ name, path, ready string }{
		{"schedules", "/schedules", "#s-chain option"},
		{"items", "/items?biz=demo.story", "#items tbody tr"},
		{"pools", "/pools", "#health tbody tr"},
	}
	for _, p := range pages {
		b.run("open "+p.name, chromedp.Navigate(base+p.path), chromedp.WaitReady(p.ready, chromedp.ByQuery))
		b.shot(p.name)
	}
	if h := b.text("#health"); !strings.Contains(h, "hbase") || strings.Contains(h, "down") {
		t.Errorf("stores table %q, want every store up", h)
	}
}

// The error check itself: a console.error and an uncaught exception are both caught.
func TestBrowserCatchesPageErrors(t *testing.T) {
	b := newBrowser(t)
	b.run("open the dashboard", chromedp.Navigate(stack.console.URL+"/"), chromedp.WaitReady("#runs", chromedp.ByQuery),
		chromedp.Evaluate(`console.error("boom"); setTimeout(() => { throw new Error("bang") }, 0); 1`, nil))
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		got := strings.Join(b.errs, "\n")
		b.mu.Unlock()
		if strings.Contains(got, `console.error: "boom"`) && strings.Contains(got, "bang") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recorded %q, want the console.error and the exception", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.mu.Lock()
	b.errs = nil // expected here
	b.mu.Unlock()
}

// The schedules page creates a schedule with its settings, lists what the API lists, and
// runs, pauses and deletes it.
func TestBrowserSchedules(t *testing.T) {
	b := newBrowser(t)
	defer api(t, "DELETE", "/api/schedules/browser-sched", nil)
	row := `tr[data-schedule="browser-sched"]`
	b.run("open the schedules page", chromedp.Navigate(stack.console.URL+"/schedules"),
		chromedp.WaitReady("#s-chain option", chromedp.ByQuery), chromedp.WaitReady("#s-overlap option", chromedp.ByQuery))
	b.run("create a schedule that never fires",
		chromedp.SetValue("#s-id", "browser-sched", chromedp.ByQuery), chromedp.SetValue("#s-cron", "0 0 31 2 *", chromedp.ByQuery),
		chromedp.Click(`#new-schedule button[type="submit"]`, chromedp.ByQuery))
	b.waitText("#flash", "the cron refused", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "never fires: day-of-month 31 does not exist in February")
	})
	b.run("create the schedule",
		chromedp.SetValue("#s-cron", "15 3 * * *", chromedp.ByQuery), chromedp.SetValue("#s-tz", "Europe/Berlin", chromedp.ByQuery),
		chromedp.SetValue("#s-overlap", "buffer-all", chromedp.ByQuery),
		chromedp.SetValue("#s-catchup", "30m", chromedp.ByQuery), chromedp.SetValue("#s-jitter", "1m", chromedp.ByQuery),
		chromedp.Click("#s-pause-on-failure", chromedp.ByQuery),
		chromedp.SetValue("#s-sets", "base_url="+stack.site+", feed.pages=1", chromedp.ByQuery),
		chromedp.Click(`#new-schedule button[type="submit"]`, chromedp.ByQuery))
	listed := b.waitText(row, "the new schedule listed", 30*time.Second, func(s string) bool { return strings.Contains(s, "15 3 * * *") })
	for _, want := range []string{"demo", "examples/demo.yaml", "Europe/Berlin", "active", "never", "buffer-all", "catch-up 30m", "jitter 1m", "pauses on failure"} {
		if !strings.Contains(listed, want) {
			t.Errorf("row %q lacks %q", listed, want)
		}
	}
	b.click("run it now", row+` button[data-action="run-now"]`)
	b.waitText("#flash", "the run started", 30*time.Second, func(s string) bool { return strings.Contains(s, "started run browser-sched-") })
	last := b.waitText(row+" td.last", "the run as the last", 30*time.Second, func(s string) bool { return strings.Contains(s, "browser-sched-") })
	if !strings.Contains(last, "running") && !strings.Contains(last, "completed") {
		t.Errorf("last run %q, want its state", last)
	}
	b.shot("schedules-run")
	b.click("pause it", row+` button[data-action="pause"]`)
	b.waitText(row+" td.paused", "the schedule paused", 30*time.Second, func(s string) bool { return strings.HasPrefix(s, "paused") })
	b.waitText(row+" td.next", "a paused schedule's next run to read —", 30*time.Second, func(s string) bool { return s == "—" })
	b.click("run the paused schedule", row+` button[data-action="run-now"]`)
	b.waitText("#flash", "the trigger refused", 30*time.Second, func(s string) bool { return strings.Contains(s, "schedule browser-sched is paused; resume it first") })
	demoYAML, err := examples.Files.ReadFile("demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Read as the table refreshes itself: a node read mid-refresh is gone, so wait for it.
	b.waitText(row+" td.chain .version", "the chain version of examples/demo.yaml", 30*time.Second, func(s string) bool {
		return s == "version "+engine.ChainVersion(demoYAML)
	})
	b.click("update its chain", row+` button[data-action="update-chain"]`)
	b.waitText("#flash", "the chain updated", 30*time.Second, func(s string) bool {
		return strings.Contains(s, "schedule browser-sched now runs examples/demo.yaml version "+engine.ChainVersion(demoYAML))
	})
	b.click("delete it", row+` button[data-action="delete"]`)
	b.waitText("#flash", "the schedule deleted", 30*time.Second, func(s string) bool { return strings.Contains(s, "browser-sched deleted") })
}
