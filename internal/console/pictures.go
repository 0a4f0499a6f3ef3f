package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// graphStep is a step of a chain as the console draws it: a box with its task and
// stores, an edge from every step in From (labelled with Each when the step takes one
// input per element of that list field), and a loop when it consumes itself.
type graphStep struct {
	ID       string   `json:"id"`
	Task     string   `json:"task"`
	From     []string `json:"from,omitempty"`
	Store    []string `json:"store,omitempty"`
	Each     string   `json:"each,omitempty"`
	MaxDepth int      `json:"max_depth,omitempty"`
}

// chainGraph lists a plan's steps with the edges between them. It carries no params: a
// read-only token may see it.
func chainGraph(p *crawl.Plan) []graphStep {
	from := map[string][]string{}
	each := map[string]string{}
	for _, st := range p.Steps {
		for _, c := range st.Consumers {
			id := p.Steps[c.Step].ID
			from[id] = append(from[id], st.ID)
			if c.Each != "" {
				each[id] = c.Each
			}
		}
	}
	steps := make([]graphStep, len(p.Steps))
	for i, st := range p.Steps {
		steps[i] = graphStep{ID: st.ID, Task: st.Task, From: from[st.ID], Store: st.Store, Each: each[st.ID], MaxDepth: st.MaxDepth}
	}
	return steps
}

// runChain: GET /api/runs/{id}/chain — the steps of the chain a run was started with
// (from the first event of its history), in the shape /api/chains/validate answers.
func (s *Server) runChain(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run id")
	if !ok || !s.ownRun(w, r, id) {
		return
	}
	plan, status, err := s.runPlan(r.Context(), id)
	if err != nil {
		writeError(w, status, err.Error(), map[int]string{http.StatusNotFound: "id"}[status])
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "chain": plan.Chain, "tenant": plan.Tenant, "steps": chainGraph(plan)})
}

// runPlan is the plan run id started with, read from the start of its history; the
// status to answer with when it cannot be read.
func (s *Server) runPlan(ctx context.Context, id string) (*crawl.Plan, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	it := s.cfg.Temporal.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var nf *serviceerror.NotFound
	if !it.HasNext() {
		return nil, http.StatusNotFound, fmt.Errorf("no run %q on this Temporal namespace", id)
	}
	ev, err := it.Next()
	if errors.As(err, &nf) {
		return nil, http.StatusNotFound, fmt.Errorf("no run %q on this Temporal namespace", id)
	}
	if err != nil {
		return nil, http.StatusBadGateway, fmt.Errorf("read the history of run %s: %v", id, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	var in workflows.ChainInput
	if attrs == nil || converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &in) != nil || len(in.Plan.Steps) == 0 {
		return nil, http.StatusNotFound, fmt.Errorf("run %q is not a chain run: its history does not start with a chain's plan", id)
	}
	return &in.Plan, 0, nil
}

// Workers beat every 5 s (engine.Worker.Start); a worker whose last beat is older than
// staleAfter is drawn as stale. The console remembers the beats it has seen for
// beatWindow.
const (
	staleAfter = 15 * time.Second
	beatWindow = 10 * time.Minute
)

// beats remembers, per worker, the beats the console has seen in Redis (each read of
// /api/fleet adds the latest ones): Redis keeps only a worker's last beat.
type beats struct {
	mu   sync.Mutex
	seen map[string][]time.Time // identity + " " + task queue → beat times, oldest first
}

// add records the workers' current beats and returns each worker's beats within the
// window.
func (b *beats) add(now time.Time, ws []monitor.WorkerBeat) map[string][]time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[string][]time.Time{}
	}
	out := map[string][]time.Time{}
	live := map[string]bool{}
	for _, w := range ws {
		k := w.Identity + " " + w.TaskQueue
		live[k] = true
		ts := b.seen[k]
		if n := len(ts); n == 0 || !ts[n-1].Equal(w.At) {
			ts = append(ts, w.At)
		}
		i := sort.Search(len(ts), func(i int) bool { return now.Sub(ts[i]) <= beatWindow })
		ts = ts[i:]
		b.seen[k] = ts
		out[k] = append([]time.Time(nil), ts...)
	}
	for k := range b.seen {
		if !live[k] {
			delete(b.seen, k) // gone from Redis: stopped cleanly, or older than a day
		}
	}
	return out
}

// fleet: GET /api/fleet — the workers' heartbeats: each worker's last beat, its age,
// whether it is stale, and the beats this console has seen in the last minutes.
func (s *Server) fleet(w http.ResponseWriter, r *http.Request) {
	if s.redis == nil {
		writeError(w, http.StatusServiceUnavailable, "worker heartbeats are kept in Redis, and none is configured here (start the console with --redis HOST:PORT or TRAWLER_REDIS)", "redis")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	ws, err := monitor.NewRecorder(s.redis).Workers(ctx)
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("read worker heartbeats from Redis: %v", err), "")
		return
	}
	now := time.Now().UTC()
	seen := s.beats.add(now, ws)
	type worker struct {
		monitor.WorkerBeat
		Stale bool        `json:"stale"`
		Beats []time.Time `json:"beats"`
	}
	out := make([]worker, 0, len(ws))
	for _, b := range ws {
		out = append(out, worker{WorkerBeat: b, Stale: now.Sub(b.At) > staleAfter, Beats: seen[b.Identity+" "+b.TaskQueue]})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Identity < b.Identity || (a.Identity == b.Identity && a.TaskQueue < b.TaskQueue)
	})
	writeJSON(w, http.StatusOK, map[string]any{"now": now, "stale_after_s": staleAfter.Seconds(), "window_s": beatWindow.Seconds(), "workers": out})
}
