package devstack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// dirLock is an exclusive, advisory lock on <DataDir>/temporal.lock held for
// the lifetime of a stack. The operating system drops it when the holder
// exits, even on a crash, so a stale file never blocks a new start.
type dirLock struct {
	f *os.File
}

// errLockHeld is returned by tryLock when another holder has the lock.
var errLockHeld = errors.New("lock held by another process")

// lockDataDir takes the data directory lock, or explains who holds it and
// what to do.
func lockDataDir(dataDir, dbPath string) (*dirLock, error) {
	path := filepath.Join(dataDir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devstack: cannot create lock file %s: %w; fix the permissions of %s or pass another --data directory", path, err, dataDir)
	}
	if err := tryLock(f); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = fmt.Sprintf(" (pid %d)", pid)
			}
		}
		_ = f.Close()
		if errors.Is(err, errLockHeld) {
			return nil, fmt.Errorf("devstack: %s is locked by another running stack%s: stop that `trawler dev`/`trawler demo` first, or pass a different --data directory (lock file %s)", dbPath, holder, path)
		}
		return nil, fmt.Errorf("devstack: locking %s: %w", path, err)
	}
	// Record the holder for the error message above; best effort.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := unlock(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}
