package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	// The zone database goes into the binary: a schedule's time zone is checked here
	// (and an embedded Temporal server fires by it), and a slim container image often
	// has no /usr/share/zoneinfo, where LoadLocation would refuse every name but UTC.
	_ "time/tzdata"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// OverlapPolicies name what a schedule does when a firing comes while its previous run
// still goes, as the CLI and the API spell them.
var OverlapPolicies = []string{"skip", "buffer-one", "buffer-all", "cancel-other", "terminate-other", "allow-all"}

var overlapEnums = map[string]enumspb.ScheduleOverlapPolicy{
	"skip":            enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
	"buffer-one":      enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
	"buffer-all":      enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL,
	"cancel-other":    enumspb.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER,
	"terminate-other": enumspb.SCHEDULE_OVERLAP_POLICY_TERMINATE_OTHER,
	"allow-all":       enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
}

// overlapName is the CLI's name of a policy; Temporal's default (unspecified) is skip.
func overlapName(p enumspb.ScheduleOverlapPolicy) string {
	for name, e := range overlapEnums {
		if e == p {
			return name
		}
	}
	return "skip"
}

// MinCatchupWindow is the shortest catch-up window Temporal keeps (it raises shorter
// ones to this without a word, so they are refused here).
const MinCatchupWindow = 10 * time.Second

// MaxBackfill is the most firings one backfill may start.
const MaxBackfill = 1000

// ScheduleError is a setting of a schedule or of an action on it that is refused before
// anything is sent to Temporal. Field is the API's name of the setting (cron, time_zone,
// overlap, catchup_window, jitter, from, to, id); Flag is the CLI's.
type ScheduleError struct {
	Field, Value, Why string
}

func (e *ScheduleError) Error() string { return fmt.Sprintf("%s %q: %s", e.Field, e.Value, e.Why) }

// flagNames are the CLI's names of the settings whose flag is not their field's name.
var flagNames = map[string]string{"time_zone": "--tz", "id": "schedule NAME"}

// Flag is the CLI's name of the setting: --catchup-window for catchup_window, --tz for
// time_zone.
func (e *ScheduleError) Flag() string {
	if f, ok := flagNames[e.Field]; ok {
		return f
	}
	return "--" + strings.ReplaceAll(e.Field, "_", "-")
}

// FlagError is the message with the flag's name, as the CLI prints it.
func (e *ScheduleError) FlagError() string {
	return fmt.Sprintf("%s %q: %s", e.Flag(), e.Value, e.Why)
}

// NoScheduleError is an action on a schedule that does not exist.
type NoScheduleError struct{ ID string }

func (e *NoScheduleError) Error() string {
	return fmt.Sprintf("no schedule named %q; trawler schedule list shows them", e.ID)
}

// scheduleErr turns Temporal's not-found of a schedule into a NoScheduleError.
func scheduleErr(id, verb string, err error) error {
	if err == nil {
		return nil
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) || strings.Contains(err.Error(), "not found") {
		return &NoScheduleError{ID: id}
	}
	return fmt.Errorf("%s schedule %s: %w", verb, id, err)
}

// PausedError is a trigger of a paused schedule without force.
type PausedError struct{ ID string }

func (e *PausedError) Error() string {
	return fmt.Sprintf("schedule %s is paused; pass --force to run it once anyway, or `trawler schedule unpause %s`", e.ID, e.ID)
}

// ChainSource is the chain a schedule runs as it was when the schedule was created or
// updated: a schedule keeps that copy, so editing the file later changes nothing until
// `trawler schedule update`.
type ChainSource struct {
	File    string // as the user named it
	Path    string // absolute, so a listing can tell when the file changed since ("" when there is no file)
	Version string // ChainVersion of the content
}

// ChainVersion names a chain file's content: the first 12 hex digits of its SHA-256.
func ChainVersion(src []byte) string {
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:6])
}

// ScheduleConfig is when a schedule fires and what it does when firings overlap.
type ScheduleConfig struct {
	Cron           string        // five fields, a descriptor or @every DURATION (ParseCron)
	TimeZone       string        // IANA name the cron fields are read in; "" is UTC
	Overlap        string        // one of OverlapPolicies; "" is skip
	CatchupWindow  time.Duration // how late a missed firing (server down) still starts; 0: Temporal's 1 year
	PauseOnFailure bool          // pause the schedule when a run it started fails
	Jitter         time.Duration // start each firing up to this much later, at random
	Note           string        // shown in the listing
}

