package activities

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// TestCheckpointOfALargeBatchStaysSmall: a 1,000-input batch, each input with one item
// and one output, finished ten at a time with a heartbeat after each group. The
// checkpoint grows with the outputs only, is sent a bounded number of times however
// many groups finish, and a retried attempt resumes from it with every input done and
// the same counts and outputs.
func TestCheckpointOfALargeBatchStaysSmall(t *testing.T) {
	const n = 1000
	var sent []int
	var last checkpoint
	c := &checkpointer{n: n, done: map[int]bool{}, unrun: map[int]bool{}, every: time.Hour}
	c.send = func(p checkpoint) {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, len(b))
		last = checkpoint{}
		if err := json.Unmarshal(b, &last); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		o := outcome{Index: i, OK: true, Items: 1, Out: []crawl.Routed{{Step: 1, Input: crawl.Input{URL: fmt.Sprintf("https://shop.example.com/item/%d", i)}}}}
		if i%97 == 0 {
			o = outcome{Index: i, Err: fmt.Sprintf("https://shop.example.com/list/%d: status 503", i), RetryAfter: time.Second}
		}
		c.finish(o, 0)
		if i%10 == 9 {
			c.heartbeat(false)
		}
	}
	c.heartbeat(true)
	largest, total := 0, 0
	for _, b := range sent {
		largest, total = max(largest, b), total+b
	}
	t.Logf("1,000-input batch: %d heartbeats with a checkpoint, largest %d bytes, %d bytes in all", len(sent), largest, total)
	if len(sent) > 3 {
		t.Errorf("%d checkpoints sent for 100 groups within one interval; want at most 3", len(sent))
	}
	// One output URL is ~60 bytes of JSON; the rest of a success is summed, not listed.
	if largest > 80*n {
		t.Errorf("largest checkpoint %d bytes for %d inputs; want at most %d", largest, n, 80*n)
	}
	if len(last.Done) != 1 || last.Done[0] != [2]int{0, n - 1} {
		t.Errorf("done ranges %v, want [[0 %d]]", last.Done, n-1)
	}

	again := &checkpointer{n: n, done: map[int]bool{}, unrun: map[int]bool{}}
	again.resume(last)
	if todo := again.todo(); len(todo) != 0 {
		t.Errorf("a retried attempt would run %d inputs again", len(todo))
	}
	failures := (n + 96) / 97
	if again.sum.Pages != n-failures || again.sum.Items != n-failures || len(again.sum.Out) != n-failures || len(again.sum.Failed) != failures {
		t.Errorf("resumed sums: pages %d items %d outputs %d failed %d; want %d, %d, %d, %d",
			again.sum.Pages, again.sum.Items, len(again.sum.Out), len(again.sum.Failed), n-failures, n-failures, n-failures, failures)
	}
}

func TestSpansFoldIndices(t *testing.T) {
	got := spans(map[int]bool{0: true, 1: true, 2: true, 5: true, 7: true, 8: true})
	want := [][2]int{{0, 2}, {5, 5}, {7, 8}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("spans = %v, want %v", got, want)
	}
}

// A checkpoint keeps each step's sums apart and the lane of every followed input, and
// one written before batches followed into other steps (followed inputs without a lane)
// resumes with those inputs in the batch's own step.
func TestCheckpointResumesEachStepOfABatch(t *testing.T) {
	c := &checkpointer{n: 2, done: map[int]bool{}, unrun: map[int]bool{}}
	page := c.follow(crawl.Work{Input: crawl.Input{URL: "https://news.example.com/?p=2"}}, 0)
	story := c.follow(crawl.Work{Input: crawl.Input{URL: "https://news.example.com/item/7"}}, 1)
	c.finish(outcome{Index: 0, OK: true, Items: 0}, 0)
	c.finish(outcome{Index: story, OK: true, Items: 1}, 1)
	c.finish(outcome{Index: page, Err: "https://news.example.com/?p=2: status 503"}, 0)
	b, err := json.Marshal(c.payload())
	if err != nil {
		t.Fatal(err)
	}
	var prev checkpoint
	if err := json.Unmarshal(b, &prev); err != nil {
		t.Fatal(err)
	}
	again := &checkpointer{n: 2, done: map[int]bool{}, unrun: map[int]bool{}}
	again.resume(prev)
	if todo := again.todo(); len(todo) != 1 || todo[0] != 1 {
		t.Errorf("todo %v, want [1]: the one input no attempt finished", todo)
	}
	if own, down := again.tally(0), again.tally(1); own.Pages != 1 || len(own.Failed) != 1 || down.Pages != 1 || down.Items != 1 {
		t.Errorf("own step %+v, step downstream %+v; want 1 page and 1 failure, then 1 page with 1 item", own, down)
	}
	if again.lane(page) != 0 || again.lane(story) != 1 || again.lane(1) != 0 {
		t.Errorf("lanes %d %d %d, want 0 1 0", again.lane(page), again.lane(story), again.lane(1))
	}

	var old checkpoint
	if err := json.Unmarshal([]byte(`{"done":[[0,0]],"pages":1,"followed":[{"in":{"url":"https://news.example.com/?p=2"}}]}`), &old); err != nil {
		t.Fatal(err)
	}
	resumed := &checkpointer{n: 1, done: map[int]bool{}, unrun: map[int]bool{}}
	resumed.resume(old)
	if todo := resumed.todo(); len(todo) != 1 || resumed.lane(todo[0]) != 0 || resumed.sum.Followed[0].Input.URL != "https://news.example.com/?p=2" {
		t.Errorf("an older checkpoint resumes with todo %v", todo)
	}
}

// A checkpoint being sent (keepAlive heartbeats one while a write blocks) stays as it
// was taken while the batch finishes more inputs of a step downstream.
func TestCheckpointSentIsASnapshot(t *testing.T) {
	c := &checkpointer{n: 1, done: map[int]bool{}, unrun: map[int]bool{}}
	i := c.follow(crawl.Work{Input: crawl.Input{URL: "https://news.example.com/item/1"}}, 1)
	c.finish(outcome{Index: i, OK: true, Items: 1}, 1)
	sent := c.payload()
	j := c.follow(crawl.Work{Input: crawl.Input{URL: "https://news.example.com/item/2"}}, 1)
	c.finish(outcome{Index: j, OK: true, Items: 1}, 1)
	if sent.Down[0].Pages != 1 || c.tally(1).Pages != 2 {
		t.Fatalf("sent %d pages downstream, batch has %d; want 1 and 2", sent.Down[0].Pages, c.tally(1).Pages)
	}
}
