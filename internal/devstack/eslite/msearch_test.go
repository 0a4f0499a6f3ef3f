package eslite_test

import (
	"strings"
	"testing"
)

func TestMsearchAndIndexQueries(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	e.ok(e.es.Index("other", strings.NewReader(`{"title":"Other go"}`), e.es.Index.WithRefresh("true")))
	body := `{"index":"news"}` + "\n" + `{"query":{"term":{"author":"alice"}}}` + "\n" +
		`{}` + "\n" + `{"query":{"match":{"_index":"other"}}}` + "\n" +
		`{"index":"missing"}` + "\n" + `{}` + "\n"
	st, m := e.do("POST", "/_msearch?rest_total_hits_as_int=true", body)
	rs, _ := m["responses"].([]any)
	if st != 200 || len(rs) != 3 {
		t.Fatalf("msearch: %d %v", st, m)
	}
	total := func(i int) any { return rs[i].(map[string]any)["hits"].(map[string]any)["total"] }
	if total(0) != 2.0 || total(1) != 1.0 || rs[2].(map[string]any)["status"] != 404.0 {
		t.Errorf("responses: %v %v %v", total(0), total(1), rs[2])
	}
	// _index matches documents by their index's name.
	for q, want := range map[string]float64{`{"term":{"_index":"news"}}`: 6, `{"terms":{"_index":["news","other"]}}`: 7, `{"prefix":{"_index":"oth"}}`: 1, `{"wildcard":{"_index":"n*s"}}`: 6} {
		if got := e.search("news,other", `{"query":`+q+`}`); total(0) == nil || got["hits"].(map[string]any)["total"].(map[string]any)["value"] != want {
			t.Errorf("%s: %v, want %v", q, got["hits"].(map[string]any)["total"], want)
		}
	}
}

func TestAggregateOnIndexName(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	e.ok(e.es.Index("other", strings.NewReader(`{"author":"zed"}`), e.es.Index.WithRefresh("true")))
	got := e.aggJSON("news,other", "", `{"i":{"terms":{"field":"_index"}}}`)
	if got != `{"i":{"buckets":[{"doc_count":6,"key":"news"},{"doc_count":1,"key":"other"}],"doc_count_error_upper_bound":0,"sum_other_doc_count":0}}` {
		t.Errorf("terms on _index: %s", got)
	}
	if st, _ := e.searchStatus("news", `{"aggs":{"i":{"terms":{"field":"_id"}}}}`); st != 400 {
		t.Errorf("terms on _id: %d", st)
	}
}
