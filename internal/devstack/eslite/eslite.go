// Package eslite is a small Elasticsearch-compatible HTTP server over bleve, for the dev
// stack and for tests. It is a test and development server, not a product: one node, one
// shard per index, no security, no replicas, no scroll or point-in-time, and exact (slow)
// aggregations computed over every matching document in memory. It speaks enough of the
// Elasticsearch 8 REST API for the official go-elasticsearch client and for Trawler's es
// sink and `trawler search`.
//
// Every response carries `X-Elastic-Product: Elasticsearch`; `GET /` reports version 8.19.7.
// Indexes live on disk under <dataDir>/eslite/<index>/ (a meta.json with mappings, settings
// and aliases, and a bleve index), so a restarted server keeps them.
//
// Supported endpoints:
//
//	GET /                                   cluster info (version 8.19.7)
//	GET /_cluster/health                    always green
//	PUT /<index>                            settings (stored, ignored), mappings, aliases
//	HEAD|GET|DELETE /<index>                exists / describe / delete (GET and DELETE take patterns)
//	GET|PUT /<index>/_mapping               read / add properties
//	GET /_mapping                           every index's mappings
//	PUT|DELETE /<index>/_alias/<name>       add / remove an alias
//	GET|HEAD /_alias[/<name>], GET /<index>/_alias, POST /_aliases (add, remove actions)
//	POST /_bulk, POST /<index>/_bulk        index, create, delete actions (update is rejected per item)
//	GET|PUT|POST|DELETE /<index>/_doc/<id>  get / index / delete one document; POST /<index>/_doc auto id
//	POST /<index>/_create/<id>              create only
//	POST /[<index>/]_refresh                a no-op: writes are searchable when acknowledged
//	GET|POST /[<index>/]_count              query DSL or ?q=
//	GET|POST /[<index>/]_search             see below; ?q=, ?size=, ?from=, ?sort=f:desc also work
//
// <index> may be a name, an alias, a comma-separated list, a wildcard pattern such as
// `trawler-*`, or `_all`; writes to an alias need it to point at exactly one index.
//
// Mappings: field types text (standard-like analysis: unicode words, lowercased, no stop
// words), keyword, match_only_text (as text), wildcard (as keyword), long, integer, short,
// byte, unsigned_long, double, float, half_float, scaled_float, date (strict_date_optional_time
// or epoch_millis), boolean, object (properties) and multi-fields (`fields`). Unmapped fields
// are mapped dynamically as Elasticsearch does: strings as text with a `keyword`
// sub-field (or date when they parse as one), integers as long, other numbers as float,
// booleans as boolean, objects as object. A value that does not fit its mapping fails
// that document with mapper_parsing_exception. Other types (nested, geo_point, ...) are
// rejected when the mapping is created.
//
// Query DSL: match (operator, minimum_should_match), match_phrase (slop 0), multi_match
// (fields with ^boost and wildcards; best_fields, most_fields, phrase), term, terms, range
// (gt, gte, lt, lte on numbers, dates with date math such as now-1d/d or
// 2026-01-01||+1M, and keywords), exists, prefix, wildcard, ids, bool (must, should,
// filter, must_not, minimum_should_match as a count or a percentage), query_string (query,
// fields, default_field, default_operator; terms, "phrases", field:value, field:>N,
// field:[a TO b], wildcards, _exists_:f, AND, OR, NOT, &&, ||, !, +, -, parentheses),
// match_all and match_none. Queries on unmapped fields match nothing, as in
// Elasticsearch; sorting or aggregating on a text field is an error. Scores come from bleve's BM25 over one index's statistics
// (disjunctions add a coordination factor): orderings by relevance are close to
// Elasticsearch's, the values are not the same. filter clauses do not score.
//
// Search body: query, from, size (from+size <= 10000), sort (keyword, numeric, date and
// boolean fields, `_score`, `_doc` (which sorts by id), {"f":"desc"}, {"f":{"order":"asc"}};
// multi-valued fields sort by their min ascending and max descending, missing values
// last, ties by id; hits carry `sort` values), _source (bool,
// pattern, list, includes/excludes), track_total_hits (bool or a number), highlight
// (fields on text fields, pre_tags, post_tags; each value is returned whole with the matched
// terms wrapped) and aggs/aggregations.
//
// Aggregations: terms (size, order by _count or _key, min_doc_count), date_histogram
// (calendar_interval minute..year or 1m/1h/1d/1w/1M/1q/1y; fixed_interval such as 30m, 12h, 2d;
// UTC only; empty buckets filled with min_doc_count 0), histogram (interval, min_doc_count),
// range (ranges with from, to, key), avg, sum, min, max, value_count and cardinality
// (exact), with sub-aggregations under any bucket aggregation.
//
// Errors are shaped like Elasticsearch's: {"error":{"root_cause":[...],"type":...,
// "reason":...},"status":400}, and name the unsupported or malformed part.
package eslite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Version is the Elasticsearch version the server reports.
const Version = "8.19.7"

