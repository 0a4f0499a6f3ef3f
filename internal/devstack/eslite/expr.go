package eslite

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// The scripts of bucket_script, bucket_selector, script_score and script queries are
// read as expressions, the part of Painless those scripts mostly use: numbers,
// params.<name> (and bare names), _score, doc['field'] (.value, .size(), .length,
// .empty, .isEmpty(), [i]), + - * / %, comparisons, && || ! (short-circuiting), ?:,
// parentheses and Math.abs, min, max, pow, sqrt, log, log10, exp, floor, ceil and
// round, with an optional `return` and `;`. Anything else is refused rather than
// guessed at.

type exprParser struct {
	src  string
	pos  int
	vars map[string]any
	// doc reads a field's values for doc['field'] (.value, .size(), .empty, [i]); nil
	// where there is no document.
	doc func(field string) ([]any, bool)
	// skip counts the enclosing branches that are parsed but not taken (the right of a
	// decided && or ||, the other arm of ?:): reading a missing value there is no error.
	skip int
}

// evalExpr evaluates src with vars (numbers or booleans) bound to params.<name>.
func evalExpr(src string, vars map[string]any) (any, error) {
	return evalDocExpr(src, vars, nil)
}

// evalDocExpr evaluates src over a document's fields as well.
func evalDocExpr(src string, vars map[string]any, doc func(string) ([]any, bool)) (any, error) {
	s := strings.TrimSpace(src)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "return "), ";")
	p := &exprParser{src: s, vars: vars, doc: doc}
	v, err := p.ternary()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos < len(p.src) {
		return nil, fmt.Errorf("unexpected [%s]", p.src[p.pos:])
	}
	return v, nil
}

func (p *exprParser) space() {
	for p.pos < len(p.src) && unicode.IsSpace(rune(p.src[p.pos])) {
		p.pos++
	}
}

func (p *exprParser) eat(tok string) bool {
	p.space()
	if strings.HasPrefix(p.src[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

func (p *exprParser) ternary() (any, error) {
	c, err := p.binary(0)
	if err != nil || !p.eat("?") {
		return c, err
	}
	a, err := p.branch(!truthy(c), p.ternary)
	if err != nil {
		return nil, err
	}
	if !p.eat(":") {
		return nil, fmt.Errorf("expected [:]")
	}
	b, err := p.branch(truthy(c), p.ternary)
	if err != nil {
		return nil, err
	}
	if truthy(c) {
		return a, nil
	}
	return b, nil
}

// branch parses with parse, skipping (not evaluating) when skipped is true.
func (p *exprParser) branch(skipped bool, parse func() (any, error)) (any, error) {
	if skipped {
		p.skip++
		defer func() { p.skip-- }()
	}
	return parse()
}

// levels of binary operators, loosest first.
var exprLevels = [][]string{{"||"}, {"&&"}, {"==", "!="}, {"<=", ">=", "<", ">"}, {"+", "-"}, {"*", "/", "%"}}

func (p *exprParser) binary(level int) (any, error) {
	if level == len(exprLevels) {
		return p.unary()
	}
	left, err := p.binary(level + 1)
	if err != nil {
		return nil, err
	}
	for {
		op := ""
		for _, o := range exprLevels[level] {
			if p.eat(o) {
				op = o
				break
			}
		}
		if op == "" {
			return left, nil
		}
		decided := (op == "&&" && !truthy(left)) || (op == "||" && truthy(left))
		right, err := p.branch(decided, func() (any, error) { return p.binary(level + 1) })
		if err != nil {
			return nil, err
		}
		if left, err = applyOp(op, left, right); err != nil {
			return nil, err
		}
	}
}

func truthy(v any) bool {
	if b, ok := v.(bool); ok {
		return b
	}
	f, _ := toFloat(v)
	return f != 0
}

func applyOp(op string, a, b any) (any, error) {
	switch op {
	case "&&":
		return truthy(a) && truthy(b), nil
	case "||":
		return truthy(a) || truthy(b), nil
	}
	x, ok1 := toFloat(a)
	y, ok2 := toFloat(b)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("[%s] needs numbers, got [%v] and [%v]", op, a, b)
	}
	switch op {
	case "==":
		return x == y, nil
	case "!=":
		return x != y, nil
	case "<":
		return x < y, nil
	case "<=":
		return x <= y, nil
	case ">":
		return x > y, nil
	case ">=":
		return x >= y, nil
	case "+":
		return x + y, nil
	case "-":
		return x - y, nil
	case "*":
		return x * y, nil
	case "/":
		return x / y, nil
	}
	return math.Mod(x, y), nil
}

var exprFuncs = map[string]func(args []float64) float64{
	"abs": func(a []float64) float64 { return math.Abs(a[0]) }, "sqrt": func(a []float64) float64 { return math.Sqrt(a[0]) },
	"log": func(a []float64) float64 { return math.Log(a[0]) }, "log10": func(a []float64) float64 { return math.Log10(a[0]) },
	"exp": func(a []float64) float64 { return math.Exp(a[0]) }, "floor": func(a []float64) float64 { return math.Floor(a[0]) },
	"ceil": func(a []float64) float64 { return math.Ceil(a[0]) }, "round": func(a []float64) float64 { return math.Floor(a[0] + 0.5) },
	"min": func(a []float64) float64 { return math.Min(a[0], a[1]) }, "max": func(a []float64) float64 { return math.Max(a[0], a[1]) },
	"pow": func(a []float64) float64 { return math.Pow(a[0], a[1]) },
}

func (p *exprParser) unary() (any, error) {
	switch {
	case p.eat("!"):
		v, err := p.unary()
		return !truthy(v), err
	case p.eat("-"):
		v, err := p.unary()
		if err != nil {
			return nil, err
		}
		f, ok := toFloat(v)
		if !ok {
			return nil, fmt.Errorf("cannot negate [%v]", v)
		}
		return -f, nil
	case p.eat("("):
		v, err := p.ternary()
		if err != nil {
			return nil, err
		}
		if !p.eat(")") {
			return nil, fmt.Errorf("expected [)]")
		}
		return v, nil
	}
	p.space()
	if strings.HasPrefix(p.src[p.pos:], "doc[") {
		return p.docValue()
	}
	start := p.pos
	for p.pos < len(p.src) && (unicode.IsLetter(rune(p.src[p.pos])) || unicode.IsDigit(rune(p.src[p.pos])) || strings.ContainsRune("._", rune(p.src[p.pos]))) {
		p.pos++
	}
	word := p.src[start:p.pos]
	if word == "" {
		return nil, fmt.Errorf("unexpected [%s]", p.src[p.pos:])
	}
	if f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSuffix(word, "d"), "f"), 64); err == nil && (unicode.IsDigit(rune(word[0])) || word[0] == '.') {
		return f, nil
	}
	switch word {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "null":
		return nil, nil
	}
	if fn, ok := strings.CutPrefix(word, "Math."); ok {
		f := exprFuncs[fn]
		if f == nil || !p.eat("(") {
			return nil, fmt.Errorf("unknown function [%s]", word)
		}
		var args []float64
		for !p.eat(")") {
			v, err := p.ternary()
			if err != nil {
				return nil, err
			}
			x, _ := toFloat(v)
			args = append(args, x)
			p.eat(",")
			if len(args) > 2 {
				return nil, fmt.Errorf("too many arguments to [%s]", word)
			}
		}
		if (fn == "min" || fn == "max" || fn == "pow") != (len(args) == 2) || len(args) == 0 {
			return nil, fmt.Errorf("wrong arguments to [%s]", word)
		}
		return f(args), nil
	}
	name := strings.TrimPrefix(word, "params.")
	v, ok := p.vars[name]
	if !ok {
		return nil, fmt.Errorf("unknown variable [%s]", word)
	}
	return v, nil
}

