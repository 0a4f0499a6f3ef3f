//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package devstack

import "os"

// On platforms without flock the data directory is not protected against a
// second stack; SQLite's own locking still keeps the database consistent.
func tryLock(*os.File) error { return nil }

func unlock(*os.File) error { return nil }
