package activities

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch/render"
	"github.com/trawlerhq/trawler/internal/monitor"
)

// Rendering is what a worker with a browser lends the steps that render (`render:`).
type Rendering struct {
	Pool *render.Pool
	// Screenshots is where PNGs of failed pages are kept (render.screenshot).
	Screenshots string
	memory      sync.Once
	auto        *render.Memory
}

// rendering wraps a step's task so that it reads rendered pages: every page for
// `always`; for `auto`, a page whose plain HTML gives the task nothing, and at once
// the kinds of page that needed it lately (render.Memory). A worker without a browser
// refuses the batch: runs send rendering steps to workers with one
// (workflows.SiteQueueOf), so it only gets one from a plan made before that.
func (a *Activities) rendering(task crawl.Task, b crawl.Batch) (crawl.Task, error) {
	if !b.Step.Render.Renders() {
		return task, nil
	}
	if a.Render == nil || a.Render.Pool == nil {
		return nil, fmt.Errorf("step %s renders pages (render: %s) and this worker has no browser; it runs on workers started with one (trawler worker --browser PATH)", b.Step.ID, b.Step.Render.Mode)
	}
	a.Render.memory.Do(func() { a.Render.auto = render.NewMemory(0) })
	t := renderTask{Task: task, r: a.Render, opts: *b.Step.Render, log: a.Log.With("chain", b.Chain, "run", b.RunID, "step", b.Step.ID)}
	// The tunnels the browser asks for (WebSockets, HTTPS outside the page's
	// interception) go through the address guard of the worker's fetcher
	// (fetch.Fetcher.Dial); a fetcher without one opens none.
	if d, ok := a.Fetcher.(interface {
		Dial(ctx context.Context, network, addr string) (net.Conn, error)
	}); ok {
		t.dial = d.Dial
	}
	return t, nil
}

type renderTask struct {
	crawl.Task
	r    *Rendering
	opts crawl.Render
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	log  *slog.Logger
}

// noteLoops logs a `repeat` that stopped on its max before until held: the page was read
// as it was then, which may be less than the list holds.
func (t renderTask) noteLoops(url string) func(render.ActionOutcome) {
	return func(o render.ActionOutcome) {
		if o.Err == nil && strings.HasPrefix(o.Note, "stopped on max") {
			t.log.Info("render: a repeat stopped on max", "url", crawl.RedactURL(url), "action", o.Path, "note", o.Note)
		}
	}
}

func (t renderTask) Run(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	rendered := *env
	rendered.Fetcher = render.Renderer{Pool: t.r.Pool, Inner: env.Fetcher, Dial: t.dial, Opts: t.opts, Screenshots: t.r.Screenshots, Observe: t.noteLoops(in.URL)}
	name := t.Spec().Name
	kind := render.Kind(env.Step, in.URL)
	if t.opts.Mode == crawl.RenderAlways || t.r.auto.Needs(kind) {
		monitor.RenderPages.WithLabelValues(name, "rendered").Inc()
		return t.Task.Run(ctx, &rendered, in)
	}
	res, err := t.Task.Run(ctx, env, in)
	if !foundNothing(res, err) {
		monitor.RenderPages.WithLabelValues(name, "plain").Inc()
		return res, err
	}
	monitor.RenderPages.WithLabelValues(name, "rendered").Inc()
	res, err = t.Task.Run(ctx, &rendered, in)
	if !foundNothing(res, err) {
		t.r.auto.Remember(kind)
	}
	return res, err
}

// foundNothing reports whether a task found nothing on a page: no item, no link to
// follow, nothing skipped, or a required field or key that read nothing (a parse
// failure). The page may be an empty shell its scripts fill.
func foundNothing(res crawl.Result, err error) bool {
	if err != nil {
		return crawl.CauseOf(err) == crawl.CauseParse
	}
	return len(res.Items) == 0 && len(res.Next) == 0 && res.Skipped == 0
}
