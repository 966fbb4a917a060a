package faults

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Tmpfs mounts a tmpfs of size bytes on a new temporary directory and
// returns the directory; it is unmounted when the test ends (after the
// cleanups the test registers later, such as stopping a server that
// writes there). Mounting takes root on Linux: elsewhere, or without the
// privilege, the test is skipped with the reason, unless SUBSTATE_CI=1 is
// set, where CI runs as root and a full-disk test must not be skipped.
func Tmpfs(tb testing.TB, size int64) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := mountTmpfs(dir, size); err != nil {
		why := fmt.Sprintf("full-disk test needs a tmpfs: %v", err)
		if os.Getenv("SUBSTATE_CI") == "1" {
			tb.Fatal(why)
		}
		tb.Skip(why + " (run as root on Linux to include it)")
	}
	tb.Cleanup(func() {
		if err := unmount(dir); err != nil {
			tb.Errorf("unmount tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

// FillDisk writes a file in dir until the file system is full and returns
// its path: removing it frees the space again. Any error other than the
// file system being full is returned.
func FillDisk(dir string) (string, error) {
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path, nil
			}
			return "", fmt.Errorf("fill %s: %w", dir, err)
		}
	}
}
