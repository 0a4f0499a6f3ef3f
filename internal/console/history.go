package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/external"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
)

// itemHistory: GET /api/history/{biz}/{key}?tenant=default&n=50 — a tenant's stored
// versions of a record in HBase, newest first, each with the fields that changed from
// the version before. History is per tenant, like dedup: another tenant's crawls of the
// same biz/key are another record. The tenant is a parameter, as for runs and pools; a
// token scoped to tenants reads only its own (readTenant), another's is 404.
func (s *Server) itemHistory(w http.ResponseWriter, r *http.Request) {
	if s.hbase == nil {
		writeError(w, http.StatusServiceUnavailable, "no HBase configured: record history needs --hbase ZK_HOST:PORT (or TRAWLER_HBASE)", "hbase")
		return
	}
	n, ok := intParam(w, r, "n", 50, 1, 10000)
	if !ok {
		return
	}
	if !bizParam(w, r.PathValue("biz")) {
		return
	}
	tenant, ok := readTenant(w, r)
	if !ok {
		return
	}
	rec, err := s.hbase.History(r.Context(), tenant, r.PathValue("biz"), r.PathValue("key"), n)
	if errors.Is(err, hbase.ErrNotFound) {
		writeError(w, http.StatusNotFound, err.Error(), "key")
		return
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error(), "")
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// hbaseProbe reads a row no record uses: an answer, even "not found", means HBase serves.
func (s *Server) hbaseProbe(ctx context.Context) error {
	_, err := s.hbase.History(ctx, crawl.DefaultTenant, "_console", "healthz", 1)
	if errors.Is(err, hbase.ErrNotFound) {
		return nil
	}
	return err
}

// pools: GET /api/pools?tenant= — every resource pool (cookies, proxies, device ids, user
// agents) with its size, free, in-use and banned items; GET
// /api/pools/{tenant}/{site}/{kind} — one pool with each item's counters.
func (s *Server) pools(w http.ResponseWriter, r *http.Request) {
	if s.redis == nil {
		writeError(w, http.StatusServiceUnavailable, "no Redis configured: resource pools live in Redis (--redis HOST:PORT or TRAWLER_REDIS)", "redis")
		return
	}
	reveal, ok := s.revealAsked(w, r)
	if !ok {
		return
	}
	p := external.NewPools(s.redis, s.cfg.Log)
	if r.PathValue("kind") == "" {
		tenants, ok := listTenants(w, r)
		if !ok {
			return
		}
		all, err := p.List(r.Context(), r.URL.Query().Get("tenant"))
		if err != nil {
			writeError(w, http.StatusBadGateway, "list pools: "+err.Error(), "")
			return
		}
		all = slices.DeleteFunc(all, func(st *external.PoolStats) bool {
			return tenants != nil && !slices.Contains(tenants, tenantName(st.Tenant))
		})
		for i, st := range all {
			if !reveal {
				break
			}
			if all[i], err = p.Reveal(r.Context(), st.Tenant, st.Site, st.Kind); err != nil {
				writeError(w, http.StatusBadGateway, "read pool: "+err.Error(), "")
				return
			}
		}
		if all == nil {
			all = []*external.PoolStats{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"pools": all})
		return
	}
	kind, err := external.ParseKind(r.PathValue("kind"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "kind")
		return
	}
	if who := principalFrom(r); !who.Owns(r.PathValue("tenant")) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no pool %s/%s/%s among the pools of this token's tenants (%s)", r.PathValue("tenant"), r.PathValue("site"), kind, tenantList(who)), "kind")
		return
	}
	var st *external.PoolStats
	if reveal {
		st, err = p.Reveal(r.Context(), r.PathValue("tenant"), r.PathValue("site"), kind)
	} else {
		st, err = p.Stats(r.Context(), r.PathValue("tenant"), r.PathValue("site"), kind, true)
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, "read pool: "+err.Error(), "")
		return
	}
	if st.Size == 0 && len(st.Counts) == 0 {
		writeError(w, http.StatusNotFound, "no pool "+r.PathValue("tenant")+"/"+r.PathValue("site")+"/"+string(kind), "kind")
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// revealAsked reads the reveal parameter: pool values (cookies, proxy passwords, device
// ids, signer keys) are shown only when asked for, and only to the full-access token.
func (s *Server) revealAsked(w http.ResponseWriter, r *http.Request) (reveal, ok bool) {
	v := r.URL.Query().Get("reveal")
	switch v {
	case "", "0", "false":
		return false, true
	case "1", "true":
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reveal %q: use reveal=1 to see the items' values, or leave it out", v), "reveal")
		return false, false
	}
	switch p := principalFrom(r); {
	case p.Role == RoleAdmin, p.Role == RoleOperator && p.Reveal:
	case p.Role == RoleOperator:
		writeError(w, http.StatusForbidden, "reveal=1 shows pool values (cookies, proxy passwords, device ids): this operator token was created without --reveal; ask an admin for one made with `trawler token create --role operator --reveal`, or use the full-access token; leave reveal out to see the items with their values masked", "reveal")
		return false, false
	default:
		writeError(w, http.StatusForbidden, "reveal=1 shows pool values (cookies, proxy passwords, device ids), which only the full-access token or an operator token made with --reveal may see; this token is a"+article(p.Role)+" "+string(p.Role)+"'s: leave reveal out to see the items with their values masked", "reveal")
		return false, false
	}
	return true, true
}
