package eslite_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/trawlerhq/trawler/internal/devstack/eslite"
)

const newsMapping = `{
  "mappings": {"properties": {
    "title":     {"type": "text", "fields": {"keyword": {"type": "keyword"}}},
    "body":      {"type": "text"},
    "tags":      {"type": "keyword"},
    "author":    {"type": "keyword"},
    "points":    {"type": "long"},
    "score":     {"type": "double"},
    "published": {"type": "date"},
    "hot":       {"type": "boolean"}
  }}
}`

var newsDocs = []string{
	`{"title":"Go generics explained","body":"A deep dive into generics in Go","tags":["go","lang"],"author":"alice","points":120,"score":4.5,"published":"2026-01-05T10:00:00Z","hot":true}`,
	`{"title":"Rust ownership basics","body":"Ownership and borrowing in Rust","tags":["rust","lang"],"author":"bob","points":80,"score":3.9,"published":"2026-01-05T15:30:00Z","hot":false}`,
	`{"title":"Go concurrency patterns","body":"Channels, goroutines and select","tags":["go"],"author":"alice","points":200,"score":4.9,"published":"2026-01-20T08:00:00Z","hot":true}`,
	`{"title":"Database indexing","body":"B-trees and LSM trees explained","tags":["db"],"author":"carol","points":45,"score":3.1,"published":"2026-02-02T12:00:00Z","hot":false}`,
	`{"title":"Search engines from scratch","body":"Inverted indexes, scoring and Go code","tags":["search","go"],"author":"dave","points":150,"score":4.2,"published":"2026-02-10T09:00:00Z","hot":true}`,
	`{"title":"Weekly links","body":"Nothing about languages","author":"bob","points":5,"published":"2026-03-01T00:00:00Z"}`,
}

type env struct {
	t    *testing.T
	es   *elasticsearch.Client
	dir  string
	url  string
	stop func() error
}

func start(t *testing.T, dir string) *env {
	t.Helper()
	url, stop, err := eslite.Start(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	es, err := elasticsearch.NewClient(elasticsearch.Config{Addresses: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, es: es, dir: dir, url: url, stop: stop}
}

func decode(t *testing.T, res *esapi.Response, err error) (int, map[string]any) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.Header.Get("X-Elastic-Product") != "Elasticsearch" {
		t.Fatalf("missing product header")
	}
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("bad json %q: %v", b, err)
		}
	}
	return res.StatusCode, m
}

func (e *env) raw(res *esapi.Response, err error) (int, map[string]any) {
	e.t.Helper()
	return decode(e.t, res, err)
}

func (e *env) ok(res *esapi.Response, err error) map[string]any {
	e.t.Helper()
	st, m := decode(e.t, res, err)
	if st >= 300 {
		e.t.Fatalf("status %d: %v", st, m)
	}
	return m
}

func (e *env) seed() {
	e.t.Helper()
	e.ok(e.es.Indices.Create("news", e.es.Indices.Create.WithBody(strings.NewReader(newsMapping))))
	var b strings.Builder
	for i, d := range newsDocs {
		fmt.Fprintf(&b, `{"index":{"_id":"%d"}}`+"\n%s\n", i+1, d)
	}
	m := e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("news"), e.es.Bulk.WithRefresh("true")))
	if m["errors"] != false {
		e.t.Fatalf("bulk errors: %v", m)
	}
}

func (e *env) search(index, body string) map[string]any {
	e.t.Helper()
	return e.ok(e.es.Search(e.es.Search.WithIndex(index), e.es.Search.WithBody(strings.NewReader(body))))
}

func hitIDs(m map[string]any) []string {
	var ids []string
	for _, h := range m["hits"].(map[string]any)["hits"].([]any) {
		ids = append(ids, h.(map[string]any)["_id"].(string))
	}
	return ids
}

func sorted(ids []string) []string {
	s := append([]string(nil), ids...)
	sort.Strings(s)
	return s
}

func total(m map[string]any) any {
	return m["hits"].(map[string]any)["total"].(map[string]any)["value"]
}

