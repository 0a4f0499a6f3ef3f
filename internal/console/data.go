package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/dedup"
	"github.com/trawlerhq/trawler/internal/recrawl"
	"github.com/trawlerhq/trawler/internal/storage/es"
	"github.com/trawlerhq/trawler/internal/storage/mongo"
)

// listItems: GET /api/items?biz=site.task&tenant=&page=1&size=50 — a page of a task's
// records in the hot store, latest fetch first; without biz, the tasks and their counts.
// Without tenant, every tenant's records (a scoped token's tenants').
func (s *Server) listItems(w http.ResponseWriter, r *http.Request) {
	if s.mongo == nil {
		writeError(w, http.StatusServiceUnavailable, "no MongoDB configured: start the console with --mongo mongodb://HOST:PORT (or TRAWLER_MONGO, or --data of a running trawler dev)", "mongo")
		return
	}
	tenants, ok := listTenants(w, r)
	if !ok {
		return
	}
	biz := r.URL.Query().Get("biz")
	if biz == "" {
		bizes, err := s.mongo.Bizes(r.Context(), tenants)
		if err != nil {
			writeError(w, http.StatusBadGateway, err.Error(), "")
			return
		}
		if bizes == nil {
			bizes = []mongo.BizCount{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"bizes": bizes})
		return
	}
	if !bizParam(w, biz) {
		return
	}
	page, ok := intParam(w, r, "page", 1, 1, 1_000_000)
	if !ok {
		return
	}
	size, ok := intParam(w, r, "size", 50, 1, 500)
	if !ok {
		return
	}
	items, total, err := s.mongo.Page(r.Context(), biz, tenants, (page-1)*size, size)
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error(), "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"biz": biz, "page": page, "size": size, "total": total, "items": items})
}

// bizParam checks a biz given by the caller, answering 400 when it cannot name a task:
// it names a collection, a table row or a file, so only a task's name is used.
func bizParam(w http.ResponseWriter, biz string) bool {
	if crawl.IsTaskName(biz) {
		return true
	}
	writeError(w, http.StatusBadRequest, fmt.Sprintf("biz %q: name the task as site.task (lowercase letters, digits and _), e.g. demo.story", biz), "biz")
	return false
}

// getItem: GET /api/items/{biz}/{key}?tenant=default — one of a tenant's records in the
// hot store. Records are per tenant, like history: another tenant's crawl of the same
// biz/key is another record.
func (s *Server) getItem(w http.ResponseWriter, r *http.Request) {
	it, _, ok := s.record(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, it)
}

// search: GET /api/search?q=&size=&from=&sort=&agg=&index=&tenant= (query-string
// syntax), or POST /api/search?index=&tenant= with a search body (query DSL) passed to
// Elasticsearch's _search as is (a search body reads; it cannot reach the write APIs).
// The index is trawler-items (the default), one task's trawler-<site>-<task>, or a
// tenant's alias trawler.<tenant>[.<site>-<task>]; with tenant, the first two become
// that tenant's aliases. The answer is Elasticsearch's.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	if s.es == nil {
		writeError(w, http.StatusServiceUnavailable, "no Elasticsearch configured: start the console with --es URL (or TRAWLER_ES)", "es")
		return
	}
	q := r.URL.Query()
	index := cmp.Or(q.Get("index"), es.Alias)
	// The index goes into the request path: only the names Trawler writes are searched,
	// so no value can address another API (x/_doc/1#) or another cluster's index.
	if err := es.CheckSearchable(index); err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "index")
		return
	}
	// With a tenant (named, or the only one a scoped token has), the search goes through
	// that tenant's filtered alias, the name an analyst's Elasticsearch role grants: the
	// query cannot reach another tenant's documents whatever it says.
	who := principalFrom(r)
	tenant := q.Get("tenant")
	if who.Scoped() {
		var ok bool
		if tenant, ok = readTenant(w, r); !ok {
			return
		}
	}
	if tenant != "" {
		if !crawl.IsDefaultTenant(tenant) && !crawl.IsTenantName(tenant) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("tenant %q: use lowercase letters, digits, - and _, starting with a letter or digit", tenant), "tenant")
			return
		}
		var err error
		if index, err = es.ForTenant(tenant, index); err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), "index")
			return
		}
	}
	var body []byte
	field := "q"
	if r.Method == http.MethodPost {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil { // capped by ServeHTTP
			if tooLarge(w, err) {
				return
			}
			writeError(w, http.StatusBadRequest, "read the search body: "+err.Error(), "body")
			return
		}
		if !json.Valid(body) {
			writeError(w, http.StatusBadRequest, "the search body is not valid JSON: send a query DSL object, e.g. {\"query\":{\"match\":{\"data.title\":\"go\"}}}", "body")
			return
		}
		field = "body"
	} else {
		size, ok := intParam(w, r, "size", 20, 0, 1000)
		if !ok {
			return
		}
		from, ok := intParam(w, r, "from", 0, 0, 10000)
		if !ok {
			return
		}
		var err error
		if body, err = (es.Query{Q: q.Get("q"), From: from, Size: size, Sort: q.Get("sort"), Aggs: q["agg"]}).Body(); err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), "sort")
			return
		}
	}
	if who.Scoped() {
		// Besides the alias, a scoped token's query is filtered on its tenant and may not
		// use the parts of the DSL that read past the query.
		var err error
		if body, err = scopeSearch(body, tenant); err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), field)
			return
		}
	}
	res, err := s.es.Search(s.es.Search.WithContext(r.Context()), s.es.Search.WithIndex(es.IndexPath(index)...), s.es.Search.WithBody(bytes.NewReader(body)))
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("cannot reach Elasticsearch at %s: %v", s.cfg.ES, err), "")
		return
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		writeError(w, http.StatusBadGateway, "read Elasticsearch's answer: "+err.Error(), "")
		return
	}
	if res.IsError() {
		var e struct {
			Error struct {
				Type, Reason string
			}
		}
		_ = json.Unmarshal(raw, &e)
		status := http.StatusBadRequest
		switch {
		case res.StatusCode == http.StatusNotFound:
			status = http.StatusNotFound
			field = "index"
		case res.StatusCode >= 500:
			status = http.StatusBadGateway
		}
		writeError(w, status, fmt.Sprintf("search failed (%s): %s: %s", res.Status(), e.Error.Type, e.Error.Reason), field)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(raw)
}

