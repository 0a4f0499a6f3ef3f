package tests

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/bson"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/storage/kafka"
	"github.com/trawlerhq/trawler/internal/storage/mongo"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// hot is the embedded Kafka and MongoDB of the hot-storage tests, started once for the
// package by startHot, with their files under the package's data directory.
var hot struct {
	once      sync.Once
	err       error
	kafkaDir  string
	kafka     []string
	kafkaStop func() error
	mongo     string
}

func startHot(t *testing.T) {
	t.Helper()
	hot.once.Do(func() {
		dir := filepath.Join(shared.dir, "hot")
		hot.kafkaDir = dir
		if hot.kafka, hot.kafkaStop, hot.err = devstack.StartKafka(dir); hot.err != nil {
			return
		}
		hot.mongo, _, hot.err = devstack.StartMongo(dir)
	})
	if hot.err != nil {
		t.Fatalf("start the embedded Kafka and MongoDB: %v", hot.err)
	}
}

// hotWorker starts a worker storing to jsonl, kafka and mongo on its own task queue,
// for one test, and opens readers of the two stores (clients of their own).
func hotWorker(t *testing.T) (queue string, w *engine.Worker, k *kafka.Sink, m *mongo.Sink) {
	t.Helper()
	startHot(t)
	queue = "hot-" + tenantOf(t)
	w = testWorker(t, engine.WorkerOptions{TaskQueue: queue, OutDir: filepath.Join(shared.dir, "hot", "out"),
		Redis: shared.redis.Addr(), Kafka: hot.kafka, Mongo: hot.mongo})
	k, m = hotReaders(t)
	return queue, w, k, m
}

