package console

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// listRuns: GET /api/runs?chain=&tenant=&state=&limit=
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o := engine.ListOptions{Chain: q.Get("chain"), State: q.Get("state")}
	tenants, ok := listTenants(w, r)
	if !ok {
		return
	}
	if o.State != "" && !slices.Contains(engine.RunStates, o.State) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("state %q: want one of %s", o.State, strings.Join(engine.RunStates, ", ")), "state")
		return
	}
	if o.Limit, ok = intParam(w, r, "limit", 50, 1, 1000); !ok {
		return
	}
	runs, err := s.listRunsOf(r.Context(), o, tenants)
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error(), "")
		return
	}
	type row struct {
		engine.RunInfo
		TemporalUI string `json:"temporal_ui,omitempty"`
	}
	out := make([]row, len(runs))
	for i, run := range runs {
		out[i] = row{run, s.workflowURL(run.RunID)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out})
}

// intParam reads an integer query parameter within [lo, hi], answering 400 when it is
// not one.
func intParam(w http.ResponseWriter, r *http.Request, name string, def, lo, hi int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s %q: want a whole number from %d to %d", name, v, lo, hi), name)
		return 0, false
	}
	return n, true
}

// workflowURL links a run to its workflow in the Temporal Web UI.
func (s *Server) workflowURL(runID string) string {
	if s.cfg.TemporalUI == "" {
		return ""
	}
	return s.cfg.TemporalUI + "/namespaces/" + url.PathEscape(s.cfg.Namespace) + "/workflows/" + url.PathEscape(runID)
}

// chainRequest names a chain: a registered one (an example shipped in the binary) or
// the content of a chain file, with --set style overrides.
type chainRequest struct {
	Chain  string   `json:"chain,omitempty"`  // registered chain name, e.g. "demo"
	Source string   `json:"source,omitempty"` // a chain file's YAML
	File   string   `json:"file,omitempty"`   // the file name errors mention (default chain.yaml)
	Sets   []string `json:"sets,omitempty"`   // step.param=value or param=value
}

// pathID is the request's {id}, of a run or a schedule (what), answering 400 when no
// run or schedule can have it.
func pathID(w http.ResponseWriter, r *http.Request, what string) (string, bool) {
	id := r.PathValue("id")
	if err := engine.CheckID(what, id); err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "id")
		return "", false
	}
	return id, true
}

// decodeOne reads a request body holding one JSON value into v; anything after it but
// spaces is refused, so that a body cut or glued together by mistake does nothing.
// An empty body is io.EOF.
func decodeOne(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body) // capped by ServeHTTP
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	end := dec.InputOffset()
	if err := dec.Decode(&json.RawMessage{}); !errors.Is(err, io.EOF) {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return err
		}
		return fmt.Errorf("more follows the JSON value that ends at byte %d; send one JSON object", end)
	}
	return nil
}

// decode reads a JSON request body into v, answering 400 when it is not one.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := decodeOne(r, v); err != nil {
		if tooLarge(w, err) {
			return false
		}
		writeError(w, http.StatusBadRequest, "the request body is not the JSON this endpoint takes: "+err.Error(), "body")
		return false
	}
	return true
}

// registered lists the names of the chains shipped in the binary.
func registered() []string {
	files, _ := fs.Glob(examples.Files, "*.yaml")
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.TrimSuffix(f, ".yaml")
	}
	return names
}

// plan loads the chain a request names, answering the error when it cannot.
func (s *Server) plan(w http.ResponseWriter, req chainRequest) (*crawl.Plan, bool) {
	p, _, ok := s.planFrom(w, req)
	return p, ok
}

// planFrom is plan with where the chain came from: its file name and version.
func (s *Server) planFrom(w http.ResponseWriter, req chainRequest) (*crawl.Plan, engine.ChainSource, bool) {
	file, src := req.File, []byte(req.Source)
	switch {
	case req.Source != "" && req.Chain != "":
		writeError(w, http.StatusBadRequest, "give either chain (a registered chain) or source (a chain file's content), not both", "chain")
		return nil, engine.ChainSource{}, false
	case req.Source != "":
		if file == "" {
			file = "chain.yaml"
		}
	case req.Chain != "":
		var err error
		file = "examples/" + req.Chain + ".yaml"
		if src, err = examples.Files.ReadFile(req.Chain + ".yaml"); err != nil || strings.ContainsAny(req.Chain, "/.") {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no registered chain %q; registered: %s", req.Chain, strings.Join(registered(), ", ")), "chain")
			return nil, engine.ChainSource{}, false
		}
	default:
		writeError(w, http.StatusBadRequest, "give chain (a registered chain, e.g. \"demo\") or source (a chain file's content)", "source")
		return nil, engine.ChainSource{}, false
	}
	p, err := engine.LoadChain(file, src, req.Sets)
	if err != nil {
		writeChainError(w, err)
		return nil, engine.ChainSource{}, false
	}
	return p, engine.ChainSource{File: file, Version: engine.ChainVersion(src)}, true
}