// Validate checks every setting; the error is a *ScheduleError naming the first one
// at fault.
func (c ScheduleConfig) Validate() error {
	spec, err := ParseCron(c.Cron)
	if err != nil {
		return &ScheduleError{Field: "cron", Value: c.Cron, Why: err.Error()}
	}
	if err := checkTimeZone(c.TimeZone, spec); err != nil {
		return err
	}
	if _, ok := overlapEnums[c.Overlap]; !ok && c.Overlap != "" {
		return &ScheduleError{Field: "overlap", Value: c.Overlap, Why: "must be one of " + strings.Join(OverlapPolicies, ", ")}
	}
	if c.CatchupWindow < 0 || (c.CatchupWindow > 0 && c.CatchupWindow < MinCatchupWindow) {
		return &ScheduleError{Field: "catchup_window", Value: c.CatchupWindow.String(), Why: fmt.Sprintf("must be %s or more (Temporal keeps no shorter window), e.g. 10m or 24h", MinCatchupWindow)}
	}
	if c.Jitter < 0 {
		return &ScheduleError{Field: "jitter", Value: c.Jitter.String(), Why: "must be 0 or more, e.g. 30s or 5m"}
	}
	return nil
}

// tzExamples is what a time zone message offers in place of a name that is none.
const tzExamples = "give an IANA name such as Europe/Berlin, America/New_York or Asia/Shanghai"

// checkTimeZone refuses a zone Go (and so Temporal, which loads zones the same way)
// does not know, the machine's own zone, and a zone on an interval, which would not
// change when it fires.
func checkTimeZone(tz string, spec *CronSpec) error {
	name := strings.TrimSpace(tz)
	switch {
	case name == "":
		return nil
	case spec.Every > 0:
		return &ScheduleError{Field: "time_zone", Value: tz, Why: "does not apply to @every: intervals count from the Unix epoch, not from a local clock; " +
			`to fire at a local time give five fields, e.g. "0 2 * * *", or leave the time zone out`}
	case name == "Local":
		return &ScheduleError{Field: "time_zone", Value: tz, Why: "Local would be the zone of whichever machine reads it; " + tzExamples}
	}
	if _, err := time.LoadLocation(name); err != nil {
		why := "unknown time zone; " + tzExamples
		if s := suggestZone(name); strings.HasPrefix(s, "Etc/GMT") {
			why = "unknown time zone; did you mean " + s + " (a fixed offset, no daylight saving; Etc names reverse the sign)? " + tzExamples
		} else if s != "" {
			why = "unknown time zone; did you mean " + s + "? " + tzExamples
		}
		return &ScheduleError{Field: "time_zone", Value: tz, Why: why}
	}
	return nil
}

// commonZones are the names a did-you-mean compares a misspelt zone with: the zone
// database has no list Go exposes, and these are the ones most often typed.
var commonZones = []string{
	"Africa/Cairo", "Africa/Johannesburg", "Africa/Lagos", "Africa/Nairobi",
	"America/Chicago", "America/Denver", "America/Los_Angeles", "America/Mexico_City", "America/New_York",
	"America/Phoenix", "America/Sao_Paulo", "America/Toronto", "America/Vancouver", "America/Buenos_Aires",
	"Asia/Bangkok", "Asia/Dubai", "Asia/Hong_Kong", "Asia/Jakarta", "Asia/Kolkata", "Asia/Seoul",
	"Asia/Shanghai", "Asia/Singapore", "Asia/Taipei", "Asia/Tokyo", "Asia/Ho_Chi_Minh", "Asia/Karachi",
	"Australia/Melbourne", "Australia/Sydney", "Australia/Perth", "Pacific/Auckland", "Pacific/Honolulu",
	"Europe/Amsterdam", "Europe/Berlin", "Europe/Istanbul", "Europe/London", "Europe/Madrid", "Europe/Moscow",
	"Europe/Paris", "Europe/Rome", "Europe/Stockholm", "Europe/Warsaw", "Europe/Zurich", "Europe/Kyiv",
}

// utcOffset matches a fixed offset as people write it: UTC+8, GMT-05:00, +08.
var utcOffset = regexp.MustCompile(`^(?i:UTC|GMT)?\s*([+-])(\d{1,2})(?::?00)?$`)

