package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

type exchanges struct {
	mu  sync.Mutex
	got []*Exchange
}

func (e *exchanges) Record(_ context.Context, ex *Exchange) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ex)
}

// TestRecorderGetsTheBytesAsReceived: a Recorder under the request's context gets one
// exchange per page (robots.txt is none), its body as the server sent it — gzip
// still — while the task reads the decoded page as without one.
func TestRecorderGetsTheBytesAsReceived(t *testing.T) {
	page := strings.Repeat("<p>archived</p>", 200)
	var sent []byte
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			_, _ = w.Write([]byte("User-agent: *\nAllow: /\n"))
			return
		}
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write([]byte(page))
		_ = zw.Close()
		sent = buf.Bytes()
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path != "/plain" && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(sent)
			return
		}
		sent = []byte(page)
		_, _ = w.Write(sent)
	})
	rec := &exchanges{}
	resp, err := New(fast()).Fetch(WithRecorder(context.Background(), rec), &crawl.Request{URL: s.URL + "/a?b=1", Header: http.Header{"X-Team": {"news"}}})
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != page || resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("the task read %d bytes with Content-Encoding %q, want the decoded page", len(resp.Body), resp.Header.Get("Content-Encoding"))
	}
	if len(rec.got) != 1 {
		t.Fatalf("recorded %d exchanges, want the page's alone", len(rec.got))
	}
	ex := rec.got[0]
	if ex.Method != "GET" || ex.URL != s.URL+"/a?b=1" || ex.Status != "200 OK" || ex.RequestHeader.Get("X-Team") != "news" || ex.RequestHeader.Get("Host") == "" || ex.RemoteAddr != "127.0.0.1" || ex.At.IsZero() {
		t.Errorf("exchange %s %s %s, request header %v, from %q at %v", ex.Method, ex.URL, ex.Status, ex.RequestHeader, ex.RemoteAddr, ex.At)
	}
	if ex.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(ex.Body, sent) {
		t.Errorf("recorded body of %d bytes with Content-Encoding %q, want the %d gzip bytes sent", len(ex.Body), ex.Header.Get("Content-Encoding"), len(sent))
	}
	zr, err := gzip.NewReader(bytes.NewReader(ex.Body))
	if err != nil {
		t.Fatal(err)
	}
	if plain, _ := io.ReadAll(zr); string(plain) != page {
		t.Error("the recorded gzip body does not decode to the page")
	}
	// A body sent as it is is recorded as it is.
	if _, err := New(fast()).Fetch(WithRecorder(context.Background(), rec), &crawl.Request{URL: s.URL + "/plain"}); err != nil {
		t.Fatal(err)
	}
	if ex := rec.got[len(rec.got)-1]; len(rec.got) != 2 || ex.Header.Get("Content-Encoding") != "" || string(ex.Body) != page {
		t.Errorf("recorded %d exchanges, the last of %d bytes with Content-Encoding %q; want the plain page as sent", len(rec.got), len(ex.Body), ex.Header.Get("Content-Encoding"))
	}
}
