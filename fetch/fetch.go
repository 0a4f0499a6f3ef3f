// Package fetch is Trawler's HTTP fetcher: the crawl.Fetcher behind env.Fetch in every
// task. One Fetcher serves a whole worker process and is safe for concurrent use.
//
// For each request the fetcher guarantees:
//
//   - Politeness per host (scheme, host and port): at most HostConcurrency requests in
//     flight and at most RateLimit requests per second, in-process retries and the
//     robots.txt fetch included. Waiting for a slot or a token ends when ctx does.
//   - robots.txt is obeyed unless the request sets IgnoreRobots. It is read once per host
//     and cached for an hour. A missing robots.txt (any 4xx but 429) allows everything;
//     one that cannot be read (429, 5xx, network error) disallows the host for a minute,
//     with a retryable error that asks the engine (crawl.RetryAfter) to come back then.
//     A disallowed URL fails permanently.
//   - Bounded cost: each attempt, body included, ends after Timeout (connecting after
//     ConnectTimeout); a body is held in memory only up to MaxBody+1 bytes, and a larger
//     one fails permanently without the rest being read. Gzip bodies arrive decoded,
//     whether the transport negotiated them or the request asked with Accept-Encoding.
//   - Redirects are followed up to MaxRedirects; Response.URL is the final URL. Limits and
//     robots.txt are those of the requested URL's host; redirect hops are not re-checked.
//   - 429, 408, 500, 502, 503, 504 (and 5xx other than 501 and 505), network errors and
//     timeouts are retried in-process up to Retries times, sleeping for Retry-After when
//     it is at most MaxRetryWait and for an exponential Backoff otherwise. A longer
//     Retry-After, or one on the last failed answer, is handed to the engine with
//     crawl.RetryAfter instead of holding the worker. A 2xx, or a 304 answering a
//     conditional request, is returned as the response. Other 3xx, 4xx and 5xx answers,
//     TLS certificate errors and unusable URLs fail at once with crawl.Permanent.
//   - Every error is an *Error (use errors.As) naming the method, the URL, the status or
//     the cause, and the number of attempts.
//
// Cookies are not kept between requests: a task that needs one sends it in its headers.
package fetch

import (
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
	"net/url"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"

	"trawler/crawl"
)

// Options configure a Fetcher. Zero values take the defaults noted.
type Options struct {
	ConnectTimeout time.Duration // dial and TLS handshake; default 10s
	Timeout        time.Duration // one attempt, body included; default 30s
	MaxBody        int64         // default 10 MiB; larger bodies fail permanently without reading the rest
	MaxRedirects   int           // default 10; negative follows none
	UserAgent      string        // default "Trawler/1.0"; a request's own User-Agent header wins
	// RateLimit is the default number of requests per second per host; 0 is unlimited.
	RateLimit float64
	// HostConcurrency is the default number of parallel requests per host; default 16.
	//
	// A request's non-zero RateLimit or HostConcurrency overrides these defaults for its
	// host, once: the first non-zero value seen for a host wins and later different
	// values are ignored, so all tasks hitting one host share one limit. A host unused for
	// an hour is forgotten, and the next request sets its limits afresh.
	HostConcurrency int
	// Retries is the number of in-process retries on 429, 5xx, network errors and
	// timeouts; default 2, negative for none.
	Retries int
	// MaxRetryWait is the longest Retry-After honoured by sleeping; default 5s, negative
	// for none. A longer one returns crawl.RetryAfter(err, d) so the engine reschedules
	// the input durably instead of holding a slot.
	MaxRetryWait time.Duration
	// Backoff is the first pause between in-process retries when the server sent no
	// Retry-After; it doubles on each retry. Default 200ms.
	Backoff time.Duration
	// AllowPrivate lets requests reach loopback, private and other non-public
	// addresses (the worker's --allow-private). Link-local and cloud metadata
	// addresses are refused regardless. See guard.go.
	AllowPrivate bool
	// Network, when set, replaces name lookups and connecting (tests).
	Network *Network
}

