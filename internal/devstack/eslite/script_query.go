package eslite

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2/mapping"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"
)

// docScript is a script over a document, read as an expression (see expr.go) with
// doc['field'] access and _score.
type docScript struct {
	src    string
	params map[string]any
}

// parseScript reads a script (a string or {source, params, lang}) and checks that
// eslite can read it.
func parseScript(v any, what string) (docScript, error) {
	var s docScript
	var err error
	if s.src, s.params, err = scriptSource(v, what); err != nil {
		return s, err
	}
	probe := func(string) ([]any, bool) { return []any{1.0, 1.0}, true }
	if _, err := evalDocExpr(s.src, s.vars(1), probe); err != nil {
		return s, badRequest("illegal_argument_exception", "[%s]: eslite cannot run the script [%s]: %v", what, s.src, err)
	}
	return s, nil
}

func (s docScript) vars(score float64) map[string]any {
	vars := map[string]any{"_score": score}
	for k, v := range s.params {
		vars[k] = v
	}
	return vars
}

// run evaluates the script over a document's fields as the mappings type them.
func (s docScript) run(fields map[string]fieldInfo, d *scoredDoc, score float64) (any, error) {
	reader := func(f string) ([]any, bool) {
		fi, ok := fields[f]
		if !ok {
			return nil, false
		}
		return fieldValues(fi, d.src), true
	}
	r, err := evalDocExpr(s.src, s.vars(score), reader)
	if err != nil {
		return nil, &esError{status: 400, typ: "script_exception", reason: "runtime error: " + err.Error()}
	}
	return r, nil
}

// scriptScoreQuery matches what its query matches, scored by its script (script_score).
type scriptScoreQuery struct {
	inner  query.Query
	script docScript
	boost  float64
}

func (q *scriptScoreQuery) Searcher(ctx context.Context, i bindex.IndexReader, m mapping.IndexMapping, o bsearch.SearcherOptions) (bsearch.Searcher, error) {
	return q.inner.Searcher(ctx, i, m, o)
}

func (c *qctx) scriptScoreQ(body any) (query.Query, error) {
	o, ok := body.(map[string]any)
	if !ok {
		return nil, parsingErr("[script_score] malformed query")
	}
	for k := range o {
		switch k {
		case "query", "script", "boost", "_name":
		case "min_score":
			return nil, parsingErr("[script_score] [min_score] is not supported by eslite")
		default:
			return nil, parsingErr("[script_score] query does not support [%s]", k)
		}
	}
	if _, ok := o["query"]; !ok {
		return nil, parsingErr("[script_score] requires 'query' field")
	}
	inner, err := c.translate(o["query"])
	if err != nil {
		return nil, err
	}
	s, err := parseScript(o["script"], "script_score")
	if err != nil {
		return nil, err
	}
	return &scriptScoreQuery{inner: inner, script: s, boost: boostValue(o["boost"])}, nil
}

// scriptQ matches the documents for which the script (a script query) is true.
func (c *qctx) scriptQ(body any) (query.Query, error) {
	o, _ := body.(map[string]any)
	s, err := parseScript(o["script"], "script")
	if err != nil {
		return nil, err
	}
	if err := c.expensive("[script] queries", ""); err != nil {
		return nil, err
	}
	var runErr error
	q, err := c.scanQuery(func(src map[string]any) bool {
		r, err := s.run(c.fields, &scoredDoc{src: src}, 0)
		if err != nil && runErr == nil {
			runErr = err
		}
		return err == nil && truthy(r)
	})
	if err == nil {
		err = runErr
	}
	if err != nil {
		return nil, err
	}
	return &constScoreQuery{inner: q, boost: boostValue(o["boost"])}, nil
}

// scriptSource reads a script given as a string or as {source, params, lang}.
func scriptSource(v any, what string) (string, map[string]any, error) {
	if v == nil {
		return "", nil, parsingErr("[%s] requires a [script]", what)
	}
	src, params := scalarString(v), map[string]any{}
	if m, ok := v.(map[string]any); ok {
		src = scalarString(m["source"])
		if lang := scalarString(orDefault(m["lang"], "painless")); lang != "painless" && lang != "expression" {
			return "", nil, badRequest("illegal_argument_exception", "script_lang not supported [%s]", lang)
		}
		if ps, ok := m["params"].(map[string]any); ok {
			params = ps
		}
	}
	return src, params, nil
}

// scriptField is one entry of script_fields: a name and the script giving its value.
type scriptField struct {
	name          string
	script        docScript
	ignoreFailure bool
}

func parseScriptFields(v any) ([]scriptField, error) {
	m, _ := v.(map[string]any)
	var out []scriptField
	for _, name := range slices.Sorted(maps.Keys(m)) {
		o, ok := m[name].(map[string]any)
		if !ok {
			return nil, parsingErr("[script_fields] entry [%s] must be an object", name)
		}
		for k := range o {
			if k != "script" && k != "ignore_failure" {
				return nil, parsingErr("Unknown key for a START_OBJECT in [%s].", k)
			}
		}
		s, err := parseScript(o["script"], "script_fields")
		if err != nil {
			return nil, err
		}
		out = append(out, scriptField{name: name, script: s, ignoreFailure: boolOpt(o["ignore_failure"])})
	}
	return out, nil
}

// scriptSort reads a _script sort: {type: number or string, script, order}.
func (c *qctx) scriptSort(v any) (sortSpec, error) {
	o, ok := v.(map[string]any)
	if !ok {
		return sortSpec{}, parsingErr("[_script] sort malformed")
	}
	sp := sortSpec{field: "_script", desc: strings.EqualFold(scalarString(o["order"]), "desc")}
	switch typ := scalarString(o["type"]); typ {
	case "number":
		sp.fi = fieldInfo{Type: "double"}
	case "string":
		sp.fi = fieldInfo{Type: "keyword"}
	default:
		return sp, parsingErr("[_script] unknown sort type [%s]", typ)
	}
	s, err := parseScript(o["script"], "_script")
	if err != nil {
		return sp, err
	}
	fields, typ := c.fields, sp.fi.Type
	sp.script = func(d *scoredDoc) []any {
		r, err := s.run(fields, d, d.score)
		if err != nil || r == nil {
			return nil
		}
		if typ == "double" {
			if f, ok := toFloat(r); ok {
				return []any{f}
			}
			return nil
		}
		return []any{scalarString(r)}
	}
	return sp, nil
}

// sortSource is the values a document sorts by under a sort clause: its script's, or
// its field's.
func sortSource(sp sortSpec, d *scoredDoc) []any {
	if sp.script != nil {
		return sp.script(d)
	}
	return fieldValues(sp.fi, d.src)
}
