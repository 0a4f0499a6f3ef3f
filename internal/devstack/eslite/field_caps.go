package eslite

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// capsMetaFields are the metadata fields _field_caps reports, with whether each is
// searchable and aggregatable, as Elasticsearch 8 reports them.
var capsMetaFields = map[string][2]bool{
	"_id": {true, false}, "_index": {true, true}, "_ignored": {true, false},
	"_seq_no": {true, true}, "_source": {false, false}, "_version": {false, true},
}

// notAggregatable are the field types without doc values.
var notAggregatable = map[string]bool{"text": true, "match_only_text": true, "search_as_you_type": true, "annotated_text": true,
	"semantic_text": true, "object": true, "nested": true, "binary": true, "geo_shape": true, "shape": true, "percolator": true,
	"completion": true, "dense_vector": true, "sparse_vector": true, "rank_feature": true, "rank_features": true,
	"integer_range": true, "float_range": true, "long_range": true, "double_range": true, "date_range": true, "ip_range": true}

// notSearchable are the field types no query reads.
var notSearchable = map[string]bool{"object": true, "nested": true, "binary": true, "histogram": true, "aggregate_metric_double": true}

// fieldCap is one field of one index as _field_caps sees it.
type fieldCap struct {
	typ                      string
	searchable, aggregatable bool
	meta                     bool
}

// indexCaps lists an index's fields from its mappings: leaves, multi-fields and the
// objects (and nested objects) on their paths.
func indexCaps(mappings map[string]any) map[string]fieldCap {
	out := map[string]fieldCap{}
	var walk func(props map[string]any, prefix string)
	walk = func(props map[string]any, prefix string) {
		for name, v := range props {
			p, _ := v.(map[string]any)
			path := prefix + name
			t := typeOf(p)
			out[path] = leafCap(p, t)
			if sub, ok := p["properties"].(map[string]any); ok {
				walk(sub, path+".")
			}
			if fs, ok := p["fields"].(map[string]any); ok {
				for sn, sv := range fs {
					sp, _ := sv.(map[string]any)
					out[path+"."+sn] = leafCap(sp, typeOf(sp))
				}
			}
		}
	}
	props, _ := mappings["properties"].(map[string]any)
	walk(props, "")
	for name, sa := range capsMetaFields {
		out[name] = fieldCap{typ: name, searchable: sa[0], aggregatable: sa[1], meta: true}
	}
	return out
}

func leafCap(p map[string]any, t string) fieldCap {
	c := fieldCap{typ: t, searchable: !notSearchable[t], aggregatable: !notAggregatable[t]}
	if fmt.Sprint(p["index"]) == "false" && fmt.Sprint(p["doc_values"]) == "false" {
		c.searchable = false
	}
	if fmt.Sprint(p["doc_values"]) == "false" {
		c.aggregatable = false
	}
	if fmt.Sprint(p["fielddata"]) == "true" {
		c.aggregatable = true
	}
	return c
}

