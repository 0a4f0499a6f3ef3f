// Package render renders pages in headless Chromium for the steps that ask for it
// (`render:`), with memory that stays flat: a Pool of a bounded number of browser
// processes, each with a bounded number of tabs, recycled after a number of pages or
// above a memory ceiling, and killed when a page hangs it. A Renderer is a
// crawl.Fetcher: it loads a page in a tab, answers every request the page makes
// through the worker's own fetcher (politeness, robots.txt, proxies, user agents,
// cookies, the address guard), and returns the rendered HTML, which the step's task
// reads as it reads a plain page.
package render

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
)

// bypassNothing is the proxy bypass list that sends loopback through the proxy too
// (Chromium bypasses it by default).
const bypassNothing = "<-loopback>"

// DefaultBrowser is Debian's chromium.
const DefaultBrowser = "/usr/bin/chromium"

// Options size a Pool. Zero values take the defaults noted.
type Options struct {
	Path     string // the browser binary; default DefaultBrowser
	Browsers int    // processes at once; default 2
	Tabs     int    // pages at once per process; default 4
	// PagesPerBrowser recycles a process after that many pages (default 200);
	// MaxMB recycles it when its process group's memory (PSS: shared pages shared
	// out) passes that many MiB after a page (default 1024).
	PagesPerBrowser int
	MaxMB           int
	// Grace is how long a process being recycled may finish its other pages before it
	// is killed anyway (default 10 s).
	Grace time.Duration
	Log   *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Path == "" {
		o.Path = DefaultBrowser
	}
	if o.Browsers <= 0 {
		o.Browsers = 2
	}
	if o.Tabs <= 0 {
		o.Tabs = 4
	}
	if o.PagesPerBrowser <= 0 {
		o.PagesPerBrowser = 200
	}
	if o.MaxMB <= 0 {
		o.MaxMB = 1024
	}
	if o.Grace <= 0 {
		o.Grace = 10 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

// BoundMB is the most memory the pool's processes may hold at once, in MiB: each
// process is recycled once it passes MaxMB after a page, and its pages in flight may
// add up to PageMB each before that check.
func (o Options) BoundMB() int {
	o = o.withDefaults()
	return o.Browsers * (o.MaxMB + o.Tabs*PageMB)
}

// PageMB is the headroom one page in flight is given in BoundMB.
const PageMB = 64

// Stats count what a pool did since it started.
type Stats struct {
	Started  int64 `json:"started"`  // browser processes started
	Pages    int64 `json:"pages"`    // pages rendered (or tried)
	Recycled int64 `json:"recycled"` // processes retired for their page count or memory
	Hung     int64 `json:"hung"`     // processes killed because a page hung them
}

// Pool owns the browser processes of one worker. It starts them when pages need
// them, so a worker that never renders runs none.
type Pool struct {
	o     Options
	stats struct{ started, pages, recycled, hung atomic.Int64 }

	mu      sync.Mutex
	slots   []*browser // nil: free; a browser may still be starting
	changed chan struct{}
	closed  bool
	done    chan struct{} // closed by Close
}

// browser is one Chromium process group and its chromedp contexts.
type browser struct {
	ctx      context.Context // the browser's chromedp context: tabs derive from it
	cancel   func()          // closes the contexts and reaps the process
	pid      int
	profile  string
	proxy    *proxy        // the browser's own way out, which refuses everything
	ready    chan struct{} // closed when started (err says how)
	err      error
	active   int       // tabs in use
	windows  []*window // open tabs no page uses, kept for the next pages
	pages    int
	measured atomicTime // when its memory was last read
	retiring string     // why it takes no more tabs; killed when its last tab is done
	killed   bool
}

// NewPool makes a pool; no browser starts before a page needs one. It first kills
// the browsers of workers that died on this machine without closing theirs.
func NewPool(o Options) (*Pool, error) {
	o = o.withDefaults()
	if _, err := exec.LookPath(o.Path); err != nil {
		return nil, fmt.Errorf("browser %s: %v; install Debian's chromium package or give --browser PATH", o.Path, err)
	}
	p := &Pool{o: o, slots: make([]*browser, o.Browsers), changed: make(chan struct{}), done: make(chan struct{})}
	p.sweep()
	go func() {
		for {
			select {
			case <-p.done:
				return
			case <-time.After(sweepEvery):
				p.sweep()
			}
		}
	}()
	return p, nil
}

// sweepEvery is how often a pool looks for what dead workers left behind.
const sweepEvery = 5 * time.Second

// sweep kills what dead workers on this machine left behind. The pool sweeps when it
// is made, every sweepEvery, before each browser it starts and when it closes: a
// helper of a killed worker's browser may take a while to die, or outlive it.
func (p *Pool) sweep() {
	if n := SweepOrphans(); n > 0 {
		p.o.Log.Warn("killed browser processes a dead worker left behind", "processes", n)
	}
}

// Options are the pool's settings, defaults applied.
func (p *Pool) Options() Options { return p.o }

// Stats are the pool's counts so far.
func (p *Pool) Stats() Stats {
	return Stats{Started: p.stats.started.Load(), Pages: p.stats.pages.Load(), Recycled: p.stats.recycled.Load(), Hung: p.stats.hung.Load()}
}

// Usage is what all the pool's processes hold now.
func (p *Pool) Usage() Usage {
	p.mu.Lock()
	var pids []int
	for _, b := range p.slots {
		if b != nil && b.pid > 0 {
			pids = append(pids, b.pid)
		}
	}
	p.mu.Unlock()
	var sum Usage
	for _, pid := range pids {
		m := groupUsage(pid)
		sum.RSS += m.RSS
		sum.PSS += m.PSS
	}
	return sum
}

// acquire waits for a free tab, starting a browser in a free slot when every running
// one is full, and returns the browser with a tab held for the caller.
func (p *Pool) acquire(ctx context.Context) (*browser, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errors.New("the worker's browser pool is closed")
		}
		free := -1
		for i, b := range p.slots {
			switch {
			case b == nil:
				if free < 0 {
					free = i
				}
			case b.retiring == "" && b.err == nil && b.active < p.o.Tabs:
				b.active++
				p.mu.Unlock()
				select {
				case <-b.ready:
				case <-ctx.Done():
					p.release(b, false)
					return nil, ctx.Err()
				}
				if b.err != nil {
					p.release(b, false)
					return nil, b.err
				}
				return b, nil
			}
		}
		if free >= 0 {
			b := &browser{ready: make(chan struct{})}
			p.slots[free] = b
			p.mu.Unlock()
			p.start(b)
			continue // take a tab of it like any other
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a browser tab (%d browsers × %d tabs busy): %w", p.o.Browsers, p.o.Tabs, ctx.Err())
		}
	}
}

