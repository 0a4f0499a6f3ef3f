package eslite_test

import (
	"strings"
	"testing"
)

// TestFilteredAliases: a search or count through an alias with a filter sees only the
// documents the filter matches, whichever way the alias was added; the index's own
// name, and an alias without a filter, still see everything.
func TestFilteredAliases(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	e.ok(e.es.Index("news-2", strings.NewReader(`{"title":"Go elsewhere","author":"alice","points":3}`), e.es.Index.WithDocumentID("x1"), e.es.Index.WithRefresh("true")))
	// PUT /{index}/_alias/{name} with a filter body, and POST /_aliases with a filter.
	e.ok(e.es.Indices.PutAlias([]string{"news"}, "by-alice", e.es.Indices.PutAlias.WithBody(strings.NewReader(`{"filter":{"term":{"author":"alice"}}}`))))
	e.ok(e.es.Indices.UpdateAliases(strings.NewReader(`{"actions":[
		{"add":{"index":"news-2","alias":"by-alice","filter":{"term":{"author":"alice"}}}},
		{"add":{"index":"news","alias":"by-bob","filter":{"term":{"author":"bob"}}}},
		{"add":{"index":"news","alias":"everything"}}]}`)))

	counts := map[string]float64{"by-alice": 3, "by-bob": 2, "by-alice,by-bob": 5, "by-*": 5, "everything": 6, "news": 6, "news,by-alice": 7, "by-alice,news": 7, "everything,by-bob": 6}
	for index, want := range counts {
		st, m := e.raw(e.es.Count(e.es.Count.WithIndex(index)))
		if st != 200 || m["count"] != want {
			t.Errorf("count %s: %d %v, want %v", index, st, m["count"], want)
		}
		if got := total(e.search(index, `{"query":{"match_all":{}}}`)); got != want {
			t.Errorf("search %s: %v hits, want %v", index, got, want)
		}
	}
	// The query's own clauses narrow further inside the alias, never widen it.
	m := e.search("by-alice", `{"size":10,"query":{"match":{"title":"go"}},"sort":[{"points":"desc"}]}`)
	if got := strings.Join(hitIDs(m), ","); got != "3,1,x1" {
		t.Errorf("by-alice go: %s", got)
	}
	m = e.search("by-bob", `{"size":10,"query":{"term":{"author":"alice"}}}`)
	if got := total(m); got != 0.0 {
		t.Errorf("by-bob asking for alice: %v hits", got)
	}
	// Aggregations count only what the alias shows.
	m = e.search("by-bob", `{"size":0,"aggs":{"a":{"terms":{"field":"author"}}}}`)
	buckets := m["aggregations"].(map[string]any)["a"].(map[string]any)["buckets"].([]any)
	if len(buckets) != 1 || buckets[0].(map[string]any)["key"] != "bob" || buckets[0].(map[string]any)["doc_count"] != 2.0 {
		t.Errorf("by-bob aggs: %v", buckets)
	}
	// GET /_alias shows the filter as stored.
	m = e.ok(e.es.Indices.GetAlias(e.es.Indices.GetAlias.WithName("by-alice")))
	f := m["news-2"].(map[string]any)["aliases"].(map[string]any)["by-alice"].(map[string]any)["filter"]
	if got := f.(map[string]any)["term"].(map[string]any)["author"]; got != "alice" {
		t.Errorf("get alias filter: %v", m)
	}
}
