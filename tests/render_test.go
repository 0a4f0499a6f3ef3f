package tests

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch/render"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
)

// renderWorkers starts two workers on their own task queue, as a fleet where only some
// machines have a browser: one with a pool of headless Chromium, one without.
func renderWorkers(t *testing.T, queue string) *engine.Worker {
	t.Helper()
	return renderWorkersWith(t, queue, engine.WorkerOptions{OutDir: shared.dir + "/out"})
}

// renderWorkersWith is renderWorkers storing into base.OutDir and logging to base.Log.
func renderWorkersWith(t *testing.T, queue string, base engine.WorkerOptions) *engine.Worker {
	t.Helper()
	if _, err := os.Stat(render.DefaultBrowser); err != nil {
		t.Fatalf("%s is missing: install Debian's chromium package (bash .ci/run does)", render.DefaultBrowser)
	}
	t.Cleanup(func() {
		// The workers have stopped (cleanups run last first): no browser process is left.
		if left := browsersOf(os.Getpid()); len(left) > 0 {
			t.Errorf("browser processes left after the worker stopped: %+v", left)
		}
	})
	var browser *engine.Worker
	for _, o := range []engine.WorkerOptions{
		{Identity: queue + "-browser", Browser: &render.Options{Browsers: 1, Tabs: 3}},
		{Identity: queue + "-plain"},
	} {
		o.TaskQueue, o.OutDir, o.Log, o.Redis = queue, base.OutDir, base.Log, shared.redis.Addr()
		if w := testWorker(t, o); o.Browser != nil {
			browser = w
		}
	}
	return browser
}

// browsersOf lists the live browser processes a worker process started.
func browsersOf(pid int) []render.Process {
	var out []render.Process
	for _, p := range render.Processes() {
		if p.Owner == pid {
			out = append(out, p)
		}
	}
	return out
}

// rendered counts a task's pages read in a browser and read plain so far.
func rendered(task string) (browser, plain int) {
	counts := map[string]int{}
	mfs, _ := prometheus.DefaultGatherer.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "trawler_render_pages_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["task"] == task {
				counts[labels["how"]] = int(m.GetCounter().GetValue())
			}
		}
	}
	return counts["rendered"], counts["plain"]
}

// assertStories checks that a run stored exactly the site's stories from their
// rendered pages under biz, each field as the site's data says.
func assertStories(t *testing.T, id, biz string, o demosite.Options) {
	t.Helper()
	got := items(t, id)[biz]
	if len(got) != o.Stories() {
		t.Fatalf("stored %d stories, want %d: %v", len(got), o.Stories(), sortedKeysOf(got))
	}
	for _, it := range got {
		n, _ := it.Data["id"].(float64)
		st, ok := o.Story(int(n))
		if !ok {
			t.Errorf("stored story %v the site does not have", it.Data["id"])
			continue
		}
		if it.Data["title"] != st.Title || it.Data["author"] != st.Author || it.Data["score"] != float64(st.Score) {
			t.Errorf("story %d stored as %v; the site says %q by %s, %d points", st.ID, it.Data, st.Title, st.Author, st.Score)
		}
	}
}

// A list and story pages built by JavaScript are stored exactly, every batch runs on
// the worker with a browser although a worker without one polls the same queue, and
// each page is rendered once.
func TestRenderedListAndDetailsStoredExactly(t *testing.T) {
	renderWorkers(t, "render-js")
	o := demosite.Options{Pages: 2, PerPage: 4}
	site := startSite(t, o)
	listBefore, _ := rendered("generic.html_list")
	storyBefore, storyPlainBefore := rendered("generic.html_detail")
	id := start(t, plan(t, "render.yaml", "", "base_url="+site), "render-js")
	s := wait(t, id, 2*time.Minute)
	noFailures(t, s)
	assertStories(t, id, "render.story", o)
	list, _ := rendered("generic.html_list")
	story, storyPlain := rendered("generic.html_detail")
	if list-listBefore != o.Pages || story-storyBefore != o.Stories() || storyPlain != storyPlainBefore {
		t.Errorf("rendered %d list pages and %d stories (%d plain); want %d, %d and 0", list-listBefore, story-storyBefore, storyPlain-storyPlainBefore, o.Pages, o.Stories())
	}
	for who := range workersIn(t, id) {
		if who != "render-js-browser" {
			t.Errorf("a batch ran on %s, a worker without a browser", who)
		}
	}
}

