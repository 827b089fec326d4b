package fleet

import (
	"os/exec"
	"syscall"
)

// dieWithParent asks Linux to kill the relayd if the process that started
// it dies first (a test binary killed by go test's -timeout, say), so no
// replica outlives its harness. Linux ties this to the starting thread;
// Go rarely retires threads, and Kill at cleanup covers the normal case.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
