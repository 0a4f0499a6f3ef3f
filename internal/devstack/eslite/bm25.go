package eslite

import (
	"context"
	"math"
	"math/bits"
	"sort"
	"strconv"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/mapping"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"
)

// Relevance follows Elasticsearch's BM25 similarity (LegacyBM25Similarity, which keeps
// the (k1 + 1) factor Lucene 8 dropped): for a term t of field f
//
//	score = boost · (k1 + 1) · idf · tf / (tf + k1 · (1 − b + b · dl / avgdl))
//	idf   = ln(1 + (N − n + 0.5) / (n + 0.5))
//
// with k1 = 1.2, b = 0.75, N the documents that have f, n those that have t in f, dl the
// number of tokens of f in the document as Lucene's one-byte norm keeps it (see
// normLength) and avgdl the exact mean over the documents that have f
// — all per index, as Elasticsearch computes them per shard. bleve's own BM25 uses the
// square root of tf, multiplies by k1, and averages field lengths from the term count, so
// bleve only decides which documents match and eslite scores them itself: term and
// phrase leaves by the formula, compound queries by summing their matching clauses
// (dis_max by the best one plus tie_breaker times the others), and every other leaf
// (ranges, prefixes, exists, ids, …) by its boost, as Elasticsearch's constant-score
// queries do. A keyword field has no norms in Elasticsearch, so its dl is 1.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// fieldStats are one field's collection statistics in one index.
type fieldStats struct {
	docs   int            // documents with at least one token
	tokens int            // tokens over all documents
	df     map[string]int // documents per term
}

// indexStats are an index's statistics, rebuilt when the index has changed since.
type indexStats struct {
	gen    uint64
	fields map[string]*fieldStats
}

// bm25IDF is Lucene's BM25 idf.
func bm25IDF(docCount, docFreq int) float64 {
	return math.Log(1 + (float64(docCount)-float64(docFreq)+0.5)/(float64(docFreq)+0.5))
}

// normLength is the field length BM25 reads back from a document's norm. Lucene stores
// the length in one byte (SmallFloat.intToByte4) and decodes it with byte4ToInt, so
// lengths from 24 up lose precision (100 reads back as 96); avgdl stays exact.
func normLength(n int) float64 {
	return float64(byte4ToInt(intToByte4(n)))
}

// numFreeValues are the lengths intToByte4 keeps exactly: 255 minus the code of
// Integer.MAX_VALUE (231).
const numFreeValues = 24

// intToByte4 is Lucene's SmallFloat.intToByte4.
func intToByte4(i int) int {
	if i < numFreeValues {
		return i
	}
	return numFreeValues + longToInt4(int64(i-numFreeValues))
}

// byte4ToInt is Lucene's SmallFloat.byte4ToInt.
func byte4ToInt(b int) int {
	if b < numFreeValues {
		return b
	}
	return numFreeValues + int(int4ToLong(b-numFreeValues))
}

// longToInt4 is Lucene's SmallFloat.longToInt4: a float with a 3-bit mantissa.
func longToInt4(i int64) int {
	numBits := 64 - bits.LeadingZeros64(uint64(i))
	if numBits < 4 {
		return int(i) // subnormal
	}
	shift := numBits - 4
	encoded := int(i>>shift) & 0x07 // the leading bit is implicit
	return encoded | (shift+1)<<3
}

// int4ToLong is Lucene's SmallFloat.int4ToLong.
func int4ToLong(i int) int64 {
	b := int64(i & 0x07)
	shift := i>>3 - 1
	if shift == -1 {
		return b // subnormal
	}
	return (b | 0x08) << shift
}

// bm25TF is the term-frequency part, with Elasticsearch's (k1 + 1) numerator.
func bm25TF(tf, dl, avgdl float64) float64 {
	if avgdl <= 0 {
		avgdl = 1
	}
	return tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*dl/avgdl))
}

// fieldTokens returns the tokens a document holds in a text or keyword field, as indexed.
func fieldTokens(fi fieldInfo, src map[string]any) []string {
	var out []string
	for _, v := range sourceValues(src, fi.Src) {
		if _, isObj := v.(map[string]any); isObj {
			continue
		}
		s := scalarString(v)
		switch fi.Type {
		case "text":
			out = append(out, analyze(s)...)
		case "keyword":
			if fi.IgnoreAbove > 0 && len(s) > fi.IgnoreAbove {
				continue
			}
			out = append(out, s)
		}
	}
	return out
}

