package eslite

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// significance is a significant_terms / significant_text heuristic: how much more a
// term occurs in the bucket's documents (the subset) than in the background (the
// superset).
type significance struct {
	name             string // jlh, mutual_information, chi_square, gnd, percentage
	includeNegatives bool
	supersetBG       bool // background_is_superset
}

var significantOptions = []string{"field", "size", "shard_size", "min_doc_count", "shard_min_doc_count", "include", "exclude",
	"background_filter", "execution_hint", "format", "value_type", "jlh", "mutual_information", "chi_square", "gnd",
	"percentage", "script_heuristic"}

var significantTextOptions = []string{"field", "size", "shard_size", "min_doc_count", "shard_min_doc_count", "include", "exclude",
	"background_filter", "filter_duplicate_text", "source_fields", "jlh", "mutual_information", "chi_square", "gnd",
	"percentage", "script_heuristic"}

// unknownField is Elasticsearch's refusal of an unknown option, with its suggestions:
// the known names at least half alike (Lucene's Levenshtein similarity).
func unknownField(kind, name string, known []string) error {
	type cand struct {
		sim  float64
		name string
	}
	var cs []cand
	for _, k := range known {
		n := max(len([]rune(k)), len([]rune(name)))
		if sim := 1 - float64(editDistance(k, name))/float64(n); sim > 0.5 {
			cs = append(cs, cand{sim, k})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].sim != cs[j].sim {
			return cs[i].sim > cs[j].sim
		}
		return cs[i].name < cs[j].name
	})
	msg := fmt.Sprintf("[%s] unknown field [%s]", kind, name)
	switch len(cs) {
	case 0:
	case 1:
		msg += " did you mean [" + cs[0].name + "]?"
	default:
		names := make([]string, len(cs))
		for i, c := range cs {
			names[i] = c.name
		}
		msg += " did you mean any of [" + strings.Join(names, ", ") + "]?"
	}
	return badRequest("x_content_parse_exception", "%s", msg)
}

