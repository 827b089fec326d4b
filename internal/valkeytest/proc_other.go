//go:build !linux

package valkeytest

import "os/exec"

// bindLifetime does nothing where the kernel cannot tie a child's life to
// its parent; cleanups stop the server.
func bindLifetime(*exec.Cmd) {}
