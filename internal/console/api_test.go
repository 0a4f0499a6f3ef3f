package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/external"
	"github.com/trawlerhq/trawler/internal/recrawl"
	"github.com/trawlerhq/trawler/internal/sites/demo"
)

func TestHistory(t *testing.T) {
	key := twoVersions(t)
	status, out := api(t, "GET", "/api/history/demo.story/"+url.PathEscape(key)+"?tenant="+historyTenant, nil)
	if status != http.StatusOK || out["tenant"] != historyTenant {
		t.Fatalf("history: %d %v", status, out)
	}
	versions := list(out["versions"])
	if len(versions) != 2 {
		t.Fatalf("%d versions, want 2: %v", len(versions), out)
	}
	newer, older := obj(versions[0]), obj(versions[1])
	story, _ := stack.siteOpt.Story(historyStory)
	if obj(older["fields"])["score"].(float64) != float64(story.Score) || obj(newer["fields"])["score"].(float64) != float64(story.Score+1) {
		t.Errorf("scores %v then %v, want %d then %d", obj(older["fields"])["score"], obj(newer["fields"])["score"], story.Score, story.Score+1)
	}
	if toJSON(newer["changed"]) != `["score"]` {
		t.Errorf("changed %v, want [score]", newer["changed"])
	}
	// History is per tenant: another tenant's crawls of the story are not among its
	// versions, and a tenant that never stored it has none.
	if status, out := api(t, "GET", "/api/history/demo.story/"+url.PathEscape(key)+"?tenant=nobody", nil); status != http.StatusNotFound {
		t.Errorf("tenant nobody: %d %v, want no history", status, out)
	}
	// Story 3 did not change: one version.
	if _, out := api(t, "GET", "/api/history/demo.story/"+url.PathEscape(demo.StoryKey(3))+"?tenant="+historyTenant, nil); len(list(out["versions"])) != 1 {
		t.Errorf("story 3: %v, want one version", out)
	}
	status, out = api(t, "GET", "/api/history/demo.story/nope", nil)
	if status != http.StatusNotFound || out["field"] != "key" {
		t.Errorf("unknown record: %d %v", status, out)
	}
}

func list(v any) []any { l, _ := v.([]any); return l }
func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func TestRunStartedFromAPICompletesWithDetail(t *testing.T) {
	id := demoRun(t)
	status, run := api(t, "GET", "/api/runs/"+id, nil)
	if status != http.StatusOK {
		t.Fatalf("detail: %d %v", status, run)
	}
	if run["state"] != "completed" || run["chain"] != "demo" || run["outcome"] != "completed" {
		t.Fatalf("state %v chain %v outcome %v, want completed demo completed", run["state"], run["chain"], run["outcome"])
	}
	stories, comments := demosite.Expected(stack.siteOpt, 1)
	want := map[string][2]int{"feed": {1, 0}, "story": {stories, stories}, "comments": {-1, comments}}
	for _, s := range list(run["steps"]) {
		st := obj(s)
		w := want[st["id"].(string)]
		if w[0] >= 0 && int(st["pages"].(float64)) != w[0] {
			t.Errorf("step %v pages %v, want %d", st["id"], st["pages"], w[0])
		}
		if int(st["items"].(float64)) != w[1] {
			t.Errorf("step %v items %v, want %d", st["id"], st["items"], w[1])
		}
		if st["failed"].(float64) != 0 || st["unchanged"].(float64) != 0 {
			t.Errorf("step %v failed %v unchanged %v, want 0", st["id"], st["failed"], st["unchanged"])
		}
	}
	if run["items_per_s"].(float64) <= 0 || run["elapsed_s"].(float64) <= 0 {
		t.Errorf("rates: items/s %v over %v s", run["items_per_s"], run["elapsed_s"])
	}
	if want := temporalUI + "/namespaces/default/workflows/" + id; run["temporal_ui"] != want {
		t.Errorf("temporal_ui %v, want %s", run["temporal_ui"], want)
	}

	// Temporal's visibility store is eventually consistent: a run that just closed may
	// be listed as running for a moment.
	var out map[string]any
	var runs []any
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		status, out = api(t, "GET", "/api/runs?chain=demo&tenant="+storedTenant+"&state=completed", nil)
		if runs = list(out["runs"]); len(runs) == 1 || time.Now().After(deadline) {
			break
		}
	}
	if status != http.StatusOK || len(runs) != 1 || obj(runs[0])["run_id"] != id || obj(runs[0])["tenant"] != storedTenant {
		t.Fatalf("filtered list: %d %v, want only %s", status, out, id)
	}
	if _, out := api(t, "GET", "/api/runs?tenant=nobody", nil); len(list(out["runs"])) != 0 {
		t.Errorf("tenant nobody: %v, want no runs", out)
	}
	status, out = api(t, "GET", "/api/runs?state=finished", nil)
	if status != http.StatusBadRequest || out["field"] != "state" || !strings.Contains(out["error"].(string), "running, completed") {
		t.Errorf("bad state: %d %v", status, out)
	}
	status, out = api(t, "GET", "/api/chains", nil)
	if status != http.StatusOK || !strings.Contains(toJSON(out["ran"]), `"chain":"demo"`) || !strings.Contains(toJSON(out["registered"]), `"hackernews"`) {
		t.Errorf("chains: %d %v", status, out)
	}
}

