//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package devstack

import (
	"errors"
	"os"
	"syscall"
)

// flock locks belong to the open file description, so two stacks in the same
// process exclude each other just like two processes do.
func tryLock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errLockHeld
		default:
			return err
		}
	}
}

func unlock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
