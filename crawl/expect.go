package crawl

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Expect is what a step's data must look like for its run to count as good (`expect:`
// in the chain file). The batch activity counts what the rules need as items are
// produced (ExpectCounts); the workflow judges the counts when the run ends.
type Expect struct {
	// MinItems is the fewest items the step may produce in a run (stored plus those
	// dedup found unchanged). With OfLast set, it is instead MinFraction of the mean of
	// the step's items over the last OfLast completed runs of the chain.
	MinItems    int     `json:"min_items,omitempty"`
	MinFraction float64 `json:"min_fraction,omitempty"`
	OfLast      int     `json:"of_last,omitempty"`
	// Fields are the per-field rules, sorted by field name.
	Fields []FieldRule `json:"fields,omitempty"`
	// MaxFailureShare bounds failed inputs / (pages + failed inputs); nil: no bound.
	MaxFailureShare *float64 `json:"max_failure_share,omitempty"`
	// MaxNewShare bounds the share of the step's items dedup judged new, once an
	// earlier completed run of the chain produced items in the step: records seen
	// before come back unchanged or changed, so a run where most of them are new again
	// has keys that changed under it. nil: no bound.
	MaxNewShare *float64 `json:"max_new_share,omitempty"`
	// Fail makes a broken expectation fail the run (`on_violation: fail`) instead of
	// ending it completed_with_violations.
	Fail        bool   `json:"fail,omitempty"`
	onViolation string // as the step wrote it; Compile resolves it with the chain's
}

// FieldRule is what the expectations say about one field of the step's items.
type FieldRule struct {
	Field string `json:"field"`
	// Coverage is the least share of items whose field is present: not null, not
	// empty (0: no coverage rule).
	Coverage float64 `json:"coverage,omitempty"`
	// Type, Min, Max and Match are what every present value must be: of a type
	// (ExpectTypes), a number in [Min, Max], a string matching Match.
	Type  string   `json:"type,omitempty"`
	Min   *float64 `json:"min,omitempty"`
	Max   *float64 `json:"max,omitempty"`
	Match string   `json:"match,omitempty"`
}

// ExpectTypes are the types a field rule may ask for.
var ExpectTypes = []string{"string", "number", "int", "bool", "list", "object"}

// OnViolation modes of a chain or step: mark the run completed_with_violations, or fail it.
const (
	OnViolationMark = "mark"
	OnViolationFail = "fail"
)

// History reports whether judging the expectations needs earlier runs' counts.
func (e *Expect) History() bool { return e != nil && (e.OfLast > 0 || e.MaxNewShare != nil) }

// ExpectCounts are the counters a step's expectations are judged on, summed over the
// run: the items its task produced, how many of them dedup judged new, and per field
// rule (in the order of Expect.Fields) how its values fared.
type ExpectCounts struct {
	Items  int          `json:"items"`
	New    int          `json:"new,omitempty"`
	Fields []FieldCount `json:"fields,omitempty"`
}

// FieldCount counts one field over the items: present (not null, not empty), present
// but of the wrong type, and of the right type but out of range or not matching.
type FieldCount struct {
	Field    string `json:"field"`
	Present  int    `json:"present"`
	BadType  int    `json:"bad_type,omitempty"`
	BadValue int    `json:"bad_value,omitempty"`
}

// Add adds o's counts to c's; c takes o's fields when it has none yet.
func (c *ExpectCounts) Add(o *ExpectCounts) {
	if o == nil {
		return
	}
	c.Items += o.Items
	c.New += o.New
	if len(c.Fields) == 0 {
		c.Fields = slices.Clone(o.Fields)
		return
	}
	for i := range c.Fields {
		if i < len(o.Fields) {
			c.Fields[i].Present += o.Fields[i].Present
			c.Fields[i].BadType += o.Fields[i].BadType
			c.Fields[i].BadValue += o.Fields[i].BadValue
		}
	}
}

// Counter counts items for a step's expectations; its patterns are compiled once.
type Counter struct {
	rules []FieldRule
	match []*regexp.Regexp
}

// NewCounter makes the counter of e; nil when e has no rules to count for.
func NewCounter(e *Expect) *Counter {
	if e == nil {
		return nil
	}
	c := &Counter{rules: e.Fields, match: make([]*regexp.Regexp, len(e.Fields))}
	for i, r := range e.Fields {
		if r.Match != "" {
			c.match[i] = regexp.MustCompile(r.Match) // Load has compiled it already
		}
	}
	return c
}

