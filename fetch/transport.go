package fetch

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// transport performs one HTTP exchange per Fetch; see Transport.
type transport struct {
	opt    Options
	client *http.Client
}

// Transport is the innermost layer of the chain: exactly one HTTP exchange per Fetch,
// no retries, no waiting. It guarantees:
//
//   - every address it connects to — after DNS resolution, on every redirect hop, for a
//     proxy — was judged by the address guard (guard.go) first; a refused one fails
//     permanently with ErrBlocked and nothing is sent to it, as does a redirect to a
//     scheme other than http and https (file://, ftp://);
//   - the exchange, body included, ends after Timeout (connecting after
//     ConnectTimeout); redirects are followed up to MaxRedirects, and Response.URL is
//     the final URL;
//   - an answer of any status comes back as a *crawl.Response with Attempts 1. The body
//     of an answer the request accepts (crawl.Request.Accepts) is read whole up to
//     MaxBody — a larger one fails permanently with ErrBodyTooLarge without the rest
//     being read; the body of any other answer is kept up to 64 KiB, best effort, since
//     it only explains the status. Gzip bodies arrive decoded, whether the transport
//     negotiated them or the request asked with Accept-Encoding;
//   - every failure is an *Error, permanent (crawl.Permanent) when no retry can help: an
//     unusable URL, a TLS certificate error, a corrupt gzip body, too many redirects.
//
// Cookies are not kept between requests: a task that needs one sends it in its headers.
func Transport(o Options) crawl.Fetcher {
	o = o.withDefaults()
	g := newGuard(o)
	httpTransport := &http.Transport{
		Proxy:                 g.proxy, // a leased proxy, else the environment's
		DialContext:           g.dialContext,
		TLSHandshakeTimeout:   o.ConnectTimeout,
		ResponseHeaderTimeout: o.Timeout,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   max(o.HostConcurrency, defaultConcurrency),
		ForceAttemptHTTP2:     true,
		DisableCompression:    false, // gzip is negotiated and decoded by the transport
	}
	maxRedirects := o.MaxRedirects
	client := &http.Client{ // no cookie jar
		Transport: httpTransport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.Context().Value(noRedirectKey{}) != nil {
				return http.ErrUseLastResponse
			}
			if len(via) > maxRedirects {
				return &redirectLimitError{max: maxRedirects, next: req.URL.String()}
			}
			// A page may redirect to file://, gopher:// or anything else: only the
			// schemes a request may name are followed.
			if s := strings.ToLower(req.URL.Scheme); s != "http" && s != "https" {
				return &schemeError{scheme: req.URL.Scheme}
			}
			return nil
		},
	}
	return &transport{opt: o, client: client}
}

// noRedirectKey marks the exchange of a request with NoRedirect.
type noRedirectKey struct{}

// exchangeError is an *Error for one exchange: Attempts is 1 when the request went out.
// retry says whether another attempt may help; permanent marks it crawl.Permanent.
func exchangeError(method, rawURL string, status int, sent bool, cause error, permanent, retry bool) error {
	e := &Error{Method: method, URL: rawURL, Status: status, Err: cause, retry: retry}
	if sent {
		e.Attempts = 1
	}
	if permanent {
		return crawl.Permanent(e)
	}
	return e
}