// suggestZone is a name close to tz that the database knows, or "": the same name
// with each word capitalised (asia/shanghai) or in capitals (utc), the Etc/GMT name of a whole-hour offset,
// or a common zone at most two edits away.
func suggestZone(tz string) string {
	if m := utcOffset.FindStringSubmatch(tz); m != nil {
		h, _ := strconv.Atoi(m[2])
		if h == 0 {
			return "UTC"
		}
		// Etc/GMT names carry the sign reversed (POSIX): UTC+8 is Etc/GMT-8.
		sign := "-"
		if m[1] == "-" {
			sign = "+"
		}
		name := fmt.Sprintf("Etc/GMT%s%d", sign, h)
		if _, err := time.LoadLocation(name); err != nil {
			return ""
		}
		return name
	}
	capitalised := []rune(strings.ToLower(tz))
	for i := range capitalised {
		if i == 0 || strings.ContainsRune("/_-", capitalised[i-1]) {
			capitalised[i] = unicode.ToUpper(capitalised[i])
		}
	}
	// Both spellings: Asia/Shanghai for asia/shanghai, UTC or CET for utc or cet.
	for _, c := range []string{string(capitalised), strings.ToUpper(tz)} {
		if _, err := time.LoadLocation(c); err == nil && c != tz {
			return c
		}
	}
	return crawl.Closest(tz, commonZones)
}

// ParseScheduleDuration reads a duration setting (catchup_window, jitter); "" is 0.
func ParseScheduleDuration(field, s string) (time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, &ScheduleError{Field: field, Value: s, Why: "give a duration with a unit, e.g. 30s, 10m or 24h"}
	}
	return d, nil
}

// cronSpec turns a checked spec into Temporal's: five fields as a cron string (which
// the server reads as calendars, in tz, UTC when ""; it moves the firings with daylight
// saving), @every as an interval (which has no zone).
func cronSpec(cron, tz string, jitter time.Duration) client.ScheduleSpec {
	c, _ := ParseCron(cron)
	if c != nil && c.Every > 0 {
		return client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: c.Every, Offset: c.Offset}}, Jitter: jitter}
	}
	return client.ScheduleSpec{CronExpressions: []string{strings.TrimSpace(cron)}, TimeZoneName: tz, Jitter: jitter}
}

// zoneName is the zone a schedule shows: "" for UTC, however it was spelt.
func zoneName(tz string) string {
	tz = strings.TrimSpace(tz)
	if tz == "UTC" || tz == "Etc/UTC" {
		return ""
	}
	return tz
}

// CreateSchedule makes a Temporal Schedule that starts a run of plan on a cron spec,
// skipping a firing while the previous run still goes.
func CreateSchedule(ctx context.Context, c client.Client, id, cron string, plan *crawl.Plan, o RunOptions) error {
	return CreateScheduleWith(ctx, c, id, ChainSource{}, ScheduleConfig{Cron: cron}, plan, o)
}

// CreateScheduleWith makes a Temporal Schedule of plan (read from src) with cfg, once
// cfg is valid. Each firing is a normal run whose run id is its workflow id (schedule
// id + time).
func CreateScheduleWith(ctx context.Context, c client.Client, id string, src ChainSource, cfg ScheduleConfig, plan *crawl.Plan, o RunOptions) error {
	if err := CheckScheduleID(id); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Overlap == "" {
		cfg.Overlap = "skip"
	}
	cron, tz := strings.TrimSpace(cfg.Cron), zoneName(cfg.TimeZone)
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:             id,
		Spec:           cronSpec(cron, tz, cfg.Jitter),
		Overlap:        overlapEnums[cfg.Overlap],
		CatchupWindow:  cfg.CatchupWindow,
		PauseOnFailure: cfg.PauseOnFailure,
		Note:           cfg.Note,
		// The server keeps the spec as calendars; the memo keeps the cron and zone as written.
		Memo:   map[string]any{"cron": cron, "time_zone": tz},
		Action: scheduleAction(id, src, plan, o),
	})
	if err != nil {
		return fmt.Errorf("create schedule %s: %w", id, err)
	}
	return nil
}

// scheduleAction is the run a schedule starts: plan, with where it came from in the
// run's memo (the schedule's own memo cannot change after creation, the action can).
func scheduleAction(id string, src ChainSource, plan *crawl.Plan, o RunOptions) *client.ScheduleWorkflowAction {
	if o.TaskQueue == "" {
		o.TaskQueue = workflows.DefaultTaskQueue
	}
	memo := runMemo(plan)
	memo["chain_file"], memo["chain_path"], memo["chain_version"] = src.File, src.Path, src.Version
	return &client.ScheduleWorkflowAction{
		ID:        id,
		Workflow:  workflows.ChainWorkflowName,
		TaskQueue: o.TaskQueue,
		Memo:      memo,
		Args:      []any{workflows.ChainInput{Plan: *plan, TaskQueue: o.TaskQueue, Tuning: o.Tuning}},
	}
}

