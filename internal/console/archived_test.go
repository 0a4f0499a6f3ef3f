// Not under the race detector: gowarc sets github.com/google/uuid's pool flag
// (uuid.EnableRandPool) whenever it makes a record builder or reader, while the
// in-process Temporal server reads it for every uuid it makes: a write of the same value
// that -race reports. .ci/run runs this file's test without -race.

//go:build !race

package console

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/archive"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/sites/demo"
)

// TestArchivedResponse crawls a feed page of the demo site with archive: and reads the
// archived response of a story's record through the API: its status, headers as
// received and body as text; a body above 2 MiB (gzip, as received) is decoded and cut
// with a note; a record whose step did not archive says so; another tenant's token does
// not find it; and the record page and the viewer page are served.
func TestArchivedResponse(t *testing.T) {
	const tenant = "archived"
	// Under the stack's directory: the shared worker may finish a file after the test.
	dir := filepath.Join(stack.dir, "warc")
	src := regexp.MustCompile(`(?m)^defaults:.*$`).ReplaceAllString(demoSource(t, tenant), "defaults:\n  archive: {to: \""+dir+"\", max_age: 1s}")
	status, out := api(t, "POST", "/api/runs", map[string]any{"source": src, "file": "demo.yaml", "sets": []string{"base_url=" + stack.site, "feed.pages=1"}})
	if status != http.StatusCreated {
		t.Fatalf("start: %d %v", status, out)
	}
	run := out["run_id"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := engine.Wait(ctx, stack.client, run, nil); err != nil {
		t.Fatal(err)
	}
	bucket, err := archive.OpenBucket(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	waitFor(t, "the run's index lists its 30 stories", func() bool {
		entries, err := archive.RunIndex(context.Background(), bucket, tenant, run)
		stories := 0
		for _, e := range entries {
			if e.Step == "story" {
				stories++
			}
		}
		return err == nil && stories == 30
	})

	story, _ := stack.siteOpt.Story(1)
	path := "/api/archive/demo.story/" + url.PathEscape(demo.StoryKey(1)) + "?tenant=" + tenant
	status, out = api(t, "GET", path, nil)
	body, _ := out["body"].(string)
	header := obj(out["header"])
	if status != http.StatusOK || out["archived"] != true || out["status"] != 200.0 || out["type"] != "response" || out["step"] != "story" || out["run_id"] != run ||
		out["truncated"] != false || int(out["body_bytes"].(float64)) != len(body) || !strings.Contains(body, story.Title) || !strings.Contains(body, "<html") ||
		!strings.HasPrefix(toJSON(header["Content-Type"]), `["text/html`) {
		t.Fatalf("GET %s: %d %.600v", path, status, out)
	}

	// A newer archived response of story 2's page, 3 MiB sent gzip.
	big := bytes.Repeat([]byte("<p>a paragraph of the story</p>\n"), 3<<20/32)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(big)
	_ = zw.Close()
	two, _ := stack.siteOpt.Story(2)
	_, it := api(t, "GET", "/api/items/demo.story/"+url.PathEscape(demo.StoryKey(2))+"?tenant="+tenant, nil)
	if it["url"] == nil || !strings.Contains(it["url"].(string), "/item") {
		t.Fatalf("story 2's record: %v (%s)", it, two.Title)
	}
	ws := archive.NewWriters(quiet)
	w, err := ws.Get(crawl.Archive{To: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(archive.Page{Tenant: tenant, RunID: run, Step: "story", Task: "demo.story"}, &fetch.Exchange{
		Method: "GET", URL: it["url"].(string), RequestHeader: http.Header{}, Status: "200 OK", At: time.Now(),
		Header: http.Header{"Content-Type": {"text/html; charset=utf-8"}, "Content-Encoding": {"gzip"}}, Body: gz.Bytes(),
	}); err != nil {
		t.Fatal(err)
	}
	if err := ws.Close(); err != nil {
		t.Fatal(err)
	}
	status, out = api(t, "GET", "/api/archive/demo.story/"+url.PathEscape(demo.StoryKey(2))+"?tenant="+tenant, nil)
	body, _ = out["body"].(string)
	if status != http.StatusOK || out["truncated"] != true || int(out["body_bytes"].(float64)) != len(big) || len(body) != MaxArchivedBody ||
		body != string(big[:MaxArchivedBody]) || out["content_encoding"] != "gzip" || toJSON(obj(out["header"])["Content-Encoding"]) != `["gzip"]` {
		t.Errorf("the 3 MiB response: %d, truncated %v, %v bytes, %d shown, encoding %v", status, out["truncated"], out["body_bytes"], len(body), out["content_encoding"])
	}

	// The shared demo run does not archive.
	demoRun(t)
	status, out = api(t, "GET", "/api/archive/demo.story/"+url.PathEscape(demo.StoryKey(1))+"?tenant="+storedTenant, nil)
	if want := "the step of run " + storedRun.id + " that stored demo.story does not archive its pages (archive:)"; status != http.StatusOK || out["archived"] != false || out["reason"] != want {
		t.Errorf("a record not archived: %d %v; want archived false, %q", status, out, want)
	}
	status, out = api(t, "GET", "/api/archive/demo.story/demo:story:999?tenant="+tenant, nil)
	if status != http.StatusNotFound || out["field"] != "key" {
		t.Errorf("no such record: %d %v", status, out)
	}

	// A token of another tenant finds neither the record nor its archive.
	rdb := redis.NewClient(&redis.Options{Addr: stack.redis.Addr()})
	defer rdb.Close()
	_, other, err := NewPrincipals(rdb).Create(context.Background(), Principal{Name: "archive-other", Role: RoleAnalyst, Tenants: []string{"elsewhere"}})
	if err != nil {
		t.Fatal(err)
	}
	_, own, err := NewPrincipals(rdb).Create(context.Background(), Principal{Name: "archive-own", Role: RoleAnalyst, Tenants: []string{tenant}})
	if err != nil {
		t.Fatal(err)
	}
	_, ts := guarded(t, nil)
	if status, out := call(t, ts.URL, "GET", path, other, nil); status != http.StatusNotFound || strings.Contains(toJSON(out), story.Title) {
		t.Errorf("another tenant's token: %d %v; want 404", status, out)
	}
	if status, out := call(t, ts.URL, "GET", "/api/archive/demo.story/"+url.PathEscape(demo.StoryKey(1)), own, nil); status != http.StatusOK || out["archived"] != true {
		t.Errorf("the tenant's own token: %d %.300v; want its archived response", status, out)
	}

	// In a browser: the record page links to the viewer, which shows the page's HTML as
	// text, not rendered, and says when the body is cut.
	b := newBrowser(t)
	b.run("open the record page", chromedp.Navigate(stack.console.URL+"/items/demo.story/"+url.PathEscape(demo.StoryKey(1))+"?tenant="+tenant),
		chromedp.WaitVisible("#archived-link a", chromedp.ByQuery))
	b.click("open the archived response", "#archived-link a")
	shown := b.waitText("#archived-body", "the archived body", 30*time.Second, func(s string) bool { return strings.Contains(s, story.Title) })
	var rendered int
	b.run("count elements in the body", chromedp.Evaluate(`document.querySelectorAll("#archived-body *").length`, &rendered))
	if !strings.Contains(shown, "<html") || rendered != 0 {
		t.Errorf("the viewer shows %d elements in the body and the text %.200q; want the HTML as text", rendered, shown)
	}
	if h := b.text("#archived-headers"); !strings.Contains(h, "Content-Type: text/html") {
		t.Errorf("the viewer's headers: %q", h)
	}
	b.run("open story 2's archived response", chromedp.Navigate(stack.console.URL+"/archive/demo.story/"+url.PathEscape(demo.StoryKey(2))+"?tenant="+tenant))
	b.waitText("#archived-note", "the truncation note", 30*time.Second, func(s string) bool {
		return strings.Contains(s, "decoded from gzip") && strings.Contains(s, "truncated: only the first 2 MiB shown")
	})
	b.shot("archived-response")

	for page, want := range map[string]string{
		"/items/demo.story/" + url.PathEscape(demo.StoryKey(1)):   `id="archived-link"`,
		"/archive/demo.story/" + url.PathEscape(demo.StoryKey(1)): `id="archived-body"`,
	} {
		res, err := http.Get(stack.console.URL + page)
		if err != nil {
			t.Fatal(err)
		}
		html, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(html), want) {
			t.Errorf("GET %s: %d, want a page with %s", page, res.StatusCode, want)
		}
	}
}
