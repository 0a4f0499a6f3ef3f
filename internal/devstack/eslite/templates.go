package eslite

import (
	"net/http"
	"strings"
)

// eslite has no index templates (composable, component or legacy): creating one is
// refused as unsupported, so reading or deleting one answers as Elasticsearch does when
// there is none.
func (s *server) templatesAPI(r *http.Request, kind, name string) (int, any, error) {
	listKey := map[string]string{"_index_template": "index_templates", "_component_template": "component_templates"}[kind]
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if name == "" || name == "*" {
			if kind == "_template" {
				return 200, map[string]any{}, nil
			}
			return 200, map[string]any{listKey: []any{}}, nil
		}
		if kind == "_template" {
			return 404, map[string]any{}, nil
		}
		what := map[string]string{"_index_template": "index template", "_component_template": "component template"}[kind]
		return 0, nil, &esError{status: 404, typ: "resource_not_found_exception", reason: what + " matching [" + name + "] not found"}
	case http.MethodDelete:
		if name == "" {
			return 0, nil, unsupported(r)
		}
		if strings.Contains(name, "*") {
			// A pattern that matches no template deletes nothing and succeeds.
			return 200, map[string]any{"acknowledged": true}, nil
		}
		if kind == "_template" {
			return 0, nil, &esError{status: 404, typ: "index_template_missing_exception", reason: "index_template [" + name + "] missing"}
		}
		what := map[string]string{"_index_template": "index_template", "_component_template": "component_template"}[kind]
		return 0, nil, &esError{status: 404, typ: "resource_not_found_exception", reason: what + " [" + name + "] missing"}
	}
	return 0, nil, badRequest("illegal_argument_exception", "eslite does not support index templates [%s %s]", r.Method, r.URL.Path)
}

// eslite has no ingest pipelines either (a write naming one fails): reading or deleting
// one answers as Elasticsearch does when there is none, and creating one is refused.
func (s *server) pipelinesAPI(r *http.Request, id string) (int, any, error) {
	switch {
	case r.Method == http.MethodGet && (id == "" || strings.Contains(id, "*")):
		return 200, map[string]any{}, nil
	case r.Method == http.MethodGet:
		return 404, map[string]any{}, nil
	case r.Method == http.MethodDelete && strings.Contains(id, "*"):
		return 200, map[string]any{"acknowledged": true}, nil
	case r.Method == http.MethodDelete && id != "":
		return 0, nil, &esError{status: 404, typ: "resource_not_found_exception", reason: "pipeline [" + id + "] is missing"}
	}
	return 0, nil, badRequest("illegal_argument_exception", "eslite does not support ingest pipelines [%s %s]", r.Method, r.URL.Path)
}
