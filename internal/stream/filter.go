package stream

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Filter is what one subscription wants from a source: events containing any of its
// keywords (as whole words, any case) and whose fields equal every Match value. The
// keywords go upstream (the source filters, and bills, by them); Match is applied here.
type Filter struct {
	Keywords []string          `json:"keywords,omitempty"`
	Match    map[string]string `json:"match,omitempty"`
	// Fields are the event fields the keywords are looked for in; none: every string
	// field (and list of strings).
	Fields []string `json:"fields,omitempty"`
}

// terms are the filter's keywords, lower-cased and sorted, without repeats.
func (f Filter) terms() []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range f.Keywords {
		k = strings.ToLower(strings.TrimSpace(k))
		if k != "" && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Matches reports whether a decoded event passes the filter.
func (f Filter) Matches(obj map[string]any) bool {
	for k, want := range f.Match {
		if v, ok := obj[k]; !ok || text(v) != want {
			return false
		}
	}
	terms := f.terms()
	if len(terms) == 0 {
		return true
	}
	var words []string
	if len(f.Fields) == 0 {
		for _, v := range obj {
			words = append(words, Words(text(v))...)
		}
	} else {
		for _, name := range f.Fields {
			words = append(words, Words(text(obj[name]))...)
		}
	}
	return anyTerm(terms, words)
}

// matchesRaw decides for an event that could not be decoded: its keywords against the
// raw text (field matches cannot be checked, so they do not exclude it).
func (f Filter) matchesRaw(raw string) bool {
	terms := f.terms()
	return len(terms) == 0 || anyTerm(terms, Words(raw))
}

func anyTerm(terms, words []string) bool {
	for _, w := range words {
		for _, t := range terms {
			if w == t {
				return true
			}
		}
	}
	return false
}

// Words splits text into lower-case words (letters and digits), the unit keywords
// match; the demo site's streams filter with the same function.
func Words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// text is a field value as the text keywords and matches are compared with.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			parts = append(parts, text(e))
		}
		return strings.Join(parts, " ")
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// Compare orders two stream positions: numerically when both are integers (SSE ids
// and sequence numbers usually are), else as strings (timestamps in a fixed layout).
// The empty position comes before every other.
func Compare(a, b string) int {
	if a == b {
		return 0
	}
	if a == "" {
		return -1
	}
	if b == "" {
		return 1
	}
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	if errA == nil && errB == nil {
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	}
	return strings.Compare(a, b)
}