// Start serves an ES-compatible API on addr ("127.0.0.1:0" picks a free port), keeping
// indexes under <dataDir>/eslite/. It returns the base URL and a stop function that shuts
// the server down and closes the indexes.
func Start(dataDir string, addr string) (url string, stop func() error, err error) {
	dir := filepath.Join(dataDir, "eslite")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("eslite: %w", err)
	}
	srv := &server{dir: dir, indexes: map[string]*esIndex{}}
	if err := srv.load(); err != nil {
		srv.closeAll()
		return "", nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		srv.closeAll()
		return "", nil, fmt.Errorf("eslite: listen %s: %w", addr, err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			stopErr = hs.Shutdown(ctx)
			if err := srv.closeAll(); err != nil && stopErr == nil {
				stopErr = err
			}
		})
		return stopErr
	}
	return "http://" + ln.Addr().String(), stop, nil
}

type server struct {
	dir     string
	mu      sync.RWMutex
	indexes map[string]*esIndex
}

func (s *server) load() error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("eslite: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		ix, err := openIndex(filepath.Join(s.dir, e.Name()))
		if err != nil {
			return err
		}
		s.indexes[ix.name] = ix
	}
	return nil
}

func (s *server) closeAll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	for _, ix := range s.indexes {
		if err := ix.close(); err != nil && first == nil {
			first = err
		}
	}
	s.indexes = map[string]*esIndex{}
	return first
}

// esError is an error answered in Elasticsearch's shape.
type esError struct {
	status int
	typ    string
	reason string
	extra  map[string]any
}

func (e *esError) Error() string { return e.typ + ": " + e.reason }

func badRequest(typ, format string, args ...any) *esError {
	return &esError{status: 400, typ: typ, reason: fmt.Sprintf(format, args...)}
}

func parsingErr(format string, args ...any) *esError {
	return badRequest("parsing_exception", format, args...)
}

func notFoundIndex(name string) *esError {
	return &esError{status: 404, typ: "index_not_found_exception", reason: "no such index [" + name + "]",
		extra: map[string]any{"index": name, "resource.type": "index_or_alias", "resource.id": name}}
}

func (e *esError) body() map[string]any {
	cause := map[string]any{"type": e.typ, "reason": e.reason}
	for k, v := range e.extra {
		cause[k] = v
	}
	full := map[string]any{"root_cause": []any{cause}}
	for k, v := range cause {
		full[k] = v
	}
	return map[string]any{"error": full, "status": e.status}
}

func asESError(err error) *esError {
	var ee *esError
	if errors.As(err, &ee) {
		return ee
	}
	return &esError{status: 500, typ: "exception", reason: err.Error()}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	ee := asESError(err)
	writeJSON(w, ee.status, ee.body())
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Elastic-Product", "Elasticsearch")
	status, v, err := s.route(r)
	if err != nil {
		if r.Method == http.MethodHead {
			w.WriteHeader(asESError(err).status)
			return
		}
		writeErr(w, err)
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, v)
}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return []byte(sb.String()), nil
}

func decodeObject(body []byte) (map[string]any, error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return map[string]any{}, nil
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, badRequest("x_content_parse_exception", "request body is not a JSON object: %v", err)
	}
	return m, nil
}

func unsupported(r *http.Request) *esError {
	return badRequest("illegal_argument_exception", "eslite does not support [%s %s]", r.Method, r.URL.Path)
}

