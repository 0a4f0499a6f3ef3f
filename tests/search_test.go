package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/devstack/eslite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/storage/es"
)

// esSearch posts a search body to the alias and decodes the answer.
func esSearch(t *testing.T, c *es.Client, body string) map[string]any {
	t.Helper()
	res, err := c.Search(c.Search.WithIndex("trawler-items"), c.Search.WithBody(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.IsError() {
		t.Fatalf("search %s: %s", body, res.String())
	}
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSearchAfterTheDemoChain(t *testing.T) {
	dir := t.TempDir()
	url, stop, err := eslite.Start(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	queue := "search-" + fmt.Sprint(time.Now().UnixNano())
	w, err := engine.NewWorker(shared.client, engine.WorkerOptions{TaskQueue: queue, OutDir: shared.sink.Dir(), ES: url, Log: quiet, Fetch: fetch.Options{AllowPrivate: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	o := demosite.Options{Pages: 1}
	site := startSite(t, o)
	p := plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=1")
	for i := range p.Steps {
		if len(p.Steps[i].Store) > 0 {
			p.Steps[i].Store = append(p.Steps[i].Store, "es")
		}
	}
	id := start(t, p, queue)
	wait(t, id, 2*time.Minute)
	stories, comments := demosite.Expected(o, 1)
	if n, err := w.Sinks["es"].Count(context.Background(), id); err != nil || n != stories+comments {
		t.Fatalf("es holds %d documents of the run (%v), want %d", n, err, stories+comments)
	}

	c, err := es.Auth{}.NewClient([]string{url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A phrase from one known story finds that story first.
	story, _ := o.Story(7)
	phrase, _ := json.Marshal(story.Title)
	res := esSearch(t, c, `{"query":{"match_phrase":{"data.title":`+string(phrase)+`}}}`)
	hits := res["hits"].(map[string]any)["hits"].([]any)
	if len(hits) == 0 || hits[0].(map[string]any)["_id"] != es.DocID(tenantOf(t), "demo:story:7") {
		t.Fatalf("phrase %s: first hit %v, want demo:story:7", phrase, hits)
	}
	// A terms aggregation over biz matches what was stored.
	res = esSearch(t, c, `{"size":0,"aggs":{"by_biz":{"terms":{"field":"biz"}}}}`)
	got := map[string]int{}
	for _, b := range res["aggregations"].(map[string]any)["by_biz"].(map[string]any)["buckets"].([]any) {
		bm := b.(map[string]any)
		got[bm["key"].(string)] = int(bm["doc_count"].(float64))
	}
	if got["demo.story"] != stories || got["demo.comments"] != comments {
		t.Fatalf("biz buckets %v, want %d stories and %d comments", got, stories, comments)
	}
	// A restart keeps the index.
	w.Stop()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	url2, stop2, err := eslite.Start(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	c2, _ := es.Auth{}.NewClient([]string{url2}, nil)
	res = esSearch(t, c2, `{"query":{"term":{"run_id":"`+id+`"}},"track_total_hits":true,"size":0}`)
	if total := res["hits"].(map[string]any)["total"].(map[string]any)["value"].(float64); int(total) != stories+comments {
		t.Fatalf("after restart: %v documents of the run, want %d", total, stories+comments)
	}
}
