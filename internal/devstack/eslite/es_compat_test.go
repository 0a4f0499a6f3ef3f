package eslite_test

import (
	"fmt"
	"strings"
	"testing"
)

// term and terms on _id find documents by id, as the ids query does (a script checking a
// document after indexing it with refresh=true asks this way).
func TestTermOnID(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	for q, want := range map[string][]string{
		`{"term":{"_id":"3"}}`:            {"3"},
		`{"term":{"_id":{"value":"5"}}}`:  {"5"},
		`{"terms":{"_id":["1","4","9"]}}`: {"1", "4"},
	} {
		got := sorted(hitIDs(e.search("news", `{"query":`+q+`}`)))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: ids %v, want %v", q, got, want)
		}
	}
}

// A date sort with a format gives its sort values as formatted dates (null for a
// document without one), reads search_after in that format, and "missing" places the
// documents without a value first, last or at a value of their own.
func TestSortFormatAndMissing(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	e.ok(e.es.Index("news", strings.NewReader(`{"title":"Undated"}`), e.es.Index.WithDocumentID("7"), e.es.Index.WithRefresh("true")))
	sorts := func(body string) string {
		var out []string
		for _, h := range e.search("news", body)["hits"].(map[string]any)["hits"].([]any) {
			out = append(out, fmt.Sprint(h.(map[string]any)["_id"], " ", h.(map[string]any)["sort"]))
		}
		return strings.Join(out, " ")
	}
	for body, want := range map[string]string{
		`{"size":2,"sort":[{"published":{"order":"desc","format":"strict_date_optional_time_nanos"}}]}`:                                           "6 [2026-03-01T00:00:00.000Z] 5 [2026-02-10T09:00:00.000Z]",
		`{"size":2,"sort":[{"published":{"order":"desc","format":"yyyy-MM-dd"}}],"search_after":["2026-02-10"]}`:                                  "4 [2026-02-02] 3 [2026-01-20]",
		`{"size":2,"sort":[{"published":{"order":"desc","format":"yyyy-MM-dd","missing":"_first"}}]}`:                                             "7 [<nil>] 6 [2026-03-01]",
		`{"size":1,"sort":[{"published":{"order":"asc","format":"epoch_millis","missing":"_first"}}],"query":{"term":{"_id":"7"}}}`:               "7 [<nil>]",
		`{"size":2,"sort":[{"points":{"order":"asc","missing":0}}]}`:                                                                              "7 [0] 6 [5]",
		`{"size":3,"sort":[{"published":{"order":"asc","format":"yyyy-MM-dd","missing":"_last"}}],"search_after":["2026-02-09"],"_source":false}`: "5 [2026-02-10] 6 [2026-03-01] 7 [<nil>]",
	} {
		if got := sorts(body); got != want {
			t.Errorf("%s:\n got %s\nwant %s", body, got, want)
		}
	}
	st, m := e.do("POST", "/news/_search", `{"sort":[{"published":{"format":"epoch_millis"}}],"search_after":["2026-02-10T09:00:00Z"]}`)
	if st != 400 || !strings.Contains(fmt.Sprint(m["error"]), "failed to parse date field [2026-02-10T09:00:00Z] with format [epoch_millis]") {
		t.Errorf("search_after not in the sort's format: %d %v", st, m)
	}
}

// A date field mapped with a different format in each index of a pattern (logs-*) is
// read in each index's own format: sorts and date histograms over both see every date.
func TestDateFormatsDifferAcrossIndexes(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	for name, format := range map[string]string{"logs-a": "yyyy-MM-dd HH:mm:ss", "logs-b": "dd/MM/yyyy HH:mm"} {
		e.ok(e.es.Indices.Create(name, e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"ts":{"type":"date","format":"`+format+`"}}}}`))))
	}
	e.ok(e.es.Index("logs-a", strings.NewReader(`{"ts":"2026-01-05 10:00:00"}`), e.es.Index.WithDocumentID("a1"), e.es.Index.WithRefresh("true")))
	e.ok(e.es.Index("logs-b", strings.NewReader(`{"ts":"20/02/2026 08:30"}`), e.es.Index.WithDocumentID("b1"), e.es.Index.WithRefresh("true")))
	m := e.search("logs-*", `{"sort":[{"ts":"desc"}],"aggs":{"m":{"date_histogram":{"field":"ts","calendar_interval":"month","format":"yyyy-MM"}}}}`)
	var got []string
	for _, h := range m["hits"].(map[string]any)["hits"].([]any) {
		got = append(got, fmt.Sprint(h.(map[string]any)["_id"], " ", h.(map[string]any)["sort"]))
	}
	if strings.Join(got, ", ") != "b1 [1.7715762e+12], a1 [1.7676072e+12]" {
		t.Errorf("sorted hits: %v", got)
	}
	var buckets []string
	for _, b := range m["aggregations"].(map[string]any)["m"].(map[string]any)["buckets"].([]any) {
		buckets = append(buckets, fmt.Sprint(b.(map[string]any)["key_as_string"], "=", b.(map[string]any)["doc_count"]))
	}
	if strings.Join(buckets, " ") != "2026-01=1 2026-02=1" {
		t.Errorf("buckets: %v", buckets)
	}
}

// top_hits under a nested aggregation returns the nested objects as hits: the document's
// id, the object as _source and its place in _nested, sorted on the objects' fields.
func TestTopHitsOfNestedObjects(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("posts", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"comments":{"type":"nested","properties":{"by":{"type":"keyword"}}}}}}`))))
	e.ok(e.es.Index("posts", strings.NewReader(`{"comments":[{"by":"zoe"},{"by":"al"}]}`), e.es.Index.WithDocumentID("p1"), e.es.Index.WithRefresh("true")))
	e.ok(e.es.Index("posts", strings.NewReader(`{"comments":[{"by":"max"}]}`), e.es.Index.WithDocumentID("p2"), e.es.Index.WithRefresh("true")))
	m := e.search("posts", `{"size":0,"aggs":{"c":{"nested":{"path":"comments"},"aggs":{"top":{"top_hits":{"sort":"comments.by"}}}}}}`)
	var got []string
	for _, h := range m["aggregations"].(map[string]any)["c"].(map[string]any)["top"].(map[string]any)["hits"].(map[string]any)["hits"].([]any) {
		h := h.(map[string]any)
		got = append(got, fmt.Sprint(h["_id"], " ", h["_nested"], " ", h["_source"]))
	}
	want := "p1 map[field:comments offset:1] map[by:al], p2 map[field:comments offset:0] map[by:max], p1 map[field:comments offset:0] map[by:zoe]"
	if strings.Join(got, ", ") != want {
		t.Errorf("nested top hits:\n got %s\nwant %s", strings.Join(got, ", "), want)
	}
}

