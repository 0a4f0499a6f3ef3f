package eslite_test

import (
	"strings"
	"testing"
)

func TestGeoGrids(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("geo", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"location":{"type":"geo_point"}}}}`))))
	var b strings.Builder
	for _, p := range []string{"52.374081,4.912350", "52.369219,4.901618", "52.371667,4.914722", "51.222900,4.405200", "48.861111,2.336389", "48.860000,2.327000"} {
		b.WriteString("{\"index\":{}}\n{\"location\":\"" + p + "\"}\n")
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("geo"), e.es.Bulk.WithRefresh("true")))
	// Amsterdam, Paris, Antwerp: the cells Elasticsearch gives them, fullest first.
	for aggs, want := range map[string]string{
		`{"g":{"geohash_grid":{"field":"location","precision":3}}}`:          `{"g":{"buckets":[{"doc_count":3,"key":"u17"},{"doc_count":2,"key":"u09"},{"doc_count":1,"key":"u15"}]}}`,
		`{"g":{"geotile_grid":{"field":"location","precision":8}}}`:          `{"g":{"buckets":[{"doc_count":3,"key":"8/131/84"},{"doc_count":2,"key":"8/129/88"},{"doc_count":1,"key":"8/131/85"}]}}`,
		`{"g":{"geohash_grid":{"field":"location","precision":1,"size":1}}}`: `{"g":{"buckets":[{"doc_count":6,"key":"u"}]}}`,
	} {
		if got := e.aggJSON("geo", "", aggs); got != want {
			t.Errorf("%s:\n got  %s\n want %s", aggs, got, want)
		}
	}
	if st, _ := e.searchStatus("geo", `{"aggs":{"g":{"geohash_grid":{"field":"location","precision":13}}}}`); st != 400 {
		t.Errorf("precision 13: %d", st)
	}
}

func TestGeoBoundsAndCentroid(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("geo", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"location":{"type":"geo_point"}}}}`))))
	var b strings.Builder
	for _, p := range []string{"10,170", "20,-170", "-5,175"} {
		b.WriteString("{\"index\":{}}\n{\"location\":\"" + p + "\"}\n")
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("geo"), e.es.Bulk.WithRefresh("true")))
	// Points on both sides of the dateline: the box crossing it is narrower.
	for aggs, want := range map[string]string{
		`{"b":{"geo_bounds":{"field":"location"}}}`:                        `{"b":{"bounds":{"bottom_right":{"lat":-5,"lon":-170},"top_left":{"lat":20,"lon":170}}}}`,
		`{"b":{"geo_bounds":{"field":"location","wrap_longitude":false}}}`: `{"b":{"bounds":{"bottom_right":{"lat":-5,"lon":175},"top_left":{"lat":20,"lon":-170}}}}`,
		`{"c":{"geo_centroid":{"field":"location"}}}`:                      `{"c":{"count":3,"location":{"lat":8.333333333333334,"lon":58.333333333333336}}}`,
	} {
		if got := e.aggJSON("geo", "", aggs); got != want {
			t.Errorf("%s:\n got  %s\n want %s", aggs, got, want)
		}
	}
	// distance_feature ranks the points nearest an origin first (kilometers apart).
	m := e.search("geo", `{"query":{"distance_feature":{"field":"location","origin":[175,-4],"pivot":"1km"}}}`)
	var order []string
	for _, h := range m["hits"].(map[string]any)["hits"].([]any) {
		order = append(order, jsonString(h.(map[string]any)["_source"].(map[string]any)["location"]))
	}
	if got := strings.Join(order, " "); got != `"-5,175" "10,170" "20,-170"` {
		t.Errorf("distance_feature on geo points: %s", got)
	}
}
