package faults

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

func mountTmpfs(dir string, size int64) error {
	if os.Geteuid() != 0 {
		return errors.New("not running as root")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// unmount unmounts dir, detaching it when a file there is still open so
// that it goes once the last one closes.
func unmount(dir string) error {
	if err := syscall.Unmount(dir, 0); err == nil || !errors.Is(err, syscall.EBUSY) {
		return err
	}
	return syscall.Unmount(dir, syscall.MNT_DETACH)
}

// FreeBytes returns the bytes an unprivileged writer may still use in the
// file system of dir.
func FreeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