// A field that is a long in one index and a double in another aggregates as a double
// over both: 14.6 stays 14.6.
func TestLongAndDoubleAcrossIndexes(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Index("n1", strings.NewReader(`{"number":10}`), e.es.Index.WithRefresh("true")))
	e.ok(e.es.Index("n2", strings.NewReader(`{"number":14.6}`), e.es.Index.WithRefresh("true")))
	e.ok(e.es.Index("n2", strings.NewReader(`{"number":10.0}`), e.es.Index.WithRefresh("true")))
	m := e.search("n1,n2", `{"size":0,"aggs":{"t":{"terms":{"field":"number"}}}}`)
	var got []string
	for _, b := range m["aggregations"].(map[string]any)["t"].(map[string]any)["buckets"].([]any) {
		got = append(got, fmt.Sprint(b.(map[string]any)["key"], "=", b.(map[string]any)["doc_count"]))
	}
	if strings.Join(got, " ") != "10=2 14.6=1" {
		t.Errorf("buckets: %v", got)
	}
}

// A terms order path may name a top_metrics metric in brackets, top_metrics[field], as
// well as with a dot.
func TestTermsOrderByTopMetricsInBrackets(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	got := func(path string) string {
		m := e.search("news", `{"size":0,"aggs":{"a":{"terms":{"field":"author","order":{"`+path+`":"desc"}},
			"aggs":{"tm":{"top_metrics":{"metrics":{"field":"points"},"sort":{"points":"asc"}}}}}}}`)
		var keys []string
		for _, b := range m["aggregations"].(map[string]any)["a"].(map[string]any)["buckets"].([]any) {
			keys = append(keys, b.(map[string]any)["key"].(string))
		}
		return strings.Join(keys, " ")
	}
	// The least points per author: dave 150, alice 120, carol 45, bob 5.
	if b, d := got("tm[points]"), got("tm.points"); b != "dave alice carol bob" || b != d {
		t.Errorf("by tm[points]: %s; by tm.points: %s", b, d)
	}
}

// A get with realtime=false and refresh=true refreshes the index first, so it finds a
// document indexed since the last refresh.
func TestGetRealtimeFalseWithRefresh(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("r", e.es.Indices.Create.WithBody(strings.NewReader(`{"settings":{"index.refresh_interval":-1}}`))))
	e.ok(e.es.Index("r", strings.NewReader(`{"a":1}`), e.es.Index.WithDocumentID("1")))
	if st, _ := e.do("GET", "/r/_doc/1?realtime=false", ""); st != 404 {
		t.Errorf("unrefreshed realtime=false get: %d, want 404", st)
	}
	if st, m := e.do("GET", "/r/_doc/1?realtime=false&refresh=true", ""); st != 200 || m["found"] != true {
		t.Errorf("realtime=false&refresh=true: %d %v", st, m)
	}
}

// filter_path keeps only what its paths name, drops what its -paths name, and walks
// through arrays and ** levels.
func TestFilterPath(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	for fp, want := range map[string]string{
		"hits.total.value":                `map[hits:map[total:map[value:1]]]`,
		"hits.hits._id,-hits.hits._index": `map[hits:map[hits:[map[_id:1]]]]`,
		"**._source.author":               `map[hits:map[hits:[map[_source:map[author:alice]]]]]`,
		"-**._source,-_shards,-took,-timed_out,-hits.total,-hits.max_score,-hits.hits._score": `map[hits:map[hits:[map[_id:1 _index:news]]]]`,
		"nothing.here": `map[]`,
	} {
		st, m := e.do("POST", "/news/_search?filter_path="+fp, `{"query":{"term":{"_id":"1"}}}`)
		if got := fmt.Sprint(m); st != 200 || got != want {
			t.Errorf("filter_path=%s: %d %s, want %s", fp, st, got, want)
		}
	}
}
