package cli

import "testing"

// A negative --host-concurrency is refused before the worker dials anything, with the
// values it takes.
func TestWorkerRefusesANegativeHostConcurrency(t *testing.T) {
	t.Setenv("TRAWLER_DATA", "")
	err := runCLI(t, "worker", "--out", t.TempDir(), "--host-concurrency", "-1")
	want := "--host-concurrency -1: use 1 or more requests in flight per host, or 0 for the default (8)"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}
