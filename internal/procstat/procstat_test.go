package procstat

import (
	"os"
	"strconv"
	"testing"
)

func TestFieldsOfThisProcess(t *testing.T) {
	f, err := Fields(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(f) < 22 || f[0] != "R" && f[0] != "S" {
		t.Fatalf("fields %q: want a running or sleeping state first and 22 fields or more", f)
	}
	if ppid, _ := strconv.Atoi(f[1]); ppid != os.Getppid() {
		t.Fatalf("field 4 (ppid) = %s, want %d", f[1], os.Getppid())
	}
	if _, err := Fields(-1); err == nil {
		t.Fatal("no error for a process that cannot exist")
	}
}
