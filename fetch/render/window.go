package render

import (
	"context"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdpfetch "github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// window is one tab of a browser, kept from page to page so its renderer process
// stays warm (starting one per page costs more than the page). It has a browser
// context of its own, whose cookies and storage are cleared after each page, so
// nothing carries from one page to the next.
type window struct {
	ctx   context.Context // the tab's chromedp context
	id    cdp.BrowserContextID
	close func()
	// page is the page the tab shows now: its requests are answered for it.
	page atomic.Pointer[pageRun]
}

// window takes a kept tab of b, or opens one.
func (p *Pool) window(b *browser, timeout time.Duration) (*window, error) {
	p.mu.Lock()
	if n := len(b.windows); n > 0 {
		w := b.windows[n-1]
		b.windows = b.windows[:n-1]
		p.mu.Unlock()
		return w, nil
	}
	p.mu.Unlock()
	c := chromedp.FromContext(b.ctx)
	ex := cdp.WithExecutor(b.ctx, c.Browser)
	w := &window{}
	// The tab's way out: its own proxy, which answers for the page the tab shows.
	prx, err := startProxy(w.page.Load)
	if err != nil {
		return nil, err
	}
	id, err := target.CreateBrowserContext().WithDisposeOnDetach(true).
		WithProxyServer(prx.addr()).WithProxyBypassList(bypassNothing).Do(ex)
	if err != nil {
		prx.close()
		return nil, err
	}
	dispose := func() { _ = target.DisposeBrowserContext(id).Do(ex); prx.close() }
	// A new window: headless Chromium opens no tab in a new context otherwise.
	tid, err := target.CreateTarget("about:blank").WithBrowserContextID(id).WithNewWindow(true).Do(ex)
	if err != nil {
		dispose()
		return nil, err
	}
	tctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithTargetID(tid))
	w.ctx, w.id, w.close = tctx, id, func() { cancel(); dispose() }
	// The first Run attaches to the tab for the lifetime of the context it is given:
	// the tab's own, bounded by a timer instead of a deadline.
	slow := time.AfterFunc(timeout, cancel)
	err = chromedp.Run(tctx)
	slow.Stop()
	if err == nil {
		chromedp.ListenTarget(tctx, func(ev any) {
			if e, ok := ev.(*cdpfetch.EventRequestPaused); ok {
				w.paused(e)
			}
		})
		// Every request the tab makes waits for an answer from the worker's fetcher.
		err = chromedp.Run(tctx, cdpfetch.Enable().WithPatterns([]*cdpfetch.RequestPattern{{URLPattern: "*", RequestStage: cdpfetch.RequestStageRequest}}))
	}
	if err != nil {
		if tctx.Err() != nil {
			err = context.DeadlineExceeded
		}
		w.close()
		return nil, err
	}
	return w, nil
}

// paused hands a request of the tab to its page; one that comes between pages fails.
func (w *window) paused(e *cdpfetch.EventRequestPaused) {
	pg := w.page.Load()
	if pg == nil {
		c := chromedp.FromContext(w.ctx)
		go func() {
			_ = cdpfetch.FailRequest(e.RequestID, network.ErrorReasonAborted).Do(cdp.WithExecutor(w.ctx, c.Target))
		}()
		return
	}
	pg.begin()
	go pg.answer(w.ctx, e)
}

// keep clears a tab after a page — the page, its cookies, its origin's storage — and
// keeps it for the next; a tab that does not clear is closed.
func (p *Pool) keep(b *browser, w *window, pageURL string) {
	ctx, cancel := context.WithTimeout(w.ctx, 2*time.Second)
	defer cancel()
	actions := chromedp.Tasks{
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, _, _, _, err := page.Navigate("about:blank").Do(ctx)
			return err
		}),
		chromedp.ActionFunc(func(ctx context.Context) error {
			// Cookies belong to the browser context: the browser clears them.
			return storage.ClearCookies().WithBrowserContextID(w.id).Do(cdp.WithExecutor(ctx, chromedp.FromContext(b.ctx).Browser))
		}),
	}
	if u, err := url.Parse(pageURL); err == nil && u.Host != "" {
		actions = append(actions, storage.ClearDataForOrigin(u.Scheme+"://"+u.Host, "all"))
	}
	if chromedp.Run(ctx, actions) != nil {
		w.close()
		return
	}
	p.mu.Lock()
	b.windows = append(b.windows, w)
	p.mu.Unlock()
}
