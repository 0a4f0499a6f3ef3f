package eslite_test

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSignificantTermsAndText(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("goodbad", e.es.Indices.Create.WithBody(strings.NewReader(
		`{"mappings":{"properties":{"text":{"type":"text","fielddata":true},"plain":{"type":"text"},"class":{"type":"keyword"},"ugly":{"type":"boolean"}}}}`))))
	var b strings.Builder
	for _, d := range []string{
		`{"text":"good","plain":"good","class":"good","ugly":true}`, `{"text":"good","plain":"good","class":"good","ugly":true}`,
		`{"text":"bad","plain":"bad","class":"bad"}`, `{"text":"bad","plain":"bad","class":"bad"}`,
		`{"text":"good bad","plain":"good bad","class":"good"}`, `{"text":"good bad","plain":"good bad","class":"bad"}`,
		`{"text":"bad","plain":"bad","class":"bad"}`,
	} {
		b.WriteString("{\"index\":{}}\n" + d + "\n")
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("goodbad"), e.es.Bulk.WithRefresh("true")))
	sig := func(aggs string) map[string][]string {
		t.Helper()
		var m struct {
			Class struct {
				Buckets []struct {
					Key string
					Sig struct {
						Buckets []struct{ Key string }
					}
				}
			}
		}
		_ = json.Unmarshal([]byte(e.aggJSON("goodbad", "", `{"class":{"terms":{"field":"class"},"aggs":{"sig":`+aggs+`}}}`)), &m)
		out := map[string][]string{}
		for _, c := range m.Class.Buckets {
			out[c.Key] = []string{}
			for _, s := range c.Sig.Buckets {
				out[c.Key] = append(out[c.Key], s.Key)
			}
		}
		return out
	}
	check := func(name string, got map[string][]string, want string) {
		t.Helper()
		if g, _ := json.Marshal(got); string(g) != want {
			t.Errorf("%s: %s, want %s", name, g, want)
		}
	}
	// Each class's own word is what sets it apart from the whole index.
	check("significant_terms", sig(`{"significant_terms":{"field":"text"}}`), `{"bad":["bad"],"good":["good"]}`)
	check("significant_text", sig(`{"significant_text":{"field":"plain"}}`), `{"bad":["bad"],"good":["good"]}`)
	check("min_doc_count", sig(`{"significant_text":{"field":"plain","min_doc_count":4}}`), `{"bad":["bad"],"good":[]}`)
	check("exclude", sig(`{"significant_text":{"field":"plain","exclude":"good"}}`), `{"bad":["bad"],"good":[]}`)
	// Against the ugly documents, all "good", good is not significant.
	check("background_filter", sig(`{"significant_text":{"field":"plain","background_filter":{"term":{"ugly":true}}}}`), `{"bad":["bad"],"good":[]}`)
	check("chi_square", sig(`{"significant_terms":{"field":"text","chi_square":{}}}`), `{"bad":["bad"],"good":["good"]}`)
	// More caterpillars: both words of the good class are significant, and mutual
	// information ranks "good" far above caterpillars, which are everywhere.
	b.Reset()
	for _, d := range []string{`caterpillar eat snacks","class":"good`, `caterpillar sick","class":"good`, `caterpillar eat leaf","class":"good`,
		`caterpillar build cocoon","class":"good`, `caterpillar fly away","class":"good`, `caterpillar bad","class":"bad`,
		`caterpillar very bad","class":"bad`, `caterpillar is the enemy","class":"bad`, `good","class":"good`, `good","class":"good`} {
		b.WriteString("{\"index\":{}}\n{\"plain\":\"" + d + "\"}\n")
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("goodbad"), e.es.Bulk.WithRefresh("true")))
	keys := func(aggs string) string {
		t.Helper()
		var m struct {
			S struct{ Buckets []struct{ Key string } }
		}
		_ = json.Unmarshal([]byte(e.aggJSON("goodbad", `{"term":{"class":"good"}}`, aggs)), &m)
		var out []string
		for _, bk := range m.S.Buckets {
			out = append(out, bk.Key)
		}
		return strings.Join(out, ",")
	}
	if got := keys(`{"s":{"significant_text":{"field":"plain","gnd":{}}}}`); got != "good,caterpillar" {
		t.Errorf("gnd: %s", got)
	}
	if got := keys(`{"s":{"significant_text":{"field":"plain","mutual_information":{}}}}`); got != "good,caterpillar" {
		t.Errorf("mutual_information: %s", got)
	}
	got := e.aggJSON("goodbad", `{"term":{"class":"good"}}`, `{"s":{"significant_terms":{"field":"class","min_doc_count":1,"background_filter":{"term":{"ugly":true}}}}}`)
	if !strings.Contains(got, `"bg_count":2`) || !strings.Contains(got, `"doc_count":10`) {
		t.Errorf("counts: %s", got)
	}
	st, m := e.raw(e.es.Search(e.es.Search.WithIndex("goodbad"), e.es.Search.WithBody(strings.NewReader(`{"aggs":{"s":{"significant_terms":{"field":"class","jlp":{}}}}}`))))
	if st != 400 || !strings.Contains(jsonString(m), "[significant_terms] unknown field [jlp] did you mean [jlh]?") {
		t.Errorf("misspelled heuristic: %d %v", st, m)
	}
	if st, _ := e.searchStatus("goodbad", `{"aggs":{"s":{"significant_terms":{"field":"plain"}}}}`); st != 400 {
		t.Errorf("significant_terms on text without fielddata: %d", st)
	}
}
