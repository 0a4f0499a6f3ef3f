package eslite

import (
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// spanKinds are the span queries, answered as interval rules over token positions:
// span_term a term, span_multi a prefix, wildcard, regexp or fuzzy term, span_near an
// all_of with slop as max_gaps, span_or an any_of, span_first a rule ending before
// `end`, span_not, span_containing and span_within filters, span_field_masking its
// query under another field's name.
var spanKinds = map[string]bool{"span_term": true, "span_multi": true, "span_near": true, "span_or": true, "span_first": true,
	"span_not": true, "span_containing": true, "span_within": true, "span_field_masking": true}

func (c *qctx) spanQ(kind string, body any) (query.Query, error) {
	field, rule, err := parseSpan(kind, body)
	if err != nil {
		return nil, err
	}
	o, _ := body.(map[string]any)
	return c.positionsQuery(field, rule, o["boost"])
}

// parseSpan reads a span query into the field it runs on and its interval rule.
func parseSpan(kind string, body any) (string, *ivRule, error) {
	o, ok := body.(map[string]any)
	if !ok {
		return "", nil, parsingErr("[%s] malformed query, expected an object", kind)
	}
	inner := func(k string) (string, *ivRule, error) {
		m, ok := o[k].(map[string]any)
		if !ok || len(m) != 1 {
			return "", nil, parsingErr("[%s] requires [%s] to be a span query", kind, k)
		}
		for sk, sb := range m {
			if !spanKinds[sk] {
				return "", nil, parsingErr("[%s] [%s] must be of type span query", kind, k)
			}
			return parseSpan(sk, sb)
		}
		return "", nil, nil
	}
	switch kind {
	case "span_term":
		f, v, _, err := fieldAndValue(kind, withoutKeys(o, "boost", "_name"), "value")
		if err != nil {
			return "", nil, err
		}
		t := scalarString(v)
		return f, &ivRule{kind: "terms", maxGaps: -1, pred: func(s string) bool { return s == t }}, nil
	case "span_multi":
		m, ok := o["match"].(map[string]any)
		if !ok || len(m) != 1 {
			return "", nil, parsingErr("spanMultiTerm must have [match] multi term query clause")
		}
		for mk, mb := range m {
			f, spec, _, err := fieldAndValue(mk, mb, "value")
			if err != nil {
				return "", nil, err
			}
			rule := map[string]any{}
			s := strings.ToLower(scalarString(spec))
			switch mk {
			case "prefix":
				rule["prefix"] = map[string]any{"prefix": s}
			case "wildcard":
				rule["wildcard"] = map[string]any{"pattern": s}
			case "regexp":
				rule["regexp"] = map[string]any{"pattern": scalarString(spec)}
			case "fuzzy":
				fm, _ := mb.(map[string]any)
				fo, _ := fm[f].(map[string]any)
				rule["fuzzy"] = map[string]any{"term": s, "fuzziness": orDefault(fo["fuzziness"], "AUTO")}
			default:
				return "", nil, parsingErr("[span_multi] does not support [%s] queries", mk)
			}
			r, err := parseIntervalRule(rule)
			return f, r, err
		}
	case "span_near", "span_or":
		clauses, ok := o["clauses"].([]any)
		if !ok || len(clauses) == 0 {
			return "", nil, parsingErr("%s must include [clauses]", kind)
		}
		r := &ivRule{kind: "any_of", maxGaps: -1}
		if kind == "span_near" {
			r.kind, r.ordered, r.maxGaps = "all_of", boolOpt(orDefault(o["in_order"], true)), 0
			if s, ok := toFloat(o["slop"]); ok {
				r.maxGaps = int(s)
			}
		}
		field := ""
		for _, x := range clauses {
			m, _ := x.(map[string]any)
			if len(m) != 1 {
				return "", nil, parsingErr("[%s] clauses must be span queries", kind)
			}
			for sk, sb := range m {
				if !spanKinds[sk] {
					return "", nil, parsingErr("span%s [clauses] must be of type span query", strings.TrimPrefix(kind, "span"))
				}
				f, sub, err := parseSpan(sk, sb)
				if err != nil {
					return "", nil, err
				}
				if field != "" && f != field {
					return "", nil, badRequest("illegal_argument_exception", "Clauses must have same field")
				}
				field = f
				r.terms = append(r.terms, sub)
			}
		}
		return field, r, nil
	case "span_first":
		f, r, err := inner("match")
		if err != nil {
			return "", nil, err
		}
		end, ok := toFloat(o["end"])
		if !ok {
			return "", nil, parsingErr("span_first must have [end] set for it")
		}
		return f, &ivRule{kind: "all_of", maxGaps: -1, terms: []*ivRule{r}, end: int(end)}, nil
	case "span_not", "span_containing", "span_within":
		keys := map[string][2]string{"span_not": {"include", "exclude"}, "span_containing": {"big", "little"}, "span_within": {"little", "big"}}[kind]
		f, r, err := inner(keys[0])
		if err != nil {
			return "", nil, err
		}
		f2, other, err := inner(keys[1])
		if err != nil {
			return "", nil, err
		}
		if f != f2 {
			return "", nil, badRequest("illegal_argument_exception", "Clauses must have same field")
		}
		out := &ivRule{kind: "all_of", maxGaps: -1, terms: []*ivRule{r}, filterOn: other}
		out.filter = map[string]string{"span_not": "not_overlapping", "span_containing": "containing", "span_within": "contained_by"}[kind]
		if kind == "span_not" {
			dist, _ := toFloat(o["dist"])
			pre, hasPre := toFloat(o["pre"])
			post, hasPost := toFloat(o["post"])
			if !hasPre {
				pre = dist
			}
			if !hasPost {
				post = dist
			}
			out.pre, out.post = int(pre), int(post)
		}
		return f, out, nil
	case "span_field_masking":
		_, r, err := inner("query")
		if err != nil {
			return "", nil, err
		}
		f, _ := o["field"].(string)
		if f == "" {
			return "", nil, parsingErr("span_field_masking must have [field] set for it")
		}
		return f, r, nil
	}
	return "", nil, parsingErr("unknown query [%s]", kind)
}

// sloppyPhrase answers match_phrase with a slop (the analysed terms in order, with at
// most slop positions between them) and match_phrase_prefix (the last term a prefix),
// over token positions.
func (c *qctx) sloppyPhrase(field, text string, slop int, prefix bool, opts map[string]any) (query.Query, error) {
	terms := analyzeWith(opts["analyzer"], text)
	if len(terms) == 0 {
		return bleve.NewMatchNoneQuery(), nil
	}
	rule := &ivRule{kind: "all_of", ordered: true, maxGaps: slop}
	for i, t := range terms {
		t := t
		pred := func(s string) bool { return s == t }
		if prefix && i == len(terms)-1 {
			pred = func(s string) bool { return strings.HasPrefix(s, t) }
			c.addHLPrefix(field, t)
		} else {
			c.addHL(field, t)
		}
		rule.terms = append(rule.terms, &ivRule{kind: "terms", maxGaps: -1, pred: pred})
	}
	return c.positionsQuery(field, rule, opts["boost"])
}
