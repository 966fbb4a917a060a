//go:build unix

package httpapi

import "syscall"

// fileLimit returns the process's open-file limit.
func fileLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false
	}
	return rl.Cur, true
}
