package eslite_test

import (
	"strings"
	"testing"
)

func TestFieldsOption(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("f", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"dynamic":false,"properties":{
		"kw":{"type":"keyword"},"d":{"type":"date"},"n":{"type":"integer","ignore_malformed":true},"count":{"type":"token_count","analyzer":"standard"},
		"obj":{"type":"object","properties":{"products":{"type":"nested","properties":{"maker":{"type":"keyword"},"price":{"type":"double"}}},"other":{"type":"keyword"}}},
		"loc":{"type":"geo_point"}}}}`))))
	e.ok(e.es.Index("f", strings.NewReader(`{"kw":["a","b"],"d":"1990-12-29T22:30:00.000Z","n":"oops","count":"some text","free":"x",
		"obj":{"other":"o","products":[{"maker":"Supersoft","price":1.55},{"maker":"HyperSmart","price":20.2}]},"loc":"41.12,-71.34"}`), e.es.Index.WithDocumentID("1"), e.es.Index.WithRefresh("true")))
	fields := func(req string) string {
		t.Helper()
		h := e.search("f", `{"_source":false,"fields":`+req+`}`)["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)
		return jsonString(h["fields"])
	}
	for req, want := range map[string]string{
		// Fields under a nested object come grouped by object.
		`["*"]`: `{"count":[2],"d":["1990-12-29T22:30:00.000Z"],"kw":["a","b"],"loc":[{"coordinates":[-71.34,41.12],"type":"Point"}],` +
			`"obj.other":["o"],"obj.products":[{"maker":["Supersoft"],"price":[1.55]},{"maker":["HyperSmart"],"price":[20.2]}]}`,
		`["obj.products.maker"]`:                    `{"obj.products":[{"maker":["Supersoft"]},{"maker":["HyperSmart"]}]}`,
		`["obj.products"]`:                          `null`,
		`[{"field":"d","format":"yyyy/MM/dd"}]`:     `{"d":["1990/12/29"]}`,
		`[{"field":"fr*","include_unmapped":true}]`: `{"free":["x"]}`,
		`[{"field":"n"}]`:                           `null`,
	} {
		if got := fields(req); got != want {
			t.Errorf("fields %s:\n got  %s\n want %s", req, got, want)
		}
	}
	if st, _ := e.searchStatus("f", `{"fields":[{"field":"kw","format":"yyyy/MM/dd"}]}`); st != 400 {
		t.Errorf("format on a keyword: %d", st)
	}
	e.ok(e.es.Indices.Create("nosource", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"_source":{"enabled":false},"properties":{"kw":{"type":"keyword"}}}}`))))
	e.ok(e.es.Index("nosource", strings.NewReader(`{"kw":"a"}`), e.es.Index.WithRefresh("true")))
	if st, typ := e.searchStatus("nosource", `{"fields":["kw"]}`); st != 400 || typ != "illegal_argument_exception" {
		t.Errorf("fields without _source: %d %s", st, typ)
	}
}
