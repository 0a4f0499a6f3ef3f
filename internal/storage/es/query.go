package es

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Query is a query-string search, the form `trawler search` and the console send.
type Query struct {
	Q    string   // Elasticsearch query-string syntax; empty matches everything
	From int      // hits to skip
	Size int      // hits to return
	Sort string   // FIELD, FIELD:asc, FIELD:desc or -FIELD, comma-separated for several
	Aggs []string // fields to count hits per value of (terms aggregations named after the field)
}

// Body is the search request body for q.
func (q Query) Body() ([]byte, error) {
	body := map[string]any{"size": q.Size, "track_total_hits": true}
	if q.From > 0 {
		body["from"] = q.From
	}
	if strings.TrimSpace(q.Q) == "" {
		body["query"] = map[string]any{"match_all": map[string]any{}}
	} else {
		body["query"] = map[string]any{"query_string": map[string]any{"query": q.Q}}
	}
	if q.Sort != "" {
		var sorts []any
		for _, part := range strings.Split(q.Sort, ",") {
			part = strings.TrimSpace(part)
			dir := "asc"
			if strings.HasPrefix(part, "-") {
				part, dir = part[1:], "desc"
			} else if f, d, ok := strings.Cut(part, ":"); ok {
				part, dir = f, strings.ToLower(d)
			}
			if part == "" || (dir != "asc" && dir != "desc") {
				return nil, fmt.Errorf("sort %q: want FIELD, FIELD:asc, FIELD:desc or -FIELD", q.Sort)
			}
			sorts = append(sorts, map[string]any{part: map[string]any{"order": dir}})
		}
		body["sort"] = sorts
	}
	if len(q.Aggs) > 0 {
		a := map[string]any{}
		for _, f := range q.Aggs {
			a[f] = map[string]any{"terms": map[string]any{"field": f, "size": 20}}
		}
		body["aggs"] = a
	}
	return json.Marshal(body)
}
