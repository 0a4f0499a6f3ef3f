package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/trawlerhq/trawler/internal/events"
	"github.com/trawlerhq/trawler/internal/storage/kafka"
)

// receiver records the events POSTed to it.
type receiver struct {
	mu   sync.Mutex
	got  []events.Event
	reqs []*http.Request
	body [][]byte
}

func (r *receiver) add(req *http.Request, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var e events.Event
	_ = json.Unmarshal(b, &e)
	r.got, r.reqs, r.body = append(r.got, e), append(r.reqs, req), append(r.body, b)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func TestWebhookRetriedUntilAcceptedArrivesOnceSigned(t *testing.T) {
	fresh(t)
	t.Setenv("HOOK_SECRET", "s3cret-value")
	var rec receiver
	var calls int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		rec.add(r, b)
	}))
	defer srv.Close()
	ctx := context.Background()
	if err := events.AddWebhook(ctx, rdb, events.Webhook{URL: srv.URL + "/hook", Tenant: "acme", SecretEnv: "HOOK_SECRET"}); err != nil {
		t.Fatal(err)
	}
	runDeliverer(t, &events.Deliverer{Backoff: 10 * time.Millisecond, Attempts: 5})
	sent := emit(t, events.Event{Type: events.RunFinished, Tenant: "acme", Chain: "shop", RunID: "shop-1", Detail: map[string]any{"outcome": "completed"}})
	emit(t, events.Event{Type: events.RunFinished, Tenant: "other", Chain: "shop", RunID: "shop-2"}) // another tenant's

	eventually(t, "the receiver accepts the event", func() bool { return rec.count() == 1 })
	// Nothing more arrives: the event is acknowledged, the other tenant's is not ours.
	time.Sleep(300 * time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 1 || calls != 3 {
		t.Fatalf("receiver got %d events in %d calls, want 1 in 3 (two refused)", len(rec.got), calls)
	}
	got, req, body := rec.got[0], rec.reqs[0], rec.body[0]
	if got.ID != sent.ID || got.Type != events.RunFinished || got.RunID != "shop-1" || got.Detail["outcome"] != "completed" {
		t.Fatalf("received %+v, want the run_finished event %s of shop-1", got, sent.ID)
	}
	ts, err := strconv.ParseInt(req.Header.Get(events.TimestampHeader), 10, 64)
	if err != nil {
		t.Fatalf("timestamp header %q: %v", req.Header.Get(events.TimestampHeader), err)
	}
	if sig, want := req.Header.Get(events.SignatureHeader), events.Sign([]byte("s3cret-value"), ts, body); sig != want || !strings.HasPrefix(sig, "sha256=") {
		t.Fatalf("signature %q, want %q", sig, want)
	}
	// The secret is in no stored record.
	hooks, _ := rdb.HGetAll(ctx, events.Webhooks).Result()
	stream, _ := rdb.XRange(ctx, events.Stream, "-", "+").Result()
	if stored := fmt.Sprint(hooks, stream); strings.Contains(stored, "s3cret-value") || !strings.Contains(stored, "HOOK_SECRET") {
		t.Fatalf("stored webhooks and events %s: want the secret's variable name, never the secret", stored)
	}
}

func TestWebhookThatNeverAnswersGoesDeadWithoutHoldingOthers(t *testing.T) {
	fresh(t)
	var healthy receiver
	release := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers while the test runs
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer stuck.Close()
	defer close(release)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		healthy.add(r, b)
	}))
	defer ok.Close()
	ctx := context.Background()
	for _, u := range []string{stuck.URL + "/?token=abc", ok.URL} {
		if err := events.AddWebhook(ctx, rdb, events.Webhook{URL: u, Tenant: "acme", Events: []string{events.RunFailed}}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 5
	runDeliverer(t, &events.Deliverer{Backoff: 10 * time.Millisecond, Attempts: 3, Timeout: 300 * time.Millisecond})
	for i := range n {
		emit(t, events.Event{Type: events.RunFailed, Tenant: "acme", Chain: "shop", RunID: "shop-" + strconv.Itoa(i)})
	}
	emit(t, events.Event{Type: events.RunStarted, Tenant: "acme", Chain: "shop", RunID: "shop-9"}) // no webhook wants it

	eventually(t, "the healthy receiver gets every event", func() bool { return healthy.count() == n })
	dead, err := events.Dead(ctx, rdb, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) == n {
		t.Fatalf("the healthy receiver got its events only after all %d of the other's were dead", n)
	}
	eventually(t, "every delivery to the silent receiver is dead", func() bool {
		dead, err = events.Dead(ctx, rdb, 100)
		return err == nil && len(dead) == n
	})
	for i, d := range dead {
		if d.Event.RunID != "shop-"+strconv.Itoa(i) || d.Attempts != 3 || d.Receiver != stuck.URL+"/?token=***" || !strings.Contains(d.Error, "deadline exceeded") {
			t.Fatalf("dead letter %d = %+v, want run shop-%d after 3 attempts to %s/?token=*** timing out", i, d, i, stuck.URL)
		}
	}
	if healthy.count() != n {
		t.Fatalf("healthy receiver got %d events, want %d", healthy.count(), n)
	}
	// Every event is finished: nothing stays pending for the next deliverer. (The
	// deliverer acknowledges an event once its dead letter is written: the last one may
	// be a moment behind.)
	eventually(t, "no event pending after delivery", func() bool {
		pending, err := rdb.XPending(ctx, events.Stream, events.Group).Result()
		return err == nil && pending.Count == 0
	})
}

func TestEventsProducedToKafkaTopic(t *testing.T) {
	fresh(t)
	sink, err := kafka.Open(kafka.Config{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	runDeliverer(t, &events.Deliverer{Kafka: sink, Backoff: 10 * time.Millisecond})
	var want []string
	for i := range 3 {
		want = append(want, emit(t, events.Event{Type: events.Backlog, Tenant: "acme", Chain: "shop", Detail: map[string]any{"value": 100 + i, "threshold": 50}}).ID)
	}
	ctx := context.Background()
	var got []events.Event
	eventually(t, "3 events on topic "+events.Topic, func() bool {
		got = readTopic(t, ctx, events.Topic)
		return len(got) >= 3
	})
	if len(got) != 3 {
		t.Fatalf("topic %s holds %d events, want 3", events.Topic, len(got))
	}
	for i, e := range got {
		if e.ID != want[i] || e.Type != events.Backlog || e.Tenant != "acme" || e.Detail["value"] != float64(100+i) {
			t.Fatalf("message %d = %+v, want backlog event %s", i, e, want[i])
		}
	}
}

// readTopic reads every message of every partition of topic, in offset order (the
// events here share one key, so one partition).
func readTopic(t *testing.T, ctx context.Context, topic string) []events.Event {
	t.Helper()
	conn, err := kafkago.DialContext(ctx, "tcp", brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions(topic)
	if err != nil {
		return nil
	}
	var out []events.Event
	for _, p := range parts {
		pc, err := kafkago.DialLeader(ctx, "tcp", brokers[0], topic, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		last, err := pc.ReadLastOffset()
		if err != nil {
			t.Fatal(err)
		}
		for off := int64(0); off < last; off++ {
			_ = pc.SetDeadline(time.Now().Add(5 * time.Second))
			m, err := pc.ReadMessage(1 << 20)
			if err != nil {
				t.Fatal(err)
			}
			var e events.Event
			if err := json.Unmarshal(m.Value, &e); err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
		pc.Close()
	}
	return out
}
