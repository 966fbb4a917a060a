package bench

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes a child process get SIGKILL when its parent dies, so
// a bench or a test that is killed leaves no worker or server behind.
func DieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
