package eslite_test

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCompositeAggregation(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("c", e.es.Indices.Create.WithBody(strings.NewReader(
		`{"mappings":{"properties":{"kw":{"type":"keyword"},"n":{"type":"long"},"d":{"type":"date"},"g":{"type":"geo_point"}}}}`))))
	var b strings.Builder
	for _, d := range []string{
		`{"kw":"foo","n":[10,20],"g":"37.2343,-115.8067"}`,
		`{"kw":["foo","bar"],"g":"41.12,-71.34"}`,
		`{"kw":"bar","n":[100,0],"g":"90.0,0.0"}`,
		`{"d":"2017-10-20T03:08:45"}`,
		`{"d":"2017-10-21T07:00:00"}`,
	} {
		b.WriteString("{\"index\":{}}\n" + d + "\n")
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("c"), e.es.Bulk.WithRefresh("true")))
	check := func(name, aggs, want string) {
		t.Helper()
		if got := e.aggJSON("c", "", aggs); got != want {
			t.Errorf("%s:\n got  %s\n want %s", name, got, want)
		}
	}
	// Every combination of a document's values is a bucket, in key order.
	check("two sources", `{"c":{"composite":{"size":3,"sources":[{"n":{"terms":{"field":"n"}}},{"k":{"terms":{"field":"kw","order":"desc"}}}]}}}`,
		`{"c":{"after_key":{"k":"foo","n":20},"buckets":[{"doc_count":1,"key":{"k":"bar","n":0}},{"doc_count":1,"key":{"k":"foo","n":10}},{"doc_count":1,"key":{"k":"foo","n":20}}]}}`)
	check("after", `{"c":{"composite":{"after":{"n":20,"k":"foo"},"sources":[{"n":{"terms":{"field":"n"}}},{"k":{"terms":{"field":"kw","order":"desc"}}}]}}}`,
		`{"c":{"after_key":{"k":"bar","n":100},"buckets":[{"doc_count":1,"key":{"k":"bar","n":100}}]}}`)
	// Documents without a value are left out, or form the null bucket with missing_bucket.
	check("missing_bucket", `{"c":{"composite":{"sources":[{"k":{"terms":{"field":"kw","missing_bucket":true}}}]}}}`,
		`{"c":{"after_key":{"k":"foo"},"buckets":[{"doc_count":2,"key":{"k":null}},{"doc_count":2,"key":{"k":"bar"}},{"doc_count":2,"key":{"k":"foo"}}]}}`)
	// Dates are millis, or formatted in the source's time zone; after reads that format.
	check("date_histogram", `{"c":{"composite":{"sources":[{"d":{"date_histogram":{"field":"d","calendar_interval":"1d","time_zone":"-02:00","format":"iso8601"}}}],"after":{"d":"2017-10-19"}}}}`,
		`{"c":{"after_key":{"d":"2017-10-21T00:00:00.000-02:00"},"buckets":[{"doc_count":1,"key":{"d":"2017-10-20T00:00:00.000-02:00"}},{"doc_count":1,"key":{"d":"2017-10-21T00:00:00.000-02:00"}}]}}`)
	check("date_histogram millis", `{"c":{"composite":{"size":1,"sources":[{"d":{"date_histogram":{"field":"d","fixed_interval":"1d"}}}]}}}`,
		`{"c":{"after_key":{"d":1508457600000},"buckets":[{"doc_count":1,"key":{"d":1508457600000}}]}}`)
	check("histogram", `{"c":{"composite":{"sources":[{"h":{"histogram":{"field":"n","interval":50}}}]}}}`,
		`{"c":{"after_key":{"h":100},"buckets":[{"doc_count":2,"key":{"h":0}},{"doc_count":1,"key":{"h":100}}]}}`)
	// Tiles as Elasticsearch's GeoTileUtils numbers them.
	check("geotile_grid", `{"c":{"composite":{"sources":[{"g":{"geotile_grid":{"field":"g","precision":12}}}]}}}`,
		`{"c":{"after_key":{"g":"12/2048/0"},"buckets":[{"doc_count":1,"key":{"g":"12/730/1590"}},{"doc_count":1,"key":{"g":"12/1236/1533"}},{"doc_count":1,"key":{"g":"12/2048/0"}}]}}`)
	for body, want := range map[string]string{
		`{"aggs":{"t":{"terms":{"field":"kw"},"aggs":{"c":{"composite":{"sources":[{"k":{"terms":{"field":"kw"}}}]}}}}}}`: "cannot be used with a parent aggregation of type: [TermsAggregatorFactory]",
		`{"aggs":{"c":{"composite":{"sources":[]}}}}`:                                                             "cannot be null or empty",
		`{"aggs":{"c":{"composite":{"size":1}}}}`:                                                                 "Required [sources]",
		`{"aggs":{"c":{"composite":{"sources":[{"k":{"terms":{"field":"kw"}}},{"k":{"terms":{"field":"n"}}}]}}}}`: "found duplicates: [k]",
		`{"aggs":{"c":{"composite":{"size":1000000000,"sources":[{"k":{"terms":{"field":"kw"}}}]}}}}`:             "Trying to create too many buckets",
	} {
		st, m := e.raw(e.es.Search(e.es.Search.WithIndex("c"), e.es.Search.WithBody(strings.NewReader(body))))
		if st != 400 || !strings.Contains(jsonString(m), want) {
			t.Errorf("%s: %d %v, want %q", body, st, m, want)
		}
	}
	// Under nested and filter it runs.
	check("under filter", `{"f":{"filter":{"term":{"kw":"bar"}},"aggs":{"c":{"composite":{"sources":[{"k":{"terms":{"field":"kw"}}}]}}}}}`,
		`{"f":{"c":{"after_key":{"k":"foo"},"buckets":[{"doc_count":2,"key":{"k":"bar"}},{"doc_count":1,"key":{"k":"foo"}}]},"doc_count":2}}`)
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
