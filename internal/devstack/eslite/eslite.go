// Package eslite is a small Elasticsearch-compatible HTTP server over bleve, for the dev
// stack and for tests. It is a test and development server, not a product: one node, one
// shard per index (routing is kept and, on indexes created with several shards, a get
// must name the routing a document was written with), no security, no replicas,
// writes searchable as soon as they are acknowledged (except with
// refresh_interval -1, where searches and gets with realtime=false see the last refresh;
// see refresh.go), and exact (slow) aggregations and scoring computed over every
// matching document in memory. It speaks enough of the Elasticsearch 8 REST API for the
// official go-elasticsearch client, Trawler's es sink and `trawler search`, and is
// measured against Elasticsearch's own YAML REST tests (see below).
//
// Every response carries `X-Elastic-Product: Elasticsearch`; `GET /` reports version 8.19.7.
// Indexes live on disk under <dataDir>/eslite/<index>/ (a meta.json with mappings, settings
// and aliases, and a bleve index), so a restarted server keeps them.
//
// Supported endpoints:
//
//	GET /                                   cluster info (version 8.19.7)
//	GET /_cluster/health                    always green
//	GET|PUT /_cluster/settings              persistent and transient settings (flat_settings); eslite
//	                                        applies search.max_buckets
//	PUT /<index>                            settings (stored, reported by _settings), mappings, aliases;
//	                                        <index> may be date math such as <logs-{now/d}>
//	HEAD|GET|DELETE /<index>                exists / describe / delete (GET and DELETE take patterns)
//	POST /<index>/_close, /<index>/_open    closed indexes are left out of wildcards and refuse searches
//	GET /[<index>/]_settings[/<name>]       settings as Elasticsearch nests them, with defaults
//	PUT /<index>/_settings                  merge settings
//	GET /[<index>/]_stats                   docs and indexing counters (index_total, noop_update_total)
//	GET|PUT /<index>/_mapping               read / add properties (dotted names expand to objects)
//	GET /_mapping                           every index's mappings
//	PUT|DELETE /<index>/_alias/<name>       add (filter, routing, is_write_index kept) / remove
//	GET|HEAD /_alias[/<names>], GET /<index>/_alias[/<names>], POST /_aliases (add, remove)
//	                                        names are lists with wildcards, _all and -exclusions;
//	                                        missing names answer 404 with the aliases found;
//	                                        a search or count through an alias with a filter
//	                                        sees only the documents the filter matches (unless
//	                                        the same request names the index or an alias
//	                                        without one)
//	POST /_bulk, POST /<index>/_bulk        index, create, update (doc, upsert, doc_as_upsert,
//	                                        noop detection, _source), delete
//	GET|PUT|POST|DELETE /<index>/_doc/<id>  get / index / delete one document; POST /<index>/_doc auto id
//	GET /<index>/_source/<id>               the _source alone
//	POST /<index>/_create/<id>              create only
//	POST /<index>/_update/<id>              partial update: doc, upsert, doc_as_upsert, detect_noop;
//	                                        a body without doc is refused (scripts are not run)
//	POST /[<index>/]_refresh                makes writes visible where refresh_interval is -1
//	GET|POST /[<index>/]_count              query DSL or ?q= (df, default_operator, lenient), min_score
//	GET|POST /[<index>/]_search             see below
//	GET|HEAD|DELETE /_index_template[/<name>], /_component_template[/<name>], /_template[/<name>],
//	GET|DELETE /_ingest/pipeline[/<id>]     eslite keeps no templates or pipelines: these find
//	                                        none, and creating one is refused
//	POST /[<index>/]_msearch                header and body lines; each search answers in its slot;
//	                                        typed_keys (here and on _search) names aggregation
//	                                        results <type>#<name> (sterms, lterms, dterms, avg,
//	                                        date_histogram, tdigest_percentiles, simple_value, ...)
//	GET|POST /[<index>/]_mget               docs (_index, _id, routing, _source, stored_fields) or
//	                                        ids; each answers as a get, a missing index in its slot
//	GET|POST /[<index>/]_field_caps         fields (names and patterns, URL or body), include_unmapped,
//	                                        index_filter, filters=-metadata, types; one entry per
//	                                        type, with indices when the indexes disagree
//	                                        (runtime_mappings is refused)
//	POST /<index>/_search?scroll=, POST|GET /_search/scroll[/<id>], DELETE /_search/scroll[/<ids>|_all]
//	                                        scrolls read a snapshot taken by the first request (as a
//	                                        point in time does), page after page with no result
//	                                        window; writes made meanwhile are not seen (they may
//	                                        still move BM25 scores)
//	GET /_cat/indices[/<index>], /_cat/count[/<index>], /_cat/aliases[/<alias>], /_cat/health
//	                                        aligned text with ?v (header), ?h (columns), ?s (sort,
//	                                        col:desc), ?format=json (strings, as Elasticsearch),
//	                                        ?bytes=b; health is always green
//	POST /<index>/_pit?keep_alive=, DELETE /_pit
//	                                        points in time: a search with pit sees the documents the
//	                                        indexes held when it opened (later writes are hidden; a
//	                                        document changed or deleted since is hidden too)
//
// <index> may be a name, an alias, a comma-separated list, a wildcard pattern such as
// `trawler-*` (with -exclusions after a wildcard), or `_all`; expand_wildcards,
// ignore_unavailable and allow_no_indices are honoured. A write to an alias over several
// indexes goes to the one marked is_write_index, or fails as Elasticsearch does.
//
// Writes: version with version_type external / external_gte, if_seq_no and
// if_primary_term (sequence numbers count an index's operations from 0), op_type,
// routing, require_alias, refresh (forced_refresh), pipeline (none exist, so naming one
// fails the document), ids up to 512 bytes. Get takes version (conflicts when it
// differs), stored_fields (fields mapped with store: true, _ignored, _source),
// _source / _source_includes / _source_excludes and routing. Bulk refuses empty
// actions and unknown metadata (_type, _version, ...) for the whole request and an empty
// _id per item.
//
// Mappings: every Elasticsearch field type is accepted and reported back; an unknown one
// is refused with mapper_parsing_exception. Searchable: text, match_only_text,
// search_as_you_type (standard-like analysis: unicode words, lowercased, no stop words),
// keyword, wildcard, constant_keyword, ip and version (exact values; ip checks the
// address), long, integer, short, byte, unsigned_long, double, float, half_float,
// scaled_float, date and date_nanos (strict_date_optional_time||epoch_millis, or the
// mapping's format: epoch_second, epoch_millis or a pattern such as yyyy/MM/dd),
// boolean, object, nested (indexed as object; the nested query and aggregation see each
// object) and multi-fields (`fields`). geo_point is kept in _source and read from there
// by geo_bounding_box. Stored in _source only, matched by exists but by no other query:
// geo_shape, point, shape, binary, the range types (integer_range ... date_range,
// ip_range), dense_vector, sparse_vector, rank_feature(s), flattened, histogram, join,
// percolator and the like. ignore_above and ignore_malformed keep offending values in
// _source only and list them in _ignored. Unmapped fields are mapped dynamically as
// Elasticsearch does: strings as text with a `keyword` sub-field (or date when they
// parse as one), integers as long, other numbers as float, booleans as boolean, objects
// as object, unless one of the mapping's dynamic_templates (match, unmatch, path_match,
// path_unmatch, match_mapping_type, regex patterns, {name} and {dynamic_type}) or the
// template bulk's dynamic_templates names for the field maps it. A value that does not
// fit its mapping fails that document with document_parsing_exception, as Elasticsearch
// 8.8+ says (a mapping that does not parse is a mapper_parsing_exception). An index
// without fields reports its mappings as {}.
//
// Query DSL: match (operator, minimum_should_match), match_phrase (with a slop: the
// terms in order, at most slop positions apart), match_phrase_prefix, multi_match
// (fields with ^boost and wildcards; best_fields and phrase as dis_max with tie_breaker,
// most_fields), combined_fields (as most_fields), term (case_insensitive on keywords),
// terms (values or a lookup {index, id, path}; index.max_terms_count), range (gt, gte,
// lt, lte on numbers, dates with date math such as now-1d/d or 2026-01-01||+1M, and
// keywords), exists, prefix, wildcard, regexp (index.max_regex_length), fuzzy, ids
// (index.max_result_window), bool (must, should, filter, must_not, minimum_should_match
// as a count or a percentage), dis_max, constant_score, query_string (query, fields,
// default_field, default_operator, lenient; terms, "phrases", field:value, field:>N,
// field:[a TO b], wildcards, /regexps/, _exists_:f, AND, OR, NOT, &&, ||, !, +, -,
// parentheses), nested (path, score_mode, ignore_unmapped; the inner query runs on the
// whole document, so two conditions may match in different objects; inner_hits, with
// name, from, size and _source, lists the objects that match on their own, scored by
// BM25 over the nested objects as Elasticsearch's nested documents are), match_bool_prefix
// (and multi_match type bool_prefix), intervals (match, all_of, any_of, prefix,
// wildcard, fuzzy, regexp and range rules, max_gaps, ordered, and the containing,
// contained_by, overlapping, before and after filters and their not_ forms, over token
// positions), span_term, span_multi, span_near, span_or, span_first, span_not,
// span_containing, span_within and span_field_masking (as interval rules over the same
// positions), geo_bounding_box (corners as objects, arrays, "lat,lon" strings or
// geohashes; top/left/bottom/right; wkt BBOX; geohash and geotile cells), geo_distance,
// boosting, exists on metadata fields (_id, _index, _routing, _ignored, ...), term and
// terms on _ignored, term, terms, match, prefix and wildcard on _index,
// simple_query_string (+, |, -, phrases, groups, prefixes, default_operator,
// minimum_should_match; never fails on syntax), function_score (weight, random_score,
// field_value_factor, gauss/exp/linear decay on numbers, dates and geo points; filters,
// score_mode, boost_mode, max_boost), distance_feature (dates and geo points),
// script_score and script (scripts read as expressions over doc['field'] values, _score
// and params; see expr.go), match_all and match_none; a `_name` puts matched_queries on
// the hits (with their scores under include_named_queries_score). Queries on unmapped
// fields match nothing, as in Elasticsearch; sorting or aggregating on a text field is
// an error unless it has fielddata. With the cluster setting
// search.allow_expensive_queries false, prefix, wildcard, regexp, fuzzy, string range
// and joining queries are refused with Elasticsearch's messages.
//
// Relevance is Elasticsearch's BM25 (see bm25.go): k1 = 1.2, b = 0.75, the (k1 + 1) factor
// of Elasticsearch's LegacyBM25Similarity, idf = ln(1 + (N − n + 0.5)/(n + 0.5)) and
// length normalisation from per-field statistics of each index; compound queries sum
// their matching clauses, dis_max takes the best plus tie_breaker times the rest, and
// term-level queries other than term (ranges, prefixes, exists, ids, terms) score their
// boost. Field lengths are read back as Lucene's one-byte norms keep them (exact below
// 24 tokens, rounded down above), so long fields score as in Elasticsearch: on the demo
// site's stories and comments the top 10 of 20 queries match the formula's order and
// scores (bm25_test.go). Ties keep index order, as Lucene's document order does. bleve only decides which
// documents match; its own scores are not used.
//
// Search body and URL: query, q (with df, default_operator, lenient), from, size
// (index.max_result_window), sort (keyword, numeric, date and boolean fields, `_score`,
// `_doc`, {"f":"desc"}, {"f":{"order":"asc"}}, _script sorts of type number or string
// over expression scripts; multi-valued fields sort by their min ascending and max
// descending, missing values last unless "missing" says _first or a value; a date
// sort's "format" gives formatted sort values and reads search_after in it; hits carry
// `sort` values), search_after, filter_path on every response,
// track_total_hits (bool or a number), rest_total_hits_as_int, track_scores, min_score,
// indices_boost (names, aliases, patterns; first match wins), _source (bool, pattern,
// list, includes/excludes) and _source_includes / _source_excludes, stored_fields (a
// list, or _none_), docvalue_fields (with a numeric format such as "#.0";
// index.max_docvalue_fields_search), fields (typed values in the mapping's or the
// request's format, grouped per object under nested fields, include_unmapped), pit,
// version, seq_no_primary_term, script_fields (expression scripts, ignore_failure;
// index.max_script_fields), post_filter, terminate_after, collapse (on keyword, numeric
// and date fields, with inner_hits: name, size, from, sort, fields, version), profile
// (Elasticsearch's shape, whole-request timings, the fetch sub-phases the request runs),
// highlight (fields with wildcards on text and keyword fields, pre_tags and post_tags,
// require_field_match, highlight_query per field, max_analyzed_offset and
// index.highlight.max_analyzed_offset; each value is returned whole with the matched
// terms wrapped) and aggs/aggregations. search_type other than query_then_fetch /
// dfs_query_then_fetch and rescore are refused with Elasticsearch's messages
// (including its window and count limits).
//
// Aggregations: terms (size, order by _count, _key or a sub-aggregation path such as
// "max", "stats.avg", "filter>max" or a top_metrics value, lists of orders, include and
// exclude as values, regular expressions or hash partitions, value_type, min_doc_count
// including 0, collect_mode, execution_hint), rare_terms (max_doc_count, include and
// exclude), significant_terms and significant_text (jlh, mutual_information, chi_square,
// gnd and percentage heuristics, background_filter, source_fields,
// filter_duplicate_text), composite (terms, histogram, date_histogram and geotile_grid
// sources, order, missing_bucket, format, time_zone, after and after_key),
// date_histogram (calendar_interval minute..year or 1m/1h/1d/1w/1M/1q/1y; fixed_interval
// such as 30m, 12h, 2d; time_zone as an offset or a region name from the system's zone
// data; keys in the aggregation's or the field's format; empty buckets filled with
// min_doc_count 0), auto_date_histogram, histogram (interval, min_doc_count, offset,
// extended_bounds, keyed, format), variable_width_histogram, range, date_range (format
// and time_zone) and ip_range (from, to, key, mask; keyed) with buckets ordered by their
// bounds, ip_prefix, geohash_grid and geotile_grid, filter, filters (named or anonymous,
// other_bucket, keyed), adjacency_matrix, global, nested, sampler, diversified_sampler
// and random_sampler (counts and sums scaled back by the probability); avg,
// weighted_avg, sum, min, max, value_count, cardinality (exact; precision_threshold
// accepted), stats, extended_stats (sigma), percentiles and percentile_ranks (exact
// values interpolated as a t-digest that keeps every value, or an HDR histogram's
// equivalent values with hdr), matrix_stats, geo_bounds, geo_centroid, top_metrics and
// top_hits (size, from, sort, _source, highlight, fields, docvalue_fields,
// stored_fields, version, seq_no_primary_term); the sibling pipelines avg_bucket,
// max_bucket, min_bucket, sum_bucket and stats_bucket (buckets_path, gap_policy, format)
// and the parent pipelines cumulative_sum, derivative, serial_diff, bucket_sort,
// moving_fn (MovingFunctions max, min, sum and unweightedAvg only), bucket_script and
// bucket_selector (scripts read as arithmetic and boolean expressions over params,
// numbers, comparisons, &&, ||, !, ?: and Math functions: the part of Painless they use;
// any other script is refused). Each takes missing and meta where Elasticsearch does;
// sub-aggregations work under any bucket aggregation, documents with a _doc_count field
// count as that many, keys of flattened fields aggregate as keywords, _index aggregates
// the documents' index names (_id is refused, as in Elasticsearch), and
// search.max_buckets (cluster setting, default 65536) bounds the buckets of a search.
// Not supported: scripted_metric, time_series and the aggregations of downsampled
// indexes.
//
// Errors are shaped like Elasticsearch's: {"error":{"root_cause":[...],"type":...,
// "reason":...},"status":400}, with Elasticsearch's types, statuses and, where the REST
// tests check them, its messages; unsupported parts are named.
//
// # Elasticsearch's YAML REST tests
//
// The yamltest sub-package runs Elasticsearch's own YAML REST tests against eslite, from
// ../shared/es-yaml beside the repository (never copied into it); its package doc has
// the figures per folder, the skips by reason and what still fails, by cause.
package eslite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
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
	pits    pits
	scrolls scrolls
	cluster clusterSettings
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
	// Elasticsearch writes <, > and & as they are; Go would escape them for HTML.
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
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
	if t, ok := v.(plainText); ok {
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, string(t))
		return
	}
	if fp := r.URL.Query().Get("filter_path"); fp != "" {
		v = filterPath(v, fp)
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

// pathParts splits the escaped path and unescapes each part, so an index name holding a
// slash (date math such as <logs-{now/d}>) stays one part.
func pathParts(r *http.Request) []string {
	parts := []string{}
	for _, p := range strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/") {
		if p == "" {
			continue
		}
		if u, err := url.PathUnescape(p); err == nil {
			p = u
		}
		parts = append(parts, p)
	}
	return parts
}

