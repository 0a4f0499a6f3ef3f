package eslite_test

import (
	"io"
	"strings"
	"testing"
)

// errType is the error.type of an Elasticsearch error answer, or "".
func errType(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["type"].(string)
	return s
}

// errReason is the error.reason of an Elasticsearch error answer, or "".
func errReason(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["reason"].(string)
	return s
}

func TestDocumentExistsDeleteUpdate(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()

	// HEAD answers 200 or 404 and never a body.
	for id, want := range map[string]int{"1": 200, "nope": 404} {
		res, err := e.es.Exists("news", id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != want || len(b) > 0 {
			t.Errorf("exists %s: %d %q", id, res.StatusCode, b)
		}
	}
	if res, _ := e.es.Exists("nope", "1"); res.StatusCode != 404 {
		t.Errorf("exists in a missing index: %d", res.StatusCode)
	}

	// Partial update merges into _source.
	m := e.ok(e.es.Update("news", "1", strings.NewReader(`{"doc":{"points":121,"extra":{"x":1}}}`), e.es.Update.WithRefresh("true")))
	if m["result"] != "updated" || m["_version"] != 2.0 {
		t.Errorf("update: %v", m)
	}
	src := e.ok(e.es.Get("news", "1"))["_source"].(map[string]any)
	if src["points"] != 121.0 || src["author"] != "alice" || src["extra"] == nil {
		t.Errorf("after update: %v", src)
	}
	// The same partial document again is a noop.
	if m := e.ok(e.es.Update("news", "1", strings.NewReader(`{"doc":{"points":121}}`))); m["result"] != "noop" {
		t.Errorf("noop update: %v", m)
	}
	// A missing document: 404 document_missing_exception, unless upsert or doc_as_upsert.
	st, m := e.raw(e.es.Update("news", "40", strings.NewReader(`{"doc":{"points":1}}`)))
	if st != 404 || errType(m) != "document_missing_exception" || errReason(m) != "[40]: document missing" {
		t.Errorf("update missing: %d %v", st, m)
	}
	if m := e.ok(e.es.Update("news", "40", strings.NewReader(`{"doc":{"points":1},"upsert":{"points":7}}`))); m["result"] != "created" {
		t.Errorf("upsert: %v", m)
	}
	if src := e.ok(e.es.Get("news", "40"))["_source"].(map[string]any); src["points"] != 7.0 {
		t.Errorf("upserted: %v", src)
	}
	if m := e.ok(e.es.Update("news", "41", strings.NewReader(`{"doc":{"points":9},"doc_as_upsert":true}`))); m["result"] != "created" {
		t.Errorf("doc_as_upsert: %v", m)
	}
	if src := e.ok(e.es.Get("news", "41"))["_source"].(map[string]any); src["points"] != 9.0 {
		t.Errorf("doc_as_upsert source: %v", src)
	}
	// if_seq_no / if_primary_term: the current pair writes, a stale one is a 409.
	cur := e.ok(e.es.Get("news", "2"))
	seq := int(cur["_seq_no"].(float64))
	st, m = e.raw(e.es.Update("news", "2", strings.NewReader(`{"doc":{"points":81}}`), e.es.Update.WithIfSeqNo(seq+100), e.es.Update.WithIfPrimaryTerm(1)))
	if st != 409 || errType(m) != "version_conflict_engine_exception" || !strings.Contains(errReason(m), "[2]: version conflict, required seqNo [") {
		t.Errorf("stale update: %d %v", st, m)
	}
	e.ok(e.es.Update("news", "2", strings.NewReader(`{"doc":{"points":81}}`), e.es.Update.WithIfSeqNo(seq), e.es.Update.WithIfPrimaryTerm(1)))
	st, m = e.raw(e.es.Delete("news", "2", e.es.Delete.WithIfSeqNo(seq), e.es.Delete.WithIfPrimaryTerm(1)))
	if st != 409 || errType(m) != "version_conflict_engine_exception" {
		t.Errorf("stale delete: %d %v", st, m)
	}
	// An update body that is neither doc nor script.
	if st, m := e.raw(e.es.Update("news", "3", strings.NewReader(`{"points":1}`))); st != 400 || errType(m) != "x_content_parse_exception" || errReason(m) != "[UpdateRequest] unknown field [points]" {
		t.Errorf("update body without doc: %d %v", st, m)
	}
	if st, m := e.raw(e.es.Update("news", "3", strings.NewReader(`{"upsert":{"points":1}}`))); st != 400 || errReason(m) != "Validation Failed: 1: script or doc is missing;" {
		t.Errorf("update body with upsert alone: %d %v", st, m)
	}

	// Delete: 200 deleted, then 404 not_found with the write result shape.
	if m := e.ok(e.es.Delete("news", "3", e.es.Delete.WithRefresh("true"))); m["result"] != "deleted" {
		t.Errorf("delete: %v", m)
	}
	st, m = e.raw(e.es.Delete("news", "3"))
	if st != 404 || m["result"] != "not_found" || m["_id"] != "3" {
		t.Errorf("delete again: %d %v", st, m)
	}
	if st, m := e.raw(e.es.Delete("nope", "1")); st != 404 || errType(m) != "index_not_found_exception" {
		t.Errorf("delete in a missing index: %d %v", st, m)
	}

	// Routing: a routed document on a two-shard index is found, updated and deleted with
	// its routing only.
	e.ok(e.es.Indices.Create("routed", e.es.Indices.Create.WithBody(strings.NewReader(`{"settings":{"number_of_shards":2}}`))))
	e.ok(e.es.Index("routed", strings.NewReader(`{"n":1}`), e.es.Index.WithDocumentID("r1"), e.es.Index.WithRouting("u7")))
	if m := e.ok(e.es.Get("routed", "r1", e.es.Get.WithRouting("u7"))); m["_routing"] != "u7" {
		t.Errorf("routed get: %v", m)
	}
	if m := e.ok(e.es.Update("routed", "r1", strings.NewReader(`{"doc":{"n":2}}`), e.es.Update.WithRouting("u7"))); m["result"] != "updated" {
		t.Errorf("routed update: %v", m)
	}
	if m := e.ok(e.es.Delete("routed", "r1", e.es.Delete.WithRouting("u7"))); m["result"] != "deleted" {
		t.Errorf("routed delete: %v", m)
	}
}

func TestMsearchTypedKeys(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	body := `{"index":"news"}` + "\n" +
		`{"size":0,"aggs":{"by_author":{"terms":{"field":"author"},"aggs":{"top":{"max":{"field":"points"}}}},"pts":{"terms":{"field":"points","size":1}},"sc":{"terms":{"field":"score","size":1}},"avg_points":{"avg":{"field":"points"}},"per_month":{"date_histogram":{"field":"published","calendar_interval":"month"}},"st":{"stats":{"field":"points"}},"hot":{"filter":{"term":{"hot":true}}},"p":{"percentiles":{"field":"points","percents":[50]}},"h":{"histogram":{"field":"points","interval":100}},"r":{"range":{"field":"points","ranges":[{"to":100}]}}}}` + "\n"
	st, m := e.do("POST", "/_msearch?typed_keys=true", body)
	rs, _ := m["responses"].([]any)
	if st != 200 || len(rs) != 1 {
		t.Fatalf("msearch: %d %v", st, m)
	}
	aggs, _ := rs[0].(map[string]any)["aggregations"].(map[string]any)
	for _, k := range []string{"sterms#by_author", "lterms#pts", "dterms#sc", "avg#avg_points", "date_histogram#per_month", "stats#st", "filter#hot", "tdigest_percentiles#p", "histogram#h", "range#r"} {
		if aggs[k] == nil {
			t.Errorf("no %s in %v", k, keys(aggs))
		}
	}
	b := aggs["sterms#by_author"].(map[string]any)["buckets"].([]any)[0].(map[string]any)
	if b["max#top"] == nil {
		t.Errorf("sub-aggregation not typed: %v", b)
	}
	// The same through _search.
	res := e.ok(e.es.Search(e.es.Search.WithIndex("news"), e.es.Search.WithTypedKeys(true),
		e.es.Search.WithBody(strings.NewReader(`{"size":0,"aggs":{"a":{"value_count":{"field":"author"}}}}`))))
	if a := res["aggregations"].(map[string]any); a["value_count#a"] == nil {
		t.Errorf("search typed_keys: %v", a)
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return sorted(out)
}

func TestPointInTimeSearchAfter(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	_, m := e.do("POST", "/news/_pit?keep_alive=1m", "")
	id := m["id"].(string)
	var seen []string
	var after string
	for page := 0; page < 5; page++ {
		body := `{"size":2,"sort":[{"points":"asc"}],"pit":{"id":"` + id + `","keep_alive":"1m"}` + after + `}`
		st, m := e.do("POST", "/_search", body)
		if st != 200 {
			t.Fatalf("page %d: %d %v", page, st, m)
		}
		hits := m["hits"].(map[string]any)["hits"].([]any)
		if len(hits) == 0 {
			break
		}
		for _, h := range hits {
			seen = append(seen, h.(map[string]any)["_id"].(string))
		}
		last := hits[len(hits)-1].(map[string]any)["sort"]
		after = `,"search_after":` + jsonString(last)
		id = m["pit_id"].(string)
	}
	if got := strings.Join(seen, ","); got != "6,4,2,1,5,3" {
		t.Errorf("pages: %s", got)
	}
	if st, m := e.do("DELETE", "/_pit", `{"id":"`+id+`"}`); st != 200 || m["succeeded"] != true {
		t.Errorf("close: %d %v", st, m)
	}
	if st, m := e.do("DELETE", "/_pit", `{"id":"`+id+`"}`); st != 404 || m["num_freed"] != 0.0 {
		t.Errorf("close twice: %d %v", st, m)
	}
}