func TestQueries(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	cases := []struct {
		name, query string
		want        string
	}{
		{"match_all", `{"match_all":{}}`, "1,2,3,4,5,6"},
		{"match_none", `{"match_none":{}}`, ""},
		{"match", `{"match":{"title":"go"}}`, "1,3"},
		{"multi_match phrase", `{"multi_match":{"query":"and select","type":"phrase","fields":["title","body"]}}`, "3"},
		{"multi_match and", `{"multi_match":{"query":"go code","operator":"and"}}`, "5"},
		{"match body", `{"match":{"body":"Go"}}`, "1,5"},
		{"match or", `{"match":{"title":"go patterns"}}`, "1,3"},
		{"match and", `{"match":{"title":{"query":"go patterns","operator":"and"}}}`, "3"},
		{"match msm", `{"match":{"title":{"query":"go rust patterns","minimum_should_match":2}}}`, "3"},
		{"match keyword", `{"match":{"author":"alice"}}`, "1,3"},
		{"match_phrase", `{"match_phrase":{"body":"generics in go"}}`, "1"},
		{"match_phrase order", `{"match_phrase":{"body":"go generics"}}`, ""},
		{"multi_match", `{"multi_match":{"query":"go","fields":["title","body"]}}`, "1,3,5"},
		{"multi_match boost", `{"multi_match":{"query":"explained","fields":["title^2","body"]}}`, "1,4"},
		{"multi_match wildcard", `{"multi_match":{"query":"rust","fields":["t*"]}}`, "2"},
		{"term keyword", `{"term":{"tags":"go"}}`, "1,3,5"},
		{"term subfield", `{"term":{"title.keyword":{"value":"Weekly links"}}}`, "6"},
		{"term bool", `{"term":{"hot":true}}`, "1,3,5"},
		{"term long", `{"term":{"points":80}}`, "2"},
		{"term unmapped", `{"term":{"nope":"x"}}`, ""},
		{"terms", `{"terms":{"tags":["rust","db"]}}`, "2,4"},
		{"range long", `{"range":{"points":{"gte":100}}}`, "1,3,5"},
		{"range open", `{"range":{"points":{"gt":80,"lt":150}}}`, "1"},
		{"range double", `{"range":{"score":{"gte":4}}}`, "1,3,5"},
		{"range date", `{"range":{"published":{"gte":"2026-02-01"}}}`, "4,5,6"},
		{"range date lt", `{"range":{"published":{"lt":"2026-01-20"}}}`, "1,2"},
		{"range date math", `{"range":{"published":{"gte":"2026-01-05","lt":"2026-01-05||+1d"}}}`, "1,2"},
		{"range date round", `{"range":{"published":{"lte":"2026-01-05T00:00:00Z||/d"}}}`, "1,2"},
		{"range keyword", `{"range":{"author":{"gte":"b","lt":"d"}}}`, "2,4,6"},
		{"exists", `{"exists":{"field":"score"}}`, "1,2,3,4,5"},
		{"exists object path", `{"exists":{"field":"tags"}}`, "1,2,3,4,5"},
		{"prefix keyword", `{"prefix":{"author":"ca"}}`, "4"},
		{"prefix text", `{"prefix":{"title":{"value":"conc"}}}`, "3"},
		{"wildcard", `{"wildcard":{"author":{"value":"*o*"}}}`, "2,4,6"},
		{"wildcard text", `{"wildcard":{"title":"g?"}}`, "1,3"},
		{"ids", `{"ids":{"values":["2","4","99"]}}`, "2,4"},
		{"bool must filter", `{"bool":{"must":{"match":{"title":"go"}},"filter":[{"range":{"points":{"gte":150}}}]}}`, "3"},
		{"bool msm", `{"bool":{"should":[{"term":{"tags":"go"}},{"term":{"tags":"lang"}},{"term":{"hot":true}}],"minimum_should_match":2}}`, "1,3,5"},
		{"bool msm percent", `{"bool":{"should":[{"term":{"tags":"go"}},{"term":{"tags":"lang"}},{"term":{"hot":true}}],"minimum_should_match":"100%"}}`, "1"},
		{"bool must_not", `{"bool":{"must":{"match_all":{}},"must_not":{"term":{"author":"bob"}}}}`, "1,3,4,5"},
		{"bool only must_not", `{"bool":{"must_not":[{"exists":{"field":"tags"}}]}}`, "6"},
		{"bool only filter", `{"bool":{"filter":{"term":{"hot":true}}}}`, "1,3,5"},
		{"bool only should", `{"bool":{"should":[{"term":{"tags":"db"}},{"term":{"author":"dave"}}]}}`, "4,5"},
		{"bool should optional", `{"bool":{"must":{"term":{"author":"alice"}},"should":{"term":{"tags":"db"}}}}`, "1,3"},
		{"qs and", `{"query_string":{"query":"go AND concurrency"}}`, "3"},
		{"qs or", `{"query_string":{"query":"rust OR database"}}`, "2,4"},
		{"qs not", `{"query_string":{"query":"go NOT generics"}}`, "3,5"},
		{"qs phrase", `{"query_string":{"query":"\"inverted indexes\""}}`, "5"},
		{"qs fields", `{"query_string":{"query":"go","fields":["title"]}}`, "1,3"},
		{"qs field range", `{"query_string":{"query":"author:alice AND points:>150"}}`, "3"},
		{"qs bracket range", `{"query_string":{"query":"points:[50 TO 120]"}}`, "1,2"},
		{"qs group", `{"query_string":{"query":"tags:(rust OR db)"}}`, "2,4"},
		{"qs exists minus", `{"query_string":{"query":"_exists_:hot AND -author:bob"}}`, "1,3,4,5"},
		{"qs default and", `{"query_string":{"query":"go patterns","default_operator":"AND"}}`, "3"},
		{"qs wildcard", `{"query_string":{"query":"title:data*"}}`, "4"},
		{"qs symbols", `{"query_string":{"query":"(rust || db) && !author:carol"}}`, "2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent := e.t
			e.t = t
			defer func() { e.t = parent }()
			m := e.search("news", `{"size":100,"query":`+c.query+`}`)
			got := strings.Join(sorted(hitIDs(m)), ",")
			if got != c.want {
				t.Fatalf("%s: got [%s], want [%s]", c.query, got, c.want)
			}
			if fmt.Sprint(total(m)) != fmt.Sprint(len(hitIDs(m))) {
				t.Fatalf("total %v != hits %d", total(m), len(hitIDs(m)))
			}
		})
	}
	st, m := e.raw(e.es.Count(e.es.Count.WithIndex("news"), e.es.Count.WithBody(strings.NewReader(`{"query":{"term":{"tags":"go"}}}`))))
	if st != 200 || m["count"] != float64(3) {
		t.Fatalf("count: %d %v", st, m)
	}
	m = e.ok(e.es.Search(e.es.Search.WithIndex("news"), e.es.Search.WithQuery("author:bob")))
	if got := strings.Join(sorted(hitIDs(m)), ","); got != "2,6" {
		t.Fatalf("?q= got %s", got)
	}
}

