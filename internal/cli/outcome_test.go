package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/capacity"
	"github.com/trawlerhq/trawler/internal/devstack"
	"github.com/trawlerhq/trawler/internal/monitor"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// TestRunExitCodes: `trawler run --wait` ends with the code of the run's outcome, so a
// cron job or CI can tell a partial or failed run from a completed one.
func TestRunExitCodes(t *testing.T) {
	for _, c := range []struct {
		outcome      string
		allowPartial bool
		want         int
	}{
		{workflows.OutcomeCompleted, false, 0},
		{workflows.OutcomePartial, false, 2},
		{workflows.OutcomePartial, true, 0},
		{workflows.OutcomeFailed, false, 3},
		{workflows.OutcomeFailed, true, 3},
		{workflows.OutcomeCanceled, false, 4},
	} {
		got := 0
		var code exitError
		if err := (&Result{Outcome: c.outcome}).exit(c.allowPartial); errors.As(err, &code) {
			got = int(code)
		} else if err != nil {
			t.Fatalf("%s: %v", c.outcome, err)
		}
		if got != c.want {
			t.Errorf("%s (allow partial %v): exit %d, want %d", c.outcome, c.allowPartial, got, c.want)
		}
	}
}

// TestRunRefusesChainNoWorkerServes: with a live worker that lacks the chain's detail
// task, `trawler run` refuses before starting and names the task, its queue and how to
// start such a worker; --no-worker-check goes on (here to the missing Temporal).
func TestRunRefusesChainNoWorkerServes(t *testing.T) {
	m, stop, err := devstack.StartRedis(t.TempDir(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := monitor.NewRecorder(rdb).Beat(ctx, "w1", "outcome-q", nil, []string{"generic.html_list"}, &capacity.Resources{CPU: 1, MemMB: 512}, 4); err != nil {
		t.Fatal(err)
	}
	run := func(extra ...string) error {
		root := newRoot()
		root.SetArgs(append([]string{"run", "../../examples/generic-html.yaml", "--redis", m.Addr(), "--task-queue", "outcome-q",
			"--temporal", "127.0.0.1:1"}, extra...))
		return root.ExecuteContext(ctx)
	}
	err = run()
	want := "no live worker serves task generic.html_detail (step story) on queue outcome-q: start one with `trawler worker --task-queue outcome-q`"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "generic.html_list") {
		t.Fatalf("run: %v\nwant the refusal %q and nothing about generic.html_list", err, want)
	}
	if err := run("--no-worker-check"); err == nil || strings.Contains(err.Error(), "no live worker") {
		t.Fatalf("run --no-worker-check: %v, want it to get past the check", err)
	}
}