func (s *server) route(r *http.Request) (int, any, error) {
	parts := pathParts(r)
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
			return 200, map[string]any{"cluster_name": "eslite", "status": "green", "timed_out": false, "number_of_nodes": 1, "number_of_data_nodes": 1,
				"active_primary_shards": len(s.resolve("_all")), "active_shards": len(s.resolve("_all")), "relocating_shards": 0, "initializing_shards": 0,
				"unassigned_shards": 0, "delayed_unassigned_shards": 0, "number_of_pending_tasks": 0, "number_of_in_flight_fetch": 0,
				"task_max_waiting_in_queue_millis": 0, "active_shards_percent_as_number": 100.0}, nil
		case first == "_cluster" && len(parts) == 2 && parts[1] == "settings":
			return s.clusterSettingsAPI(r, body)
		case (first == "_index_template" || first == "_component_template" || first == "_template") && len(parts) <= 2:
			name := ""
			if len(parts) == 2 {
				name = parts[1]
			}
			return s.templatesAPI(r, first, name)
		case first == "_ingest" && len(parts) >= 2 && len(parts) <= 3 && parts[1] == "pipeline":
			id := ""
			if len(parts) == 3 {
				id = parts[2]
			}
			return s.pipelinesAPI(r, id)
		case first == "_cat":
			return s.catAPI(r, parts)
		case first == "_mget" && len(parts) == 1:
			return s.mget(r, "", body)
		case first == "_field_caps" && len(parts) == 1:
			return s.fieldCaps(r, "_all", body)
		case first == "_search" && len(parts) <= 3 && len(parts) >= 2 && parts[1] == "scroll":
			return s.scrollAPI(r, parts[2:], body)
		case first == "_pit" && len(parts) == 1 && m == http.MethodDelete:
			return s.closePIT(body)
		case first == "_bulk" && len(parts) == 1:
			return s.bulk(r, "", body)
		case first == "_search" && len(parts) == 1:
			return s.search(r, "_all", body)
		case first == "_msearch" && len(parts) == 1:
			return s.msearch(r, "_all", body)
		case first == "_count" && len(parts) == 1:
			return s.count(r, "_all", body)
		case first == "_refresh" && len(parts) == 1:
			for _, ix := range s.resolve("_all") {
				ix.refreshNow()
			}
			return 200, shards(), nil
		case first == "_mapping" && len(parts) == 1 && m == http.MethodGet:
			return s.getMapping(r, "_all")
		case first == "_settings" && m == http.MethodGet:
			return s.getSettings(r, "_all", strings.Join(parts[1:], ","))
		case first == "_stats":
			return s.stats("_all")
		case first == "_aliases" && len(parts) == 1:
			if m == http.MethodGet {
				return s.getAliases(r, "_all", "")
			}
			return s.updateAliases(body)
		case first == "_alias" && (m == http.MethodGet || m == http.MethodHead):
			name := ""
			if len(parts) > 1 {
				name = parts[1]
			}
			return s.getAliases(r, "", name)
		}
		return 0, nil, unsupported(r)
	}
	target := first
	if len(parts) == 1 {
		switch m {
		case http.MethodHead:
			ixs, err := s.resolveFor(r, target, expandOpen)
			if err != nil || len(ixs) == 0 {
				return 0, nil, notFoundIndex(target)
			}
			return 200, nil, nil
		case http.MethodPut:
			return s.createIndex(target, body)
		case http.MethodGet:
			return s.getIndex(r, target)
		case http.MethodDelete:
			return s.deleteIndex(r, target)
		}
		return 0, nil, unsupported(r)
	}
	op := parts[1]
	switch {
	case op == "_search" && len(parts) == 2:
		return s.search(r, target, body)
	case op == "_msearch" && len(parts) == 2:
		return s.msearch(r, target, body)
	case op == "_mget" && len(parts) == 2:
		return s.mget(r, target, body)
	case op == "_field_caps" && len(parts) == 2:
		return s.fieldCaps(r, target, body)
	case op == "_pit" && len(parts) == 2 && m == http.MethodPost:
		return s.openPIT(r, target)
	case op == "_count" && len(parts) == 2:
		return s.count(r, target, body)
	case op == "_bulk" && len(parts) == 2:
		return s.bulk(r, target, body)
	case op == "_refresh" && len(parts) == 2:
		ixs, err := s.resolveFor(r, target, expandOpen)
		if err != nil {
			return 0, nil, err
		}
		for _, ix := range ixs {
			ix.refreshNow()
		}
		return 200, shards(), nil
	case (op == "_close" || op == "_open") && len(parts) == 2 && m == http.MethodPost:
		return s.openClose(r, target, op == "_close")
	case op == "_settings" && m == http.MethodGet:
		return s.getSettings(r, target, strings.Join(parts[2:], ","))
	case op == "_settings" && m == http.MethodPut && len(parts) == 2:
		return s.putSettings(r, target, body)
	case op == "_stats":
		return s.stats(target)
	case op == "_mapping" && len(parts) == 2:
		if m == http.MethodGet {
			return s.getMapping(r, target)
		}
		return s.putMapping(r, target, body)
	case (op == "_alias" || op == "_aliases") && len(parts) <= 3:
		name := ""
		if len(parts) == 3 {
			name = parts[2]
		}
		switch m {
		case http.MethodGet, http.MethodHead:
			return s.getAliases(r, target, name)
		case http.MethodPut, http.MethodPost:
			return s.putAlias(target, name, body)
		case http.MethodDelete:
			return s.deleteAlias(target, name)
		}
	case op == "_doc" || op == "_create" || op == "_update" || op == "_source":
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

// expand says which indexes a wildcard reaches (expand_wildcards).
type expand int

const (
	expandOpen expand = 1 << iota
	expandClosed
	expandNone = 0
	expandAll  = expandOpen | expandClosed
)

// resolveOpts are the index-resolution options of a request.
type resolveOpts struct {
	expand            expand
	ignoreUnavailable bool
	allowNoIndices    bool
	strict            bool
}

func optsFor(r *http.Request, def expand) resolveOpts {
	o := resolveOpts{expand: def, allowNoIndices: true, strict: true}
	if r == nil {
		return o
	}
	q := r.URL.Query()
	if v, ok := q["expand_wildcards"]; ok {
		o.expand = expandNone
		for _, w := range strings.Split(v[0], ",") {
			switch strings.TrimSpace(w) {
			case "open":
				o.expand |= expandOpen
			case "closed":
				o.expand |= expandClosed
			case "all":
				o.expand |= expandAll
			}
		}
	}
	o.ignoreUnavailable = q.Get("ignore_unavailable") == "true"
	if q.Get("allow_no_indices") == "false" {
		o.allowNoIndices = false
	}
	return o
}

// resolve expands an index expression leniently: open indexes, unknown names left out.
func (s *server) resolve(expr string) []*esIndex {
	out, _ := s.resolveExpr(expr, resolveOpts{expand: expandOpen, allowNoIndices: true})
	return out
}

func (s *server) resolveStrict(expr string) ([]*esIndex, error) {
	return s.resolveExpr(expr, resolveOpts{expand: expandOpen, allowNoIndices: true, strict: true})
}

func (s *server) resolveFor(r *http.Request, expr string, def expand) ([]*esIndex, error) {
	return s.resolveExpr(expr, optsFor(r, def))
}

func (ix *esIndex) closed() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.meta.Closed
}

