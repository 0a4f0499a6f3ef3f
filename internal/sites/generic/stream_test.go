package generic

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/stream"
)

func streamSite(t *testing.T) string {
	t.Helper()
	u, stop, err := demosite.Start("127.0.0.1:0", demosite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return u
}

// testHub is the one hub of this test process, as a worker has one.
var testHub = stream.NewHub()

// subscriber runs a stream step's windows one after the other, as the chain engine does.
type subscriber struct {
	env    *crawl.Env
	in     crawl.Input
	keys   map[string]int
	bad    []string
	ended  bool
	window int
}

func newSubscriber(run, step string, params crawl.Params) *subscriber {
	p := crawl.Params{"format": "sse", "query_param": "q", "position_param": "since", "window": "200ms", "grace": "2s", "window_items": 7}
	for k, v := range params {
		p[k] = v
	}
	env := &crawl.Env{Params: p, RunID: run, Step: step, Tenant: "t"}
	crawl.Provide(&env.Services, stream.HubService, testHub)
	return &subscriber{env: env, keys: map[string]int{}}
}

// step runs one window; a failed window is not retried here (its input is run again).
func (s *subscriber) step(t *testing.T) {
	t.Helper()
	s.window++
	res, err := Stream.Run(context.Background(), s.env, s.in)
	if err != nil {
		t.Fatalf("window %d: %v", s.window, err)
	}
	for _, it := range res.Items {
		s.keys[it.Key]++
	}
	if testing.Verbose() {
		t.Logf("window %d from %v: %d items, %d next", s.window, s.in.Vars, len(res.Items), len(res.Next))
	}
	s.ended = true
	for _, next := range res.Next {
		if next.Var(VarBad) != "" {
			_, err := Stream.Run(context.Background(), s.env, next)
			if err == nil || !crawl.IsPermanent(err) {
				t.Fatalf("malformed event input: want a permanent failure, got %v", err)
			}
			s.bad = append(s.bad, err.Error())
			continue
		}
		s.in, s.ended = next, false
	}
}

func (s *subscriber) runToEnd(t *testing.T) {
	t.Helper()
	for !s.ended {
		if s.window > 500 {
			t.Fatal("the subscription did not reach its limit in 500 windows")
		}
		s.step(t)
	}
}

func wantKeys(t *testing.T, got map[string]int, ids []int) {
	t.Helper()
	if len(got) != len(ids) {
		t.Errorf("received %d distinct events, want %d", len(got), len(ids))
	}
	for _, id := range ids {
		if n := got[strconv.Itoa(id)]; n != 1 {
			t.Errorf("event %d received %d times, want once", id, n)
		}
	}
}

func siteStats(t *testing.T, site string) (open, maxOpen, connects int) {
	t.Helper()
	resp, err := http.Get(site + "/stream/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct{ Open, Max_open, Connects int }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Open, st.Max_open, st.Connects
}

// The server drops the connection every 5 events; each matching event arrives once.
func TestStreamSSEResumesAfterDrops(t *testing.T) {
	site := streamSite(t)
	keywords := []string{"go", "zig"}
	want := demosite.StreamMatches(120, keywords)
	s := newSubscriber("drops", "s", crawl.Params{"url": site + "/stream/sse?n=120&every=1ms&drop_after=5",
		"keywords": []any{"go", "zig"}, "start": "0", "limit": len(want)})
	s.runToEnd(t)
	wantKeys(t, s.keys, want)
	if _, _, connects := siteStats(t, site); connects < len(want)/5 {
		t.Errorf("%d connections; the drop switch should have forced at least %d", connects, len(want)/5)
	}
}

// A window whose items were lost (its activity failed) is run again from the same
// input: it gets the same events.
func TestStreamRetriedWindowGetsTheSameEvents(t *testing.T) {
	site := streamSite(t)
	s := newSubscriber("retry", "s", crawl.Params{"url": site + "/stream/sse?n=60&every=1ms", "start": "0", "limit": 60})
	first, err := Stream.Run(context.Background(), s.env, s.in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Stream.Run(context.Background(), s.env, s.in)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Items) == 0 || len(again.Items) < len(first.Items) {
		t.Fatalf("retried window got %d items, the first attempt %d", len(again.Items), len(first.Items))
	}
	for i := range first.Items {
		if first.Items[i].Key != again.Items[i].Key {
			t.Fatalf("retried window item %d is %s, the first attempt's %s", i, again.Items[i].Key, first.Items[i].Key)
		}
	}
}

// Two subscriptions with overlapping keywords share one connection; each gets exactly
// its matches; the first reaches its limit and leaves, the second goes on alone.
func TestStreamSubscriptionsShareOneConnection(t *testing.T) {
	site := streamSite(t)
	url := site + "/stream/ndjson?n=150&every=2ms"
	common := crawl.Params{"url": url, "format": "ndjson", "position_field": "seq", "start": "0", "grace": "500ms"}
	withKw := func(limit int, kw ...any) crawl.Params {
		p := crawl.Params{"keywords": kw, "limit": limit}
		for k, v := range common {
			p[k] = v
		}
		return p
	}
	allA := demosite.StreamMatches(150, []string{"go", "rust"})
	wantB := demosite.StreamMatches(150, []string{"rust", "kafka"})
	a := newSubscriber("share", "a", withKw(10, "go", "rust"))
	b := newSubscriber("share", "b", withKw(len(wantB), "rust", "kafka"))
	cfg, _ := buildStream(a.env.Params)
	for !a.ended || !b.ended {
		if !a.ended && !b.ended && a.window > 0 {
			if n := testHub.Connections(cfg.src); n != 1 {
				t.Fatalf("%d upstream connections for two subscriptions of one source; they share one", n)
			}
		}
		if !a.ended {
			a.step(t)
		}
		if !b.ended {
			b.step(t)
		}
		if a.window > 500 || b.window > 500 {
			t.Fatal("subscriptions did not reach their limits")
		}
	}
	wantKeys(t, a.keys, allA[:10])
	wantKeys(t, b.keys, wantB)
	deadline := time.Now().Add(10 * time.Second)
	for {
		open, _, _ := siteStats(t, site)
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open after both subscriptions left", open)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A malformed NDJSON line (it has no position) is recorded once even when the
// connection drops right after it.
func TestStreamMalformedLineAcrossDrops(t *testing.T) {
	site := streamSite(t)
	s := newSubscriber("badline", "s", crawl.Params{"url": site + "/stream/ndjson?n=41&every=1ms&bad_every=10&drop_after=10",
		"format": "ndjson", "position_field": "seq", "start": "0", "limit": 37})
	s.runToEnd(t)
	if len(s.keys) != 37 || len(s.bad) != 4 {
		t.Fatalf("%d items and %d malformed lines, want 37 and 4: %q", len(s.keys), len(s.bad), s.bad)
	}
	if !strings.Contains(s.bad[0], "malformed event at line") {
		t.Errorf("failure does not name the line: %s", s.bad[0])
	}
}

// A malformed event becomes a failed input naming its id and cause; the others arrive.
func TestStreamMalformedEventIsAFailure(t *testing.T) {
	site := streamSite(t)
	all := demosite.StreamMatches(41, nil)
	s := newSubscriber("bad", "s", crawl.Params{"url": site + "/stream/sse?n=41&every=1ms&bad_every=10&drop_after=7",
		"start": "0", "limit": len(all) - 4})
	s.runToEnd(t)
	var good []int
	for _, id := range all {
		if id%10 != 0 {
			good = append(good, id)
		}
	}
	wantKeys(t, s.keys, good)
	if len(s.bad) != 4 {
		t.Fatalf("%d malformed events recorded, want 4: %q", len(s.bad), s.bad)
	}
	if !strings.Contains(s.bad[0], "malformed event id 10 of "+site+"/stream/sse") || !strings.Contains(s.bad[0], "not a JSON object") {
		t.Errorf("failure does not name the event and cause: %s", s.bad[0])
	}
}

func TestStreamParamsChecked(t *testing.T) {
	errs := Stream.Spec().Check(crawl.Params{"format": "xml", "window": "5", "grace": "30s", "window_items": 100,
		"keywords": []any{"a", "b", "c"}, "max_terms": 2})
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	got := strings.Join(msgs, "\n")
	for _, want := range []string{
		"param url: missing; give the stream's URL, e.g. url: /stream/sse",
		`param format: "xml" is not a stream format; use sse or ndjson`,
		"param keywords: 3 keywords, more than max_terms 2 allows on one connection",
		`param window: "5" is not a duration; write one like 5s or 2m`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing error %q in:\n%s", want, got)
		}
	}
}