// UpdateScheduleChain replaces the chain a schedule runs with plan (read from src);
// its spec, policies and state stay. Runs already started keep their chain.
func UpdateScheduleChain(ctx context.Context, c client.Client, id string, src ChainSource, plan *crawl.Plan, o RunOptions) error {
	err := c.ScheduleClient().GetHandle(ctx, id).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			sched := in.Description.Schedule
			sched.Action = scheduleAction(id, src, plan, o)
			return &client.ScheduleUpdate{Schedule: &sched}, nil
		},
	})
	return scheduleErr(id, "update", err)
}

// ScheduleRun is a run a schedule started, with its state now.
type ScheduleRun struct {
	RunID string    `json:"run_id"`
	At    time.Time `json:"at"`    // when it started
	State string    `json:"state"` // running, completed, failed, canceled, terminated, timed_out; unknown when gone
}

// ScheduleInfo is a schedule as the listing shows it.
type ScheduleInfo struct {
	ID             string       `json:"id"`
	Cron           string       `json:"cron"`
	TimeZone       string       `json:"time_zone,omitempty"` // the zone cron is read in; "" is UTC
	Chain          string       `json:"chain,omitempty"`
	File           string       `json:"file,omitempty"`
	Path           string       `json:"path,omitempty"`    // File made absolute, where `schedule list` looks for changes
	Version        string       `json:"version,omitempty"` // ChainVersion of the chain it runs
	Tenant         string       `json:"tenant,omitempty"`
	Paused         bool         `json:"paused"`
	Note           string       `json:"note,omitempty"`
	Overlap        string       `json:"overlap"`
	CatchupWindow  string       `json:"catchup_window,omitempty"`
	PauseOnFailure bool         `json:"pause_on_failure"`
	Jitter         string       `json:"jitter,omitempty"`
	Next           *time.Time   `json:"next,omitempty"`
	Last           *ScheduleRun `json:"last,omitempty"`
	Runs           int          `json:"runs"`        // runs started so far
	Skipped        int          `json:"skipped"`     // firings skipped by the overlap policy
	Running        []string     `json:"running"`     // its runs still going
	RecentRuns     []string     `json:"recent_runs"` // its latest runs, oldest first
}

// Spec is the cron with its zone, as the listing shows it: "0 2 * * * Asia/Shanghai".
func (s ScheduleInfo) Spec() string {
	if s.TimeZone == "" {
		return s.Cron
	}
	return s.Cron + " " + s.TimeZone
}

// shortDuration prints 8760h0m0s as 8760h and 1m30s as is.
func shortDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return crawl.ShortDuration(d)
}

