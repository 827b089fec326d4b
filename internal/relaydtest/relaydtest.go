// Package relaydtest builds the relayd binary once per test process and runs
// real relayd processes on free loopback ports, for tests that need what
// only a process shows: signals, crashes, several replicas. The process
// handling itself lives in internal/fleet; this package ties it to a test's
// lifetime.
package relaydtest

import (
	"context"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/byollm/relayd/internal/fleet"
)

// The binary is built once per test process and shared by every test in it;
// building per test would cost seconds each.
var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// Binary returns the path of a relayd built from this checkout, building it
// on first use.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		root, err := fleet.ModuleRoot(ctx)
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "relayd-test-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary, buildErr = fleet.Build(ctx, root, dir)
	})
	if buildErr != nil {
		t.Fatalf("build relayd: %v", buildErr)
	}
	return binary
}

// Options start one relayd.
type Options struct {
	// Fixture is the fixture path; SiteID the relay's site.
	Fixture string
	SiteID  string
	// Args are extra flags.
	Args []string
	// Env is extra environment, KEY=VALUE.
	Env []string
}

// Process is one running relayd.
type Process struct {
	// Public and Admin are the listeners' base URLs.
	Public, Admin string

	proc *fleet.Process
}

// Start runs relayd with opts on free loopback ports and waits until it
// serves. The process is killed at the end of the test if still running,
// and its logs are printed if the test failed.
func Start(t testing.TB, opts Options) *Process {
	t.Helper()
	args := append([]string{"--fixture", opts.Fixture, "--site-id", opts.SiteID,
		"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, opts.Args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := fleet.StartProcess(ctx, fleet.ProcessOptions{Binary: Binary(t), Args: args, Env: opts.Env})
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		if t.Failed() {
			t.Logf("relayd logs:\n%s", p.Logs())
		}
	})
	return &Process{Public: p.Public, Admin: p.Admin, proc: p}
}

// Fleet starts a fleet with o (Binary defaults to this checkout's relayd),
// kills it at the end of the test and prints its logs if the test failed.
func Fleet(t testing.TB, o fleet.Options) *fleet.Fleet {
	t.Helper()
	if o.Binary == "" {
		o.Binary = Binary(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f, err := fleet.Start(ctx, o)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		f.Close()
		if t.Failed() {
			for _, r := range f.Replicas() {
				t.Logf("replica %d (%s), last lines of its logs:\n%s", r.Index, r.PublicURL(), lastLines(r.Logs(), 40))
			}
		}
	})
	return f
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error { return p.proc.Signal(sig) }

// Kill stops the process at once, as kill -9 would.
func (p *Process) Kill() { _ = p.proc.Kill() }

// Wait waits for the process to exit and returns its exit error.
func (p *Process) Wait(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.proc.Wait(ctx)
}

// Logs returns everything the process printed so far.
func (p *Process) Logs() string { return p.proc.Logs() }

// Underlying returns the fleet process behind p.
func (p *Process) Underlying() *fleet.Process { return p.proc }
