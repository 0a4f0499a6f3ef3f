package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack"
	"github.com/trawlerhq/trawler/internal/storage/mongo"
)

func startMongo(t *testing.T) string {
	t.Helper()
	uri, stop, err := devstack.StartMongo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return uri
}

func open(t *testing.T, cfg mongo.Config) *mongo.Sink {
	t.Helper()
	s, err := mongo.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func items(run string, n int, biz string, ts time.Time) []crawl.Item {
	out := make([]crawl.Item, n)
	for i := range out {
		out[i] = crawl.Item{
			ID: ts.UnixNano() + int64(i), Biz: biz, Key: fmt.Sprintf("%s:%d", biz, i), URL: fmt.Sprintf("http://site/%d", i),
			TS: ts, Hash: "h1", Chain: "c", RunID: run, Tenant: "t",
			Data: map[string]any{"n": i, "title": "story", "tags": []any{"a", "b"}, "by": map[string]any{"name": "x"}},
		}
	}
	return out
}

func TestUpsertCountAndRetriedBatch(t *testing.T) {
	uri := startMongo(t)
	s := open(t, mongo.Config{URI: uri})
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	batch := append(items("run-1", 60, "demo.story", now), items("run-1", 40, "demo.comments", now)...)
	if err := s.Write(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, batch); err != nil { // a retried batch
		t.Fatal(err)
	}
	if n, err := s.Count(ctx, "run-1"); err != nil || n != 100 {
		t.Fatalf("Count(run-1) = %d, %v; want 100", n, err)
	}
	embedded, err := s.Embedded(ctx)
	if err != nil || !embedded {
		t.Errorf("Embedded = %v, %v; want FerretDB detected", embedded, err)
	}
	// The items are tenant "t"'s: their _id carries the tenant, their key does not.
	got, err := s.Find(ctx, "demo.story", bson.D{{Key: "_id", Value: mongo.DocID("t", "demo.story:7")}})
	if err != nil || len(got) != 1 {
		t.Fatalf("find demo.story:7: %v %v", got, err)
	}
	it := got[0]
	if it.Key != "demo.story:7" || it.ID != batch[7].ID || it.Biz != "demo.story" || !it.TS.Equal(now) || it.Hash != "h1" || it.Flag != 0 || it.RunID != "run-1" ||
		it.Tenant != "t" || it.Chain != "c" || it.URL != "http://site/7" || fmt.Sprint(it.Data["tags"]) != "[a b]" || fmt.Sprint(it.Data["n"]) != "7" {
		t.Errorf("stored record %+v", it)
	}

	// A later run re-crawls the stories: latest copy wins, one document per key.
	later := items("run-2", 60, "demo.story", now.Add(time.Hour))
	for i := range later {
		later[i].Hash = "h2"
	}
	if err := s.Write(ctx, later); err != nil {
		t.Fatal(err)
	}
	// Another process (a fresh sink: indexes exist already) writes the same again.
	if err := open(t, mongo.Config{URI: uri}).Write(ctx, later); err != nil {
		t.Fatal(err)
	}
	n1, _ := s.Count(ctx, "run-1")
	n2, _ := s.Count(ctx, "run-2")
	if n1 != 40 || n2 != 60 {
		t.Errorf("after the re-crawl: run-1 holds %d (want the 40 comments), run-2 %d (want 60)", n1, n2)
	}
	idx, err := s.Database().Collection("demo_story").Indexes().ListSpecifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range idx {
		names = append(names, i.Name)
	}
	if strings.Join(names, ",") != "_id_,biz_1,flag_1_ts_1,ts_1" {
		t.Errorf("indexes %v", names)
	}
}

func TestClaimNeverHandsOutARecordTwice(t *testing.T) {
	uri := startMongo(t)
	s := open(t, mongo.Config{URI: uri})
	ctx := context.Background()
	const total = 120
	if err := s.Write(ctx, items("run-1", total, "demo.story", time.Now().UTC())); err != nil {
		t.Fatal(err)
	}
	// Two processors (two clients), claiming in small bites at once.
	claimers := []*mongo.Sink{s, open(t, mongo.Config{URI: uri})}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, len(claimers))
	for _, c := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := c.Claim(ctx, "t", "demo.story", 7)
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, it := range got {
					seen[it.Key]++
					if it.Flag != 1 {
						t.Errorf("claimed %s with flag %d", it.Key, it.Flag)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != total {
		t.Errorf("claimed %d distinct records, want %d", len(seen), total)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s handed out %d times", k, n)
		}
	}
	// Re-crawling a claimed record keeps its flag: it is not handed out again.
	if err := s.Write(ctx, items("run-2", 5, "demo.story", time.Now().UTC())); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Claim(ctx, "t", "demo.story", 10); err != nil || len(got) != 0 {
		t.Errorf("claim after a re-crawl of claimed records: %d records, %v", len(got), err)
	}
	// A new record is.
	fresh := items("run-2", 1, "demo.story", time.Now().UTC())
	fresh[0].Key = "demo.story:new"
	if err := s.Write(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Claim(ctx, "t", "demo.story", 10); err != nil || len(got) != 1 || got[0].Key != "demo.story:new" {
		t.Errorf("claim of a new record: %v, %v", got, err)
	}
}

// Records are per tenant: the same biz/key crawled by two tenants is two documents, and
// each tenant claims only its own. The default tenant keeps the bare key as _id, as
// before records were per tenant.
func TestTenantsKeepSeparateRecords(t *testing.T) {
	uri := startMongo(t)
	s := open(t, mongo.Config{URI: uri})
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	var batch []crawl.Item
	for _, tenant := range []string{"a", "b", crawl.DefaultTenant} {
		it := items("run-1", 1, "demo.story", now)[0]
		it.Tenant, it.Data["by"] = tenant, tenant
		batch = append(batch, it)
	}
	if err := s.Write(ctx, batch); err != nil {
		t.Fatal(err)
	}
	all, err := s.Find(ctx, "demo.story", bson.D{})
	if err != nil || len(all) != 3 {
		t.Fatalf("%d documents (%v) for one key of three tenants, want 3", len(all), err)
	}
	var raw []bson.M
	cur, err := s.Database().Collection("demo_story").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &raw); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range raw {
		ids = append(ids, fmt.Sprintf("%v=%v", d["_id"], d["tenant"]))
	}
	if got := strings.Join(ids, " "); got != "@a:demo.story:0=a @b:demo.story:0=b demo.story:0=default" {
		t.Errorf("_id=tenant: %s", got)
	}
	// A document stored without a tenant is the default tenant's.
	if _, err := s.Database().Collection("demo_story").InsertOne(ctx, bson.D{{Key: "_id", Value: "old"}, {Key: "biz", Value: "demo.story"},
		{Key: "ts", Value: now.Add(-time.Hour)}, {Key: "flag", Value: 0}}); err != nil {
		t.Fatal(err)
	}

	claim := func(tenant string, want ...string) {
		t.Helper()
		got, err := s.Claim(ctx, tenant, "demo.story", 10)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, it := range got {
			keys = append(keys, it.Key+"/"+fmt.Sprint(it.Data["by"]))
		}
		if strings.Join(keys, " ") != strings.Join(want, " ") {
			t.Errorf("claim for %s: %v, want %v", tenant, keys, want)
		}
	}
	claim("a", "demo.story:0/a")
	claim("a")
	claim("b", "demo.story:0/b")
	claim("", "old/<nil>", "demo.story:0/default")
	claim(crawl.DefaultTenant)

	r, err := mongo.OpenReader(uri, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tenant := range []string{"a", crawl.DefaultTenant} {
		it, err := r.Get(ctx, tenant, "demo.story", "demo.story:0")
		if err != nil || it.Key != "demo.story:0" || it.Tenant != tenant || it.Flag != 1 {
			t.Errorf("Get of %s's record: %+v %v", tenant, it, err)
		}
	}
	if _, err := r.Get(ctx, "c", "demo.story", "demo.story:0"); !errors.Is(err, mongo.ErrNoRecord) {
		t.Errorf("Get of a tenant without the record: %v", err)
	}
}

// Keys come from site content: a default-tenant key imitating acme's _id, the
// separator or the escape, or holding 0x00, is a record of its own and leaves acme's as
// acme wrote it.
func TestHostileKeysCannotOverwriteAnotherTenantsRecord(t *testing.T) {
	uri := startMongo(t)
	s := open(t, mongo.Config{URI: uri})
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	keys := []string{"k1", "@acme:k1", "@acme:k1\x00", "@:k1", "@@acme:k1", "@acme", "@", ":k1", "k1\x00@acme:k1", "@default:k1"}
	write := func(tenant string) {
		t.Helper()
		var batch []crawl.Item
		for i, key := range keys {
			it := items("run-"+tenant, 1, "demo.story", now)[0]
			it.ID, it.Key, it.Tenant, it.Data = int64(i), key, tenant, map[string]any{"by": tenant, "key": key}
			batch = append(batch, it)
		}
		if err := s.Write(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	write("acme") // acme first: an overwrite would replace its records
	write(crawl.DefaultTenant)

	all, err := s.Find(ctx, "demo.story", bson.D{})
	if err != nil || len(all) != 2*len(keys) {
		t.Fatalf("%d records (%v) for %d keys of two tenants, want %d", len(all), err, len(keys), 2*len(keys))
	}
	r, err := mongo.OpenReader(uri, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tenant := range []string{"acme", crawl.DefaultTenant} {
		for _, key := range keys {
			it, err := r.Get(ctx, tenant, "demo.story", key)
			if err != nil || it.Key != key || it.Tenant != tenant || it.RunID != "run-"+tenant || it.Data["by"] != tenant || it.Data["key"] != key {
				t.Errorf("Get(%s, %q) = key %q tenant %q run %q data %v, %v", tenant, key, it.Key, it.Tenant, it.RunID, it.Data, err)
			}
		}
	}
	got, err := s.Claim(ctx, "acme", "demo.story", 100)
	if err != nil || len(got) != len(keys) {
		t.Fatalf("acme claimed %d records (%v), want its %d", len(got), err, len(keys))
	}
	for _, it := range got {
		if it.Tenant != "acme" || it.Data["by"] != "acme" || it.Data["key"] != it.Key {
			t.Errorf("acme claimed %q of tenant %q with data %v", it.Key, it.Tenant, it.Data)
		}
	}
}

func TestSweeperRemovesOnlyExpiredRecords(t *testing.T) {
	uri := startMongo(t)
	s := open(t, mongo.Config{URI: uri, Retention: time.Hour, SweepEvery: 100 * time.Millisecond})
	ctx := context.Background()
	now := time.Now().UTC()
	old := items("run-1", 30, "demo.story", now.Add(-2*time.Hour))
	fresh := items("run-1", 20, "demo.story", now.Add(-30*time.Minute))
	for i := range fresh {
		fresh[i].Key = fmt.Sprintf("fresh:%d", i)
	}
	if err := s.Write(ctx, append(old, fresh...)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := s.Count(ctx, "run-1")
		if err != nil {
			t.Fatal(err)
		}
		if n == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records left after sweeping, want the 20 fresh ones", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	left, err := s.Find(ctx, "demo.story", bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range left {
		if !strings.HasPrefix(it.Key, "fresh:") {
			t.Errorf("%s (ts %s) survived the sweep", it.Key, it.TS)
		}
	}
}

func TestServerDownFailsTheWriteWithTheCause(t *testing.T) {
	dir := t.TempDir()
	uri, stop, err := devstack.StartMongo(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, mongo.Config{URI: uri})
	ctx := context.Background()
	now := time.Now().UTC()
	if err := s.Write(ctx, items("run-1", 10, "demo.story", now)); err != nil {
		t.Fatal(err)
	}
	_ = stop()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = s.Write(wctx, items("run-2", 10, "demo.story", now))
	cancel()
	if err == nil || !strings.Contains(err.Error(), "mongo sink: upsert 10 records into trawler.demo_story") {
		t.Fatalf("write with the server down: %v", err)
	}
	t.Logf("server down: %v", err)
	// Back on the same port and files: the data is there and the write goes through.
	_, stop, err = devstack.StartMongoOn(dir, strings.TrimSuffix(strings.TrimPrefix(uri, "mongodb://"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := s.Write(ctx, items("run-2", 10, "demo.story", now)); err != nil {
		t.Fatalf("write after the restart: %v", err)
	}
	if n, err := s.Count(ctx, "run-2"); err != nil || n != 10 {
		t.Errorf("Count(run-2) = %d, %v", n, err)
	}
}
