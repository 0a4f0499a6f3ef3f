package crawl

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// What a status means is decided in one place: the fetcher (fetch.StatusCheck, the
// outermost layer of fetch.New's chain) compares every answer with the request's
// Accept. An accepted answer is the task's response; any other fails the request with
// the status as its cause — retried when RetryableStatus says a retry may cure it (with
// the site's Retry-After handed to the engine), permanent otherwise. A task that wants
// to read more statuses than DefaultAccept widens Accept (HTMLTask: AcceptStatus); it
// never checks a response's status a second time.

// DefaultAccept is what a request without Accept takes as an answer: a 2xx, or a 304
// (a conditional request's "not modified").
func DefaultAccept(status int) bool {
	return (status >= 200 && status < 300) || status == http.StatusNotModified
}

// Accepts reports whether r takes an answer with this status: r.Accept, else
// DefaultAccept.
func (r *Request) Accepts(status int) bool {
	if r != nil && r.Accept != nil {
		return r.Accept(status)
	}
	return DefaultAccept(status)
}

// RetryableStatus reports whether another attempt may get a better answer: 408, 429
// and 5xx other than 501 (Not Implemented) and 505 (HTTP Version Not Supported), which
// no retry changes. Every other status fails permanently.
func RetryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	case http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return false
	}
	return code >= 500 && code < 600
}

// maxRetryAfter caps absurd Retry-After values so they cannot overflow a Duration.
const maxRetryAfter = (1 << 31) * time.Second

// ParseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
