package console

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// demoEdges are examples/demo.yaml's edges, from>to: the feed and the comments consume
// themselves.
var demoEdges = []string{"comments>comments", "feed>feed", "feed>story", "story>comments"}

// graphEdges reads the edges of the chain graph under sel, sorted.
func (b *browser) graphEdges(sel string) []string {
	b.t.Helper()
	var edges []string
	b.run("read the edges", chromedp.Evaluate(`[...document.querySelectorAll(`+"`"+sel+` path.edge`+"`"+`)].map((p) => p.dataset.from + ">" + p.dataset.to).sort()`, &edges))
	return edges
}

// svgText reads an SVG element's text (it has no innerText).
func (b *browser) svgText(sel string) string {
	b.t.Helper()
	var s string
	b.run("read "+sel, chromedp.Evaluate(`(document.querySelector(`+"`"+sel+"`"+`) || {}).textContent || ""`, &s))
	return s
}

func (b *browser) count(sel string) int {
	b.t.Helper()
	var n int
	b.run("count "+sel, chromedp.Evaluate(`document.querySelectorAll(`+"`"+sel+"`"+`).length`, &n))
	return n
}

// waitCount polls until sel matches n elements.
func (b *browser) waitCount(sel string, n int, limit time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var got int
		err := chromedp.Run(b.ctx, chromedp.Evaluate(`document.querySelectorAll(`+"`"+sel+"`"+`).length`, &got))
		if err == nil && got == n {
			return
		}
		if time.Now().After(deadline) {
			b.shot("timeout")
			b.t.Fatalf("waited %s for %d of %s; %d (%v)", limit, n, sel, got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestAPIRunChainAndFleet(t *testing.T) {
	id := demoRun(t)
	status, out := api(t, "GET", "/api/runs/"+url.PathEscape(id)+"/chain", nil)
	if status != http.StatusOK || out["chain"] != "demo" {
		t.Fatalf("run chain: %d %v", status, out)
	}
	var edges []string
	for _, s := range list(out["steps"]) {
		st := obj(s)
		for _, f := range list(st["from"]) {
			edges = append(edges, f.(string)+">"+st["id"].(string))
		}
		if st["id"] == "feed" && st["max_depth"] != 1000.0 {
			t.Errorf("feed step %v, want max_depth 1000", st)
		}
	}
	slices.Sort(edges)
	if !slices.Equal(edges, demoEdges) {
		t.Errorf("run chain edges %v, want %v", edges, demoEdges)
	}
	if status, out := api(t, "GET", "/api/runs/no-such-run/chain", nil); status != http.StatusNotFound {
		t.Errorf("unknown run's chain: %d %v, want 404", status, out)
	}
	status, out = api(t, "GET", "/api/fleet", nil)
	found := false
	for _, w := range list(out["workers"]) {
		w := obj(w)
		if w["identity"] == stack.worker.Identity && w["task_queue"] == taskQueue {
			found = w["stale"] == false && len(list(w["beats"])) > 0
		}
	}
	if status != http.StatusOK || !found {
		t.Errorf("fleet: %d %v, want the test worker with its beats, not stale", status, out)
	}
}

// The editor draws the chain as it is typed: a box per step, an arrow per from, loops
// for the steps that consume themselves; a broken chain leaves the last graph, marked
// stale.
func TestBrowserChainGraph(t *testing.T) {
	b := newBrowser(t)
	b.run("open the chain editor", chromedp.Navigate(stack.console.URL+"/chains?chain=demo"))
	b.waitText("#verdict", "the demo chain to validate", 30*time.Second, func(s string) bool { return strings.HasPrefix(s, "valid: chain demo") })
	b.waitCount("#graph svg g.step", 3, 10*time.Second)
	for _, id := range []string{"feed", "story", "comments"} {
		if n := b.count(`#graph g.step[data-step="` + id + `"]`); n != 1 {
			t.Errorf("%d boxes for step %s, want 1", n, id)
		}
	}
	if got := b.graphEdges("#graph"); !slices.Equal(got, demoEdges) {
		t.Errorf("graph edges %v, want %v", got, demoEdges)
	}
	if n := b.count("#graph path.edge.self"); n != 2 {
		t.Errorf("%d self-loops, want 2 (feed and comments)", n)
	}
	if loop := b.svgText(`#graph text[data-loop="feed"]`); !strings.Contains(loop, "max_depth 1000") {
		t.Errorf("feed's loop reads %q, want its max_depth", loop)
	}
	if store := b.svgText(`#graph g.step[data-step="story"] .step-store`); !strings.Contains(store, "all") {
		t.Errorf("story box stores %q", store)
	}
	b.shot("chain-graph")

	var src string
	b.run("read the source", chromedp.Value("#source", &src, chromedp.ByQuery))
	more := strings.TrimRight(src, "\n") + "\n  - id: more\n    task: demo.story\n    from: feed\n"
	b.run("add a step", chromedp.SetValue("#source", more, chromedp.ByQuery), chromedp.SendKeys("#source", "\n", chromedp.ByQuery))
	b.waitCount("#graph svg g.step", 4, 30*time.Second)
	if got := b.graphEdges("#graph"); !slices.Contains(got, "feed>more") || len(got) != 5 {
		t.Errorf("after adding a step the edges are %v, want feed>more too", got)
	}
	b.shot("chain-graph-added")

	b.run("break the chain", chromedp.SetValue("#source", strings.Replace(more, "task: demo.story", "task: demo.stroy", 1), chromedp.ByQuery),
		chromedp.SendKeys("#source", " ", chromedp.ByQuery))
	b.waitText("#graph-note", "the graph marked stale", 30*time.Second, func(s string) bool { return strings.HasPrefix(s, "Stale") })
	if n := b.count("#graph.stale svg g.step"); n != 4 {
		t.Errorf("a broken chain leaves %d boxes in a stale graph, want the last good 4", n)
	}
	b.shot("chain-graph-stale")
}

// A run's page draws its chain with each step's counts, equal to the run's summary, and
// charts its rates, backlog and failures over time.
func TestBrowserRunPictures(t *testing.T) {
	id := demoRun(t)
	status, out := api(t, "GET", "/api/runs/"+url.PathEscape(id), nil)
	if status != http.StatusOK || out["state"] != "completed" {
		t.Fatalf("run %s: %d %v", id, status, out)
	}
	b := newBrowser(t)
	b.run("open the run", chromedp.Navigate(stack.console.URL+"/runs/"+url.PathEscape(id)),
		chromedp.WaitVisible("#run-graph svg g.step", chromedp.ByQuery), chromedp.WaitVisible("#chart-rates svg", chromedp.ByQuery))
	steps := list(out["steps"])
	if len(steps) != 3 {
		t.Fatalf("run summary steps %v", steps)
	}
	for _, s := range steps {
		st := obj(s)
		box := `#run-graph g.step[data-step="` + st["id"].(string) + `"]`
		for _, k := range []string{"pages", "items", "queued", "in-flight", "failed"} {
			var got string
			var ok bool
			b.run("read "+k, chromedp.AttributeValue(box, "data-"+k, &got, &ok, chromedp.ByQuery))
			if want := fmt.Sprint(st[strings.ReplaceAll(k, "-", "_")]); got != want {
				t.Errorf("step %s box: %s %q, want %s as the summary says", st["id"], k, got, want)
			}
		}
		text := b.svgText(box)
		if want := fmt.Sprintf("pages %v · items %v", st["pages"], st["items"]); !strings.Contains(text, want) {
			t.Errorf("step %s box reads %q, want %q", st["id"], text, want)
		}
	}
	if got := b.graphEdges("#run-graph"); !slices.Equal(got, demoEdges) {
		t.Errorf("run graph edges %v, want %v", got, demoEdges)
	}
	for _, c := range []struct {
		id     string
		legend []string
	}{{"chart-rates", []string{"pages/s", "items/s"}}, {"chart-backlog", []string{"feed", "story", "comments"}}, {"chart-failures", nil}} {
		var samples int
		var legend []string
		b.run("read "+c.id, chromedp.Evaluate(`Number(document.querySelector("#`+c.id+` svg").dataset.samples)`, &samples),
			chromedp.Evaluate(`[...document.querySelectorAll("#`+c.id+` .legend li")].map((li) => li.textContent.trim())`, &legend))
		if samples < 2 {
			t.Errorf("%s: %d samples, want at least 2", c.id, samples)
		}
		if c.legend != nil && !slices.Equal(legend, c.legend) {
			t.Errorf("%s legend %v, want %v", c.id, legend, c.legend)
		}
	}
	if n := b.count("#chart-rates polyline.line"); n != 2 {
		t.Errorf("%d lines in the rates chart, want 2", n)
	}
	var dashed string
	b.run("read the items line's dash", chromedp.Evaluate(`document.querySelector('#chart-rates polyline[data-series="items/s"]').getAttribute("stroke-dasharray") || ""`, &dashed))
	if dashed == "" {
		t.Error("items/s is drawn like pages/s: give it a dash")
	}
	b.shot("run-pictures")
}

// The runs page shows the workers' heartbeats, the test worker among them.
func TestBrowserFleet(t *testing.T) {
	b := newBrowser(t)
	row := `#fleet g.worker[data-queue="` + taskQueue + `"]`
	b.run("open the runs page", chromedp.Navigate(stack.console.URL+"/"), chromedp.WaitVisible(row, chromedp.ByQuery))
	var who, stale string
	var ok bool
	b.run("read the worker", chromedp.AttributeValue(row, "data-worker", &who, &ok, chromedp.ByQuery),
		chromedp.AttributeValue(row, "data-stale", &stale, &ok, chromedp.ByQuery))
	if who != stack.worker.Identity || stale != "false" {
		t.Errorf("fleet row: worker %q stale %s, want %q and not stale", who, stale, stack.worker.Identity)
	}
	if n := b.count(row + " circle.beat"); n < 1 {
		t.Errorf("%d beats drawn for the test worker", n)
	}
	if text := b.svgText(row); !strings.Contains(text, "last beat") {
		t.Errorf("worker row reads %q", text)
	}
	b.shot("fleet")
}

// /api/capacity lists the learned needs of the tasks that ran, with the live workers
// that qualify, and refuses a drain target it cannot use, naming the field.
func TestAPICapacity(t *testing.T) {
	demoRun(t)
	status, out := api(t, "GET", "/api/capacity?drain=5m", nil)
	if status != http.StatusOK || out["drain"] != "5m0s" {
		t.Fatalf("capacity: %d %v", status, out)
	}
	found := false
	for _, tp := range list(out["tasks"]) {
		tp := obj(tp)
		if tp["task"] != "demo.story" {
			continue
		}
		found = true
		// A batch of 16 pages keeps 16 × (CPU ms / ms) cores busy; on a loopback site a
		// page is nearly all CPU, so the test machine's worker qualifies only for a
		// decayed batch.
		cost, need := obj(tp["cost"]), obj(tp["need"])
		share := min(cost["cpu_ms_per_page"].(float64)/cost["ms_per_page"].(float64), 1)
		qualifies := slices.Contains(list(tp["qualifying_workers"]), any(stack.worker.Identity))
		if math.Abs(need["cpu"].(float64)-16*share) > 1e-6 || tp["runnable"] != true || qualifies != (tp["decay_steps"] == 0.0) {
			t.Errorf("demo.story: %v; want a need of 16 × %.2f cores, runnable, decayed exactly when the worker does not qualify", tp, share)
		}
	}
	if !found {
		t.Errorf("capacity: %v; want demo.story's learned needs", out)
	}
	if status, out := api(t, "GET", "/api/capacity?drain=5s", nil); status != http.StatusBadRequest || out["field"] != "drain" {
		t.Errorf("drain=5s: %d %v, want 400 naming drain", status, out)
	}
}
