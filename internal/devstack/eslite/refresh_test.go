package eslite_test

import (
	"strings"
	"testing"
)

func TestRefreshIntervalOff(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("r", e.es.Indices.Create.WithBody(strings.NewReader(`{"settings":{"index":{"refresh_interval":"-1"}}}`))))
	count := func() any { return total(e.search("r", `{}`)) }
	e.ok(e.es.Index("r", strings.NewReader(`{"a":1}`), e.es.Index.WithDocumentID("1")))
	// Not refreshed: searches do not see it, a realtime get does, a non-realtime one not.
	if n := count(); n != 0.0 {
		t.Errorf("before refresh: %v hits", n)
	}
	if st, _ := e.do("GET", "/r/_doc/1", ""); st != 200 {
		t.Errorf("realtime get: %d", st)
	}
	if st, _ := e.do("GET", "/r/_doc/1?realtime=false", ""); st != 404 {
		t.Errorf("non-realtime get before refresh: %d", st)
	}
	e.ok(e.es.Indices.Refresh(e.es.Indices.Refresh.WithIndex("r")))
	if n := count(); n != 1.0 {
		t.Errorf("after refresh: %v hits", n)
	}
	// refresh=true on a write refreshes too.
	e.ok(e.es.Index("r", strings.NewReader(`{"a":2}`), e.es.Index.WithDocumentID("2"), e.es.Index.WithRefresh("true")))
	if n := count(); n != 2.0 {
		t.Errorf("after refresh=true: %v hits", n)
	}
	// With the interval back, writes are visible at once.
	e.ok(e.es.Indices.PutSettings(strings.NewReader(`{"index":{"refresh_interval":"1s"}}`), e.es.Indices.PutSettings.WithIndex("r")))
	e.ok(e.es.Index("r", strings.NewReader(`{"a":3}`), e.es.Index.WithDocumentID("3")))
	if n := count(); n != 3.0 {
		t.Errorf("refresh_interval 1s: %v hits", n)
	}
}