func TestSortPagingSourceHighlight(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	order := func(body, want string) map[string]any {
		t.Helper()
		m := e.search("news", body)
		if got := strings.Join(hitIDs(m), ","); got != want {
			t.Fatalf("%s: got [%s], want [%s]", body, got, want)
		}
		return m
	}
	m := order(`{"size":3,"sort":[{"points":"desc"}]}`, "3,5,1")
	h0 := m["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)
	if !reflect.DeepEqual(h0["sort"], []any{float64(200)}) || h0["_score"] != nil {
		t.Fatalf("sort values: %v", h0)
	}
	order(`{"sort":[{"published":{"order":"asc"}}]}`, "1,2,3,4,5,6")
	order(`{"sort":["score"]}`, "4,2,5,1,3,6")
	order(`{"sort":[{"author":"asc"},{"points":"desc"}]}`, "3,1,2,6,4,5")
	order(`{"from":2,"size":2,"sort":[{"points":"desc"}]}`, "1,2")
	order(`{"from":4,"size":10,"sort":[{"points":"desc"}]}`, "4,6")
	order(`{"query":{"match":{"body":"go"}},"sort":["_score",{"points":"asc"}]}`, orderByScore(e))
	// relevance: more matching terms score higher
	order(`{"query":{"match":{"title":"go concurrency patterns"}}}`, "3,1")

	m = e.search("news", `{"query":{"ids":{"values":["1"]}},"_source":["title"]}`)
	src := m["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)["_source"]
	if !reflect.DeepEqual(src, map[string]any{"title": "Go generics explained"}) {
		t.Fatalf("_source includes: %v", src)
	}
	m = e.search("news", `{"query":{"ids":{"values":["6"]}},"_source":{"excludes":["body","t*"]}}`)
	src = m["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)["_source"]
	if !reflect.DeepEqual(src, map[string]any{"author": "bob", "points": float64(5), "published": "2026-03-01T00:00:00Z"}) {
		t.Fatalf("_source excludes: %v", src)
	}
	m = e.search("news", `{"query":{"ids":{"values":["6"]}},"_source":false}`)
	if _, ok := m["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)["_source"]; ok {
		t.Fatal("_source false returned a source")
	}

	m = e.search("news", `{"size":1,"track_total_hits":2}`)
	if tt := m["hits"].(map[string]any)["total"]; !reflect.DeepEqual(tt, map[string]any{"value": float64(2), "relation": "gte"}) {
		t.Fatalf("track_total_hits 2: %v", tt)
	}
	m = e.search("news", `{"size":1,"track_total_hits":false}`)
	if _, ok := m["hits"].(map[string]any)["total"]; ok {
		t.Fatal("track_total_hits false returned a total")
	}
	m = e.search("news", `{"size":0,"track_total_hits":true}`)
	if total(m) != float64(6) || len(hitIDs(m)) != 0 {
		t.Fatalf("size 0: %v", m)
	}

	m = e.search("news", `{"query":{"bool":{"must":[{"match":{"body":"generics"}},{"match":{"title":"go"}}]}},"highlight":{"fields":{"body":{},"title":{}}}}`)
	hl := m["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)["highlight"]
	want := map[string]any{"body": []any{"A deep dive into <em>generics</em> in Go"}, "title": []any{"<em>Go</em> generics explained"}}
	if !reflect.DeepEqual(hl, want) {
		t.Fatalf("highlight: %v", hl)
	}
	m = e.search("news", `{"query":{"query_string":{"query":"\"deep dive\""}},"highlight":{"pre_tags":["["],"post_tags":["]"],"fields":{"*":{}}}}`)
	hl = m["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)["highlight"]
	if !reflect.DeepEqual(hl, map[string]any{"body": []any{"A [deep] [dive] into generics in Go"}}) {
		t.Fatalf("highlight tags: %v", hl)
	}
}

// orderByScore returns the ids of match body:go ordered by score then points, computed
// from the server's own scores so the test checks the sort, not bleve's scoring.
func orderByScore(e *env) string {
	m := e.search("news", `{"query":{"match":{"body":"go"}}}`)
	type hs struct {
		id    string
		score float64
	}
	pts := map[string]float64{"1": 120, "5": 150}
	var list []hs
	for _, h := range m["hits"].(map[string]any)["hits"].([]any) {
		hm := h.(map[string]any)
		list = append(list, hs{hm["_id"].(string), hm["_score"].(float64)})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].score != list[j].score {
			return list[i].score > list[j].score
		}
		return pts[list[i].id] < pts[list[j].id]
	})
	var ids []string
	for _, h := range list {
		ids = append(ids, h.id)
	}
	return strings.Join(ids, ",")
}

func TestDateMathNow(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	now := time.Now().UTC()
	var b strings.Builder
	for i, ago := range []time.Duration{2 * time.Hour, 72 * time.Hour, 240 * time.Hour} {
		fmt.Fprintf(&b, `{"index":{"_id":"e%d"}}`+"\n"+`{"ts":"%s","n":%d}`+"\n", i, now.Add(-ago).Format(time.RFC3339), i)
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("events")))
	for q, want := range map[string]string{
		`{"range":{"ts":{"gte":"now-1d"}}}`:                "e0",
		`{"range":{"ts":{"gte":"now-7d/d"}}}`:              "e0,e1",
		`{"range":{"ts":{"lt":"now-5d","gte":"now-30d"}}}`: "e2",
		`{"range":{"ts":{"gt":"now"}}}`:                    "",
	} {
		m := e.search("events", `{"query":`+q+`}`)
		if got := strings.Join(sorted(hitIDs(m)), ","); got != want {
			t.Errorf("%s: got [%s], want [%s]", q, got, want)
		}
	}
	// dynamic mapping made ts a date and n a long
	m := e.ok(e.es.Indices.GetMapping(e.es.Indices.GetMapping.WithIndex("events")))
	props := m["events"].(map[string]any)["mappings"].(map[string]any)["properties"].(map[string]any)
	if props["ts"].(map[string]any)["type"] != "date" || props["n"].(map[string]any)["type"] != "long" {
		t.Fatalf("dynamic mapping: %v", props)
	}
}

func TestAggregations(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	agg := func(query, aggs string) map[string]any {
		t.Helper()
		if query == "" {
			query = `{"match_all":{}}`
		}
		m := e.search("news", `{"size":0,"query":`+query+`,"aggs":`+aggs+`}`)
		return m["aggregations"].(map[string]any)
	}
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	check := func(name string, got any, want string) {
		t.Helper()
		var w any
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s:\n got  %s\n want %s", name, j(got), want)
		}
	}
	a := agg("", `{"tags":{"terms":{"field":"tags"}}}`)
	check("terms", a["tags"], `{"doc_count_error_upper_bound":0,"sum_other_doc_count":0,"buckets":[{"key":"go","doc_count":3},{"key":"lang","doc_count":2},{"key":"db","doc_count":1},{"key":"rust","doc_count":1},{"key":"search","doc_count":1}]}`)
	a = agg("", `{"a":{"terms":{"field":"author","size":2}}}`)
	check("terms size", a["a"], `{"doc_count_error_upper_bound":0,"sum_other_doc_count":2,"buckets":[{"key":"alice","doc_count":2},{"key":"bob","doc_count":2}]}`)
	a = agg("", `{"a":{"terms":{"field":"author","order":{"_key":"desc"}},"aggs":{"p":{"avg":{"field":"points"}}}}}`)
	check("terms nested", a["a"], `{"doc_count_error_upper_bound":0,"sum_other_doc_count":0,"buckets":[{"key":"dave","doc_count":1,"p":{"value":150}},{"key":"carol","doc_count":1,"p":{"value":45}},{"key":"bob","doc_count":2,"p":{"value":42.5}},{"key":"alice","doc_count":2,"p":{"value":160}}]}`)
	a = agg("", `{"h":{"terms":{"field":"hot"}}}`)
	check("terms bool", a["h"], `{"doc_count_error_upper_bound":0,"sum_other_doc_count":0,"buckets":[{"key":1,"key_as_string":"true","doc_count":3},{"key":0,"key_as_string":"false","doc_count":2}]}`)
	a = agg("", `{"m":{"date_histogram":{"field":"published","calendar_interval":"month"}}}`)
	check("date_histogram month", a["m"], `{"buckets":[{"key_as_string":"2026-01-01T00:00:00.000Z","key":1767225600000,"doc_count":3},{"key_as_string":"2026-02-01T00:00:00.000Z","key":1769904000000,"doc_count":2},{"key_as_string":"2026-03-01T00:00:00.000Z","key":1772323200000,"doc_count":1}]}`)
	a = agg(`{"terms":{"author":["alice","bob"]}}`, `{"m":{"date_histogram":{"field":"published","calendar_interval":"1M"},"aggs":{"s":{"sum":{"field":"points"}}}}}`)
	check("date_histogram fill", a["m"], `{"buckets":[{"key_as_string":"2026-01-01T00:00:00.000Z","key":1767225600000,"doc_count":3,"s":{"value":400}},{"key_as_string":"2026-02-01T00:00:00.000Z","key":1769904000000,"doc_count":0,"s":{"value":0}},{"key_as_string":"2026-03-01T00:00:00.000Z","key":1772323200000,"doc_count":1,"s":{"value":5}}]}`)
	a = agg(`{"range":{"published":{"lt":"2026-01-06"}}}`, `{"d":{"date_histogram":{"field":"published","fixed_interval":"12h","min_doc_count":1}}}`)
	check("date_histogram fixed", a["d"], `{"buckets":[{"key_as_string":"2026-01-05T00:00:00.000Z","key":1767571200000,"doc_count":1},{"key_as_string":"2026-01-05T12:00:00.000Z","key":1767614400000,"doc_count":1}]}`)
	a = agg("", `{"h":{"histogram":{"field":"points","interval":100}}}`)
	check("histogram", a["h"], `{"buckets":[{"key":0,"doc_count":3},{"key":100,"doc_count":2},{"key":200,"doc_count":1}]}`)
	a = agg("", `{"r":{"range":{"field":"points","ranges":[{"to":50},{"from":50,"to":150},{"from":150,"key":"top"}]}}}`)
	check("range", a["r"], `{"buckets":[{"key":"*-50.0","to":50,"doc_count":2},{"key":"50.0-150.0","from":50,"to":150,"doc_count":2},{"key":"top","from":150,"doc_count":2}]}`)
	a = agg("", `{"avg":{"avg":{"field":"points"}},"sum":{"sum":{"field":"points"}},"min":{"min":{"field":"points"}},"max":{"max":{"field":"points"}},"vc":{"value_count":{"field":"tags"}},"card":{"cardinality":{"field":"tags"}},"last":{"max":{"field":"published"}},"none":{"avg":{"field":"score"}}}`)
	check("metrics", a, `{"avg":{"value":100},"sum":{"value":600},"min":{"value":5},"max":{"value":200},"vc":{"value":8},"card":{"value":5},"last":{"value":1772323200000,"value_as_string":"2026-03-01T00:00:00.000Z"},"none":{"value":4.12}}`)
	a = agg(`{"term":{"tags":"nothing"}}`, `{"avg":{"avg":{"field":"points"}},"t":{"terms":{"field":"tags"}}}`)
	check("empty", a, `{"avg":{"value":null},"t":{"doc_count_error_upper_bound":0,"sum_other_doc_count":0,"buckets":[]}}`)
	// points are 120, 80, 200, 45, 150, 5.
	a = agg(`{"terms":{"author":["alice","bob"]}}`, `{"s":{"stats":{"field":"points"}},"e":{"extended_stats":{"field":"points","sigma":1}}}`)
	check("stats", a["s"], `{"count":4,"min":5,"max":200,"avg":101.25,"sum":405}`)
	e2 := a["e"].(map[string]any)
	// variance is (sum of squares - sum²/count) / count = (60825 - 405²/4) / 4.
	if e2["sum_of_squares"] != 60825.0 || e2["variance"] != 4954.6875 || e2["std_deviation_bounds"].(map[string]any)["upper"] != 101.25+math.Sqrt(4954.6875) {
		t.Errorf("extended_stats: %s", j(e2))
	}
	a = agg("", `{"p":{"percentiles":{"field":"points","percents":[25,50,99]}},"k":{"percentiles":{"field":"points","percents":[50],"keyed":false}}}`)
	check("percentiles", a, `{"p":{"values":{"25.0":45,"50.0":100,"99.0":200}},"k":{"values":[{"key":50,"value":100}]}}`)
	a = agg("", `{"f":{"filters":{"filters":{"go":{"term":{"tags":"go"}},"hot":{"term":{"hot":true}}}},"aggs":{"p":{"sum":{"field":"points"}}}},"a":{"filters":{"filters":[{"term":{"author":"bob"}}],"other_bucket":true}}}`)
	check("filters", a, `{"f":{"buckets":{"go":{"doc_count":3,"p":{"value":470}},"hot":{"doc_count":3,"p":{"value":470}}}},"a":{"buckets":[{"doc_count":2},{"doc_count":4}]}}`)
	a = agg("", `{"a":{"terms":{"field":"author"},"aggs":{"s":{"sum":{"field":"points"}}}},"mx":{"max_bucket":{"buckets_path":"a>s"}},"st":{"stats_bucket":{"buckets_path":"a>_count","format":"0.0"}}}`)
	check("max_bucket", a["mx"], `{"value":320,"keys":["alice"]}`)
	check("stats_bucket", a["st"], `{"count":4,"min":1,"max":2,"avg":1.5,"sum":6,"min_as_string":"1.0","max_as_string":"2.0","avg_as_string":"1.5","sum_as_string":"6.0"}`)
	a = agg(`{"term":{"author":"alice"}}`, `{"r":{"rare_terms":{"field":"author"}},"g":{"global":{},"aggs":{"r":{"rare_terms":{"field":"author","exclude":["dave"]}}}},"f":{"filter":{"term":{"author":"alice"}}}}`)
	check("rare_terms, global and filter", a, `{"r":{"buckets":[]},"g":{"doc_count":6,"r":{"buckets":[{"key":"carol","doc_count":1}]}},"f":{"doc_count":2}}`)
	a = agg("", `{"h":{"histogram":{"field":"points","interval":100},"aggs":{"s":{"sum":{"field":"points"}},"c":{"cumulative_sum":{"buckets_path":"s"}},"d":{"serial_diff":{"buckets_path":"_count"}},"o":{"bucket_sort":{"sort":[{"s":"desc"}],"size":2}}}}}`)
	check("parent pipelines", a["h"], `{"buckets":[{"key":100,"doc_count":2,"s":{"value":270},"c":{"value":400},"d":{"value":-1}},{"key":200,"doc_count":1,"s":{"value":200},"c":{"value":600},"d":{"value":-1}}]}`)
	a = agg("", `{"s":{"sampler":{"shard_size":2}},"d":{"diversified_sampler":{"field":"author"},"aggs":{"n":{"value_count":{"field":"author"}}}},"r":{"range":{"field":"points","ranges":[{"from":null,"to":100}]}}}`)
	check("samplers and open range", a, `{"s":{"doc_count":2},"d":{"doc_count":4,"n":{"value":4}},"r":{"buckets":[{"key":"*-100.0","to":100,"doc_count":3}]}}`)
	a = agg(`{"range":{"published":{"lt":"2026-01-06"}}}`, `{"d":{"date_histogram":{"field":"published","calendar_interval":"day","time_zone":"+01:00","min_doc_count":1}}}`)
	check("date_histogram time_zone", a["d"], `{"buckets":[{"key_as_string":"2026-01-05T00:00:00.000+01:00","key":1767567600000,"doc_count":2}]}`)
	a = agg("", `{"m":{"adjacency_matrix":{"filters":{"go":{"term":{"tags":"go"}},"db":{"term":{"tags":"db"}},"lang":{"term":{"tags":"lang"}}}}}}`)
	check("adjacency_matrix", a["m"], `{"buckets":[{"key":"db","doc_count":1},{"key":"go","doc_count":3},{"key":"go&lang","doc_count":1},{"key":"lang","doc_count":2}]}`)
	// Σp²/Σp over points 120, 80, 200, 45, 150, 5.
	a = agg("", `{"w":{"weighted_avg":{"value":{"field":"points"},"weight":{"field":"points"}}}}`)
	check("weighted_avg", a["w"], `{"value":142.25}`)
	// points sorted: 5, 45, 80, 120, 150, 200. HDR reports the highest value equivalent to
	// the one at the rank (80 falls in a bucket 16/256 wide, the unit following the smallest
	// value, 5); ranks interpolate between values (100 is halfway from 80 to 120).
	a = agg("", `{"h":{"percentiles":{"field":"points","percents":[50],"hdr":{}}},"r":{"percentile_ranks":{"field":"points","values":[100]}},"rh":{"percentile_ranks":{"field":"points","values":[100],"hdr":{}}}}`)
	check("hdr percentiles and ranks", a, `{"h":{"values":{"50.0":80.05859375}},"r":{"values":{"100.0":50}},"rh":{"values":{"100.0":50}}}`)
	a = agg(`{"term":{"author":"alice"}}`, `{"a":{"terms":{"field":"author"},"aggs":{"t":{"top_hits":{"size":1,"sort":[{"points":"desc"}],"_source":["points"]}}}}}`)
	th := a["a"].(map[string]any)["buckets"].([]any)[0].(map[string]any)["t"].(map[string]any)["hits"].(map[string]any)
	if j(th["total"]) != `{"relation":"eq","value":2}` || len(th["hits"].([]any)) != 1 || j(th["hits"].([]any)[0].(map[string]any)["_source"]) != `{"points":200}` {
		t.Errorf("top_hits: %s", j(th))
	}
}

func TestNestedBoolPrefixAndMetaQueries(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("n", e.es.Indices.Create.WithBody(strings.NewReader(
		`{"mappings":{"properties":{"users":{"type":"nested","properties":{"first":{"type":"keyword"}}},"text":{"type":"text"},"k":{"type":"keyword","ignore_above":3},"loc":{"type":"geo_point"}}}}`))))
	docs := `{"index":{"_id":"1","routing":"r"}}
{"users":[{"first":"john"},{"first":"mark"}],"text":"brown fox jump","k":"toolong","loc":"45.5,-5"}
{"index":{"_id":"2"}}
{"users":[{"first":"alice"}],"text":"jumparound dog","k":"ok","loc":[10.2,45.1]}
`
	e.ok(e.es.Bulk(strings.NewReader(docs), e.es.Bulk.WithIndex("n"), e.es.Bulk.WithRefresh("true")))
	ids := func(q string) []string {
		t.Helper()
		return sorted(hitIDs(e.search("n", `{"query":`+q+`}`)))
	}
	for _, c := range []struct{ q, want string }{
		{`{"nested":{"path":"users","query":{"term":{"users.first":"mark"}}}}`, "[1]"},
		{`{"nested":{"path":"users","query":{"exists":{"field":"users.first"}}}}`, "[1 2]"},
		{`{"match_bool_prefix":{"text":"brown ju"}}`, "[1 2]"},
		{`{"match_bool_prefix":{"text":{"query":"brown ju","operator":"and"}}}`, "[1]"},
		{`{"multi_match":{"query":"dog","type":"bool_prefix","fields":["text"]}}`, "[2]"},
		{`{"exists":{"field":"_id"}}`, "[1 2]"},
		{`{"exists":{"field":"_routing"}}`, "[1]"},
		{`{"exists":{"field":"_ignored"}}`, "[1]"},
		{`{"term":{"_ignored":"k"}}`, "[1]"},
		{`{"geo_bounding_box":{"loc":{"top_left":[-10,50],"bottom_right":{"lat":40,"lon":0}}}}`, "[1]"},
		{`{"geo_bounding_box":{"loc":{"wkt":"BBOX (0, 20, 50, 40)"}}}`, "[2]"},
		// "brown fox jump": ordered with no gap, unordered, containing and before.
		{`{"intervals":{"text":{"match":{"query":"brown jump","ordered":true,"max_gaps":0}}}}`, "[]"},
		{`{"intervals":{"text":{"match":{"query":"jump brown","max_gaps":1}}}}`, "[1]"},
		{`{"intervals":{"text":{"all_of":{"intervals":[{"match":{"query":"brown"}},{"prefix":{"prefix":"ju"}}],"ordered":true,"filter":{"containing":{"match":{"query":"fox"}}}}}}}`, "[1]"},
		{`{"intervals":{"text":{"any_of":{"intervals":[{"fuzzy":{"term":"dig"}},{"wildcard":{"pattern":"fo?"}}],"filter":{"after":{"match":{"query":"brown"}}}}}}}`, "[1]"},
		{`{"intervals":{"text":{"match":{"query":"dog","filter":{"after":{"wildcard":{"pattern":"jump*"}}}}}}}`, "[2]"},
	} {
		if got := fmt.Sprint(ids(c.q)); got != c.want {
			t.Errorf("%s: got %s, want %s", c.q, got, c.want)
		}
	}
	aggs := e.search("n", `{"size":0,"aggs":{"u":{"nested":{"path":"users"},"aggs":{"f":{"terms":{"field":"users.first"}}}}}}`)["aggregations"].(map[string]any)
	if u := aggs["u"].(map[string]any); u["doc_count"] != 3.0 || len(u["f"].(map[string]any)["buckets"].([]any)) != 3 {
		t.Errorf("nested aggregation: %v", u)
	}
	st, _ := e.raw(e.es.Search(e.es.Search.WithIndex("n"), e.es.Search.WithBody(strings.NewReader(`{"query":{"nested":{"path":"nope","query":{"match_all":{}}}}}`))))
	if st != 400 {
		t.Errorf("nested on an unmapped path: status %d, want 400", st)
	}
	h := e.search("n", `{"query":{"ids":{"values":["1"]}}}`)["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)
	if fmt.Sprint(h["_ignored"]) != "[k]" {
		t.Errorf("hit _ignored = %v, want [k]", h["_ignored"])
	}
}

func TestErrors(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	cases := []struct {
		name, index, body string
		status            int
		typ, mention      string
	}{
		{"unknown query", "news", `{"query":{"more_like_this":{"like":"go"}}}`, 400, "parsing_exception", "more_like_this"},
		{"two fields", "news", `{"query":{"match":{"title":"go","body":"go"}}}`, 400, "parsing_exception", "match"},
		{"two query types", "news", `{"query":{"match_all":{},"term":{"tags":"go"}}}`, 400, "parsing_exception", "match_all, term"},
		{"bad option", "news", `{"query":{"match":{"title":{"query":"go","fuzziness":2}}}}`, 400, "parsing_exception", "fuzziness"},
		{"bool key", "news", `{"query":{"bool":{"mustnt":[]}}}`, 400, "parsing_exception", "mustnt"},
		{"terms agg on text", "news", `{"aggs":{"x":{"terms":{"field":"title"}}}}`, 400, "illegal_argument_exception", "[title]"},
		{"unknown agg", "news", `{"aggs":{"x":{"scripted_metric":{"map_script":"x"}}}}`, 400, "parsing_exception", "scripted_metric"},
		{"bad interval", "news", `{"aggs":{"x":{"date_histogram":{"field":"published","calendar_interval":"fortnight"}}}}`, 400, "illegal_argument_exception", "fortnight"},
		{"sort text", "news", `{"sort":["title"]}`, 400, "illegal_argument_exception", "[title]"},
		{"sort unmapped", "news", `{"sort":["nope"]}`, 400, "query_shard_exception", "[nope]"},
		{"unknown key", "news", `{"querry":{}}`, 400, "parsing_exception", "querry"},
		{"qs unbalanced", "news", `{"query":{"query_string":{"query":"(go OR rust"}}}`, 400, "query_shard_exception", "parenthesis"},
		{"bad date", "news", `{"query":{"range":{"published":{"gte":"yesterday"}}}}`, 400, "parse_exception", "yesterday"},
		{"bad number", "news", `{"query":{"term":{"points":"many"}}}`, 400, "query_shard_exception", "many"},
		{"window", "news", `{"from":9999,"size":10}`, 400, "illegal_argument_exception", "Result window"},
		{"missing index", "nope", `{}`, 404, "index_not_found_exception", "[nope]"},
		{"bad json", "news", `{"query":`, 400, "x_content_parse_exception", "JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent := e.t
			e.t = t
			defer func() { e.t = parent }()
			st, m := e.raw(e.es.Search(e.es.Search.WithIndex(c.index), e.es.Search.WithBody(strings.NewReader(c.body))))
			if st != c.status {
				t.Fatalf("status %d, want %d: %v", st, c.status, m)
			}
			er, _ := m["error"].(map[string]any)
			rc, _ := er["root_cause"].([]any)
			if er == nil || len(rc) != 1 || er["type"] != c.typ || m["status"] != float64(c.status) {
				t.Fatalf("not an ES error of type %s: %v", c.typ, m)
			}
			if !strings.Contains(er["reason"].(string), c.mention) {
				t.Fatalf("reason %q does not name %q", er["reason"], c.mention)
			}
		})
	}
	st, m := e.raw(e.es.Indices.Create("news"))
	if st != 400 || m["error"].(map[string]any)["type"] != "resource_already_exists_exception" {
		t.Fatalf("create twice: %d %v", st, m)
	}
	// Types eslite does not search are accepted and kept in _source; unknown ones are not.
	st, m = e.raw(e.es.Indices.Create("geo", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"loc":{"type":"geo_point"}}}}`))))
	if st != 200 {
		t.Fatalf("geo_point mapping: %d %v", st, m)
	}
	st, m = e.raw(e.es.Indices.Create("bad", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"loc":{"type":"no_such_type"}}}}`))))
	if st != 400 || !strings.Contains(m["error"].(map[string]any)["reason"].(string), "no_such_type") {
		t.Fatalf("unknown type: %d %v", st, m)
	}
}

