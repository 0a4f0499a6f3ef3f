package render

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/trawlerhq/trawler/internal/procstat"
)

// profilePrefix starts the name of every browser profile directory, followed by the
// owning worker's pid: a process whose profile names a dead worker is an orphan.
const profilePrefix = "trawler-browser-"

var profileOwner = regexp.MustCompile(`--user-data-dir=(\S*/` + profilePrefix + `(\d+)-\S*)`)

// Process is one live browser process, as /proc shows it.
type Process struct {
	PID     int
	PGID    int
	RSS     int64  // bytes
	Profile string // its --user-data-dir
	Owner   int    // pid of the worker that started it
}

// Processes lists the live (not zombie) processes running a Trawler browser profile,
// whoever started them.
func Processes() []Process {
	entries, _ := os.ReadDir("/proc")
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		m := profileOwner.FindSubmatch(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		if m == nil {
			continue
		}
		st, ok := stat(pid)
		if !ok || st.state == "Z" {
			continue
		}
		owner, _ := strconv.Atoi(string(m[2]))
		out = append(out, Process{PID: pid, PGID: st.pgid, RSS: st.rss, Profile: string(m[1]), Owner: owner})
	}
	return out
}

type procStat struct {
	state string
	pgid  int
	rss   int64
}

var pageSize = int64(os.Getpagesize())

// stat reads a process's state, process group and resident memory.
func stat(pid int) (procStat, bool) {
	f, err := procstat.Fields(pid)
	if err != nil || len(f) < 22 {
		return procStat{}, false
	}
	pgid, _ := strconv.Atoi(f[2])
	rss, _ := strconv.ParseInt(f[21], 10, 64)
	return procStat{state: f[0], pgid: pgid, rss: rss * pageSize}, true
}

// Usage is what a group of processes holds: RSS counts a page shared by several
// processes once in each (Chromium's processes share most of theirs), PSS shares it
// out between them, so their PSS adds up to the memory they really use.
type Usage struct {
	RSS int64 `json:"rss"`
	PSS int64 `json:"pss"`
}

// groupUsage is the memory of every live process in a process group: a browser and
// all its helpers (renderers, GPU, network).
func groupUsage(pgid int) Usage {
	entries, _ := os.ReadDir("/proc")
	var m Usage
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := stat(pid); ok && st.pgid == pgid && st.state != "Z" {
			m.RSS += st.rss
			m.PSS += pss(pid)
		}
	}
	return m
}

// pss is a process's proportional set size, from /proc/PID/smaps_rollup.
func pss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// SelfRSS is this process's resident memory.
func SelfRSS() int64 {
	st, _ := stat(os.Getpid())
	return st.rss
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	st, ok := stat(pid)
	return ok && st.state != "Z"
}

// SweepOrphans kills the browsers of workers that died without closing them (a
// SIGKILL leaves its helpers to the parent-death signal, which a wrapper script can
// defeat) and removes their profiles. It returns how many processes it killed.
func SweepOrphans() int {
	killed := 0
	for _, p := range Processes() {
		if p.Owner == os.Getpid() || alive(p.Owner) {
			continue
		}
		_ = syscall.Kill(-p.PGID, syscall.SIGKILL)
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
		killed++
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), profilePrefix+"*"))
	for _, d := range dirs {
		owner, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), profilePrefix), "-")
		if pid, err := strconv.Atoi(owner); err == nil && pid != os.Getpid() && !alive(pid) {
			_ = os.RemoveAll(d)
		}
	}
	return killed
}