const (
	defaultConnectTimeout = 10 * time.Second
	defaultTimeout        = 30 * time.Second
	defaultMaxBody        = 10 << 20
	defaultMaxRedirects   = 10
	defaultUserAgent      = "Trawler/1.0"
	defaultConcurrency    = 16
	defaultRetries        = 2
	defaultMaxRetryWait   = 5 * time.Second
	defaultBackoff        = 200 * time.Millisecond

	maxBackoff     = time.Minute
	robotsTTL      = time.Hour
	robotsRetryTTL = time.Minute
	robotsMaxBytes = 512 << 10
	errorBodyDrain = 64 << 10
	maxBodyCeiling = 1 << 40
)

func (o Options) withDefaults() Options {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = defaultConnectTimeout
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.MaxBody <= 0 {
		o.MaxBody = defaultMaxBody
	}
	if o.MaxBody > maxBodyCeiling {
		o.MaxBody = maxBodyCeiling
	}
	switch {
	case o.MaxRedirects == 0:
		o.MaxRedirects = defaultMaxRedirects
	case o.MaxRedirects < 0:
		o.MaxRedirects = 0
	}
	if strings.TrimSpace(o.UserAgent) == "" {
		o.UserAgent = defaultUserAgent
	}
	if o.RateLimit < 0 {
		o.RateLimit = 0
	}
	if o.HostConcurrency <= 0 {
		o.HostConcurrency = defaultConcurrency
	}
	switch {
	case o.Retries == 0:
		o.Retries = defaultRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	switch {
	case o.MaxRetryWait == 0:
		o.MaxRetryWait = defaultMaxRetryWait
	case o.MaxRetryWait < 0:
		o.MaxRetryWait = 0
	}
	if o.Backoff <= 0 {
		o.Backoff = defaultBackoff
	}
	return o
}

// Fetcher performs HTTP requests for tasks; it implements crawl.Fetcher.
type Fetcher struct {
	opt    Options // with defaults applied; MaxRedirects 0 means none
	client *resty.Client
	hosts  *hostTable
	guard  *guard
}

var _ crawl.Fetcher = (*Fetcher)(nil)

// New returns a Fetcher. It is safe for concurrent use by many goroutines and many tasks;
// make one per worker process so that per-host limits and robots.txt are shared.
func New(o Options) *Fetcher {
	o = o.withDefaults()
	g := newGuard(o)
	transport := &http.Transport{
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
	client := resty.New().
		SetTransport(transport).
		SetCookieJar(nil).
		SetLogger(quietLogger{}).
		SetDoNotParseResponse(true).
		SetAllowGetMethodPayload(true).
		SetHeader("User-Agent", o.UserAgent).
		SetRedirectPolicy(resty.RedirectPolicyFunc(func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return &redirectLimitError{max: maxRedirects, next: req.URL.String()}
			}
			return nil
		}))
	return &Fetcher{opt: o, client: client, hosts: newHostTable(o.RateLimit, o.HostConcurrency), guard: g}
}