func TestDocsBulkAliasesRestart(t *testing.T) {
	dir := t.TempDir()
	e := start(t, dir)
	e.seed()
	// single documents
	m := e.ok(e.es.Index("news", strings.NewReader(`{"title":"Seventh","points":7}`), e.es.Index.WithDocumentID("7")))
	if m["result"] != "created" || m["_version"] != float64(1) {
		t.Fatalf("index: %v", m)
	}
	m = e.ok(e.es.Index("news", strings.NewReader(`{"title":"Seventh again","points":8}`), e.es.Index.WithDocumentID("7")))
	if m["result"] != "updated" || m["_version"] != float64(2) {
		t.Fatalf("reindex: %v", m)
	}
	m = e.ok(e.es.Get("news", "7"))
	if m["found"] != true || m["_source"].(map[string]any)["title"] != "Seventh again" {
		t.Fatalf("get: %v", m)
	}
	e.ok(e.es.Delete("news", "7"))
	st, m := e.raw(e.es.Get("news", "7"))
	if st != 404 || m["found"] != false {
		t.Fatalf("get deleted: %d %v", st, m)
	}
	// per-document errors in bulk
	bulk := `{"index":{"_index":"news","_id":"8"}}
{"title":"fine","points":1}
{"index":{"_index":"news","_id":"9"}}
{"title":"bad","points":"lots"}
{"create":{"_index":"news","_id":"1"}}
{"title":"dup"}
{"delete":{"_index":"news","_id":"8"}}
`
	m = e.ok(e.es.Bulk(strings.NewReader(bulk)))
	items := m["items"].([]any)
	if m["errors"] != true || len(items) != 4 {
		t.Fatalf("bulk: %v", m)
	}
	status := func(i int, action string) (float64, string) {
		r := items[i].(map[string]any)[action].(map[string]any)
		er, _ := r["error"].(map[string]any)
		typ := ""
		if er != nil {
			typ = er["type"].(string)
		}
		return r["status"].(float64), typ
	}
	for i, w := range []struct {
		action string
		st     float64
		typ    string
	}{{"index", 201, ""}, {"index", 400, "document_parsing_exception"}, {"create", 409, "version_conflict_engine_exception"}, {"delete", 200, ""}} {
		if st, typ := status(i, w.action); st != w.st || typ != w.typ {
			t.Fatalf("item %d: %v %q want %v %q", i, st, typ, w.st, w.typ)
		}
	}
	// aliases and patterns
	e.ok(e.es.Indices.PutAlias([]string{"news"}, "articles"))
	e.ok(e.es.Index("news-2", strings.NewReader(`{"title":"Other Go news","points":3}`), e.es.Index.WithDocumentID("x1")))
	e.ok(e.es.Indices.UpdateAliases(strings.NewReader(`{"actions":[{"add":{"index":"news-2","alias":"articles"}}]}`)))
	for index, want := range map[string]float64{"articles": 7, "news*": 7, "news,news-2": 7, "news": 6, "_all": 7, "zzz*": 0} {
		st, m := e.raw(e.es.Count(e.es.Count.WithIndex(index)))
		if st != 200 || m["count"] != want {
			t.Fatalf("count %s: %d %v", index, st, m)
		}
	}
	m = e.search("articles", `{"query":{"match":{"title":"go"}},"sort":[{"points":"desc"}]}`)
	hits := m["hits"].(map[string]any)["hits"].([]any)
	if got := strings.Join(hitIDs(m), ","); got != "3,1,x1" || hits[2].(map[string]any)["_index"] != "news-2" {
		t.Fatalf("alias search: %v", m)
	}
	st, _ = e.raw(e.es.Indices.Exists([]string{"articles"}))
	if st != 200 {
		t.Fatalf("exists alias: %d", st)
	}
	m = e.ok(e.es.Indices.GetAlias(e.es.Indices.GetAlias.WithName("articles")))
	if len(m) != 2 {
		t.Fatalf("get alias: %v", m)
	}

	// a second server on a directory in use fails instead of hanging
	if _, stop2, err := eslite.Start(dir, "127.0.0.1:0"); err == nil {
		stop2()
		t.Fatal("second server on the same directory started")
	}
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}

	// restart on the same directory keeps indexes, mappings, aliases and documents
	e = start(t, dir)
	defer e.stop()
	st, m = e.raw(e.es.Count(e.es.Count.WithIndex("articles")))
	if st != 200 || m["count"] != float64(7) {
		t.Fatalf("after restart: %d %v", st, m)
	}
	m = e.search("news", `{"size":100,"query":{"term":{"title.keyword":"Weekly links"}}}`)
	if got := strings.Join(hitIDs(m), ","); got != "6" {
		t.Fatalf("after restart term: %s", got)
	}
	e.ok(e.es.Indices.Delete([]string{"news-2"}))
	st, _ = e.raw(e.es.Indices.Exists([]string{"news-2"}))
	if st != 404 {
		t.Fatalf("deleted index exists: %d", st)
	}
	_, info := e.raw(e.es.Info())
	if v := info["version"].(map[string]any)["number"].(string); !strings.HasPrefix(v, "8.") {
		t.Fatalf("version %s", v)
	}
	_ = bytes.MinRead
}

