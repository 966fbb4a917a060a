//go:build !linux

package faults

import (
	"errors"
	"runtime"
)

func mountTmpfs(string, int64) error {
	return errors.New("tmpfs mounts are only made on Linux, not " + runtime.GOOS)
}

func unmount(string) error { return nil }

// FreeBytes is only implemented on Linux.
func FreeBytes(string) (int64, error) {
	return 0, errors.New("free space is only read on Linux")
}
