package eslite

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// clusterSettings are the persistent and transient settings of the cluster settings
// API, kept flat (dotted keys). Transient settings win over persistent ones. Of them,
// eslite applies search.max_buckets; the others are kept and reported.
type clusterSettings struct {
	mu         sync.Mutex
	persistent map[string]any
	transient  map[string]any
}

// clusterSettingPrefixes are the namespaces of Elasticsearch's dynamic cluster settings;
// a setting outside them is refused as Elasticsearch refuses an unknown one.
var clusterSettingPrefixes = []string{"search.", "cluster.", "indices.", "action.", "logger.", "transport.", "http.",
	"ingest.", "script.", "xpack.", "network.", "thread_pool.", "discovery.", "gateway.", "snapshot.", "repositories."}

func (s *server) clusterSettingsAPI(r *http.Request, body []byte) (int, any, error) {
	cs := &s.cluster
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.persistent == nil {
		cs.persistent, cs.transient = map[string]any{}, map[string]any{}
	}
	flat := r.URL.Query().Get("flat_settings") == "true"
	if r.Method == http.MethodGet {
		return 200, map[string]any{"persistent": settingsOut(cs.persistent, flat), "transient": settingsOut(cs.transient, flat)}, nil
	}
	if r.Method != http.MethodPut {
		return 0, nil, unsupported(r)
	}
	req, err := decodeObject(body)
	if err != nil {
		return 0, nil, err
	}
	changes := map[string]map[string]any{}
	for _, scope := range []string{"persistent", "transient"} {
		changes[scope] = map[string]any{}
		if m, ok := req[scope].(map[string]any); ok {
			changes[scope] = flattenSettings(m)
		}
		for k, v := range changes[scope] {
			if !knownClusterSetting(k) {
				return 0, nil, badRequest("illegal_argument_exception", "%s setting [%s], not recognized", scope, k)
			}
			if k == "search.max_buckets" && v != nil {
				if n, err := strconv.Atoi(scalarString(v)); err != nil || n < 0 {
					return 0, nil, badRequest("illegal_argument_exception", "Failed to parse value [%v] for setting [search.max_buckets] must be >= 0", scalarString(v))
				}
			}
		}
	}
	for k := range req {
		if k != "persistent" && k != "transient" {
			return 0, nil, parsingErr("request body contains an unknown key [%s]", k)
		}
	}
	out := map[string]any{"acknowledged": true}
	for scope, target := range map[string]map[string]any{"persistent": cs.persistent, "transient": cs.transient} {
		applied := map[string]any{}
		for k, v := range changes[scope] {
			if v == nil {
				delete(target, k)
				continue
			}
			target[k] = scalarString(v)
			applied[k] = scalarString(v)
		}
		out[scope] = settingsOut(applied, flat)
	}
	return 200, out, nil
}

func knownClusterSetting(k string) bool {
	for _, p := range clusterSettingPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// settingsOut renders flat settings flat or nested, as flat_settings asks.
func settingsOut(m map[string]any, flat bool) map[string]any {
	if !flat {
		return nestSettings(m)
	}
	return m
}

// maxBuckets is search.max_buckets: the most buckets one search's aggregations may
// create, transient over persistent over the default.
func (s *server) maxBuckets() int {
	cs := &s.cluster
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, m := range []map[string]any{cs.transient, cs.persistent} {
		if v, ok := m["search.max_buckets"]; ok {
			if n, err := strconv.Atoi(scalarString(v)); err == nil {
				return n
			}
		}
	}
	return defaultMaxBuckets
}

const defaultMaxBuckets = 65536

func tooManyBuckets(limit int, detail string) error {
	return &esError{status: 400, typ: "too_many_buckets_exception",
		reason: "Trying to create too many buckets. Must be less than or equal to: [" + strconv.Itoa(limit) + "]" + detail +
			". This limit can be set by changing the [search.max_buckets] cluster level setting.",
		extra: map[string]any{"max_buckets": limit}}
}

// checkBucketLimits refuses, before a search runs, composite aggregations that ask for
// more buckets than the limit.
func checkBucketLimits(defs []*aggDef, limit int) error {
	for _, a := range defs {
		if a.kind == "composite" && a.size > limit {
			return tooManyBuckets(limit, " but was ["+strconv.Itoa(a.size)+"]")
		}
		if err := checkBucketLimits(a.subs, limit); err != nil {
			return err
		}
	}
	return nil
}

// countBuckets counts the buckets of multi-bucket aggregations in a search's
// aggregation results, at every depth, as Elasticsearch counts them against the limit.
func countBuckets(v any) int {
	n := 0
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if k == "buckets" {
				switch b := x.(type) {
				case []any:
					n += len(b)
				case map[string]any:
					n += len(b)
				}
			}
			n += countBuckets(x)
		}
	case []any:
		for _, x := range t {
			n += countBuckets(x)
		}
	}
	return n
}

// allowExpensive is search.allow_expensive_queries (true unless set to false).
func (s *server) allowExpensive() bool {
	cs := &s.cluster
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, m := range []map[string]any{cs.transient, cs.persistent} {
		if v, ok := m["search.allow_expensive_queries"]; ok {
			return scalarString(v) != "false"
		}
	}
	return true
}

// expensive refuses an expensive query (prefix, wildcard, regexp, fuzzy, ranges on
// strings, joining queries) when search.allow_expensive_queries is false, with
// Elasticsearch's message.
func (c *qctx) expensive(what, hint string) error {
	if c.t == nil || c.t.server == nil || c.t.server.allowExpensive() {
		return nil
	}
	return &esError{status: 500, typ: "exception", reason: what + " cannot be executed when 'search.allow_expensive_queries' is set to false." + hint}
}
