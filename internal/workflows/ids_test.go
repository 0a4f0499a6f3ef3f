package workflows_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/storage"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// halfWrites stands for a sink that keeps every copy it is sent (Kafka): the first write
// holding one of the listed keys takes the first half of its items, then fails. Keys, not
// write numbers, pick the failing writes: how many finished inputs one write carries
// depends on how fast they finish.
type halfWrites struct {
	storage.Sink
	mu     sync.Mutex
	failOn map[string]bool          // key → not failed yet
	log    map[string]map[int64]int // key → id → copies
}

func (h *halfWrites) AtLeastOnce() {}

func (h *halfWrites) Write(ctx context.Context, items []crawl.Item) error {
	h.mu.Lock()
	fail := false
	for _, it := range items {
		if h.failOn[it.Key] {
			h.failOn[it.Key], fail = false, true
		}
	}
	h.mu.Unlock()
	if fail {
		items = items[:len(items)/2]
	}
	h.mu.Lock()
	for _, it := range items {
		if h.log[it.Key] == nil {
			h.log[it.Key] = map[int64]int{}
		}
		h.log[it.Key][it.ID]++
	}
	h.mu.Unlock()
	if err := h.Sink.Write(ctx, items); err != nil {
		return err
	}
	if fail {
		return errors.New("broker went away half-way")
	}
	return nil
}

// A batch retried after a write that failed half-way resends the items with the ids
// they were first sent with, so repeats are recognisable by id; this includes a failure
// of the batch's last write.
func TestRetriedWriteResendsTheSameIDs(t *testing.T) {
	var hw *halfWrites
	h := newHarness(t, func(s storage.Sink) storage.Sink {
		// synth:11 is the last item the batch stores
		hw = &halfWrites{Sink: s, failOn: map[string]bool{"synth:1": true, "synth:11": true}, log: map[string]map[int64]int{}}
		return hw
	})
	p := plan(t, `
name: ids
defaults: {batch: 20, concurrency: 1, parallel: 1}
steps:
  - id: node
    task: synth.node
    from: node
    max_depth: 1
    params: {widths: [12]}
`)
	run := "ids"
	h.run(t, workflows.ChainInput{RunID: run, Plan: *p})
	stored := map[string]int64{}
	if err := h.sink.Scan(func(it crawl.Item) error {
		if it.RunID == run {
			stored[it.Key] = it.ID
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 13 {
		t.Fatalf("stored %d, want 13", len(stored))
	}
	for key, pending := range hw.failOn {
		if pending {
			t.Fatalf("no write holding %s was sent; the test expects it to fail once", key)
		}
	}
	resent := 0
	for key, ids := range hw.log {
		if len(ids) != 1 {
			t.Errorf("%s was sent with %d different ids: %v", key, len(ids), ids)
		}
		for id, n := range ids {
			if id != stored[key] {
				t.Errorf("%s: sent with id %d, stored with %d", key, id, stored[key])
			}
			resent += n - 1
		}
	}
	if resent == 0 {
		t.Error("no item was resent: the failed writes did not take part of their batch")
	}
}