func (t *transport) Fetch(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
	if r == nil {
		return nil, crawl.Permanent(&Error{Err: errors.New("nil request")})
	}
	method := methodOf(r)
	u, err := requestURL(r)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, t.opt.Timeout)
	defer cancel()
	if r.NoRedirect {
		actx = context.WithValue(actx, noRedirectKey{}, true)
	}
	var remote string
	recorded := recorderOf(ctx) != nil
	if recorded {
		// The archive keeps the server's address, and the body as it came.
		actx = httptrace.WithClientTrace(actx, &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) {
			if a, ok := c.Conn.RemoteAddr().(*net.TCPAddr); ok {
				remote = a.IP.String()
			}
		}})
	}
	req, err := t.newRequest(actx, method, u, r)
	if err != nil {
		return nil, crawl.Permanent(&Error{Method: method, URL: r.URL, Err: err})
	}
	if recorded && req.Header.Get("Accept-Encoding") == "" {
		// Asked for by name, gzip reaches readBody still encoded (and is decoded
		// there), so the archive gets the bytes the server sent.
		req.Header.Set("Accept-Encoding", "gzip")
	}
	start := time.Now()
	// A response comes with an error only when a redirect was refused; its body is
	// closed already.
	raw, err := t.client.Do(req)
	if err != nil {
		status := 0
		if raw != nil {
			if raw.Body != nil {
				raw.Body.Close()
			}
			status = raw.StatusCode
		}
		var rl *redirectLimitError
		if errors.As(err, &rl) {
			return nil, exchangeError(method, r.URL, status, true, rl, true, false)
		}
		if refused := guardRefusal(err); refused != nil {
			// Nothing went to a refused address; only a redirect hop leading there
			// means the first request was sent.
			var ue *url.Error
			if errors.As(err, &ue) && ue.URL != u.String() {
				return nil, exchangeError(method, r.URL, status, true,
					&causeError{fmt.Sprintf("redirect to %s refused: %s", ue.URL, refused.Error()), refused}, true, false)
			}
			return nil, exchangeError(method, r.URL, status, false, refused, true, false)
		}
		permanent, retry, cause := t.classify(ctx, actx, err)
		return nil, exchangeError(method, r.URL, status, true, cause, permanent, retry)
	}
	if raw == nil || raw.Body == nil {
		return nil, exchangeError(method, r.URL, 0, true, errors.New("no response"), false, false)
	}
	defer raw.Body.Close()
	code := raw.StatusCode
	rec := startRecording(ctx, raw)
	if !r.Accepts(code) {
		// The answer fails the request further out (or is retried); its body only
		// explains the status, so a little of it is enough and its errors do not matter.
		body, header := t.readExplanation(method, raw)
		return &crawl.Response{URL: raw.Request.URL.String(), Status: code, Header: header, Body: body, Attempts: 1}, nil
	}
	body, header, err := t.readBody(method, raw)
	if err == nil {
		rec.finish(ctx, raw, body, r.Body, remote, start)
	}
	if err != nil {
		if errors.Is(err, ErrBodyTooLarge) {
			return nil, exchangeError(method, r.URL, code, true, err, true, false)
		}
		permanent, retry, cause := t.classify(ctx, actx, err)
		var te *timeoutError
		if ctx.Err() == nil && !errors.As(cause, &te) {
			cause = &causeError{"reading body: " + cause.Error(), cause}
		}
		return nil, exchangeError(method, r.URL, code, true, cause, permanent, retry)
	}
	return &crawl.Response{URL: raw.Request.URL.String(), Status: code, Header: header, Body: body, Attempts: 1}, nil
}

// newRequest is the HTTP request r asks for: its headers, the transport's User-Agent
// unless it sets its own, and its body, typed by sniffing (http.DetectContentType) when
// it names no Content-Type. A JSON or XML body that names no Accept asks for its own type.
func (t *transport) newRequest(ctx context.Context, method string, u *url.URL, r *crawl.Request) (*http.Request, error) {
	var body io.Reader
	if r.Body != nil && method != http.MethodHead && method != http.MethodOptions {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		req.Header[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", t.opt.UserAgent)
	}
	if body == nil {
		return req, nil
	}
	ct := req.Header.Get("Content-Type")
	if ct == "" {
		ct = http.DetectContentType(r.Body)
		req.Header.Set("Content-Type", ct)
	}
	if req.Header.Get("Accept") == "" && structuredType(ct) {
		req.Header.Set("Accept", ct)
	}
	return req, nil
}

// structuredType reports whether a Content-Type names JSON or XML (application/json,
// text/xml, application/ld+json…).
func structuredType(ct string) bool {
	media, _, _ := strings.Cut(strings.ToLower(ct), ";")
	kind, sub, ok := strings.Cut(strings.TrimSpace(media), "/")
	return ok && (kind == "application" || kind == "text") && (strings.Contains(sub, "json") || strings.Contains(sub, "xml"))
}

// guardRefusal is what the guard refused in err (an address or a redirect's scheme), or nil.
func guardRefusal(err error) error {
	var be *blockedError
	var se *schemeError
	switch {
	case errors.As(err, &be):
		return be
	case errors.As(err, &se):
		return se
	}
	return nil
}

// methodOf is the request's method as sent: upper case, GET when empty.
func methodOf(r *crawl.Request) string {
	if m := strings.ToUpper(strings.TrimSpace(r.Method)); m != "" {
		return m
	}
	return http.MethodGet
}

// requestURL parses the request's URL, failing permanently unless it is an absolute
// http(s) URL.
func requestURL(r *crawl.Request) (*url.URL, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, crawl.Permanent(&Error{Method: methodOf(r), URL: r.URL, Err: &causeError{"invalid URL: " + err.Error(), err}})
	}
	if s := strings.ToLower(u.Scheme); (s != "http" && s != "https") || u.Host == "" {
		return nil, crawl.Permanent(&Error{Method: methodOf(r), URL: r.URL, Err: errors.New("invalid URL: want an absolute http or https URL")})
	}
	return u, nil
}