// DescribeSchedule reads one schedule, and the state of the last run it started.
func DescribeSchedule(ctx context.Context, c client.Client, id string) (ScheduleInfo, error) {
	d, err := c.ScheduleClient().GetHandle(ctx, id).Describe(ctx)
	if err != nil {
		return ScheduleInfo{}, scheduleErr(id, "describe", err)
	}
	info := ScheduleInfo{
		ID: id, Cron: MemoString(d.Memo, "cron"),
		Runs: d.Info.NumActions, Skipped: d.Info.NumActionsSkippedOverlap,
		Running: []string{}, RecentRuns: []string{},
	}
	if a, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction); ok {
		info.Chain, info.Tenant = actionMemo(a, "chain"), actionMemo(a, "tenant")
		info.File, info.Path, info.Version = actionMemo(a, "chain_file"), actionMemo(a, "chain_path"), actionMemo(a, "chain_version")
	}
	if sp := d.Schedule.Spec; info.Cron == "" && sp != nil {
		info.Cron = strings.Join(sp.CronExpressions, " | ")
	}
	info.TimeZone = MemoString(d.Memo, "time_zone")
	if sp := d.Schedule.Spec; sp != nil {
		info.Jitter = shortDuration(sp.Jitter)
		if sp.TimeZoneName != "" {
			info.TimeZone = sp.TimeZoneName // what the server fires by, when it says
		}
	}
	info.TimeZone = zoneName(info.TimeZone)
	if st := d.Schedule.State; st != nil {
		info.Paused, info.Note = st.Paused, st.Note
	}
	info.Overlap = "skip"
	if p := d.Schedule.Policy; p != nil {
		info.Overlap = overlapName(p.Overlap)
		info.CatchupWindow = shortDuration(p.CatchupWindow)
		info.PauseOnFailure = p.PauseOnFailure
	}
	if len(d.Info.NextActionTimes) > 0 && !info.Paused {
		next := d.Info.NextActionTimes[0]
		info.Next = &next
	}
	for _, w := range d.Info.RunningWorkflows {
		info.Running = append(info.Running, w.WorkflowID)
	}
	actions := slices.Clone(d.Info.RecentActions)
	sort.SliceStable(actions, func(i, j int) bool { return actions[i].ActualTime.Before(actions[j].ActualTime) })
	for _, a := range actions {
		if a.StartWorkflowResult != nil {
			info.RecentRuns = append(info.RecentRuns, a.StartWorkflowResult.WorkflowID)
		}
	}
	if n := len(actions); n > 0 && actions[n-1].StartWorkflowResult != nil {
		last := actions[n-1]
		run := &ScheduleRun{RunID: last.StartWorkflowResult.WorkflowID, At: last.ActualTime, State: "unknown"}
		if wd, err := c.DescribeWorkflowExecution(ctx, run.RunID, ""); err == nil {
			run.State = stateName(wd.GetWorkflowExecutionInfo().GetStatus())
		}
		info.Last = run
	}
	return info, nil
}

// actionMemo is a string of the memo a schedule's runs start with.
func actionMemo(a *client.ScheduleWorkflowAction, name string) string {
	p, ok := a.Memo[name].(*commonpb.Payload)
	if !ok {
		return ""
	}
	return MemoString(&commonpb.Memo{Fields: map[string]*commonpb.Payload{name: p}}, name)
}

// ListSchedules reads every schedule of the namespace, sorted by id. The listing is
// Temporal's visibility, which lags a create or delete by a moment; each schedule's
// details are read from the schedule itself.
func ListSchedules(ctx context.Context, c client.Client) ([]ScheduleInfo, error) {
	it, err := c.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	out := []ScheduleInfo{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		info, err := DescribeSchedule(ctx, c, e.ID)
		var gone *NoScheduleError
		if errors.As(err, &gone) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// PauseSchedule stops a schedule firing until it is unpaused; note shows in the listing.
func PauseSchedule(ctx context.Context, c client.Client, id, note string) error {
	if note == "" {
		note = "paused"
	}
	return scheduleErr(id, "pause", c.ScheduleClient().GetHandle(ctx, id).Pause(ctx, client.SchedulePauseOptions{Note: note}))
}

// UnpauseSchedule lets a paused schedule fire again.
func UnpauseSchedule(ctx context.Context, c client.Client, id, note string) error {
	if note == "" {
		note = "unpaused"
	}
	return scheduleErr(id, "unpause", c.ScheduleClient().GetHandle(ctx, id).Unpause(ctx, client.ScheduleUnpauseOptions{Note: note}))
}

// DeleteSchedule removes a schedule; runs it started keep going.
func DeleteSchedule(ctx context.Context, c client.Client, id string) error {
	return scheduleErr(id, "delete", c.ScheduleClient().GetHandle(ctx, id).Delete(ctx))
}

// TriggerResult is what a trigger did: started a run, or had the overlap policy skip
// or hold the firing.
type TriggerResult struct {
	ID      string `json:"schedule"`
	Overlap string `json:"overlap"`
	Outcome string `json:"outcome"`          // started, skipped or pending (buffered, or not seen yet)
	RunID   string `json:"run_id,omitempty"` // the run it started
}

// TriggerSchedule fires a schedule now under its overlap policy, and waits up to wait
// for the firing to start a run or be skipped. A paused schedule is refused with a
// PausedError unless force says to run it once anyway.
func TriggerSchedule(ctx context.Context, c client.Client, id string, force bool, wait time.Duration) (TriggerResult, error) {
	h := c.ScheduleClient().GetHandle(ctx, id)
	before, err := h.Describe(ctx)
	if err != nil {
		return TriggerResult{}, scheduleErr(id, "trigger", err)
	}
	if st := before.Schedule.State; st != nil && st.Paused && !force {
		return TriggerResult{}, &PausedError{ID: id}
	}
	res := TriggerResult{ID: id, Overlap: "skip", Outcome: "pending"}
	if p := before.Schedule.Policy; p != nil {
		res.Overlap = overlapName(p.Overlap)
	}
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		return res, scheduleErr(id, "trigger", err)
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		d, err := h.Describe(ctx)
		if err != nil {
			return res, scheduleErr(id, "trigger", err)
		}
		if d.Info.NumActions > before.Info.NumActions {
			res.Outcome = "started"
			latest := time.Time{}
			for _, a := range d.Info.RecentActions {
				if a.StartWorkflowResult != nil && !a.ActualTime.Before(latest) {
					latest, res.RunID = a.ActualTime, a.StartWorkflowResult.WorkflowID
				}
			}
			return res, nil
		}
		if d.Info.NumActionsSkippedOverlap > before.Info.NumActionsSkippedOverlap {
			res.Outcome = "skipped"
			return res, nil
		}
	}
	return res, nil
}

// ParseBackfillTime reads --from or --to: an RFC 3339 time.
func ParseBackfillTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(s))
	if err != nil {
		why := "give an RFC 3339 time, e.g. 2026-01-02T15:04:05Z or 2026-01-02T16:04:05+01:00"
		if strings.TrimSpace(s) == "" {
			why = "is required: " + why
		}
		return time.Time{}, &ScheduleError{Field: field, Value: s, Why: why}
	}
	return t, nil
}