func (a *aggDef) configureSignificant(fields map[string]fieldInfo) error {
	known := significantOptions
	if a.kind == "significant_text" {
		known = significantTextOptions
	}
	for k := range a.opts {
		if !contains(known, k) {
			return unknownField(a.kind, k, known)
		}
	}
	if err := a.fieldOption(fields); err != nil {
		return err
	}
	f := a.field
	if a.kind == "significant_terms" && a.fi.Type == "text" && !a.fi.Fielddata {
		return badRequest("illegal_argument_exception", "Text fields are not optimised for operations that require per-document field data like aggregations and sorting, so these operations are disabled by default. Please use a keyword field instead. Alternatively, set fielddata=true on [%s] in order to load field data by uninverting the inverted index.", f)
	}
	if a.kind == "significant_text" && a.fi.Type != "text" && a.fi.Type != "unmapped" {
		return badRequest("illegal_argument_exception", "Field [%s] of type [%s] is not supported for aggregation [significant_text]", f, a.fi.ESType)
	}
	var err error
	if a.size, err = intParam(a.opts["size"], "size", 10); err != nil {
		return err
	}
	if a.minDocCount, err = intParam(a.opts["min_doc_count"], "min_doc_count", 3); err != nil {
		return err
	}
	for _, k := range []string{"include", "exclude"} {
		if v, ok := a.opts[k]; ok {
			if err := a.addTermFilter(k, v); err != nil {
				return err
			}
		}
	}
	if bf, ok := a.opts["background_filter"]; ok {
		a.filters = []aggFilter{{query: bf}}
	}
	a.heuristic = significance{name: "jlh", supersetBG: true}
	n := 0
	for _, h := range []string{"jlh", "mutual_information", "chi_square", "gnd", "percentage", "script_heuristic"} {
		v, ok := a.opts[h]
		if !ok {
			continue
		}
		n++
		if h == "script_heuristic" {
			return parsingErr("[%s] aggregation [%s]: scripts are not supported by eslite", a.kind, a.name)
		}
		opts, _ := v.(map[string]any)
		a.heuristic = significance{name: h, supersetBG: true}
		for k, x := range opts {
			switch {
			case k == "background_is_superset" && h != "jlh" && h != "percentage":
				a.heuristic.supersetBG = boolOpt(x)
			case k == "include_negatives" && (h == "mutual_information" || h == "chi_square"):
				a.heuristic.includeNegatives = boolOpt(x)
			default:
				return unknownField(h, k, []string{"background_is_superset", "include_negatives"})
			}
		}
	}
	if n > 1 {
		return parsingErr("[%s] aggregation [%s] takes one significance heuristic", a.kind, a.name)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// score is the heuristic's significance of a term found in subsetFreq of subsetSize
// documents and in supersetFreq of supersetSize background documents, by
// Elasticsearch's formulas.
func (h significance) score(subsetFreq, subsetSize, supersetFreq, supersetSize float64) float64 {
	switch h.name {
	case "percentage":
		if supersetFreq == 0 {
			return 0
		}
		return subsetFreq / supersetFreq
	case "gnd":
		if !h.supersetBG {
			supersetFreq += subsetFreq
			supersetSize += subsetSize
		}
		fx, fy, fxy, n := supersetFreq, subsetSize, subsetFreq, supersetSize
		if fxy == 0 {
			return 0
		}
		if fx == fy && fx == fxy {
			return 1
		}
		s := (math.Max(math.Log(fx), math.Log(fy)) - math.Log(fxy)) / (math.Log(n) - math.Min(math.Log(fx), math.Log(fy)))
		return math.Exp(-s)
	case "mutual_information", "chi_square":
		var n11, n01, n10, n00, n1_, n0_, n_1, n_0, n float64
		if h.supersetBG {
			n11, n_1 = subsetFreq, subsetSize
			n10, n_0 = supersetFreq-subsetFreq, supersetSize-subsetSize
			n01, n00 = subsetSize-subsetFreq, n_0-n10
			n1_, n0_, n = supersetFreq, supersetSize-supersetFreq, supersetSize
		} else {
			n11, n_1, n10, n_0 = subsetFreq, subsetSize, supersetFreq, supersetSize
			n01, n00 = n_1-n11, n_0-n10
			n1_, n0_, n = n11+n10, n01+n00, n_1+n_0
		}
		negative := !h.includeNegatives && n11/n_1 < n10/n_0
		if h.name == "chi_square" {
			if negative {
				return math.Inf(-1)
			}
			return n * math.Pow(n11*n00-n01*n10, 2) / (n_1 * n1_ * n0_ * n_0)
		}
		term := func(nxy, nx_, n_y float64) float64 {
			num, den := math.Abs(n*nxy), math.Abs(nx_*n_y)
			factor := math.Abs(nxy / n)
			if num < 1e-7 && factor < 1e-7 {
				return 0
			}
			return factor * math.Log(num/den)
		}
		s := (term(n00, n0_, n_0) + term(n01, n0_, n_1) + term(n10, n1_, n_0) + term(n11, n1_, n_1)) / math.Ln2
		if math.IsNaN(s) || negative {
			return math.Inf(-1)
		}
		return s
	}
	// jlh
	if subsetSize == 0 || supersetSize == 0 {
		return 0
	}
	if supersetFreq == 0 {
		// A background that is not a superset may lack the term: Elasticsearch counts
		// it as seen once.
		supersetFreq = 1
	}
	sub, super := subsetFreq/subsetSize, supersetFreq/supersetSize
	if sub <= super {
		return 0
	}
	return (sub - super) * (sub / super)
}

// sigTerms are a document's distinct terms: the field's values, or for significant_text
// the tokens of its text (or of source_fields) analyzed as the field is.
func (a *aggDef) sigTerms(d map[string]any) []any {
	if a.kind != "significant_text" {
		return a.values(d)
	}
	srcs := []string{a.fi.Src}
	if sf, ok := a.opts["source_fields"].([]any); ok {
		srcs = nil
		for _, x := range sf {
			srcs = append(srcs, scalarString(x))
		}
	}
	if a.fi.Type == "unmapped" {
		return nil
	}
	var out []any
	for _, s := range srcs {
		for _, t := range fieldTokens(fieldInfo{Type: "text", Src: s}, d) {
			out = append(out, t)
		}
	}
	return out
}

// dropDuplicateText removes, document after document, each token that belongs to a run
// of six or more tokens already seen in an earlier document, as filter_duplicate_text
// drops repeated boilerplate.
func dropDuplicateText(docs [][]any) [][]any {
	const run = 6
	seen := map[string]bool{}
	out := make([][]any, len(docs))
	for i, toks := range docs {
		drop := make([]bool, len(toks))
		var windows []string
		for j := 0; j+run <= len(toks); j++ {
			w := fmt.Sprint(toks[j : j+run])
			windows = append(windows, w)
			if seen[w] {
				for k := j; k < j+run; k++ {
					drop[k] = true
				}
			}
		}
		for _, w := range windows {
			seen[w] = true
		}
		for j, t := range toks {
			if !drop[j] {
				out[i] = append(out[i], t)
			}
		}
	}
	return out
}

// significant scores the terms of the bucket's documents against the background: every
// document of the searched indexes, or those background_filter matches.
func (a *aggDef) significant(docs []map[string]any) (map[string]any, error) {
	background := a.allDocs
	if len(a.filters) == 1 && a.filters[0].matched != nil {
		kept := background[:0:0]
		for _, d := range background {
			if a.filters[0].matched[a.docKey(d)] {
				kept = append(kept, d)
			}
		}
		background = kept
	}
	termsOf := func(set []map[string]any) [][]any {
		out := make([][]any, len(set))
		for i, d := range set {
			out[i] = a.sigTerms(d)
		}
		if boolOpt(a.opts["filter_duplicate_text"]) {
			out = dropDuplicateText(out)
		}
		return out
	}
	freq := func(set []map[string]any) (map[string]int, map[string]any, map[string][]map[string]any) {
		counts, keys, members := map[string]int{}, map[string]any{}, map[string][]map[string]any{}
		for i, toks := range termsOf(set) {
			seen := map[string]bool{}
			for _, t := range toks {
				k := fmt.Sprint(t)
				if seen[k] || !a.keepTerm(t) {
					continue
				}
				seen[k] = true
				counts[k] += docCount(set[i : i+1])
				keys[k] = t
				members[k] = append(members[k], set[i])
			}
		}
		return counts, keys, members
	}
	sub, keys, members := freq(docs)
	super, _, _ := freq(background)
	subsetSize, supersetSize := float64(docCount(docs)), float64(docCount(background))
	type scored struct {
		g     *termGroup
		score float64
		bg    int
	}
	var list []scored
	for k, n := range sub {
		if n < a.minDocCount {
			continue
		}
		bg := super[k]
		s := a.heuristic.score(float64(n), subsetSize, float64(bg), supersetSize)
		if s <= 0 || math.IsInf(s, -1) || math.IsNaN(s) {
			continue
		}
		list = append(list, scored{g: &termGroup{key: keys[k], docs: members[k]}, score: s, bg: bg})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].score != list[j].score {
			return list[i].score > list[j].score
		}
		return compareValues(list[i].g.key, list[j].g.key) < 0
	})
	if len(list) > a.size {
		list = list[:a.size]
	}
	buckets := []any{}
	for _, s := range list {
		b, err := a.termBucket(s.g)
		if err != nil {
			return nil, err
		}
		b["score"] = s.score
		b["bg_count"] = s.bg
		buckets = append(buckets, b)
	}
	return map[string]any{"doc_count": int(subsetSize), "bg_count": int(supersetSize), "buckets": buckets}, nil
}