// stats returns the index's BM25 statistics, scanning its documents when they changed.
func (ix *esIndex) stats() (*indexStats, error) {
	ix.statsMu.Lock()
	defer ix.statsMu.Unlock()
	gen := ix.gen.Load()
	if ix.bm25 != nil && ix.bm25.gen == gen {
		return ix.bm25, nil
	}
	st := &indexStats{gen: gen, fields: map[string]*fieldStats{}}
	n, err := ix.bi.DocCount()
	if err != nil {
		return nil, err
	}
	fields := ix.fieldMap()
	if n > 0 {
		sr := bleve.NewSearchRequestOptions(bleve.NewMatchAllQuery(), int(n), 0, false)
		sr.Fields = []string{fSource}
		sr.Score = "none"
		res, err := ix.bi.Search(sr)
		if err != nil {
			return nil, err
		}
		for _, h := range res.Hits {
			src := decodeSource(h.Fields[fSource])
			for name, fi := range fields {
				if fi.Type != "text" && fi.Type != "keyword" {
					continue
				}
				toks := fieldTokens(fi, src)
				if len(toks) == 0 {
					continue
				}
				fs := st.fields[name]
				if fs == nil {
					fs = &fieldStats{df: map[string]int{}}
					st.fields[name] = fs
				}
				fs.docs++
				fs.tokens += len(toks)
				seen := map[string]bool{}
				for _, t := range toks {
					if !seen[t] {
						seen[t] = true
						fs.df[t]++
					}
				}
			}
		}
	}
	ix.bm25 = st
	return st, nil
}

// scoredDoc is one matching document with what scoring and sorting need.
type scoredDoc struct {
	ix    *esIndex
	id    string
	src   map[string]any
	seq   int64
	score float64
	toks  map[string][]string // field -> tokens, computed on demand
	// matched holds the named queries the document matches, with their scores.
	matched map[string]float64
	hit     *bsearch.DocumentMatch
	// nested places a nested object's hit (top_hits under a nested aggregation) in the
	// document it belongs to; its src is the object at its path.
	nested *nestedPos
}

// nestedPos is where a nested hit's object sits: its path and its offset among the
// objects at that path.
type nestedPos struct {
	field  string
	offset int
}

func (d *scoredDoc) tokens(field string, fi fieldInfo) []string {
	if d.toks == nil {
		d.toks = map[string][]string{}
	}
	t, ok := d.toks[field]
	if !ok {
		t = fieldTokens(fi, d.src)
		d.toks[field] = t
	}
	return t
}

// constScoreQuery matches what its inner query matches, scoring every document by its
// boost (constant_score, and the term-level queries inside it).
type constScoreQuery struct {
	inner query.Query
	boost float64
}

func (q *constScoreQuery) Searcher(ctx context.Context, i bindex.IndexReader, m mapping.IndexMapping, o bsearch.SearcherOptions) (bsearch.Searcher, error) {
	return q.inner.Searcher(ctx, i, m, o)
}

// disMaxQuery matches what any clause matches and scores by the best clause plus
// tie_breaker times the others (dis_max, multi_match best_fields).
type disMaxQuery struct {
	*query.DisjunctionQuery
	tie float64
}

func (q *disMaxQuery) Searcher(ctx context.Context, i bindex.IndexReader, m mapping.IndexMapping, o bsearch.SearcherOptions) (bsearch.Searcher, error) {
	return q.DisjunctionQuery.Searcher(ctx, i, m, o)
}

// namedQuery is a query with a _name: hits report which named queries they match.
type namedQuery struct {
	inner query.Query
	name  string
}

func (q *namedQuery) Searcher(ctx context.Context, i bindex.IndexReader, m mapping.IndexMapping, o bsearch.SearcherOptions) (bsearch.Searcher, error) {
	return q.inner.Searcher(ctx, i, m, o)
}

