package render

import (
	"context"

	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
)

// startPool starts a pool on Debian's chromium, which .ci/run installs, and checks
// when the test ends that none of its processes is left.
func startPool(t testing.TB, o Options) *Pool {
	t.Helper()
	if _, err := os.Stat(DefaultBrowser); err != nil {
		t.Fatalf("%s is missing: install Debian's chromium package (bash .ci/run does)", DefaultBrowser)
	}
	o.Log = slog.New(slog.DiscardHandler)
	p, err := NewPool(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		if left := ours(); len(left) > 0 {
			t.Errorf("browser processes left after Close: %+v", left)
		}
	})
	return p
}

// ours lists this process's live browser processes.
func ours() []Process {
	var out []Process
	for _, p := range Processes() {
		if p.Owner == os.Getpid() {
			out = append(out, p)
		}
	}
	return out
}

func demo(t testing.TB, o demosite.Options) string {
	t.Helper()
	base, stop, err := demosite.Start("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return base
}

func renderer(p *Pool, opts crawl.Render) Renderer {
	if opts.Mode == "" {
		opts = crawl.Render{Mode: crawl.RenderAlways, Timeout: 5 * time.Second, Viewport: crawl.DefaultViewport, Block: crawl.DefaultRenderBlock, Idle: true}
	}
	return Renderer{Pool: p, Inner: fetch.New(fetch.Options{AllowPrivate: true}), Opts: opts}
}

// A page built by script comes back as the HTML the script built; the plain fetch of
// the same page has none of it.
func TestRenderBuildsThePage(t *testing.T) {
	base := demo(t, demosite.Options{Pages: 2, PerPage: 3})
	p := startPool(t, Options{Browsers: 1, Tabs: 2})
	r := renderer(p, crawl.Render{})
	st, _ := demosite.Options{Pages: 2, PerPage: 3}.Story(4)
	resp, err := r.Fetch(context.Background(), &crawl.Request{URL: base + "/js/item/4"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.Body), `<h1 class="title">`+st.Title+`</h1>`) || resp.Status != 200 {
		t.Errorf("rendered page (status %d) lacks the title %q:\n%s", resp.Status, st.Title, resp.Body)
	}
	plain, err := r.Inner.Fetch(context.Background(), &crawl.Request{URL: base + "/js/item/4"})
	if err != nil || strings.Contains(string(plain.Body), `<h1 class="title">`) {
		t.Errorf("the plain page should be a shell: %v %s", err, plain.Body)
	}
	// A missing page fails as a plain fetch does: with its status.
	_, err = r.Fetch(context.Background(), &crawl.Request{URL: base + "/js/item/999"})
	if crawl.CauseOf(err) != crawl.CauseHTTP404 {
		t.Errorf("missing page: cause %s, err %v; want http_404", crawl.CauseOf(err), err)
	}
}

// A page that never shows what the step waits for fails with the wait it timed out on,
// and a screenshot of it is kept, named in the error.
func TestFailedPageKeepsAScreenshot(t *testing.T) {
	base := demo(t, demosite.Options{})
	p := startPool(t, Options{Browsers: 1, Tabs: 1})
	dir := t.TempDir()
	r := renderer(p, crawl.Render{Mode: crawl.RenderAlways, WaitFor: "div.never", Timeout: time.Second, Viewport: "800x600", Screenshot: true})
	r.Screenshots = dir
	_, err := r.Fetch(context.Background(), &crawl.Request{URL: base + "/js/item/2"})
	if err == nil || crawl.CauseOf(err) != crawl.CauseTimeout || !strings.Contains(err.Error(), `waited 1s for wait_for "div.never" to match (render.timeout)`) {
		t.Fatalf("err %v (cause %s); want the wait that timed out", err, crawl.CauseOf(err))
	}
	_, shot, ok := strings.Cut(err.Error(), "(screenshot: ")
	png, rerr := os.ReadFile(strings.TrimSuffix(shot, ")"))
	if !ok || rerr != nil || !strings.HasPrefix(string(png), "\x89PNG") || !strings.HasPrefix(shot, dir) {
		t.Errorf("no PNG named in %q: %v", err, rerr)
	}
}

// A page whose script never ends hangs its tab: the render fails with a timeout, the
// browser is killed (no process left of it), and the next page gets a new one.
func TestHungPageKillsItsBrowser(t *testing.T) {
	base := demo(t, demosite.Options{})
	p := startPool(t, Options{Browsers: 1, Tabs: 2})
	opts := crawl.Render{Mode: crawl.RenderAlways, Timeout: 2 * time.Second, Viewport: crawl.DefaultViewport, Idle: true}
	r := renderer(p, opts)
	if _, err := r.Fetch(context.Background(), &crawl.Request{URL: base + "/js/news?p=1"}); err != nil {
		t.Fatal(err)
	}
	first := ours()
	if len(first) == 0 {
		t.Fatal("no browser process runs after a render")
	}
	_, err := r.Fetch(context.Background(), &crawl.Request{URL: base + "/js/hang"})
	if crawl.CauseOf(err) != crawl.CauseTimeout || !strings.Contains(err.Error(), "killed and replaced") {
		t.Fatalf("hung page: cause %s, err %v; want a timeout that kills the browser", crawl.CauseOf(err), err)
	}
	if s := p.Stats(); s.Hung != 1 {
		t.Errorf("stats %+v: want 1 hung", s)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(ours()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := ours(); len(left) > 0 {
		t.Fatalf("the hung browser's processes are still there: %+v", left)
	}
	resp, err := r.Fetch(context.Background(), &crawl.Request{URL: base + "/js/news?p=1"})
	if err != nil || !strings.Contains(string(resp.Body), `class="athing"`) {
		t.Fatalf("after the hang: %v", err)
	}
	if s := p.Stats(); s.Started != 2 {
		t.Errorf("stats %+v: want a second browser started", s)
	}
}

// A browser is recycled after its page count: a new one takes over and the old one's
// processes are gone.
func TestBrowsersRecycle(t *testing.T) {
	base := demo(t, demosite.Options{})
	p := startPool(t, Options{Browsers: 1, Tabs: 1, PagesPerBrowser: 2})
	r := renderer(p, crawl.Render{})
	for i := 1; i <= 3; i++ {
		if _, err := r.Fetch(context.Background(), &crawl.Request{URL: base + "/js/item/1"}); err != nil {
			t.Fatal(err)
		}
	}
	if s := p.Stats(); s.Started != 2 || s.Recycled != 1 || s.Pages != 3 {
		t.Errorf("stats %+v: want 2 started, 1 recycled, 3 pages", s)
	}
	groups := map[int]bool{}
	for _, pr := range ours() {
		groups[pr.PGID] = true
	}
	if len(groups) > 1 {
		t.Errorf("%d browser process groups alive; the pool allows 1", len(groups))
	}
}
