package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/trawlerhq/trawler/internal/polite"
)

// hostBudgets: GET /api/hosts — what `trawler status` shows per host budget: the limit
// in force and where it comes from, the current rate, requests in flight, a pause with
// its reason, and the last 429/503; newest first, every budget Redis keeps. Budgets are
// the fleet's, shared by every tenant that crawls the host: admin and viewer tokens
// read them all, and a token scoped to tenants gets 403 (it would see other tenants'
// hosts).
func (s *Server) hostBudgets(w http.ResponseWriter, r *http.Request) {
	if s.redis == nil {
		writeError(w, http.StatusServiceUnavailable, "host budgets are kept in Redis, and none is configured here (start the console with --redis HOST:PORT or TRAWLER_REDIS)", "redis")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	hosts, err := polite.Hosts(ctx, s.redis, 0)
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("read host budgets from Redis: %v", err), "")
		return
	}
	if hosts == nil {
		hosts = []polite.Host{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"now": time.Now().UTC(), "hosts": hosts})
}
