package eslite

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
)

// The fields option of a search returns each requested field's values as the mapping
// reads them from _source: typed and formatted, one list per field, and for a field
// under a nested object, grouped under that object's path, one entry per object, as
// Elasticsearch does.

// nestedAndSource reads from an index's mappings the paths of its nested fields (sorted)
// and whether _source is kept.
func (ix *esIndex) nestedAndSource() ([]string, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var nested []string
	var walk func(props map[string]any, prefix string)
	walk = func(props map[string]any, prefix string) {
		for name, v := range props {
			p, _ := v.(map[string]any)
			if typeOf(p) == "nested" {
				nested = append(nested, prefix+name)
			}
			if sub, ok := p["properties"].(map[string]any); ok {
				walk(sub, prefix+name+".")
			}
		}
	}
	props, _ := ix.meta.Mappings["properties"].(map[string]any)
	walk(props, "")
	sort.Strings(nested)
	enabled := true
	if s, ok := ix.meta.Mappings["_source"].(map[string]any); ok && scalarString(s["enabled"]) == "false" {
		enabled = false
	}
	return nested, enabled
}

// fieldsOption renders the fields option for one document of ix into out.
func fieldsOption(reqs []fieldRequest, ix *esIndex, src map[string]any, out map[string]any) error {
	if len(reqs) == 0 {
		return nil
	}
	nested, sourceOn := ix.nestedAndSource()
	if !sourceOn {
		return badRequest("illegal_argument_exception", "Unable to retrieve the requested [fields] since _source is disabled in the mappings for index [%s]", ix.name)
	}
	fields := ix.fieldMap()
	want := map[string]fieldRequest{}
	for _, fr := range reqs {
		for n, fi := range fields {
			if n != fr.pattern && !(strings.ContainsAny(fr.pattern, "*?") && globMatch(fr.pattern, n)) {
				continue
			}
			if fr.format != "" && fi.Type != "date" && fi.Type != "long" && fi.Type != "double" {
				return badRequest("illegal_argument_exception", "Field [%s] of type [%s] doesn't support formats.", n, fi.ESType)
			}
			if _, ok := want[n]; !ok {
				want[n] = fr
			}
		}
	}
	f := &fieldFetcher{fields: fields, nested: nested, want: want}
	for k, v := range f.collect("", src) {
		out[k] = v
	}
	for _, fr := range reqs {
		if fr.unmapped {
			unmappedValues(src, "", fr.pattern, fields, nested, out)
		}
	}
	return nil
}

type fieldFetcher struct {
	fields map[string]fieldInfo
	nested []string
	want   map[string]fieldRequest
}

// scope is the innermost nested path a field lies under, or "".
func (f *fieldFetcher) scope(name string) string {
	best := ""
	for _, p := range f.nested {
		if strings.HasPrefix(name, p+".") && len(p) > len(best) {
			best = p
		}
	}
	return best
}

// collect renders the requested fields whose innermost nested path is scope, reading
// them from obj (the document, or one object of that nested field); keys are relative
// to scope.
func (f *fieldFetcher) collect(scope string, obj map[string]any) map[string]any {
	out := map[string]any{}
	rel := func(path string) string {
		if scope == "" {
			return path
		}
		return strings.TrimPrefix(path, scope+".")
	}
	for n, fr := range f.want {
		if f.scope(n) != scope {
			continue
		}
		fi := f.fields[n]
		fi.Src = rel(fi.Src)
		if vals := fieldOptionValues(fi, fr, obj); len(vals) > 0 {
			out[rel(n)] = vals
		}
	}
	for _, p := range f.nested {
		if f.scope(p) != scope || !f.wantsUnder(p) {
			continue
		}
		var objs []any
		for _, v := range sourceValues(obj, rel(p)) {
			if o, ok := v.(map[string]any); ok {
				if sub := f.collect(p, o); len(sub) > 0 {
					objs = append(objs, sub)
				}
			}
		}
		if len(objs) > 0 {
			out[rel(p)] = objs
		}
	}
	return out
}

func (f *fieldFetcher) wantsUnder(p string) bool {
	for n := range f.want {
		if strings.HasPrefix(n, p+".") {
			return true
		}
	}
	return false
}

// fieldOptionValues reads one field's values from obj as the fields option shows them.
func fieldOptionValues(fi fieldInfo, fr fieldRequest, obj map[string]any) []any {
	switch {
	case fi.ESType == "geo_point":
		var out []any
		for _, p := range geoPoints(sourceValues(obj, fi.Src)) {
			out = append(out, map[string]any{"type": "Point", "coordinates": []any{p.lon, p.lat}})
		}
		return out
	case fi.Type == "text" || fi.Type == "none":
		return sourceValues(obj, fi.Src)
	case fi.Type == "keyword" && fi.IgnoreAbove > 0:
		var out []any
		for _, v := range fieldValues(fi, obj) {
			if len(scalarString(v)) <= fi.IgnoreAbove {
				out = append(out, v)
			}
		}
		return out
	}
	vals := fieldValues(fi, obj)
	out := make([]any, 0, len(vals))
	for _, v := range vals {
		x, isNum := v.(float64)
		switch {
		case isNum && fi.Type == "date":
			format := fr.format
			if format == "" {
				format, _, _ = strings.Cut(fi.DateFormat, "||")
			}
			out = append(out, formatDate(x, format, nil))
		case isNum && fr.format != "":
			out = append(out, decimalFormat(x, fr.format))
		case isNum && fi.Type == "long":
			out = append(out, jsonNumber(x))
		default:
			out = append(out, v)
		}
	}
	return out
}

// unmappedValues adds, for include_unmapped, the leaf values of _source paths the
// mapping does not know that match pattern, under their dotted paths.
func unmappedValues(v any, path, pattern string, fields map[string]fieldInfo, nested []string, out map[string]any) {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			p := k
			if path != "" {
				p = path + "." + k
			}
			unmappedValues(t[k], p, pattern, fields, nested, out)
		}
	case []any:
		for _, x := range t {
			unmappedValues(x, path, pattern, fields, nested, out)
		}
	case nil:
	default:
		if _, mapped := fields[path]; mapped || !(path == pattern || globMatch(pattern, path)) {
			return
		}
		for _, n := range nested {
			if strings.HasPrefix(path, n+".") {
				return
			}
		}
		if n, ok := t.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				t = jsonNumber(f)
			}
		}
		list, _ := out[path].([]any)
		out[path] = append(list, t)
	}
}
