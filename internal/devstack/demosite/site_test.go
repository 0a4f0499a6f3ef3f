package demosite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
)

func start(t *testing.T, o Options) string {
	t.Helper()
	base, stop, err := Start("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return base
}

func get(t *testing.T, rawURL string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func doc(t *testing.T, rawURL string) *goquery.Document {
	t.Helper()
	resp, body := get(t, rawURL)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", rawURL, resp.StatusCode)
	}
	d, err := goquery.NewDocumentFromReader(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func resolve(t *testing.T, base, ref string) string {
	t.Helper()
	b, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	r, err := url.Parse(ref)
	if err != nil {
		t.Fatal(err)
	}
	return b.ResolveReference(r).String()
}

// walk crawls the first `pages` feed pages the way a crawler would, following links only,
// and counts the stories and comments it finds.
func walk(t *testing.T, base string, o Options, pages int) (stories, comments int) {
	t.Helper()
	seenStories, seenComments := map[int]bool{}, map[int]bool{}
	page := base + "/news?p=1"
	for n := 1; n <= pages && page != ""; n++ {
		d := doc(t, page)
		rows := d.Find("tr.athing")
		if rows.Length() == 0 {
			t.Fatalf("%s: no stories", page)
		}
		rows.Each(func(_ int, row *goquery.Selection) {
			id, _ := strconv.Atoi(row.AttrOr("id", ""))
			if seenStories[id] {
				t.Errorf("story %d listed twice", id)
			}
			href, _ := row.Find("span.titleline > a").Attr("href")
			storyURL := resolve(t, page, href)
			sd := doc(t, storyURL)
			want, ok := o.Story(id)
			if !ok {
				t.Fatalf("story %d listed but not generated", id)
			}
			if got := sd.Find("h1.title").Text(); got != want.Title {
				t.Errorf("story %d title %q, want %q", id, got, want.Title)
			}
			if got := sd.Find("time").AttrOr("datetime", ""); got != want.Time.Format(time.RFC3339) {
				t.Errorf("story %d time %q, want %q", id, got, want.Time.Format(time.RFC3339))
			}
			if got := sd.Find("a.url").AttrOr("href", ""); got != want.URL {
				t.Errorf("story %d url %q, want %q", id, got, want.URL)
			}
			seenStories[id] = true
			stories++
			link, ok := sd.Find("a.comments-link").Attr("href")
			if ok != (want.Comments > 0) {
				t.Errorf("story %d with %d comments: comments link present=%v", id, want.Comments, ok)
			}
			next := ""
			if ok {
				next = resolve(t, storyURL, link)
			}
			found := 0
			for next != "" {
				cd := doc(t, next)
				cs := cd.Find("div.comment")
				if cs.Length() > o.WithDefaults().CommentsPerPage {
					t.Errorf("%s: %d comments on one page", next, cs.Length())
				}
				cs.Each(func(_ int, c *goquery.Selection) {
					cid, _ := strconv.Atoi(c.AttrOr("data-id", ""))
					if seenComments[cid] {
						t.Errorf("comment %d seen twice", cid)
					}
					if c.AttrOr("data-story", "") != strconv.Itoa(id) {
						t.Errorf("comment %d: data-story %q, want %d", cid, c.AttrOr("data-story", ""), id)
					}
					if c.Find(".author").Text() == "" || c.Find(".text").Text() == "" {
						t.Errorf("comment %d lacks author or text", cid)
					}
					seenComments[cid] = true
					found++
				})
				cur := next
				next = ""
				if more, ok := cd.Find("a.morelink").Attr("href"); ok {
					next = resolve(t, cur, more)
				}
			}
			if found != want.Comments {
				t.Errorf("story %d: found %d comments, want %d", id, found, want.Comments)
			}
			comments += found
		})
		cur := page
		page = ""
		if more, ok := d.Find("a.morelink").Attr("href"); ok {
			page = resolve(t, cur, more)
		}
	}
	return stories, comments
}

func TestExpectedDefaults(t *testing.T) {
	s, c := Expected(Options{}, 3)
	if s != 90 || c != 1980 {
		t.Fatalf("Expected(defaults, 3) = %d, %d; want 90, 1980", s, c)
	}
	s10, c10 := Expected(Options{}, 10)
	s99, c99 := Expected(Options{}, 99)
	if s10 != 300 || s99 != s10 || c99 != c10 {
		t.Fatalf("Expected does not clamp to Pages: %d,%d vs %d,%d", s10, c10, s99, c99)
	}
	faults := map[int]Fault{1: FaultStatus500, 2: FaultRetryAfter, 3: FaultTruncated, 4: FaultHugeBody, 5: FaultHang, 200: FaultHang}
	fs, fc := Expected(Options{Faults: faults}, 3)
	lost := CommentCount(1) + CommentCount(3) + CommentCount(4) + CommentCount(5)
	if fs != 86 || fc != 1980-lost {
		t.Fatalf("Expected with faults = %d, %d; want 86, %d", fs, fc, 1980-lost)
	}
}

func TestCommentCountsVary(t *testing.T) {
	o := Options{}.WithDefaults()
	var zero, threePages bool
	for id := 1; id <= 90; id++ {
		if o.CommentPages(id) == 3 {
			threePages = true
		}
		if CommentCount(id) == 0 {
			zero = true
		}
	}
	if !zero || !threePages {
		t.Fatalf("want stories with no comments and stories with 3 comments pages in the first 3 feed pages")
	}
}

func TestServesWhatExpectedSays(t *testing.T) {
	for _, tc := range []struct {
		o     Options
		pages int
	}{
		{Options{}, 3},
		{Options{Pages: 2, PerPage: 7, CommentsPerPage: 6}, 2},
		{Options{Pages: 3, PerPage: 4, CommentsPerPage: 50}, 5},
	} {
		t.Run(fmt.Sprintf("%d/%d/%d@%d", tc.o.Pages, tc.o.PerPage, tc.o.CommentsPerPage, tc.pages), func(t *testing.T) {
			base := start(t, tc.o)
			s, c := walk(t, base, tc.o, tc.pages)
			ws, wc := Expected(tc.o, tc.pages)
			if s != ws || c != wc {
				t.Fatalf("walk found %d stories, %d comments; Expected says %d, %d", s, c, ws, wc)
			}
		})
	}
}

func TestFeedPaging(t *testing.T) {
	o := Options{Pages: 3, PerPage: 5}
	base := start(t, o)
	for p := 1; p <= 3; p++ {
		d := doc(t, fmt.Sprintf("%s/news?p=%d", base, p))
		var ids []int
		d.Find("tr.athing").Each(func(_ int, s *goquery.Selection) {
			id, _ := strconv.Atoi(s.AttrOr("id", ""))
			ids = append(ids, id)
		})
		for i, id := range ids {
			if want := (p-1)*5 + i + 1; id != want {
				t.Errorf("page %d row %d: id %d, want %d", p, i, id, want)
			}
		}
		_, more := d.Find("a.morelink").Attr("href")
		if more != (p < 3) {
			t.Errorf("page %d: More link present=%v", p, more)
		}
	}
	for _, path := range []string{"/news?p=4", "/news?p=0", "/news?p=x", "/item/16", "/item/0", "/item/abc", "/item/1/comments?p=9"} {
		if resp, _ := get(t, base+path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", path, resp.StatusCode)
		}
	}
	resp, body := get(t, base+"/robots.txt")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Allow: /") {
		t.Errorf("robots.txt: %d %q", resp.StatusCode, body)
	}
}

func TestFaults(t *testing.T) {
	o := Options{Faults: map[int]Fault{
		1: FaultStatus500, 2: FaultRetryAfter, 3: FaultTruncated, 4: FaultHugeBody, 5: FaultHang,
	}}
	base := start(t, o)

	t.Run("status500", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			if resp, _ := get(t, base+"/item/1"); resp.StatusCode != http.StatusInternalServerError {
				t.Fatalf("attempt %d: status %d, want 500", i, resp.StatusCode)
			}
		}
	})
	t.Run("retry-after", func(t *testing.T) {
		resp, _ := get(t, base+"/item/2")
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("first request: status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		d := doc(t, base+"/item/2")
		if want, _ := o.Story(2); d.Find("h1.title").Text() != want.Title {
			t.Fatalf("second request: title %q", d.Find("h1.title").Text())
		}
	})
	t.Run("truncated", func(t *testing.T) {
		resp, body := get(t, base+"/item/3")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if strings.Contains(string(body), "</h1>") || strings.Contains(string(body), "</html>") {
			t.Fatalf("page is not cut off: %q", body)
		}
		d, err := goquery.NewDocumentFromReader(strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		if n := d.Find("h1.title").Length(); n != 0 {
			t.Fatalf("truncated page still parses a title")
		}
	})
	t.Run("huge-body", func(t *testing.T) {
		resp, err := http.Get(base + "/item/4")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ContentLength != -1 {
			t.Errorf("Content-Length %d announced; the body should be streamed", resp.ContentLength)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if n != HugeBodySize {
			t.Fatalf("body is %d bytes, want %d", n, HugeBodySize)
		}
	})
	t.Run("hang", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/item/5", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("hanging page answered %d", resp.StatusCode)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want a deadline", err)
		}
	})
	t.Run("others-unaffected", func(t *testing.T) {
		if resp, _ := get(t, base+"/item/6"); resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if resp, _ := get(t, base+"/item/1/comments?p=1"); resp.StatusCode != http.StatusOK {
			t.Fatalf("comments of a faulty story: status %d", resp.StatusCode)
		}
	})
}

