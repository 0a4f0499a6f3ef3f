package eslite_test

import (
	"strings"
	"testing"
)

func TestNoTemplatesOrPipelines(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	// eslite keeps no templates or pipelines: creating one is refused, reading or deleting one finds
	// none, as Elasticsearch answers when there is none.
	for _, c := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"PUT", "/_index_template/t", `{"index_patterns":["x*"]}`, 400, "does not support index templates"},
		{"GET", "/_index_template", "", 200, `{"index_templates":[]}`},
		{"GET", "/_index_template/t", "", 404, "index template matching [t] not found"},
		{"DELETE", "/_index_template/t", "", 404, "index_template [t] missing"},
		{"DELETE", "/_component_template/c", "", 404, "component_template [c] missing"},
		{"DELETE", "/_template/old", "", 404, "index_template_missing_exception"},
		{"DELETE", "/_index_template/*", "", 200, `{"acknowledged":true}`},
		{"GET", "/_template", "", 200, `{}`},
		{"PUT", "/_ingest/pipeline/p", `{"processors":[]}`, 400, "does not support ingest pipelines"},
		{"DELETE", "/_ingest/pipeline/p", "", 404, "pipeline [p] is missing"},
		{"DELETE", "/_ingest/pipeline/*", "", 200, `{"acknowledged":true}`},
	} {
		st, m := e.do(c.method, c.path, c.body)
		if st != c.status || !strings.Contains(jsonString(m), c.want) {
			t.Errorf("%s %s: %d %s", c.method, c.path, st, jsonString(m))
		}
	}
}
