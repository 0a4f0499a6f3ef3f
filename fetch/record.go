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

// recording keeps the raw body of one answer for ctx's Recorder. A body that is not
// content-encoded is the body the transport reads, handed on as it is; an encoded one
// is teed, as received, while the transport decodes it.
type recording struct {
	body io.ReadCloser // the answer's body, when teed
	raw  bytes.Buffer
	teed bool
}

func (r *recording) Read(p []byte) (int, error) {
	n, err := r.body.Read(p)
	r.raw.Write(p[:n])
	return n, err
}

func (r *recording) Close() error { return r.body.Close() }

// startRecording readies the recording of raw's body, when ctx has a Recorder.
func startRecording(ctx context.Context, raw *http.Response) *recording {
	if recorderOf(ctx) == nil {
		return nil
	}
	rec := &recording{}
	if gzipEncoded(raw) {
		rec.body, rec.teed = raw.Body, true
		if n := raw.ContentLength; n > 0 && n <= 8<<20 {
			rec.raw.Grow(int(n)) // one buffer for a body of a declared length, not a doubling series
		}
		raw.Body = rec
	}
	return rec
}

// finish hands the exchange to ctx's Recorder.
func (r *recording) finish(ctx context.Context, raw *http.Response, body, reqBody []byte, remote string, at time.Time) {
	if r == nil {
		return
	}
	if r.teed {
		body = r.raw.Bytes()
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
		Proto: raw.Proto, Status: raw.Status, Header: raw.Header, Body: body, RemoteAddr: remote, At: at,
	})
}