// BackfillResult is what a backfill asked Temporal to start.
type BackfillResult struct {
	ID       string    `json:"schedule"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Firings  int       `json:"firings"` // firings of the spec in [from, to]
	Overlap  string    `json:"overlap"`
	Schedule string    `json:"cron"`
	TimeZone string    `json:"time_zone,omitempty"` // the zone the cron is read in; "" is UTC
}

// BackfillSchedule starts the runs the schedule would have started between from and
// to (both in the past), under overlap ("" is the schedule's own policy). It refuses a
// range in which the spec never fires, or fires more than MaxBackfill times.
func BackfillSchedule(ctx context.Context, c client.Client, id string, from, to time.Time, overlap string) (BackfillResult, error) {
	if !to.After(from) {
		return BackfillResult{}, &ScheduleError{Field: "to", Value: to.Format(time.RFC3339), Why: "must be after from (" + from.Format(time.RFC3339) + ")"}
	}
	if to.After(time.Now()) {
		return BackfillResult{}, &ScheduleError{Field: "to", Value: to.Format(time.RFC3339), Why: "is in the future: a backfill replays past firings; trigger starts a run now"}
	}
	if _, ok := overlapEnums[overlap]; !ok && overlap != "" {
		return BackfillResult{}, &ScheduleError{Field: "overlap", Value: overlap, Why: "must be one of " + strings.Join(OverlapPolicies, ", ")}
	}
	info, err := DescribeSchedule(ctx, c, id)
	if err != nil {
		return BackfillResult{}, err
	}
	res := BackfillResult{ID: id, From: from, To: to, Overlap: info.Overlap, Schedule: info.Cron, TimeZone: info.TimeZone}
	if overlap != "" {
		res.Overlap = overlap
	}
	spec, err := ParseCron(info.Cron)
	if err == nil && info.TimeZone != "" {
		loc, lerr := time.LoadLocation(info.TimeZone)
		if lerr != nil {
			err = lerr // the count would be in the wrong zone: leave it to Temporal
		}
		spec.Location = loc
	}
	if err == nil {
		res.Firings = spec.Count(from, to, MaxBackfill)
		if res.Firings == 0 {
			return res, &ScheduleError{Field: "from", Value: from.Format(time.RFC3339), Why: fmt.Sprintf("the schedule (%s) does not fire between from and to (%s): nothing to backfill", info.Spec(), to.Format(time.RFC3339))}
		}
		if res.Firings > MaxBackfill {
			return res, &ScheduleError{Field: "to", Value: to.Format(time.RFC3339), Why: fmt.Sprintf("the schedule (%s) fires more than %d times between from and to: backfill a shorter range", info.Spec(), MaxBackfill)}
		}
	}
	err = c.ScheduleClient().GetHandle(ctx, id).Backfill(ctx, client.ScheduleBackfillOptions{
		Backfill: []client.ScheduleBackfill{{Start: from, End: to, Overlap: overlapEnums[res.Overlap]}},
	})
	return res, scheduleErr(id, "backfill", err)
}
