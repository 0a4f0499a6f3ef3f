package eslite_test

import (
	"strings"
	"testing"
)

func TestFunctionScoreAndDistanceFeature(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	ids := func(q string) string { return strings.Join(e.queryIDs("news", q), ",") }
	// points: 1:120 2:80 3:200 4:45 5:150 6:5.
	if got := ids(`{"function_score":{"field_value_factor":{"field":"points"},"boost_mode":"replace"}}`); got != "3,5,1,2,4,6" {
		t.Errorf("field_value_factor: %s", got)
	}
	// Only go stories get their points; the others keep the weight-less default of 1.
	if got := ids(`{"function_score":{"query":{"match_all":{}},"functions":[{"filter":{"term":{"tags":"go"}},"field_value_factor":{"field":"points","modifier":"sqrt"}}],"boost_mode":"replace"}}`); !strings.HasPrefix(got, "3,5,1,") {
		t.Errorf("filtered function: %s", got)
	}
	// Closest to 100 points first, by a gaussian decay.
	if got := ids(`{"function_score":{"gauss":{"points":{"origin":100,"scale":20}},"boost_mode":"replace"}}`); !strings.HasPrefix(got, "1,2,5,") {
		t.Errorf("gauss: %s", got)
	}
	// The same seed and field give the same order.
	q := `{"function_score":{"query":{"match":{"body":"go"}},"random_score":{"seed":10,"field":"_seq_no"}}}`
	if a, b := ids(q), ids(q); a != b || len(strings.Split(a, ",")) != 2 {
		t.Errorf("random_score: %s then %s", a, b)
	}
	if st, typ := e.searchStatus("news", `{"query":{"function_score":{"random_score":{"seed":10,"field":"_id"}}}}`); st != 400 || typ != "illegal_argument_exception" {
		t.Errorf("random_score on _id: %d %s", st, typ)
	}
	if st, _ := e.searchStatus("news", `{"query":{"function_score":{"field_value_factor":{"field":"score"}}}}`); st != 500 {
		t.Errorf("field_value_factor without a value: %d", st)
	}
	// Nearest publication to 2026-02-01 first.
	if got := ids(`{"distance_feature":{"field":"published","origin":"2026-02-01","pivot":"7d"}}`); got != "4,5,3,2,1,6" {
		t.Errorf("distance_feature on dates: %s", got)
	}
}

func TestScriptScoreAndScriptQueries(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	// points: 1:120 2:80 3:200 4:45 5:150 6:5.
	ids := func(q string) string { return strings.Join(e.queryIDs("news", q), ",") }
	if got := ids(`{"script_score":{"query":{"match_all":{}},"script":{"source":"doc['points'].value * params.f","params":{"f":2}}}}`); got != "3,5,1,2,4,6" {
		t.Errorf("script_score: %s", got)
	}
	if got := ids(`{"script_score":{"query":{"match_all":{}},"script":"doc['score'].size() == 0 ? 1000 : _score"}}`); !strings.HasPrefix(got, "6,") {
		t.Errorf("script_score over a missing field: %s", got)
	}
	if got := strings.Join(sorted(e.queryIDs("news", `{"bool":{"filter":{"script":{"script":"doc['points'].value > 100 && doc['hot'].value"}}}}`)), ","); got != "1,3,5" {
		t.Errorf("script query: %s", got)
	}
	for _, q := range []string{
		`{"script_score":{"query":{"match_all":{}},"script":"doc['points'].value - 100"}}`,
		`{"script_score":{"query":{"match_all":{}},"script":"doc['score'].value"}}`,
		`{"script_score":{"query":{"match_all":{}},"script":"doc['points'].value.toString()"}}`,
	} {
		if st, _ := e.searchStatus("news", `{"query":`+q+`}`); st != 400 {
			t.Errorf("%s: %d", q, st)
		}
	}
}

func TestScriptFields(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	m := e.search("news", `{"query":{"ids":{"values":["1"]}},"script_fields":{"double":{"script":{"source":"doc['points'].value * params.k","params":{"k":2}}},
		"bad":{"script":"doc['score'].value + doc['nope'].value","ignore_failure":true}}}`)
	h := m["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)
	if got := jsonString(h["fields"]); got != `{"double":[240]}` {
		t.Errorf("script_fields: %s", got)
	}
	if st, _ := e.searchStatus("news", `{"script_fields":{"x":{"script":"doc['nope'].value"}}}`); st != 400 {
		t.Errorf("a failing script field: %d", st)
	}
}

func TestBoostingAndGeoDistance(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	// Go stories by alice drop below dave's.
	got := strings.Join(e.queryIDs("news", `{"boosting":{"positive":{"term":{"tags":"go"}},"negative":{"term":{"author":"alice"}},"negative_boost":0.1}}`), ",")
	if got != "5,1,3" {
		t.Errorf("boosting: %s", got)
	}
	e.ok(e.es.Indices.Create("geo", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"loc":{"type":"geo_point"}}}}`))))
	var b strings.Builder
	for i, p := range []string{"52.374081,4.912350", "52.369219,4.901618", "48.861111,2.336389"} {
		b.WriteString(`{"index":{"_id":"` + string(rune('a'+i)) + `"}}` + "\n" + `{"loc":"` + p + `"}` + "\n")
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("geo"), e.es.Bulk.WithRefresh("true")))
	// Amsterdam's two points are within 2km of the centre, Paris is not.
	if got := strings.Join(sorted(e.queryIDs("geo", `{"geo_distance":{"distance":"2km","loc":{"lat":52.37,"lon":4.90}}}`)), ","); got != "a,b" {
		t.Errorf("geo_distance: %s", got)
	}
	if got := strings.Join(sorted(e.queryIDs("geo", `{"geo_distance":{"distance":"500km","loc":[4.90,52.37]}}`)), ","); got != "a,b,c" {
		t.Errorf("geo_distance 500km: %s", got)
	}
}

func TestScriptSort(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	// points: 1:120 2:80 3:200 4:45 5:150 6:5; distance from 100 ascending.
	m := e.search("news", `{"size":3,"sort":[{"_script":{"type":"number","script":{"source":"Math.abs(doc['points'].value - params.p)","params":{"p":100}},"order":"asc"}}]}`)
	if got := strings.Join(hitIDs(m), ","); got != "1,2,5" {
		t.Errorf("_script sort: %s", got)
	}
	if got := jsonString(m["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)["sort"]); got != "[20]" {
		t.Errorf("sort values: %s", got)
	}
	next := e.search("news", `{"size":2,"sort":[{"_script":{"type":"number","script":{"source":"Math.abs(doc['points'].value - params.p)","params":{"p":100}},"order":"asc"}}],"search_after":[50]}`)
	if got := strings.Join(hitIDs(next), ","); got != "4,6" {
		t.Errorf("search_after on a _script sort: %s", got)
	}
}