// dedupStats: GET /api/dedup?sample=50 — per namespace: items, buckets, bytes per entry
// and error rates.
func (s *Server) dedupStats(w http.ResponseWriter, r *http.Request) {
	if s.redis == nil {
		writeError(w, http.StatusServiceUnavailable, "dedup is off here: no Redis configured (start the console with --redis HOST:PORT or TRAWLER_REDIS)", "redis")
		return
	}
	sample, ok := intParam(w, r, "sample", 50, 1, 10000)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	d, err := dedup.Open(ctx, s.redis, dedup.Config{Log: s.cfg.Log})
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error(), "")
		return
	}
	names, err := d.Namespaces(ctx)
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error(), "")
		return
	}
	all := []dedup.Stats{}
	for _, n := range names {
		// Each namespace gets its own 30 s: a Redis with many tenants' namespaces holds
		// many buckets to count, and one slow namespace says more than a cut-off list.
		nctx, ncancel := context.WithTimeout(r.Context(), 30*time.Second)
		st, err := d.Stats(nctx, n, sample)
		ncancel()
		if err != nil {
			writeError(w, http.StatusBadGateway, err.Error(), "")
			return
		}
		all = append(all, st)
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespaces": all})
}

// recrawlStats: GET /api/recrawl — per recrawl step (tenant:task): planned pages, due
// and claimed ones, pages by planned interval, estimated share of changes seen late.
func (s *Server) recrawlStats(w http.ResponseWriter, r *http.Request) {
	if s.redis == nil {
		writeError(w, http.StatusServiceUnavailable, "recrawl plans live in Redis, and none is configured here (start the console with --redis HOST:PORT or TRAWLER_REDIS)", "redis")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	steps, err := recrawl.New(s.redis, nil).Stats(ctx)
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error(), "")
		return
	}
	if steps == nil {
		steps = []recrawl.Stats{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"steps": steps})
}

// scopedSearchKeys are the parts of a search body a scoped token may send: they read the
// documents the query matches, and nothing of the rest of the index.
var scopedSearchKeys = []string{"query", "size", "from", "sort", "aggs", "aggregations", "_source", "fields", "highlight", "track_total_hits", "search_after", "post_filter"}

// unscopedAggs see past the query (global) or compare with the whole index (significant
// terms and text): a scoped token's aggregations cannot use them.
var unscopedAggs = []string{`"global"`, `"significant_terms"`, `"significant_text"`, `"background_filter"`}

// scopeSearch limits a search body to tenant's documents: its query becomes a bool
// query that must match it and filters on the tenant field.
func scopeSearch(body []byte, tenant string) ([]byte, error) {
	var b map[string]json.RawMessage
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("the search body is not a JSON object: %v", err)
	}
	for k, v := range b {
		if !slices.Contains(scopedSearchKeys, k) {
			return nil, fmt.Errorf("search body key %q: a token scoped to tenants may send only %s", k, strings.Join(scopedSearchKeys, ", "))
		}
		if k == "aggs" || k == "aggregations" {
			for _, a := range unscopedAggs {
				if bytes.Contains(v, []byte(a)) {
					return nil, fmt.Errorf("aggregation %s reads documents of every tenant: a token scoped to tenants cannot use it", a)
				}
			}
		}
	}
	var q any = map[string]any{"match_all": map[string]any{}}
	if raw, ok := b["query"]; ok {
		q = raw
	}
	scoped, _ := json.Marshal(map[string]any{"bool": map[string]any{
		"must":   []any{q},
		"filter": []any{map[string]any{"term": map[string]any{"tenant": tenant}}},
	}})
	b["query"] = scoped
	return json.Marshal(b)
}

// record reads the record GET …/{biz}/{key...}?tenant= names from the hot store, for a
// caller allowed that tenant; on false it has answered the request with the reason.
func (s *Server) record(w http.ResponseWriter, r *http.Request) (crawl.Item, string, bool) {
	if s.mongo == nil {
		writeError(w, http.StatusServiceUnavailable, "no MongoDB configured: start the console with --mongo mongodb://HOST:PORT (or TRAWLER_MONGO)", "mongo")
		return crawl.Item{}, "", false
	}
	if !bizParam(w, r.PathValue("biz")) {
		return crawl.Item{}, "", false
	}
	tenant, ok := readTenant(w, r)
	if !ok {
		return crawl.Item{}, "", false
	}
	it, err := s.mongo.Get(r.Context(), tenant, r.PathValue("biz"), r.PathValue("key"))
	if errors.Is(err, mongo.ErrNoRecord) {
		writeError(w, http.StatusNotFound, err.Error(), "key")
		return crawl.Item{}, "", false
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error(), "")
		return crawl.Item{}, "", false
	}
	return it, tenant, true
}
