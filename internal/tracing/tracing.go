// Package tracing sends OpenTelemetry traces of chain runs: a run's workflow, each batch
// activity, each fetch and each store write, in one trace per workflow (the Temporal
// SDK's OpenTelemetry interceptor carries the context from workflow to activity; the
// fetcher and the item pipeline add their spans under the activity's).
//
// Nothing is traced until Start installs an exporter: with `--otlp HOST:PORT` spans go to
// an OpenTelemetry collector by OTLP/gRPC; with `--otlp stderr` each span is printed as
// one line when it ends (the dev stack's way to look at them).
package tracing

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// Name is the instrumentation name of Trawler's own spans.
const Name = "trawler"

var enabled atomic.Bool

// Enabled reports whether Start installed an exporter.
func Enabled() bool { return enabled.Load() }

// Tracer is Trawler's tracer (a no-op until Start).
func Tracer() trace.Tracer { return otel.Tracer(Name) }

// Start installs the process's tracer provider. target is "HOST:PORT" of an OTLP/gRPC
// collector (plaintext; "https://HOST:PORT" for TLS), or "stderr" to print each span
// to w. service names the process in the traces (trawler-worker …). The returned
// function flushes what is buffered and stops.
func Start(ctx context.Context, target, service string, w io.Writer) (func(context.Context) error, error) {
	var exp sdktrace.SpanExporter
	switch {
	case target == "stderr":
		exp = &lineExporter{w: w}
	case strings.TrimSpace(target) == "":
		return nil, fmt.Errorf("--otlp: give HOST:PORT of an OpenTelemetry collector, or stderr to print spans")
	default:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(strings.TrimPrefix(target, "https://"))}
		if !strings.HasPrefix(target, "https://") {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		var err error
		if exp, err = otlptracegrpc.New(ctx, opts...); err != nil {
			return nil, fmt.Errorf("--otlp %s: %w", target, err)
		}
	}
	return Install(exp, service), nil
}

// Install makes exp the process's span exporter (Start's, or a test's in-memory one).
// Only Trawler's own spans and its Temporal interceptor's reach it: the embedded
// servers of a dev stack trace through the same global provider, and theirs are noise.
func Install(exp sdktrace.SpanExporter, service string) func(context.Context) error {
	exp = ownSpans{exp}
	var proc sdktrace.SpanProcessor = sdktrace.NewBatchSpanProcessor(exp)
	if _, ok := exp.(ownSpans).SpanExporter.(*lineExporter); ok {
		proc = sdktrace.NewSimpleSpanProcessor(exp) // print as spans end
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(proc),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(service))))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	enabled.Store(true)
	return func(ctx context.Context) error {
		enabled.Store(false)
		return tp.Shutdown(ctx)
	}
}

// Interceptors are the Temporal client interceptors that trace workflows and
// activities; none while tracing is off, so untraced runs carry no trace headers.
func Interceptors() []interceptor.ClientInterceptor {
	if !Enabled() {
		return nil
	}
	ti, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: otel.Tracer(temporalScope)})
	if err != nil {
		return nil
	}
	return []interceptor.ClientInterceptor{ti}
}

// temporalScope names the spans of the Temporal interceptor (StartActivity, RunActivity …).
const temporalScope = "github.com/trawlerhq/trawler/temporal"

// ownSpans passes on the spans of Trawler's tracers only.
type ownSpans struct{ sdktrace.SpanExporter }

func (o ownSpans) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	var own []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if n := s.InstrumentationScope().Name; n == Name || n == temporalScope {
			own = append(own, s)
		}
	}
	if len(own) == 0 {
		return nil
	}
	return o.SpanExporter.ExportSpans(ctx, own)
}

// lineExporter prints one line per span: trace, duration, name and attributes.
type lineExporter struct {
	mu sync.Mutex
	w  io.Writer
}

func (e *lineExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range spans {
		var attrs []string
		for _, a := range s.Attributes() {
			attrs = append(attrs, fmt.Sprintf("%s=%s", a.Key, a.Value.String()))
		}
		status := ""
		if s.Status().Code.String() == "Error" {
			status = " error: " + s.Status().Description
		}
		fmt.Fprintf(e.w, "trace %s span %s parent %s %8s  %s %s%s\n", s.SpanContext().TraceID().String()[:8], s.SpanContext().SpanID(), s.Parent().SpanID(),
			s.EndTime().Sub(s.StartTime()).Round(time.Microsecond), s.Name(), strings.Join(attrs, " "), status)
	}
	return nil
}

func (e *lineExporter) Shutdown(context.Context) error { return nil }