// fieldCaps serves _field_caps: fields (a list of names and patterns, from the URL or the
// body), include_unmapped, filters (-metadata, +metadata), types, index_filter (indexes
// without a matching document are left out) and the usual index options.
func (s *server) fieldCaps(r *http.Request, expr string, body []byte) (int, any, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return 0, nil, unsupported(r)
	}
	req, err := decodeObject(body)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	var patterns []string
	for _, f := range strings.Split(q.Get("fields"), ",") {
		if f = strings.TrimSpace(f); f != "" {
			patterns = append(patterns, f)
		}
	}
	for k, v := range req {
		switch k {
		case "fields":
			for _, f := range clauses(v) {
				patterns = append(patterns, scalarString(f))
			}
		case "index_filter", "runtime_mappings":
		default:
			return 0, nil, badRequest("x_content_parse_exception", "[field_caps_request] unknown field [%s]", k)
		}
	}
	if len(patterns) == 0 {
		return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: 1: specified fields can't be null or empty;")
	}
	if rm, ok := req["runtime_mappings"].(map[string]any); ok && len(rm) > 0 {
		return 0, nil, badRequest("illegal_argument_exception", "eslite does not support [runtime_mappings] in _field_caps")
	}
	ixs, err := s.resolveFor(r, expr, expandOpen)
	if err != nil {
		return 0, nil, err
	}
	if filter, ok := req["index_filter"]; ok {
		var kept []*esIndex
		for _, ix := range ixs {
			sub := r.Clone(r.Context())
			sub.URL = &url.URL{Path: "/" + ix.name + "/_count"}
			b, _ := json.Marshal(map[string]any{"query": filter})
			_, out, err := s.count(sub, ix.name, b)
			if err != nil {
				return 0, nil, err
			}
			if n, _ := toFloat(out.(map[string]any)["count"]); n > 0 {
				kept = append(kept, ix)
			}
		}
		ixs = kept
	}
	withMeta, types := true, map[string]bool{}
	for _, f := range strings.Split(q.Get("filters"), ",") {
		switch strings.TrimSpace(f) {
		case "-metadata":
			withMeta = false
		case "+metadata", "":
		default:
			return 0, nil, badRequest("illegal_argument_exception", "eslite's _field_caps supports the filters +metadata and -metadata, not [%s]", f)
		}
	}
	for _, t := range strings.Split(q.Get("types"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			types[t] = true
		}
	}
	match := func(name string) bool {
		for _, p := range patterns {
			if p == name || (strings.ContainsAny(p, "*?") && globMatch(p, name)) {
				return true
			}
		}
		return false
	}
	// byField[name][type] are the indexes where the field has that type.
	byField := map[string]map[string][]string{}
	caps := map[string]map[string]fieldCap{}
	names := make([]string, 0, len(ixs))
	for _, ix := range ixs {
		names = append(names, ix.name)
		m := ix.snapshotMeta()
		c := indexCaps(m.Mappings)
		caps[ix.name] = c
		for name, fc := range c {
			if !match(name) || (fc.meta && !withMeta) || (len(types) > 0 && !types[fc.typ]) {
				continue
			}
			if byField[name] == nil {
				byField[name] = map[string][]string{}
			}
			byField[name][fc.typ] = append(byField[name][fc.typ], ix.name)
		}
	}
	if q.Get("include_unmapped") == "true" {
		for name, per := range byField {
			var missing []string
			for _, ix := range names {
				if _, ok := caps[ix][name]; !ok {
					missing = append(missing, ix)
				}
			}
			if len(missing) > 0 {
				per["unmapped"] = missing
			}
		}
	}
	fields := map[string]any{}
	for name, per := range byField {
		entry := map[string]any{}
		for typ, in := range per {
			sort.Strings(in)
			c := map[string]any{"type": typ, "metadata_field": false, "searchable": false, "aggregatable": false}
			if typ != "unmapped" {
				var nonSearch, nonAgg []string
				for _, ix := range in {
					fc := caps[ix][name]
					c["metadata_field"] = fc.meta
					if !fc.searchable {
						nonSearch = append(nonSearch, ix)
					}
					if !fc.aggregatable {
						nonAgg = append(nonAgg, ix)
					}
				}
				c["searchable"], c["aggregatable"] = len(nonSearch) == 0, len(nonAgg) == 0
				if len(nonSearch) > 0 && len(nonSearch) < len(in) {
					c["non_searchable_indices"] = nonSearch
				}
				if len(nonAgg) > 0 && len(nonAgg) < len(in) {
					c["non_aggregatable_indices"] = nonAgg
				}
			}
			if len(per) > 1 {
				c["indices"] = in
			}
			entry[typ] = c
		}
		fields[name] = entry
	}
	return 200, map[string]any{"indices": names, "fields": fields}, nil
}