// On a site where only some pages are built by script, `auto` renders those and reads
// the others plain.
func TestAutoRendersOnlyTheJSPages(t *testing.T) {
	renderWorkers(t, "render-mixed")
	o := demosite.Options{Pages: 2, PerPage: 5}
	site := startSite(t, o)
	listBefore, listPlainBefore := rendered("generic.html_list")
	before, plainBefore := rendered("generic.html_detail")
	id := start(t, plan(t, "render.yaml", "", "base_url="+site, "list.urls=/mixed/news?p=1"), "render-mixed")
	s := wait(t, id, 2*time.Minute)
	noFailures(t, s)
	assertStories(t, id, "render.story", o)
	js := 0
	for n := 1; n <= o.Stories(); n++ {
		if demosite.JSStory(n) {
			js++
		}
	}
	list, listPlain := rendered("generic.html_list")
	story, plain := rendered("generic.html_detail")
	t.Logf("stories: %d rendered, %d plain; list pages: %d rendered, %d plain", story-before, plain-plainBefore, list-listBefore, listPlain-listPlainBefore)
	if story-before != js || plain-plainBefore != o.Stories()-js || list != listBefore || listPlain-listPlainBefore != o.Pages {
		t.Errorf("rendered %d stories and read %d plain, list pages %d rendered %d plain; want %d, %d, 0, %d",
			story-before, plain-plainBefore, list-listBefore, listPlain-listPlainBefore, js, o.Stories()-js, o.Pages)
	}
}

// A page whose script never ends hangs its tab: the browser is killed and replaced,
// the page is retried and stored, and no process of the killed browser is left.
func TestHungPageIsKilledAndRetried(t *testing.T) {
	w := renderWorkers(t, "render-hang")
	o := demosite.Options{Pages: 1, PerPage: 4, Faults: map[int]demosite.Fault{3: demosite.FaultScriptHang}}
	site := startSite(t, o)
	yaml := `name: render-hang
steps:
  - id: list
    task: generic.html_list
    render: {mode: always, wait_for: tr.athing, timeout: 5s}
    params: {urls: ['` + site + `/js/news?p=1'], items: tr.athing, fields: {link: {css: span.titleline > a, attr: href, type: url}}, detail: link}
  - id: story
    task: generic.html_detail
    from: list
    retries: 2
    render: {mode: always, wait_for: article.story, timeout: 3s}
    params:
      fields:
        id: {css: article.story, attr: data-id, type: int, required: true}
        title: {css: h1.title, required: true}
        author: .meta .author
        score: {css: .meta .score, type: int, regex: '(\d+) points?'}
`
	id := start(t, plan(t, "render-hang.yaml", yaml), "render-hang")
	s := wait(t, id, 2*time.Minute)
	noFailures(t, s)
	assertStories(t, id, "render_hang.story", o)
	if st := w.Browsers().Stats(); st.Hung != 1 {
		t.Errorf("pool stats %+v: want exactly one browser killed for a hang", st)
	}
	groups := map[int]bool{}
	for _, p := range browsersOf(os.Getpid()) {
		groups[p.PGID] = true
	}
	if len(groups) > 1 {
		t.Errorf("%d browser process groups alive; the pool has 1 browser (the hung one was left behind?)", len(groups))
	}
}

// A worker SIGKILLed while it renders leaves no Chromium behind once its successor
// has finished the run, and the run stores every story exactly once.
func TestKilledRenderingWorkerLeavesNoOrphan(t *testing.T) {
	bin := buildTrawler(t)
	o := demosite.Options{Pages: 2, PerPage: 8, Latency: 150 * time.Millisecond}
	site := startSite(t, o)
	const queue = "render-kill"
	out := filepath.Join(shared.dir, "render-kill-out")
	browserFlags := []string{"--browsers", "1", "--tabs", "2"}
	first := workerProcess(t, bin, queue, out, browserFlags...)
	id := start(t, plan(t, "render.yaml", "", "base_url="+site), queue)
	eventually(t, time.Minute, "the worker starting a browser", func() bool { return len(browsersOf(first.Process.Pid)) > 0 })
	waitPages(t, id, 3)
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	second := workerProcess(t, bin, queue, out, browserFlags...)
	s := wait(t, id, 3*time.Minute)
	noFailures(t, s)
	// The successor finishes: it stops as a worker does, its pool closing.
	if err := second.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = second.Wait()
	for _, w := range []*exec.Cmd{first, second} {
		// A process being killed is gone in a moment.
		poll(5*time.Second, func() bool { return len(browsersOf(w.Process.Pid)) == 0 })
		if left := browsersOf(w.Process.Pid); len(left) > 0 {
			t.Errorf("browser processes of worker %d outlived it: %+v", w.Process.Pid, left)
		}
	}
	js, err := jsonl.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	keys := runRecords(t, js, id)
	assertOnce(t, keys)
	if n := countPrefix(keys, site+"/js/item/"); n != o.Stories() {
		t.Errorf("stored %d stories, want %d", n, o.Stories())
	}
}

// A fleet without a browser never takes a rendering step's batches, and the run's
// status says why they wait.
func TestStatusSaysRenderBatchesWaitForABrowser(t *testing.T) {
	testWorker(t, engine.WorkerOptions{TaskQueue: "render-none", Identity: "render-none-plain"})
	site := startSite(t, demosite.Options{Pages: 1, PerPage: 2})
	id := start(t, plan(t, "render.yaml", "", "base_url="+site), "render-none")
	defer func() { _ = shared.client.TerminateWorkflow(context.Background(), id, "", "test over") }()
	var st *engine.Status
	if !poll(time.Minute, func() bool {
		var err error
		if st, err = engine.Describe(context.Background(), shared.client, id); err != nil {
			t.Fatal(err)
		}
		return len(st.Waiting) > 0
	}) {
		t.Fatalf("status never said why the batches wait: %+v", st)
	}
	want := "for a worker with a browser: step list renders pages, and no worker polls the render queue (<task queue>@render); start one with `trawler worker --browser PATH`"
	if !strings.Contains(st.Waiting[0], want) {
		t.Fatalf("status says %q; want %q", st.Waiting, want)
	}
	if pages, _, _, _ := st.Progress.Totals(); pages != 0 {
		t.Errorf("%d pages done by a fleet without a browser", pages)
	}
}

