package eslite_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
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

// bm25Doc is one document of a relevance corpus: its values per text field.
type bm25Doc struct {
	id     string
	fields map[string][]string
}

// bm25Clause is one scored part of a query: any of the terms in a field, times boost.
type bm25Clause struct {
	field string
	terms []string
	boost float64
}

// tokens splits text as the standard analyzer does for this corpus: runs of letters and
// digits, lowercased.
func tokens(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// luceneLength is the field length Lucene's BM25 reads back. Lucene keeps a document's
// length in one byte (SmallFloat.intToByte4): lengths below 24 exactly, and above, 24
// plus the excess with only its four leading bits kept (so 100 reads back as 96).
func luceneLength(n int) float64 {
	if n < 24 {
		return float64(n)
	}
	x := uint(n - 24)
	if l := bits.Len(x); l > 4 {
		x &^= 1<<(l-4) - 1
	}
	return float64(24 + x)
}

// expectedScores computes Elasticsearch's score of a disjunction of clauses from the
// formula alone: per field and term boost·(k1+1)·idf·tf/(tf + k1·(1−b+b·dl/avgdl)), with
// idf = ln(1 + (N − n + 0.5)/(n + 0.5)), N the documents that have the field, n those
// with the term, avgdl the field's exact mean length and dl the document's length as
// Lucene encodes it; summed over the clauses' terms a document has.
func expectedScores(docs []bm25Doc, clauses []bm25Clause) map[string]float64 {
	const k1, b = 1.2, 0.75
	toks := map[string]map[string][]string{} // field → id → tokens
	for _, d := range docs {
		for f, vals := range d.fields {
			var all []string
			for _, v := range vals {
				all = append(all, tokens(v)...)
			}
			if len(all) == 0 {
				continue
			}
			if toks[f] == nil {
				toks[f] = map[string][]string{}
			}
			toks[f][d.id] = all
		}
	}
	out := map[string]float64{}
	for _, c := range clauses {
		byID := toks[c.field]
		n, sum := float64(len(byID)), 0
		for _, t := range byID {
			sum += len(t)
		}
		avgdl := float64(sum) / n
		for _, term := range c.terms {
			df := 0
			for _, t := range byID {
				for _, x := range t {
					if x == term {
						df++
						break
					}
				}
			}
			idf := math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))
			for id, t := range byID {
				tf := 0
				for _, x := range t {
					if x == term {
						tf++
					}
				}
				if tf == 0 {
					continue
				}
				dl := luceneLength(len(t))
				out[id] += c.boost * idf * float64(tf) * (k1 + 1) / (float64(tf) + k1*(1-b+b*dl/avgdl))
			}
		}
	}
	return out
}