func (s *server) route(r *http.Request) (int, any, error) {
	parts := []string{}
	for _, p := range strings.Split(strings.Trim(r.URL.Path, "/"), "/") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	m := r.Method
	if len(parts) == 0 {
		if m == http.MethodGet || m == http.MethodHead {
			return 200, s.info(), nil
		}
		return 0, nil, unsupported(r)
	}
	body, _ := readBody(r)
	first := parts[0]
	if strings.HasPrefix(first, "_") && first != "_all" {
		switch {
		case first == "_cluster" && len(parts) >= 2 && parts[1] == "health":
			return 200, map[string]any{"cluster_name": "eslite", "status": "green", "timed_out": false, "number_of_nodes": 1, "number_of_data_nodes": 1}, nil
		case first == "_bulk" && len(parts) == 1:
			return s.bulk(r, "", body)
		case first == "_search" && len(parts) == 1:
			return s.search(r, "_all", body)
		case first == "_count" && len(parts) == 1:
			return s.count(r, "_all", body)
		case first == "_refresh" && len(parts) == 1:
			return 200, shards(), nil
		case first == "_mapping" && len(parts) == 1 && m == http.MethodGet:
			return s.getMapping("_all")
		case first == "_aliases" && len(parts) == 1:
			if m == http.MethodGet {
				return s.getAliases("_all", "")
			}
			return s.updateAliases(body)
		case first == "_alias" && (m == http.MethodGet || m == http.MethodHead):
			name := ""
			if len(parts) > 1 {
				name = parts[1]
			}
			return s.getAliases("_all", name)
		}
		return 0, nil, unsupported(r)
	}
	target := first
	if len(parts) == 1 {
		switch m {
		case http.MethodHead:
			if len(s.resolve(target)) == 0 {
				return 0, nil, notFoundIndex(target)
			}
			return 200, nil, nil
		case http.MethodPut:
			return s.createIndex(target, body)
		case http.MethodGet:
			return s.getIndex(target)
		case http.MethodDelete:
			return s.deleteIndex(target)
		}
		return 0, nil, unsupported(r)
	}
	op := parts[1]
	switch {
	case op == "_search" && len(parts) == 2:
		return s.search(r, target, body)
	case op == "_count" && len(parts) == 2:
		return s.count(r, target, body)
	case op == "_bulk" && len(parts) == 2:
		return s.bulk(r, target, body)
	case op == "_refresh" && len(parts) == 2:
		if len(s.resolve(target)) == 0 {
			return 0, nil, notFoundIndex(target)
		}
		return 200, shards(), nil
	case op == "_mapping" && len(parts) == 2:
		if m == http.MethodGet {
			return s.getMapping(target)
		}
		return s.putMapping(target, body)
	case (op == "_alias" || op == "_aliases") && len(parts) <= 3:
		name := ""
		if len(parts) == 3 {
			name = parts[2]
		}
		switch m {
		case http.MethodGet, http.MethodHead:
			return s.getAliases(target, name)
		case http.MethodPut, http.MethodPost:
			return s.putAlias(target, name)
		case http.MethodDelete:
			return s.deleteAlias(target, name)
		}
	case op == "_doc" || op == "_create":
		id := ""
		if len(parts) == 3 {
			id = parts[2]
		} else if len(parts) > 3 {
			return 0, nil, unsupported(r)
		}
		return s.doc(r, target, op, id, body)
	}
	return 0, nil, unsupported(r)
}

func shards() map[string]any {
	return map[string]any{"_shards": map[string]any{"total": 1, "successful": 1, "failed": 0}}
}

func (s *server) info() map[string]any {
	return map[string]any{
		"name":         "eslite",
		"cluster_name": "eslite",
		"cluster_uuid": "eslite-0000000000000000",
		"version": map[string]any{
			"number":                              Version,
			"build_flavor":                        "default",
			"build_type":                          "eslite",
			"lucene_version":                      "9.12.0",
			"minimum_wire_compatibility_version":  "7.17.0",
			"minimum_index_compatibility_version": "7.0.0",
		},
		"tagline": "You Know, for Search",
	}
}