// broadcast wakes every acquire waiting for a tab; p.mu is held.
func (p *Pool) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// starter runs every browser start on one OS thread that never exits: the
// parent-death signal fires when the thread that started a process ends, not the
// worker, and Go ends threads of goroutines that exit while locked to them.
var starter = sync.OnceValue(func() chan func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread()
		for f := range ch {
			f()
		}
	}()
	return ch
})

// start launches a browser in its own process group, which dies with the worker.
func (p *Pool) start(b *browser) {
	p.sweep()
	done := make(chan struct{})
	starter() <- func() {
		defer close(done)
		profile, err := os.MkdirTemp("", profilePrefix+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			b.err = fmt.Errorf("browser profile: %w", err)
			return
		}
		b.profile = profile
		if b.proxy, err = startProxy(nil); err != nil {
			b.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(p.o.Path), chromedp.UserDataDir(profile),
			chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true), chromedp.Flag("disable-crash-reporter", true),
			chromedp.Flag("disable-breakpad", true), chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.Flag("renderer-process-limit", strconv.Itoa(p.o.Tabs)),
			// No back-forward cache (it keeps every page left alive), no spare renderer,
			// none of the services that call home.
			chromedp.Flag("disable-features", "Translate,MediaRouter,DialMediaRouteProvider,OptimizationHints,site-per-process,BackForwardCache,SpareRendererForSitePerProcess,"+
				"AutofillServerCommunication,CertificateTransparencyComponentUpdater,NetworkTimeServiceQuerying,InterestFeedContentSuggestions"),
			// The browser reaches nothing by itself (proxy.go): every connection goes to
			// the worker's proxy, loopback included, no name is resolved, and WebRTC
			// sends no UDP; the tabs' contexts each get a proxy of their own.
			chromedp.ProxyServer(b.proxy.addr()), chromedp.Flag("proxy-bypass-list", bypassNothing),
			chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
			chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
			chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-domain-reliability", true),
			chromedp.Flag("no-pings", true), chromedp.Flag("disable-background-networking", true),
			chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
				// Its own group, so one kill takes every helper; SIGKILL when the
				// worker dies, so none outlives it.
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			}),
		)
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelBrowser := chromedp.NewContext(actx)
		b.ctx = bctx
		b.cancel = func() { cancelBrowser(); cancelAlloc() }
		// The first Run starts the process and ties it to the context it is given:
		// the browser's own, bounded by a timer instead of a deadline.
		slow := time.AfterFunc(30*time.Second, cancelBrowser)
		defer slow.Stop()
		if err := chromedp.Run(bctx); err != nil {
			b.err = fmt.Errorf("start browser %s: %w", p.o.Path, err)
		} else if c := chromedp.FromContext(bctx); c.Browser != nil && c.Browser.Process() != nil {
			b.pid = c.Browser.Process().Pid
		}
	}
	<-done
	p.stats.started.Add(1)
	if b.err != nil {
		p.o.Log.Warn("browser did not start", "err", b.err)
		p.mu.Lock()
		b.retiring = "did not start"
		p.mu.Unlock()
		p.kill(b)
	}
	close(b.ready)
}

