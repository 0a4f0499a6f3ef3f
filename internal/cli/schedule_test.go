//go:build !production

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/trawlerhq/trawler/internal/devstack"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// TestScheduleCommands drives `trawler schedule` against an embedded Temporal server
// (no worker: a run a schedule starts stays running, which is what the overlap policy
// needs to show).
func TestScheduleCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := devstack.StartTemporal(ctx, devstack.Options{DataDir: t.TempDir(), UIPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	at := []string{"--temporal", st.Endpoints.Temporal, "--namespace", st.Endpoints.Namespace, "--task-queue", "sched-test"}
	run := func(args ...string) (string, error) {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(args, at...))
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("trawler %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	list := func() map[string]engine.ScheduleInfo {
		t.Helper()
		var rows []engine.ScheduleInfo
		if err := json.Unmarshal([]byte(must("schedule", "list", "--json")), &rows); err != nil {
			t.Fatal(err)
		}
		m := map[string]engine.ScheduleInfo{}
		for _, r := range rows {
			m[r.ID] = r
		}
		return m
	}
	waitList := func(what string, cond func(map[string]engine.ScheduleInfo) bool) map[string]engine.ScheduleInfo {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if m := list(); cond(m) {
				return m
			} else if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; listed %+v", what, m)
			}
		}
	}

	// Every option, read back through list --json.
	out := must("schedule", "create", "opts", "../../examples/demo.yaml", "--cron", "30 6 * * MON-FRI", "--overlap", "buffer-one",
		"--catchup-window", "1h", "--pause-on-failure", "--jitter", "5m", "--set", "feed.pages=1", "--json")
	if !strings.Contains(out, `"overlap":"buffer-one"`) || !strings.Contains(out, `"chain":"demo"`) {
		t.Errorf("create --json: %s", out)
	}
	for _, o := range engine.OverlapPolicies {
		must("schedule", "create", "ov-"+o, "../../examples/demo.yaml", "--cron", "@daily", "--overlap", o)
	}
	must("schedule", "create", "every", "../../examples/demo.yaml", "--cron", "@every 90m")
	if out := must("schedule", "create", "shanghai", "../../examples/demo.yaml", "--cron", "0 2 * * *", "--tz", "Asia/Shanghai"); !strings.Contains(out, `on "0 2 * * *" (Asia/Shanghai)`) {
		t.Errorf("create --tz: %s", out)
	}
	m := waitList("the new schedules", func(m map[string]engine.ScheduleInfo) bool { return len(m) == 3+len(engine.OverlapPolicies) })
	o := m["opts"]
	if o.Cron != "30 6 * * MON-FRI" || o.Chain != "demo" || o.File != "../../examples/demo.yaml" || o.Overlap != "buffer-one" ||
		o.CatchupWindow != "1h" || !o.PauseOnFailure || o.Jitter != "5m" || o.Paused || o.Next == nil || o.Last != nil {
		t.Errorf("opts listed as %+v", o)
	}
	if wd := o.Next.UTC().Weekday(); wd == time.Saturday || wd == time.Sunday || o.Next.UTC().Hour() != 6 || o.Next.UTC().Minute() < 30 || o.Next.UTC().Minute() > 35 {
		t.Errorf("opts next %s, want a weekday at 06:30-06:35 UTC (5m jitter)", o.Next)
	}
	for _, p := range engine.OverlapPolicies {
		if got := m["ov-"+p]; got.Overlap != p || got.CatchupWindow != "8760h" || got.PauseOnFailure {
			t.Errorf("ov-%s listed as %+v", p, got)
		}
	}
	if e := m["every"]; e.Cron != "@every 90m" || e.TimeZone != "" || e.Next == nil || time.Until(*e.Next) > 90*time.Minute {
		t.Errorf("every listed as %+v", e)
	}
	// Temporal reads the fields in the zone: 02:00 in Shanghai (UTC+8) is 18:00 UTC.
	if sh := m["shanghai"]; sh.Cron != "0 2 * * *" || sh.TimeZone != "Asia/Shanghai" || sh.Next == nil ||
		sh.Next.UTC().Hour() != 18 || sh.Next.UTC().Minute() != 0 || time.Until(*sh.Next) > 24*time.Hour {
		t.Errorf("shanghai listed as %+v, want the next firing at 18:00 UTC", sh)
	}
	if o.TimeZone != "" || strings.Contains(must("schedule", "list", "--json"), `"time_zone":"UTC"`) {
		t.Errorf("a UTC schedule lists a time zone: %+v", o)
	}
	text := must("schedule", "list")
	for _, want := range []string{"NAME", "OVERLAP", "opts", "30 6 * * MON-FRI", "demo (../../examples/demo.yaml)", "active", "buffer-one", "never", "terminate-other",
		"0 2 * * * Asia/Shanghai"} {
		if !strings.Contains(text, want) {
			t.Errorf("list lacks %q:\n%s", want, text)
		}
	}

	// Refused before Temporal: each names its flag and what it takes.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cron", "0 0 31 2 *"}, `--cron "0 0 31 2 *": never fires: day-of-month 31 does not exist in February (29 days at most)`},
		{[]string{"--cron", "@every 1s"}, `--cron "@every 1s": @every 1s is shorter than the 1m minimum`},
		{[]string{"--cron", "0 0 0 1 1 * 2030"}, `--cron "0 0 0 1 1 * 2030": has 7 fields (seconds and year fields are not accepted)`},
		{[]string{"--cron", "0 25 * * *"}, `--cron "0 25 * * *": hour 25 is out of range: hour takes 0-23`},
		{[]string{"--cron", "@daily", "--overlap", "queue"}, `--overlap "queue": must be one of skip, buffer-one, buffer-all, cancel-other, terminate-other, allow-all`},
		{[]string{"--cron", "@daily", "--catchup-window", "5"}, `--catchup-window "5": give a duration with a unit`},
		{[]string{"--cron", "@daily", "--catchup-window", "2s"}, `--catchup-window "2s": must be 10s or more`},
		{[]string{"--cron", "@daily", "--jitter", "-1m"}, `--jitter "-1m0s": must be 0 or more`},
		{[]string{"--cron", "0 2 * * *", "--tz", "Asia/Shangai"}, `--tz "Asia/Shangai": unknown time zone; did you mean Asia/Shanghai? give an IANA name such as Europe/Berlin, America/New_York or Asia/Shanghai`},
		{[]string{"--cron", "@every 6h", "--tz", "Asia/Shanghai"}, `--tz "Asia/Shanghai": does not apply to @every: intervals count from the Unix epoch`},
		{nil, `--cron is required`},
	} {
		_, err := run(append([]string{"schedule", "create", "bad", "../../examples/demo.yaml"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create %v: %v, want %s", c.args, err, c.want)
		}
	}
	if _, err := run("schedule", "create", "opts", "../../examples/demo.yaml", "--cron", "@daily"); err == nil || !strings.Contains(err.Error(), `a schedule named "opts" exists already`) {
		t.Errorf("create twice: %v", err)
	}

	// Pause and unpause show in the listing.
	if out := must("schedule", "pause", "ov-skip", "--note", "site maintenance"); !strings.Contains(out, "schedule ov-skip paused") {
		t.Errorf("pause: %s", out)
	}
	waitList("ov-skip paused", func(m map[string]engine.ScheduleInfo) bool {
		s := m["ov-skip"]
		return s.Paused && s.Note == "site maintenance" && s.Next == nil
	})
	if text := must("schedule", "list"); !strings.Contains(text, "paused: site maintenance") {
		t.Errorf("text list lacks the pause note:\n%s", text)
	}
	if out := must("schedule", "unpause", "ov-skip", "--json"); !strings.Contains(out, `"done":"unpaused"`) {
		t.Errorf("unpause --json: %s", out)
	}
	waitList("ov-skip active", func(m map[string]engine.ScheduleInfo) bool { return !m["ov-skip"].Paused && m["ov-skip"].Next != nil })

	// A trigger starts a run; the next one is skipped while it goes (overlap skip).
	var tr engine.TriggerResult
	if err := json.Unmarshal([]byte(must("schedule", "trigger", "ov-skip", "--json")), &tr); err != nil || tr.Outcome != "started" || !strings.HasPrefix(tr.RunID, "ov-skip-") {
		t.Fatalf("trigger: %+v %v", tr, err)
	}
	c, err := client.Dial(client.Options{HostPort: st.Endpoints.Temporal, Namespace: st.Endpoints.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wd, err := c.DescribeWorkflowExecution(ctx, tr.RunID, "")
	if err != nil || wd.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("the triggered run %s: %v %v", tr.RunID, wd.GetWorkflowExecutionInfo().GetStatus(), err)
	}
	m = waitList("the triggered run as the last", func(m map[string]engine.ScheduleInfo) bool {
		s := m["ov-skip"]
		return s.Last != nil && s.Last.RunID == tr.RunID && s.Last.State == "running" && s.Runs == 1
	})
	if s := m["ov-skip"]; len(s.Running) != 1 || s.Running[0] != tr.RunID {
		t.Errorf("running %v, want [%s]", s.Running, tr.RunID)
	}
	if out := must("schedule", "trigger", "ov-skip"); !strings.Contains(out, "firing skipped, its previous run still goes (overlap skip)") {
		t.Errorf("second trigger: %s", out)
	}
	if err := c.TerminateWorkflow(ctx, tr.RunID, "", "test"); err != nil {
		t.Fatal(err)
	}
	waitList("the last run terminated", func(m map[string]engine.ScheduleInfo) bool {
		s := m["ov-skip"]
		return s.Last != nil && s.Last.State == "terminated" && s.Skipped == 1
	})
	if text := must("schedule", "list"); !strings.Contains(text, "terminated "+tr.RunID) {
		t.Errorf("text list lacks the last run:\n%s", text)
	}

	// Backfill: validated, then the firings of the range start.
	now := time.Now().UTC()
	day := func(d int) string { return now.AddDate(0, 0, d).Format(time.RFC3339) }
	midnight := now.Truncate(24 * time.Hour)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "yesterday", "--to", day(-1)}, `--from "yesterday": give an RFC 3339 time, e.g. 2026-01-02T15:04:05Z`},
		{[]string{"--to", day(-1)}, `--from "": is required: give an RFC 3339 time`},
		{[]string{"--from", day(-1), "--to", day(-2)}, `--to "` + day(-2) + `": must be after from`},
		{[]string{"--from", day(-2), "--to", day(1)}, `is in the future: a backfill replays past firings; trigger starts a run now`},
		{[]string{"--from", day(-3), "--to", day(-1), "--overlap", "queue"}, `--overlap "queue": must be one of skip`},
		// 21:00 to 22:00 yesterday: the @daily schedule fires at midnight only.
		{[]string{"--from", midnight.Add(-3 * time.Hour).Format(time.RFC3339), "--to", midnight.Add(-2 * time.Hour).Format(time.RFC3339)}, `does not fire between from and to`},
		{[]string{"--from", "2020-01-01T00:00:00Z", "--to", day(-1)}, `fires more than 1000 times between from and to`},
	} {
		name := "ov-allow-all"
		if strings.Contains(c.want, "1000") {
			name = "every"
		}
		_, err := run(append([]string{"schedule", "backfill", name}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("backfill %v: %v, want %s", c.args, err, c.want)
		}
	}
	var bf engine.BackfillResult
	if err := json.Unmarshal([]byte(must("schedule", "backfill", "ov-allow-all", "--from", day(-3), "--to", now.Add(-time.Minute).Format(time.RFC3339), "--json")), &bf); err != nil || bf.Firings != 3 || bf.Overlap != "allow-all" {
		t.Fatalf("backfill: %+v %v", bf, err)
	}
	m = waitList("3 backfilled runs", func(m map[string]engine.ScheduleInfo) bool { return m["ov-allow-all"].Runs == 3 })
	for _, id := range m["ov-allow-all"].Running {
		_ = c.TerminateWorkflow(ctx, id, "", "test")
	}

	// A schedule keeps its chain: editing the file is flagged, update sends it again.
	file := filepath.Join(t.TempDir(), "mine.yaml")
	orig, err := os.ReadFile("../../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	v1 := engine.ChainVersion(orig)
	if out := must("schedule", "create", "upd", file, "--cron", "@daily"); !strings.Contains(out, "version "+v1) {
		t.Errorf("create: %s", out)
	}
	m = waitList("upd listed", func(m map[string]engine.ScheduleInfo) bool { _, ok := m["upd"]; return ok })
	if u := m["upd"]; u.Version != v1 || u.Path != file || u.File != file || u.Chain != "demo" {
		t.Errorf("upd listed as %+v, want version %s of %s", u, v1, file)
	}
	if text := must("schedule", "list"); strings.Contains(text, "warning:") || !strings.Contains(text, v1) {
		t.Errorf("list of an unchanged file:\n%s", text)
	}
	edited := []byte(strings.Replace(string(orig), "params: {pages: 3}", "params: {pages: 2}", 1))
	if err := os.WriteFile(file, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	v2 := engine.ChainVersion(edited)
	warning := "warning: " + file + " has changed since schedule upd took it (version " + v1 + ", now " + v2 + "); the schedule still runs " + v1 + ": trawler schedule update upd " + file
	if text := must("schedule", "list"); !strings.Contains(text, warning) || !strings.Contains(text, v1+" (file changed)") {
		t.Errorf("list lacks %q:\n%s", warning, text)
	}
	pages := func() any {
		t.Helper()
		d, err := c.ScheduleClient().GetHandle(ctx, "upd").Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var in workflows.ChainInput
		if err := converter.GetDefaultDataConverter().FromPayload(d.Schedule.Action.(*client.ScheduleWorkflowAction).Args[0].(*commonpb.Payload), &in); err != nil {
			t.Fatal(err)
		}
		for _, st := range in.Plan.Steps {
			if st.ID == "feed" {
				return st.Params["pages"]
			}
		}
		return nil
	}
	if got := pages(); fmt.Sprint(got) != "3" {
		t.Errorf("before update the schedule's feed pages = %v, want 3 (the chain as created)", got)
	}
	if _, err := run("schedule", "update", "upd", "../../examples/nosuch.yaml"); err == nil || !strings.Contains(err.Error(), "nosuch.yaml") {
		t.Errorf("update from a missing file: %v", err)
	}
	if out := must("schedule", "update", "upd", file); out != "schedule upd now runs chain demo ("+file+", version "+v2+", was "+v1+")\n" {
		t.Errorf("update: %q", out)
	}
	if got := pages(); fmt.Sprint(got) != "2" {
		t.Errorf("after update the schedule's feed pages = %v, want 2", got)
	}
	if text := must("schedule", "list"); strings.Contains(text, "warning:") || !strings.Contains(text, v2) {
		t.Errorf("list after update:\n%s", text)
	}
	// A paused schedule runs on trigger only when forced.
	must("schedule", "pause", "upd")
	waitList("upd paused", func(m map[string]engine.ScheduleInfo) bool { return m["upd"].Paused })
	if _, err := run("schedule", "trigger", "upd"); err == nil || err.Error() != "schedule upd is paused; pass --force to run it once anyway, or `trawler schedule unpause upd`" {
		t.Errorf("trigger of a paused schedule: %v", err)
	}
	if err := json.Unmarshal([]byte(must("schedule", "trigger", "upd", "--force", "--json")), &tr); err != nil || tr.Outcome != "started" {
		t.Errorf("trigger --force: %+v %v", tr, err)
	} else {
		_ = c.TerminateWorkflow(ctx, tr.RunID, "", "test")
	}

	// A missing schedule: one message on every subcommand.
	const missing = `no schedule named "nosuch"; trawler schedule list shows them`
	for _, args := range [][]string{
		{"delete", "nosuch"}, {"update", "nosuch", "../../examples/demo.yaml"}, {"pause", "nosuch"}, {"unpause", "nosuch"}, {"trigger", "nosuch"},
		{"backfill", "nosuch", "--from", day(-2), "--to", day(-1)},
	} {
		if _, err := run(append([]string{"schedule"}, args...)...); err == nil || err.Error() != missing {
			t.Errorf("%v: %v, want %s", args, err, missing)
		}
	}
	if out := must("schedule", "delete", "opts"); !strings.Contains(out, "deleted schedule opts") {
		t.Errorf("delete: %s", out)
	}
	waitList("opts gone", func(m map[string]engine.ScheduleInfo) bool { _, ok := m["opts"]; return !ok })
}

// Every subcommand has help with examples.
func TestScheduleHelp(t *testing.T) {
	for _, sub := range []string{"create", "list", "pause", "unpause", "trigger", "backfill", "delete"} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{"schedule", sub, "--help"})
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "Examples:") || !strings.Contains(out.String(), "trawler schedule "+sub) {
			t.Errorf("schedule %s --help:\n%s", sub, out.String())
		}
	}
}

// A schedule name too long for one is blamed on the name, with the allowed length,
// before the chain is read or Temporal is asked.
func TestScheduleCreateRefusesLongName(t *testing.T) {
	root := newRoot()
	root.SetArgs([]string{"schedule", "create", strings.Repeat("a", 5000), "no-such-file.yaml", "--cron", "0 * * * *", "--temporal", "127.0.0.1:1"})
	err := root.ExecuteContext(context.Background())
	want := `schedule NAME "` + strings.Repeat("a", 40) + `…": 5000 characters; name the schedule in at most 200, e.g. demo-hourly`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}
