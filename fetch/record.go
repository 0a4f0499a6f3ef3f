package fetch

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"
)

// Exchange is one HTTP exchange as it went over the wire, for an archive: the request
// as sent and the answer as received, its body before any content decoding (still
// gzip when the server sent gzip). Go's HTTP client has already undone chunked
// transfer coding, so Header holds no Transfer-Encoding and Body is the entity body.
type Exchange struct {
	Method        string
	URL           string // the final URL, after redirects
	RequestProto  string
	RequestHeader http.Header // as sent, Host included
	RequestBody   []byte
	Proto         string // HTTP/1.1, HTTP/2.0
	Status        string // "200 OK"
	Header        http.Header
	Body          []byte
	RemoteAddr    string // the server's IP address, when known
	At            time.Time
}

// Recorder keeps the exchanges of the requests made under a context (WithRecorder).
// Record is called once per exchange whose answer was read whole, from many goroutines
// at once; it must not keep the Exchange's slices beyond the call unless it copies
// them.
type Recorder interface {
	Record(ctx context.Context, ex *Exchange)
}

type recorderKey struct{}

// WithRecorder has the transport hand every exchange made under ctx to r.
func WithRecorder(ctx context.Context, r Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

// withoutRecorder is ctx for requests that are no page of the task's: robots.txt.
func withoutRecorder(ctx context.Context) context.Context {
	if recorderOf(ctx) == nil {
		return ctx
	}
	return context.WithValue(ctx, recorderKey{}, nil)
}

func recorderOf(ctx context.Context) Recorder {
	r, _ := ctx.Value(recorderKey{}).(Recorder)
	return r
}

// recording tees the raw body of one answer while the transport reads it.
type recording struct {
	io.ReadCloser
	raw bytes.Buffer
}

func (r *recording) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.raw.Write(p[:n])
	return n, err
}

// startRecording has raw's body keep what is read of it, when ctx has a Recorder.
func startRecording(ctx context.Context, raw *http.Response) *recording {
	if recorderOf(ctx) == nil {
		return nil
	}
	rec := &recording{ReadCloser: raw.Body}
	if n := raw.ContentLength; n > 0 && n <= 8<<20 {
		rec.raw.Grow(int(n)) // one buffer for a body of a declared length, not a doubling series
	}
	raw.Body = rec
	return rec
}

// finish hands the exchange to ctx's Recorder.
func (r *recording) finish(ctx context.Context, raw *http.Response, reqBody []byte, remote string, at time.Time) {
	if r == nil {
		return
	}
	req := raw.Request
	header := req.Header.Clone()
	if header == nil {
		header = http.Header{}
	}
	header.Set("Host", req.Host)
	if req.Host == "" {
		header.Set("Host", req.URL.Host)
	}
	recorderOf(ctx).Record(ctx, &Exchange{
		Method: req.Method, URL: req.URL.String(), RequestProto: raw.Proto, RequestHeader: header, RequestBody: reqBody,
		Proto: raw.Proto, Status: raw.Status, Header: raw.Header, Body: r.raw.Bytes(), RemoteAddr: remote, At: at,
	})
}
