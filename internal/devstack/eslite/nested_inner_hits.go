package eslite

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/mapping"
	bindex "github.com/blevesearch/bleve_index_api"
)

// nestedInner is a nested query of a search that asks for inner_hits: which objects
// under path matched the inner query, and how to show them.
type nestedInner struct {
	path       string
	query      any
	name       string
	from, size int
	src        *sourceFilter
}

// maxInnerResultWindow is index.max_inner_result_window's default.
const maxInnerResultWindow = 100

// findNestedInner lists the nested queries with inner_hits anywhere in a query.
func findNestedInner(q any) ([]nestedInner, error) {
	var out []nestedInner
	seen := map[string]bool{}
	var walk func(v any) error
	walk = func(v any) error {
		switch t := v.(type) {
		case map[string]any:
			if n, ok := t["nested"].(map[string]any); ok && n["inner_hits"] != nil {
				ih, _ := n["inner_hits"].(map[string]any)
				path, _ := n["path"].(string)
				in := nestedInner{path: path, query: n["query"], name: path, size: 3}
				if v, ok := ih["name"].(string); ok {
					in.name = v
				}
				if seen[in.name] {
					return badRequest("illegal_argument_exception", "[inner_hits] already contains an entry for key [%s]", in.name)
				}
				seen[in.name] = true
				var err error
				if in.from, err = intParam(ih["from"], "from", 0); err != nil {
					return err
				}
				if in.size, err = intParam(ih["size"], "size", 3); err != nil {
					return err
				}
				if in.from+in.size > maxInnerResultWindow {
					return badRequest("illegal_argument_exception", "Inner result window is too large, the inner hit definition's [%s]'s from + size must be less than or equal to: [%d] but was [%d]. This limit can be set by changing the [index.max_inner_result_window] index level setting.", in.name, maxInnerResultWindow, in.from+in.size)
				}
				if in.src, err = parseSourceFilter(ih["_source"]); err != nil {
					return err
				}
				out = append(out, in)
			}
			for _, x := range t {
				if err := walk(x); err != nil {
					return err
				}
			}
		case []any:
			for _, x := range t {
				if err := walk(x); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(q)
}

// nestedInnerHits adds, to each hit of the page, the nested objects its inner_hits
// queries matched. Elasticsearch indexes each nested object as a document of its own, so
// eslite does the same for the search: the objects under the path of every document of
// the hits' indexes go into an in-memory index with the same mappings, where the inner
// query is matched and scored by BM25 over the objects' statistics, as Elasticsearch
// scores nested documents.
func (s *server) nestedInnerHits(t *target, inners []nestedInner, page []*scoredDoc, hits []any, asInt bool) error {
	all, err := matchDocs(t, bleve.NewMatchAllQuery(), false)
	if err != nil {
		return err
	}
	for _, in := range inners {
		// matched[index][parent id] are the parent's matching objects, best first.
		matched := map[string]map[string][]*scoredDoc{}
		for _, ix := range t.ixs {
			m, err := s.matchObjects(ix, in, all)
			if err != nil {
				return err
			}
			matched[ix.name] = m
		}
		for i, d := range page {
			group := matched[d.ix.name][d.id]
			total := len(group)
			var maxScore any
			if total > 0 {
				maxScore = group[0].score
			}
			if in.from < len(group) {
				group = group[in.from:]
			} else {
				group = nil
			}
			if len(group) > in.size {
				group = group[:in.size]
			}
			out := []any{}
			for _, o := range group {
				nd := *d
				nd.src, nd.toks, nd.matched, nd.score = o.src, nil, nil, o.score
				nd.nested = o.nested
				src := in.src
				if src == nil {
					src = &sourceFilter{}
				}
				h, err := s.renderHit(&nd, hitOptions{scored: true, src: src, withSource: true, fields: t.fields})
				if err != nil {
					return err
				}
				out = append(out, h)
			}
			var tot any = totalObj(total, -1)
			if asInt {
				tot = total
			}
			hit := hits[i].(map[string]any)
			ih, _ := hit["inner_hits"].(map[string]any)
			if ih == nil {
				ih = map[string]any{}
				hit["inner_hits"] = ih
			}
			ih[in.name] = map[string]any{"hits": map[string]any{"total": tot, "max_score": maxScore, "hits": out}}
		}
	}
	return nil
}

// matchObjects indexes the objects under in.path of ix's documents in memory and returns
// those in.query matches, scored, per parent document id.
func (s *server) matchObjects(ix *esIndex, in nestedInner, docs []*scoredDoc) (map[string][]*scoredDoc, error) {
	im := mapping.NewIndexMapping()
	im.DefaultMapping = mapping.NewDocumentDisabledMapping()
	im.ScoringModel = bindex.BM25Scoring
	bi, err := bleve.NewMemOnly(im)
	if err != nil {
		return nil, err
	}
	defer bi.Close()
	bi.SetName(ix.name)
	meta := ix.snapshotMeta()
	meta.Mappings = deepCopy(meta.Mappings).(map[string]any)
	meta.Settings = nil // every object is visible: no refresh_interval
	objs := &esIndex{name: ix.name, bi: bi, meta: &meta, fields: flattenMappings(meta.Mappings)}
	segs := strings.Split(in.path, ".")
	batch := bi.NewBatch()
	type ref struct {
		parent string
		offset int
	}
	refs := map[string]ref{}
	seq := int64(0)
	for _, d := range docs {
		if d.ix != ix {
			continue
		}
		offset := 0
		for _, v := range sourceValues(d.src, in.path) {
			o, ok := v.(map[string]any)
			if !ok {
				continue
			}
			var wrapped any = o
			for i := len(segs) - 1; i >= 0; i-- {
				wrapped = map[string]any{segs[i]: wrapped}
			}
			raw, _ := json.Marshal(wrapped)
			id := strconv.FormatInt(seq, 10)
			doc, _, err := objs.buildDoc(id, raw, 1, seq, "", nil)
			if err != nil {
				return nil, err
			}
			if err := batch.IndexAdvanced(doc); err != nil {
				return nil, err
			}
			refs[id] = ref{d.id, offset}
			seq++
			offset++
		}
	}
	if err := bi.Batch(batch); err != nil {
		return nil, err
	}
	objs.gen.Add(1)
	t := &target{ixs: []*esIndex{objs}, fields: objs.fields, alias: bleve.NewIndexAlias(bi), server: s}
	c := &qctx{fields: objs.fields, now: time.Now(), t: t}
	q, err := c.translate(in.query)
	if err != nil {
		return nil, err
	}
	found, err := matchDocs(t, q, true)
	if err != nil {
		return nil, err
	}
	byScore(found)
	out := map[string][]*scoredDoc{}
	for _, f := range found {
		r := refs[f.id]
		f.nested = &nestedPos{field: in.path, offset: r.offset}
		out[r.parent] = append(out[r.parent], f)
	}
	return out, nil
}
