package crawl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strconv"
	"syscall"
)

// Cause is why an input failed, from a closed set. It is decided where the failure
// happens and travels with the failure to the run summary, the metrics and the console;
// nothing reads it back out of an error's text.
type Cause string

// The causes. HTTP statuses keep the common ones apart and fold the rest by class.
const (
	CauseHTTP401     Cause = "http_401"
	CauseHTTP403     Cause = "http_403"
	CauseHTTP404     Cause = "http_404"
	CauseHTTP410     Cause = "http_410"
	CauseHTTP429     Cause = "http_429"
	CauseHTTP4xx     Cause = "http_4xx"
	CauseHTTP5xx     Cause = "http_5xx"
	CauseHTTPOther   Cause = "http_other" // 1xx and 3xx a fetcher did not follow
	CauseTimeout     Cause = "timeout"
	CauseDNS         Cause = "dns"
	CauseTLS         Cause = "tls"
	CauseConnection  Cause = "connection"
	CauseRobots      Cause = "robots"
	CauseTooLarge    Cause = "too_large"
	CauseBlocked     Cause = "blocked" // an address the worker may not reach
	CauseQuota       Cause = "quota"
	CauseParse       Cause = "parse"  // the page is not what the task expects
	CauseConfig      Cause = "config" // the step's params or input cannot work
	CauseStore       Cause = "store"
	CauseResource    Cause = "resource" // a pool item (proxy, cookie …) was not to be had
	CauseAction      Cause = "action"   // a browser action (render.actions) could not be done
	CauseCanceled    Cause = "canceled"
	CauseNotArchived Cause = "not_archived" // a reparse asked for a page its archived run does not hold
	CausePanic       Cause = "panic"
	CauseOther       Cause = "other"
)

// Causes lists every cause, for documentation and metrics.
var Causes = []Cause{CauseHTTP401, CauseHTTP403, CauseHTTP404, CauseHTTP410, CauseHTTP429, CauseHTTP4xx, CauseHTTP5xx,
	CauseHTTPOther, CauseTimeout, CauseDNS, CauseTLS, CauseConnection, CauseRobots, CauseTooLarge, CauseBlocked, CauseQuota,
	CauseParse, CauseConfig, CauseStore, CauseResource, CauseAction, CauseNotArchived, CauseCanceled, CausePanic, CauseOther}

type causeError struct {
	err   error
	cause Cause
}

func (e *causeError) Error() string       { return e.err.Error() }
func (e *causeError) Unwrap() error       { return e.err }
func (e *causeError) FailureCause() Cause { return e.cause }

// WithCause marks err with its cause, for failures only their origin can name (a parse
// failure, a bad param).
func WithCause(err error, c Cause) error {
	if err == nil {
		return nil
	}
	return &causeError{err: err, cause: c}
}

// HTTPCause is the cause of a failed HTTP status.
func HTTPCause(status int) Cause {
	switch {
	case status == 401 || status == 403 || status == 404 || status == 410 || status == 429:
		return Cause("http_" + strconv.Itoa(status))
	case status >= 500:
		return CauseHTTP5xx
	case status >= 400:
		return CauseHTTP4xx
	}
	return CauseHTTPOther
}

// CauseOf names why err happened. An error (anywhere in its chain) with a
// FailureCause() method that returns a cause decides; then dependency outages, the
// context, an HTTP status (an error with HTTPStatus()), and the network errors of the
// standard library. Anything else is a parse failure when permanent, else other.
func CauseOf(err error) Cause {
	if err == nil {
		return ""
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if c, ok := e.(interface{ FailureCause() Cause }); ok && c.FailureCause() != "" {
			return c.FailureCause()
		}
	}
	if dep, ok := DependencyOf(err); ok {
		if len(dep) >= 4 && dep[:4] == "pool" {
			return CauseResource
		}
		return CauseStore
	}
	var st interface{ HTTPStatus() int }
	if errors.As(err, &st) && st.HTTPStatus() != 0 {
		return HTTPCause(st.HTTPStatus())
	}
	var dns *net.DNSError
	var hostname x509.HostnameError
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	var nerr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return CauseCanceled
	case errors.As(err, &dns):
		if dns.IsTimeout {
			return CauseTimeout
		}
		return CauseDNS
	case errors.As(err, &hostname), errors.As(err, &unknown), errors.As(err, &invalid), errors.As(err, &verify), errors.As(err, &record):
		return CauseTLS
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		return CauseTimeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF), errors.As(err, new(*net.OpError)):
		return CauseConnection
	case IsPermanent(err):
		return CauseParse
	}
	return CauseOther
}