func TestRunErrors(t *testing.T) {
	src := "name: broken\nsteps:\n  - id: feed\n    task: demo.stroy\n"
	status, out := api(t, "POST", "/api/runs", map[string]any{"source": src, "file": "broken.yaml"})
	if status != http.StatusUnprocessableEntity || out["field"] != "source" {
		t.Fatalf("malformed chain: %d %v", status, out)
	}
	p := obj(list(out["problems"])[0])
	if p["line"].(float64) != 3 || !strings.Contains(p["message"].(string), `did you mean "demo.story"`) {
		t.Errorf("problem %v, want line 3 (the step) naming demo.story", p)
	}
	if !strings.HasPrefix(out["error"].(string), "broken.yaml:3: ") {
		t.Errorf("error %q, want it to start with broken.yaml:3:", out["error"])
	}

	status, out = api(t, "POST", "/api/runs", map[string]any{"chain": "demo", "sets": []string{"nostep.pages=2"}})
	if status != http.StatusUnprocessableEntity || out["field"] != "sets" || !strings.Contains(out["error"].(string), "no step `nostep`") {
		t.Errorf("bad override: %d %v", status, out)
	}
	status, out = api(t, "POST", "/api/runs", map[string]any{"chain": "nosuch"})
	if status != http.StatusNotFound || out["field"] != "chain" || !strings.Contains(out["error"].(string), "registered: demo") {
		t.Errorf("unknown registered chain: %d %v", status, out)
	}
	status, out = api(t, "POST", "/api/runs", `{"chain": "demo", "pages": 3}`)
	if status != http.StatusBadRequest || out["field"] != "body" || !strings.Contains(out["error"].(string), `unknown field "pages"`) {
		t.Errorf("unknown field: %d %v", status, out)
	}
	status, out = api(t, "POST", "/api/runs", `{}`)
	if status != http.StatusBadRequest || out["field"] != "source" {
		t.Errorf("empty request: %d %v", status, out)
	}
	status, out = api(t, "GET", "/api/runs/nope-20260101-000000-abcdef", nil)
	if status != http.StatusNotFound || out["field"] != "id" || !strings.Contains(out["error"].(string), `no run "nope-20260101-000000-abcdef"`) {
		t.Errorf("unknown run: %d %v", status, out)
	}
	status, out = api(t, "POST", "/api/runs/nope/cancel", nil)
	if status != http.StatusNotFound || !strings.Contains(out["error"].(string), `no running run "nope"`) {
		t.Errorf("cancel unknown run: %d %v", status, out)
	}
	status, out = api(t, "GET", "/api/nothing", nil)
	if status != http.StatusNotFound || out["field"] != "path" {
		t.Errorf("unknown endpoint: %d %v", status, out)
	}
}