// classify turns a transport error into a readable cause and says whether another attempt
// could help.
func (t *transport) classify(ctx, actx context.Context, err error) (permanent, retryable bool, cause error) {
	if ctx.Err() != nil {
		return false, false, ctx.Err()
	}
	if errors.Is(actx.Err(), context.DeadlineExceeded) {
		return false, true, &timeoutError{fmt.Sprintf("read timeout after %s", t.opt.Timeout), context.DeadlineExceeded}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		var op *net.OpError
		switch {
		case errors.As(err, &op) && op.Op == "dial":
			return false, true, &timeoutError{fmt.Sprintf("connect timeout after %s", t.opt.ConnectTimeout), err}
		case strings.Contains(err.Error(), "TLS handshake timeout"):
			return false, true, &timeoutError{fmt.Sprintf("TLS handshake timeout after %s", t.opt.ConnectTimeout), err}
		default:
			return false, true, &timeoutError{fmt.Sprintf("read timeout after %s", t.opt.Timeout), err}
		}
	}
	var (
		certErr     *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostnameErr x509.HostnameError
		invalidErr  x509.CertificateInvalidError
		corrupt     flate.CorruptInputError
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostnameErr), errors.As(err, &invalidErr):
		return true, false, err
	case errors.Is(err, gzip.ErrHeader), errors.Is(err, gzip.ErrChecksum), errors.As(err, &corrupt):
		return true, false, err
	case strings.Contains(err.Error(), "unsupported protocol scheme"):
		return true, false, err
	}
	return false, true, err
}

// gzipEncoded reports whether raw's body comes gzip-encoded (and Go's transport did not
// decode it already): what is read of it is then not the body the task gets.
func gzipEncoded(raw *http.Response) bool {
	enc := strings.ToLower(strings.TrimSpace(raw.Header.Get("Content-Encoding")))
	return !raw.Uncompressed && (enc == "gzip" || enc == "x-gzip")
}

// decodedBody is raw's body with gzip the transport left encoded (when the request set
// its own Accept-Encoding) decoded, and the header to go with it; hint is the body's
// size when known, else -1.
func decodedBody(raw *http.Response) (body io.Reader, header http.Header, hint int64, closeFn func(), err error) {
	header, hint, closeFn = raw.Header, raw.ContentLength, func() {}
	if !gzipEncoded(raw) {
		return raw.Body, header, hint, closeFn, nil
	}
	header = header.Clone()
	header.Del("Content-Encoding")
	header.Del("Content-Length")
	zr, err := gzip.NewReader(raw.Body)
	switch {
	case err == io.EOF:
		return http.NoBody, header, -1, closeFn, nil
	case err != nil:
		return nil, nil, 0, closeFn, &causeError{"decoding gzip body: " + err.Error(), err}
	}
	return zr, header, -1, func() { zr.Close() }, nil
}

// readBody reads the body of an accepted answer through the MaxBody limit.
func (t *transport) readBody(method string, raw *http.Response) ([]byte, http.Header, error) {
	if method == http.MethodHead {
		return []byte{}, raw.Header, nil
	}
	body, header, hint, closeFn, err := decodedBody(raw)
	if err != nil {
		return nil, nil, err
	}
	defer closeFn()
	if hint > t.opt.MaxBody {
		return nil, nil, &bodyTooLargeError{t.opt.MaxBody}
	}
	buf, err := readLimited(body, t.opt.MaxBody, hint)
	if err != nil {
		return nil, nil, err
	}
	return buf, header, nil
}

// readExplanation reads at most errorBodyDrain bytes of the body of an answer the
// request does not accept, ignoring read errors: what arrived is what there is.
func (t *transport) readExplanation(method string, raw *http.Response) ([]byte, http.Header) {
	if method == http.MethodHead {
		return []byte{}, raw.Header
	}
	body, header, _, closeFn, err := decodedBody(raw)
	if err != nil {
		return []byte{}, raw.Header
	}
	defer closeFn()
	buf, _ := io.ReadAll(io.LimitReader(body, min(errorBodyDrain, t.opt.MaxBody)))
	return buf, header
}

// readLimited reads r to the end into a buffer never larger than limit+1 bytes, failing
// with a bodyTooLargeError as soon as more than limit bytes arrive.
func readLimited(r io.Reader, limit, hint int64) ([]byte, error) {
	size := int64(32 << 10)
	if hint >= 0 {
		size = hint + 1 // room to see EOF without growing
	}
	size = min(size, limit+1)
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, &bodyTooLargeError{limit}
			}
			grown := make([]byte, len(buf), min(2*int64(cap(buf)), limit+1))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, &bodyTooLargeError{limit}
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
