// Package child runs the helper processes that tests and benchmarks start
// (relayd replicas, Valkey servers): each is tied to the life of the process
// that started it and waited for exactly once, so none outlives its harness
// and none is left a zombie.
package child

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// Process is one started child.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // exit status, valid once done is closed
}

// Start starts cmd and waits for it in the background. beforeWait, when not
// nil, runs after the start and before the wait: that is where a caller
// drains the child's stdout pipe, as os/exec requires.
func Start(cmd *exec.Cmd, beforeWait func()) (*Process, error) {
	dieWithParent(cmd)
	p := &Process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Linux sends the parent-death signal when the thread that started
		// the child exits, not the process; keep that thread until the
		// child is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		if beforeWait != nil {
			beforeWait()
		}
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return p, nil
}

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %d: %w", p.PID(), err)
	}
	return nil
}

// Kill stops the process at once, as kill -9 would, and waits until it has
// exited. Killing an exited process does nothing.
func (p *Process) Kill() error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %d: %w", p.PID(), err)
	}
	<-p.done
	return nil
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and its exit error.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Wait waits for the process to exit and returns its exit error, or the
// context's error if it ends first.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return fmt.Errorf("%d still running: %w", p.PID(), ctx.Err())
	}
}

// LastLines returns the last n lines of a process's output.
func LastLines(output string, n int) []string {
	lines := strings.Split(strings.TrimRight(output, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