func TestCancelRun(t *testing.T) {
	slow, stop, err := demosite.Start("127.0.0.1:0", demosite.Options{Pages: 10, Latency: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	status, out := api(t, "POST", "/api/runs", map[string]any{"source": demoSource(t, "cancel"), "sets": []string{"base_url=" + slow, "feed.pages=10"}})
	if status != http.StatusCreated {
		t.Fatalf("start: %d %v", status, out)
	}
	id := out["run_id"].(string)
	if status, out = api(t, "POST", "/api/runs/"+id+"/cancel", nil); status != http.StatusAccepted {
		t.Fatalf("cancel: %d %v", status, out)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, run := api(t, "GET", "/api/runs/"+id, nil)
		if run["state"] == "canceled" {
			if run["outcome"] != "canceled" {
				t.Errorf("canceled run: outcome %v, want canceled", run["outcome"])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still %v a minute after cancel", run["state"])
		}
		time.Sleep(200 * time.Millisecond)
	}
	status, out = api(t, "POST", "/api/runs/"+id+"/cancel", nil)
	if status != http.StatusConflict || !strings.Contains(out["error"].(string), "has already ended (canceled)") {
		t.Errorf("cancel a canceled run: %d %v, want 409", status, out)
	}
}

func TestValidateChain(t *testing.T) {
	status, out := api(t, "POST", "/api/chains/validate", map[string]any{"chain": "demo"})
	if status != http.StatusOK || out["chain"] != "demo" || len(list(out["steps"])) != 3 {
		t.Fatalf("demo: %d %v", status, out)
	}
	story := obj(list(out["steps"])[1])
	if story["id"] != "story" || toJSON(story["from"]) != `["feed"]` {
		t.Errorf("story step %v, want from [feed]", story)
	}
	src := "name: x\ndefaults:\n  timeout: 30\nsteps:\n  - id: a\n    task: demo.feed\n    form: b\n"
	status, out = api(t, "POST", "/api/chains/validate", map[string]any{"source": src, "file": "x.yaml"})
	if status != http.StatusUnprocessableEntity {
		t.Fatalf("bad chain: %d %v", status, out)
	}
	lines := map[float64]string{}
	for _, p := range list(out["problems"]) {
		lines[obj(p)["line"].(float64)] = obj(p)["message"].(string)
	}
	if !strings.Contains(lines[3], "give a unit, e.g. 30s") || !strings.Contains(lines[7], `did you mean "from"`) {
		t.Errorf("problems by line %v, want line 3 (duration) and line 7 (form)", lines)
	}
	status, out = api(t, "POST", "/api/chains/validate", map[string]any{"source": "name: [unclosed\n"})
	if status != http.StatusUnprocessableEntity || len(list(out["problems"])) == 0 || obj(list(out["problems"])[0])["line"] == nil {
		t.Errorf("YAML syntax error: %d %v, want a problem with its line", status, out)
	}
	status, out = api(t, "GET", "/api/chains/registered/demo", nil)
	if status != http.StatusOK || !strings.Contains(out["source"].(string), "task: demo.feed") {
		t.Errorf("registered demo: %d %v", status, out)
	}
	if status, _ = api(t, "GET", "/api/chains/registered/..%2Fgo", nil); status != http.StatusNotFound {
		t.Errorf("registered ../go: %d, want 404", status)
	}
}

func TestSchedules(t *testing.T) {
	find := func(id string) map[string]any {
		status, out := api(t, "GET", "/api/schedules", nil)
		if status != http.StatusOK {
			t.Fatalf("list: %d %v", status, out)
		}
		for _, s := range list(out["schedules"]) {
			if obj(s)["id"] == id {
				return obj(s)
			}
		}
		return nil
	}
	req := map[string]any{"id": "console-yearly", "cron": "0 0 1 1 *", "chain": "demo", "sets": []string{"base_url=" + stack.site}}
	if status, out := api(t, "POST", "/api/schedules", req); status != http.StatusCreated || out["chain"] != "demo" || out["overlap"] != "skip" {
		t.Fatalf("create: %d %v", status, out)
	}
	waitFor(t, "the new schedule in the listing", func() bool { return find("console-yearly") != nil })
	if s := find("console-yearly"); s["paused"] != false || s["cron"] != "0 0 1 1 *" || s["chain"] != "demo" || s["file"] != "examples/demo.yaml" ||
		s["overlap"] != "skip" || s["next"] == nil || s["last"] != nil {
		t.Fatalf("listed %v", s)
	}
	if status, out := api(t, "POST", "/api/schedules", req); status != http.StatusConflict || out["field"] != "id" {
		t.Errorf("duplicate: %d %v", status, out)
	}
	if status, out := api(t, "POST", "/api/schedules/console-yearly/pause", map[string]any{"note": "site maintenance"}); status != http.StatusOK || out["done"] != "paused" {
		t.Fatalf("pause: %d %v", status, out)
	}
	waitFor(t, "schedule paused in the listing", func() bool {
		s := find("console-yearly")
		return s != nil && s["paused"] == true && s["note"] == "site maintenance" && s["next"] == nil
	})
	// Paused: a trigger says so instead of starting a run.
	if status, out := api(t, "POST", "/api/schedules/console-yearly/trigger", nil); status != http.StatusConflict || out["field"] != "force" ||
		out["error"] != `schedule console-yearly is paused; resume it first, or trigger with {"force": true} to run it once anyway` {
		t.Errorf("trigger while paused: %d %v", status, out)
	}
	// The schedule keeps its chain until it is sent a new one.
	demoYAML, _ := examples.Files.ReadFile("demo.yaml")
	if s := find("console-yearly"); s["version"] != engine.ChainVersion(demoYAML) {
		t.Errorf("version %v, want that of examples/demo.yaml %s", s["version"], engine.ChainVersion(demoYAML))
	}
	own := demoSource(t, "own")
	if status, out := api(t, "PUT", "/api/schedules/console-yearly/chain", map[string]any{"source": own + "\nsteps: []\n", "file": "own.yaml"}); status != http.StatusUnprocessableEntity {
		t.Errorf("update with a broken chain: %d %v", status, out)
	}
	if status, out := api(t, "PUT", "/api/schedules/console-yearly/chain", map[string]any{"source": own, "file": "own.yaml", "sets": []string{"base_url=" + stack.site}}); status != http.StatusOK ||
		out["version"] != engine.ChainVersion([]byte(own)) || out["file"] != "own.yaml" {
		t.Fatalf("update: %d %v", status, out)
	}
	waitFor(t, "the new chain in the listing", func() bool {
		s := find("console-yearly")
		return s != nil && s["version"] == engine.ChainVersion([]byte(own)) && s["file"] == "own.yaml" && s["tenant"] == "own" && s["paused"] == true
	})
	if status, out := api(t, "POST", "/api/schedules/console-yearly/unpause", nil); status != http.StatusOK {
		t.Fatalf("unpause: %d %v", status, out)
	}
	waitFor(t, "schedule active in the listing", func() bool { s := find("console-yearly"); return s != nil && s["paused"] == false })
	if status, out := api(t, "DELETE", "/api/schedules/console-yearly", nil); status != http.StatusOK {
		t.Fatalf("delete: %d %v", status, out)
	}
	waitFor(t, "schedule gone from the listing", func() bool { return find("console-yearly") == nil })
	const missing = `no schedule named "console-yearly"; GET /api/schedules lists them`
	if status, out := api(t, "DELETE", "/api/schedules/console-yearly", nil); status != http.StatusNotFound || out["field"] != "id" || out["error"] != missing {
		t.Errorf("delete again: %d %v", status, out)
	}
	for _, path := range []string{"pause", "unpause", "trigger"} {
		if status, out := api(t, "POST", "/api/schedules/console-yearly/"+path, nil); status != http.StatusNotFound || out["error"] != missing {
			t.Errorf("%s unknown: %d %v", path, status, out)
		}
	}
	backfill := map[string]any{"from": time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339), "to": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}
	if status, out := api(t, "POST", "/api/schedules/console-yearly/backfill", backfill); status != http.StatusNotFound || out["error"] != missing {
		t.Errorf("backfill unknown: %d %v", status, out)
	}

	// Refused with the field named, before anything reaches Temporal.
	for _, c := range []struct {
		body        map[string]any
		field, want string
	}{
		{map[string]any{"cron": "every day"}, "cron", `cron "every day": has 2 fields; give five fields`},
		{map[string]any{"cron": "0 0 31 2 *"}, "cron", `cron "0 0 31 2 *": never fires: day-of-month 31 does not exist in February (29 days at most)`},
		{map[string]any{"cron": "0 0 30 2 *"}, "cron", `never fires`},
		{map[string]any{"cron": "@every 1s"}, "cron", `@every 1s is shorter than the 1m minimum`},
		{map[string]any{"cron": "0 0 0 1 1 * 2030"}, "cron", `has 7 fields`},
		{map[string]any{"cron": "70 * * * *"}, "cron", `minute 70 is out of range: minute takes 0-59`},
		{map[string]any{"cron": "@daily", "overlap": "queue"}, "overlap", `overlap "queue": must be one of skip, buffer-one, buffer-all, cancel-other, terminate-other, allow-all`},
		{map[string]any{"cron": "@daily", "catchup_window": "5"}, "catchup_window", `catchup_window "5": give a duration with a unit`},
		{map[string]any{"cron": "@daily", "catchup_window": "1s"}, "catchup_window", `must be 10s or more`},
		{map[string]any{"cron": "@daily", "jitter": "-5m"}, "jitter", `jitter "-5m0s": must be 0 or more`},
		{map[string]any{"cron": "0 2 * * *", "time_zone": "Asia/Shangai"}, "time_zone", `time_zone "Asia/Shangai": unknown time zone; did you mean Asia/Shanghai? give an IANA name such as Europe/Berlin, America/New_York or Asia/Shanghai`},
		{map[string]any{"cron": "@every 6h", "time_zone": "Asia/Shanghai"}, "time_zone", `time_zone "Asia/Shanghai": does not apply to @every`},
		{map[string]any{"id": "no spaces", "cron": "0 * * * *"}, "id", `name the schedule with letters`},
		{map[string]any{}, "cron", `cron is required`},
	} {
		body := map[string]any{"id": "console-bad", "chain": "demo"}
		for k, v := range c.body {
			body[k] = v
		}
		if status, out := api(t, "POST", "/api/schedules", body); status != http.StatusBadRequest || out["field"] != c.field || !strings.Contains(out["error"].(string), c.want) {
			t.Errorf("create %v: %d %v, want 400 %s: %s", c.body, status, out, c.field, c.want)
		}
	}

	// Every option, read back; a trigger starts a run that the listing shows to its end.
	src := strings.Replace(demoSource(t, "schedules"), "store: [jsonl, mongo, es]", "store: [jsonl]", 1)
	opts := map[string]any{"id": "console-opts", "cron": "30 6 * * MON-FRI", "source": src, "file": "chains/demo.yaml",
		"sets": []string{"base_url=" + stack.site, "feed.pages=1"}, "overlap": "buffer-one", "catchup_window": "1h", "pause_on_failure": true, "jitter": "5m",
		"time_zone": "Asia/Shanghai"}
	if status, out := api(t, "POST", "/api/schedules", opts); status != http.StatusCreated || out["overlap"] != "buffer-one" || out["file"] != "chains/demo.yaml" ||
		out["time_zone"] != "Asia/Shanghai" {
		t.Fatalf("create with options: %d %v", status, out)
	}
	defer api(t, "DELETE", "/api/schedules/console-opts", nil)
	waitFor(t, "console-opts in the listing", func() bool { return find("console-opts") != nil })
	if s := find("console-opts"); s["cron"] != "30 6 * * MON-FRI" || s["chain"] != "demo" || s["file"] != "chains/demo.yaml" || s["overlap"] != "buffer-one" ||
		s["catchup_window"] != "1h" || s["pause_on_failure"] != true || s["jitter"] != "5m" || s["tenant"] != "schedules" || s["time_zone"] != "Asia/Shanghai" {
		t.Errorf("console-opts listed as %v", s)
	}
	// 06:30 in Shanghai (UTC+8) is 22:30 UTC, the evening before (5m jitter).
	nextText, _ := find("console-opts")["next"].(string)
	if next, err := time.Parse(time.RFC3339, nextText); err != nil || next.UTC().Hour() != 22 || next.UTC().Minute() < 30 || next.UTC().Minute() > 35 {
		t.Errorf("console-opts next %q (%v), want 22:30-22:35 UTC", nextText, err)
	}
	status, out := api(t, "POST", "/api/schedules/console-opts/trigger", nil)
	runID, _ := out["run_id"].(string)
	if status != http.StatusOK || out["outcome"] != "started" || !strings.HasPrefix(runID, "console-opts-") {
		t.Fatalf("trigger: %d %v", status, out)
	}
	waitFor(t, "the triggered run in the listing", func() bool {
		last, _ := find("console-opts")["last"].(map[string]any)
		return last != nil && last["run_id"] == runID
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := engine.Wait(ctx, stack.client, runID, nil); err != nil {
		t.Fatalf("the triggered run %s: %v", runID, err)
	}
	waitFor(t, "the triggered run completed in the listing", func() bool {
		s := find("console-opts")
		last, _ := s["last"].(map[string]any)
		return last != nil && last["run_id"] == runID && last["state"] == "completed" && s["runs"] == 1.0
	})

	// Backfill: validated with the field named, then the range's firings start.
	day := func(d int) string { return time.Now().UTC().AddDate(0, 0, d).Format(time.RFC3339) }
	for _, c := range []struct {
		body        map[string]any
		field, want string
	}{
		{map[string]any{"from": "last week", "to": day(-1)}, "from", `from "last week": give an RFC 3339 time`},
		{map[string]any{"from": day(-1)}, "to", `to "": is required: give an RFC 3339 time`},
		{map[string]any{"from": day(-1), "to": day(-2)}, "to", `must be after from`},
		{map[string]any{"from": day(-1), "to": day(1)}, "to", `is in the future`},
		{map[string]any{"from": day(-3), "to": day(-1), "overlap": "later"}, "overlap", `overlap "later": must be one of`},
		// A weekend in Shanghai, where the schedule's days are counted (its Monday 06:30
		// is Sunday 22:30 UTC, so the same range in UTC would hold a firing).
		{map[string]any{"from": "2026-03-07T00:00:00+08:00", "to": "2026-03-08T23:00:00+08:00"}, "from", `the schedule (30 6 * * MON-FRI Asia/Shanghai) does not fire between from and to`},
	} {
		if status, out := api(t, "POST", "/api/schedules/console-opts/backfill", c.body); status != http.StatusBadRequest || out["field"] != c.field || !strings.Contains(out["error"].(string), c.want) {
			t.Errorf("backfill %v: %d %v, want 400 %s: %s", c.body, status, out, c.field, c.want)
		}
	}
	status, out = api(t, "POST", "/api/schedules/console-opts/backfill", map[string]any{"from": "2026-03-02T00:00:00Z", "to": "2026-03-03T23:59:00Z", "overlap": "buffer-all"})
	if status != http.StatusOK || out["firings"] != 2.0 || out["overlap"] != "buffer-all" || out["time_zone"] != "Asia/Shanghai" {
		t.Fatalf("backfill: %d %v", status, out)
	}
	waitFor(t, "the backfilled runs", func() bool { return find("console-opts")["runs"].(float64) >= 2 })
}

// waitFor polls cond (Temporal's schedule listing is eventually consistent).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestItems(t *testing.T) {
	demoRun(t)
	stories, _ := demosite.Expected(stack.siteOpt, 1)
	status, out := api(t, "GET", "/api/items", nil)
	if status != http.StatusOK || !strings.Contains(toJSON(out["bizes"]), `{"biz":"demo.story","count":30}`) {
		t.Fatalf("bizes: %d %v", status, out)
	}
	status, out = api(t, "GET", "/api/items?biz=demo.story&page=2&size=12", nil)
	items := list(out["items"])
	if status != http.StatusOK || int(out["total"].(float64)) != stories || len(items) != 12 {
		t.Fatalf("page 2: %d total %v, %d items; want %d total, 12 items", status, out["total"], len(items), stories)
	}
	status, out = api(t, "GET", "/api/items?biz=demo.story&page=3&size=12", nil)
	if status != http.StatusOK || len(list(out["items"])) != stories-24 {
		t.Errorf("page 3 holds %d items, want %d", len(list(out["items"])), stories-24)
	}
	seen := map[string]bool{}
	for page := 1; page <= 3; page++ {
		_, out := api(t, "GET", "/api/items?biz=demo.story&size=12&page="+strconv.Itoa(page), nil)
		for _, it := range list(out["items"]) {
			seen[obj(it)["key"].(string)] = true
		}
	}
	if len(seen) != stories {
		t.Errorf("pages hold %d distinct records, want %d", len(seen), stories)
	}

	key := demo.StoryKey(1)
	story, _ := stack.siteOpt.Story(1)
	// Records are per tenant: the run's tenant names its record.
	status, out = api(t, "GET", "/api/items/demo.story/"+url.PathEscape(key)+"?tenant="+storedTenant, nil)
	if status != http.StatusOK || out["key"] != key || obj(out["data"])["title"] != story.Title || out["tenant"] != storedTenant {
		t.Fatalf("record %s: %d %v", key, status, out)
	}
	status, out = api(t, "GET", "/api/items/demo.story/nope", nil)
	if status != http.StatusNotFound || out["field"] != "key" || !strings.Contains(out["error"].(string), `demo.story has no record "nope"`) {
		t.Errorf("unknown record: %d %v", status, out)
	}
	status, out = api(t, "GET", "/api/items?biz=story", nil)
	if status != http.StatusBadRequest || out["field"] != "biz" {
		t.Errorf("biz without site: %d %v", status, out)
	}
	status, out = api(t, "GET", "/api/items?biz=demo.story&size=0", nil)
	if status != http.StatusBadRequest || out["field"] != "size" {
		t.Errorf("size 0: %d %v", status, out)
	}
}

func TestSearch(t *testing.T) {
	demoRun(t)
	stories, _ := demosite.Expected(stack.siteOpt, 1)
	story, _ := stack.siteOpt.Story(3)
	q := url.QueryEscape(`"` + story.Title + `" AND biz:demo.story`)
	status, out := api(t, "GET", "/api/search?q="+q+"&agg=biz", nil)
	if status != http.StatusOK {
		t.Fatalf("search: %d %v", status, out)
	}
	hits := list(obj(out["hits"])["hits"])
	if len(hits) == 0 || obj(obj(hits[0])["_source"])["key"] != demo.StoryKey(3) {
		t.Fatalf("phrase %q: hits %v, want %s first", story.Title, toJSON(hits), demo.StoryKey(3))
	}

	dsl := `{"size": 0, "query": {"term": {"tenant": "` + storedTenant + `"}}, "aggs": {"per_biz": {"terms": {"field": "biz"}}}}`
	status, out = api(t, "POST", "/api/search", dsl)
	if status != http.StatusOK {
		t.Fatalf("dsl: %d %v", status, out)
	}
	counts := map[string]float64{}
	for _, b := range list(obj(obj(out["aggregations"])["per_biz"])["buckets"]) {
		counts[obj(b)["key"].(string)] = obj(b)["doc_count"].(float64)
	}
	if int(counts["demo.story"]) != stories {
		t.Errorf("per_biz %v, want demo.story %d", counts, stories)
	}

	status, out = api(t, "POST", "/api/search", `{"query": `)
	if status != http.StatusBadRequest || out["field"] != "body" {
		t.Errorf("broken DSL: %d %v", status, out)
	}
	status, out = api(t, "POST", "/api/search", `{"query": {"fuzzy_like_this": {}}}`)
	if status != http.StatusBadRequest || !strings.Contains(out["error"].(string), "fuzzy_like_this") {
		t.Errorf("unsupported query: %d %v", status, out)
	}
	status, out = api(t, "GET", "/api/search?q=x&index=trawler-nosuch-index", nil)
	if status != http.StatusNotFound || out["field"] != "index" {
		t.Errorf("unknown index: %d %v", status, out)
	}
	status, out = api(t, "GET", "/api/search?q=x&sort=title:up", nil)
	if status != http.StatusBadRequest || out["field"] != "sort" {
		t.Errorf("bad sort: %d %v", status, out)
	}
}

func TestDedupStats(t *testing.T) {
	demoRun(t)
	stories, comments := demosite.Expected(stack.siteOpt, 1)
	status, out := api(t, "GET", "/api/dedup", nil)
	if status != http.StatusOK {
		t.Fatalf("dedup: %d %v", status, out)
	}
	items := map[string]float64{}
	for _, n := range list(out["namespaces"]) {
		items[obj(n)["namespace"].(string)] = obj(n)["items"].(float64)
		// The worker sized its namespaces for 20,000 items (DedupExpected), 89.6 a bucket
		// (70% of the 128 entries a listpack holds).
		if b := obj(n)["buckets"].(float64); b != 224 {
			t.Errorf("namespace %s has %v buckets; want 224, sized for the worker's 20,000 expected items", obj(n)["namespace"], b)
		}
	}
	if int(items[storedTenant+":demo.story"]) != stories || int(items[storedTenant+":demo.comments"]) != comments {
		t.Errorf("namespaces %v, want %s:demo.story %d and demo.comments %d", items, storedTenant, stories, comments)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	status, out := api(t, "GET", "/healthz", nil)
	if status != http.StatusOK || out["ok"] != true {
		t.Fatalf("healthz: %d %v", status, out)
	}
	for _, name := range []string{"temporal", "redis", "kafka", "mongo", "es", "hbase"} {
		if c := obj(obj(out["stores"])[name]); c["ok"] != true {
			t.Errorf("store %s: %v", name, c)
		}
	}

	// A console whose Redis is gone answers 503 and names it.
	gone := miniredisGone(t)
	cfg := stack.cfg
	cfg.Redis = gone
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	down := httptest.NewServer(srv)
	defer down.Close()
	status, out = call(t, down.URL, "GET", "/healthz", "", nil)
	if status != http.StatusServiceUnavailable || toJSON(out["down"]) != `["redis"]` || obj(obj(out["stores"])["redis"])["error"] == "" {
		t.Errorf("healthz with Redis down: %d %v", status, out)
	}
	status, out = call(t, down.URL, "GET", "/api/dedup", "", nil)
	if status != http.StatusBadGateway || !strings.Contains(out["error"].(string), "Redis unreachable") {
		t.Errorf("dedup with Redis down: %d %v", status, out)
	}

	res, err := http.Get(stack.console.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines") {
		t.Errorf("metrics: %d %.200s", res.StatusCode, body)
	}
}

// miniredisGone is the address of a Redis that has stopped.
func miniredisGone(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestAccess(t *testing.T) {
	demoRun(t) // the search calls below need the items index the run creates
	cfg := stack.cfg
	cfg.Token, cfg.ReadToken = "full-secret", "read-secret"
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()

	status, out := call(t, ts.URL, "GET", "/api/runs", "", nil)
	if status != http.StatusUnauthorized || out["field"] != "Authorization" || !strings.Contains(out["error"].(string), "Authorization: Bearer TOKEN") {
		t.Errorf("no token: %d %v", status, out)
	}
	status, out = call(t, ts.URL, "GET", "/api/runs", "guess", nil)
	if status != http.StatusUnauthorized || !strings.Contains(out["error"].(string), "wrong bearer token") {
		t.Errorf("wrong token: %d %v", status, out)
	}
	if status, _ = call(t, ts.URL, "GET", "/metrics", "", "x"); status != http.StatusUnauthorized {
		t.Errorf("metrics without token: %d", status)
	}
	for _, path := range []string{"/api/runs", "/api/items", "/api/search?q=go", "/api/schedules"} {
		if status, out = call(t, ts.URL, "GET", path, "read-secret", nil); status != http.StatusOK {
			t.Errorf("read token GET %s: %d %v", path, status, out)
		}
	}
	if status, out = call(t, ts.URL, "POST", "/api/search", "read-secret", `{"size":1}`); status != http.StatusOK {
		t.Errorf("read token POST search: %d %v", status, out)
	}
	for _, c := range []struct{ method, path string }{
		{"POST", "/api/runs"}, {"POST", "/api/runs/some-run/cancel"}, {"POST", "/api/schedules"},
		{"POST", "/api/schedules/x/pause"}, {"DELETE", "/api/schedules/x"},
		{"POST", "/api/schedules/x/unpause"}, {"POST", "/api/schedules/x/trigger"}, {"POST", "/api/schedules/x/backfill"},
	} {
		status, out = call(t, ts.URL, c.method, c.path, "read-secret", map[string]any{"chain": "demo"})
		if status != http.StatusForbidden || !strings.Contains(out["error"].(string), "read-only") {
			t.Errorf("read token %s %s: %d %v, want 403", c.method, c.path, status, out)
		}
	}
	// The full token gets past the door: a malformed chain is refused on its merits.
	status, out = call(t, ts.URL, "POST", "/api/runs", "full-secret", map[string]any{"source": "name: x\n"})
	if status != http.StatusUnprocessableEntity {
		t.Errorf("full token, malformed chain: %d %v", status, out)
	}
	// Pages and health hold no data: they load without a token.
	for _, path := range []string{"/", "/healthz", "/static/console.js"} {
		res, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s without token: %d", path, res.StatusCode)
		}
	}

	if err := CheckAccess("0.0.0.0:8090", ""); err == nil || !strings.Contains(err.Error(), "--token") {
		t.Errorf("0.0.0.0 without token: %v", err)
	}
	if err := CheckAccess("10.1.2.3:8090", ""); err == nil {
		t.Error("10.1.2.3 without token: allowed")
	}
	for _, ok := range []string{"127.0.0.1:8090", "localhost:0", "[::1]:8090"} {
		if err := CheckAccess(ok, ""); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if err := CheckAccess("0.0.0.0:8090", "t"); err != nil {
		t.Errorf("0.0.0.0 with token: %v", err)
	}
	only := stack.cfg
	only.ReadToken = "r"
	if _, err := New(only); err == nil || !strings.Contains(err.Error(), "needs a full-access token") {
		t.Errorf("read token alone: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := srv.Listen(ctx, "127.0.0.1:bad", nil); err == nil {
		t.Error("listen on a bad port: no error")
	}
}

func TestPools(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: stack.redis.Addr()})
	defer rdb.Close()
	p := external.NewPools(rdb, quiet)
	ctx := context.Background()
	now := time.Now()
	if err := p.Add(ctx, "console", "demo", external.Cookie,
		external.Resource{ID: "c1", Value: "sid=1", Added: now}, external.Resource{ID: "c2", Value: "sid=2", Added: now}); err != nil {
		t.Fatal(err)
	}
	status, out := api(t, "GET", "/api/pools?tenant=console", nil)
	pools := list(out["pools"])
	if status != http.StatusOK || len(pools) != 1 {
		t.Fatalf("pools: %d %v", status, out)
	}
	if pl := obj(pools[0]); pl["kind"] != "cookie" || pl["site"] != "demo" || pl["size"].(float64) != 2 || pl["free"].(float64) != 2 {
		t.Errorf("pool %v, want 2 free cookies of demo", pl)
	}
	status, out = api(t, "GET", "/api/pools/console/demo/cookie", nil)
	if status != http.StatusOK || len(list(out["items"])) != 2 || obj(list(out["items"])[0])["id"] != "c1" {
		t.Errorf("pool detail: %d %v", status, out)
	}
	status, out = api(t, "GET", "/api/pools/console/demo/cookies", nil)
	if status != http.StatusBadRequest || out["field"] != "kind" || !strings.Contains(out["error"].(string), "cookie") {
		t.Errorf("unknown kind: %d %v", status, out)
	}
	if status, out = api(t, "GET", "/api/pools/console/nosite/proxy", nil); status != http.StatusNotFound {
		t.Errorf("unknown pool: %d %v", status, out)
	}
}

func TestRecrawlStats(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: stack.redis.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	pol := crawl.Recrawl{Min: 10 * time.Minute, Max: 7 * 24 * time.Hour, TargetMiss: 0.1, PerRun: 100}
	ns := "console-recrawl:demo.story"
	p := recrawl.New(rdb, nil)
	if err := p.Visited(ctx, ns, pol, []recrawl.Visit{{Input: crawl.Input{URL: "http://site.test/item/1"}}, {Input: crawl.Input{URL: "http://site.test/item/2"}}}); err != nil {
		t.Fatal(err)
	}
	defer p.Forget(ctx, ns)
	status, out := api(t, "GET", "/api/recrawl", nil)
	if status != http.StatusOK {
		t.Fatalf("recrawl: %d %v", status, out)
	}
	for _, st := range list(out["steps"]) {
		if m := obj(st); m["namespace"] == ns {
			if m["pages"].(float64) != 2 || m["due"].(float64) != 0 || obj(list(m["intervals"])[0])["pages"].(float64) != 2 {
				t.Errorf("recrawl step %v: want 2 pages, none due, both planned ≤15m apart", m)
			}
			return
		}
	}
	t.Errorf("/api/recrawl lists %v, not %s", out["steps"], ns)
}

// A body with more after its JSON (a paste glued to another, a truncated retry) is
// refused, and starts no run.
func TestTrailingDataStartsNoRun(t *testing.T) {
	src, err := examples.Files.ReadFile("demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	chain := strings.Replace(string(src), "name: demo ", "name: trailing", 1)
	body, _ := json.Marshal(map[string]any{"source": chain})
	for _, trailing := range []string{"garbage", `{"chain": "demo"}`} {
		status, out := api(t, "POST", "/api/runs", string(body)+trailing)
		want := fmt.Sprintf("the request body is not the JSON this endpoint takes: more follows the JSON value that ends at byte %d; send one JSON object", len(body))
		if status != http.StatusBadRequest || out["field"] != "body" || out["error"] != want {
			t.Errorf("body followed by %s: %d %v\nwant 400 %s", trailing, status, out, want)
		}
	}
	status, out := api(t, "POST", "/api/schedules/none/pause", `{"note": "a"} {"note": "b"}`)
	if status != http.StatusBadRequest || out["error"] != "body: more follows the JSON value that ends at byte 13; send one JSON object" {
		t.Errorf("pause body followed by another: %d %v", status, out)
	}
	runs, err := engine.ListRuns(context.Background(), stack.client, engine.ListOptions{Chain: "trailing"})
	if err != nil || len(runs) != 0 {
		t.Errorf("runs of the refused chain: %v %v, want none", runs, err)
	}
}

// A run id with a control character or a bidirectional override is no run's: 400
// naming the id, not Temporal's error as a 502.
func TestRunIDWithInvisibleCharacters(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/api/runs/demo%00x", `run id "demo\x00x" has the invisible character U+0000; no id has one: copy the id from ` + "`trawler status`" + ` or the console's list`},
		{"/api/runs/" + url.PathEscape("demo\u202ex") + "/chain", `run id "demo\u202ex" has the invisible character U+202E; no id has one: copy the id from ` + "`trawler status`" + ` or the console's list`},
	} {
		status, out := api(t, "GET", tc.path, nil)
		if status != http.StatusBadRequest || out["field"] != "id" || out["error"] != tc.want {
			t.Errorf("GET %s: %d %v\nwant 400 %s", tc.path, status, out, tc.want)
		}
	}
	status, out := api(t, "POST", "/api/runs/demo%00x/cancel", nil)
	if status != http.StatusBadRequest || out["field"] != "id" {
		t.Errorf("cancel: %d %v", status, out)
	}
}

// A schedule id too long for a name is blamed on the id, with the allowed length.
func TestLongScheduleIDNamed(t *testing.T) {
	id := strings.Repeat("a", 5000)
	status, out := api(t, "POST", "/api/schedules", map[string]any{"id": id, "cron": "0 * * * *", "chain": "demo"})
	want := `id "` + strings.Repeat("a", 40) + `…": 5000 characters; name the schedule in at most 200, e.g. demo-hourly`
	if status != http.StatusBadRequest || out["field"] != "id" || out["error"] != want {
		t.Errorf("%d %v\nwant 400 %s", status, out, want)
	}
}
