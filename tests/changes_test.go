package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/changes"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/devstack/hbaselite"
	"github.com/trawlerhq/trawler/internal/engine"
)

// changesChain recrawls the 30 stories of one feed page, storing them in HBase; with
// `changes: kafka` when events is set.
func changesChain(site string, events bool) string {
	opt := ""
	if events {
		opt = "    changes: kafka\n"
	}
	return `name: changes
defaults:
  params: {base_url: "` + site + `"}
steps:
  - id: feed
    task: demo.feed
    from: feed
    max_depth: 10
    params: {pages: 1}
  - id: story
    task: demo.story
    from: feed
    store: [jsonl, hbase]
    recrawl: {min: 10m, max: 1h}
` + opt
}

// TestChangeEvents crawls the demo site, then the site retitles 5 stories and deletes
// one (404), and a planned recrawl visits them all: the topic trawler.changes carries
// exactly 5 change events naming the title alone with its old and new value, and one
// removed event for the deleted story; the first crawl, whose records are all new,
// sends none, and neither does the same chain without `changes: kafka`.
func TestChangeEvents(t *testing.T) {
	startHot(t)
	zk, stopHBase, err := hbaselite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stopHBase()
	begin := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := demosite.NewClock(begin) // the worker's recrawl plans read it
	queue := "changes-" + fmt.Sprint(time.Now().UnixNano())
	testWorker(t, engine.WorkerOptions{TaskQueue: queue, Redis: shared.redis.Addr(), Kafka: hot.kafka, HBase: zk, Clock: clock.Now})

	retitled, deleted := []int{2, 5, 8, 11, 14}, 7
	crawlTwice := func(events bool, tenant string) (first, second string) {
		edits := &demosite.Edits{}
		site := startSite(t, demosite.Options{Pages: 1, Edits: edits})
		p := plan(t, "changes.yaml", changesChain(site, events))
		p.Tenant = tenant
		clock.Set(begin)
		first = start(t, p, queue)
		if s := wait(t, first, 2*time.Minute); s.Steps[1].Items != 30 {
			t.Fatalf("first crawl stored %d stories, want 30", s.Steps[1].Items)
		}
		edits.Retitle(retitled...)
		edits.Delete(deleted, 404)
		clock.Set(begin.Add(2 * time.Hour)) // past max: every story is due
		second = start(t, p, queue)
		if s := wait(t, second, 2*time.Minute); s.Steps[1].Due != 30 || s.Steps[1].Items != len(retitled) {
			t.Fatalf("recrawl claimed %d stories and stored %d, want 30 and %d", s.Steps[1].Due, s.Steps[1].Items, len(retitled))
		}
		return first, second
	}

	first, second := crawlTwice(true, tenantOf(t))
	evs := changeEvents(t)
	if n := len(evs[first]); n != 0 {
		t.Errorf("the first crawl (every record new) sent %d change events, want none: %+v", n, evs[first])
	}
	var changed []int
	var removed []changes.Event
	for _, ev := range evs[second] {
		if ev.Type == changes.Removed {
			removed = append(removed, ev)
			continue
		}
		var id int
		fmt.Sscanf(ev.Key, "demo:story:%d", &id)
		changed = append(changed, id)
		still, _ := demosite.Options{Pages: 1}.Story(id)
		want := map[string]changes.Field{"title": {Old: quoteJSON(still.Title), New: quoteJSON(still.Title + " (updated)")}}
		if ev.Type != changes.Changed || ev.Biz != "demo.story" || ev.Tenant != tenantOf(t) || ev.Step != "story" || ev.At.IsZero() || !sameFields(ev.Fields, want) {
			t.Errorf("change event %+v; want type changed, biz demo.story, tenant %s, step story, its time and fields %s", ev, tenantOf(t), jsonOf(want))
		}
	}
	slices.Sort(changed)
	if !slices.Equal(changed, retitled) {
		t.Errorf("the recrawl sent change events for stories %v, want exactly %v", changed, retitled)
	}
	if len(removed) != 1 || removed[0].Key != fmt.Sprintf("demo:story:%d", deleted) || removed[0].Status != 404 ||
		!strings.HasSuffix(removed[0].URL, fmt.Sprintf("/item/%d", deleted)) || removed[0].RunID != second || removed[0].Fields != nil {
		t.Errorf("removed events %+v; want one for demo:story:%d with status 404 and its URL", removed, deleted)
	}

	first, second = crawlTwice(false, tenantOf(t)+"-off")
	evs = changeEvents(t)
	if n := len(evs[first]) + len(evs[second]); n != 0 {
		t.Errorf("a step without `changes:` sent %d change events: %+v", n, append(evs[first], evs[second]...))
	}
}

// changeEvents reads the topic trawler.changes back with a Kafka client, every
// partition to its end, and returns the events by run.
func changeEvents(t *testing.T) map[string][]changes.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := kafkago.DialContext(ctx, "tcp", hot.kafka[0])
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions(crawl.ChangesTopic)
	conn.Close()
	if err != nil {
		t.Fatalf("partitions of %s: %v", crawl.ChangesTopic, err)
	}
	out := map[string][]changes.Event{}
	for _, p := range parts {
		leader, err := kafkago.DialLeader(ctx, "tcp", net.JoinHostPort(p.Leader.Host, fmt.Sprint(p.Leader.Port)), p.Topic, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		first, last, err := leader.ReadOffsets()
		leader.Close()
		if err != nil {
			t.Fatal(err)
		}
		if last <= first {
			continue
		}
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: hot.kafka, Topic: p.Topic, Partition: p.ID, MaxWait: 50 * time.Millisecond})
		if err := r.SetOffset(first); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("read %s/%d: %v", p.Topic, p.ID, err)
			}
			var ev changes.Event
			if err := json.Unmarshal(m.Value, &ev); err != nil {
				t.Fatalf("%s/%d offset %d: %v: %s", p.Topic, p.ID, m.Offset, err, m.Value)
			}
			if want := changes.MessageKey(ev); string(m.Key) != want {
				t.Errorf("message key %q, want %q", m.Key, want)
			}
			out[ev.RunID] = append(out[ev.RunID], ev)
			if m.Offset >= last-1 {
				break
			}
		}
		r.Close()
	}
	return out
}

func quoteJSON(s string) json.RawMessage { b, _ := json.Marshal(s); return b }

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

func sameFields(a, b map[string]changes.Field) bool { return jsonOf(a) == jsonOf(b) }
