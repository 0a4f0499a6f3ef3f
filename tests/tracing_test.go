package tests

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/tracing"
)

// With tracing on, one trace follows a run from its workflow to each batch activity and
// under it to every fetch and store write: each span's parent is the one before.
func TestTracesFollowARunFromWorkflowToFetchAndStore(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	stop := tracing.Install(keepSpans{exp}, "trawler-test")
	defer stop(context.Background())

	// A client and worker made now carry the tracing interceptor.
	opts := engine.ClientOptions(shared.stack.Endpoints.Temporal, shared.stack.Endpoints.Namespace, engine.TemporalAuth{})
	opts.Logger = sdklog.NewStructuredLogger(quiet)
	c, err := client.Dial(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const tq = "e2e-traced"
	w, err := engine.NewWorker(c, engine.WorkerOptions{TaskQueue: tq, OutDir: t.TempDir(), Log: quiet, Fetch: fastFetch})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	site := startSite(t, demosite.Options{Pages: 1, PerPage: 2})
	p := plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=1")
	id, err := engine.Start(context.Background(), c, p, engine.RunOptions{TaskQueue: tq, Tuning: fast})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := engine.Wait(ctx, c, id, nil); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if err := stop(context.Background()); err != nil { // flush
		t.Fatal(err)
	}

	spans := exp.GetSpans()
	byID := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID().String()] = s
	}
	// chain is a span's name and its ancestors' names, nearest first.
	chain := func(s tracetest.SpanStub) []string {
		var names []string
		for {
			names = append(names, s.Name)
			p, ok := byID[s.Parent.SpanID().String()]
			if !ok {
				return names
			}
			s = p
		}
	}
	found := map[string]bool{}
	for _, s := range spans {
		if s.Name != "store jsonl" && (len(s.Name) < 9 || s.Name[:9] != "fetch GET") {
			continue
		}
		names := chain(s)
		if len(names) >= 4 && names[1] == "RunActivity:"+p.Steps[1].Task && names[2] == "StartActivity:"+p.Steps[1].Task && names[3] == "RunWorkflow:ChainWorkflow" {
			found[s.Name[:5]] = true
			if s.SpanContext.TraceID() != byID[s.Parent.SpanID().String()].SpanContext.TraceID() {
				t.Errorf("%s is in another trace than its activity", s.Name)
			}
		}
	}
	if !found["fetch"] || !found["store"] {
		var all []string
		for _, s := range spans {
			all = append(all, s.Name)
		}
		t.Fatalf("no fetch and store span of demo.story under RunActivity → StartActivity → RunWorkflow (found %v) among %d spans: %v", found, len(spans), all)
	}
}

// keepSpans keeps the recorded spans when the provider shuts down (and flushes).
type keepSpans struct{ *tracetest.InMemoryExporter }

func (keepSpans) Shutdown(context.Context) error { return nil }