// Count counts items into a fresh ExpectCounts.
func (c *Counter) Count(items []Item) *ExpectCounts {
	out := &ExpectCounts{Items: len(items), Fields: make([]FieldCount, len(c.rules))}
	for i, r := range c.rules {
		fc := &out.Fields[i]
		fc.Field = r.Field
		for _, it := range items {
			v := it.Data[r.Field]
			if !present(v) {
				continue
			}
			fc.Present++
			switch {
			case r.Type != "" && !isType(r.Type, v):
				fc.BadType++
			case !c.inRange(i, v):
				fc.BadValue++
			}
		}
	}
	return out
}

// inRange reports whether a present value meets rule i's min, max and match.
func (c *Counter) inRange(i int, v any) bool {
	r := c.rules[i]
	if r.Min != nil || r.Max != nil {
		n, ok := number(v)
		if !ok || (r.Min != nil && n < *r.Min) || (r.Max != nil && n > *r.Max) {
			return false
		}
	}
	if c.match[i] != nil {
		s, ok := v.(string)
		if !ok || !c.match[i].MatchString(s) {
			return false
		}
	}
	return true
}

// present is a value that says something: not null, not an empty string, list or object.
func present(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case string:
		return strings.TrimSpace(x) != ""
	case []any:
		return len(x) > 0
	case []string:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

func isType(t string, v any) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := number(v)
		return ok
	case "int":
		n, ok := number(v)
		return ok && n == float64(int64(n))
	case "bool":
		_, ok := v.(bool)
		return ok
	case "list":
		switch v.(type) {
		case []any, []string, []int, []float64, []map[string]any:
			return true
		}
		return false
	case "object":
		_, ok := v.(map[string]any)
		return ok
	}
	return false
}

var (
	expectKeys    = []string{"min_items", "coverage", "fields", "max_failure_share", "max_new_share", "on_violation"}
	fieldRuleKeys = []string{"type", "min", "max", "match"}
	minItemsKeys  = []string{"fraction", "of_last"}
	onViolation   = []string{OnViolationMark, OnViolationFail}
)

// expect reads a step's `expect:`. Each field rule keeps its line (lines) so a field
// the task does not produce is reported where it is written.
func (l *loader) expect(v *yaml.Node, where string, lines map[string]int) *Expect {
	e := &Expect{}
	rules := map[string]*FieldRule{}
	rule := func(k *yaml.Node) *FieldRule {
		if _, ok := lines[k.Value]; !ok {
			lines[k.Value] = k.Line
		}
		r := rules[k.Value]
		if r == nil {
			r = &FieldRule{Field: k.Value}
			rules[k.Value] = r
		}
		return r
	}
	where += ".expect"
	l.fields(v, where, expectKeys, func(key string, v *yaml.Node) {
		switch key {
		case "min_items":
			if v.Kind == yaml.MappingNode {
				l.fields(v, where+".min_items", minItemsKeys, func(key string, v *yaml.Node) {
					switch key {
					case "fraction":
						e.MinFraction = l.share(v, where+".min_items.fraction")
					case "of_last":
						if e.OfLast = l.integer(v, "min_items.of_last"); e.OfLast < 1 || e.OfLast > 50 {
							l.add(v.Line, "%s.min_items.of_last %d: use 1 to 50, the number of earlier completed runs to average", where, e.OfLast)
						}
					}
				})
				if e.MinFraction == 0 || e.OfLast == 0 {
					l.add(v.Line, "%s.min_items: a relative minimum needs both `fraction` and `of_last`, e.g. {fraction: 0.5, of_last: 5}", where)
				}
				return
			}
			if e.MinItems = l.integer(v, "min_items"); e.MinItems < 0 {
				l.add(v.Line, "%s.min_items %d: use a count of 1 or more, or {fraction: 0.5, of_last: 5} for half the mean of the last 5 completed runs", where, e.MinItems)
			}
		case "coverage":
			if v.Kind != yaml.MappingNode {
				l.add(v.Line, "%s.coverage must map fields to shares, e.g. {price: 0.95}, not a %s", where, kindName(v))
				return
			}
			for i := 0; i+1 < len(v.Content); i += 2 {
				k := v.Content[i]
				rule(k).Coverage = l.share(v.Content[i+1], fmt.Sprintf("%s.coverage.%s", where, k.Value))
			}
		case "fields":
			if v.Kind != yaml.MappingNode {
				l.add(v.Line, "%s.fields must map fields to rules, e.g. {price: {type: number, min: 0.01}}, not a %s", where, kindName(v))
				return
			}
			for i := 0; i+1 < len(v.Content); i += 2 {
				k, rv := v.Content[i], v.Content[i+1]
				l.fieldRule(rv, fmt.Sprintf("%s.fields.%s", where, k.Value), rule(k))
			}
		case "max_failure_share":
			s := l.share(v, where+".max_failure_share")
			e.MaxFailureShare = &s
		case "max_new_share":
			s := l.share(v, where+".max_new_share")
			e.MaxNewShare = &s
		case "on_violation":
			e.onViolation = l.onViolation(v, where)
		}
	})
	for _, name := range slices.Sorted(maps.Keys(rules)) {
		e.Fields = append(e.Fields, *rules[name])
	}
	return e
}

