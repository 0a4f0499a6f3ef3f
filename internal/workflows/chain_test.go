package workflows_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/activities"
	"github.com/trawlerhq/trawler/internal/dedup"
	"github.com/trawlerhq/trawler/internal/storage"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/workflows"
	"github.com/trawlerhq/trawler/tests/fixture/synth"
)

func plan(t *testing.T, yaml string, sets ...string) *crawl.Plan {
	t.Helper()
	reg := synth.Registry()
	c, err := crawl.Load("test.yaml", []byte(yaml), crawl.LoadOptions{Registry: reg, Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(reg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type harness struct {
	env      *testsuite.TestWorkflowEnvironment
	acts     *activities.Activities
	sink     *jsonl.Sink
	workflow string // registered name to run; ChainWorkflowName when empty
}

func newHarness(t *testing.T, wrap func(storage.Sink) storage.Sink) *harness {
	return newDedupHarness(t, wrap, nil)
}

func newDedupHarness(t *testing.T, wrap func(storage.Sink) storage.Sink, dd *dedup.Deduper) *harness {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	sink, err := jsonl.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var used storage.Sink = sink
	if wrap != nil {
		used = wrap(sink)
	}
	acts := &activities.Activities{Registry: synth.Registry(), Sinks: storage.Set{"jsonl": used}, Failures: sink, FlushEvery: 2, Dedup: dd}
	env.RegisterWorkflowWithOptions(workflows.ChainWorkflow, workflow.RegisterOptions{Name: workflows.ChainWorkflowName})
	env.RegisterActivityWithOptions(acts.RunBatch, activity.RegisterOptions{Name: workflows.RunBatchActivity})
	for _, name := range acts.Registry.Names() {
		env.RegisterActivityWithOptions(acts.RunBatch, activity.RegisterOptions{Name: name})
	}
	return &harness{env: env, acts: acts, sink: sink}
}

func (h *harness) run(t *testing.T, in workflows.ChainInput) *workflows.Summary {
	t.Helper()
	h.env.ExecuteWorkflow(cmp.Or(h.workflow, workflows.ChainWorkflowName), in)
	if !h.env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var s workflows.Summary
	if err := h.env.GetWorkflowResult(&s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func (h *harness) stored(t *testing.T, run string) map[string]int {
	t.Helper()
	keys := map[string]int{}
	if err := h.sink.Scan(func(it crawl.Item) error {
		if it.RunID == run {
			keys[it.Key]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

const tree = `
name: tree
defaults: {batch: 7, concurrency: 3, parallel: 2}
steps:
  - id: node
    task: synth.node
    from: node
    max_depth: 3
    params: {widths: [3, 4, 5]}
`

func TestFanOutStoresEveryNodeOnce(t *testing.T) {
	h := newHarness(t, nil)
	// Batching itself is under test: no batch follows its own outputs.
	s := h.run(t, workflows.ChainInput{RunID: "fan", Plan: *plan(t, tree), Tuning: workflows.Tuning{FollowInputs: -1}})
	want := synth.Count(3, 4, 5) // 1 + 3 + 12 + 60
	keys := h.stored(t, "fan")
	if len(keys) != want {
		t.Fatalf("stored %d distinct keys, want %d", len(keys), want)
	}
	for k, n := range keys {
		if n != 1 {
			t.Errorf("%s stored %d times", k, n)
		}
	}
	pages, items, _, failed := s.Totals()
	if pages != want || items != want || failed != 0 {
		t.Fatalf("summary pages=%d items=%d failed=%d, want %d/%d/0", pages, items, failed, want, want)
	}
	if s.Batches < want/7 {
		t.Fatalf("only %d batches for %d inputs at batch 7", s.Batches, want)
	}
}

// A step that consumes its own outputs one at a time (a paged list) follows them inside
// its batch: one activity for the whole chain of pages instead of one per page, with
// the same pages and items as without following. A wide fan-out is still shared out.
func TestBatchFollowsItsOwnPages(t *testing.T) {
	const pagedList = `
name: paged
defaults: {batch: 7, concurrency: 3, parallel: 2}
steps:
  - id: node
    task: synth.node
    from: node
    max_depth: 30
    params: {widths: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]}
`
	for _, c := range []struct {
		name    string
		yaml    string
		follow  int
		pages   int
		batches func(int) bool
		want    string
	}{
		{"followed", pagedList, 0, 31, func(n int) bool { return n == 1 }, "1 batch"},
		{"not followed", pagedList, -1, 31, func(n int) bool { return n == 31 }, "31 batches"},
		{"fan-out", tree, 0, synth.Count(3, 4, 5), func(n int) bool { return n > 1 }, "more than one batch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, nil)
			run := "follow-" + strings.ReplaceAll(c.name, " ", "-")
			s := h.run(t, workflows.ChainInput{RunID: run, Plan: *plan(t, c.yaml), Tuning: workflows.Tuning{FollowInputs: c.follow}})
			pages, items, _, failed := s.Totals()
			if pages != c.pages || items != c.pages || failed != 0 || len(h.stored(t, run)) != c.pages {
				t.Fatalf("pages=%d items=%d failed=%d stored=%d; want %d pages and items, each stored once", pages, items, failed, len(h.stored(t, run)), c.pages)
			}
			if !c.batches(s.Batches) {
				t.Errorf("%d batches; want %s", s.Batches, c.want)
			}
		})
	}
}

// A step that allows it (`follow: true`) has its inputs run inside the batch of the step
// that feeds it: a list's details run in the list's batch, a detail's comments pages in
// the detail's, each comments page's next page too. Every step counts the same pages,
// items and retries as without following, every item is stored once, and fewer batches
// go through the server. A flaky comments page is retried as a comments input.
func TestBatchFollowsIntoStepsDownstream(t *testing.T) {
	const deep = `
name: deep
defaults: {batch: 5, concurrency: 4, parallel: 2}
steps:
  - id: list
    task: synth.node
    params: {widths: [8, 2, 1, 1]}
  - id: detail
    task: synth.node
    from: list
    follow: true
    params: {widths: [8, 2, 1, 1]}
  - id: comments
    task: synth.node
    from: [detail, comments]
    max_depth: 3
    follow: true
    params: {widths: [8, 2, 1, 1], flaky: [0/1, 3/0/0/0], flaky_times: 1}
`
	type counts struct{ Pages, Items, Retried, Failed int }
	runs := map[string][3]counts{}
	batches := map[string]int{}
	for _, c := range []struct {
		name   string
		follow int
	}{{"followed", 0}, {"not followed", -1}} {
		h := newHarness(t, nil)
		run := "down-" + strings.ReplaceAll(c.name, " ", "-")
		s := h.run(t, workflows.ChainInput{RunID: run, Plan: *plan(t, deep), Tuning: workflows.Tuning{FollowInputs: c.follow}})
		var got [3]counts
		for i, st := range s.Steps {
			got[i] = counts{st.Pages, st.Items, st.Retried, st.Failed}
		}
		runs[c.name], batches[c.name] = got, s.Batches
		stored := h.stored(t, run)
		if len(stored) != synth.Count(8, 2, 1, 1) {
			t.Errorf("%s: stored %d items, want %d", c.name, len(stored), synth.Count(8, 2, 1, 1))
		}
		for k, n := range stored {
			if n != 1 {
				t.Errorf("%s: %s stored %d times", c.name, k, n)
			}
		}
	}
	want := [3]counts{{1, 1, 0, 0}, {8, 8, 0, 0}, {48, 48, 2, 0}}
	if runs["followed"] != want || runs["not followed"] != want {
		t.Fatalf("per step (pages, items, retried, failed): followed %+v, not followed %+v; want %+v", runs["followed"], runs["not followed"], want)
	}
	t.Logf("batches: %d followed, %d not", batches["followed"], batches["not followed"])
	// How many fewer depends on when each lane has a free slot (7 to 9 of 16 or 17 here).
	if batches["followed"] >= batches["not followed"] {
		t.Errorf("%d batches with following, %d without; following downstream should need fewer", batches["followed"], batches["not followed"])
	}
}

func TestEachFansOutOverListField(t *testing.T) {
	h := newHarness(t, nil)
	p := plan(t, `
name: each
steps:
  - id: root
    task: synth.node
    params: {widths: [4, 2], kids: true}
  - id: kids
    task: synth.node
    from: [root, kids]
    each: kids
    max_depth: 1
    params: {widths: [4, 2], kids: true}
`)
	s := h.run(t, workflows.ChainInput{RunID: "each", Plan: *p})
	if got, want := len(h.stored(t, "each")), synth.Count(4, 2); got != want {
		t.Fatalf("stored %d, want %d", got, want)
	}
	if s.Steps[1].Pages != 4+8 {
		t.Fatalf("kids step pages = %d, want 12", s.Steps[1].Pages)
	}
}

func TestFlakyInputsRetriedAndBrokenOnesRecorded(t *testing.T) {
	h := newHarness(t, nil)
	p := plan(t, tree, "node.flaky=[1, 2/3]", "node.flaky_times=2", "node.broken=[0/1]", "node.permanent=[2]")
	run := "flaky"
	s := h.run(t, workflows.ChainInput{RunID: run, Plan: *p})
	keys := h.stored(t, run)
	// Node 2 and its 4+20 descendants are lost for good; 0/1 and its 5 children too.
	want := synth.Count(3, 4, 5) - (1 + 4 + 20) - (1 + 5)
	if len(keys) != want {
		t.Fatalf("stored %d, want %d", len(keys), want)
	}
	if _, ok := keys["synth:2/3"]; ok {
		t.Errorf("synth:2/3 is under the permanently failed node 2 yet was stored")
	}
	if _, ok := keys["synth:1"]; !ok {
		t.Errorf("flaky node 1 was not stored after its retries")
	}
	if n := synth.Calls.Get(run, "1"); n != 3 {
		t.Errorf("node 1 ran %d times, want 3 (two flakes, then success)", n)
	}
	if s.FailuresTotal != 2 || len(s.Failures) != 2 {
		t.Fatalf("failures = %d %+v, want 2", s.FailuresTotal, s.Failures)
	}
	byInput := map[string]crawl.Failure{}
	for _, f := range s.Failures {
		byInput[fmt.Sprint(f.Input.Value)] = f
	}
	if f := byInput["0/1"]; f.Attempts != 4 || f.Cause != "0/1: node 0/1 is broken" {
		t.Errorf("broken node failure = %+v, want 4 attempts with its cause", f)
	}
	if f := byInput["2"]; f.Attempts != 1 || f.Cause != "2: node 2 is gone for good" {
		t.Errorf("permanent failure = %+v, want 1 attempt", f)
	}
	var logged int
	if err := jsonl.ReadFile(h.sink.Dir()+"/"+jsonl.FailuresFile, func(crawl.Item) error { logged++; return nil }); err != nil {
		t.Fatal(err)
	}
	if logged != 2 {
		t.Fatalf("failure log holds %d lines, want 2", logged)
	}
	if s.Steps[0].Retried != 2+3 {
		t.Errorf("retried = %d, want 5 (node 1 twice, 0/1 three times)", s.Steps[0].Retried)
	}
}

// failOnce fails the n-th write, once, after storing nothing: the activity errors out and
// Temporal retries the batch, which must resume from its heartbeat.
type failOnce struct {
	storage.Sink
	writes  atomic.Int32
	written atomic.Int32 // items in the writes that succeeded
	at      int32
}

func (f *failOnce) Write(ctx context.Context, items []crawl.Item) error {
	if f.writes.Add(1) == f.at {
		return errors.New("store unreachable")
	}
	err := f.Sink.Write(ctx, items)
	if err == nil {
		f.written.Add(int32(len(items)))
	}
	return err
}

// TestRetriedBatchResumesFromHeartbeat runs the workflow as builds before outages were
// waited out did (a failed write fails the batch and Temporal retries it): runs started
// by those builds still finish this way.
func TestRetriedBatchResumesFromHeartbeat(t *testing.T) {
	h := newHarness(t, func(s storage.Sink) storage.Sink { return &failOnce{Sink: s, at: 3} })
	h.workflow = "ChainWorkflowBeforeOutages"
	h.env.RegisterWorkflowWithOptions(workflows.WorkflowBefore(workflows.ChangeOutlastOutages), workflow.RegisterOptions{Name: h.workflow})
	p := plan(t, flatChain("resume"))
	run := "resume"
	s := h.run(t, workflows.ChainInput{RunID: run, Plan: *p})
	if got := len(h.stored(t, run)); got != 13 {
		t.Fatalf("stored %d, want 13", got)
	}
	// Writes 1 (root) and 2 (nodes 0,1) succeeded and were heartbeated; write 3 failed,
	// so only the inputs after the last heartbeat run again, and the summary counts
	// each of them as retried.
	reran := 0
	for i := 0; i < 12; i++ {
		if n := synth.Calls.Get(run, fmt.Sprint(i)); n > 1 {
			reran++
		}
	}
	if synth.Calls.Get(run, "0") != 1 || synth.Calls.Get(run, "1") != 1 {
		t.Fatalf("inputs stored before the failure ran again: 0→%d 1→%d", synth.Calls.Get(run, "0"), synth.Calls.Get(run, "1"))
	}
	if reran == 0 || reran > 10 {
		t.Fatalf("%d inputs re-ran after the failed write, want between 1 and 10", reran)
	}
	if s.Steps[0].Retried != reran {
		t.Errorf("summary says retried %d; %d inputs ran twice", s.Steps[0].Retried, reran)
	}
}

// flatChain is a root with 12 children, all in one batch stored two inputs at a time.
func flatChain(name string) string {
	return "name: " + name + `
defaults: {batch: 20, concurrency: 1, parallel: 1}
steps:
  - id: node
    task: synth.node
    from: node
    max_depth: 1
    params: {widths: [12]}
`
}

// TestFailedWriteIsRetriedInsideTheBatch: a store that fails once is written again by
// the batch itself, from the sink that failed: no input runs twice and no item is
// written twice.
func TestFailedWriteIsRetriedInsideTheBatch(t *testing.T) {
	f := &failOnce{at: 3}
	h := newHarness(t, func(s storage.Sink) storage.Sink { f.Sink = s; return f })
	p := plan(t, flatChain("held"))
	run := "held"
	s := h.run(t, workflows.ChainInput{RunID: run, Plan: *p, Tuning: workflows.Tuning{FollowInputs: -1}})
	keys := h.stored(t, run)
	if len(keys) != 13 {
		t.Fatalf("stored %d, want 13", len(keys))
	}
	for k, n := range keys {
		if n != 1 {
			t.Errorf("%s stored %d times", k, n)
		}
	}
	for i := range 12 {
		if n := synth.Calls.Get(run, fmt.Sprint(i)); n != 1 {
			t.Errorf("node %d ran %d times, want once", i, n)
		}
	}
	// The third write failed, and only what it held was written again: the writes that
	// succeeded hold each of the 13 items once. (Groups are of two or more: a batch
	// stores together what finished while it stored the last group.)
	if n := f.writes.Load(); n < f.at {
		t.Fatalf("%d writes: none failed", n)
	}
	if n := f.written.Load(); n != 13 {
		t.Errorf("the writes that succeeded held %d items, want 13", n)
	}
	if pages, items, _, _ := s.Totals(); pages != 13 || items != 13 || len(s.Outages) != 0 {
		t.Errorf("summary pages=%d items=%d outages=%+v, want 13/13/none", pages, items, s.Outages)
	}
}

func TestProgressQueryWhileRunning(t *testing.T) {
	h := newHarness(t, nil)
	p := plan(t, tree, "node.flaky=[2]", "node.flaky_times=1")
	var seen *workflows.Summary
	// The flaky node waits out its backoff on a timer: query while it waits.
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(workflows.ProgressQuery)
		if err != nil {
			t.Error(err)
			return
		}
		var s workflows.Summary
		if err := v.Get(&s); err != nil {
			t.Error(err)
		}
		seen = &s
	}, time.Second)
	s := h.run(t, workflows.ChainInput{RunID: "q", Plan: *p})
	if seen == nil {
		t.Fatal("query callback did not run")
	}
	if seen.Done || seen.Steps[0].Pages == 0 || seen.Steps[0].Pages >= s.Steps[0].Pages {
		t.Fatalf("mid-run progress %+v should be partial (final pages %d)", seen.Steps[0], s.Steps[0].Pages)
	}
	if !s.Done {
		t.Fatal("final summary not marked done")
	}
}

func TestLargeBacklogGoesToChildWorkflows(t *testing.T) {
	h := newHarness(t, nil)
	p := plan(t, `
name: wide
defaults: {batch: 10}
steps:
  - id: node
    task: synth.node
    from: node
    max_depth: 2
    params: {widths: [30, 4]}
`)
	run := "wide"
	s := h.run(t, workflows.ChainInput{RunID: run, Plan: *p, Tuning: workflows.Tuning{SplitAt: 20, PartitionSize: 10, FollowInputs: -1}})
	if got, want := len(h.stored(t, run)), synth.Count(30, 4); got != want {
		t.Fatalf("stored %d, want %d", got, want)
	}
	if s.Partitions == 0 {
		t.Fatal("no child workflow took a partition")
	}
	if pages, _, _, _ := s.Totals(); pages != synth.Count(30, 4) {
		t.Fatalf("summary counts %d pages across partitions, want %d", pages, synth.Count(30, 4))
	}
}

// flakyLink is a TCP proxy to Redis that can cut every connection; once cut, it drops
// the next few connection attempts (the client re-dials on its own once or twice),
// then lets traffic through again.
type flakyLink struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	drops  int
}

func newFlakyLink(t *testing.T, target string) *flakyLink {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &flakyLink{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			if l.drops > 0 {
				l.drops--
				l.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				l.mu.Unlock()
				c.Close()
				continue
			}
			l.conns = append(l.conns, c, up)
			l.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return l
}

func (l *flakyLink) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drops = 4
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// outage writes through, then cuts the link to Redis on its n-th write, so the items
// are stored but cannot be recorded as seen.
type outage struct {
	storage.Sink
	link    *flakyLink
	writes  atomic.Int32
	written atomic.Int32 // items in the writes that succeeded
	at      int32
}

func (o *outage) Write(ctx context.Context, items []crawl.Item) error {
	err := o.Sink.Write(ctx, items)
	if err == nil {
		o.written.Add(int32(len(items)))
	}
	if o.writes.Add(1) == o.at {
		o.link.Cut()
	}
	return err
}

func TestDedupOutageAndStoreFailureLoseNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(link *flakyLink) func(storage.Sink) storage.Sink
	}{
		{"redis down after the store", func(link *flakyLink) func(storage.Sink) storage.Sink {
			return func(s storage.Sink) storage.Sink { return &outage{Sink: s, link: link, at: 3} }
		}},
		{"store fails before dedup records", func(*flakyLink) func(storage.Sink) storage.Sink {
			return func(s storage.Sink) storage.Sink { return &failOnce{Sink: s, at: 3} }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			link := newFlakyLink(t, mr.Addr())
			rdb := redis.NewClient(&redis.Options{Addr: link.ln.Addr().String(), MaxRetries: -1})
			defer rdb.Close()
			dd, err := dedup.Open(context.Background(), rdb, dedup.Config{Expected: 1000})
			if err != nil {
				t.Fatal(err)
			}
			var writes, written func() int32
			wrap := func(s storage.Sink) storage.Sink {
				w := tc.wrap(link)(s)
				switch x := w.(type) {
				case *outage:
					writes, written = x.writes.Load, x.written.Load
				case *failOnce:
					writes, written = x.writes.Load, x.written.Load
				}
				return w
			}
			h := newDedupHarness(t, wrap, dd)
			p := plan(t, flatChain("dd"))
			run := "dd-" + strings.ReplaceAll(tc.name, " ", "-")
			s := h.run(t, workflows.ChainInput{RunID: run, Plan: *p, Tuning: workflows.Tuning{FollowInputs: -1}})
			keys := h.stored(t, run)
			if len(keys) != 13 {
				t.Fatalf("stored %d, want 13", len(keys))
			}
			for k, n := range keys {
				if n != 1 {
					t.Errorf("%s stored %d times", k, n)
				}
			}
			if s.Unchanged() != 0 {
				t.Fatalf("%d items counted unchanged in a first crawl", s.Unchanged())
			}
			// The batch retries what failed itself, from the stage that failed: a failed
			// write is written again, an unrecorded group is only recorded again, so the
			// writes that succeeded hold each of the 13 items once.
			if n := writes(); n < 3 {
				t.Fatalf("%d writes: the third, which the test fails, never came", n)
			}
			if n := written(); n != 13 {
				t.Fatalf("the writes that succeeded held %d items, want 13", n)
			}
			// Every stored item is now recorded: checking them again finds them all.
			var entries []dedup.Entry
			_ = h.sink.Scan(func(it crawl.Item) error {
				if it.RunID == run {
					entries = append(entries, dedup.Entry{Key: it.Key, Content: it.Hash})
				}
				return nil
			})
			vs, err := dd.Lookup(context.Background(), "default:synth.node", entries)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vs {
				if v.State != dedup.Unchanged {
					t.Errorf("%s is %s in dedup after the run, want unchanged", entries[i].Key, v.State)
				}
			}
		})
	}
}

// down is a store that is unreachable until it is brought back.
type down struct {
	storage.Sink
	up     atomic.Bool
	writes atomic.Int32
}

func (d *down) Write(ctx context.Context, items []crawl.Item) error {
	d.writes.Add(1)
	if !d.up.Load() {
		return errors.New("dial tcp 127.0.0.1:27017: connect: connection refused")
	}
	return d.Sink.Write(ctx, items)
}

// outageTuning makes batches give up on an outage at once and the run retry them after
// a second of workflow time (which the test environment skips through).
var outageTuning = workflows.Tuning{OutageHold: time.Millisecond, OutageBase: time.Second, OutageMax: 4 * time.Second}

const outageChain = `
name: outage
defaults: {batch: 5, concurrency: 1, parallel: 1}
steps:
  - id: node
    task: synth.node
    from: node
    max_depth: 1
    params: {widths: [12]}
`

// TestRunWaitsOutAStoreOutage: a store down for far longer than a batch's retries
// neither fails the run nor loses an item. While it is down the run's progress names
// the store and the inputs waiting for it; once it is back every item is stored once.
func TestRunWaitsOutAStoreOutage(t *testing.T) {
	d := &down{}
	h := newHarness(t, func(s storage.Sink) storage.Sink { d.Sink = s; return d })
	var during *workflows.Summary
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(workflows.ProgressQuery)
		if err != nil {
			t.Error(err)
			return
		}
		during = &workflows.Summary{}
		if err := v.Get(during); err != nil {
			t.Error(err)
		}
	}, 30*time.Minute)
	// An hour of workflow time: the batch's retry window was about 15 minutes.
	h.env.RegisterDelayedCallback(func() { d.up.Store(true) }, time.Hour)
	s := h.run(t, workflows.ChainInput{RunID: "outage", Plan: *plan(t, outageChain), Tuning: outageTuning})

	if during == nil || len(during.Outages) != 1 {
		t.Fatalf("progress while the store was down: %+v, want one outage", during)
	}
	o := during.Outages[0]
	if o.Dependency != "store jsonl" || o.Waiting != 1 || !strings.Contains(o.Cause, "connection refused") || o.Batches < 10 {
		t.Errorf("outage = %+v, want store jsonl with the root input waiting, its cause, and many batches sent back", o)
	}
	keys := h.stored(t, "outage")
	if len(keys) != 13 {
		t.Fatalf("stored %d, want 13", len(keys))
	}
	for k, n := range keys {
		if n != 1 {
			t.Errorf("%s stored %d times", k, n)
		}
	}
	pages, items, _, failed := s.Totals()
	if s.Status != workflows.StatusCompleted || pages != 13 || items != 13 || failed != 0 || s.Steps[0].Retried != 0 || len(s.Outages) != 0 {
		t.Fatalf("summary status=%s pages=%d items=%d failed=%d retried=%d outages=%+v, want completed 13/13/0/0 and no outage",
			s.Status, pages, items, failed, s.Steps[0].Retried, s.Outages)
	}
}

// TestMaxOutageEndsTheRun: only the chain's max_outage ends a run that waits for a
// dependency, and the summary says which and why.
func TestMaxOutageEndsTheRun(t *testing.T) {
	d := &down{}
	h := newHarness(t, func(s storage.Sink) storage.Sink { d.Sink = s; return d })
	p := plan(t, "max_outage: 20m\n"+outageChain)
	s := h.run(t, workflows.ChainInput{RunID: "gave-up", Plan: *p, Tuning: outageTuning})
	if s.Status != workflows.StatusOutage || !s.Done {
		t.Fatalf("status %q, want %q", s.Status, workflows.StatusOutage)
	}
	for _, want := range []string{"store jsonl unreachable since", "longer than max_outage 20m0s", "connection refused"} {
		if !strings.Contains(s.Reason, want) {
			t.Errorf("reason %q lacks %q", s.Reason, want)
		}
	}
	if s.Steps[0].OutageSkipped != 1 || s.Steps[0].Pages != 0 {
		t.Errorf("step %+v, want the root input skipped and nothing done", s.Steps[0])
	}
	if len(h.stored(t, "gave-up")) != 0 {
		t.Error("items stored although the store was down throughout")
	}
}
