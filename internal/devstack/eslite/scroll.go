package eslite

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A scroll is a search read page by page: the first request (?scroll=1m) snapshots the
// documents its indexes hold, as a point in time does, and each POST /_search/scroll
// returns the next size hits of the same query over that snapshot. Pages are cut from
// the whole ordered result, so a scroll has no result-window limit; a write made during
// the scroll is not seen, though it may move the BM25 scores of the snapshot's documents.
type scroll struct {
	pit    *pointInTime
	expr   string         // the index expression, so alias filters keep applying
	body   map[string]any // the search, without from
	params url.Values     // rest_total_hits_as_int, typed_keys
	offset int            // hits already returned
	size   int
}

type scrolls struct {
	mu   sync.Mutex
	open map[string]*scroll
}

// scrollKey marks, in a request's context, the scroll a search reads a page of.
type scrollKey struct{}

func scrollOf(r *http.Request) *scroll {
	sc, _ := r.Context().Value(scrollKey{}).(*scroll)
	return sc
}

// openScroll runs the first page of a search that asked for ?scroll.
func (s *server) openScroll(r *http.Request, expr string, req map[string]any) (int, any, error) {
	q := r.URL.Query()
	d, err := keepAlive(q.Get("scroll"))
	if err != nil {
		return 0, nil, err
	}
	var problems []string
	if from, _ := intParam(req["from"], "from", 0); from > 0 {
		problems = append(problems, "using [from] is not allowed in a scroll context")
	}
	if size, err := intParam(req["size"], "size", 10); err == nil && size == 0 {
		problems = append(problems, "[size] cannot be [0] in a scroll context")
	}
	if req["pit"] != nil {
		problems = append(problems, "using [point in time] is not allowed in a scroll context")
	}
	if len(problems) > 0 {
		for i := range problems {
			problems[i] = strconv.Itoa(i+1) + ": " + problems[i]
		}
		return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: %s;", strings.Join(problems, ";"))
	}
	t, err := s.searchTarget(r, expr)
	if err != nil {
		return 0, nil, err
	}
	p, err := snapshot(t, d)
	if err != nil {
		return 0, nil, err
	}
	size, err := intParam(req["size"], "size", 10)
	if err != nil {
		return 0, nil, err
	}
	delete(req, "from")
	sc := &scroll{pit: p, expr: expr, body: req, size: size, params: url.Values{}}
	for _, k := range []string{"rest_total_hits_as_int", "typed_keys"} {
		if v := q.Get(k); v != "" {
			sc.params.Set(k, v)
		}
	}
	id := newContextID()
	st, out, err := s.scrollPage(r, sc, id)
	if err != nil {
		return 0, nil, err
	}
	s.scrolls.mu.Lock()
	if s.scrolls.open == nil {
		s.scrolls.open = map[string]*scroll{}
	}
	// Scrolls nobody reads to the end or clears expire: drop them as new ones open.
	for old, x := range s.scrolls.open {
		if time.Now().After(x.pit.expires) {
			delete(s.scrolls.open, old)
		}
	}
	s.scrolls.open[id] = sc
	s.scrolls.mu.Unlock()
	return st, out, nil
}

// scrollPage runs the scroll's search for its next page and moves it on.
func (s *server) scrollPage(r *http.Request, sc *scroll, id string) (int, any, error) {
	body := map[string]any{}
	for k, v := range sc.body {
		body[k] = v
	}
	body["from"] = sc.offset
	raw, _ := json.Marshal(body)
	sub := r.Clone(context.WithValue(r.Context(), scrollKey{}, sc))
	sub.URL = &url.URL{Path: "/" + sc.expr + "/_search", RawQuery: sc.params.Encode()}
	st, out, err := s.search(sub, sc.expr, raw)
	if err != nil {
		return 0, nil, err
	}
	m := out.(map[string]any)
	if hits, ok := m["hits"].(map[string]any)["hits"].([]any); ok {
		sc.offset += len(hits)
	}
	m["_scroll_id"] = id
	return st, m, nil
}

// scrollAPI serves POST|GET /_search/scroll[/<id>] (next page) and DELETE (clear).
func (s *server) scrollAPI(r *http.Request, rest []string, body []byte) (int, any, error) {
	req, err := decodeObject(body)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	var ids []string
	for _, v := range clauses(req["scroll_id"]) {
		ids = append(ids, scalarString(v))
	}
	if v := q.Get("scroll_id"); v != "" {
		ids = append(ids, strings.Split(v, ",")...)
	}
	if len(rest) == 1 {
		ids = append(ids, strings.Split(rest[0], ",")...)
	}
	if r.Method == http.MethodDelete {
		return s.clearScroll(ids)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return 0, nil, unsupported(r)
	}
	if len(ids) == 0 {
		return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: 1: scrollId is missing;")
	}
	id := ids[0]
	if !validContextID(id) {
		return 0, nil, badRequest("illegal_argument_exception", "Cannot parse scroll id")
	}
	ka := q.Get("scroll")
	if v, ok := req["scroll"]; ok {
		ka = scalarString(v)
	}
	s.scrolls.mu.Lock()
	defer s.scrolls.mu.Unlock()
	sc := s.scrolls.open[id]
	if sc == nil || time.Now().After(sc.pit.expires) {
		delete(s.scrolls.open, id)
		missing := &esError{status: 404, typ: "search_context_missing_exception", reason: "No search context found for id [" + id + "]"}
		cause := missing.body()["error"].(map[string]any)["root_cause"]
		return 0, nil, &esError{status: 404, typ: "search_phase_execution_exception", reason: "all shards failed",
			extra: map[string]any{"phase": "query", "grouped": true, "failed_shards": cause}}
	}
	if ka != "" {
		d, err := keepAlive(ka)
		if err != nil {
			return 0, nil, err
		}
		sc.pit.expires = time.Now().Add(d)
	}
	return s.scrollPage(r, sc, id)
}

// clearScroll frees the scrolls named, or every one for _all.
func (s *server) clearScroll(ids []string) (int, any, error) {
	if len(ids) == 0 {
		return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: 1: no scroll ids specified;")
	}
	s.scrolls.mu.Lock()
	defer s.scrolls.mu.Unlock()
	freed := 0
	for _, id := range ids {
		if id == "_all" {
			freed += len(s.scrolls.open)
			s.scrolls.open = nil
			continue
		}
		if !validContextID(id) {
			return 0, nil, badRequest("illegal_argument_exception", "Cannot parse scroll id")
		}
		if _, ok := s.scrolls.open[id]; ok {
			delete(s.scrolls.open, id)
			freed++
		}
	}
	if freed == 0 {
		return 404, map[string]any{"succeeded": true, "num_freed": 0}, nil
	}
	return 200, map[string]any{"succeeded": true, "num_freed": freed}, nil
}

// validContextID reports whether id has the shape of the ids eslite gives out.
func validContextID(id string) bool {
	b, err := base64.URLEncoding.DecodeString(id)
	return err == nil && len(b) == 24
}
