package crawl

import (
	"errors"
	"fmt"
	"time"
)

// A task returns an error for an input it could not process. By default the engine
// retries the input with backoff up to the step's retry limit; Permanent marks errors that
// another attempt cannot fix (a 404, a page without the expected fields), and RetryAfter
// asks for the next attempt no sooner than a given delay (a 429 with Retry-After).

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// Permanentf is Permanent(fmt.Errorf(...)).
func Permanentf(format string, args ...any) error { return Permanent(fmt.Errorf(format, args...)) }

// IsPermanent reports whether err was marked Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter asks the engine to wait at least d before the next attempt.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, after: d}
}

// RetryDelay returns the delay requested with RetryAfter, or 0.
func RetryDelay(err error) time.Duration {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.after
	}
	return 0
}

// DependencyError is a failure of something the engine relies on — a store, Redis, a
// resource pool, a site queue — rather than of the input being crawled. The input is
// not at fault, so it never counts against the input's retries: the run waits the
// outage out and names the dependency in its status.
type DependencyError struct {
	Dependency string // e.g. "store mongo", "redis (dedup)", "pool default/demo/cookie"
	Err        error
}

func (e *DependencyError) Error() string {
	return e.Dependency + ": " + RedactText(e.Err.Error()) // store errors may quote their URI
}
func (e *DependencyError) Unwrap() error { return e.Err }

// DependencyErrorType is the Temporal application error type of a batch that failed
// for a dependency; the error's details hold the dependency's name.
const DependencyErrorType = "DependencyError"

// Dependency marks err as an outage of dep. An error already marked keeps its dependency.
func Dependency(dep string, err error) error {
	if err == nil {
		return nil
	}
	var d *DependencyError
	if errors.As(err, &d) {
		return err
	}
	return &DependencyError{Dependency: dep, Err: err}
}

// DependencyOf returns the dependency an error was marked with.
func DependencyOf(err error) (string, bool) {
	var d *DependencyError
	if errors.As(err, &d) {
		return d.Dependency, true
	}
	return "", false
}

// HeldError is an input held back by its host's politeness: the host asked every worker
// to pause (a 429 or 503, its Retry-After), or its fleet-wide budget has no slot or start
// time free before the input's deadline. The input is not at fault, so the engine runs
// it again after Wait without spending an attempt.
type HeldError struct {
	Host   string        // the host, or the domain or address whose budget it shares
	Wait   time.Duration // until the host takes requests again, as far as known
	Reason string        // why, e.g. "paused by HTTP 429 (Retry-After 2s)"
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("held back by the politeness of %s for %s: %s", RedactText(e.Host), e.Wait.Round(time.Millisecond), e.Reason)
}

// HeldFor reports whether err is (or wraps) a HeldError, and how long to wait.
func HeldFor(err error) (time.Duration, bool) {
	var h *HeldError
	if errors.As(err, &h) {
		return h.Wait, true
	}
	return 0, false
}
