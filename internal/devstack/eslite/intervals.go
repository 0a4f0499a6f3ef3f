package eslite

import (
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// The intervals query, evaluated over the positions of the analysed tokens of each
// document's field, as Lucene's interval sources define them: a term's intervals are its
// positions; match and all_of combine their parts into the minimal intervals that hold
// one interval of each part (in order when ordered), with at most max_gaps positions
// between them; any_of is the union of its parts; filters keep the intervals that
// contain, are contained by, overlap, come before or after those of another rule.

// positionIncrementGap separates the values of a multi-valued field, as in Lucene.
const positionIncrementGap = 100

type interval struct{ start, end int }

type ivRule struct {
	kind     string // term-set (match of one term, prefix, ...), match, all_of, any_of
	terms    []*ivRule
	pred     func(tok string) bool
	ordered  bool
	maxGaps  int
	filter   string
	filterOn *ivRule
	// span_first keeps the intervals that end before position end (0: no bound);
	// span_not widens its exclusion by pre positions before and post after.
	end, pre, post int
}

type posTok struct {
	tok string
	pos int
}

func (c *qctx) intervalsQ(body any) (query.Query, error) {
	m, ok := body.(map[string]any)
	if !ok || len(m) != 1 {
		return nil, parsingErr("[intervals] query malformed, expected one field")
	}
	var field string
	var spec any
	for f, s := range m {
		field, spec = f, s
	}
	sm, ok := spec.(map[string]any)
	if !ok {
		return nil, parsingErr("[intervals] query malformed, no start_object after field name")
	}
	boost := sm["boost"]
	rule, err := parseIntervalRule(withoutKeys(sm, "boost", "_name"))
	if err != nil {
		return nil, err
	}
	return c.positionsQuery(field, rule, boost)
}

// positionsQuery matches the documents in which rule finds intervals among the token
// positions of a text field, each scored by its intervals' sloppy frequency.
func (c *qctx) positionsQuery(field string, rule *ivRule, boost any) (query.Query, error) {
	fi, ok := c.fields[field]
	if !ok || fi.Type != "text" || c.t == nil {
		return bleve.NewMatchNoneQuery(), nil
	}
	docs, err := matchDocs(c.t, bleve.NewMatchAllQuery(), false)
	if err != nil {
		return nil, err
	}
	dq := bleve.NewDisjunctionQuery()
	for _, d := range docs {
		var toks []posTok
		base := 0
		for _, v := range sourceValues(d.src, fi.Src) {
			if _, isObj := v.(map[string]any); isObj {
				continue
			}
			ts := analyze(scalarString(v))
			for i, t := range ts {
				toks = append(toks, posTok{t, base + i})
			}
			base += len(ts) + positionIncrementGap
		}
		ivs := rule.eval(toks)
		if len(ivs) == 0 {
			continue
		}
		// Lucene scores intervals by their sloppy frequency: shorter ones score higher.
		score := 0.0
		for _, iv := range ivs {
			score += 1 / float64(1+iv.end-iv.start)
		}
		q := bleve.NewDocIDQuery([]string{d.id})
		q.SetBoost(score)
		dq.AddQuery(q)
	}
	if len(dq.Disjuncts) == 0 {
		return bleve.NewMatchNoneQuery(), nil
	}
	return boosted(dq, boost), nil
}

func withoutKeys(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

func parseIntervalRule(spec map[string]any) (*ivRule, error) {
	if len(spec) != 1 {
		return nil, parsingErr("[intervals] rule malformed: expected one of match, all_of, any_of, prefix, wildcard, fuzzy, regexp or range")
	}
	var kind string
	var body map[string]any
	for k, v := range spec {
		kind = k
		body, _ = v.(map[string]any)
	}
	if body == nil {
		return nil, parsingErr("[intervals] rule [%s] malformed: expected an object", kind)
	}
	r := &ivRule{kind: kind, maxGaps: -1}
	if g, ok := toFloat(body["max_gaps"]); ok {
		r.maxGaps = int(g)
	}
	r.ordered = boolOpt(body["ordered"])
	switch kind {
	case "match":
		q, ok := body["query"].(string)
		if !ok {
			return nil, parsingErr("[match] interval rule requires a [query]")
		}
		for _, t := range analyzeWith(body["analyzer"], q) {
			t := t
			r.terms = append(r.terms, &ivRule{kind: "terms", pred: func(s string) bool { return s == t }})
		}
	case "all_of", "any_of":
		list, ok := body["intervals"].([]any)
		if !ok || len(list) == 0 {
			return nil, parsingErr("[%s] interval rule requires [intervals]", kind)
		}
		for _, x := range list {
			xm, _ := x.(map[string]any)
			sub, err := parseIntervalRule(xm)
			if err != nil {
				return nil, err
			}
			r.terms = append(r.terms, sub)
		}
	case "prefix":
		p := strings.ToLower(scalarString(body["prefix"]))
		r.kind, r.pred = "terms", func(s string) bool { return strings.HasPrefix(s, p) }
	case "wildcard":
		re, err := regexp.Compile("^" + wildcardRegexp(strings.ToLower(scalarString(body["pattern"]))) + "$")
		if err != nil {
			return nil, parsingErr("[wildcard] interval rule: bad pattern")
		}
		r.kind, r.pred = "terms", re.MatchString
	case "regexp":
		re, err := regexp.Compile("^(?:" + scalarString(body["pattern"]) + ")$")
		if err != nil {
			return nil, parsingErr("[regexp] interval rule: bad pattern")
		}
		r.kind, r.pred = "terms", re.MatchString
	case "fuzzy":
		term := strings.ToLower(scalarString(body["term"]))
		fz := body["fuzziness"]
		if fz == nil {
			fz = "AUTO"
		}
		maxD := fuzzDistance(fz, term)
		pl := 0
		if p, ok := toFloat(body["prefix_length"]); ok {
			pl = int(p)
		}
		r.kind, r.pred = "terms", func(s string) bool {
			if pl > 0 && (len(s) < pl || len(term) < pl || s[:pl] != term[:pl]) {
				return false
			}
			return editDistance(s, term) <= maxD
		}
	case "range":
		lo, hasLo := body["gte"], true
		loInc := true
		if lo == nil {
			lo, loInc = body["gt"], false
			hasLo = lo != nil
		}
		hi, hasHi := body["lte"], true
		hiInc := true
		if hi == nil {
			hi, hiInc = body["lt"], false
			hasHi = hi != nil
		}
		l, h := scalarString(lo), scalarString(hi)
		r.kind, r.pred = "terms", func(s string) bool {
			if hasLo && (s < l || (!loInc && s == l)) {
				return false
			}
			if hasHi && (s > h || (!hiInc && s == h)) {
				return false
			}
			return true
		}
	default:
		return nil, parsingErr("unknown interval type [%s]", kind)
	}
	if f, ok := body["filter"].(map[string]any); ok {
		for k, v := range f {
			switch k {
			case "containing", "not_containing", "contained_by", "not_contained_by", "overlapping", "not_overlapping", "before", "after":
			default:
				return nil, parsingErr("Unknown filter type [%s]", k)
			}
			vm, _ := v.(map[string]any)
			sub, err := parseIntervalRule(vm)
			if err != nil {
				return nil, err
			}
			r.filter, r.filterOn = k, sub
		}
	}
	return r, nil
}

func wildcardRegexp(p string) string {
	var b strings.Builder
	for _, ch := range p {
		switch ch {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(ch)))
		}
	}
	return b.String()
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func (r *ivRule) eval(toks []posTok) []interval {
	var out []interval
	switch r.kind {
	case "terms":
		for _, t := range toks {
			if r.pred(t.tok) {
				out = append(out, interval{t.pos, t.pos})
			}
		}
	case "any_of":
		seen := map[interval]bool{}
		for _, sub := range r.terms {
			for _, iv := range sub.eval(toks) {
				if !seen[iv] {
					seen[iv] = true
					out = append(out, iv)
				}
			}
		}
	default: // match, all_of
		if len(r.terms) == 0 {
			return nil
		}
		sources := make([][]interval, len(r.terms))
		for i, sub := range r.terms {
			sources[i] = sub.eval(toks)
			if len(sources[i]) == 0 {
				return nil
			}
		}
		if len(sources) == 1 {
			out = sources[0]
		} else {
			out = combineIntervals(sources, r.ordered, r.maxGaps)
		}
	}
	if r.filterOn != nil {
		ref := r.filterOn.eval(toks)
		if r.pre > 0 || r.post > 0 {
			for i := range ref {
				// Widening the exclusions is widening what they overlap.
				ref[i] = interval{ref[i].start - r.post, ref[i].end + r.pre}
			}
		}
		out = filterIntervals(out, r.filter, ref)
	}
	if r.end > 0 {
		kept := out[:0]
		for _, iv := range out {
			if iv.end < r.end {
				kept = append(kept, iv)
			}
		}
		out = kept
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].start != out[j].start {
			return out[i].start < out[j].start
		}
		return out[i].end < out[j].end
	})
	return out
}

