package render

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdpfetch "github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
)

// idleFor is how long no request may be in flight for the network to count as idle.
const idleFor = 500 * time.Millisecond

// Renderer fetches pages by rendering them in a browser of the pool. Every request
// the page makes — the document, its scripts, their XHRs — is answered through Inner,
// the step's own fetcher, so a rendered page is as polite, guarded and lent the same
// resources as a plain one; the browser itself reaches nothing (proxy.go).
type Renderer struct {
	Pool  *Pool
	Inner crawl.Fetcher
	// Dial opens the tunnels the browser asks for (a WebSocket, HTTPS a service worker
	// fetches) through the worker's address guard (fetch.Fetcher.Dial); nil refuses
	// them.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	Opts crawl.Render
	// Screenshots is the directory that keeps a PNG of each page that failed, when
	// Opts.Screenshot asks, and a HAR of its requests, when Opts.HAR does; "" keeps
	// none.
	Screenshots string
	// Observe, when set, hears how each of Opts.Actions went, and ActionShots is the
	// directory that keeps a PNG of the page after each ("" keeps none): what
	// `trawler try --render` shows (a worker logs the loops that stopped on max).
	Observe     func(ActionOutcome)
	ActionShots string
}

var _ crawl.Fetcher = Renderer{}

// Fetch renders a GET; other requests go to Inner as they are. The Response carries
// the document's status and headers and the rendered HTML, as UTF-8.
func (r Renderer) Fetch(ctx context.Context, req *crawl.Request) (*crawl.Response, error) {
	if req.Method != "" && req.Method != http.MethodGet {
		return r.Inner.Fetch(ctx, req)
	}
	b, err := r.Pool.acquire(ctx)
	if err != nil {
		return nil, crawl.WithCause(fmt.Errorf("render %s: %w", crawl.RedactURL(req.URL), err), crawl.CauseTimeout)
	}
	// The page and everything it loads share one lease: one session (seeded into the
	// tab before it navigates), one device, one proxy.
	lctx, lease, returned, err := fetch.Pin(ctx)
	if err != nil {
		r.Pool.release(b, false)
		return nil, err
	}
	pctx, done := context.WithCancel(lctx)
	pg := &pageRun{r: r, req: req, b: b, ctx: pctx, session: sessionOf(lease)}
	pg.fills, pg.secrets = readFills(r.Opts.Actions)
	resp, err := pg.run(ctx)
	done() // what the page still has going (a request, a WebSocket's tunnel) ends with it
	returned(resp, err)
	r.Pool.release(b, pg.hung.Load())
	return resp, err
}

// pageRun is one page in one tab.
type pageRun struct {
	r    Renderer
	req  *crawl.Request
	b    *browser
	ctx  context.Context // the input's, until the page is done: its requests are made under it
	hung atomic.Bool     // a call to the tab got no answer: its browser is killed

	mu       sync.Mutex
	inflight int
	quietAt  time.Time // when the last request in flight ended
	claimed  bool      // the page's own request was made
	doc      *crawl.Response
	docErr   error
	navErr   error // the main frame went on to an address the worker refuses
	har      []harEntry
	fills    []string          // what the actions type, never shown
	secrets  map[string]string // the fills' secrets as read when the page began, by fillSource
	session  *leasedSession
}

