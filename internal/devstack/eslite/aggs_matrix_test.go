package eslite_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestMatrixStats(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	for ix, third := range map[string]string{"m1": "value3", "m2": "value4"} {
		e.ok(e.es.Indices.Create(ix, e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"value1":{"type":"double"},"value2":{"type":"double"},"`+third+`":{"type":"double"}}}}`))))
		var b strings.Builder
		for _, d := range []string{`"value1":1,"value2":10`, `"value1":2,"value2":20`, `"value1":3,"value2":10`} {
			b.WriteString("{\"index\":{}}\n{" + d + ",\"" + third + "\":100}\n")
		}
		e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex(ix), e.es.Bulk.WithRefresh("true")))
	}
	var m struct {
		S struct {
			Fields []struct {
				Name                               string
				Count                              int
				Mean, Variance, Skewness, Kurtosis float64
				Covariance, Correlation            map[string]float64
			}
		}
	}
	if err := json.Unmarshal([]byte(e.aggJSON("m1,m2", "", `{"s":{"matrix_stats":{"fields":["value1","value2"]}}}`)), &m); err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-4 }
	// Fields come in Java's HashMap order, as Elasticsearch lists them.
	f := m.S.Fields
	if len(f) != 2 || f[0].Name != "value2" || f[1].Name != "value1" || f[0].Count != 6 {
		t.Fatalf("fields: %+v", f)
	}
	if !near(f[0].Mean, 13.3333) || !near(f[0].Variance, 26.6667) || !near(f[0].Skewness, 0.7071) || !near(f[0].Kurtosis, 1.5) ||
		!near(f[0].Covariance["value1"], 0) || !near(f[0].Correlation["value2"], 1) || !near(f[1].Variance, 0.8) || !near(f[1].Skewness, 0) {
		t.Errorf("stats: %+v", f)
	}
	if st, typ := e.searchStatus("m1,m2", `{"aggs":{"s":{"matrix_stats":{"fields":["value3","value4"]}}}}`); st != 400 || typ != "illegal_argument_exception" {
		t.Errorf("field missing from an index: %d %s", st, typ)
	}
}