var validIndexName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.+-]*$`)

// resolve expands an index expression (names, aliases, patterns, _all, commas) into the
// open indexes, sorted by name. Unknown exact names are left out; see resolveStrict.
func (s *server) resolve(expr string) []*esIndex {
	out, _ := s.resolveExpr(expr, false)
	return out
}

func (s *server) resolveStrict(expr string) ([]*esIndex, error) {
	return s.resolveExpr(expr, true)
}

func (s *server) resolveExpr(expr string, strict bool) ([]*esIndex, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[string]*esIndex{}
	for _, part := range strings.Split(expr, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if part == "_all" || part == "*" {
			for n, ix := range s.indexes {
				seen[n] = ix
			}
			continue
		}
		if strings.ContainsAny(part, "*?") {
			for n, ix := range s.indexes {
				if globMatch(part, n) {
					seen[n] = ix
					continue
				}
				for _, a := range ix.aliasNames() {
					if globMatch(part, a) {
						seen[n] = ix
					}
				}
			}
			continue
		}
		found := false
		if ix, ok := s.indexes[part]; ok {
			seen[part] = ix
			found = true
		}
		for n, ix := range s.indexes {
			if ix.hasAlias(part) {
				seen[n] = ix
				found = true
			}
		}
		if !found && strict {
			return nil, notFoundIndex(part)
		}
	}
	out := make([]*esIndex, 0, len(seen))
	for _, ix := range seen {
		out = append(out, ix)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// globMatch matches * and ? wildcards.
func globMatch(pattern, s string) bool {
	ok, _ := filepath.Match(pattern, s)
	if ok {
		return true
	}
	// filepath.Match does not let * cross '/', which index names do not contain; fall
	// back to a regexp for patterns with characters Match treats specially.
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	m, _ := regexp.MatchString(re, s)
	return m
}

// writeTarget resolves a name or alias to the single index a write goes to, creating
// the index (dynamic mappings) when nothing by that name exists.
func (s *server) writeTarget(name string) (*esIndex, error) {
	if strings.ContainsAny(name, "*?,") || name == "_all" {
		return nil, badRequest("illegal_argument_exception", "cannot write to [%s]: not a single index or alias", name)
	}
	ixs := s.resolve(name)
	switch len(ixs) {
	case 1:
		return ixs[0], nil
	case 0:
		if _, _, err := s.createIndex(name, nil); err != nil {
			var ee *esError
			if errors.As(err, &ee) && ee.typ == "resource_already_exists_exception" {
				return s.writeTarget(name)
			}
			return nil, err
		}
		return s.writeTarget(name)
	}
	return nil, badRequest("illegal_argument_exception", "no write index is defined for alias [%s]; the alias points to %d indices", name, len(ixs))
}

func (s *server) createIndex(name string, body []byte) (int, any, error) {
	if !validIndexName.MatchString(name) || name == "." || name == ".." {
		return 0, nil, badRequest("invalid_index_name_exception", "Invalid index name [%s], must be lowercase and must not contain spaces, commas, wildcards or the characters \\ / \" < > |", name)
	}
	req, err := decodeObject(body)
	if err != nil {
		return 0, nil, err
	}
	for k := range req {
		if k != "settings" && k != "mappings" && k != "aliases" {
			return 0, nil, parsingErr("unknown key [%s] for create index", k)
		}
	}
	meta := &indexMeta{Name: name, Settings: map[string]any{}, Mappings: map[string]any{"properties": map[string]any{}}, Aliases: map[string]map[string]any{}, Created: time.Now().UTC()}
	if st, ok := req["settings"].(map[string]any); ok {
		meta.Settings = st
	}
	if mp, ok := req["mappings"].(map[string]any); ok {
		if err := validateMappings(mp); err != nil {
			return 0, nil, err
		}
		if _, ok := mp["properties"]; !ok {
			mp["properties"] = map[string]any{}
		}
		meta.Mappings = mp
	}
	if al, ok := req["aliases"].(map[string]any); ok {
		for a, v := range al {
			o, _ := v.(map[string]any)
			if o == nil {
				o = map[string]any{}
			}
			meta.Aliases[a] = o
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.indexes[name]; ok {
		return 0, nil, &esError{status: 400, typ: "resource_already_exists_exception", reason: "index [" + name + "] already exists", extra: map[string]any{"index": name}}
	}
	for _, ix := range s.indexes {
		if ix.hasAlias(name) {
			return 0, nil, badRequest("invalid_index_name_exception", "Invalid index name [%s], already exists as alias", name)
		}
	}
	ix, err := createIndexOnDisk(filepath.Join(s.dir, name), meta)
	if err != nil {
		return 0, nil, err
	}
	s.indexes[name] = ix
	return 200, map[string]any{"acknowledged": true, "shards_acknowledged": true, "index": name}, nil
}

func (s *server) getIndex(expr string) (int, any, error) {
	ixs, err := s.resolveStrict(expr)
	if err != nil {
		return 0, nil, err
	}
	out := map[string]any{}
	for _, ix := range ixs {
		m := ix.snapshotMeta()
		out[ix.name] = map[string]any{"aliases": m.Aliases, "mappings": m.Mappings, "settings": map[string]any{"index": m.Settings}}
	}
	return 200, out, nil
}

func (s *server) deleteIndex(expr string) (int, any, error) {
	ixs, err := s.resolveStrict(expr)
	if err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ix := range ixs {
		delete(s.indexes, ix.name)
		_ = ix.close()
		if err := os.RemoveAll(ix.dir); err != nil {
			return 0, nil, err
		}
	}
	return 200, map[string]any{"acknowledged": true}, nil
}

func (s *server) getMapping(expr string) (int, any, error) {
	ixs, err := s.resolveStrict(expr)
	if err != nil {
		return 0, nil, err
	}
	out := map[string]any{}
	for _, ix := range ixs {
		out[ix.name] = map[string]any{"mappings": ix.snapshotMeta().Mappings}
	}
	return 200, out, nil
}

func (s *server) putMapping(expr string, body []byte) (int, any, error) {
	ixs, err := s.resolveStrict(expr)
	if err != nil {
		return 0, nil, err
	}
	req, err := decodeObject(body)
	if err != nil {
		return 0, nil, err
	}
	if err := validateMappings(req); err != nil {
		return 0, nil, err
	}
	for _, ix := range ixs {
		if err := ix.mergeMappings(req); err != nil {
			return 0, nil, err
		}
	}
	return 200, map[string]any{"acknowledged": true}, nil
}

func (s *server) getAliases(expr, name string) (int, any, error) {
	ixs, err := s.resolveStrict(expr)
	if err != nil {
		return 0, nil, err
	}
	out := map[string]any{}
	for _, ix := range ixs {
		m := ix.snapshotMeta()
		al := map[string]any{}
		for a, v := range m.Aliases {
			if name == "" || globMatch(name, a) {
				al[a] = v
			}
		}
		if name == "" || len(al) > 0 {
			out[ix.name] = map[string]any{"aliases": al}
		}
	}
	if name != "" && len(out) == 0 {
		return 0, nil, &esError{status: 404, typ: "aliases_not_found_exception", reason: "alias [" + name + "] missing"}
	}
	return 200, out, nil
}

func (s *server) putAlias(expr, name string) (int, any, error) {
	if name == "" || !validIndexName.MatchString(name) {
		return 0, nil, badRequest("invalid_alias_name_exception", "Invalid alias name [%s]", name)
	}
	ixs, err := s.resolveStrict(expr)
	if err != nil {
		return 0, nil, err
	}
	s.mu.RLock()
	_, clash := s.indexes[name]
	s.mu.RUnlock()
	if clash {
		return 0, nil, badRequest("invalid_alias_name_exception", "Invalid alias name [%s]: an index exists with the same name as the alias", name)
	}
	for _, ix := range ixs {
		if err := ix.setAlias(name, true); err != nil {
			return 0, nil, err
		}
	}
	return 200, map[string]any{"acknowledged": true}, nil
}

func (s *server) deleteAlias(expr, name string) (int, any, error) {
	ixs, err := s.resolveStrict(expr)
	if err != nil {
		return 0, nil, err
	}
	removed := false
	for _, ix := range ixs {
		if _, ok := ix.snapshotMeta().Aliases[name]; ok {
			removed = true
			if err := ix.setAlias(name, false); err != nil {
				return 0, nil, err
			}
		}
	}
	if !removed {
		return 0, nil, &esError{status: 404, typ: "aliases_not_found_exception", reason: "aliases [" + name + "] missing"}
	}
	return 200, map[string]any{"acknowledged": true}, nil
}

func (s *server) updateAliases(body []byte) (int, any, error) {
	req, err := decodeObject(body)
	if err != nil {
		return 0, nil, err
	}
	actions, ok := req["actions"].([]any)
	if !ok {
		return 0, nil, parsingErr("[aliases] requires an [actions] array")
	}
	for _, a := range actions {
		am, _ := a.(map[string]any)
		for kind, v := range am {
			o, _ := v.(map[string]any)
			idx, _ := o["index"].(string)
			alias, _ := o["alias"].(string)
			if idx == "" || alias == "" {
				return 0, nil, parsingErr("[%s] action needs [index] and [alias]", kind)
			}
			switch kind {
			case "add":
				if _, _, err := s.putAlias(idx, alias); err != nil {
					return 0, nil, err
				}
			case "remove":
				if _, _, err := s.deleteAlias(idx, alias); err != nil {
					return 0, nil, err
				}
			default:
				return 0, nil, parsingErr("unsupported alias action [%s] (eslite supports add and remove)", kind)
			}
		}
	}
	return 200, map[string]any{"acknowledged": true}, nil
}