func (pg *pageRun) run(ctx context.Context) (*crawl.Response, error) {
	o := pg.r.Opts
	u := crawl.RedactURL(pg.req.URL)
	win, err := pg.r.Pool.window(pg.b, o.Timeout)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			pg.hung.Store(true)
		}
		return nil, fmt.Errorf("render %s: open a tab: %w", u, err)
	}
	tctx := win.ctx
	win.page.Store(pg)
	defer func() {
		win.page.Store(nil)
		if !pg.hung.Load() && ctx.Err() == nil {
			pg.r.Pool.keep(pg.b, win, pg.req.URL)
		} else {
			win.close()
		}
	}()
	// A page that outlives its input is stopped where it is.
	defer context.AfterFunc(ctx, func() { _ = chromedp.Run(tctx, page.StopLoading()) })()
	w, h := o.ViewportSize()
	err = pg.call(tctx, time.Now().Add(o.Timeout), emulation.SetDeviceMetricsOverride(int64(w), int64(h), 1, false))
	if err != nil {
		return nil, pg.fail(tctx, fmt.Errorf("render %s: open a tab: %w", u, err))
	}
	if pg.session != nil {
		unseed, err := pg.seed(tctx, time.Now().Add(o.Timeout))
		if err != nil {
			return nil, pg.fail(tctx, fmt.Errorf("render %s: put the leased session into the tab: %w", u, err))
		}
		defer unseed()
	}
	var errText string
	err = pg.call(tctx, time.Now().Add(o.Timeout), chromedp.ActionFunc(func(ctx context.Context) error {
		_, _, text, _, err := page.Navigate(pg.req.URL).Do(ctx)
		errText = text
		return err
	}))
	if doc, docErr := pg.document(); docErr != nil {
		return nil, docErr // the document's own error, as a plain fetch gives it
	} else if err == nil && doc == nil && errText != "" {
		err = errors.New(errText)
	}
	if err != nil {
		return nil, pg.fail(tctx, fmt.Errorf("render %s: load: %w", u, err))
	}
	deadline := time.Now().Add(o.Timeout)
	if err := pg.settle(tctx, deadline); err != nil {
		return nil, pg.fail(tctx, fmt.Errorf("render %s: %w", u, err))
	}
	if err := pg.act(tctx, deadline, o.Actions, "render.actions"); err != nil {
		return nil, pg.fail(tctx, fmt.Errorf("render %s: %w", u, err))
	}
	if o.Script != "" {
		if err := pg.eval(tctx, deadline, o.Script, nil); err != nil {
			return nil, pg.fail(tctx, fmt.Errorf("render %s: script: %w", u, err))
		}
		if err := pg.settle(tctx, deadline); err != nil {
			return nil, pg.fail(tctx, fmt.Errorf("render %s: after the script: %w", u, err))
		}
	}
	var session *crawl.Session
	if pg.req.Login != nil {
		if session, err = pg.login(tctx, deadline); err != nil {
			return nil, pg.fail(tctx, fmt.Errorf("render %s: %w", u, err))
		}
	}
	var out struct {
		URL  string `json:"url"`
		HTML string `json:"html"`
	}
	if err := pg.eval(tctx, deadline, `({url: location.href, html: document.documentElement.outerHTML})`, &out); err != nil {
		return nil, pg.fail(tctx, fmt.Errorf("render %s: read the page: %w", u, err))
	}
	if nav := pg.navigationBlocked(); nav != nil {
		return nil, pg.fail(tctx, nav)
	}
	doc, _ := pg.document()
	resp := &crawl.Response{URL: out.URL, Status: http.StatusOK, Header: http.Header{}, Body: []byte("<!DOCTYPE html>\n" + out.HTML), Attempts: 1, Session: session}
	if doc != nil {
		resp.Status, resp.Header, resp.Attempts = doc.Status, doc.Header.Clone(), doc.Attempts
	}
	// The DOM is text now: whatever charset the document came in, this is UTF-8.
	resp.Header.Set("Content-Type", "text/html; charset=utf-8")
	return resp, nil
}