// writeChainError answers 422 with every problem of a chain file and its line.
func writeChainError(w http.ResponseWriter, err error) {
	e := apiError{Error: err.Error(), Field: "source"}
	var ps crawl.Problems
	if errors.As(err, &ps) {
		for _, p := range ps {
			e.Problems = append(e.Problems, problem{Line: p.Line, Message: p.Msg})
		}
		if len(ps) > 0 && strings.Contains(ps[0].Msg, "--set") {
			e.Field = "sets"
		}
	}
	writeJSON(w, http.StatusUnprocessableEntity, e)
}

// startRun: POST /api/runs {"chain"|"source", "file", "sets"}
func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	var req chainRequest
	if !decode(w, r, &req) {
		return
	}
	p, ok := s.plan(w, req)
	if !ok || !mayStart(w, r, p.Tenant) {
		return
	}
	id, err := engine.Start(r.Context(), s.cfg.Temporal, p, engine.RunOptions{TaskQueue: s.cfg.TaskQueue, Tuning: s.cfg.Tuning})
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error(), "")
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"run_id": id, "chain": p.Chain, "page": "/runs/" + url.PathEscape(id), "temporal_ui": s.workflowURL(id)})
}

// cancelRun: POST /api/runs/{id}/cancel
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run id")
	if !ok || !s.ownRun(w, r, id) {
		return
	}
	var nf *serviceerror.NotFound
	d, err := s.cfg.Temporal.DescribeWorkflowExecution(r.Context(), id, "")
	if err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		st := strings.ToLower(strings.TrimPrefix(d.GetWorkflowExecutionInfo().GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_"))
		writeError(w, http.StatusConflict, fmt.Sprintf("run %s has already ended (%s)", id, st), "id")
		return
	}
	if err == nil {
		err = s.cfg.Temporal.CancelWorkflow(r.Context(), id, "")
	}
	if errors.As(err, &nf) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no running run %q: it does not exist or has already ended", id), "id")
		return
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("cancel run %s: %v", id, err), "")
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": id, "state": "canceling"})
}

// controlRun: POST /api/runs/{id}/pause and /resume. Like cancel, it needs an operator
// of the run's tenant (or an admin).
func (s *Server) controlRun(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := pathID(w, r, "run id")
		if !ok || !s.ownRun(w, r, id) {
			return
		}
		p := principalFrom(r)
		rc, err := engine.ControlRun(r.Context(), s.cfg.Temporal, s.redis, id, action, "console: "+p.Name)
		var state *engine.RunStateError
		switch {
		case errors.Is(err, engine.ErrNoRun):
			writeError(w, http.StatusNotFound, err.Error(), "id")
		case errors.As(err, &state):
			writeError(w, http.StatusConflict, err.Error(), "id")
		case err != nil:
			writeError(w, http.StatusBadGateway, err.Error(), "")
		default:
			writeJSON(w, http.StatusAccepted, rc)
		}
	}
}

// runView is a run's detail: its status, rates and failures grouped by cause.
type runView struct {
	*engine.Status
	Chain      string     `json:"chain,omitempty"`
	ElapsedS   float64    `json:"elapsed_s"`
	PagesPerS  float64    `json:"pages_per_s"`
	ItemsPerS  float64    `json:"items_per_s"`
	Steps      []stepView `json:"steps"`
	Causes     []cause    `json:"causes,omitempty"`
	TemporalUI string     `json:"temporal_ui,omitempty"`
	// Outcome is how a finished run went (workflows.Outcome*: completed,
	// completed_with_violations, partial, failed, canceled), as `trawler run --wait` exits on it; empty while the run goes on.
	Outcome string `json:"outcome,omitempty"`
}

type stepView struct {
	workflows.StepStats
	PagesPerS float64 `json:"pages_per_s"`
}

// cause is a failure cause shared by failed inputs, with some of their URLs.
type cause struct {
	Step    string      `json:"step"`
	Class   crawl.Cause `json:"class,omitempty"` // from the closed set of causes
	Cause   string      `json:"cause"`
	Count   int         `json:"count"`
	Samples []string    `json:"samples"`
}

