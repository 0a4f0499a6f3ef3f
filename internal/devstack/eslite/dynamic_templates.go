package eslite

import (
	"encoding/json"
	"regexp"
	"strings"
)

// dynamicTemplate is one entry of a mapping's dynamic_templates: which new fields it
// maps (by name, path and JSON type) and the mapping they get.
type dynamicTemplate struct {
	name                   string
	match, unmatch         []string
	pathMatch, pathUnmatch []string
	regex                  bool
	types                  []string // JSON types it takes; none means only when named
	mapping                map[string]any
}

func parseDynamicTemplates(v any) []dynamicTemplate {
	var out []dynamicTemplate
	for _, x := range clauses(v) {
		m, _ := x.(map[string]any)
		for name, body := range m {
			b, _ := body.(map[string]any)
			t := dynamicTemplate{name: name, regex: scalarString(b["match_pattern"]) == "regex"}
			t.mapping, _ = b["mapping"].(map[string]any)
			strs := func(k string) []string {
				var out []string
				for _, s := range clauses(b[k]) {
					out = append(out, scalarString(s))
				}
				return out
			}
			t.match, t.unmatch, t.pathMatch, t.pathUnmatch = strs("match"), strs("unmatch"), strs("path_match"), strs("path_unmatch")
			// Without match_mapping_type, a template takes every type when it has name or
			// path patterns, and otherwise only fields the request names it for.
			switch mt := strs("match_mapping_type"); {
			case len(mt) > 0 && !(len(mt) == 1 && mt[0] == "*"):
				t.types = mt
			case len(mt) > 0 || len(t.match) > 0 || len(t.pathMatch) > 0:
				t.types = []string{"*"}
			}
			out = append(out, t)
		}
	}
	return out
}

// jsonType is the JSON type dynamic templates match a value by, and the type
// {dynamic_type} stands for.
func jsonType(v any) (matchType, dynamicType string) {
	switch t := v.(type) {
	case map[string]any:
		return "object", "object"
	case bool:
		return "boolean", "boolean"
	case json.Number:
		if _, err := t.Int64(); err == nil {
			return "long", "long"
		}
		return "double", "float"
	case string:
		if dynamicMapping(v)["type"] == "date" {
			return "date", "date"
		}
		return "string", "text"
	}
	return "string", "text"
}

func (t dynamicTemplate) matches(path, name, typ string) bool {
	if len(t.types) == 0 {
		return false
	}
	if t.types[0] != "*" && !contains(t.types, typ) {
		return false
	}
	anyOf := func(patterns []string, s string) bool {
		for _, p := range patterns {
			if t.regex {
				if ok, _ := regexp.MatchString(p, s); ok {
					return true
				}
			} else if globMatch(p, s) {
				return true
			}
		}
		return false
	}
	if len(t.match) > 0 && !anyOf(t.match, name) || anyOf(t.unmatch, name) {
		return false
	}
	if len(t.pathMatch) > 0 && !anyOf(t.pathMatch, path) || anyOf(t.pathUnmatch, path) {
		return false
	}
	return true
}

// newFieldMapping maps a field the mappings do not know: by the dynamic template the
// request names for it, else by the first template that matches it, else as
// Elasticsearch maps JSON values by default.
func (dp *docParse) newFieldMapping(path, name string, v any) (map[string]any, error) {
	matchType, dynType := jsonType(v)
	var chosen *dynamicTemplate
	if want, ok := dp.chosen[path]; ok {
		for i := range dp.templates {
			if dp.templates[i].name == want {
				chosen = &dp.templates[i]
				break
			}
		}
		if chosen == nil {
			return nil, badRequest("document_parsing_exception", "failed to parse: Can't find dynamic template for dynamic template name [%s] of field [%s]", want, path)
		}
	} else {
		for i := range dp.templates {
			if dp.templates[i].matches(path, name, matchType) {
				chosen = &dp.templates[i]
				break
			}
		}
	}
	if chosen == nil || chosen.mapping == nil {
		return dynamicMapping(v), nil
	}
	m := substituteTemplate(deepCopy(chosen.mapping), name, dynType).(map[string]any)
	if _, ok := m["type"]; !ok {
		if matchType == "object" {
			m["properties"] = map[string]any{}
		} else {
			m["type"] = dynamicMapping(v)["type"]
		}
	}
	return m, nil
}

// substituteTemplate replaces {name} and {dynamic_type} in a template's mapping.
func substituteTemplate(v any, name, dynType string) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = substituteTemplate(x, name, dynType)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = substituteTemplate(x, name, dynType)
		}
		return t
	case string:
		return strings.ReplaceAll(strings.ReplaceAll(t, "{name}", name), "{dynamic_type}", dynType)
	}
	return v
}