// expectedBM25 scores a disjunction of terms over bm25Corpus's body field.
func expectedBM25(terms []string) map[string]float64 {
	var docs []bm25Doc
	for id, text := range bm25Corpus {
		docs = append(docs, bm25Doc{id: id, fields: map[string][]string{"body": {text}}})
	}
	return expectedScores(docs, []bm25Clause{{field: "body", terms: terms, boost: 1}})
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

// TestBM25DemoCorpus checks eslite's top 10 against the formula on the demo site's
// stories, each indexed with its title, text and comments (a multi-valued field of up to
// 44 comments, so field lengths run into the hundreds and Lucene's length encoding
// matters), for 20 queries: the same documents in the same order (documents the formula
// scores equally may come in either order) and every score within 10%.
func TestBM25DemoCorpus(t *testing.T) {
	e := start(t, t.TempDir())
	defer func() { _ = e.stop() }()
	e.ok(e.es.Indices.Create("demo", e.es.Indices.Create.WithBody(strings.NewReader(
		`{"mappings":{"properties":{"title":{"type":"text"},"text":{"type":"text"},"comments":{"type":"text"},"author":{"type":"keyword"}}}}`))))
	site := demosite.Options{}
	var docs []bm25Doc
	var bulk strings.Builder
	for id := 1; id <= site.Stories(); id++ {
		st, _ := site.Story(id)
		d := bm25Doc{id: strconv.Itoa(id), fields: map[string][]string{"title": {st.Title}}}
		src := map[string]any{"title": st.Title, "author": st.Author}
		if st.Text != "" {
			d.fields["text"] = []string{st.Text}
			src["text"] = st.Text
		}
		var comments []string
		for _, c := range site.Comments(id) {
			comments = append(comments, c.Text)
		}
		if len(comments) > 0 {
			d.fields["comments"] = comments
			src["comments"] = comments
		}
		docs = append(docs, d)
		line, _ := json.Marshal(src)
		fmt.Fprintf(&bulk, `{"index":{"_id":"%d"}}`+"\n%s\n", id, line)
	}
	if m := e.ok(e.es.Bulk(strings.NewReader(bulk.String()), e.es.Bulk.WithIndex("demo"), e.es.Bulk.WithRefresh("true"))); m["errors"] != false {
		t.Fatalf("bulk: %v", m)
	}
	match := func(field, text string) []bm25Clause {
		return []bm25Clause{{field: field, terms: tokens(text), boost: 1}}
	}
	cases := []struct {
		query   string
		clauses []bm25Clause
	}{
		{`{"match":{"comments":"compiler"}}`, match("comments", "compiler")},
		{`{"match":{"comments":"garbage collector"}}`, match("comments", "garbage collector")},
		{`{"match":{"comments":"elegant parser"}}`, match("comments", "elegant parser")},
		{`{"match":{"comments":"brittle lighthouse"}}`, match("comments", "brittle lighthouse")},
		{`{"match":{"comments":"story 42"}}`, match("comments", "story 42")},
		{`{"match":{"comments":"comment 7"}}`, match("comments", "comment 7")},
		{`{"match":{"comments":"honest typewriter problem"}}`, match("comments", "honest typewriter problem")},
		{`{"match":{"comments":"forgotten kernel"}}`, match("comments", "forgotten kernel")},
		{`{"term":{"comments":"telescope"}}`, match("comments", "telescope")},
		{`{"match":{"title":"bicycle"}}`, match("title", "bicycle")},
		{`{"match":{"title":"show hn portable cache"}}`, match("title", "show hn portable cache")},
		{`{"match":{"title":"ask spreadsheet"}}`, match("title", "ask spreadsheet")},
		{`{"match":{"title":"quiet scheduler of the database"}}`, match("title", "quiet scheduler of the database")},
		{`{"match":{"text":"weekend feedback"}}`, match("text", "weekend feedback")},
		{`{"match":{"text":"arguing protocol"}}`, match("text", "arguing protocol")},
		{`{"query_string":{"query":"tiny OR cache","default_field":"comments"}}`, match("comments", "tiny cache")},
		{`{"multi_match":{"query":"kernel","type":"most_fields","fields":["title","comments"]}}`,
			append(match("title", "kernel"), match("comments", "kernel")...)},
		{`{"bool":{"should":[{"match":{"title":{"query":"compiler","boost":2}}},{"match":{"comments":"compiler"}}]}}`,
			[]bm25Clause{{field: "title", terms: []string{"compiler"}, boost: 2}, {field: "comments", terms: []string{"compiler"}, boost: 1}}},
		{`{"bool":{"must":[{"match":{"comments":"slow"}}],"should":[{"match":{"title":"slow"}}]}}`,
			append(match("comments", "slow"), match("title", "slow")...)},
		{`{"multi_match":{"query":"practical spreadsheet","type":"most_fields","fields":["title^3","text","comments"]}}`,
			[]bm25Clause{{field: "title", terms: []string{"practical", "spreadsheet"}, boost: 3}, {field: "text", terms: []string{"practical", "spreadsheet"}, boost: 1}, {field: "comments", terms: []string{"practical", "spreadsheet"}, boost: 1}}},
	}
	worst := 0.0
	for _, c := range cases {
		want := expectedScores(docs, c.clauses)
		if c.query == `{"bool":{"must":[{"match":{"comments":"slow"}}],"should":[{"match":{"title":"slow"}}]}}` {
			// must: only documents whose comments match count.
			only := expectedScores(docs, c.clauses[:1])
			for id := range want {
				if _, ok := only[id]; !ok {
					delete(want, id)
				}
			}
		}
		ids := make([]string, 0, len(want))
		for id := range want {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return want[ids[i]] > want[ids[j]] })
		if len(ids) < 10 {
			t.Fatalf("%s: only %d matching documents in the corpus", c.query, len(ids))
		}
		res := e.search("demo", `{"size":10,"query":`+c.query+`}`)
		hits := res["hits"].(map[string]any)["hits"].([]any)
		if len(hits) != 10 {
			t.Errorf("%s: %d hits", c.query, len(hits))
			continue
		}
		for i, h := range hits {
			hm := h.(map[string]any)
			id, got := hm["_id"].(string), hm["_score"].(float64)
			w, ok := want[id]
			// Same order: the document at rank i scores, by the formula, what the
			// formula's rank i scores (ties may come in either order).
			if !ok || math.Abs(w-want[ids[i]]) > 1e-9*w {
				t.Errorf("%s: rank %d is %s (formula %.4f), want %s (%.4f)", c.query, i+1, id, w, ids[i], want[ids[i]])
				continue
			}
			dev := math.Abs(got-w) / w
			worst = math.Max(worst, dev)
			if dev > 0.1 {
				t.Errorf("%s: %s scores %.4f, the formula %.4f", c.query, id, got, w)
			}
		}
	}
	t.Logf("20 queries, top 10 each: largest score deviation from the formula %.2e", worst)
}