// fetch performs r with the resources it already carries (see Fetch).
func (f *Fetcher) fetch(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
	if r == nil {
		return nil, crawl.Permanent(&Error{Err: errors.New("nil request")})
	}
	method := strings.ToUpper(strings.TrimSpace(r.Method))
	if method == "" {
		method = http.MethodGet
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, crawl.Permanent(&Error{Method: method, URL: r.URL, Err: &causeError{"invalid URL: " + err.Error(), err}})
	}
	if s := strings.ToLower(u.Scheme); (s != "http" && s != "https") || u.Host == "" {
		return nil, crawl.Permanent(&Error{Method: method, URL: r.URL, Err: errors.New("invalid URL: want an absolute http or https URL")})
	}

	h := f.hosts.acquire(hostKey(u), r.RateLimit, r.HostConcurrency)
	defer f.hosts.release(h)

	if !r.IgnoreRobots {
		ua := f.opt.UserAgent
		if v := r.Header.Get("User-Agent"); v != "" {
			ua = v
		}
		if err := f.checkRobots(ctx, h, u, ua, method, r.URL); err != nil {
			return nil, err
		}
	}

	maxAttempts := f.opt.Retries + 1
	sent := 0
	for attempt := 1; ; attempt++ {
		o := f.attempt(ctx, h, method, u, r)
		if o.sent {
			sent++
		}
		if o.resp != nil {
			return o.resp, nil
		}
		e := &Error{Method: method, URL: r.URL, Status: o.status, Attempts: sent, Err: o.err}
		switch {
		case o.permanent:
			return nil, crawl.Permanent(e)
		case !o.retryable:
			return nil, e
		case o.hasRetryAfter && o.retryAfter > f.opt.MaxRetryWait:
			return nil, crawl.RetryAfter(e, o.retryAfter)
		case attempt >= maxAttempts:
			if o.hasRetryAfter && o.retryAfter > 0 {
				return nil, crawl.RetryAfter(e, o.retryAfter)
			}
			return nil, e
		}
		wait := f.backoff(attempt)
		if o.hasRetryAfter && o.retryAfter > 0 {
			wait = o.retryAfter
		}
		if err := sleep(ctx, wait); err != nil {
			e.Err = err
			return nil, e
		}
	}
}

// outcome is the result of one attempt: resp on success, otherwise what went wrong and
// what may be done about it.
type outcome struct {
	resp          *crawl.Response
	sent          bool // the request went out
	status        int
	err           error // the cause beyond the status, if any
	permanent     bool
	retryable     bool // worth another attempt in-process
	retryAfter    time.Duration
	hasRetryAfter bool
}

