package eslite_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// aggJSON runs a size-0 search with aggs over index and returns its aggregations as JSON.
func (e *env) aggJSON(index, query, aggs string) string {
	e.t.Helper()
	if query == "" {
		query = `{"match_all":{}}`
	}
	m := e.search(index, `{"size":0,"query":`+query+`,"aggs":`+aggs+`}`)
	b, _ := json.Marshal(m["aggregations"])
	return string(b)
}

// queryIDs runs query over index and returns the ids of its hits, in hit order.
func (e *env) queryIDs(index, query string) []string {
	e.t.Helper()
	return hitIDs(e.search(index, `{"query":`+query+`}`))
}

// searchStatus runs a search and returns its status and error type.
func (e *env) searchStatus(index, body string) (int, string) {
	e.t.Helper()
	st, m := e.raw(e.es.Search(e.es.Search.WithIndex(index), e.es.Search.WithBody(strings.NewReader(body))))
	typ := ""
	if er, ok := m["error"].(map[string]any); ok {
		typ, _ = er["type"].(string)
	}
	return st, typ
}

func TestTermsOrderByPath(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	// Authors by their best points: alice 200, dave 150, bob 80, carol 45.
	got := e.aggJSON("news", "", `{"a":{"terms":{"field":"author","size":2,"order":{"m":"desc"}},"aggs":{"m":{"max":{"field":"points"}}}}}`)
	want := `{"a":{"buckets":[{"doc_count":2,"key":"alice","m":{"value":200}},{"doc_count":1,"key":"dave","m":{"value":150}}],"doc_count_error_upper_bound":0,"sum_other_doc_count":3}}`
	if got != want {
		t.Errorf("order by metric:\n got  %s\n want %s", got, want)
	}
	// Through a filter: the best points of hot stories (alice 200, dave 150; bob and
	// carol have none, and an empty max sorts last descending).
	got = e.aggJSON("news", "", `{"a":{"terms":{"field":"author","order":[{"f>m":"desc"},{"_key":"desc"}]},"aggs":{"f":{"filter":{"term":{"hot":true}},"aggs":{"m":{"max":{"field":"points"}}}}}}}`)
	if !strings.Contains(got, `"key":"alice"`) || strings.Index(got, `"key":"dave"`) > strings.Index(got, `"key":"carol"`) ||
		strings.Index(got, `"key":"carol"`) > strings.Index(got, `"key":"bob"`) {
		t.Errorf("order by filter>max then key desc: %s", got)
	}
	// By a single-bucket aggregation alone: its document count; ties by key ascending.
	got = e.aggJSON("news", "", `{"a":{"terms":{"field":"author","order":{"f":"asc"}},"aggs":{"f":{"filter":{"term":{"hot":true}}}}}}`)
	if i, j := strings.Index(got, `"key":"bob"`), strings.Index(got, `"key":"carol"`); i < 0 || i > j || j > strings.Index(got, `"key":"dave"`) || strings.Index(got, `"key":"dave"`) > strings.Index(got, `"key":"alice"`) {
		t.Errorf("order by filter count: %s", got)
	}
	for _, body := range []string{
		`{"aggs":{"a":{"terms":{"field":"author","order":{"nope":"desc"}}}}}`,
		`{"aggs":{"a":{"terms":{"field":"author","order":{"h":"desc"}},"aggs":{"h":{"terms":{"field":"tags"}}}}}}`,
		`{"aggs":{"a":{"terms":{"field":"author","collect_mode":"sideways"}}}}`,
		`{"aggs":{"a":{"terms":{"field":"author","order":{"_count":"up"}}}}}`,
	} {
		if st, _ := e.searchStatus("news", body); st != 400 {
			t.Errorf("%s: status %d, want 400", body, st)
		}
	}
	if st, _ := e.searchStatus("news", `{"aggs":{"a":{"terms":{"field":"author","collect_mode":"breadth_first","execution_hint":"map"}}}}`); st != 200 {
		t.Errorf("collect_mode and execution_hint: status %d", st)
	}
}

