package child

import (
	"os/exec"
	"syscall"
)

// dieWithParent asks Linux to kill the child if the process that started
// it dies first (a test binary killed by go test's -timeout, say), so no
// child outlives its harness. Linux ties this to the starting thread, which
// Start keeps locked until the child has exited.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
