package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/internal/endpoints"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// follower keeps `trawler run --wait` with its run through restarts of the stack: when
// Temporal stops answering, or the endpoints.json of --data names another address, it
// says it waits for the stack to come back, reads the endpoints again until Temporal
// answers and knows the run, and goes on waiting there.
type follower struct {
	given Settings  // the settings before resolve: resolving a copy reads endpoints.json again
	s     *Settings // resolved; moves with the stack
	c     client.Client
}

// wait is engine.Wait on the run id, across restarts of the stack.
func (f *follower) wait(ctx context.Context, id string, onProgress func(*workflows.Summary)) (*workflows.Summary, error) {
	for {
		wctx, cancel := context.WithCancel(ctx)
		go f.watch(wctx, cancel, id)
		sum, err := engine.Wait(wctx, f.c, id, onProgress)
		cancel()
		if err == nil || ctx.Err() != nil || !lostStack(err) {
			return sum, err
		}
		where := "to answer again"
		if f.s.Data != "" {
			where = fmt.Sprintf("of --data %s to come back (start `trawler dev --data %s` if it stopped)", f.s.Data, f.s.Data)
		}
		fmt.Fprintf(os.Stderr, "\nlost Temporal at %s; run %s goes on in the stack: waiting for it %s…\n", f.s.Temporal, id, where)
		if err := f.reconnect(ctx, id); err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "the stack is back, Temporal at %s: waiting for run %s\n", f.s.Temporal, id)
	}
}

// lostStack says whether err is Temporal gone away (or the wait given up by watch),
// rather than the run's own end or a refusal that waiting does not mend. A connection
// torn down mid-call comes back as gRPC's Canceled, not as context.Canceled.
func lostStack(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	var canceled *serviceerror.Canceled
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.As(err, &canceled)
}

// watch gives up the wait (cancel) once Temporal has not answered twice in a row, or
// once the endpoints.json that named Temporal names another address.
func (f *follower) watch(ctx context.Context, cancel context.CancelFunc, id string) {
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if f.temporalFromData() {
			if ep, err := endpoints.Read(f.s.Data); err == nil && ep.Temporal != f.s.Temporal {
				cancel()
				return
			}
		}
		dctx, dcancel := context.WithTimeout(ctx, time.Second)
		_, err := f.c.DescribeWorkflowExecution(dctx, id, "")
		dcancel()
		if err == nil {
			failures = 0
			continue
		}
		if failures++; failures >= 2 && ctx.Err() == nil {
			cancel()
			return
		}
	}
}

// temporalFromData says whether Temporal's address comes from --data's endpoints.json,
// not from --temporal or TRAWLER_TEMPORAL.
func (f *follower) temporalFromData() bool {
	return f.s.Data != "" && f.given.Temporal == "" && os.Getenv("TRAWLER_TEMPORAL") == ""
}

// reconnect waits until Temporal, where the settings name it now, answers and knows
// the run, and uses it from then on.
func (f *follower) reconnect(ctx context.Context, id string) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		next := f.given
		if next.Resolve() != nil {
			continue // no endpoints.json until the stack is up
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := next.Dial(dctx)
		if err == nil {
			if _, err = c.DescribeWorkflowExecution(dctx, id, ""); err != nil {
				c.Close()
			}
		}
		cancel()
		if err == nil {
			f.c.Close()
			*f.s, f.c = next, c
			return nil
		}
	}
}

// refresh reads --data's endpoints.json again, for a read back at the stores' addresses
// of now: a restart of the stack may have moved them.
func (f *follower) refresh() {
	next := f.given
	if f.s.Data != "" && next.Resolve() == nil {
		*f.s = next
	}
}

// stores are the addresses of the stores a run is read back from.
func (s *Settings) stores() [5]string { return [5]string{s.Out, s.Kafka, s.Mongo, s.ES, s.HBase} }