// runDetail: GET /api/runs/{id}
func (s *Server) runDetail(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run id")
	if !ok || !s.ownRun(w, r, id) {
		return
	}
	st, err := engine.Describe(r.Context(), s.cfg.Temporal, id)
	if errors.Is(err, engine.ErrNoRun) {
		writeError(w, http.StatusNotFound, err.Error(), "id")
		return
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error(), "")
		return
	}
	if s.redis != nil {
		if beats, err := monitor.NewRecorder(s.redis).Workers(r.Context()); err == nil {
			st.WaitForWorkers(beats) // a run no live worker serves says so
		}
	}
	v := runView{Status: st, TemporalUI: s.workflowURL(id), Steps: []stepView{}}
	end := time.Now()
	if !st.Closed.IsZero() {
		end = st.Closed
	}
	v.ElapsedS = round(end.Sub(st.Started).Seconds())
	if p := st.Progress; p != nil {
		v.Chain = p.Chain
		var pages, items int
		for _, step := range p.Steps {
			pages += step.Pages
			items += step.Items
			v.Steps = append(v.Steps, stepView{step, perSecond(step.Pages, v.ElapsedS)})
		}
		v.PagesPerS, v.ItemsPerS = perSecond(pages, v.ElapsedS), perSecond(items, v.ElapsedS)
		v.Causes = topCauses(p.Failures, 5)
		if p.Done {
			v.Outcome = cmp.Or(p.Outcome, workflows.OutcomeOf(p))
		}
	}
	if st.State == "canceled" {
		v.Outcome = workflows.OutcomeCanceled
	}
	writeJSON(w, http.StatusOK, v)
}

func perSecond(n int, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return round(float64(n) / seconds)
}

func round(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// numbers are the parts of a cause that differ between inputs failing the same way
// (ids, ports, counts); they are blanked when causes are grouped.
var numbers = regexp.MustCompile(`\d+`)

// topCauses groups failures by step and cause (with the input's own URL and numbers
// blanked) and returns the n most frequent, with up to three sample URLs each.
func topCauses(fs []crawl.Failure, n int) []cause {
	byKey := map[string]*cause{}
	var order []*cause
	for _, f := range fs {
		in := f.Input.Describe()
		shape := numbers.ReplaceAllString(strings.ReplaceAll(f.Cause, in, "…"), "N")
		k := f.Step + "\x00" + string(f.Class) + "\x00" + shape
		c, ok := byKey[k]
		if !ok {
			c = &cause{Step: f.Step, Class: f.Class, Cause: f.Cause}
			byKey[k] = c
			order = append(order, c)
		}
		c.Count++
		if len(c.Samples) < 3 {
			c.Samples = append(c.Samples, in)
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].Count > order[j].Count })
	out := make([]cause, 0, min(n, len(order)))
	for _, c := range order[:min(n, len(order))] {
		out = append(out, *c)
	}
	return out
}

// listChains: GET /api/chains — the registered chains and the chains that have run.
func (s *Server) listChains(w http.ResponseWriter, r *http.Request) {
	runs, err := engine.ListRuns(r.Context(), s.cfg.Temporal, engine.ListOptions{Limit: 1000})
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error(), "")
		return
	}
	type ran struct {
		Chain     string    `json:"chain"`
		Runs      int       `json:"runs"`
		LastRun   string    `json:"last_run"`
		LastState string    `json:"last_state"`
		LastStart time.Time `json:"last_started"`
	}
	var out []*ran
	seen := map[string]*ran{}
	for _, run := range runs { // newest first
		if !principalFrom(r).Owns(run.Tenant) {
			continue
		}
		c := seen[run.Chain]
		if c == nil {
			c = &ran{Chain: run.Chain, LastRun: run.RunID, LastState: run.State, LastStart: run.Started}
			seen[run.Chain] = c
			out = append(out, c)
		}
		c.Runs++
	}
	writeJSON(w, http.StatusOK, map[string]any{"registered": registered(), "ran": out, "sets": s.cfg.Sets})
}

// registeredChain: GET /api/chains/registered/{name} — the chain file's content.
func (s *Server) registeredChain(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	src, err := examples.Files.ReadFile(name + ".yaml")
	if err != nil || strings.ContainsAny(name, "/.") {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no registered chain %q; registered: %s", name, strings.Join(registered(), ", ")), "name")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": name, "file": "examples/" + name + ".yaml", "source": string(src)})
}

// validateChain: POST /api/chains/validate {"source"|"chain", "file", "sets"} — 200 with
// the compiled steps (id, task, from, store, each, max_depth), or 422 with every problem and its line.
func (s *Server) validateChain(w http.ResponseWriter, r *http.Request) {
	var req chainRequest
	if !decode(w, r, &req) {
		return
	}
	p, ok := s.plan(w, req)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "chain": p.Chain, "tenant": p.Tenant, "steps": chainGraph(p)})
}
