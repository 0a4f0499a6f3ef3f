package eslite

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// mget serves _mget: {"docs": [{"_index", "_id", "routing", "_source", "stored_fields"}]}
// or, under /<index>/_mget, {"ids": [...]}. Each document answers as a get does, in its
// slot; a document whose index is missing answers with its error there.
func (s *server) mget(r *http.Request, defaultIndex string, body []byte) (int, any, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return 0, nil, unsupported(r)
	}
	req, err := decodeObject(body)
	if err != nil {
		return 0, nil, err
	}
	var docs []map[string]any
	for k, v := range req {
		switch k {
		case "docs":
			for _, d := range clauses(v) {
				dm, ok := d.(map[string]any)
				if !ok {
					return 0, nil, &esError{status: 400, typ: "parse_exception", reason: "docs array element should include an object"}
				}
				docs = append(docs, dm)
			}
		case "ids":
			for _, id := range clauses(v) {
				docs = append(docs, map[string]any{"_id": id})
			}
		default:
			return 0, nil, &esError{status: 400, typ: "parse_exception", reason: "unknown key [" + k + "] for a START_ARRAY, expected [docs] or [ids]"}
		}
	}
	var problems []string
	for i, d := range docs {
		if d["_index"] == nil && defaultIndex == "" {
			problems = append(problems, "index is missing for doc "+strconv.Itoa(i))
		}
		if d["_id"] == nil || scalarString(d["_id"]) == "" {
			problems = append(problems, "id is missing for doc "+strconv.Itoa(i))
		}
	}
	if len(docs) == 0 {
		problems = append(problems, "no documents to get")
	}
	if len(problems) > 0 {
		for i := range problems {
			problems[i] = strconv.Itoa(i+1) + ": " + problems[i]
		}
		return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: %s;", strings.Join(problems, ";"))
	}
	out := make([]any, 0, len(docs))
	for _, d := range docs {
		index := defaultIndex
		if v, ok := d["_index"]; ok {
			index = scalarString(v)
		}
		id := scalarString(d["_id"])
		q := url.Values{}
		for _, k := range []string{"routing", "realtime", "refresh", "stored_fields", "_source", "_source_includes", "_source_excludes"} {
			if v := r.URL.Query().Get(k); v != "" {
				q.Set(k, v)
			}
		}
		if v, ok := d["routing"]; ok {
			q.Set("routing", scalarString(v))
		}
		if v, ok := d["stored_fields"]; ok {
			q.Set("stored_fields", joinStrings(v))
		}
		switch src := d["_source"].(type) {
		case nil:
		case bool:
			q.Del("_source_includes")
			q.Del("_source_excludes")
			q.Set("_source", strconv.FormatBool(src))
		case map[string]any:
			q.Del("_source")
			if v := src["includes"]; v != nil {
				q.Set("_source_includes", joinStrings(v))
			}
			if v := src["excludes"]; v != nil {
				q.Set("_source_excludes", joinStrings(v))
			}
		default:
			q.Del("_source")
			q.Set("_source_includes", joinStrings(src))
		}
		sub := r.Clone(r.Context())
		sub.Method = http.MethodGet
		sub.URL = &url.URL{Path: "/" + index + "/_doc/" + id, RawQuery: q.Encode()}
		_, got, err := s.doc(sub, index, "_doc", id, nil)
		if err != nil {
			out = append(out, map[string]any{"_index": index, "_id": id, "error": asESError(err).body()["error"]})
			continue
		}
		out = append(out, got)
	}
	return 200, map[string]any{"docs": out}, nil
}

// joinStrings writes a string or a list of strings as a comma-separated list.
func joinStrings(v any) string {
	var parts []string
	for _, x := range clauses(v) {
		parts = append(parts, scalarString(x))
	}
	return strings.Join(parts, ",")
}