// release gives a tab back. A page that hung its browser retires it; so do its page
// count and its memory. A retired browser is killed once its last tab is back.
func (p *Pool) release(b *browser, hung bool) {
	p.stats.pages.Add(1)
	// Reading a browser's memory walks its processes' page tables: once a second is
	// enough to catch it growing.
	var mem Usage
	if !hung && b.pid > 0 && time.Since(b.measured.Swap(time.Now())) >= time.Second {
		mem = groupUsage(b.pid)
	}
	p.mu.Lock()
	b.active--
	b.pages++
	why := ""
	switch {
	case hung:
		why = "a page hung it"
		p.stats.hung.Add(1)
	case b.ctx != nil && b.ctx.Err() != nil:
		why = "it exited"
	case b.pages >= p.o.PagesPerBrowser:
		why = fmt.Sprintf("recycled after %d pages", b.pages)
	case mem.PSS > int64(p.o.MaxMB)<<20:
		why = fmt.Sprintf("recycled at %d MiB (max %d)", mem.PSS>>20, p.o.MaxMB)
	}
	if why != "" && b.retiring == "" {
		b.retiring = why
		if !hung {
			p.stats.recycled.Add(1)
		}
		if b.active > 0 {
			// Its other pages get Grace to finish; a page stuck in it is killed with it.
			time.AfterFunc(p.o.Grace, func() { p.kill(b) })
		}
	}
	last := b.retiring != "" && b.active == 0
	p.broadcast()
	p.mu.Unlock()
	if last {
		p.kill(b)
	}
}

// kill ends a browser's whole process group, reaps it, removes its profile and frees
// its slot.
func (p *Pool) kill(b *browser) {
	p.mu.Lock()
	if b.killed {
		p.mu.Unlock()
		return
	}
	b.killed = true
	for i, s := range p.slots {
		if s == b {
			p.slots[i] = nil
		}
	}
	p.broadcast()
	p.mu.Unlock()
	if b.pid > 0 {
		_ = syscall.Kill(-b.pid, syscall.SIGKILL)
		p.o.Log.Info("browser stopped", "pid", b.pid, "pages", b.pages, "why", b.retiring)
	}
	if b.cancel != nil {
		b.cancel() // waits for the process, so it is reaped
	}
	if b.profile != "" {
		_ = os.RemoveAll(b.profile)
	}
	if b.proxy != nil {
		b.proxy.close()
	}
}

// Close kills every browser of the pool; pages still rendering fail.
func (p *Pool) Close() {
	defer p.sweep()
	p.mu.Lock()
	if !p.closed {
		close(p.done)
	}
	p.closed = true
	bs := append([]*browser(nil), p.slots...)
	p.mu.Unlock()
	for _, b := range bs {
		if b != nil {
			<-b.ready
			p.mu.Lock()
			if b.retiring == "" {
				b.retiring = "the worker stops"
			}
			p.mu.Unlock()
			p.kill(b)
		}
	}
}

// atomicTime is a time several goroutines read and set.
type atomicTime struct{ ns atomic.Int64 }

// Swap sets t and returns the time before (zero at first).
func (a *atomicTime) Swap(t time.Time) time.Time {
	if old := a.ns.Swap(t.UnixNano()); old != 0 {
		return time.Unix(0, old)
	}
	return time.Time{}
}