// Stopping the site must not wait for a hanging request.
func TestStopEndsHangingRequest(t *testing.T) {
	base, stop, err := Start("127.0.0.1:0", Options{Faults: map[int]Fault{7: FaultHang}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(base + "/item/7")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	// Give the request a chance to reach the handler; either way stop must return.
	time.Sleep(50 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
}

func TestHandlerWithoutStart(t *testing.T) {
	srv := httptest.NewServer(Handler(Options{Pages: 1, PerPage: 2}))
	defer srv.Close()
	d := doc(t, srv.URL+"/news")
	if n := d.Find("tr.athing").Length(); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
	if d.Find("a.morelink").Length() != 0 {
		t.Fatalf("single page has a More link")
	}
}

// The static site serves every page of the demo site, byte for byte, and nothing else.
func TestStaticServesTheDemoPages(t *testing.T) {
	o := Options{Pages: 2, PerPage: 5}
	base := start(t, o)
	sbase, stop, err := StartStatic("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// Story 3 has 21 comments: two comments pages of 20.
	for _, uri := range []string{"/robots.txt", "/news?p=1", "/news?p=2", "/item/10", "/item/3/comments?p=1", "/item/3/comments?p=2"} {
		want, wantBody := get(t, base+uri)
		got, body := get(t, sbase+uri)
		if got.StatusCode != 200 || want.StatusCode != 200 || string(body) != string(wantBody) ||
			got.Header.Get("Content-Type") != want.Header.Get("Content-Type") || got.ContentLength != int64(len(wantBody)) {
			t.Errorf("GET %s: static %d %q (%d bytes), dynamic %d %q (%d bytes)", uri,
				got.StatusCode, got.Header.Get("Content-Type"), len(body), want.StatusCode, want.Header.Get("Content-Type"), len(wantBody))
		}
	}
	for _, uri := range []string{"/news?p=3", "/item/11", "/item/3/comments?p=3"} {
		if resp, _ := get(t, sbase+uri); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404 (not a page of a 2-page site)", uri, resp.StatusCode)
		}
	}
}
