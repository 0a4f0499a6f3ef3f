package render

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
)

// recording is the step's fetcher, noting each URL the page had fetched through it.
type recording struct {
	crawl.Fetcher
	mu   sync.Mutex
	urls []string
}

func (r *recording) Fetch(ctx context.Context, req *crawl.Request) (*crawl.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, strings.TrimPrefix(req.URL, "http://"))
	r.mu.Unlock()
	return r.Fetcher.Fetch(ctx, req)
}

func (r *recording) fetched(part string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, u := range r.urls {
		if strings.Contains(u, part) {
			n++
		}
	}
	return n
}

// lastOf is the last outcome heard, or none.
func lastOf(outs []ActionOutcome) ActionOutcome {
	if len(outs) == 0 {
		return ActionOutcome{}
	}
	return outs[len(outs)-1]
}

func actionsOpts(acts ...crawl.Action) crawl.Render {
	return crawl.Render{Mode: crawl.RenderAlways, Timeout: 10 * time.Second, Viewport: "800x600", Block: crawl.DefaultRenderBlock, Idle: true, Actions: acts}
}

// Browser actions on the demo site's pages that load their items by script: one browser
// for all of them.
func TestActions(t *testing.T) {
	base := demo(t, demosite.Options{})
	p := startPool(t, Options{Browsers: 1, Tabs: 1})
	page := func(t *testing.T, url string, opts crawl.Render) (string, []ActionOutcome, *recording, error) {
		t.Helper()
		r := renderer(p, opts)
		rec := &recording{Fetcher: r.Inner}
		r.Inner = rec
		var outs []ActionOutcome
		r.Observe = func(o ActionOutcome) { outs = append(outs, o) }
		resp, err := r.Fetch(context.Background(), &crawl.Request{URL: base + url})
		if err != nil {
			return "", outs, rec, err
		}
		return string(resp.Body), outs, rec, nil
	}
	more := crawl.Action{Kind: crawl.ActionClick, Selector: "button.more"}

	// "Load more" until 35 items show: three clicks, each item batch fetched by an XHR
	// that went through the step's fetcher.
	t.Run("load more", func(t *testing.T) {
		body, outs, rec, err := page(t, "/js/more?total=35&per=10", actionsOpts(crawl.Action{Kind: crawl.ActionRepeat, Do: []crawl.Action{more},
			Until: &crawl.Until{Count: ".item", AtLeast: 35}, Max: 10}))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(body, `class="item"`); n != 35 || strings.Contains(body, "Item 36") {
			t.Errorf("%d items after load more; want 35", n)
		}
		if n := rec.fetched("/js/api/items?"); n != 4 {
			t.Errorf("%d item XHRs went through the fetcher (%v); want 4, the page's and one per click", n, rec.urls)
		}
		last := lastOf(outs)
		if last.Path != "render.actions[0]" || last.Note != "until held after 3 rounds" || last.Err != nil {
			t.Errorf("the loop's outcome %+v; want until held after 3 rounds", last)
		}
	})

	// An infinite list: scrolled until nothing changes, all 120 show; with max 3, 80 do
	// and the loop says it stopped on max.
	t.Run("infinite scroll", func(t *testing.T) {
		scroll := func(max int) crawl.Render {
			return actionsOpts(crawl.Action{Kind: crawl.ActionRepeat, Do: []crawl.Action{{Kind: crawl.ActionScroll}},
				Until: &crawl.Until{NoChange: true}, Max: max})
		}
		body, _, _, err := page(t, "/js/scroll?total=120&per=20", scroll(20))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(body, `class="item"`); n != 120 {
			t.Errorf("%d items after scrolling to the end; want 120", n)
		}
		body, outs, _, err := page(t, "/js/scroll?total=120&per=20", scroll(3))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(body, `class="item"`); n != 80 {
			t.Errorf("%d items after 3 scrolls; want 80", n)
		}
		if note := lastOf(outs).Note; note != "stopped on max: 3 rounds ran and until never held" {
			t.Errorf("note %q", note)
		}
	})

	// An infinite list that loads only after a debounce, when the network has long been
	// quiet: a round ends before its items come, and the loop waits for a change (1s by
	// default, longer when no_change says) before it takes the list for finished.
	t.Run("infinite list that loads late", func(t *testing.T) {
		for _, c := range []struct {
			url  string
			wait time.Duration
		}{{"/js/observe?total=100&per=20&delay=400", 0}, {"/js/observe?total=60&per=20&delay=1500", 2500 * time.Millisecond}} {
			opts := actionsOpts(crawl.Action{Kind: crawl.ActionRepeat, Do: []crawl.Action{{Kind: crawl.ActionScroll}},
				Until: &crawl.Until{NoChange: true, NoChangeFor: c.wait}, Max: 20})
			opts.Timeout = 30 * time.Second
			body, outs, _, err := page(t, c.url, opts)
			if err != nil {
				t.Fatal(err)
			}
			want := 100
			if c.wait > 0 {
				want = 60
			}
			if n := strings.Count(body, `class="item"`); n != want {
				t.Errorf("%s: %d items after scrolling to the end; want %d", c.url, n, want)
			}
			// Each round that loads brings a page of 20, one more finds no change: 5
			// rounds for 100. On a loaded machine one round may see two pages come
			// before it looks, so fewer rounds are fine; more, or max, are not.
			note, most := lastOf(outs).Note, want/20
			var rounds int
			if _, err := fmt.Sscanf(note, "until held after %d rounds", &rounds); err != nil || rounds < 2 || rounds > most {
				t.Errorf("%s: note %q; want until held after 2 to %d rounds (those that loaded, one that did not)", c.url, note, most)
			}
		}
	})

	// "Load more" that loads 400 ms after the click, when the click's own wait is over:
	// each round waits for the change instead of clicking again while it loads, so five
	// rounds bring all 55 items, well within max.
	t.Run("load more that loads late", func(t *testing.T) {
		opts := actionsOpts(crawl.Action{Kind: crawl.ActionRepeat, Do: []crawl.Action{more}, Until: &crawl.Until{Gone: "button.more"}, Max: 8})
		opts.Timeout = 30 * time.Second
		body, outs, _, err := page(t, "/js/more?total=55&per=10&delay=400", opts)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(body, `class="item"`); n != 55 || strings.Count(body, ">Item 11<") != 1 {
			t.Errorf("%d items after load more (Item 11 %d times); want 55, each once", n, strings.Count(body, ">Item 11<"))
		}
		if note := lastOf(outs).Note; note != "until held after 5 rounds" {
			t.Errorf("note %q; want until held after 5 rounds", note)
		}
	})

	// A consent banner: an optional click finds nothing on a page without one and the
	// page is read; on a page with one it is clicked away.
	t.Run("optional consent", func(t *testing.T) {
		consent := crawl.Action{Kind: crawl.ActionClick, Selector: "#consent .accept", Optional: true, Timeout: 300 * time.Millisecond}
		body, outs, _, err := page(t, "/js/more?total=5", actionsOpts(consent))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(body, `class="item"`); n != 5 || lastOf(outs).Note != "skipped: nothing matches (optional)" {
			t.Errorf("%d items, outcome %+v", n, lastOf(outs))
		}
		body, _, _, err = page(t, "/js/more?total=5&consent=1&first=10", actionsOpts(consent))
		if n := strings.Count(body, `class="item"`); err != nil || strings.Contains(body, `id="consent"`) || n != 5 || !strings.Contains(body, "Item 15") {
			t.Errorf("the banner was not clicked away (%d items, Item 11 to 15 wanted): %v", n, err)
		}
		// The banner is a wall: left there, the page shows nothing.
		body, _, _, err = page(t, "/js/more?total=5&consent=1", actionsOpts())
		if n := strings.Count(body, `class="item"`); err != nil || n != 0 {
			t.Errorf("behind the banner %d items show (%v); want none", n, err)
		}
	})

	// A search form: an option chosen by its text, a value typed in, Enter pressed in
	// the field filled last (it has the focus).
	t.Run("fill select press", func(t *testing.T) {
		body, _, _, err := page(t, "/js/search", actionsOpts(
			crawl.Action{Kind: crawl.ActionSelect, Selector: "#sort", Value: "Newest"},
			crawl.Action{Kind: crawl.ActionFill, Selector: "#q", Value: "boots"},
			crawl.Action{Kind: crawl.ActionPress, Value: "Enter"},
			crawl.Action{Kind: crawl.ActionWaitFor, Selector: "#searched"}))
		if err != nil || !strings.Contains(body, `<p id="searched">boots by new</p>`) {
			t.Errorf("search: %v\n%s", err, body)
		}
		_, _, _, err = page(t, "/js/search", actionsOpts(crawl.Action{Kind: crawl.ActionSelect, Selector: "#sort", Value: "Oldest"}))
		if want := `render.actions[0] select "#sort": "#sort" has no option with that value or text`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v; want %s", err, want)
		}
	})

	// An action whose selector never appears fails the page with cause action, naming
	// the action's index and selector, and a screenshot is named with it.
	t.Run("missing selector", func(t *testing.T) {
		opts := actionsOpts(crawl.Action{Kind: crawl.ActionWaitFor, Selector: ".item"},
			crawl.Action{Kind: crawl.ActionClick, Selector: "#never", Timeout: 300 * time.Millisecond})
		opts.Screenshot = true
		r := renderer(p, opts)
		r.Screenshots = t.TempDir()
		_, err := r.Fetch(context.Background(), &crawl.Request{URL: base + "/js/more?total=5"})
		want := fmt.Sprintf(`render %s/js/more?total=5: render.actions[1] click "#never": nothing matches "#never" within 300ms (the action's timeout) (screenshot: %s/`, base, r.Screenshots)
		if crawl.CauseOf(err) != crawl.CauseAction || err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("err %v (cause %s)\nwant %s…", err, crawl.CauseOf(err), want)
		}
		_, shot, _ := strings.Cut(err.Error(), "(screenshot: ")
		if png, err := os.ReadFile(strings.TrimSuffix(shot, ")")); err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
			t.Errorf("no PNG at %s: %v", shot, err)
		}
	})

	// With har: true a failed page keeps a HAR of its requests, named in the failure:
	// the document and the XHRs, with the value a fill typed (from a secret file) masked
	// wherever a request carried it.
	t.Run("har", func(t *testing.T) {
		secret := filepath.Join(t.TempDir(), "pw")
		if err := os.WriteFile(secret, []byte("s3cret-pw\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		opts := actionsOpts(crawl.Action{Kind: crawl.ActionFill, Selector: "#q", SecretFile: secret},
			crawl.Action{Kind: crawl.ActionScript, Value: `fetch("/js/api/items?from=0&n=1&total=1&q=" + document.getElementById("q").value)`},
			crawl.Action{Kind: crawl.ActionClick, Selector: "#never", Timeout: 300 * time.Millisecond})
		opts.HAR = true
		r := renderer(p, opts)
		r.Screenshots = t.TempDir()
		_, err := r.Fetch(context.Background(), &crawl.Request{URL: base + "/js/search"})
		if err == nil || crawl.CauseOf(err) != crawl.CauseAction || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("err %v", err)
		}
		_, name, ok := strings.Cut(err.Error(), "(har: ")
		data, rerr := os.ReadFile(strings.TrimSuffix(name, ")"))
		if !ok || rerr != nil {
			t.Fatalf("no HAR named in %q: %v", err, rerr)
		}
		var har struct {
			Log struct {
				Entries []struct {
					Request struct {
						Method, URL string
					}
					Response struct {
						Status int
					}
				}
			}
		}
		if err := json.Unmarshal(data, &har); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range har.Log.Entries {
			if strings.HasSuffix(e.Request.URL, "/favicon.ico") { // the browser's own, when it asks in time
				continue
			}
			got = append(got, fmt.Sprintf("%s %s %d", e.Request.Method, strings.TrimPrefix(e.Request.URL, base), e.Response.Status))
		}
		want := "GET /js/search 200|GET /js/api/items?from=0&n=1&total=1&q=*** 200"
		if strings.Join(got, "|") != want || strings.Contains(string(data), "s3cret") {
			t.Errorf("HAR entries %q\nwant %q (and no s3cret in %s)", strings.Join(got, "|"), want, data)
		}
	})
}

