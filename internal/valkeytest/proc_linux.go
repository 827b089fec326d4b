package valkeytest

import (
	"os/exec"
	"syscall"
)

// bindLifetime makes the kernel kill the server if the test process dies
// without running its cleanups (a panic, a timeout kill), so no server
// outlives its test.
func bindLifetime(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