// docValue reads doc['field'] followed by .value, .size(), .length, .empty,
// .isEmpty() or [i].
func (p *exprParser) docValue() (any, error) {
	p.pos += len("doc[")
	rest := p.src[p.pos:]
	if len(rest) < 2 || (rest[0] != '\'' && rest[0] != '"') {
		return nil, fmt.Errorf("expected a quoted field name after doc[")
	}
	end := strings.IndexByte(rest[1:], rest[0])
	if end < 0 || !strings.HasPrefix(rest[end+2:], "]") {
		return nil, fmt.Errorf("unterminated doc[...]")
	}
	field := rest[1 : end+1]
	p.pos += end + 3
	if p.doc == nil {
		return nil, fmt.Errorf("no document to read [%s] from", field)
	}
	vals, mapped := p.doc(field)
	if !mapped {
		//lint:ignore ST1005 Elasticsearch's own words, which clients match
		return nil, fmt.Errorf("No field found for [%s] in mapping", field)
	}
	if p.skip > 0 && len(vals) == 0 {
		vals = []any{0.0}
	}
	switch {
	case p.eat(".value"):
		if len(vals) == 0 {
			//lint:ignore ST1005 Elasticsearch's own words, which clients match
			return nil, fmt.Errorf("A document doesn't have a value for a field! Use doc[<field>].size()==0 to check if a document is missing a field!")
		}
		return vals[0], nil
	case p.eat(".size()"), p.eat(".length"):
		return float64(len(vals)), nil
	case p.eat(".empty"), p.eat(".isEmpty()"):
		return len(vals) == 0, nil
	case p.eat("["):
		i, err := p.ternary()
		if err != nil {
			return nil, err
		}
		if !p.eat("]") {
			return nil, fmt.Errorf("expected []]")
		}
		n, _ := toFloat(i)
		if int(n) < 0 || int(n) >= len(vals) {
			return nil, fmt.Errorf("index %d out of bounds for length %d", int(n), len(vals))
		}
		return vals[int(n)], nil
	}
	return nil, fmt.Errorf("unsupported use of doc['%s']", field)
}
