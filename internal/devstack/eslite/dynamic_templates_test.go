package eslite_test

import (
	"strings"
	"testing"
)

func TestDynamicTemplates(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("dt", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"dynamic_templates":[
		{"location":{"mapping":{"type":"geo_point"}}},
		{"my_location":{"match":"my*","mapping":{"type":"geo_point"}}},
		{"longs_as_strings":{"match_mapping_type":"long","path_match":"counts.*","mapping":{"type":"keyword","meta":{"from":"{name}"}}}},
		{"strings":{"match_mapping_type":"string","unmatch":"raw_*","mapping":{"type":"keyword"}}}]}}`))))
	body := `{"index":{"_id":"1","dynamic_templates":{"location":"location"}}}` + "\n" + `{"location":"41.12,-71.34","my_spot":"41.12,-71.34","counts":{"a":5},"title":"Hello World","raw_title":"Hello World"}` + "\n" +
		`{"index":{"_id":"2","dynamic_templates":{"elsewhere":"nope"}}}` + "\n" + `{"elsewhere":"41,-71"}` + "\n"
	st, m := e.do("POST", "/dt/_bulk?refresh=true", body)
	items := m["items"].([]any)
	if st != 200 || items[0].(map[string]any)["index"].(map[string]any)["status"] != 201.0 {
		t.Fatalf("bulk: %d %v", st, m)
	}
	// A template the request names but the mapping lacks fails that document.
	if second := items[1].(map[string]any)["index"].(map[string]any); second["status"] != 400.0 || !strings.Contains(jsonString(second), "Can't find dynamic template for dynamic template name [nope] of field [elsewhere]") {
		t.Errorf("unknown template: %v", second)
	}
	_, mp := e.do("GET", "/dt/_mapping", "")
	props := mp["dt"].(map[string]any)["mappings"].(map[string]any)["properties"].(map[string]any)
	for field, want := range map[string]string{
		"location":  `{"type":"geo_point"}`,
		"my_spot":   `{"type":"geo_point"}`,
		"counts":    `{"properties":{"a":{"meta":{"from":"a"},"type":"keyword"}}}`,
		"title":     `{"type":"keyword"}`,
		"raw_title": `{"fields":{"keyword":{"ignore_above":256,"type":"keyword"}},"type":"text"}`,
	} {
		if got := jsonString(props[field]); got != want {
			t.Errorf("mapping of %s: %s, want %s", field, got, want)
		}
	}
	if got := e.queryIDs("dt", `{"geo_bounding_box":{"my_spot":{"top_left":{"lat":42,"lon":-72},"bottom_right":{"lat":40,"lon":-70}}}}`); len(got) != 1 {
		t.Errorf("geo query on a templated field: %v", got)
	}
}
