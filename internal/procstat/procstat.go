// Package procstat reads a Linux process's /proc/PID/stat.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Fields are the fields of /proc/PID/stat after the command name, from the state on:
// Fields(pid)[0] is field 3 of proc(5), so field n is Fields(pid)[n-3]. The command
// name is in parentheses and may hold spaces and parentheses itself, so the fields
// are read after the last ')'.
func Fields(pid int) ([]string, error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New(path + ": no command name")
	}
	return strings.Fields(string(b[i+1:])), nil
}