func (f *Fetcher) attempt(ctx context.Context, h *host, method string, u *url.URL, r *crawl.Request) outcome {
	if err := h.takeSlot(ctx); err != nil {
		return outcome{err: err}
	}
	defer h.freeSlot()
	if err := f.waitToken(ctx, h); err != nil {
		return outcome{err: err}
	}

	actx, cancel := context.WithTimeout(ctx, f.opt.Timeout)
	defer cancel()
	req := f.client.R().SetContext(actx)
	for k, vs := range r.Header {
		req.Header[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	if r.Body != nil {
		req.SetBody(r.Body)
	}
	res, err := req.Execute(method, u.String())
	var raw *http.Response
	if res != nil {
		raw = res.RawResponse
	}
	if err != nil {
		o := outcome{sent: true}
		if raw != nil {
			if raw.Body != nil {
				raw.Body.Close()
			}
			o.status = raw.StatusCode
		}
		var rl *redirectLimitError
		if errors.As(err, &rl) {
			o.err, o.permanent = rl, true
			return o
		}
		var be *blockedError
		if errors.As(err, &be) {
			// Nothing went to a refused address; only a redirect hop leading there
			// means the first request was sent.
			o.permanent = true
			o.err = be
			var ue *url.Error
			if errors.As(err, &ue) && ue.URL != u.String() {
				o.err = &causeError{fmt.Sprintf("redirect to %s refused: %s", ue.URL, be.Error()), be}
			} else {
				o.sent = false
			}
			return o
		}
		o.err, o.permanent, o.retryable = f.classify(ctx, actx, err)
		return o
	}
	if raw == nil || raw.Body == nil {
		return outcome{sent: true, err: errors.New("no response")}
	}
	defer raw.Body.Close()
	observe(ctx, raw.StatusCode, raw.Header)

	code := raw.StatusCode
	o := outcome{sent: true, status: code}
	switch {
	case code >= 200 && code < 300, code == http.StatusNotModified:
		body, header, err := f.readBody(method, raw)
		if err != nil {
			if errors.Is(err, ErrBodyTooLarge) {
				o.err, o.permanent = err, true
				return o
			}
			o.err, o.permanent, o.retryable = f.classify(ctx, actx, err)
			var te *timeoutError
			if ctx.Err() == nil && !errors.As(o.err, &te) {
				o.err = &causeError{"reading body: " + o.err.Error(), o.err}
			}
			return o
		}
		o.resp = &crawl.Response{URL: raw.Request.URL.String(), Status: code, Header: header, Body: body}
		return o
	case retryableStatus(code):
		_, _ = io.Copy(io.Discard, io.LimitReader(raw.Body, errorBodyDrain))
		o.retryable = true
		o.retryAfter, o.hasRetryAfter = crawl.ParseRetryAfter(raw.Header.Get("Retry-After"), time.Now())
		return o
	default:
		o.permanent = true
		return o
	}
}

// waitToken takes one token from the host's rate limiter.
func (f *Fetcher) waitToken(ctx context.Context, h *host) error {
	if err := h.lim.Wait(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &causeError{"waiting for the host's rate limit: " + err.Error(), err}
	}
	return nil
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	case http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return false
	}
	return code >= 500 && code < 600
}

// classify turns a transport error into a readable cause and says whether another attempt
// could help.
func (f *Fetcher) classify(ctx, actx context.Context, err error) (cause error, permanent, retryable bool) {
	if ctx.Err() != nil {
		return ctx.Err(), false, false
	}
	if errors.Is(actx.Err(), context.DeadlineExceeded) {
		return &timeoutError{fmt.Sprintf("read timeout after %s", f.opt.Timeout), context.DeadlineExceeded}, false, true
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
			return &timeoutError{fmt.Sprintf("connect timeout after %s", f.opt.ConnectTimeout), err}, false, true
		case strings.Contains(err.Error(), "TLS handshake timeout"):
			return &timeoutError{fmt.Sprintf("TLS handshake timeout after %s", f.opt.ConnectTimeout), err}, false, true
		default:
			return &timeoutError{fmt.Sprintf("read timeout after %s", f.opt.Timeout), err}, false, true
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
		return err, true, false
	case errors.Is(err, gzip.ErrHeader), errors.Is(err, gzip.ErrChecksum), errors.As(err, &corrupt):
		return err, true, false
	case strings.Contains(err.Error(), "unsupported protocol scheme"):
		return err, true, false
	}
	return err, false, true
}

// readBody reads the body through the MaxBody limit, decoding gzip the transport left
// encoded (when the request set its own Accept-Encoding).
func (f *Fetcher) readBody(method string, raw *http.Response) ([]byte, http.Header, error) {
	header := raw.Header
	if method == http.MethodHead {
		return []byte{}, header, nil
	}
	limit := f.opt.MaxBody
	var body io.Reader = raw.Body
	hint := raw.ContentLength
	enc := strings.ToLower(strings.TrimSpace(header.Get("Content-Encoding")))
	if !raw.Uncompressed && (enc == "gzip" || enc == "x-gzip") {
		zr, err := gzip.NewReader(raw.Body)
		switch {
		case err == io.EOF:
			body = http.NoBody
		case err != nil:
			return nil, nil, &causeError{"decoding gzip body: " + err.Error(), err}
		default:
			defer zr.Close()
			body = zr
		}
		header = header.Clone()
		header.Del("Content-Encoding")
		header.Del("Content-Length")
		hint = -1
	} else if hint > limit {
		return nil, nil, &bodyTooLargeError{limit}
	}
	buf, err := readLimited(body, limit, hint)
	if err != nil {
		return nil, nil, err
	}
	return buf, header, nil
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

func (f *Fetcher) backoff(attempt int) time.Duration {
	d := f.opt.Backoff
	for i := 1; i < attempt && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, max(maxBackoff, f.opt.Backoff))
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type quietLogger struct{}

func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Warnf(string, ...any)  {}
func (quietLogger) Debugf(string, ...any) {}