// namedQueries lists the named queries inside q.
func namedQueries(q query.Query) []*namedQuery {
	var out []*namedQuery
	var walk func(q query.Query)
	walk = func(q query.Query) {
		switch t := q.(type) {
		case *namedQuery:
			out = append(out, t)
			walk(t.inner)
		case *constScoreQuery:
			walk(t.inner)
		case *functionScoreQuery:
			walk(t.inner)
		case *scriptScoreQuery:
			walk(t.inner)
		case *boostingQuery:
			walk(t.positive)
		case *disMaxQuery:
			for _, c := range t.Disjuncts {
				walk(c)
			}
		case *query.ConjunctionQuery:
			for _, c := range t.Conjuncts {
				walk(c)
			}
		case *query.DisjunctionQuery:
			for _, c := range t.Disjuncts {
				walk(c)
			}
		case *query.BooleanQuery:
			for _, c := range []query.Query{t.Must, t.Should, t.MustNot, t.Filter} {
				if c != nil {
					walk(c)
				}
			}
		}
	}
	walk(q)
	return out
}

// scorer scores the documents one query matched in one index.
type scorer struct {
	ix     *esIndex
	st     *indexStats
	fields map[string]fieldInfo
	docs   []*scoredDoc
	// leaf match sets of constant-scoring leaves, by query pointer
	matched map[query.Query]map[string]bool
	// err is the first error a scoring function met (a field_value_factor without a
	// value, say); it fails the search.
	err error
}

func boostOf(q query.Query) float64 {
	if b, ok := q.(interface{ Boost() float64 }); ok {
		return b.Boost()
	}
	return 1
}

// score returns the document's score for q and whether q matches it.
func (s *scorer) score(q query.Query, d *scoredDoc) (float64, bool) {
	switch t := q.(type) {
	case nil:
		return 0, true
	case *query.MatchAllQuery:
		return t.Boost(), true
	case *query.MatchNoneQuery:
		return 0, false
	case *namedQuery:
		return s.score(t.inner, d)
	case *functionScoreQuery:
		qs, ok := s.score(t.inner, d)
		if !ok {
			return 0, false
		}
		return s.functionScore(t, d, qs), true
	case *boostingQuery:
		ps, ok := s.score(t.positive, d)
		if !ok {
			return 0, false
		}
		if _, neg := s.score(t.negative, d); neg {
			ps *= t.factor
		}
		return t.boost * ps, true
	case *scriptScoreQuery:
		qs, ok := s.score(t.inner, d)
		if !ok {
			return 0, false
		}
		r, err := t.script.run(s.fields, d, qs)
		f, isNum := toFloat(r)
		if err == nil && (!isNum || f < 0) {
			err = badRequest("illegal_argument_exception", "script_score script returned an invalid score [%v] for doc [%s]. Must be a non-negative score!", r, d.id)
		}
		if err != nil {
			if s.err == nil {
				s.err = err
			}
			return 0, true
		}
		return t.boost * f, true
	case *distanceFeatureQuery:
		dist, ok := t.dist(d)
		if !ok {
			return 0, false
		}
		return t.boost * t.pivot / (t.pivot + dist), true
	case *constScoreQuery:
		if _, ok := s.score(t.inner, d); !ok {
			return 0, false
		}
		return t.boost, true
	case *disMaxQuery:
		best, sum, any := 0.0, 0.0, false
		for _, c := range t.Disjuncts {
			if sc, ok := s.score(c, d); ok {
				any = true
				sum += sc
				best = math.Max(best, sc)
			}
		}
		if !any {
			return 0, false
		}
		return t.Boost() * (best + t.tie*(sum-best)), true
	case *query.ConjunctionQuery:
		sum := 0.0
		for _, c := range t.Conjuncts {
			sc, ok := s.score(c, d)
			if !ok {
				return 0, false
			}
			sum += sc
		}
		return t.Boost() * sum, true
	case *query.DisjunctionQuery:
		sum, n := 0.0, 0
		for _, c := range t.Disjuncts {
			if sc, ok := s.score(c, d); ok {
				sum += sc
				n++
			}
		}
		min := int(t.Min)
		if min < 1 {
			min = 1
		}
		if n < min {
			return 0, false
		}
		return t.Boost() * sum, true
	case *query.BooleanQuery:
		sum := 0.0
		if t.Must != nil {
			sc, ok := s.score(t.Must, d)
			if !ok {
				return 0, false
			}
			sum += sc
		}
		if t.Filter != nil {
			if _, ok := s.score(t.Filter, d); !ok {
				return 0, false
			}
		}
		if t.MustNot != nil {
			if dq, ok := t.MustNot.(*query.DisjunctionQuery); ok {
				for _, c := range dq.Disjuncts {
					if _, hit := s.score(c, d); hit {
						return 0, false
					}
				}
			}
		}
		if dq, ok := t.Should.(*query.DisjunctionQuery); ok {
			for _, c := range dq.Disjuncts {
				if sc, ok := s.score(c, d); ok {
					sum += sc
				}
			}
		}
		return t.Boost() * sum, true
	case *query.TermQuery:
		if fi, ok := s.fields[t.FieldVal]; ok && (fi.Type == "text" || fi.Type == "keyword") {
			return s.termScore(t.FieldVal, fi, []string{t.Term}, t.Boost(), d)
		}
	case *query.PhraseQuery:
		if fi, ok := s.fields[t.FieldVal]; ok && fi.Type == "text" {
			return s.termScore(t.FieldVal, fi, t.Terms, t.Boost(), d)
		}
	}
	if s.leafMatches(q)[d.id] {
		return boostOf(q), true
	}
	return 0, false
}