// A typed value is masked in a HAR however the page sent it: as typed, in a form body
// (spaces as +, & escaped) and in a URL path.
func TestHARMasksEncodedFillValues(t *testing.T) {
	pg := &pageRun{fills: []string{"zq9@ x&y"}}
	for _, sent := range []string{"zq9@ x&y", "user=a&code=zq9%40+x%26y", "/login/zq9@%20x&y"} {
		if got := pg.mask(sent); strings.Contains(got, "zq9") {
			t.Errorf("mask(%q) = %q: the value shows", sent, got)
		}
	}
}

// A fill's secret is read on the worker: from its file or its environment, and one the
// worker does not have names the secret and what to set.
func TestFillValueReadsTheWorkersSecret(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRAWLER_TEST_FILL_PW", "from-env")
	for _, c := range []struct {
		a         crawl.Action
		want, err string
	}{
		{a: crawl.Action{Kind: crawl.ActionFill, Value: "boots"}, want: "boots"},
		{a: crawl.Action{Kind: crawl.ActionFill, Secret: "pw", SecretFile: file}, want: "from-file"},
		{a: crawl.Action{Kind: crawl.ActionFill, SecretFile: file}, want: "from-file"},
		{a: crawl.Action{Kind: crawl.ActionFill, Secret: "pw", SecretEnv: "TRAWLER_TEST_FILL_PW"}, want: "from-env"},
		{a: crawl.Action{Kind: crawl.ActionFill, Secret: "pw", SecretEnv: "TRAWLER_TEST_FILL_UNSET"},
			err: "secret pw: the variable TRAWLER_TEST_FILL_UNSET is not set in this worker's environment; set it where the worker starts"},
		{a: crawl.Action{Kind: crawl.ActionFill, Secret: "pw", SecretFile: file + ".gone"},
			err: "secrets.pw.file " + file + ".gone: cannot read it: no such file or directory"},
	} {
		got, err := fillValue(c.a)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: error %v; want %q", c.a, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v: %q, %v; want %q", c.a, got, err, c.want)
		}
	}
}

