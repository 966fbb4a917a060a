package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes a child process get SIGKILL when the test binary
// dies, so a test killed by its timeout leaves no server behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
