package eslite_test

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTopMetrics(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("tm", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"timestamp":{"type":"date"},"uuid":{"type":"keyword"},"name":{"type":"keyword"},"metric":{"type":"long"}}}}`))))
	var b strings.Builder
	for _, d := range []string{
		`{"timestamp":"2021-10-01","metric":1,"name":"first","uuid":"0002"}`, `{"timestamp":"2021-10-02","metric":2,"name":"first","uuid":"0002"}`,
		`{"timestamp":"2021-10-01","metric":1,"name":"second","uuid":"0001"}`, `{"timestamp":"2021-10-02","metric":3,"name":"second","uuid":"0001"}`,
		`{"timestamp":"2021-10-01","metric":1,"name":"third","uuid":"0003"}`, `{"timestamp":"2021-10-02","metric":1,"name":"third","uuid":"0003"}`,
	} {
		b.WriteString("{\"index\":{}}\n" + d + "\n")
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("tm"), e.es.Bulk.WithRefresh("true")))
	got := e.aggJSON("tm", "", `{"t":{"top_metrics":{"sort":[{"metric":{"order":"desc"}}],"metrics":[{"field":"timestamp"},{"field":"name"}],"size":2}}}`)
	want := `{"t":{"top":[{"metrics":{"name":"second","timestamp":"2021-10-02T00:00:00.000Z"},"sort":[3]},{"metrics":{"name":"first","timestamp":"2021-10-02T00:00:00.000Z"},"sort":[2]}]}}`
	if got != want {
		t.Errorf("top_metrics:\n got  %s\n want %s", got, want)
	}
	// Terms ordered by the latest name (a string) or the latest metric of each uuid.
	keys := func(order string) string {
		t.Helper()
		out := e.aggJSON("tm", "", `{"h":{"terms":{"field":"uuid","order":{`+order+`}},"aggs":{"hit":{"top_metrics":{"sort":{"timestamp":"desc"},"metrics":[{"field":"metric"},{"field":"name"}]}}}}}`)
		var ks []string
		for _, part := range strings.Split(out, `"key":"`)[1:] {
			ks = append(ks, part[:4])
		}
		return strings.Join(ks, ",")
	}
	for order, want := range map[string]string{`"hit.name":"desc"`: "0003,0001,0002", `"hit.metric":"desc"`: "0001,0002,0003", `"hit.metric":"asc"`: "0003,0002,0001"} {
		if got := keys(order); got != want {
			t.Errorf("order %s: %s, want %s", order, got, want)
		}
	}
	st, m := e.raw(e.es.Search(e.es.Search.WithIndex("tm"), e.es.Search.WithBody(strings.NewReader(
		`{"aggs":{"h":{"terms":{"field":"uuid","order":{"hit.unknown":"desc"}},"aggs":{"hit":{"top_metrics":{"sort":{"timestamp":"desc"},"metrics":{"field":"metric"}}}}}}}`))))
	if st != 400 || !strings.Contains(jsonString(m), "unknown metric [unknown]") {
		t.Errorf("unknown metric: %d %v", st, m)
	}
}

func TestRandomSampler(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	var b strings.Builder
	for i := 0; i < 400; i++ {
		b.WriteString(`{"index":{}}` + "\n" + `{"value":4}` + "\n")
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("rs"), e.es.Bulk.WithRefresh("true")))
	var m struct {
		S struct {
			DocCount    int     `json:"doc_count"`
			Probability float64 `json:"probability"`
			Mean        struct{ Value float64 }
			Sum         struct{ Value float64 }
		}
	}
	agg := `{"s":{"random_sampler":{"probability":0.5,"seed":7},"aggs":{"mean":{"avg":{"field":"value"}},"sum":{"sum":{"field":"value"}}}}}`
	got := e.aggJSON("rs", "", agg)
	if err := json.Unmarshal([]byte(got), &m); err != nil {
		t.Fatal(err)
	}
	// About half the documents are sampled; counts and sums are scaled back up, means
	// are the sample's; the same seed samples the same documents.
	if m.S.Mean.Value != 4 || m.S.DocCount < 300 || m.S.DocCount > 500 || m.S.Sum.Value != 4*float64(m.S.DocCount) || m.S.Probability != 0.5 {
		t.Errorf("random_sampler: %s", got)
	}
	if again := e.aggJSON("rs", "", agg); again != got {
		t.Errorf("same seed, another sample: %s vs %s", again, got)
	}
	for body, want := range map[string]string{
		`{"aggs":{"s":{"random_sampler":{"probability":1.5},"aggs":{"m":{"max":{"field":"value"}}}}}}`:                                          "[probability] must be between 0 and 1",
		`{"aggs":{"s":{"random_sampler":{"probability":0.2}}}}`:                                                                                 "must have sub-aggregations",
		`{"aggs":{"s":{"random_sampler":{"probability":0.1},"aggs":{"u":{"cardinality":{"field":"value"}}}}}}`:                                  "does not support sampling [cardinality] aggregation [u]",
		`{"aggs":{"t":{"terms":{"field":"value"},"aggs":{"s":{"random_sampler":{"probability":0.1},"aggs":{"m":{"max":{"field":"value"}}}}}}}}`: "cannot have a parent aggregation",
	} {
		st, m := e.raw(e.es.Search(e.es.Search.WithIndex("rs"), e.es.Search.WithBody(strings.NewReader(body))))
		if st != 400 || !strings.Contains(jsonString(m), want) {
			t.Errorf("%s: %d %v", body, st, m)
		}
	}
}
