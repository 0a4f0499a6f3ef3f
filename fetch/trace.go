package fetch

import (
	"context"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/tracing"
)

// Tracing gives every fetch a span under the batch activity's: method, URL (passwords
// masked), status, bytes, and the failure's cause. It sits outside Metrics, so the span
// is the time the task waited. Without tracing (see package tracing) it costs a no-op
// span.
func Tracing() crawl.Middleware {
	return func(next crawl.Fetcher) crawl.Fetcher {
		return crawl.FetcherFunc(func(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
			if !trace.SpanFromContext(ctx).SpanContext().IsValid() && !tracing.Enabled() {
				return next.Fetch(ctx, r)
			}
			host := ""
			if u, err := url.Parse(r.URL); err == nil {
				host = u.Host
			}
			ctx, span := tracing.Tracer().Start(ctx, "fetch "+r.Method+" "+host, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.full", crawl.RedactURL(r.URL))))
			defer span.End()
			resp, err := next.Fetch(ctx, r)
			if resp != nil {
				span.SetAttributes(attribute.Int("http.response.status_code", resp.Status), attribute.Int("http.response.body.size", len(resp.Body)))
			}
			if err != nil {
				span.SetAttributes(attribute.String("trawler.cause", string(crawl.CauseOf(err))))
				span.SetStatus(codes.Error, crawl.RedactText(err.Error()))
			}
			return resp, err
		})
	}
}