// resolveExpr expands names, aliases, date-math names, wildcard patterns, _all and
// -exclusions (after a wildcard) into indexes sorted by name.
func (s *server) resolveExpr(expr string, o resolveOpts) ([]*esIndex, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[string]*esIndex{}
	wild := func(ix *esIndex) bool {
		if ix.closed() {
			return o.expand&expandClosed != 0
		}
		return o.expand&expandOpen != 0
	}
	wildcardSeen := false
	for i, part := range strings.Split(expr, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if strings.HasPrefix(part, "-") && i > 0 && wildcardSeen {
			pat := part[1:]
			for n, ix := range seen {
				if globMatch(pat, n) || ix.hasAlias(pat) {
					delete(seen, n)
				}
			}
			continue
		}
		if part == "_all" || part == "*" {
			wildcardSeen = true
			for n, ix := range s.indexes {
				if wild(ix) {
					seen[n] = ix
				}
			}
			continue
		}
		if strings.ContainsAny(part, "*?") && o.expand != expandNone {
			wildcardSeen = true
			for n, ix := range s.indexes {
				if !wild(ix) {
					continue
				}
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
		if name, err := dateMathName(part, time.Now()); err == nil {
			part = name
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
		if !found && o.strict && !o.ignoreUnavailable {
			return nil, notFoundIndex(part)
		}
	}
	out := make([]*esIndex, 0, len(seen))
	for _, ix := range seen {
		out = append(out, ix)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	if len(out) == 0 && !o.allowNoIndices && o.strict {
		return nil, notFoundIndex(expr)
	}
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

var dateMathPart = regexp.MustCompile(`\{([^{}]*)(?:\{([^{}]*)\})?\}`)

// dateMathName resolves an index name such as <logs-{now/d}> or
// <logs_{2022-12-31||/d{yyyy-MM-dd}}>; other names come back as an error.
func dateMathName(name string, now time.Time) (string, error) {
	if !strings.HasPrefix(name, "<") || !strings.HasSuffix(name, ">") {
		return "", fmt.Errorf("not a date math name")
	}
	inner := name[1 : len(name)-1]
	var ferr error
	out := dateMathPart.ReplaceAllStringFunc(inner, func(m string) string {
		sm := dateMathPart.FindStringSubmatch(m)
		t, err := parseDateMath(sm[1], now, false)
		if err != nil {
			ferr = err
			return m
		}
		format := sm[2]
		if format == "" {
			format = "yyyy.MM.dd"
		}
		return t.UTC().Format(javaDateLayout(format))
	})
	if ferr != nil {
		return "", badRequest("illegal_argument_exception", "invalid date math in index name [%s]: %v", name, ferr)
	}
	return out, nil
}

// javaDateLayout converts the common Java date pattern letters into a Go layout.
func javaDateLayout(f string) string {
	return strings.NewReplacer("yyyy", "2006", "yy", "06", "MM", "01", "dd", "02", "HH", "15", "mm", "04", "ss", "05", "SSS", "000").Replace(f)
}

// validateIndexName applies Elasticsearch's rules for index (and alias) names.
func validateIndexName(name, what string) *esError {
	bad := func(why string) *esError {
		return &esError{status: 400, typ: "invalid_" + what + "_name_exception", reason: "Invalid " + what + " name [" + name + "], " + why,
			extra: map[string]any{"index": name}}
	}
	switch {
	case name == "" || name == "." || name == "..":
		return bad("must not be empty, '.' or '..'")
	case strings.ToLower(name) != name:
		return bad("must be lowercase")
	case strings.ContainsAny(name, "\\/*?\"<>| ,#:"):
		return bad("must not contain the following characters [ , \", *, \\, <, |, ,, >, /, ?]")
	case strings.HasPrefix(name, "_") || strings.HasPrefix(name, "-") || strings.HasPrefix(name, "+"):
		return bad("must not start with '_', '-', or '+'")
	case len(name) > 255:
		return bad("index name is too long, (" + fmt.Sprint(len(name)) + " > 255)")
	}
	return nil
}

func (s *server) isAlias(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, ix := range s.indexes {
		if ix.hasAlias(name) {
			return true
		}
	}
	return false
}

// writeTarget resolves a name or alias to the single index a write goes to, creating
// the index (dynamic mappings) when nothing by that name exists. An alias over several
// indexes writes to the one marked is_write_index.
func (s *server) writeTarget(name string) (*esIndex, error) {
	if strings.ContainsAny(name, "*?,") || name == "_all" {
		return nil, badRequest("illegal_argument_exception", "cannot write to [%s]: not a single index or alias", name)
	}
	if dm, err := dateMathName(name, time.Now()); err == nil {
		name = dm
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
	for _, ix := range ixs {
		if a, ok := ix.snapshotMeta().Aliases[name]; ok && fmt.Sprint(a["is_write_index"]) == "true" {
			return ix, nil
		}
	}
	return nil, badRequest("illegal_argument_exception", "no write index is defined for alias [%s]. The write index may be explicitly disabled using is_write_index=false or the alias points to multiple indices without one being designated as a write index", name)
}

// aliasAttrs normalises an alias definition as Elasticsearch stores it.
func aliasAttrs(name string, v any) (map[string]any, error) {
	if v == nil {
		return map[string]any{}, nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, parsingErr("Failed to parse alias [%s]: expected an object", name)
	}
	out := map[string]any{}
	for k, x := range o {
		switch k {
		case "filter":
			out["filter"] = x
		case "routing":
			if _, isStr := x.(string); !isStr {
				return nil, badRequest("illegal_argument_exception", "Unsupported %T type value [%v] for field [routing] in alias [%s]", x, x, name)
			}
			out["index_routing"], out["search_routing"] = x, x
		case "index_routing", "search_routing":
			out[k] = scalarString(x)
		case "is_write_index", "is_hidden":
			// Booleans may come as the strings "true" and "false", as everywhere in
			// Elasticsearch's request bodies.
			b, isBool := x.(bool)
			if str, isStr := x.(string); isStr && (str == "true" || str == "false") {
				b, isBool = str == "true", true
			}
			if !isBool {
				return nil, badRequest("illegal_argument_exception", "Unsupported %T type value [%v] for field [%s] in alias [%s]", x, x, k, name)
			}
			out[k] = b
		case "index", "indices", "alias", "aliases", "must_exist":
		default:
			return nil, parsingErr("[aliases] unknown field [%s]", k)
		}
	}
	return out, nil
}

// flattenSettings turns nested or dotted settings into "key" -> value without the
// "index." prefix, the way Elasticsearch normalises them.
func flattenSettings(st map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok {
			for k, x := range m {
				walk(prefix+k+".", x)
			}
			return
		}
		out[strings.TrimPrefix(strings.TrimSuffix(prefix, "."), "index.")] = v
	}
	walk("", st)
	return out
}

// nestSettings renders flat settings under "index" as nested objects of strings, as
// the settings APIs answer.
func nestSettings(flat map[string]any) map[string]any {
	root := map[string]any{}
	keys := make([]string, 0, len(flat))
	for k := range flat {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cur := root
		parts := strings.Split(k, ".")
		for _, p := range parts[:len(parts)-1] {
			next, ok := cur[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				cur[p] = next
			}
			cur = next
		}
		v := flat[k]
		switch t := v.(type) {
		case []any:
			strs := make([]any, len(t))
			for i, x := range t {
				strs[i] = scalarString(x)
			}
			cur[parts[len(parts)-1]] = strs
		default:
			cur[parts[len(parts)-1]] = scalarString(v)
		}
	}
	return root
}

func (ix *esIndex) settingsOut() map[string]any {
	m := ix.snapshotMeta()
	flat := map[string]any{"number_of_shards": "1", "number_of_replicas": "1", "provided_name": m.Name,
		"uuid": "eslite-" + m.Name, "creation_date": strconv.FormatInt(m.Created.UnixMilli(), 10), "version.created": "8535000"}
	for k, v := range flattenSettings(m.Settings) {
		flat[k] = v
	}
	return map[string]any{"index": nestSettings(flat)}
}

// setting returns one index setting (without the "index." prefix) as a string.
func (ix *esIndex) setting(key string) string {
	m := ix.snapshotMeta()
	v, ok := flattenSettings(m.Settings)[key]
	if !ok {
		return ""
	}
	return scalarString(v)
}

func (s *server) createIndex(name string, body []byte) (int, any, error) {
	if dm, err := dateMathName(name, time.Now()); err == nil {
		name = dm
	} else if strings.HasPrefix(name, "<") {
		return 0, nil, err
	}
	if e := validateIndexName(name, "index"); e != nil {
		return 0, nil, e
	}
	req, err := decodeObject(body)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range req {
		if k != "settings" && k != "mappings" && k != "aliases" {
			return 0, nil, parsingErr("unknown key [%s] for create index", k)
		}
		if _, ok := v.(map[string]any); !ok {
			return 0, nil, parsingErr("Failed to parse [%s]: expected an object, found [%v]", k, v)
		}
	}
	meta := &indexMeta{Name: name, Settings: map[string]any{}, Mappings: map[string]any{"properties": map[string]any{}}, Aliases: map[string]map[string]any{}, Created: time.Now().UTC()}
	if st, ok := req["settings"].(map[string]any); ok {
		if fmt.Sprint(flattenSettings(st)["soft_deletes.enabled"]) == "false" {
			return 0, nil, badRequest("illegal_argument_exception", "Creating indices with soft-deletes disabled is no longer supported. Please do not specify a value for setting [index.soft_deletes.enabled].")
		}
		meta.Settings = st
	}
	if mp, ok := req["mappings"].(map[string]any); ok {
		if err := validateMappings(mp); err != nil {
			return 0, nil, err
		}
		props, _ := mp["properties"].(map[string]any)
		mp["properties"] = expandDotted(props)
		meta.Mappings = mp
	}
	if err := applySourceMode(meta); err != nil {
		return 0, nil, err
	}
	if al, ok := req["aliases"].(map[string]any); ok {
		for a, v := range al {
			if dm, err := dateMathName(a, time.Now()); err == nil {
				a = dm
			}
			o, err := aliasAttrs(a, v)
			if err != nil {
				return 0, nil, err
			}
			meta.Aliases[a] = o
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.indexes[name]; ok {
		return 0, nil, &esError{status: 400, typ: "resource_already_exists_exception", reason: "index [" + name + "/eslite] already exists", extra: map[string]any{"index": name}}
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

// applySourceMode settles mappings._source.mode: logsdb and time_series indices only
// keep synthetic source, and the index.mapping.source.mode setting overrides a mode the
// mappings set.
func applySourceMode(meta *indexMeta) error {
	fs := flattenSettings(meta.Settings)
	src, _ := meta.Mappings["_source"].(map[string]any)
	mode := fmt.Sprint(fs["mode"])
	want := ""
	switch mode {
	case "logsdb", "time_series":
		if m, ok := src["mode"]; ok && m != "synthetic" {
			if mode == "logsdb" {
				return badRequest("mapper_parsing_exception", "Failed to parse mapping: Indices with with index mode [logsdb] only support synthetic source")
			}
			return badRequest("mapper_parsing_exception", "Failed to parse mapping: time series indices only support synthetic source")
		}
		want = "synthetic"
	default:
		// Without a mapped mode the mappings stay as they are (and empty).
		if m, ok := fs["mapping.source.mode"]; ok && src["mode"] != nil {
			want = scalarString(m)
		}
	}
	if want == "" {
		return nil
	}
	out := map[string]any{}
	for k, v := range src {
		out[k] = v
	}
	out["mode"] = want
	meta.Mappings["_source"] = out
	return nil
}

func (s *server) getIndex(r *http.Request, expr string) (int, any, error) {
	ixs, err := s.resolveFor(r, expr, expandOpen)
	if err != nil {
		return 0, nil, err
	}
	out := map[string]any{}
	for _, ix := range ixs {
		m := ix.snapshotMeta()
		out[ix.name] = map[string]any{"aliases": m.Aliases, "mappings": outMappings(m.Mappings), "settings": ix.settingsOut()}
	}
	return 200, out, nil
}

func (s *server) deleteIndex(r *http.Request, expr string) (int, any, error) {
	ixs, err := s.resolveFor(r, expr, expandAll)
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

func (s *server) openClose(r *http.Request, expr string, close bool) (int, any, error) {
	ixs, err := s.resolveFor(r, expr, expandAll)
	if err != nil {
		return 0, nil, err
	}
	res := map[string]any{}
	for _, ix := range ixs {
		ix.mu.Lock()
		ix.meta.Closed = close
		err := ix.saveMeta()
		ix.mu.Unlock()
		if err != nil {
			return 0, nil, err
		}
		res[ix.name] = map[string]any{"closed": close}
	}
	out := map[string]any{"acknowledged": true, "shards_acknowledged": true}
	if close {
		out["indices"] = res
	}
	return 200, out, nil
}

func (s *server) getSettings(r *http.Request, expr, names string) (int, any, error) {
	ixs, err := s.resolveFor(r, expr, expandAll)
	if err != nil {
		return 0, nil, err
	}
	out := map[string]any{}
	for _, ix := range ixs {
		st := ix.settingsOut()
		if names != "" && names != "_all" {
			flat := flattenSettings(st)
			keep := map[string]any{}
			for k, v := range flat {
				for _, n := range strings.Split(names, ",") {
					if globMatch(strings.TrimPrefix(n, "index."), k) {
						keep[k] = v
					}
				}
			}
			st = map[string]any{}
			if len(keep) > 0 {
				st = map[string]any{"index": nestSettings(keep)}
			}
		}
		out[ix.name] = map[string]any{"settings": st}
	}
	return 200, out, nil
}

// openTargets resolves the open indexes an update names and decodes its body.
func (s *server) openTargets(r *http.Request, expr string, body []byte) ([]*esIndex, map[string]any, error) {
	ixs, err := s.resolveFor(r, expr, expandOpen)
	if err != nil {
		return nil, nil, err
	}
	req, err := decodeObject(body)
	if err != nil {
		return nil, nil, err
	}
	return ixs, req, nil
}

func (s *server) putSettings(r *http.Request, expr string, body []byte) (int, any, error) {
	ixs, req, err := s.openTargets(r, expr, body)
	if err != nil {
		return 0, nil, err
	}
	if st, ok := req["settings"].(map[string]any); ok && len(req) == 1 {
		req = st
	}
	for _, ix := range ixs {
		ix.mu.Lock()
		flat := flattenSettings(ix.meta.Settings)
		for k, v := range flattenSettings(req) {
			if v == nil {
				delete(flat, k)
			} else {
				flat[k] = v
			}
		}
		st := map[string]any{}
		for k, v := range flat {
			st["index."+k] = v
		}
		ix.meta.Settings = st
		err := ix.saveMeta()
		ix.mu.Unlock()
		if err != nil {
			return 0, nil, err
		}
	}
	return 200, map[string]any{"acknowledged": true}, nil
}

func (s *server) stats(expr string) (int, any, error) {
	ixs, err := s.resolveStrict(expr)
	if err != nil {
		return 0, nil, err
	}
	indices := map[string]any{}
	var docsAll, idxAll, noopAll int64
	for _, ix := range ixs {
		m := ix.snapshotMeta()
		n, _ := ix.bi.DocCount()
		docsAll, idxAll, noopAll = docsAll+int64(n), idxAll+m.IndexTotal, noopAll+m.NoopUpdates
		part := map[string]any{"docs": map[string]any{"count": n, "deleted": 0},
			"indexing": map[string]any{"index_total": m.IndexTotal, "noop_update_total": m.NoopUpdates}}
		indices[ix.name] = map[string]any{"uuid": "eslite-" + ix.name, "health": "green", "status": "open", "primaries": part, "total": part}
	}
	all := map[string]any{"docs": map[string]any{"count": docsAll, "deleted": 0},
		"indexing": map[string]any{"index_total": idxAll, "noop_update_total": noopAll}}
	return 200, map[string]any{"_shards": map[string]any{"total": len(ixs), "successful": len(ixs), "failed": 0},
		"_all": map[string]any{"primaries": all, "total": all}, "indices": indices}, nil
}

func (s *server) getMapping(r *http.Request, expr string) (int, any, error) {
	ixs, err := s.resolveFor(r, expr, expandOpen)
	if err != nil {
		return 0, nil, err
	}
	out := map[string]any{}
	for _, ix := range ixs {
		out[ix.name] = map[string]any{"mappings": outMappings(ix.snapshotMeta().Mappings)}
	}
	return 200, out, nil
}

func (s *server) putMapping(r *http.Request, expr string, body []byte) (int, any, error) {
	ixs, req, err := s.openTargets(r, expr, body)
	if err != nil {
		return 0, nil, err
	}
	if err := validateMappings(req); err != nil {
		return 0, nil, err
	}
	for _, ix := range ixs {
		if err := ix.mergeMappings(deepCopy(req).(map[string]any)); err != nil {
			return 0, nil, err
		}
	}
	return 200, map[string]any{"acknowledged": true}, nil
}

// aliasSelector applies a comma-separated alias expression: names, wildcards, _all,
// and -exclusions (a leading '-' excludes when it is not the first expression).
type aliasSelector struct {
	parts []string
}

func (a aliasSelector) match(alias string) bool {
	if len(a.parts) == 0 {
		return true
	}
	in := false
	for i, p := range a.parts {
		if strings.HasPrefix(p, "-") && i > 0 {
			if globMatch(p[1:], alias) {
				in = false
			}
			continue
		}
		if p == "_all" || globMatch(p, alias) {
			in = true
		}
	}
	return in
}

// missing lists the explicitly named aliases that exist nowhere, as Elasticsearch
// reports them: wildcards, _all and exclusions after the first wildcard never count.
func (a aliasSelector) missing(exists func(string) bool) []string {
	firstWild := len(a.parts)
	for i, p := range a.parts {
		if p == "_all" || strings.ContainsAny(p, "*?") {
			firstWild = i
			break
		}
	}
	var out []string
	for i, p := range a.parts {
		if p == "_all" || strings.ContainsAny(p, "*?") || (i > firstWild && strings.HasPrefix(p, "-")) {
			continue
		}
		if !exists(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func (s *server) getAliases(r *http.Request, expr, name string) (int, any, error) {
	def := expandAll
	if expr == "" {
		expr = "_all"
	}
	ixs, err := s.resolveFor(r, expr, def)
	if err != nil {
		return 0, nil, err
	}
	sel := aliasSelector{}
	if name != "" {
		for _, p := range strings.Split(name, ",") {
			if p = strings.TrimSpace(p); p != "" {
				sel.parts = append(sel.parts, p)
			}
		}
	}
	out := map[string]any{}
	all := map[string]bool{}
	for _, ix := range ixs {
		m := ix.snapshotMeta()
		al := map[string]any{}
		for a, v := range m.Aliases {
			all[a] = true
			if sel.match(a) {
				al[a] = v
			}
		}
		if name == "" || len(al) > 0 {
			out[ix.name] = map[string]any{"aliases": al}
		}
	}
	if name == "" {
		return 200, out, nil
	}
	if miss := sel.missing(func(a string) bool { return all[a] }); len(miss) > 0 {
		word := "alias"
		if len(miss) > 1 {
			word = "aliases"
		}
		out["error"] = word + " [" + strings.Join(miss, ",") + "] missing"
		out["status"] = 404
		if r.Method == http.MethodHead {
			return 0, nil, &esError{status: 404, typ: "aliases_not_found_exception", reason: fmt.Sprint(out["error"])}
		}
		return 404, out, nil
	}
	if r.Method == http.MethodHead && len(out) == 0 {
		return 0, nil, &esError{status: 404, typ: "aliases_not_found_exception", reason: "alias [" + name + "] missing"}
	}
	return 200, out, nil
}

func (s *server) putAlias(expr, name string, body []byte) (int, any, error) {
	if dm, err := dateMathName(name, time.Now()); err == nil {
		name = dm
	}
	if e := validateIndexName(name, "alias"); e != nil {
		return 0, nil, e
	}
	ixs, err := s.resolveStrict(expr)
	if err != nil {
		return 0, nil, err
	}
	req, err := decodeObject(body)
	if err != nil {
		return 0, nil, err
	}
	attrs, err := aliasAttrs(name, req)
	if err != nil {
		return 0, nil, err
	}
	s.mu.RLock()
	_, clash := s.indexes[name]
	s.mu.RUnlock()
	if clash {
		return 0, nil, badRequest("invalid_alias_name_exception", "Invalid alias name [%s]: an index or data stream exists with the same name as the alias", name)
	}
	for _, ix := range ixs {
		if err := ix.setAlias(name, attrs); err != nil {
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
		for a := range ix.snapshotMeta().Aliases {
			if !(aliasSelector{parts: strings.Split(name, ",")}).match(a) {
				continue
			}
			removed = true
			if err := ix.setAlias(a, nil); err != nil {
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
			var idxs, aliases []string
			for _, k := range []string{"index", "indices"} {
				for _, x := range clauses(o[k]) {
					idxs = append(idxs, scalarString(x))
				}
			}
			for _, k := range []string{"alias", "aliases"} {
				for _, x := range clauses(o[k]) {
					aliases = append(aliases, scalarString(x))
				}
			}
			if len(idxs) == 0 || (len(aliases) == 0 && kind != "remove_index") {
				return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: 1: [%s] action needs [index] and [alias];", kind)
			}
			for _, alias := range aliases {
				switch kind {
				case "add":
					b, _ := json.Marshal(o)
					if _, _, err := s.putAlias(strings.Join(idxs, ","), alias, b); err != nil {
						return 0, nil, err
					}
				case "remove":
					if _, _, err := s.deleteAlias(strings.Join(idxs, ","), alias); err != nil {
						return 0, nil, err
					}
				default:
					return 0, nil, parsingErr("unsupported alias action [%s] (eslite supports add and remove)", kind)
				}
			}
		}
	}
	return 200, map[string]any{"acknowledged": true}, nil
}
