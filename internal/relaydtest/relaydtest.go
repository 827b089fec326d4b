// Package relaydtest builds the relayd binary once per test process and runs
// real relayd processes on free loopback ports, for tests that need what
// only a process shows: signals, crashes, several replicas.
package relaydtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

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
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "relayd-test-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "relayd")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/relayd")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/relayd: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build relayd: %v", buildErr)
	}
	return binary
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the relayd module")
	}
	return filepath.Dir(mod), nil
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

	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{}
	err  error
}

// Start runs relayd with opts on free loopback ports and waits until it
// serves. The process is killed at the end of the test if still running.
func Start(t testing.TB, opts Options) *Process {
	t.Helper()
	args := append([]string{"--fixture", opts.Fixture, "--site-id", opts.SiteID,
		"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, opts.Args...)
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = append(os.Environ(), opts.Env...)
	logs := &syncBuffer{}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start relayd: %v", err)
	}
	p := &Process{cmd: cmd, logs: logs, done: make(chan struct{})}
	serving := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			logs.Write(append(append([]byte{}, line...), '\n'))
			var entry struct{ Msg, Public, Admin string }
			if json.Unmarshal(line, &entry) == nil && entry.Msg == "relayd serving" {
				serving <- [2]string{entry.Public, entry.Admin}
			}
		}
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("relayd logs:\n%s", p.Logs())
		}
	})
	select {
	case addrs := <-serving:
		p.Public, p.Admin = "http://"+addrs[0], "http://"+addrs[1]
	case <-p.done:
		t.Fatalf("relayd exited before serving: %v\n%s", p.err, p.Logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("relayd did not start serving within 30s\n%s", p.Logs())
	}
	return p
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill stops the process at once, as kill -9 would.
func (p *Process) Kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Wait waits for the process to exit and returns its exit error.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("relayd still running after %s", timeout)
	}
}

// Logs returns everything the process printed so far.
func (p *Process) Logs() string { return p.logs.String() }

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
