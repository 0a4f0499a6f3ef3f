package eslite

import (
	"math"
	"strconv"
)

func (a *aggDef) configureRandomSampler() error {
	for k := range a.opts {
		if k != "probability" && k != "seed" && k != "shard_seed" {
			return parsingErr("[random_sampler] unknown field [%s]", k)
		}
	}
	p, ok := toFloat(a.opts["probability"])
	if !ok {
		return parsingErr("[random_sampler] aggregation [%s] requires [probability]", a.name)
	}
	if p <= 0 || p > 1 {
		return badRequest("illegal_argument_exception", "[probability] must be between 0 and 1, was [%v]", a.opts["probability"])
	}
	a.sigma = p
	return nil
}

// checkRandomSampler refuses what Elasticsearch refuses of a random_sampler: a parent,
// no sub-aggregations, or sub-aggregations it cannot scale back (cardinality).
func checkRandomSampler(a *aggDef, parent *aggDef) error {
	if a.kind != "random_sampler" {
		return nil
	}
	if parent != nil {
		return badRequest("illegal_argument_exception", "[random_sampler] aggregation [%s] cannot have a parent aggregation", a.name)
	}
	if len(a.subs) == 0 {
		return badRequest("illegal_argument_exception", "[random_sampler] aggregation [%s] must have sub-aggregations", a.name)
	}
	var walk func(defs []*aggDef) error
	walk = func(defs []*aggDef) error {
		for _, s := range defs {
			if s.kind == "cardinality" {
				return badRequest("illegal_argument_exception", "[random_sampler] aggregation [%s] does not support sampling [%s] aggregation [%s]", a.name, s.kind, s.name)
			}
			if err := walk(s.subs); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(a.subs)
}

// randomSampler keeps each document with the probability, by a hash of the document
// and the seed (so a seed repeats its sample), runs the sub-aggregations over the
// sample and scales counts and sums back up by 1/probability, as Elasticsearch does;
// means, minimums and maximums stay as the sample has them.
func (a *aggDef) randomSampler(docs []map[string]any) (map[string]any, error) {
	p := a.sigma
	seed, _ := strconv.ParseInt(scalarString(orDefault(a.opts["seed"], "0")), 10, 64)
	sample := docs
	if p < 1 {
		sample = nil
		for _, d := range docs {
			h := mix64(int64(murmur3x86_32([]byte(a.docKey(d)), 0)) ^ seed)
			if float64(uint64(h)>>11)/(1<<53) < p {
				sample = append(sample, d)
			}
		}
	}
	b, err := a.bucket(nil, sample, nil)
	if err != nil {
		return nil, err
	}
	delete(b, "key")
	if p < 1 {
		scaleSampled(a.subs, b, 1/p)
		b["doc_count"] = int(math.Round(float64(docCount(sample)) / p))
	}
	b["seed"], b["probability"] = seed, p
	return b, nil
}

// scaleSampled multiplies the counts and sums in sub-aggregation results by f.
func scaleSampled(defs []*aggDef, results map[string]any, f float64) {
	scale := func(m map[string]any, key string) {
		if v, ok := toFloat(m[key]); ok {
			if key == "doc_count" || key == "count" {
				m[key] = int(math.Round(v * f))
			} else {
				m[key] = v * f
			}
		}
	}
	for _, s := range defs {
		r, ok := results[s.name].(map[string]any)
		if !ok {
			continue
		}
		switch s.kind {
		case "sum", "value_count":
			scale(r, "value")
		case "stats", "extended_stats":
			scale(r, "count")
			scale(r, "sum")
		}
		if _, single := r["doc_count"]; single {
			scale(r, "doc_count")
			scaleSampled(s.subs, r, f)
		}
		switch bs := r["buckets"].(type) {
		case []any:
			for _, x := range bs {
				if bm, ok := x.(map[string]any); ok {
					scale(bm, "doc_count")
					scaleSampled(s.subs, bm, f)
				}
			}
		case map[string]any:
			for _, x := range bs {
				if bm, ok := x.(map[string]any); ok {
					scale(bm, "doc_count")
					scaleSampled(s.subs, bm, f)
				}
			}
		}
	}
}