// fieldRule reads one field's `{type, min, max, match}`.
func (l *loader) fieldRule(v *yaml.Node, where string, r *FieldRule) {
	l.fields(v, where, fieldRuleKeys, func(key string, v *yaml.Node) {
		switch key {
		case "type":
			if r.Type = l.str(v, where+".type"); !slices.Contains(ExpectTypes, r.Type) {
				l.add(v.Line, "%s.type %q%s: use one of %s", where, r.Type, Suggest(r.Type, ExpectTypes), strings.Join(ExpectTypes, ", "))
			}
		case "min", "max":
			n, err := strconv.ParseFloat(v.Value, 64)
			if v.Kind != yaml.ScalarNode || err != nil {
				l.add(v.Line, "%s.%s must be a number, got %q", where, key, v.Value)
				return
			}
			if key == "min" {
				r.Min = &n
			} else {
				r.Max = &n
			}
		case "match":
			r.Match = l.str(v, where+".match")
			if _, err := regexp.Compile(r.Match); err != nil {
				l.add(v.Line, "%s.match %q is no regular expression: %s; write it in Go's RE2 syntax and quote it in single quotes, e.g. '^https://'", where, r.Match, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			}
		}
	})
	if r.Min != nil && r.Max != nil && *r.Min > *r.Max {
		l.add(v.Line, "%s: min %g is above max %g; swap them", where, *r.Min, *r.Max)
	}
	if (r.Min != nil || r.Max != nil) && r.Type != "" && r.Type != "number" && r.Type != "int" {
		l.add(v.Line, "%s: min and max bound numbers, and type is %s; use type: number, or drop min/max", where, r.Type)
	}
}

// share reads a share from 0 to 1.
func (l *loader) share(v *yaml.Node, field string) float64 {
	f, err := strconv.ParseFloat(v.Value, 64)
	if v.Kind != yaml.ScalarNode || err != nil {
		l.add(v.Line, "%s must be a share from 0 to 1, e.g. 0.95, got %q", field, v.Value)
		return 0
	}
	if f < 0 || f > 1 {
		l.add(v.Line, "%s %s: a share runs from 0 (none) to 1 (all); write 0.95 for 95%%", field, v.Value)
	}
	return f
}

func (l *loader) onViolation(v *yaml.Node, where string) string {
	m := l.str(v, "on_violation")
	if !slices.Contains(onViolation, m) {
		l.add(v.Line, "%s: on_violation %q%s: use mark (the run ends completed_with_violations) or fail (the run fails)", where, m, Suggest(m, onViolation))
	}
	return m
}

// checkExpect reports expectations on fields the step's items do not have. A task
// that declares no output fields (or a config-driven step whose schema is unknown)
// accepts any name: its items' fields are known only when they come.
func (l *loader) checkExpect(s Step, output []Field, where string) {
	if s.Expect == nil || len(output) == 0 {
		return
	}
	names := make([]string, len(output))
	for i, f := range output {
		names[i] = f.Name
	}
	for _, r := range s.Expect.Fields {
		if !slices.Contains(names, r.Field) {
			l.add(s.ExpectLines[r.Field], "%s: expect names field `%s`, which task %s does not produce%s; its fields: %s", where, r.Field, s.Task, Suggest(r.Field, names), strings.Join(names, ", "))
		}
	}
}
