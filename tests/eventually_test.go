package tests

import (
	"testing"
	"time"
)

// eventually waits until cond holds, and fails the test with what it waited for if
// cond has not held within timeout. cond runs on the test's goroutine, so it may call
// t.Fatal itself when waiting longer is pointless (a run that ended early).
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(timeout, cond) {
		t.Fatalf("%s: not within %s", what, timeout)
	}
}

// poll reports whether cond holds within timeout, looking again after 10 ms, then
// less often up to every 100 ms: a quick condition is seen at once, a slow one does
// not load the stack it asks. Tests that name what they last saw in their failure,
// or only record an error, use it in place of eventually.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for pause := 10 * time.Millisecond; ; pause = min(pause*3/2, 100*time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(min(pause, time.Until(deadline)+time.Millisecond))
	}
}