// combineIntervals returns the minimal intervals holding one interval of each source,
// in source order when ordered, with at most maxGaps uncovered positions (any number
// when maxGaps < 0).
func combineIntervals(sources [][]interval, ordered bool, maxGaps int) []interval {
	gaps := map[interval]int{}
	var walk func(i int, picked []interval)
	walk = func(i int, picked []interval) {
		if i == len(sources) {
			span := interval{math.MaxInt, -1}
			covered := 0
			for _, p := range picked {
				span.start, span.end = min(span.start, p.start), max(span.end, p.end)
				covered += p.end - p.start + 1
			}
			g := span.end - span.start + 1 - covered
			if old, ok := gaps[span]; !ok || g < old {
				gaps[span] = g
			}
			return
		}
		for _, iv := range sources[i] {
			if ordered && i > 0 && iv.start <= picked[i-1].end {
				continue
			}
			if !ordered && overlapsAny(iv, picked) {
				continue
			}
			walk(i+1, append(picked, iv))
		}
	}
	walk(0, nil)
	var out []interval
	for span, g := range gaps {
		minimal := true
		for other := range gaps {
			if other != span && other.start >= span.start && other.end <= span.end {
				minimal = false
				break
			}
		}
		if minimal && (maxGaps < 0 || g <= maxGaps) {
			out = append(out, span)
		}
	}
	return out
}

func overlapsAny(iv interval, picked []interval) bool {
	for _, p := range picked {
		if iv.start <= p.end && p.start <= iv.end {
			return true
		}
	}
	return false
}

func filterIntervals(ivs []interval, kind string, ref []interval) []interval {
	var out []interval
	for _, a := range ivs {
		hit := false
		for _, b := range ref {
			switch kind {
			case "containing", "not_containing":
				hit = a.start <= b.start && b.end <= a.end
			case "contained_by", "not_contained_by":
				hit = b.start <= a.start && a.end <= b.end
			case "overlapping", "not_overlapping":
				hit = a.start <= b.end && b.start <= a.end
			case "before":
				hit = a.end < b.start
			case "after":
				hit = a.start > b.end
			}
			if hit {
				break
			}
		}
		if hit != strings.HasPrefix(kind, "not_") {
			out = append(out, a)
		}
	}
	return out
}
