package faults_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/substatehq/substate/testkit/faults"
)

// A tmpfs is a small file system of its own: filling it makes writes fail
// with ENOSPC, removing the filler frees it, and it is gone after the test.
func TestTmpfsFull(t *testing.T) {
	var dir string
	t.Cleanup(func() { // runs after Tmpfs's own cleanup
		if dir != "" && mounted(t, dir) {
			t.Errorf("%s is still mounted", dir)
		}
	})
	dir = faults.Tmpfs(t, 1<<20)
	if !mounted(t, dir) {
		t.Fatalf("%s is not a mount point", dir)
	}
	free, err := faults.FreeBytes(dir)
	if err != nil || free != 1<<20 {
		t.Fatalf("free %d, %v; want 1 MiB", free, err)
	}
	filler, err := faults.FillDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	if free, _ := faults.FreeBytes(dir); free != 0 {
		t.Fatalf("free %d after FillDisk", free)
	}
	err = os.WriteFile(filepath.Join(dir, "more"), make([]byte, 8192), 0o600)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk: %v, want ENOSPC", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "more"), make([]byte, 8192), 0o600); err != nil {
		t.Fatalf("write after freeing: %v", err)
	}
}

// mounted reports whether dir is a mount point in /proc/self/mounts.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Skip("no /proc/self/mounts")
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 2 && f[1] == dir && f[2] == "tmpfs" {
			return true
		}
	}
	return false
}
