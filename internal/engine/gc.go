package engine

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// GCPercent is the garbage collector's target a crawl process runs with unless GOGC
// says otherwise. A batch of cheap pages allocates fast and keeps little (parsed
// documents, encoded items), so with Go's default of 100 the collector runs every few
// milliseconds: at 300 it ran about half as often and the static bench shape's CPU per
// page fell by about 9% (see docs/testing.md). The heap may grow to four times what
// is live; the soft memory limit below keeps that growth inside the machine.
const GCPercent = 300

// memoryShare is the part of the process's memory (its cgroup's limit, else the
// machine's) the heap is kept under, unless GOMEMLIMIT says otherwise: past it the
// collector runs as often as it must, whatever GCPercent allows.
const memoryShare = 0.75

// TuneGC sets the collector for a long-running crawl process (worker, dev, demo,
// bench): GCPercent and a soft memory limit, each unless its environment variable
// (GOGC, GOMEMLIMIT) is set, which Go applies itself. It returns what it set (0 for
// what it left alone).
func TuneGC() (percent int, limit int64) {
	percent, limit = gcSettings(os.Getenv, cgroupMemoryMax(), machineMemory())
	if percent > 0 {
		debug.SetGCPercent(percent)
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	return percent, limit
}

// gcSettings is TuneGC's choice, given the environment and the memory (bytes; 0 when
// unknown) of the process's cgroup and of the machine.
func gcSettings(env func(string) string, cgroupMax, machine int64) (percent int, limit int64) {
	if env("GOGC") == "" {
		percent = GCPercent
	}
	if env("GOMEMLIMIT") == "" {
		mem := machine
		if cgroupMax > 0 && (mem == 0 || cgroupMax < mem) {
			mem = cgroupMax
		}
		limit = int64(float64(mem) * memoryShare)
	}
	return percent, limit
}

// cgroupMemoryMax is the memory limit of the process's cgroup (v2), 0 when there is
// none or it cannot be read.
func cgroupMemoryMax() int64 {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64) // "max": no limit
	if err != nil {
		return 0
	}
	return n
}

// machineMemory is the machine's memory in bytes, 0 when /proc/meminfo cannot be read.
func machineMemory() int64 {
	total, _, err := meminfo()
	if err != nil {
		return 0
	}
	return int64(total) * 1024
}
