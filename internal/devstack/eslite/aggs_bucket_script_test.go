package eslite_test

import (
	"strings"
	"testing"
)

func TestBucketScriptAndSelector(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.seed()
	// Per author: the sum and count of points; bucket_script divides them, and
	// bucket_selector keeps the authors above 100 points on average.
	got := e.aggJSON("news", "", `{"a":{"terms":{"field":"author"},"aggs":{"s":{"sum":{"field":"points"}},"n":{"value_count":{"field":"points"}},
		"avg":{"bucket_script":{"buckets_path":{"sum":"s","count":"n"},"script":"params.sum / params.count"}},
		"big":{"bucket_selector":{"buckets_path":{"avg":"avg"},"script":{"source":"params.avg > params.limit","params":{"limit":100}}}}}}}`)
	for _, want := range []string{`"key":"alice"`, `"avg":{"value":160}`, `"key":"dave"`, `"avg":{"value":150}`} {
		if !strings.Contains(got, want) {
			t.Errorf("bucket_script: %s lacks %s", got, want)
		}
	}
	if strings.Contains(got, `"key":"bob"`) || strings.Contains(got, `"key":"carol"`) {
		t.Errorf("bucket_selector kept small authors: %s", got)
	}
	got = e.aggJSON("news", "", `{"a":{"terms":{"field":"author","size":1},"aggs":{"s":{"sum":{"field":"points"}},
		"x":{"bucket_script":{"buckets_path":"s","script":"return Math.max(params._value, 1000) > 500 ? -(params._value % 7) : 0;"}}}}}`)
	if !strings.Contains(got, `"x":{"value":-5}`) {
		t.Errorf("expression: %s", got)
	}
	if st, _ := e.searchStatus("news", `{"aggs":{"a":{"terms":{"field":"author"},"aggs":{"x":{"bucket_script":{"buckets_path":{"v":"_count"},"script":"doc['points'].value"}}}}}}`); st != 400 {
		t.Errorf("a script eslite cannot read: %d", st)
	}
}
