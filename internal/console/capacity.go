package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/trawlerhq/trawler/internal/capacity"
	"github.com/trawlerhq/trawler/internal/engine"
)

// capacityReport: GET /api/capacity[?drain=10m] — what `trawler status --needs` shows:
// per task its learned needs, the live workers that qualify, its decay and batches
// waiting for capacity; per task queue its backlog and the workers it wants to drain it
// within drain (default 10 minutes).
func (s *Server) capacityReport(w http.ResponseWriter, r *http.Request) {
	drain := engine.DefaultDrain
	if v := r.URL.Query().Get("drain"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 15*time.Second {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("drain=%q: give a duration of at least 15s, e.g. drain=10m", v), "drain")
			return
		}
		drain = d
	}
	if s.redis == nil {
		writeError(w, http.StatusServiceUnavailable, "learned needs and worker capacities are kept in Redis, and none is configured here (start the console with --redis HOST:PORT or TRAWLER_REDIS)", "redis")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	ov, err := engine.GetOverview(ctx, s.cfg.Temporal, s.redis, 0)
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("read the fleet: %v", err), "")
		return
	}
	ov.PlanCapacity(capacity.Target{Drain: drain, Min: 1})
	writeJSON(w, http.StatusOK, ov.Capacity)
}
