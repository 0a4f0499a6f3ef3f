package tests

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/stream"
)

const streamChain = `
name: %s
defaults: {batch: 1, dedup: changed}
steps:
  - id: s
    task: generic.stream
    from: s
    max_depth: 10000
    params:
      url: %s
      keywords: [%s]
      start: "0"
      limit: %d
      window_items: 6
      window: 300ms
      grace: 2s
`

// Two chains of two tenants subscribe to one SSE stream, which the server drops every 7
// events. They share one upstream connection; each stores exactly its matches, once;
// the one with the smaller limit stops there while the other goes on to its own. That
// limit is not a multiple of window_items (6), so its last window is a short one: a
// window that asked for a whole 6 would store past the limit.
func TestStreamChainsShareOneConnection(t *testing.T) {
	const limitA = 10
	site := startSite(t, demosite.Options{})
	url := site + "/stream/sse?n=150&every=2ms&drop_after=7"
	allA := demosite.StreamMatches(150, []string{"go", "rust"})
	wantB := demosite.StreamMatches(150, []string{"rust", "kafka"})
	pa := plan(t, "a.yaml", fmt.Sprintf(streamChain, "stream-a", url, "go, rust", limitA))
	pa.Tenant += "-a"
	pb := plan(t, "b.yaml", fmt.Sprintf(streamChain, "stream-b", url, "rust, kafka", len(wantB)))
	pb.Tenant += "-b"
	a := start(t, pa, taskQueue)
	b := start(t, pb, taskQueue)

	// While both read, `trawler status` shows them on one connection.
	rdb := redis.NewClient(&redis.Options{Addr: shared.redis.Addr()})
	defer rdb.Close()
	if !poll(time.Minute, func() bool {
		subs, err := stream.Subscriptions(context.Background(), rdb)
		if err != nil {
			t.Fatal(err)
		}
		conns := map[string]string{}
		for _, s := range subs {
			if s.Run == a || s.Run == b {
				conns[s.Run] = s.Conn
			}
		}
		return len(conns) == 2 && conns[a] == conns[b]
	}) {
		t.Error("the two subscriptions never showed on one shared connection in trawler status")
	}

	for _, c := range []struct {
		id   string
		want []int
	}{{a, allA[:limitA]}, {b, wantB}} {
		s := wait(t, c.id, 2*time.Minute)
		if _, _, _, failed := s.Totals(); failed != 0 {
			t.Errorf("run %s: %d failures: %+v", c.id, failed, s.Failures)
		}
		keys := stored(t, c.id)
		if len(keys) != len(c.want) {
			t.Errorf("run %s stored %d events, want %d", c.id, len(keys), len(c.want))
		}
		for _, id := range c.want {
			if keys[strconv.Itoa(id)] != 1 {
				t.Errorf("run %s: event %d stored %d times, want once", c.id, id, keys[strconv.Itoa(id)])
			}
		}
	}
}

// A malformed event is a failure of the run with its cause; every other event is
// stored once.
func TestStreamMalformedEventRecorded(t *testing.T) {
	site := startSite(t, demosite.Options{})
	url := site + "/stream/sse?n=60&every=1ms&bad_every=25"
	want := demosite.StreamMatches(60, []string{"go", "zig"})
	var good []int
	for _, id := range want {
		if id%25 != 0 {
			good = append(good, id)
		}
	}
	id := start(t, plan(t, "bad.yaml", fmt.Sprintf(streamChain, "stream-bad", url, "go, zig", len(good))), taskQueue)
	s := wait(t, id, 2*time.Minute)
	keys := stored(t, id)
	if len(keys) != len(good) {
		t.Errorf("stored %d events, want %d", len(keys), len(good))
	}
	assertOnce(t, keys)
	bad := len(want) - len(good)
	if _, _, _, failed := s.Totals(); failed != bad {
		t.Fatalf("%d failures, want %d (the malformed events): %+v", failed, bad, s.Failures)
	}
	// The failure log holds each malformed event with its id and cause.
	logged := 0
	data, _ := os.ReadFile(shared.sink.Dir() + "/" + jsonl.FailuresFile)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, id) && containsAll(line, "malformed event id", "not a JSON object") {
			logged++
		}
	}
	if logged != bad {
		t.Errorf("failure log names %d malformed events of this run with their cause, want %d", logged, bad)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// A worker process killed while it reads a stream loses nothing: the run goes on on
// another worker from the position its last window handed on, and every matching event
// is stored exactly once.
func TestStreamSurvivesAKilledWorker(t *testing.T) {
	bin := buildTrawler(t)
	site := startSite(t, demosite.Options{})
	url := site + "/stream/sse?n=240&every=15ms&drop_after=40"
	want := demosite.StreamMatches(240, []string{"go", "kafka"})
	queue := "stream-kill"
	out := shared.dir + "/stream-kill-out"
	first := workerProcess(t, bin, queue, out)
	id := start(t, plan(t, "kill.yaml", fmt.Sprintf(streamChain, "stream-kill", url, "go, kafka", len(want))), queue)

	js, err := jsonl.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	before := 0
	poll(time.Minute, func() bool {
		before = len(runRecords(t, js, id))
		return before >= 10
	})
	if before < 10 || before >= len(want) {
		t.Fatalf("%d of %d events stored before the kill; the test needs the stream mid-way", before, len(want))
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	t.Logf("killed the worker after %d of %d events", before, len(want))
	workerProcess(t, bin, queue, out)

	s := wait(t, id, 3*time.Minute)
	if _, _, _, failed := s.Totals(); failed != 0 {
		t.Errorf("%d failures: %+v", failed, s.Failures)
	}
	keys := runRecords(t, js, id)
	if len(keys) != len(want) {
		t.Errorf("stored %d events, want %d", len(keys), len(want))
	}
	for _, ev := range want {
		if keys[strconv.Itoa(ev)] != 1 {
			t.Errorf("event %d stored %d times, want once", ev, keys[strconv.Itoa(ev)])
		}
	}
}

// examples/stream.yaml run as a new user would: its two subscriptions share 13 events
// (they match both keyword sets), and each step stores under its own biz, so the
// summary's items are exactly what the stores hold: 50 news and 80 firehose records.
func TestStreamExampleStoresWhatItsSummaryCounts(t *testing.T) {
	site := startSite(t, demosite.Options{})
	id := start(t, plan(t, "stream.yaml", "", "base_url="+site), taskQueue)
	s := wait(t, id, 2*time.Minute)
	noFailures(t, s)
	got := items(t, id)
	for step, want := range map[string]int{"news": 50, "firehose": 80} {
		if st := stepStats(s, step); st.Items != want {
			t.Errorf("summary: step %s stored %d items, want %d", step, st.Items, want)
		}
		if n := len(got["stream."+step]); n != want {
			t.Errorf("jsonl holds %d records of stream.%s, want %d (bizes: %v)", n, step, want, sortedBizes(got))
		}
	}
	if _, items, _, _ := s.Totals(); items != 130 {
		t.Errorf("summary: %d items, want 130", items)
	}
}