// hotReaders opens readers of the embedded Kafka and MongoDB, clients of their own.
func hotReaders(t *testing.T) (*kafka.Sink, *mongo.Sink) {
	t.Helper()
	startHot(t)
	k, err := kafka.Open(kafka.Config{Brokers: hot.kafka})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	m, err := mongo.Open(mongo.Config{URI: hot.mongo, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return k, m
}

// storeHot makes every storing step of a plan store to jsonl, kafka and mongo, as a
// chain file with `store: [jsonl, kafka, mongo]` does.
func storeHot(p *crawl.Plan) *crawl.Plan {
	for i := range p.Steps {
		if len(p.Steps[i].Store) > 0 {
			p.Steps[i].Store = []string{"jsonl", "kafka", "mongo"}
		}
	}
	return p
}

// hotRecords reads a run back from the three stores: key → id per store.
func hotRecords(t *testing.T, runID string, js *jsonl.Sink, k *kafka.Sink, m *mongo.Sink) (jsonlIDs, mongoIDs map[string]int64, kafkaIDs map[string]map[int64]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jsonlIDs = map[string]int64{}
	if err := js.Scan(func(it crawl.Item) error {
		if it.RunID == runID {
			if _, dup := jsonlIDs[it.Key]; dup {
				t.Errorf("jsonl holds %s twice", it.Key)
			}
			jsonlIDs[it.Key] = it.ID
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mongoIDs = map[string]int64{}
	for _, biz := range []string{"demo.story", "demo.comments"} {
		recs, err := m.Find(ctx, biz, bson.D{{Key: "run_id", Value: runID}})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range recs {
			mongoIDs[it.Key] = it.ID
		}
	}
	kafkaIDs = map[string]map[int64]int{}
	if err := k.Scan(ctx, func(it crawl.Item) error {
		if it.RunID == runID {
			if kafkaIDs[it.Key] == nil {
				kafkaIDs[it.Key] = map[int64]int{}
			}
			kafkaIDs[it.Key][it.ID]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return jsonlIDs, mongoIDs, kafkaIDs
}

// assertHotStored checks that every store holds exactly the run's stories and comments,
// under the same ids: MongoDB once per key, Kafka with one id per key (repeated
// messages, if any, carry the same id).
func assertHotStored(t *testing.T, runID string, o demosite.Options, pages int, js *jsonl.Sink, k *kafka.Sink, m *mongo.Sink) {
	t.Helper()
	stories, comments := demosite.Expected(o, pages)
	jsonlIDs, mongoIDs, kafkaIDs := hotRecords(t, runID, js, k, m)
	for name, n := range map[string]int{"jsonl": len(jsonlIDs), "mongo": len(mongoIDs), "kafka": len(kafkaIDs)} {
		if n != stories+comments {
			t.Errorf("%s holds %d records of the run, want %d stories and %d comments", name, n, stories, comments)
		}
	}
	repeats := 0
	for key, id := range jsonlIDs {
		if mongoIDs[key] != id {
			t.Errorf("%s: id %d in jsonl, %d in MongoDB", key, id, mongoIDs[key])
		}
		ids := kafkaIDs[key]
		if len(ids) != 1 || ids[id] == 0 {
			t.Errorf("%s: ids in Kafka %v, want only %d", key, ids, id)
		}
		repeats += ids[id] - 1
	}
	ctx := context.Background()
	if n, err := k.Count(ctx, runID); err != nil || n != stories+comments {
		t.Errorf("kafka Count = %d, %v; want %d", n, err, stories+comments)
	}
	if n, err := m.Count(ctx, runID); err != nil || n != stories+comments {
		t.Errorf("mongo Count = %d, %v; want %d", n, err, stories+comments)
	}
	t.Logf("%d records in each store; %d repeated Kafka messages (same ids)", stories+comments, repeats)
}

func TestHotStorageHoldsExactlyTheDemo(t *testing.T) {
	queue, w, k, m := hotWorker(t)
	o := demosite.Options{Pages: 3}
	site := startSite(t, o)
	id := start(t, storeHot(plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=2")), queue)
	s := wait(t, id, 2*time.Minute)
	if _, _, _, failed := s.Totals(); failed != 0 {
		t.Fatalf("%d inputs failed: %+v", failed, s.Failures)
	}
	assertHotStored(t, id, o, 2, w.JSONL, k, m)

	// The records are the hand-off to processors: each claimed exactly once, with flag 1.
	// Claims are per tenant and the test has its own, so claim until nothing is left
	// and look at this run's records.
	stories, _ := demosite.Expected(o, 2)
	claimed := map[string]int{}
	for {
		got, err := m.Claim(context.Background(), tenantOf(t), "demo.story", 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		for _, it := range got {
			if it.RunID != id {
				continue
			}
			claimed[it.Key]++
			if it.Flag != 1 || it.Tenant != tenantOf(t) || it.Data["title"] == nil {
				t.Errorf("claimed %+v", it)
			}
		}
	}
	if len(claimed) != stories {
		t.Errorf("claimed %d stories of the run, want %d", len(claimed), stories)
	}
	assertOnce(t, claimed)
}

// waitOutage polls a run's status until it shows an outage of dep (a prefix of the
// dependency's name) whose error contains
// cause, with inputs waiting for it; the run must stay running meanwhile.
func waitOutage(t *testing.T, id, dep, cause string) workflows.Outage {
	t.Helper()
	var seen []workflows.Outage
	var found workflows.Outage
	if !poll(time.Minute, func() bool {
		st, err := engine.Describe(context.Background(), shared.client, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != "running" {
			t.Fatalf("run %s while %s is down", st.State, dep)
		}
		if st.Progress == nil {
			return false
		}
		seen = st.Progress.Outages
		i := slices.IndexFunc(seen, func(o workflows.Outage) bool {
			return strings.HasPrefix(o.Dependency, dep) && strings.Contains(o.Cause, cause) && o.Waiting > 0 && !o.Since.IsZero() && len(o.Steps) > 0
		})
		if i >= 0 {
			found = seen[i]
		}
		return i >= 0
	}) {
		t.Fatalf("status while %s is down shows outages %+v, want %s with its error %q and the inputs waiting", dep, seen, dep, cause)
	}
	return found
}

func TestKafkaOutageLosesNothing(t *testing.T) {
	queue, w, k, m := hotWorker(t)
	// Story and comments pages past the 30th wait until Kafka is down, so that work is
	// left to meet the outage however fast the run (a fixed latency once was not enough).
	o := demosite.Options{Pages: 4, Latency: 60 * time.Millisecond}
	site, served, release := gatedSite(t, startSite(t, o), "/item/", 30)
	id := start(t, storeHot(plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=4")), queue)
	eventually(t, 2*time.Minute, "30 story and comments pages served", func() bool { return served() >= 30 })
	_, p, _ := net.SplitHostPort(hot.kafka[0])
	port, _ := strconv.Atoi(p)
	if err := hot.kafkaStop(); err != nil {
		t.Fatal(err)
	}
	t.Log("stopped Kafka")
	release()

	// `trawler status` shows which store is down, since when, the inputs waiting for
	// it and its error.
	out := waitOutage(t, id, "store kafka", "in kafka: kafka sink:")
	t.Logf("status: %+v", out)

	addrs, stop, err := devstack.StartKafkaOn(hot.kafkaDir, []int{port})
	if err != nil {
		t.Fatalf("restart Kafka on port %d: %v", port, err)
	}
	hot.kafkaStop = stop
	if fmt.Sprint(addrs) != fmt.Sprint(hot.kafka) {
		t.Fatalf("Kafka came back on %v, want %v", addrs, hot.kafka)
	}
	t.Log("restarted Kafka")

	s := wait(t, id, 3*time.Minute)
	if _, _, _, failed := s.Totals(); failed != 0 {
		t.Errorf("%d inputs failed: %+v", failed, s.Failures)
	}
	assertHotStored(t, id, o, 4, w.JSONL, k, m)
	if st, err := engine.Describe(context.Background(), shared.client, id); err != nil || st.State != "completed" || len(st.Failing) != 0 {
		t.Errorf("after the outage: %+v, %v", st, err)
	}
}