// A page reads each fill's secret once, when it begins: the value typed is the value its
// HAR masks, even when the secret's file changes while the page runs.
func TestFillTypesTheSecretItMasks(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("first-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fill := crawl.Action{Kind: crawl.ActionFill, Selector: "#pw", Secret: "pw", SecretFile: file}
	repeat := crawl.Action{Kind: crawl.ActionRepeat, Do: []crawl.Action{fill, {Kind: crawl.ActionFill, Selector: "#q", Value: "boots"}}}
	pg := &pageRun{}
	pg.fills, pg.secrets = readFills([]crawl.Action{fill, repeat})
	if err := os.WriteFile(file, []byte("second-pw\n"), 0o600); err != nil { // rotated meanwhile
		t.Fatal(err)
	}
	typed, err := pg.fillValue(fill)
	if err != nil || typed != "first-pw" {
		t.Fatalf("typed %q (%v); want the secret as the page read it, first-pw", typed, err)
	}
	if got := pg.mask("password=" + typed); strings.Contains(got, typed) {
		t.Errorf("mask(%q) = %q: the typed secret shows", "password="+typed, got)
	}
	if want := []string{"first-pw", "boots"}; !slices.Equal(pg.fills, want) {
		t.Errorf("masked values %q; want %q (the secret read once, the longest first)", pg.fills, want)
	}
}
