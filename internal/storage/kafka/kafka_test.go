package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack"
	"github.com/trawlerhq/trawler/internal/storage"
	"github.com/trawlerhq/trawler/internal/storage/kafka"
)

func startKafka(t *testing.T) []string {
	t.Helper()
	addrs, stop, err := devstack.StartKafka(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return addrs
}

func items(run string, n int, biz string) []crawl.Item {
	out := make([]crawl.Item, n)
	ts := time.Now().UTC().Truncate(time.Millisecond)
	for i := range out {
		out[i] = crawl.Item{
			ID: int64(1000 + i), Biz: biz, Key: fmt.Sprintf("%s:%d", biz, i), URL: fmt.Sprintf("http://site/%d", i),
			TS: ts, Hash: "h", Chain: "c", RunID: run, Tenant: "t", Data: map[string]any{"n": i, "title": "x"},
		}
	}
	return out
}

func TestWriteCountAndRetriedBatch(t *testing.T) {
	addrs := startKafka(t)
	s, err := kafka.Open(kafka.Config{Brokers: addrs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	stories := items("run-1", 120, "demo.story")
	comments := items("run-1", 80, "demo.comments")
	for i := range comments {
		comments[i].ID += 10_000
	}
	if err := s.Write(ctx, append(stories, comments...)); err != nil {
		t.Fatal(err)
	}
	// The same batch again, as after a retried activity: more messages, same ids.
	if err := s.Write(ctx, stories[:50]); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, items("run-2", 7, "demo.story")); err != nil {
		t.Fatal(err)
	}

	// A fresh sink (another process) reads the same back.
	r, err := kafka.Open(kafka.Config{Brokers: addrs})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ids, err := r.IDs(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 200 {
		t.Fatalf("distinct ids of run-1 = %d, want 200", len(ids))
	}
	repeats := 0
	for _, n := range ids {
		repeats += n - 1
	}
	if repeats != 50 {
		t.Errorf("repeated messages = %d, want the 50 of the retried batch", repeats)
	}
	if n, err := r.Count(ctx, "run-2"); err != nil || n != 7 {
		t.Errorf("Count(run-2) = %d, %v; want 7", n, err)
	}

	// Topic layout, partitions, keys and the id header, as a consumer sees them.
	conn, err := kafkago.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions("trawler.demo.story", "trawler.demo.comments")
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 6 {
		t.Errorf("partitions of the two topics = %d, want 3 each", len(parts))
	}
	rd := kafkago.NewReader(kafkago.ReaderConfig{Brokers: addrs, Topic: "trawler.demo.comments", Partition: 0, MaxWait: 200 * time.Millisecond})
	defer rd.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := rd.ReadMessage(rctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(m.Key), "@t:demo.comments:") || len(m.Headers) != 1 || m.Headers[0].Key != kafka.IDHeader {
		t.Errorf("message key %q headers %v", m.Key, m.Headers)
	}
	if !strings.Contains(string(m.Value), `"id":"`+string(m.Headers[0].Value)+`"`) || !strings.Contains(string(m.Value), `"run_id":"run-1"`) {
		t.Errorf("value %s does not carry the id of header %s", m.Value, m.Headers[0].Value)
	}
}

// Keys come from site content: a default-tenant key imitating acme's message key (its
// "@tenant:" form, the escape, 0x00) still gets a message key of its own, so a consumer
// that upserts by message key keeps acme's record as acme wrote it.
func TestHostileKeysGetTheirOwnMessageKey(t *testing.T) {
	addrs := startKafka(t)
	s, err := kafka.Open(kafka.Config{Brokers: addrs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	keys := []string{"k1", "@acme:k1", "@acme:k1\x00", "@:k1", "@@acme:k1", "@acme", "@", ":k1", "k1\x00@acme:k1", "@default:k1"}
	for _, tenant := range []string{"acme", crawl.DefaultTenant} {
		batch := items("run-"+tenant, len(keys), "demo.story")
		for i := range batch {
			batch[i].Key, batch[i].Tenant, batch[i].Data["title"] = keys[i], tenant, tenant+" "+keys[i]
		}
		if err := s.Write(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	// What a consumer that keeps one copy per message key ends up with.
	conn, err := kafkago.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions("trawler.demo.story")
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	latest := map[string]crawl.Item{}
	messages := 0
	for _, p := range parts {
		leader, err := kafkago.DialLeader(ctx, "tcp", addrs[0], p.Topic, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		end, err := leader.ReadLastOffset()
		leader.Close()
		if err != nil {
			t.Fatal(err)
		}
		rd := kafkago.NewReader(kafkago.ReaderConfig{Brokers: addrs, Topic: p.Topic, Partition: p.ID, MaxWait: 200 * time.Millisecond})
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		for range end {
			m, err := rd.ReadMessage(rctx)
			if err != nil {
				t.Fatalf("partition %d: %v", p.ID, err)
			}
			var it crawl.Item
			if err := json.Unmarshal(m.Value, &it); err != nil {
				t.Fatal(err)
			}
			latest[string(m.Key)] = it
			messages++
		}
		cancel()
		rd.Close()
	}
	if messages != 2*len(keys) {
		t.Fatalf("%d messages, want %d", messages, 2*len(keys))
	}
	if len(latest) != 2*len(keys) {
		t.Errorf("%d distinct message keys for %d keys of two tenants, want %d", len(latest), len(keys), 2*len(keys))
	}
	found := map[string]bool{}
	for mk, it := range latest {
		if mk != storage.TenantKey(it.Tenant, it.Key) || it.RunID != "run-"+it.Tenant || it.Data["title"] != it.Tenant+" "+it.Key {
			t.Errorf("message key %q holds tenant %q key %q run %q title %v", mk, it.Tenant, it.Key, it.RunID, it.Data["title"])
		}
		found[it.Tenant+"/"+it.Key] = true
	}
	for _, tenant := range []string{"acme", crawl.DefaultTenant} {
		for _, key := range keys {
			if !found[tenant+"/"+key] {
				t.Errorf("a consumer lost %s's record %q", tenant, key)
			}
		}
	}
}

// CountSince reads only the messages from a time on (a run's part of a long topic).
func TestCountSince(t *testing.T) {
	s, err := kafka.Open(kafka.Config{Brokers: startKafka(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	old := items("run-old", 40, "demo.story")
	for i := range old {
		old[i].TS = old[i].TS.Add(-2 * time.Hour)
	}
	if err := s.Write(ctx, old); err != nil {
		t.Fatal(err)
	}
	fresh := items("run-new", 30, "demo.story")
	for i := range fresh {
		fresh[i].ID += 5000
		fresh[i].Key += ":new"
	}
	if err := s.Write(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Hour)
	for run, want := range map[string]int{"run-old": 0, "run-new": 30} {
		if n, err := s.CountSince(ctx, run, since); err != nil || n != want {
			t.Errorf("CountSince(%s, an hour ago) = %d, %v; want %d", run, n, err, want)
		}
	}
	if n, err := s.Count(ctx, "run-old"); err != nil || n != 40 {
		t.Errorf("Count(run-old) = %d, %v; want 40", n, err)
	}
	if n, err := s.CountSince(ctx, "run-new", time.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Errorf("CountSince(an hour ahead) = %d, %v; want 0", n, err)
	}
}

func TestBrokerDownFailsTheWriteWithTheCause(t *testing.T) {
	dir := t.TempDir()
	addrs, stop, err := devstack.StartKafka(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := kafka.Open(kafka.Config{Brokers: addrs, WriteTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Write(ctx, items("run-1", 10, "demo.story")); err != nil {
		t.Fatal(err)
	}
	_ = stop()
	err = s.Write(ctx, items("run-2", 10, "demo.story"))
	if err == nil || !strings.Contains(err.Error(), "kafka sink") {
		t.Fatalf("write with the broker down: %v", err)
	}
	t.Logf("broker down: %v", err)

	// Back on the same port and data: the retried write goes through, nothing is lost.
	var port int
	fmt.Sscanf(addrs[0][strings.LastIndex(addrs[0], ":")+1:], "%d", &port)
	_, stop, err = devstack.StartKafkaOn(dir, []int{port})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err = s.Write(ctx, items("run-2", 10, "demo.story")); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("write after the restart: %v", err)
	}
	for run, want := range map[string]int{"run-1": 10, "run-2": 10} {
		if n, err := s.Count(ctx, run); err != nil || n != want {
			t.Errorf("Count(%s) = %d, %v; want %d", run, n, err, want)
		}
	}
}

func TestBadTopicName(t *testing.T) {
	s, err := kafka.Open(kafka.Config{Brokers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Write(context.Background(), items("r", 1, "demo.st ory"))
	if err == nil || !strings.Contains(err.Error(), "topic names allow only") {
		t.Fatalf("err = %v", err)
	}
	if _, err := kafka.Open(kafka.Config{}); err == nil {
		t.Fatal("Open without brokers succeeded")
	}
}
