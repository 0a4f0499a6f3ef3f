package eslite_test

import (
	"strings"
	"testing"
)

func TestAutoDateHistogram(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("ad", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"date":{"type":"date"}}}}`))))
	var b strings.Builder
	for i, d := range []string{"2020-03-01", "2020-03-02", "2020-03-08", "2020-03-09"} {
		b.WriteString(`{"index":{}}` + "\n" + `{"date":"` + d + `","v":` + string(rune('1'+i)) + "}\n")
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("ad"), e.es.Bulk.WithRefresh("true")))
	// Nine days in two buckets: weeks from the first day.
	got := e.aggJSON("ad", "", `{"h":{"auto_date_histogram":{"field":"date","buckets":2},"aggs":{"v":{"sum":{"field":"v"}}}}}`)
	want := `{"h":{"buckets":[{"doc_count":2,"key":1583020800000,"key_as_string":"2020-03-01T00:00:00.000Z","v":{"value":3}},` +
		`{"doc_count":2,"key":1583625600000,"key_as_string":"2020-03-08T00:00:00.000Z","v":{"value":7}}],"interval":"7d"}}`
	if got != want {
		t.Errorf("two buckets:\n got  %s\n want %s", got, want)
	}
	// Ten buckets fit days, the empty ones included.
	got = e.aggJSON("ad", "", `{"h":{"auto_date_histogram":{"field":"date"}}}`)
	if !strings.Contains(got, `"interval":"1d"`) || strings.Count(got, `"key":`) != 9 {
		t.Errorf("default buckets: %s", got)
	}
	got = e.aggJSON("ad", "", `{"h":{"auto_date_histogram":{"field":"date","minimum_interval":"month"}}}`)
	if !strings.Contains(got, `"interval":"1M"`) || strings.Count(got, `"key":`) != 1 {
		t.Errorf("minimum_interval month: %s", got)
	}
}

func TestVariableWidthHistogram(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	var b strings.Builder
	for _, n := range []string{"-3", "-2", "1", "4", "5"} {
		b.WriteString(`{"index":{}}` + "\n" + `{"number":` + n + "}\n")
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("vw"), e.es.Bulk.WithRefresh("true")))
	// The closest neighbours merge first: -3 with -2, then 4 with 5.
	got := e.aggJSON("vw", "", `{"h":{"variable_width_histogram":{"field":"number","buckets":3}}}`)
	want := `{"h":{"buckets":[{"doc_count":2,"key":-2.5,"max":-2,"min":-3},{"doc_count":1,"key":1,"max":1,"min":1},{"doc_count":2,"key":4.5,"max":5,"min":4}]}}`
	if got != want {
		t.Errorf("variable_width_histogram:\n got  %s\n want %s", got, want)
	}
}

func TestDateRangeFormatsAndOrder(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("es", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"date":{"type":"date","format":"epoch_second"}}}}`))))
	var b strings.Builder
	for _, d := range []string{`{"date":1000}`, `{"date":2000}`, `{"date":"3000"}`, `{}`} {
		b.WriteString(`{"index":{}}` + "\n" + d + "\n")
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("es"), e.es.Bulk.WithRefresh("true")))
	// Bounds, keys and missing read in the field's format (seconds); from and to are
	// millis; buckets come ordered by their bounds, whatever the request's order.
	got := e.aggJSON("es", "", `{"r":{"date_range":{"field":"date","missing":"0","ranges":[{"from":3000,"to":4000},{"from":1000,"to":3000},{"key":"early","to":"1000"}]}}}`)
	want := `{"r":{"buckets":[{"doc_count":1,"key":"early","to":1000000,"to_as_string":"1000"},` +
		`{"doc_count":2,"from":1000000,"from_as_string":"1000","key":"1000-3000","to":3000000,"to_as_string":"3000"},` +
		`{"doc_count":1,"from":3000000,"from_as_string":"3000","key":"3000-4000","to":4000000,"to_as_string":"4000"}]}}`
	if got != want {
		t.Errorf("date_range:\n got  %s\n want %s", got, want)
	}
	got = e.aggJSON("es", "", `{"r":{"date_range":{"field":"date","format":"yyyy-MM-dd'T'HH:mm","time_zone":"+01:00","ranges":[{"from":"1970-01-01T01:20"}]}}}`)
	if !strings.Contains(got, `"key":"1970-01-01T01:20-*"`) || !strings.Contains(got, `"from":1200000`) || !strings.Contains(got, `"doc_count":2`) {
		t.Errorf("date_range with format and time_zone: %s", got)
	}
}

func TestDateRangeOffsetsInFormat(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("tz", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"d":{"type":"date","format":"uuuu-MM-dd'T'HH:mm:ss.SSSSSSSSSZZZZZ"}}}}`))))
	e.ok(e.es.Index("tz", strings.NewReader(`{"d":"2021-08-12T01:00:00.000000000+02:00"}`), e.es.Index.WithRefresh("true")))
	// Offsets in the bounds count; the output is in the requested time zone.
	got := e.aggJSON("tz", "", `{"r":{"date_range":{"field":"d","time_zone":"America/New_York","ranges":[{"from":"2021-08-12T00:00:00.000000000+02:00","to":"2021-08-12T02:00:00.000000000+02:00"}]}}}`)
	for _, want := range []string{`"from":1628719200000`, `"from_as_string":"2021-08-11T18:00:00.000000000-04:00"`, `"to_as_string":"2021-08-11T20:00:00.000000000-04:00"`, `"doc_count":1`} {
		if !strings.Contains(got, want) {
			t.Errorf("date_range: %s lacks %s", got, want)
		}
	}
}

func TestDateHistogramFormatInTimeZone(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("dh", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"date":{"type":"date","format":"yyyy-MM-dd HH:mm:ss"}}}}`))))
	e.ok(e.es.Index("dh", strings.NewReader(`{"date":"2021-05-01 20:00:00"}`), e.es.Index.WithRefresh("true")))
	got := e.aggJSON("dh", "", `{"h":{"date_histogram":{"field":"date","calendar_interval":"hour","time_zone":"Asia/Jakarta"}},"u":{"date_histogram":{"field":"date","calendar_interval":"hour"}}}`)
	want := `{"h":{"buckets":[{"doc_count":1,"key":1619899200000,"key_as_string":"2021-05-02 03:00:00"}]},"u":{"buckets":[{"doc_count":1,"key":1619899200000,"key_as_string":"2021-05-01 20:00:00"}]}}`
	if got != want {
		t.Errorf("date_histogram in the field's format:\n got  %s\n want %s", got, want)
	}
}
