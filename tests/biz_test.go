package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/bson"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/eslite"
	"github.com/trawlerhq/trawler/internal/devstack/hbaselite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/storage/es"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
)

// Two chains run the same generic task over the same pages, one reading price as a
// number and the other as text. Each stores under its own biz, <chain>.<step>, in every
// store: each biz holds exactly its chain's records, with its chain's price, once; a
// chain reading the same URLs neither replaced the other's records nor was
// deduplicated against them, and the two price types live in indexes of their own.
func TestTwoChainsSharingATaskKeepTheirOwnTypesInEveryStore(t *testing.T) {
	startHot(t)
	esURL, stopES, err := eslite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stopES()
	zk, stopHBase, err := hbaselite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stopHBase()
	queue := "biz-" + tenantOf(t)
	w := testWorker(t, engine.WorkerOptions{TaskQueue: queue, OutDir: t.TempDir(),
		Redis: shared.redis.Addr(), Kafka: hot.kafka, Mongo: hot.mongo, ES: esURL, HBase: zk})
	k, m := hotReaders(t)

	site := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var n int
		if _, err := fmt.Sscanf(r.URL.Path, "/item/%d", &n); err != nil {
			http.NotFound(rw, r)
			return
		}
		fmt.Fprintf(rw, `<html><body><h1 class="title">Widget %d</h1><span class="price">%d.25</span></body></html>`, n, n)
	}))
	defer site.Close()

	// price-num reads items 1-3, price as a number; price-text reads items 1-2, as text.
	chain := func(name, price string, items int) *crawl.Plan {
		var urls []string
		for i := 1; i <= items; i++ {
			urls = append(urls, fmt.Sprintf("'%s/item/%d'", site.URL, i))
		}
		yaml := `
name: ` + name + `
steps:
  - id: detail
    task: generic.html_detail
    params:
      urls: [` + strings.Join(urls, ", ") + `]
      fields: {title: h1.title, price: ` + price + `}
    store: [jsonl, kafka, mongo, es, hbase]
`
		return plan(t, name+".yaml", yaml)
	}
	want := map[string]map[string]any{"price_num.detail": {}, "price_text.detail": {}} // biz → key → price
	for i := 1; i <= 3; i++ {
		want["price_num.detail"][fmt.Sprintf("%s/item/%d", site.URL, i)] = float64(i) + 0.25
	}
	for i := 1; i <= 2; i++ {
		want["price_text.detail"][fmt.Sprintf("%s/item/%d", site.URL, i)] = fmt.Sprintf("%d.25", i)
	}
	runs := map[string]string{ // run id → the biz its chain's step stores under
		start(t, chain("price-num", "{css: .price, type: float}", 3), queue):   "price_num.detail",
		start(t, chain("price-text", "{css: .price, type: string}", 2), queue): "price_text.detail",
	}
	for id := range runs {
		noFailures(t, wait(t, id, 2*time.Minute))
	}

	// got: store → biz → key → prices read back (a key read twice shows two prices).
	got := map[string]map[string]map[string][]any{}
	read := func(store, biz string, it crawl.Item) {
		if it.Tenant != tenantOf(t) {
			return // another test's records
		}
		if it.Biz != biz {
			t.Errorf("%s: a record under %s says biz %s", store, biz, it.Biz)
		}
		if runs[it.RunID] != biz {
			t.Errorf("%s: %s %s was stored by run %s, the run storing %s", store, biz, it.Key, it.RunID, runs[it.RunID])
		}
		if got[store] == nil {
			got[store] = map[string]map[string][]any{}
		}
		if got[store][biz] == nil {
			got[store][biz] = map[string][]any{}
		}
		price := it.Data["price"]
		if n, ok := price.(json.Number); ok { // as Elasticsearch and HBase read numbers back
			f, err := n.Float64()
			if err != nil {
				t.Errorf("%s: %s %s has price %s: %v", store, biz, it.Key, n, err)
			}
			price = f
		}
		got[store][biz][it.Key] = append(got[store][biz][it.Key], price)
	}
	ctx := context.Background()
	if err := w.JSONL.Scan(func(it crawl.Item) error {
		read("jsonl", it.Biz, it)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := k.Scan(ctx, func(it crawl.Item) error {
		read("kafka", it.Biz, it)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	esc, err := es.Auth{}.NewClient([]string{esURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hb := w.Sinks["hbase"].(*hbase.Sink)
	for biz := range want {
		recs, err := m.Find(ctx, biz, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range recs {
			read("mongo", biz, it)
		}
		if err := es.Scan(ctx, esc, es.IndexName(biz), es.Selection{}, 0, func(it crawl.Item) error {
			read("es", biz, it)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := hb.ScanBiz(ctx, tenantOf(t), biz, true, func(it crawl.Item) error {
			read("hbase", biz, it) // every version: an overwrite would be a second one
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	for _, store := range []string{"jsonl", "kafka", "mongo", "es", "hbase"} {
		if len(got[store]) != len(want) {
			t.Errorf("%s holds the bizes %v, want %v", store, sortedBizes(got[store]), sortedBizes(want))
		}
		for biz, prices := range want {
			if n := len(got[store][biz]); n != len(prices) {
				t.Errorf("%s holds %d records of %s, want %d", store, n, biz, len(prices))
			}
			for key, price := range prices {
				read := got[store][biz][key]
				// Kafka may repeat a message on a retried write; it repeats the same record.
				if len(read) == 0 || (store != "kafka" && len(read) != 1) {
					t.Errorf("%s holds %s %s %d times, want once", store, biz, key, len(read))
					continue
				}
				for _, p := range read {
					if p != price {
						t.Errorf("%s: %s %s has price %#v (%T), want %#v (%T)", store, biz, key, p, p, price, price)
					}
				}
			}
		}
	}
}

func sortedBizes[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for biz := range m {
		out = append(out, biz)
	}
	sort.Strings(out)
	return out
}
