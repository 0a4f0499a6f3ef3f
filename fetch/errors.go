package fetch

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/trawlerhq/trawler/crawl"
)

// Error is the error Fetch returns for every failure, reachable with errors.As through the
// crawl.Permanent and crawl.RetryAfter wrappers. It names the request, the last HTTP status
// seen (0 when no response arrived), or the cause, and how many times the request was sent.
type Error struct {
	Method string
	URL    string
	// Status is the HTTP status of the last answer, or 0 when none arrived.
	Status int
	// Attempts counts the requests sent for this URL; 0 when none was sent (an invalid
	// URL, a robots.txt refusal).
	Attempts int
	// Err is the cause when it is not just the status: a network error, a timeout, an
	// oversized body, a robots.txt refusal. Nil for a plain HTTP status failure.
	Err error
	// retry: another attempt may get an answer (a network error, a timeout); read by
	// the Retry middleware.
	retry bool
}

// Error reads like `GET http://host/item/7: HTTP 500 Internal Server Error (3 attempts)`.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Method)
	b.WriteByte(' ')
	b.WriteString(e.URL)
	b.WriteString(": ")
	switch {
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	case e.Status != 0:
		b.WriteString(statusLine(e.Status))
	default:
		b.WriteString("request failed")
	}
	switch {
	case e.Attempts == 1:
		b.WriteString(" (1 attempt)")
	case e.Attempts > 1:
		fmt.Fprintf(&b, " (%d attempts)", e.Attempts)
	}
	// The URL, a redirect target or a proxy may carry credentials.
	return crawl.RedactText(b.String())
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrBodyTooLarge matches (with errors.Is) a failure caused by a body over Options.MaxBody.
var ErrBodyTooLarge = errors.New("response body too large")

// ErrDisallowed matches (with errors.Is) a refusal by the host's robots.txt.
var ErrDisallowed = errors.New("disallowed by robots.txt")

func statusLine(code int) string {
	if text := http.StatusText(code); text != "" {
		return fmt.Sprintf("HTTP %d %s", code, text)
	}
	return fmt.Sprintf("HTTP %d", code)
}

type bodyTooLargeError struct{ limit int64 }

func (e *bodyTooLargeError) Error() string {
	return fmt.Sprintf("body exceeds the %s limit (raise fetch max_body)", formatBytes(e.limit))
}

func (e *bodyTooLargeError) Is(target error) bool { return target == ErrBodyTooLarge }

type disallowedError struct{ robotsURL, userAgent string }

func (e *disallowedError) Error() string {
	return fmt.Sprintf("disallowed by %s for user-agent %s (set robots: false on the chain to ignore robots.txt)",
		e.robotsURL, e.userAgent)
}

func (e *disallowedError) Is(target error) bool { return target == ErrDisallowed }

// robotsUnavailableError: robots.txt could not be read, so the host is treated as
// disallowed until the next attempt to read it.
type robotsUnavailableError struct {
	robotsURL string
	cause     string
	err       error
}

func (e *robotsUnavailableError) Error() string {
	switch crawl.CauseOf(e.err) {
	case crawl.CauseDNS, crawl.CauseConnection, crawl.CauseTLS, crawl.CauseTimeout:
		// The host cannot be reached at all: that is the failure, not its robots.txt.
		return fmt.Sprintf("%s (reading %s, before the page)", e.cause, e.robotsURL)
	}
	return fmt.Sprintf("%s could not be read (%s); the host counts as disallowed until it can be (set robots: false on the chain to ignore robots.txt)",
		e.robotsURL, e.cause)
}

func (e *robotsUnavailableError) Unwrap() error { return e.err }

// causeError gives a low-level error a readable message while keeping it for errors.Is.
type causeError struct {
	msg string
	err error
}

func (e *causeError) Error() string { return e.msg }
func (e *causeError) Unwrap() error { return e.err }

// timeoutError is an attempt that ran out of time.
type timeoutError struct {
	msg string
	err error
}

func (e *timeoutError) Error() string { return e.msg }
func (e *timeoutError) Unwrap() error { return e.err }
func (e *timeoutError) Timeout() bool { return true }

type redirectLimitError struct {
	max  int
	next string
}

func (e *redirectLimitError) Error() string {
	if e.max <= 0 {
		return fmt.Sprintf("redirect to %s not followed (redirects are disabled; raise fetch max_redirects)", e.next)
	}
	return fmt.Sprintf("stopped after %d redirects, next was %s (raise fetch max_redirects)", e.max, e.next)
}

func formatBytes(n int64) string {
	const kib, mib, gib = 1 << 10, 1 << 20, 1 << 30
	switch {
	case n >= gib && n%gib == 0:
		return fmt.Sprintf("%d GiB", n/gib)
	case n >= mib && n%mib == 0:
		return fmt.Sprintf("%d MiB", n/mib)
	case n >= kib && n%kib == 0:
		return fmt.Sprintf("%d KiB", n/kib)
	}
	return fmt.Sprintf("%d bytes", n)
}

// HTTPStatus is the status of the last answer (0 when none arrived), for tasks that
// accept some statuses as pages (crawl.AcceptStatus).
func (e *Error) HTTPStatus() int { return e.Status }

// FailureCause names what refused the request (robots.txt, the size limit, the guard)
// and what failed an exchange after its answer arrived (a body that timed out is a
// timeout, whatever its status); the caller's crawl.CauseOf reads any other status or
// network error from the error itself.
func (e *Error) FailureCause() crawl.Cause {
	switch {
	case errors.Is(e.Err, ErrDisallowed):
		return crawl.CauseRobots
	case errors.Is(e.Err, ErrBodyTooLarge):
		return crawl.CauseTooLarge
	case errors.Is(e.Err, ErrBlocked):
		return crawl.CauseBlocked
	case e.Err != nil && e.Status != 0:
		// The answer came, then the exchange failed (its body timed out or broke off):
		// the failure is the error's, not the status's.
		if c := crawl.CauseOf(e.Err); c != crawl.CauseOther {
			return c
		}
	}
	return ""
}