func TestIndexAPI(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	// add a property, then try to change a type
	e.ok(e.es.Indices.PutMapping([]string{"news"}, strings.NewReader(`{"properties":{"lang":{"type":"keyword"}}}`)))
	st, m := e.raw(e.es.Indices.PutMapping([]string{"news"}, strings.NewReader(`{"properties":{"points":{"type":"keyword"}}}`)))
	if st != 400 || !strings.Contains(m["error"].(map[string]any)["reason"].(string), "[points]") {
		t.Fatalf("mapping conflict: %d %v", st, m)
	}
	m = e.ok(e.es.Indices.Get([]string{"news"}))
	props := m["news"].(map[string]any)["mappings"].(map[string]any)["properties"].(map[string]any)
	if props["lang"] == nil || props["points"].(map[string]any)["type"] != "long" {
		t.Fatalf("mappings: %v", props)
	}
	e.ok(e.es.Index("news", strings.NewReader(`{"lang":"en","title":"Eighth"}`), e.es.Index.WithDocumentID("8")))
	m = e.search("news", `{"query":{"term":{"lang":"en"}}}`)
	if got := strings.Join(hitIDs(m), ","); got != "8" {
		t.Fatalf("new property: %s", got)
	}
	st, _ = e.raw(e.es.Exists("news", "8"))
	if st != 200 {
		t.Fatalf("doc exists: %d", st)
	}
	st, _ = e.raw(e.es.Exists("news", "88"))
	if st != 404 {
		t.Fatalf("doc missing: %d", st)
	}
	// metadata fields cannot be indexed; unknown endpoints are named
	st, m = e.raw(e.es.Index("news", strings.NewReader(`{"_id":"x"}`), e.es.Index.WithDocumentID("9")))
	if st != 400 || m["error"].(map[string]any)["type"] != "document_parsing_exception" {
		t.Fatalf("metadata field: %d %v", st, m)
	}
	st, m = e.raw(e.es.Indices.Forcemerge(e.es.Indices.Forcemerge.WithIndex("news")))
	if st != 400 || !strings.Contains(m["error"].(map[string]any)["reason"].(string), "_forcemerge") {
		t.Fatalf("unsupported endpoint: %d %v", st, m)
	}
	st, m = e.raw(e.es.Indices.Create("Bad*Name"))
	if st != 400 || m["error"].(map[string]any)["type"] != "invalid_index_name_exception" {
		t.Fatalf("bad name: %d %v", st, m)
	}
	// source modes: logsdb keeps synthetic source only; the setting overrides a mapped mode
	st, m = e.raw(e.es.Indices.Create("logs", e.es.Indices.Create.WithBody(strings.NewReader(`{"settings":{"index":{"mode":"logsdb"}},"mappings":{"_source":{"mode":"stored"}}}`))))
	if st != 400 || m["error"].(map[string]any)["type"] != "mapper_parsing_exception" {
		t.Fatalf("logsdb with stored source: %d %v", st, m)
	}
	e.ok(e.es.Indices.Create("logs", e.es.Indices.Create.WithBody(strings.NewReader(`{"settings":{"index.mode":"logsdb"},"aliases":{"w":{"is_write_index":"true"}}}`))))
	e.ok(e.es.Indices.Create("over", e.es.Indices.Create.WithBody(strings.NewReader(`{"settings":{"index.mapping.source.mode":"disabled"},"mappings":{"_source":{"mode":"stored"}}}`))))
	m = e.ok(e.es.Indices.GetMapping(e.es.Indices.GetMapping.WithIndex("logs", "over")))
	for ix, want := range map[string]string{"logs": "synthetic", "over": "disabled"} {
		if got := m[ix].(map[string]any)["mappings"].(map[string]any)["_source"].(map[string]any)["mode"]; got != want {
			t.Errorf("%s _source.mode = %v, want %s", ix, got, want)
		}
	}
	m = e.ok(e.es.Indices.GetAlias(e.es.Indices.GetAlias.WithIndex("logs")))
	if m["logs"].(map[string]any)["aliases"].(map[string]any)["w"].(map[string]any)["is_write_index"] != true {
		t.Errorf("is_write_index given as a string: %v", m)
	}
}