// settle waits for what the step asks before the HTML is taken: the load, the
// wait_for selector, an idle network.
func (pg *pageRun) settle(ctx context.Context, deadline time.Time) error {
	o := pg.r.Opts
	cond, what := `document.readyState === "complete"`, "the page to load"
	if o.WaitFor != "" {
		cond += fmt.Sprintf(` && document.querySelector(%q) !== null`, o.WaitFor)
		what = fmt.Sprintf("wait_for %q to match", o.WaitFor)
	}
	for {
		var ok bool
		if err := pg.eval(ctx, deadline, cond, &ok); err != nil {
			return err
		}
		if ok && (!o.Idle || pg.idle()) {
			return nil
		}
		if ok {
			what = "the network to go idle"
		}
		if time.Now().After(deadline) {
			return crawl.WithCause(fmt.Errorf("waited %s for %s (render.timeout)", o.Timeout, what), crawl.CauseTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // a poll is one round trip to the tab
		}
	}
}

// eval evaluates an expression in the page, into out when it is not nil.
func (pg *pageRun) eval(ctx context.Context, deadline time.Time, expr string, out any) error {
	return pg.call(ctx, deadline, chromedp.ActionFunc(func(ctx context.Context) error {
		v, exc, err := runtime.Evaluate(expr).WithReturnByValue(true).WithAwaitPromise(true).Do(ctx)
		switch {
		case err != nil:
			return err
		case exc != nil:
			return fmt.Errorf("%s", strings.TrimSpace(exc.Text+" "+exceptionText(exc)))
		case out != nil && v != nil:
			return json.Unmarshal(v.Value, out)
		}
		return nil
	}))
}

func exceptionText(exc *runtime.ExceptionDetails) string {
	if exc.Exception != nil && exc.Exception.Description != "" {
		return exc.Exception.Description
	}
	return ""
}

// hungAfter is how long past its deadline a call may take: a tab that works answers in
// milliseconds, even when what the page waits for never comes.
const hungAfter = 2 * time.Second

// call runs one action on the tab. A tab that does not answer by the deadline and
// hungAfter is hung (a script that never yields, a renderer stuck): its browser is
// killed.
func (pg *pageRun) call(ctx context.Context, deadline time.Time, a chromedp.Action) error {
	cctx, cancel := context.WithDeadline(ctx, deadline.Add(hungAfter))
	defer cancel()
	err := chromedp.Run(cctx, a)
	if err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		pg.hung.Store(true)
		return crawl.WithCause(fmt.Errorf("the page did not answer within %s (render.timeout) and %s more; its browser is killed and replaced", pg.r.Opts.Timeout, hungAfter), crawl.CauseTimeout)
	}
	return err
}

func (pg *pageRun) begin() {
	pg.mu.Lock()
	pg.inflight++
	pg.mu.Unlock()
}

func (pg *pageRun) end() {
	pg.mu.Lock()
	pg.inflight--
	pg.quietAt = time.Now()
	pg.mu.Unlock()
}

// idle reports whether no request has been in flight for idleFor.
func (pg *pageRun) idle() bool {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.inflight == 0 && time.Since(pg.quietAt) >= idleFor
}

// document is the answer to the page's own request, once it came.
func (pg *pageRun) document() (*crawl.Response, error) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.doc, pg.docErr
}

// blocked maps render.block names to the browser's resource types.
var blocked = map[string]network.ResourceType{
	"image": network.ResourceTypeImage, "font": network.ResourceTypeFont, "media": network.ResourceTypeMedia,
	"stylesheet": network.ResourceTypeStylesheet, "script": network.ResourceTypeScript, "xhr": network.ResourceTypeXHR,
	"fetch": network.ResourceTypeFetch, "websocket": network.ResourceTypeWebSocket, "other": network.ResourceTypeOther,
}

