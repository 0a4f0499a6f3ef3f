package eslite_test

import (
	"fmt"
	"testing"
)

// term and terms on _id find documents by id, as the ids query does (a script checking a
// document after indexing it with refresh=true asks this way).
func TestTermOnID(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	for q, want := range map[string][]string{
		`{"term":{"_id":"3"}}`:            {"3"},
		`{"term":{"_id":{"value":"5"}}}`:  {"5"},
		`{"terms":{"_id":["1","4","9"]}}`: {"1", "4"},
	} {
		got := sorted(hitIDs(e.search("news", `{"query":`+q+`}`)))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: ids %v, want %v", q, got, want)
		}
	}
}