func TestTermsIncludeExcludeAndPartitions(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("p", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"str":{"type":"keyword"},"n":{"type":"long"},"ip":{"type":"ip"}}}}`))))
	var b strings.Builder
	for _, d := range []string{`{"str":"abc","n":1234,"ip":"::1"}`, `{"str":"abc","n":5678,"ip":"127.0.0.1"}`, `{"str":"bcd","n":1234,"ip":"::1"}`} {
		b.WriteString("{\"index\":{}}\n" + d + "\n")
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("p"), e.es.Bulk.WithRefresh("true")))
	keys := func(aggs string) string {
		t.Helper()
		var m map[string]map[string][]map[string]any
		_ = json.Unmarshal([]byte(e.aggJSON("p", "", aggs)), &m)
		var out []string
		for _, bk := range m["t"]["buckets"] {
			k, _ := json.Marshal(bk["key"])
			out = append(out, string(k))
		}
		return strings.Join(out, ",")
	}
	// Terms fall into partitions by Elasticsearch's own hashes, so each partition holds
	// the same terms as there.
	for aggs, want := range map[string]string{
		`{"t":{"terms":{"field":"str","include":{"partition":0,"num_partitions":2}}}}`: `"bcd"`,
		`{"t":{"terms":{"field":"str","include":{"partition":1,"num_partitions":2}}}}`: `"abc"`,
		`{"t":{"terms":{"field":"n","include":{"partition":0,"num_partitions":2}}}}`:   `5678`,
		`{"t":{"terms":{"field":"n","include":{"partition":1,"num_partitions":2}}}}`:   `1234`,
		`{"t":{"terms":{"field":"str","include":"a.*"}}}`:                              `"abc"`,
		`{"t":{"terms":{"field":"str","exclude":["abc"]}}}`:                            `"bcd"`,
		`{"t":{"terms":{"field":"ip","include":["127.0.0.1"]}}}`:                       `"127.0.0.1"`,
		`{"t":{"terms":{"field":"n","exclude":[1234]}}}`:                               `5678`,
	} {
		if got := keys(aggs); got != want {
			t.Errorf("%s: keys %s, want %s", aggs, got, want)
		}
	}
	// A regular expression only applies to strings: Elasticsearch fails the shard.
	if st, typ := e.searchStatus("p", `{"aggs":{"t":{"terms":{"field":"ip","exclude":"127.*"}}}}`); st != 500 || typ != "aggregation_execution_exception" {
		t.Errorf("regex on ip: %d %s", st, typ)
	}
}

func TestTermsValueTypeAndMinDocCountZero(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	got := e.aggJSON("news", `{"ids":{"values":["1"]}}`, `{"b":{"terms":{"field":"nope","value_type":"boolean","missing":true}},"d":{"terms":{"field":"nope","value_type":"date","missing":"2016-05-11"}}}`)
	want := `{"b":{"buckets":[{"doc_count":1,"key":1,"key_as_string":"true"}],"doc_count_error_upper_bound":0,"sum_other_doc_count":0},` +
		`"d":{"buckets":[{"doc_count":1,"key":1462924800000,"key_as_string":"2016-05-11T00:00:00.000Z"}],"doc_count_error_upper_bound":0,"sum_other_doc_count":0}}`
	if got != want {
		t.Errorf("value_type:\n got  %s\n want %s", got, want)
	}
	// min_doc_count 0 lists every author of the index, the unmatched ones with no
	// documents and empty sub-aggregations.
	got = e.aggJSON("news", `{"term":{"author":"alice"}}`, `{"a":{"terms":{"field":"author","min_doc_count":0},"aggs":{"m":{"max":{"field":"points"}}}}}`)
	want = `{"a":{"buckets":[{"doc_count":2,"key":"alice","m":{"value":200}},{"doc_count":0,"key":"bob","m":{"value":null}},{"doc_count":0,"key":"carol","m":{"value":null}},{"doc_count":0,"key":"dave","m":{"value":null}}],"doc_count_error_upper_bound":0,"sum_other_doc_count":0}}`
	if got != want {
		t.Errorf("min_doc_count 0:\n got  %s\n want %s", got, want)
	}
}
