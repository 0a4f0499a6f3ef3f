package archive

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc/v3"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
)

// page is an exchange as the fetcher hands it to the archive: a gzip-encoded HTML page
// of about the size of a real one.
func page(url string, body []byte) *fetch.Exchange {
	return &fetch.Exchange{
		Method: "GET", URL: url, RequestProto: "HTTP/1.1",
		RequestHeader: http.Header{"Host": {"shop.test"}, "User-Agent": {"Trawler"}, "Accept-Encoding": {"gzip"}},
		Proto:         "HTTP/1.1", Status: "200 OK",
		Header:     http.Header{"Content-Type": {"text/html; charset=utf-8"}, "Transfer-Encoding": {"chunked"}, "Set-Cookie": {"a=1", "b=2"}},
		Body:       body,
		RemoteAddr: "127.0.0.1",
		At:         time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC),
	}
}

func htmlBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString("<!doctype html><html><head><title>A story</title></head><body>\n")
	for i := 0; b.Len() < n; i++ {
		b.WriteString(`<div class="comment" id="c` + strings.Repeat("7", i%5+1) + `"><p>Someone wrote something about the story, line ` + string(rune('a'+i%26)) + "</p></div>\n")
	}
	b.WriteString("</body></html>\n")
	return b.Bytes()
}

// Every record the writer makes passes gowarc's strict validation: the warcinfo, a
// request and a response per page, and a revisit for a page whose payload the file
// holds already; the index locates each page's record, and the revisit refers to the
// response of the same URL.
func TestWriterRecordsPassStrictValidation(t *testing.T) {
	dir := t.TempDir()
	ws := NewWriters(nil)
	w, err := ws.Get(crawl.Archive{To: dir, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p := Page{Tenant: "t", RunID: "run1", Step: "story", Task: "demo.story"}
	body := htmlBody(12 << 10)
	for _, ex := range []*fetch.Exchange{page("http://shop.test/a", body), page("http://shop.test/b?x=1", []byte("{}")), page("http://shop.test/a", body)} {
		if err := w.Write(p, ex); err != nil {
			t.Fatal(err)
		}
	}
	post := page("http://shop.test/search", []byte("<p>found</p>"))
	post.Method, post.RequestBody = "POST", []byte("q=shoes")
	post.Status = "404 Not Found"
	if err := w.Write(p, post); err != nil {
		t.Fatal(err)
	}
	if err := ws.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bucket, err := OpenBucket(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	entries, err := RunIndex(ctx, bucket, "t", "run1")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range entries {
		kinds = append(kinds, e.Type)
		if want := map[bool]int{true: 404, false: 200}[strings.HasSuffix(e.URL, "/search")]; e.Status != want {
			t.Errorf("index: %s has status %d; want %d", e.URL, e.Status, want)
		}
	}
	slices.Sort(kinds)
	if got := strings.Join(kinds, " "); got != "response response response revisit" {
		t.Fatalf("index types %q; want three responses and a revisit", got)
	}
	data, err := bucket.ReadAll(ctx, entries[0].File)
	if err != nil {
		t.Fatal(err)
	}
	r, err := gowarc.NewWarcFileReaderFromStream(bytes.NewReader(data), 0, gowarc.WithStrictValidation())
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var firstID string
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		h := rec.WarcRecord.WarcHeader()
		types = append(types, rec.WarcRecord.Type().String())
		if rec.WarcRecord.Type() == gowarc.Response && firstID == "" {
			firstID = h.GetId(gowarc.WarcRecordID)
		}
		if rec.WarcRecord.Type() == gowarc.Revisit && h.GetId(gowarc.WarcRefersTo) != firstID {
			t.Errorf("revisit refers to %q; want the first response %q", h.GetId(gowarc.WarcRefersTo), firstID)
		}
		// Reading the block whole checks its digest.
		if _, err := io.Copy(io.Discard, mustRaw(t, rec.WarcRecord)); err != nil {
			t.Fatal(err)
		}
		rec.Close()
		if len(rec.Validation) > 0 {
			t.Errorf("%s record at %d: %v", rec.WarcRecord.Type(), rec.Offset, rec.Validation)
		}
	}
	if got := strings.Join(types, " "); got != "warcinfo request response request response request revisit request response" {
		t.Errorf("records %q", got)
	}
	// Each index entry locates a record of its URL, read alone.
	for _, e := range entries {
		raw, err := ReadRecord(ctx, bucket, e)
		if err != nil {
			t.Fatal(err)
		}
		rec, _, _, err := gowarc.NewUnmarshaler(gowarc.WithStrictValidation()).Unmarshal(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			t.Fatalf("%s at %d: %v", e.URL, e.Offset, err)
		}
		if u := rec.WarcHeader().Get(gowarc.WarcTargetURI); u != e.URL {
			t.Errorf("record at %d is of %s; the index says %s", e.Offset, u, e.URL)
		}
		rec.Close()
	}
}

func mustRaw(t *testing.T, rec gowarc.WarcRecord) io.Reader {
	t.Helper()
	r, err := rec.Block().RawBytes()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// BenchmarkWrite is the archive's CPU per page: a 5 KiB HTML page, its request and
// its response archived.
func BenchmarkWrite(b *testing.B) {
	ws := NewWriters(nil)
	w, err := ws.Get(crawl.Archive{To: b.TempDir(), MaxAge: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	p := Page{Tenant: "t", RunID: "run1", Step: "story", Task: "demo.story"}
	body := htmlBody(5 << 10)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for i := 0; b.Loop(); i++ {
		ex := page("http://shop.test/item/"+strings.Repeat("1", i%7+1), body)
		body[100] = byte(i) // a new payload: a response, not a revisit
		if err := w.Write(p, ex); err != nil {
			b.Fatal(err)
		}
	}
}