// Dates in custom formats (a Java pattern, epoch_second) are read in the field's format.
func TestDatesOutsideBleveYears(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("d", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"date":{"type":"date"},"slash":{"type":"date","format":"yyyy/MM/dd"},"secs":{"type":"date","format":"epoch_second"}}}}`))))
	docs := `{"index":{"_id":"old"}}
{"date":"1500-01-05T12:00:00Z","slash":"2017/01/01","secs":999}
{"index":{"_id":"new"}}
{"date":"2022-01-03T12:00:00Z","slash":"2017/01/02","secs":"1000"}
`
	e.ok(e.es.Bulk(strings.NewReader(docs), e.es.Bulk.WithIndex("d"), e.es.Bulk.WithRefresh("true")))
	for _, c := range []struct{ q, want string }{
		{`{"range":{"date":{"gte":1000,"lte":2023,"format":"uuuu"}}}`, "[new old]"},
		{`{"range":{"date":{"gte":"1400-01-01","lt":"1600-01-01"}}}`, "[old]"},
		{`{"range":{"date":{"gte":"2000-01-01"}}}`, "[new]"},
		{`{"term":{"date":"1500-01-05T12:00:00Z"}}`, "[old]"},
		{`{"range":{"slash":{"gte":"2017/01/02"}}}`, "[new]"},
		{`{"range":{"secs":{"lt":1000}}}`, "[old]"},
	} {
		if got := fmt.Sprint(sorted(hitIDs(e.search("d", `{"query":`+c.q+`}`)))); got != c.want {
			t.Errorf("%s: got %s, want %s", c.q, got, c.want)
		}
	}
}

func TestIPRangeDocCountAndBulkTail(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("ips", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"ip":{"type":"ip"},"n":{"type":"long"}}}}`))))
	// The last action has no source line: it is dropped, as Elasticsearch drops it.
	docs := `{"index":{}}
{"ip":"::1","n":1,"_doc_count":3}
{"index":{}}
{"ip":"192.168.0.1","n":51}
{"index":{}}
{"ip":"192.168.0.7","n":101}
{"index":{}}
`
	e.ok(e.es.Bulk(strings.NewReader(docs), e.es.Bulk.WithIndex("ips"), e.es.Bulk.WithRefresh("true")))
	e.ok(e.es.Indices.Create("flat", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"f":{"type":"flattened"}}}}`))))
	e.ok(e.es.Bulk(strings.NewReader("{\"index\":{}}\n{\"f\":{\"k\":\"a\"}}\n{\"index\":{}}\n{\"f\":{\"k\":\"a\"}}\n"), e.es.Bulk.WithIndex("flat"), e.es.Bulk.WithRefresh("true")))
	fb, _ := json.Marshal(e.search("flat", `{"size":0,"aggs":{"t":{"terms":{"field":"f.k"}}}}`)["aggregations"])
	if !strings.Contains(string(fb), `"buckets":[{"doc_count":2,"key":"a"}]`) {
		t.Errorf("terms on a flattened key: %s", fb)
	}
	m := e.search("ips", `{"size":0,"aggs":{"r":{"ip_range":{"field":"ip","ranges":[{"to":"192.168.0.0"},{"mask":"192.168.0.0/16"}]}},"h":{"histogram":{"field":"n","interval":50,"format":"Value is ##0.0"}}}}`)
	b, _ := json.Marshal(m["aggregations"])
	want := `{"h":{"buckets":[{"doc_count":3,"key":0,"key_as_string":"Value is 0.0"},{"doc_count":1,"key":50,"key_as_string":"Value is 50.0"},{"doc_count":1,"key":100,"key_as_string":"Value is 100.0"}]},` +
		`"r":{"buckets":[{"doc_count":3,"key":"*-192.168.0.0","to":"192.168.0.0"},{"doc_count":2,"from":"192.168.0.0","key":"192.168.0.0/16","to":"192.169.0.0"}]}}`
	if string(b) != want {
		t.Errorf("aggregations:\n got  %s\n want %s", b, want)
	}
	st, _ := e.raw(e.es.Search(e.es.Search.WithIndex("ips"), e.es.Search.WithBody(strings.NewReader(`{"terminate_after":-1}`))))
	if st != 400 {
		t.Errorf("negative terminate_after: status %d, want 400", st)
	}
}

func TestJavaHashOrderAndDateRange(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	// matched_queries come in java.util.HashMap order: "the" (bucket 0) before "snack"
	// (bucket 6).
	h := e.search("news", `{"query":{"bool":{"should":[{"match":{"title":{"query":"go","_name":"snack"}}},{"match":{"title":{"query":"go","_name":"the"}}}]}}}`)["hits"].(map[string]any)["hits"].([]any)[0].(map[string]any)
	if got := fmt.Sprint(h["matched_queries"]); got != "[the snack]" {
		t.Errorf("matched_queries = %s", got)
	}
	m := e.search("news", `{"size":0,"aggs":{"d":{"date_range":{"field":"published","ranges":[{"to":"2026-02-01"},{"from":"2026-02-01"}]}}}}`)
	b, _ := json.Marshal(m["aggregations"])
	want := `{"d":{"buckets":[{"doc_count":3,"key":"*-2026-02-01T00:00:00.000Z","to":1769904000000,"to_as_string":"2026-02-01T00:00:00.000Z"},` +
		`{"doc_count":3,"from":1769904000000,"from_as_string":"2026-02-01T00:00:00.000Z","key":"2026-02-01T00:00:00.000Z-*"}]}}`
	if string(b) != want {
		t.Errorf("date_range:\n got  %s\n want %s", b, want)
	}
}

func TestFetchProfile(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	phases := func(body string) string {
		t.Helper()
		f := e.search("news", body)["profile"].(map[string]any)["shards"].([]any)[0].(map[string]any)["fetch"].(map[string]any)
		var out []string
		children, _ := f["children"].([]any)
		for _, c := range children {
			out = append(out, c.(map[string]any)["type"].(string))
		}
		return fmt.Sprint(f["debug"].(map[string]any)["stored_fields"], out)
	}
	if got := phases(`{"profile":true,"_source":false,"fields":["tags"]}`); got != "[_id _routing _source] [FetchFieldsPhase StoredFieldsPhase]" {
		t.Errorf("fields: %s", got)
	}
	if got := phases(`{"profile":true}`); got != "[_id _routing _source] [FetchSourcePhase StoredFieldsPhase]" {
		t.Errorf("source: %s", got)
	}
	if got := phases(`{"profile":true,"stored_fields":"_none_"}`); got != "[] []" {
		t.Errorf("stored_fields _none_: %s", got)
	}
}

func TestQueryErrorBeforeWindowLimitAndClosedIndex(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("w", e.es.Indices.Create.WithBody(strings.NewReader(`{"settings":{"index.max_result_window":2}}`))))
	// size defaults to 10, over the window, but the ids query's own limit is reported.
	st, m := e.raw(e.es.Search(e.es.Search.WithIndex("w"), e.es.Search.WithBody(strings.NewReader(`{"query":{"ids":{"values":[1,2,3]}}}`))))
	if st != 400 || m["error"].(map[string]any)["type"] != "query_shard_exception" {
		t.Errorf("ids over the window: %d %v", st, m)
	}
	st, m = e.raw(e.es.Search(e.es.Search.WithIndex("w"), e.es.Search.WithBody(strings.NewReader(`{"size":1,"sort":["_shard_doc"]}`))))
	if st != 400 || !strings.Contains(fmt.Sprint(m["error"]), "point in time") {
		t.Errorf("_shard_doc sort without a point in time: %d %v", st, m)
	}
	// A closed index fails a search, unless ignore_unavailable leaves it out.
	e.ok(e.es.Indices.Close([]string{"w"}))
	if st, _ := e.raw(e.es.Search(e.es.Search.WithIndex("w"))); st != 400 {
		t.Errorf("closed index: status %d, want 400", st)
	}
	if st, _ := e.raw(e.es.Search(e.es.Search.WithIndex("w"), e.es.Search.WithIgnoreUnavailable(true))); st != 200 {
		t.Errorf("closed index with ignore_unavailable: status %d, want 200", st)
	}
}
