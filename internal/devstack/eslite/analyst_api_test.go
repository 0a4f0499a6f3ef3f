package eslite_test

import (
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestMget(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	body := `{"docs":[{"_index":"news","_id":"1","_source":["title"]},{"_index":"news","_id":"99"},{"_index":"nope","_id":"1"},{"_index":"news","_id":"2","_source":false}]}`
	m := e.ok(e.es.Mget(strings.NewReader(body)))
	docs := m["docs"].([]any)
	if len(docs) != 4 {
		t.Fatalf("docs: %v", m)
	}
	d0 := docs[0].(map[string]any)
	if d0["found"] != true || jsonString(d0["_source"]) != `{"title":"Go generics explained"}` || d0["_version"] != 1.0 {
		t.Errorf("doc 0: %v", d0)
	}
	if d1 := docs[1].(map[string]any); d1["found"] != false || d1["_id"] != "99" || d1["_index"] != "news" {
		t.Errorf("doc 1: %v", d1)
	}
	d2 := docs[2].(map[string]any)
	if d2["_index"] != "nope" || errType(d2) != "index_not_found_exception" || errReason(d2) != "no such index [nope]" {
		t.Errorf("doc 2: %v", d2)
	}
	if d3 := docs[3].(map[string]any); d3["found"] != true || d3["_source"] != nil {
		t.Errorf("doc 3: %v", d3)
	}
	// ids under an index, and the index-wide _source parameter.
	m = e.ok(e.es.Mget(strings.NewReader(`{"ids":["3","4"]}`), e.es.Mget.WithIndex("news"), e.es.Mget.WithSourceIncludes("author")))
	if got := jsonString(m["docs"].([]any)[1].(map[string]any)["_source"]); got != `{"author":"carol"}` {
		t.Errorf("ids: %s", got)
	}
	// Validation: the index is missing, the id is missing, nothing to get, unknown key.
	for body, want := range map[string]string{
		`{"docs":[{"_id":"1"}]}`:       "Validation Failed: 1: index is missing for doc 0;",
		`{"docs":[{"_index":"news"}]}`: "Validation Failed: 1: id is missing for doc 0;",
		`{"docs":[]}`:                  "Validation Failed: 1: no documents to get;",
		`{"documents":[{"_id":"1"}]}`:  "unknown key [documents] for a START_ARRAY, expected [docs] or [ids]",
	} {
		st, m := e.raw(e.es.Mget(strings.NewReader(body)))
		if st != 400 || errReason(m) != want {
			t.Errorf("%s: %d %v", body, st, m)
		}
	}
}

func TestFieldCaps(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	e.ok(e.es.Indices.Create("news2", e.es.Indices.Create.WithBody(strings.NewReader(
		`{"mappings":{"properties":{"author":{"type":"text"},"points":{"type":"long"},"user":{"properties":{"name":{"type":"keyword"}}}}}}`))))
	m := e.ok(e.es.FieldCaps(e.es.FieldCaps.WithIndex("news"), e.es.FieldCaps.WithFields("*")))
	fields := m["fields"].(map[string]any)
	want := map[string]string{
		"title":         `{"text":{"aggregatable":false,"metadata_field":false,"searchable":true,"type":"text"}}`,
		"title.keyword": `{"keyword":{"aggregatable":true,"metadata_field":false,"searchable":true,"type":"keyword"}}`,
		"published":     `{"date":{"aggregatable":true,"metadata_field":false,"searchable":true,"type":"date"}}`,
		"_id":           `{"_id":{"aggregatable":false,"metadata_field":true,"searchable":true,"type":"_id"}}`,
		"_index":        `{"_index":{"aggregatable":true,"metadata_field":true,"searchable":true,"type":"_index"}}`,
	}
	for f, w := range want {
		if got := jsonString(fields[f]); got != w {
			t.Errorf("%s: %s, want %s", f, got, w)
		}
	}
	if jsonString(m["indices"]) != `["news"]` {
		t.Errorf("indices: %v", m["indices"])
	}
	// An index pattern over two indexes where author is keyword in one and text in the
	// other: one entry per type, each naming its indexes.
	m = e.ok(e.es.FieldCaps(e.es.FieldCaps.WithIndex("news*"), e.es.FieldCaps.WithFields("author,user.*,points"), e.es.FieldCaps.WithIncludeUnmapped(true)))
	fields = m["fields"].(map[string]any)
	if got := jsonString(fields["author"]); got != `{"keyword":{"aggregatable":true,"indices":["news"],"metadata_field":false,"searchable":true,"type":"keyword"},"text":{"aggregatable":false,"indices":["news2"],"metadata_field":false,"searchable":true,"type":"text"}}` {
		t.Errorf("author: %s", got)
	}
	if got := jsonString(fields["user.name"]); got != `{"keyword":{"aggregatable":true,"indices":["news2"],"metadata_field":false,"searchable":true,"type":"keyword"},"unmapped":{"aggregatable":false,"indices":["news"],"metadata_field":false,"searchable":false,"type":"unmapped"}}` {
		t.Errorf("user.name with include_unmapped: %s", got)
	}
	if got := jsonString(fields["points"]); got != `{"long":{"aggregatable":true,"metadata_field":false,"searchable":true,"type":"long"}}` {
		t.Errorf("points: %s", got)
	}
	if fields["title"] != nil || fields["_id"] != nil {
		t.Errorf("fields outside the list: %v", keys(fields))
	}
	// Without include_unmapped a field mapped in one index only has one entry, no indices.
	m = e.ok(e.es.FieldCaps(e.es.FieldCaps.WithIndex("news,news2"), e.es.FieldCaps.WithFields("user*")))
	if got := jsonString(m["fields"]); got != `{"user":{"object":{"aggregatable":false,"metadata_field":false,"searchable":false,"type":"object"}},"user.name":{"keyword":{"aggregatable":true,"metadata_field":false,"searchable":true,"type":"keyword"}}}` {
		t.Errorf("user*: %s", got)
	}
	// index_filter leaves out the indexes with no matching document (news2 is empty).
	st, m := e.do("POST", "/news*/_field_caps?fields=points", `{"index_filter":{"range":{"points":{"gte":100}}}}`)
	if st != 200 || jsonString(m["indices"]) != `["news"]` {
		t.Errorf("index_filter: %d %v", st, m)
	}
	// Errors: no fields, a missing index.
	if st, m := e.do("GET", "/news/_field_caps", ""); st != 400 || errType(m) != "action_request_validation_exception" || errReason(m) != "Validation Failed: 1: specified fields can't be null or empty;" {
		t.Errorf("no fields: %d %v", st, m)
	}
	if st, m := e.do("GET", "/nope/_field_caps?fields=*", ""); st != 404 || errType(m) != "index_not_found_exception" {
		t.Errorf("missing index: %d %v", st, m)
	}
	if st, m := e.do("GET", "/nope*/_field_caps?fields=*", ""); st != 200 || jsonString(m) != `{"fields":{},"indices":[]}` {
		t.Errorf("pattern matching nothing: %d %v", st, m)
	}
}

func TestScroll(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	m := e.ok(e.es.Search(e.es.Search.WithIndex("news"), e.es.Search.WithScroll(60e9), e.es.Search.WithSize(4),
		e.es.Search.WithBody(strings.NewReader(`{"sort":[{"points":"desc"}]}`))))
	id, _ := m["_scroll_id"].(string)
	if id == "" || total(m) != 6.0 || strings.Join(hitIDs(m), ",") != "3,5,1,2" {
		t.Fatalf("first page: %v", m)
	}
	// A document written now is not seen by the scroll.
	e.ok(e.es.Index("news", strings.NewReader(`{"points":1000}`), e.es.Index.WithRefresh("true")))
	m = e.ok(e.es.Scroll(e.es.Scroll.WithScrollID(id), e.es.Scroll.WithScroll(60e9)))
	if strings.Join(hitIDs(m), ",") != "4,6" || m["_scroll_id"] != id {
		t.Errorf("second page: %v", hitIDs(m))
	}
	if m = e.ok(e.es.Scroll(e.es.Scroll.WithScrollID(id))); len(hitIDs(m)) != 0 {
		t.Errorf("after the end: %v", hitIDs(m))
	}
	if m := e.ok(e.es.ClearScroll(e.es.ClearScroll.WithScrollID(id))); m["num_freed"] != 1.0 || m["succeeded"] != true {
		t.Errorf("clear: %v", m)
	}
	st, m := e.raw(e.es.Scroll(e.es.Scroll.WithScrollID(id)))
	if st != 404 || errType(m) != "search_phase_execution_exception" || !strings.Contains(jsonString(m), `"type":"search_context_missing_exception"`) {
		t.Errorf("cleared scroll: %d %v", st, m)
	}
	if st, m := e.raw(e.es.ClearScroll(e.es.ClearScroll.WithScrollID(id))); st != 404 || m["num_freed"] != 0.0 {
		t.Errorf("clear twice: %d %v", st, m)
	}
	if st, m := e.raw(e.es.Scroll(e.es.Scroll.WithScrollID("not-a-scroll"))); st != 400 || errReason(m) != "Cannot parse scroll id" {
		t.Errorf("bad id: %d %v", st, m)
	}
	if st, m := e.do("POST", "/news/_search?scroll=1m", `{"from":2}`); st != 400 || errReason(m) != "Validation Failed: 1: using [from] is not allowed in a scroll context;" {
		t.Errorf("from in a scroll: %d %v", st, m)
	}
	// A scroll through more than the result window (max_result_window 3 here).
	e.ok(e.es.Indices.PutSettings(strings.NewReader(`{"index":{"max_result_window":3}}`), e.es.Indices.PutSettings.WithIndex("news")))
	st, m = e.do("POST", "/news/_search?scroll=1m", `{"size":3,"sort":["_doc"]}`)
	seen := len(hitIDs(m))
	for i := 0; i < 5 && st == 200; i++ {
		st, m = e.do("POST", "/_search/scroll", `{"scroll":"1m","scroll_id":"`+m["_scroll_id"].(string)+`"}`)
		seen += len(hitIDs(m))
	}
	if st != 200 || seen != 7 {
		t.Errorf("scroll past the window: %d, %d hits", st, seen)
	}
	if st, m := e.do("DELETE", "/_search/scroll/_all", ""); st != 200 || m["num_freed"] != 1.0 {
		t.Errorf("clear _all: %d %v", st, m)
	}
}

// cat fetches a _cat API as text.
func (e *env) cat(path string) (int, string) {
	e.t.Helper()
	res, err := http.Get(e.url + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestCatAPIs(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	e.ok(e.es.Indices.Create("empty"))
	e.ok(e.es.Indices.PutAlias([]string{"news"}, "recent", e.es.Indices.PutAlias.WithBody(strings.NewReader(`{"filter":{"term":{"hot":true}},"is_write_index":true}`))))
	e.ok(e.es.Indices.PutAlias([]string{"empty"}, "all-news"))
	e.ok(e.es.Indices.PutAlias([]string{"news"}, "all-news"))

	st, out := e.cat("/_cat/indices?v&h=health,status,index,pri,rep,docs.count&s=index")
	want := "health status index pri rep docs.count\n" +
		"green  open   empty   1   1          0\n" +
		"green  open   news    1   1          6\n"
	if st != 200 || out != want {
		t.Errorf("_cat/indices:\n%q\nwant\n%q", out, want)
	}
	if _, out := e.cat("/_cat/indices/news"); !regexp.MustCompile(`^green open news eslite-news 1 1 6 0 \S+ \S+ \S+\n$`).MatchString(out) {
		t.Errorf("_cat/indices/news without v: %q", out)
	}
	st, m := e.do("GET", "/_cat/indices/nope", "")
	if st != 404 || errType(m) != "index_not_found_exception" {
		t.Errorf("_cat/indices/nope: %d %v", st, m)
	}
	var rows []map[string]any
	res, err := e.es.Cat.Indices(e.es.Cat.Indices.WithFormat("json"), e.es.Cat.Indices.WithIndex("news"), e.es.Cat.Indices.WithBytes("b"))
	if err != nil {
		t.Fatal(err)
	}
	_ = jsonDecode(res.Body, &rows)
	res.Body.Close()
	if len(rows) != 1 || rows[0]["index"] != "news" || rows[0]["docs.count"] != "6" || rows[0]["health"] != "green" || !regexp.MustCompile(`^\d+$`).MatchString(rows[0]["store.size"].(string)) {
		t.Errorf("_cat/indices json: %v", rows)
	}

	if _, out := e.cat("/_cat/count/news?v"); !regexp.MustCompile(`^epoch +timestamp count\n\d+ \d\d:\d\d:\d\d +6\n$`).MatchString(out) {
		t.Errorf("_cat/count: %q", out)
	}
	if _, out := e.cat("/_cat/count?h=count"); out != "6\n" {
		t.Errorf("_cat/count all: %q", out)
	}
	if _, out := e.cat("/_cat/count/recent?format=json&h=count"); out != `[{"count":"3"}]`+"\n" {
		t.Errorf("_cat/count through a filtered alias: %q", out)
	}
	if st, _ := e.do("GET", "/_cat/count/nope", ""); st != 404 {
		t.Errorf("_cat/count/nope: %d", st)
	}

	want = "alias    index filter routing.index routing.search is_write_index\n" +
		"all-news empty -      -             -              -\n" +
		"all-news news  -      -             -              -\n" +
		"recent   news  *      -             -              true\n"
	if _, out := e.cat("/_cat/aliases?v&s=alias,index"); out != want {
		t.Errorf("_cat/aliases:\n%q\nwant\n%q", out, want)
	}
	if _, out := e.cat("/_cat/aliases/rec*?format=json"); out != `[{"alias":"recent","filter":"*","index":"news","is_write_index":"true","routing.index":"-","routing.search":"-"}]`+"\n" {
		t.Errorf("_cat/aliases json: %q", out)
	}

	if _, out := e.cat("/_cat/health?v"); !regexp.MustCompile(`^epoch +timestamp +cluster +status +node.total +node.data +shards +pri +relo +init +unassign +unassign.pri +pending_tasks +max_task_wait_time +active_shards_percent\n\d+ \d\d:\d\d:\d\d +eslite +green +1 +1 +2 +2 +0 +0 +0 +0 +0 +- +100.0%\n$`).MatchString(out) {
		t.Errorf("_cat/health: %q", out)
	}
	if st, m := e.do("GET", "/_cat/indices?s=nope", ""); st != 400 || errReason(m) != "Unable to sort by unknown sort key `nope`" {
		t.Errorf("unknown sort key: %d %v", st, m)
	}
}

func TestNestedInnerHits(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("posts", e.es.Indices.Create.WithBody(strings.NewReader(
		`{"mappings":{"properties":{"title":{"type":"text"},"comments":{"type":"nested","properties":{"author":{"type":"keyword"},"text":{"type":"text"},"stars":{"type":"long"}}}}}}`))))
	docs := map[string]string{
		"1": `{"title":"first","comments":[{"author":"ann","text":"great post","stars":5},{"author":"bob","text":"not great","stars":2},{"author":"cy","text":"meh","stars":3}]}`,
		"2": `{"title":"second","comments":[{"author":"bob","text":"great great great","stars":4}]}`,
		"3": `{"title":"third","comments":[{"author":"dee","text":"boring","stars":1}]}`,
	}
	for id, d := range docs {
		e.ok(e.es.Index("posts", strings.NewReader(d), e.es.Index.WithDocumentID(id), e.es.Index.WithRefresh("true")))
	}
	res := e.search("posts", `{"sort":["_doc"],"query":{"nested":{"path":"comments","query":{"match":{"comments.text":"great"}},"inner_hits":{"_source":["comments.author"]}}}}`)
	hits := res["hits"].(map[string]any)["hits"].([]any)
	if len(hits) != 2 {
		t.Fatalf("hits: %v", res)
	}
	byID := map[string]map[string]any{}
	for _, h := range hits {
		hm := h.(map[string]any)
		ih, _ := hm["inner_hits"].(map[string]any)
		c, _ := ih["comments"].(map[string]any)
		if c == nil {
			t.Fatalf("no inner hits named comments: %v", hm)
		}
		byID[hm["_id"].(string)] = c["hits"].(map[string]any)
	}
	// Post 1: two of its three comments match, each named by its offset, with only the
	// requested _source of the comment itself.
	h1 := byID["1"]
	if total := h1["total"].(map[string]any)["value"]; total != 2.0 {
		t.Errorf("post 1 total: %v", h1)
	}
	var got []string
	for _, x := range h1["hits"].([]any) {
		xm := x.(map[string]any)
		got = append(got, jsonString(xm["_nested"])+" "+jsonString(xm["_source"])+" "+xm["_id"].(string))
	}
	if strings.Join(got, "|") != `{"field":"comments","offset":0} {"author":"ann"} 1|{"field":"comments","offset":1} {"author":"bob"} 1` {
		t.Errorf("post 1 inner hits: %v", got)
	}
	// Scores are BM25 over the nested objects: "great" in 3 of 5 comments; the comment
	// with tf 3 outscores the ones with tf 1, and the 2-token comments score alike.
	s1 := h1["hits"].([]any)[0].(map[string]any)["_score"].(float64)
	s2 := byID["2"]["hits"].([]any)[0].(map[string]any)["_score"].(float64)
	idf := math.Log(1 + (5-3+0.5)/(3+0.5))
	avgdl := 9.0 / 5 // great post, not great, meh, great great great, boring
	want1 := idf * 2.2 * 1 / (1 + 1.2*(0.25+0.75*2/avgdl))
	want2 := idf * 2.2 * 3 / (3 + 1.2*(0.25+0.75*3/avgdl))
	if math.Abs(s1-want1) > 1e-6 || math.Abs(s2-want2) > 1e-6 || byID["1"]["max_score"] != s1 {
		t.Errorf("inner hit scores %v %v, want %v %v", s1, s2, want1, want2)
	}
	// size, from, name; errors for a repeated name and a window past 100.
	res = e.search("posts", `{"query":{"nested":{"path":"comments","query":{"range":{"comments.stars":{"gte":2}}},"inner_hits":{"name":"good","size":1,"from":1}}}}`)
	for _, h := range res["hits"].(map[string]any)["hits"].([]any) {
		hm := h.(map[string]any)
		g := hm["inner_hits"].(map[string]any)["good"].(map[string]any)["hits"].(map[string]any)
		n := len(g["hits"].([]any))
		if (hm["_id"] == "1" && n != 1) || (hm["_id"] == "2" && n != 0) {
			t.Errorf("%s: %v", hm["_id"], g)
		}
	}
	st, typ := e.searchStatus("posts", `{"query":{"bool":{"should":[{"nested":{"path":"comments","query":{"match_all":{}},"inner_hits":{}}},{"nested":{"path":"comments","query":{"match_all":{}},"inner_hits":{}}}]}}}`)
	if st != 400 || typ != "illegal_argument_exception" {
		t.Errorf("repeated inner_hits name: %d %s", st, typ)
	}
	st, m := e.do("POST", "/posts/_search", `{"query":{"nested":{"path":"comments","query":{"match_all":{}},"inner_hits":{"size":101}}}}`)
	if st != 400 || !strings.HasPrefix(errReason(m), "Inner result window is too large, the inner hit definition's [comments]'s from + size must be less than or equal to: [100] but was [101].") {
		t.Errorf("inner window: %d %v", st, m)
	}
}
