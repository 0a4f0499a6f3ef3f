package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/api/serviceerror"

	"github.com/trawlerhq/trawler/internal/engine"
)

// Tenant scoping: an operator's or analyst's token sees only its tenants. Another
// tenant's run, schedule, record, history or pool answers 404 in the same words as one
// that does not exist, so a scoped token cannot learn what other tenants have; lists
// hold only its tenants' rows. Admin and viewer tokens see every tenant.

// tenantList is a principal's tenants as messages name them.
func tenantList(p *Principal) string { return strings.Join(p.Tenants, ", ") }

// readTenant is the tenant a read of one tenant's data is for: ?tenant=, else the
// principal's only tenant, else the default one. A tenant the principal does not own
// answers 404.
func readTenant(w http.ResponseWriter, r *http.Request) (string, bool) {
	p := principalFrom(r)
	t := r.URL.Query().Get("tenant")
	if t == "" && p.Scoped() {
		if len(p.Tenants) > 1 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("name the tenant: add ?tenant= one of this token's tenants (%s)", tenantList(p)), "tenant")
			return "", false
		}
		t = p.Tenants[0]
	}
	t = tenantName(t)
	noteTenant(r, t)
	if !p.Owns(t) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("tenant %q is none of this token's tenants (%s)", t, tenantList(p)), "tenant")
		return "", false
	}
	return t, true
}

// listTenants are the tenants a listing holds: ?tenant= alone when given (404 when the
// principal does not own it), the principal's tenants for a scoped one, nil for every
// tenant.
func listTenants(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	p := principalFrom(r)
	if t := r.URL.Query().Get("tenant"); t != "" {
		if !p.Owns(t) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("tenant %q is none of this token's tenants (%s)", t, tenantList(p)), "tenant")
			return nil, false
		}
		return []string{t}, true
	}
	if p.Scoped() {
		return p.Tenants, true
	}
	return nil, true
}

// mayStart refuses an operator a chain of a tenant it does not own, with 403: the
// tenant is the one its own chain file names, so nothing is leaked.
func mayStart(w http.ResponseWriter, r *http.Request, tenant string) bool {
	p := principalFrom(r)
	noteTenant(r, tenant)
	if p.Owns(tenant) {
		return true
	}
	writeError(w, http.StatusForbidden, fmt.Sprintf("this token is an operator of tenants %s: it cannot start a chain of tenant %q; set tenant: in the chain file to one of its tenants", tenantList(p), tenantName(tenant)), "tenant")
	return false
}

// runTenant is the tenant a run was started for, from its memo.
func (s *Server) runTenant(ctx context.Context, id string) (string, error) {
	d, err := s.cfg.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return "", err
	}
	return tenantName(engine.MemoString(d.GetWorkflowExecutionInfo().GetMemo(), "tenant")), nil
}

// ownRun answers 404 to a scoped principal for a run that does not exist or is another
// tenant's — the same answer, so it learns nothing of other tenants' runs.
func (s *Server) ownRun(w http.ResponseWriter, r *http.Request, id string) bool {
	p := principalFrom(r)
	if !p.Scoped() {
		return true
	}
	t, err := s.runTenant(r.Context(), id)
	var nf *serviceerror.NotFound
	if err == nil && p.Owns(t) {
		noteTenant(r, t)
	}
	switch {
	case err == nil && p.Owns(t):
		return true
	case err == nil || errors.As(err, &nf):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no run %q among the runs of this token's tenants (%s)", id, tenantList(p)), "id")
	default:
		writeError(w, http.StatusBadGateway, err.Error(), "")
	}
	return false
}

// ownSchedule is ownRun for a schedule.
func (s *Server) ownSchedule(w http.ResponseWriter, r *http.Request, id string) bool {
	p := principalFrom(r)
	if !p.Scoped() {
		return true
	}
	info, err := engine.DescribeSchedule(r.Context(), s.cfg.Temporal, id)
	var gone *engine.NoScheduleError
	if err == nil && p.Owns(info.Tenant) {
		noteTenant(r, info.Tenant)
	}
	switch {
	case err == nil && p.Owns(info.Tenant):
		return true
	case err == nil || errors.As(err, &gone):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no schedule %q among the schedules of this token's tenants (%s)", id, tenantList(p)), "id")
	default:
		writeError(w, http.StatusBadGateway, err.Error(), "")
	}
	return false
}

// listRunsOf lists the runs of tenants (every tenant for nil), newest first, up to
// o.Limit.
func (s *Server) listRunsOf(ctx context.Context, o engine.ListOptions, tenants []string) ([]engine.RunInfo, error) {
	if len(tenants) == 0 {
		return engine.ListRuns(ctx, s.cfg.Temporal, o)
	}
	var all []engine.RunInfo
	for _, t := range tenants {
		o.Tenant = t
		runs, err := engine.ListRuns(ctx, s.cfg.Temporal, o)
		if err != nil {
			return nil, err
		}
		all = append(all, runs...)
	}
	slices.SortStableFunc(all, func(a, b engine.RunInfo) int { return cmp.Compare(b.Started.UnixNano(), a.Started.UnixNano()) })
	return all[:min(len(all), o.Limit)], nil
}