// answer serves one request of the page through the step's fetcher.
func (pg *pageRun) answer(tctx context.Context, e *cdpfetch.EventRequestPaused) {
	defer pg.end()
	c := chromedp.FromContext(tctx)
	if c == nil || c.Target == nil {
		return
	}
	exec := cdp.WithExecutor(tctx, c.Target)
	fail := func() { _ = cdpfetch.FailRequest(e.RequestID, network.ErrorReasonBlockedByClient).Do(exec) }
	if slices.ContainsFunc(pg.r.Opts.Block, func(b string) bool { return blocked[b] == e.ResourceType }) {
		fail()
		return
	}
	mainFrame := e.ResourceType == network.ResourceTypeDocument && string(e.FrameID) == string(c.Target.TargetID)
	isDoc := mainFrame
	req := &crawl.Request{Method: e.Request.Method, URL: e.Request.URL, Header: http.Header{}}
	if isDoc && pg.docTaken() {
		isDoc = false // a later navigation of the page (a form, a redirect by script)
	}
	if isDoc {
		// The page's own request is the task's: its headers, what statuses it accepts.
		cp := *pg.req
		req = &cp
	} else {
		for k, v := range e.Request.Headers {
			req.Header.Set(k, fmt.Sprint(v))
		}
		req.Header.Del("User-Agent") // the worker's (or a leased one), not the browser's
		if e.Request.HasPostData {
			for _, entry := range e.Request.PostDataEntries {
				b, _ := base64.StdEncoding.DecodeString(entry.Bytes)
				req.Body = append(req.Body, b...)
			}
		}
		// A script or XHR answering 404 is the page's business, not a failure.
		req.Accept = func(int) bool { return true }
		// A form's POST answered by a redirect: the browser follows it, and keeps
		// the cookies the redirect sets (a login's session).
		req.NoRedirect = mainFrame
	}
	started := time.Now()
	resp, err := pg.r.Inner.Fetch(pg.ctx, req)
	pg.record(req, started, resp, err)
	pg.mu.Lock()
	switch {
	case isDoc:
		pg.doc, pg.docErr = resp, err
	case mainFrame && crawl.CauseOf(err) == crawl.CauseBlocked && pg.navErr == nil:
		// A script, a meta refresh or a form took the page where the worker may not
		// go: what would be read is the browser's error page, not the page.
		pg.navErr = fmt.Errorf("the page went on to %w", err)
	}
	pg.mu.Unlock()
	if err != nil {
		fail()
		return
	}
	var headers []*cdpfetch.HeaderEntry
	for k, vs := range resp.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Encoding", "Content-Length", "Transfer-Encoding": // the body is decoded
			continue
		}
		for _, v := range vs {
			headers = append(headers, &cdpfetch.HeaderEntry{Name: k, Value: v})
		}
	}
	_ = cdpfetch.FulfillRequest(e.RequestID, int64(resp.Status)).WithResponseHeaders(headers).
		WithBody(base64.StdEncoding.EncodeToString(resp.Body)).Do(exec)
}

// navigationBlocked is the refused request of a later navigation of the page, if any.
func (pg *pageRun) navigationBlocked() error {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.navErr == nil {
		return nil
	}
	return fmt.Errorf("render %s: %w", crawl.RedactURL(pg.req.URL), pg.navErr)
}

// docTaken reports whether the page's document was requested already; the first
// call claims it.
func (pg *pageRun) docTaken() bool {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	taken := pg.claimed
	pg.claimed = true
	return taken
}

// fail is err, with a screenshot of the page and a HAR of its requests kept beside it
// when the step asks. A page
// whose main frame went on to a refused address failed for that reason, whatever err
// says (a wait_for the browser's error page never matches).
func (pg *pageRun) fail(ctx context.Context, err error) error {
	if nav := pg.navigationBlocked(); nav != nil && !pg.hung.Load() {
		err = nav
	}
	if pg.r.Screenshots == "" {
		return err
	}
	if pg.r.Opts.Screenshot && !pg.hung.Load() {
		if name, ok := pg.screenshot(ctx, pg.r.Screenshots, ""); ok {
			err = fmt.Errorf("%w (screenshot: %s)", err, name)
		}
	}
	if pg.r.Opts.HAR {
		if name, ok := pg.writeHAR(pg.r.Screenshots); ok {
			err = fmt.Errorf("%w (har: %s)", err, name)
		}
	}
	return err
}

// screenshot keeps a PNG of the page in dir, named by its URL, what it shows (an
// action's path) and the time, and says where.
func (pg *pageRun) screenshot(ctx context.Context, dir, what string) (string, bool) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	var png []byte
	if chromedp.Run(sctx, chromedp.CaptureScreenshot(&png)) != nil || len(png) == 0 {
		return "", false
	}
	if os.MkdirAll(dir, 0o755) != nil {
		return "", false
	}
	if what != "" {
		what = "-" + safeName(what)
	}
	name := filepath.Join(dir, fmt.Sprintf("%s%s-%d.png", safeName(pg.req.URL), what, time.Now().UnixNano()))
	if os.WriteFile(name, png, 0o644) != nil {
		return "", false
	}
	return name, true
}

// safeName is a URL as a file name.
func safeName(u string) string {
	u = strings.TrimPrefix(strings.TrimPrefix(crawl.RedactURL(u), "https://"), "http://")
	b := []byte(u)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 80)])
}
