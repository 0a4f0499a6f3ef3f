package eslite

import (
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// simpleQueryString answers simple_query_string: words and "phrases" on the fields,
// + for AND, | for OR, - to negate, parentheses, a trailing * for prefixes; ~N
// (fuzziness, slop) is read and ignored. Like Lucene's SimpleQueryParser it never fails
// on syntax and combines left to right, each operand with the one before by the
// operator between them or by default_operator.
func (c *qctx) simpleQueryString(body any) (query.Query, error) {
	o, ok := body.(map[string]any)
	if !ok {
		return nil, parsingErr("[simple_query_string] query malformed")
	}
	text, ok := o["query"].(string)
	if !ok {
		return nil, parsingErr("[simple_query_string] requires query value")
	}
	var fields []string
	defOp := "or"
	for k, v := range o {
		switch k {
		case "query", "boost", "lenient", "analyze_wildcard", "_name", "analyzer", "auto_generate_synonyms_phrase_query",
			"flags", "fuzzy_max_expansions", "fuzzy_prefix_length", "fuzzy_transpositions", "quote_field_suffix", "minimum_should_match":
		case "fields":
			for _, x := range clauses(v) {
				fields = append(fields, scalarString(x))
			}
		case "default_operator":
			defOp = strings.ToLower(scalarString(v))
			if defOp != "or" && defOp != "and" {
				return nil, parsingErr("[simple_query_string] default operator [%v] is not allowed", v)
			}
		default:
			return nil, parsingErr("[simple_query_string] unsupported field [%s]", k)
		}
	}
	p := &qsParser{c: c, fields: fields, defOp: defOp, src: text, lenient: true}
	toks := sqsLex(text)
	q, _, err := p.sqsGroup(toks, 0, 0)
	if err != nil {
		return nil, err
	}
	if q == nil {
		return bleve.NewMatchNoneQuery(), nil
	}
	if msm, ok := o["minimum_should_match"]; ok {
		if dq, isOr := q.(*query.DisjunctionQuery); isOr {
			n, err := minimumShouldMatch(msm, len(dq.Disjuncts))
			if err != nil {
				return nil, err
			}
			dq.SetMin(float64(max(n, 1)))
		}
	}
	return boosted(q, o["boost"]), nil
}

// sqsLex splits simple_query_string text into words, phrases, parentheses and the
// operators + | -.
func sqsLex(s string) []qsTok {
	var toks []qsTok
	for i := 0; i < len(s); {
		switch ch := s[i]; {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			i++
		case ch == '(' || ch == ')':
			toks = append(toks, qsTok{map[byte]string{'(': "lparen", ')': "rparen"}[ch], string(ch)})
			i++
		case ch == '+' || ch == '|' || ch == '-':
			toks = append(toks, qsTok{map[byte]string{'+': "and", '|': "or", '-': "not"}[ch], string(ch)})
			i++
		case ch == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				// An unclosed quote is taken as plain text, as Lucene does.
				toks = append(toks, qsTok{"word", s[i+1:]})
				i = len(s)
				continue
			}
			toks = append(toks, qsTok{"phrase", s[i+1 : i+1+j]})
			i += j + 2
			i = skipSlop(s, i)
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n\r()\"|+", rune(s[j])) && !(s[j] == '~' && j > i) {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				j++
			}
			toks = append(toks, qsTok{"word", strings.ReplaceAll(s[i:j], `\`, "")})
			i = skipSlop(s, j)
		}
	}
	return toks
}

// skipSlop skips a ~N after a word or phrase.
func skipSlop(s string, i int) int {
	if i < len(s) && s[i] == '~' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i
}

// sqsGroup combines operands from toks[i] up to a closing parenthesis (at depth 0, a
// stray one is skipped).
func (p *qsParser) sqsGroup(toks []qsTok, i, depth int) (query.Query, int, error) {
	var g sqsChain
	op, negate := "", false
	for i < len(toks) {
		t := toks[i]
		i++
		var q query.Query
		switch t.kind {
		case "and", "or":
			op = t.kind
			continue
		case "not":
			negate = !negate
			continue
		case "rparen":
			if depth == 0 {
				continue
			}
			return g.query(), i, nil
		case "lparen":
			var err error
			if q, i, err = p.sqsGroup(toks, i, depth+1); err != nil {
				return nil, i, err
			}
			if q == nil {
				continue
			}
		default:
			var err error
			if q, err = p.onFields(p.fields, t); err != nil {
				return nil, i, err
			}
		}
		if negate {
			nb := bleve.NewBooleanQuery()
			nb.AddMust(bleve.NewMatchAllQuery())
			nb.AddMustNot(q)
			q, negate = nb, false
		}
		if op == "" {
			op = p.defOp
		}
		g.add(q, op)
		op = ""
	}
	return g.query(), i, nil
}

// sqsChain is operands combined left to right: a run joined by one operator, which
// becomes one operand of the next run when the operator changes.
type sqsChain struct {
	op    string
	items []query.Query
}

func (g *sqsChain) add(q query.Query, op string) {
	if len(g.items) > 1 && op != g.op {
		g.items = []query.Query{g.query()}
	}
	g.op = op
	g.items = append(g.items, q)
}

func (g *sqsChain) query() query.Query {
	switch {
	case len(g.items) == 0:
		return nil
	case len(g.items) == 1:
		return g.items[0]
	case g.op == "and":
		return bleve.NewConjunctionQuery(g.items...)
	}
	dq := bleve.NewDisjunctionQuery(g.items...)
	dq.SetMin(1)
	return dq
}
