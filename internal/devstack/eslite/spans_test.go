package eslite_test

import (
	"strings"
	"testing"
)

func TestSpanQueries(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	// Titles: 1 "Go generics explained", 3 "Go concurrency patterns", 5 "Search engines from scratch".
	for q, want := range map[string]string{
		`{"span_term":{"title":"go"}}`: "1,3",
		`{"span_near":{"clauses":[{"span_term":{"title":"go"}},{"span_term":{"title":"patterns"}}],"slop":1,"in_order":true}}`:                                                          "3",
		`{"span_near":{"clauses":[{"span_term":{"title":"go"}},{"span_term":{"title":"patterns"}}],"slop":0}}`:                                                                          "",
		`{"span_near":{"clauses":[{"span_term":{"title":"patterns"}},{"span_term":{"title":"go"}}],"slop":1,"in_order":false}}`:                                                         "3",
		`{"span_or":{"clauses":[{"span_term":{"title":"rust"}},{"span_term":{"title":"database"}}]}}`:                                                                                   "2,4",
		`{"span_first":{"match":{"span_term":{"title":"explained"}},"end":3}}`:                                                                                                          "1",
		`{"span_first":{"match":{"span_term":{"title":"explained"}},"end":2}}`:                                                                                                          "",
		`{"span_multi":{"match":{"prefix":{"title":{"value":"gen"}}}}}`:                                                                                                                 "1",
		`{"span_not":{"include":{"span_term":{"title":"go"}},"exclude":{"span_term":{"title":"generics"}},"post":1}}`:                                                                   "3",
		`{"span_containing":{"big":{"span_near":{"clauses":[{"span_term":{"title":"go"}},{"span_term":{"title":"explained"}}],"slop":1}},"little":{"span_term":{"title":"generics"}}}}`: "1",
		`{"span_within":{"little":{"span_term":{"title":"concurrency"}},"big":{"span_near":{"clauses":[{"span_term":{"title":"go"}},{"span_term":{"title":"patterns"}}],"slop":1}}}}`:   "3",
	} {
		if got := strings.Join(sorted(e.queryIDs("news", q)), ","); got != want {
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
	if st, _ := e.searchStatus("news", `{"query":{"span_near":{"clauses":[{"span_term":{"title":"go"}},{"span_term":{"body":"go"}}]}}}`); st != 400 {
		t.Errorf("clauses on two fields: %d", st)
	}
}

func TestSloppyPhraseAndPhrasePrefix(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	for q, want := range map[string]string{
		`{"match_phrase":{"title":{"query":"go patterns","slop":1}}}`:   "3",
		`{"match_phrase":{"title":{"query":"go patterns","slop":0}}}`:   "",
		`{"match_phrase_prefix":{"title":"go gen"}}`:                    "1",
		`{"match_phrase_prefix":{"title":{"query":"go","slop":0}}}`:     "1,3",
		`{"match_phrase_prefix":{"title":{"query":"go pat","slop":1}}}`: "3",
	} {
		if got := strings.Join(sorted(e.queryIDs("news", q)), ","); got != want {
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
}
