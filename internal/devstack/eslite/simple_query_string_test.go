package eslite_test

import (
	"strings"
	"testing"
)

func TestSimpleQueryString(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	for body, want := range map[string]string{
		`{"query":"rust database","fields":["title"]}`:                              "2,4",
		`{"query":"go +generics","fields":["title"]}`:                               "1",
		`{"query":"go -generics","fields":["title"],"default_operator":"and"}`:      "3",
		`{"query":"\"go concurrency\" | rust","fields":["title"]}`:                  "2,3",
		`{"query":"gen*","fields":["title","body"]}`:                                "1",
		`{"query":"(go | rust) +explained","fields":["title","body"]}`:              "1",
		`{"query":"go rust scratch","fields":["title"],"minimum_should_match":"2"}`: "",
		`{"query":"alice","fields":["author"]}`:                                     "1,3",
		`{"query":"go) (( \"unclosed","fields":["title"]}`:                          "1,3",
	} {
		if got := strings.Join(sorted(e.queryIDs("news", `{"simple_query_string":`+body+`}`)), ","); got != want {
			t.Errorf("%s: %s, want %s", body, got, want)
		}
	}
}