// Browser actions through the whole system: the actions travel in the plan to the
// worker with a browser; on the half of the pages that show a consent wall it is
// clicked away (the optional click finds nothing on the others), "load more" is clicked
// until it is gone and every item of every page shows; and a page where an action
// finds nothing fails alone with cause action, naming the action and its selector.
func TestRenderActionsStoreEveryItem(t *testing.T) {
	renderWorkers(t, "render-actions")
	site := startSite(t, demosite.Options{})
	yaml := `name: render-actions
steps:
  - id: list
    task: generic.html_list
    retries: 0
    render:
      mode: always
      timeout: 15s
      actions:
        - click: "#consent .accept"
          optional: true
          timeout: 500ms
        - repeat:
            do: [{click: button.more, timeout: 2s}]
            until: {gone: button.more}
            max: 10
    params:
      base_url: ` + site + `
      urls: ['/js/more?total=35&per=10&consent=1', '/js/more?total=35&per=10&first=100', '/js/more?total=35&per=10&first=200&consent=1', '/js/more?total=35&per=10&first=300', /js/search]
      items: div.item
      key: {type: string}
      fields:
        title: {type: string, required: true}
`
	id := start(t, plan(t, "render-actions.yaml", yaml), "render-actions")
	s := wait(t, id, 2*time.Minute)
	got := items(t, id)["render_actions.list"]
	titles := map[string]int{}
	for _, it := range got {
		titles[it.Data["title"].(string)]++
	}
	for _, first := range []int{0, 100, 200, 300} {
		for n := first + 1; n <= first+35; n++ {
			if c := titles[fmt.Sprintf("Item %d", n)]; c != 1 {
				t.Errorf("Item %d stored %d times; want once", n, c)
			}
		}
	}
	if len(got) != 4*35 {
		t.Errorf("stored %d items; want 140, Item 1-35, 101-135, 201-235 and 301-335", len(got))
	}
	want := site + `/js/search: render ` + site + `/js/search: render.actions[1].repeat.do[0] click "button.more": nothing matches "button.more" within 2s (the action's timeout)`
	if len(s.Failures) != 1 || s.Failures[0].Class != crawl.CauseAction || s.Failures[0].Cause != want {
		t.Errorf("failures %+v; want one, cause action: %s", s.Failures, want)
	}
}

// An infinite list of 120 items that loads 20 each time the window reaches its bottom:
// scrolled until a round changes nothing, every item is stored; a loop bounded at 3
// rounds stores exactly the 80 it had shown by then (the first 20, and 20 a round), and
// the worker notes that the loop stopped on max.
func TestRenderInfiniteScrollStoresEveryItem(t *testing.T) {
	var logs syncBuffer
	renderWorkersWith(t, "render-scroll", engine.WorkerOptions{OutDir: shared.dir + "/out", Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	site := startSite(t, demosite.Options{})
	step := func(id string, max int) string {
		return fmt.Sprintf(`  - id: %s
    task: generic.html_list
    retries: 0
    timeout: 45s
    render:
      mode: always
      timeout: 30s
      actions:
        - repeat:
            do: [scroll: bottom]
            until: {no_change: true}
            max: %d
    params:
      base_url: %s
      urls: ['/js/scroll?total=120&per=20']
      items: div.item
      key: {type: string}
      fields:
        title: {type: string, required: true}
`, id, max, site)
	}
	yaml := "name: render-scroll\nsteps:\n" + step("all", 20) + step("three", 3)
	id := start(t, plan(t, "render-scroll.yaml", yaml), "render-scroll")
	s := wait(t, id, 2*time.Minute)
	got := items(t, id)
	for step, want := range map[string]int{"render_scroll.all": 120, "render_scroll.three": 80} {
		titles := map[string]bool{}
		for _, it := range got[step] {
			titles[it.Data["title"].(string)] = true
		}
		if len(got[step]) != want || len(titles) != want || !titles[fmt.Sprintf("Item %d", want)] {
			t.Errorf("%s stored %d items (%d titles); want Item 1 to Item %d", step, len(got[step]), len(titles), want)
		}
	}
	if len(s.Failures) != 0 {
		t.Errorf("failures: %+v", s.Failures)
	}
	var notes []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "a repeat stopped on max") {
			notes = append(notes, line)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], `"step":"three"`) || !strings.Contains(notes[0], `"note":"stopped on max: 3 rounds ran and until never held"`) {
		t.Errorf("worker notes of loops stopped on max: %q; want one, of step three", notes)
	}
}
