package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/internal/engine"
)

// scheduleRequest creates a schedule of a chain.
type scheduleRequest struct {
	ID             string `json:"id"`
	Cron           string `json:"cron"`
	TimeZone       string `json:"time_zone,omitempty"`      // IANA name the cron is read in, e.g. "Asia/Shanghai"; default UTC
	Overlap        string `json:"overlap,omitempty"`        // one of engine.OverlapPolicies; default skip
	CatchupWindow  string `json:"catchup_window,omitempty"` // a duration, e.g. "1h"
	PauseOnFailure bool   `json:"pause_on_failure,omitempty"`
	Jitter         string `json:"jitter,omitempty"` // a duration, e.g. "5m"
	Note           string `json:"note,omitempty"`
	chainRequest
}

// backfillRequest replays a schedule's firings between two past times.
type backfillRequest struct {
	From    string `json:"from"`              // RFC 3339
	To      string `json:"to"`                // RFC 3339
	Overlap string `json:"overlap,omitempty"` // default the schedule's own
}

// noteRequest is the optional body of pause and unpause.
type noteRequest struct {
	Note string `json:"note,omitempty"`
}

// triggerWait is how long a trigger waits to see its run start or be skipped.
const triggerWait = 10 * time.Second

// listSchedules: GET /api/schedules
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	rows, err := engine.ListSchedules(r.Context(), s.cfg.Temporal)
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error(), "")
		return
	}
	rows = slices.DeleteFunc(rows, func(sc engine.ScheduleInfo) bool { return !principalFrom(r).Owns(sc.Tenant) })
	writeJSON(w, http.StatusOK, map[string]any{"schedules": rows, "overlap_policies": engine.OverlapPolicies})
}

// writeScheduleError answers a refused setting with 400 and its field, a missing
// schedule with 404, anything else with 502.
func writeScheduleError(w http.ResponseWriter, id string, err error) {
	var se *engine.ScheduleError
	var gone *engine.NoScheduleError
	switch {
	case errors.As(err, &se):
		writeError(w, http.StatusBadRequest, se.Error(), se.Field)
	case errors.As(err, &gone):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no schedule named %q; GET /api/schedules lists them", id), "id")
	default:
		writeError(w, http.StatusBadGateway, err.Error(), "")
	}
}

// createSchedule: POST /api/schedules {"id", "cron", "time_zone", "overlap",
// "catchup_window", "pause_on_failure", "jitter", "note", "chain"|"source", "file", "sets"}
func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) {
	var req scheduleRequest
	if !decode(w, r, &req) {
		return
	}
	if err := engine.CheckScheduleID(req.ID); err != nil {
		writeScheduleError(w, req.ID, err)
		return
	}
	if strings.TrimSpace(req.Cron) == "" {
		writeError(w, http.StatusBadRequest, "cron is required: minute hour day-of-month month day-of-week, e.g. \"0 * * * *\" for hourly", "cron")
		return
	}
	cfg := engine.ScheduleConfig{Cron: req.Cron, TimeZone: req.TimeZone, Overlap: req.Overlap, PauseOnFailure: req.PauseOnFailure, Note: req.Note}
	var err error
	if cfg.CatchupWindow, err = engine.ParseScheduleDuration("catchup_window", req.CatchupWindow); err == nil {
		cfg.Jitter, err = engine.ParseScheduleDuration("jitter", req.Jitter)
	}
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		writeScheduleError(w, req.ID, err)
		return
	}
	p, src, ok := s.planFrom(w, req.chainRequest)
	if !ok || !mayStart(w, r, p.Tenant) {
		return
	}
	file := src.File
	err = engine.CreateScheduleWith(r.Context(), s.cfg.Temporal, req.ID, src, cfg, p, engine.RunOptions{TaskQueue: s.cfg.TaskQueue, Tuning: s.cfg.Tuning})
	var exists *serviceerror.AlreadyExists
	var bad *serviceerror.InvalidArgument
	overlap := cfg.Overlap
	if overlap == "" {
		overlap = "skip"
	}
	switch {
	case err == nil:
		res := map[string]string{"id": req.ID, "cron": strings.TrimSpace(req.Cron), "chain": p.Chain, "file": file, "version": src.Version, "overlap": overlap}
		if tz := strings.TrimSpace(req.TimeZone); tz != "" && tz != "UTC" && tz != "Etc/UTC" {
			res["time_zone"] = tz // as the listing: left out for UTC
		}
		writeJSON(w, http.StatusCreated, res)
	case errors.As(err, &exists) || strings.Contains(err.Error(), "already"):
		writeError(w, http.StatusConflict, fmt.Sprintf("a schedule %q exists already: delete it first or pick another id", req.ID), "id")
	case errors.As(err, &bad):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("cron %q: %s", req.Cron, bad.Message), "cron")
	default:
		writeScheduleError(w, req.ID, err)
	}
}

