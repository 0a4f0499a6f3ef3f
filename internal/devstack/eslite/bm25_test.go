package eslite_test

import (
	"math"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// bm25Corpus is a small fixed corpus with varied lengths and term frequencies, so that
// idf, tf saturation and length normalisation all move the order.
var bm25Corpus = map[string]string{
	"a": "the quick brown fox jumps over the lazy dog",
	"b": "quick quick quick fox",
	"c": "a lazy afternoon with a brown dog and a brown cat sleeping in the sun by the river",
	"d": "fox",
	"e": "the dog barks at the fox and the fox runs into the brown woods",
	"f": "nothing to see here",
}

// expectedBM25 computes Elasticsearch's score of a disjunction of terms over the body
// field from the formula alone: per term (k1+1)·idf·tf/(tf + k1·(1−b+b·dl/avgdl)),
// idf = ln(1 + (N − n + 0.5)/(n + 0.5)), summed over the query terms a document has.
func expectedBM25(terms []string) map[string]float64 {
	const k1, b = 1.2, 0.75
	tokens := map[string][]string{}
	total := 0
	for id, text := range bm25Corpus {
		toks := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		tokens[id] = toks
		total += len(toks)
	}
	n := float64(len(bm25Corpus))
	avgdl := float64(total) / n
	out := map[string]float64{}
	for _, t := range terms {
		df := 0
		for _, toks := range tokens {
			for _, x := range toks {
				if x == t {
					df++
					break
				}
			}
		}
		idf := math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))
		for id, toks := range tokens {
			tf := 0
			for _, x := range toks {
				if x == t {
					tf++
				}
			}
			if tf == 0 {
				continue
			}
			dl := float64(len(toks))
			out[id] += idf * float64(tf) * (k1 + 1) / (float64(tf) + k1*(1-b+b*dl/avgdl))
		}
	}
	return out
}

func TestBM25MatchesElasticsearchFormula(t *testing.T) {
	e := start(t, t.TempDir())
	defer func() { _ = e.stop() }()
	e.ok(e.es.Indices.Create("bm25", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"body":{"type":"text"}}}}`))))
	for id, text := range bm25Corpus {
		e.ok(e.es.Index("bm25", strings.NewReader(`{"body":"`+text+`"}`), e.es.Index.WithDocumentID(id)))
	}
	cases := []struct {
		name  string
		body  string
		terms []string
	}{
		{"term", `{"query":{"term":{"body":"fox"}}}`, []string{"fox"}},
		{"match", `{"query":{"match":{"body":"brown fox"}}}`, []string{"brown", "fox"}},
		{"match rare and common", `{"query":{"match":{"body":"lazy the"}}}`, []string{"lazy", "the"}},
		{"query_string", `{"query":{"query_string":{"query":"quick OR dog","default_field":"body"}}}`, []string{"quick", "dog"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := expectedBM25(c.terms)
			var wantOrder []string
			for id := range want {
				wantOrder = append(wantOrder, id)
			}
			sort.Slice(wantOrder, func(i, j int) bool { return want[wantOrder[i]] > want[wantOrder[j]] })
			res := e.search("bm25", c.body)
			hits := res["hits"].(map[string]any)["hits"].([]any)
			if len(hits) != len(want) {
				t.Fatalf("%d hits, want %d", len(hits), len(want))
			}
			for i, h := range hits {
				hm := h.(map[string]any)
				id := hm["_id"].(string)
				got, _ := hm["_score"].(float64)
				if id != wantOrder[i] {
					t.Errorf("hit %d is %s (%.4f), want %s (%.4f)", i, id, got, wantOrder[i], want[wantOrder[i]])
				}
				if w := want[id]; math.Abs(got-w) > 0.1*w {
					t.Errorf("%s scores %.4f, want %.4f ±10%%", id, got, w)
				}
			}
		})
	}
}