// termScore scores a term (one element) or a phrase (several) of a field by BM25.
func (s *scorer) termScore(field string, fi fieldInfo, terms []string, boost float64, d *scoredDoc) (float64, bool) {
	toks := d.tokens(field, fi)
	tf := 0
	for i := 0; i+len(terms) <= len(toks); i++ {
		ok := true
		for j, t := range terms {
			if toks[i+j] != t {
				ok = false
				break
			}
		}
		if ok {
			tf++
		}
	}
	if tf == 0 {
		return 0, false
	}
	fs := s.st.fields[field]
	if fs == nil || fs.docs == 0 {
		return 0, true
	}
	idf := 0.0
	for _, t := range terms {
		idf += bm25IDF(fs.docs, fs.df[t])
	}
	dl, avgdl := normLength(len(toks)), float64(fs.tokens)/float64(fs.docs)
	if fi.Type == "keyword" {
		dl, avgdl = 1, 1
	}
	return boost * idf * bm25TF(float64(tf), dl, avgdl), true
}

// leafMatches asks bleve which of the candidate documents a leaf query matches.
func (s *scorer) leafMatches(q query.Query) map[string]bool {
	if m, ok := s.matched[q]; ok {
		return m
	}
	ids := make([]string, len(s.docs))
	for i, d := range s.docs {
		ids[i] = d.id
	}
	m := map[string]bool{}
	if len(ids) > 0 {
		cq := bleve.NewConjunctionQuery(q, bleve.NewDocIDQuery(ids))
		sr := bleve.NewSearchRequestOptions(cq, len(ids), 0, false)
		sr.Score = "none"
		if res, err := s.ix.bi.Search(sr); err == nil {
			for _, h := range res.Hits {
				m[h.ID] = true
			}
		}
	}
	if s.matched == nil {
		s.matched = map[query.Query]map[string]bool{}
	}
	s.matched[q] = m
	return m
}

// scoreAll scores the documents of one index against q and stores the scores in them.
func scoreAll(ix *esIndex, q query.Query, fields map[string]fieldInfo, docs []*scoredDoc) error {
	if len(docs) == 0 {
		return nil
	}
	st, err := ix.stats()
	if err != nil {
		return err
	}
	s := &scorer{ix: ix, st: st, fields: fields, docs: docs}
	named := namedQueries(q)
	for _, d := range docs {
		sc, _ := s.score(q, d)
		d.score = sc
		for _, nq := range named {
			if nsc, ok := s.score(nq.inner, d); ok {
				if d.matched == nil {
					d.matched = map[string]float64{}
				}
				d.matched[nq.name] = nsc
			}
		}
	}
	return s.err
}

// byScore orders documents by score, ties by index and then by the order they were
// written in, as Lucene breaks ties by shard and document number.
func byScore(docs []*scoredDoc) {
	sort.SliceStable(docs, func(i, j int) bool {
		a, b := docs[i], docs[j]
		if a.score != b.score {
			return a.score > b.score
		}
		if a.ix.name != b.ix.name {
			return a.ix.name < b.ix.name
		}
		return a.seq < b.seq
	})
}

func parseSeq(v any) int64 {
	switch t := v.(type) {
	case string:
		n, _ := strconv.ParseInt(t, 10, 64)
		return n
	case float64:
		return int64(t)
	}
	return 0
}