// updateScheduleChain: PUT /api/schedules/{id}/chain {"chain"|"source", "file", "sets"}
// replaces the chain the schedule runs, checked as a new one is; a schedule keeps the
// chain it was given until then.
func (s *Server) updateScheduleChain(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "schedule id")
	if !ok || !s.ownSchedule(w, r, id) {
		return
	}
	var req chainRequest
	if !decode(w, r, &req) {
		return
	}
	p, src, ok := s.planFrom(w, req)
	if !ok || !mayStart(w, r, p.Tenant) {
		return
	}
	if err := engine.UpdateScheduleChain(r.Context(), s.cfg.Temporal, id, src, p, engine.RunOptions{TaskQueue: s.cfg.TaskQueue, Tuning: s.cfg.Tuning}); err != nil {
		writeScheduleError(w, id, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "done": "updated", "chain": p.Chain, "file": src.File, "version": src.Version})
}

// decodeOptional reads a JSON body into v when there is one.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := decodeOne(r, v); err != nil && !errors.Is(err, io.EOF) {
		if tooLarge(w, err) {
			return false
		}
		writeError(w, http.StatusBadRequest, "body: "+err.Error(), "body")
		return false
	}
	return true
}

// scheduleAction answers a pause, unpause or delete.
func scheduleAction(w http.ResponseWriter, id, verb string, err error) {
	if err != nil {
		writeScheduleError(w, id, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "done": verb})
}

// pauseSchedule: POST /api/schedules/{id}/pause [{"note"}]
func (s *Server) pauseSchedule(w http.ResponseWriter, r *http.Request) {
	s.noteAction(w, r, "paused", "paused from the console", engine.PauseSchedule)
}

// unpauseSchedule: POST /api/schedules/{id}/unpause [{"note"}]
func (s *Server) unpauseSchedule(w http.ResponseWriter, r *http.Request) {
	s.noteAction(w, r, "unpaused", "resumed from the console", engine.UnpauseSchedule)
}

// noteAction runs a schedule action that records a note (the request's, or def).
func (s *Server) noteAction(w http.ResponseWriter, r *http.Request, verb, def string, act func(context.Context, client.Client, string, string) error) {
	req := noteRequest{}
	if !decodeOptional(w, r, &req) {
		return
	}
	if req.Note == "" {
		req.Note = def
	}
	id, ok := pathID(w, r, "schedule id")
	if !ok || !s.ownSchedule(w, r, id) {
		return
	}
	scheduleAction(w, id, verb, act(r.Context(), s.cfg.Temporal, id, req.Note))
}

// deleteSchedule: DELETE /api/schedules/{id}
func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "schedule id")
	if !ok || !s.ownSchedule(w, r, id) {
		return
	}
	scheduleAction(w, id, "deleted", engine.DeleteSchedule(r.Context(), s.cfg.Temporal, id))
}

// triggerSchedule: POST /api/schedules/{id}/trigger [{"force": true}] fires the schedule
// now under its overlap policy: {"outcome": "started"|"skipped"|"pending", "run_id"}. A
// paused schedule is refused with 409 unless force says to run it once anyway.
func (s *Server) triggerSchedule(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "schedule id")
	if !ok || !s.ownSchedule(w, r, id) {
		return
	}
	var req struct {
		Force bool `json:"force"`
	}
	if !decodeOptional(w, r, &req) {
		return
	}
	res, err := engine.TriggerSchedule(r.Context(), s.cfg.Temporal, id, req.Force, triggerWait)
	var paused *engine.PausedError
	if errors.As(err, &paused) {
		writeError(w, http.StatusConflict, fmt.Sprintf("schedule %s is paused; resume it first, or trigger with {\"force\": true} to run it once anyway", id), "force")
		return
	}
	if err != nil {
		writeScheduleError(w, id, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// backfillSchedule: POST /api/schedules/{id}/backfill {"from", "to", "overlap"}
func (s *Server) backfillSchedule(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "schedule id")
	if !ok || !s.ownSchedule(w, r, id) {
		return
	}
	var req backfillRequest
	if !decode(w, r, &req) {
		return
	}
	from, err := engine.ParseBackfillTime("from", req.From)
	if err != nil {
		writeScheduleError(w, id, err)
		return
	}
	to, err := engine.ParseBackfillTime("to", req.To)
	if err != nil {
		writeScheduleError(w, id, err)
		return
	}
	res, err := engine.BackfillSchedule(r.Context(), s.cfg.Temporal, id, from, to, req.Overlap)
	if err != nil {
		writeScheduleError(w, id, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
