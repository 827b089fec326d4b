package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/byollm/relayd/internal/child"
)

// ServingMessage is the log message relayd prints once both listeners are
// bound; its "public" and "admin" attributes are the bound addresses.
const ServingMessage = "relayd serving"

// DefaultStartTimeout bounds how long StartProcess waits for the serving
// line when the context has no deadline of its own.
const DefaultStartTimeout = 30 * time.Second

// ModuleRoot returns the root directory of the Go module the current
// directory belongs to (the relayd checkout when run from its tests).
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a Go module: run from the relayd checkout")
	}
	return filepath.Dir(mod), nil
}

// Build compiles ./cmd/relayd of the module at moduleRoot into outDir and
// returns the binary's path.
func Build(ctx context.Context, moduleRoot, outDir string) (string, error) {
	binary := filepath.Join(outDir, "relayd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", binary, "./cmd/relayd")
	cmd.Dir = moduleRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/relayd: %w\n%s", err, out)
	}
	return binary, nil
}

// BuildCheckout compiles the relayd of the checkout the current directory
// belongs to into outDir and returns the binary's path.
func BuildCheckout(ctx context.Context, outDir string) (string, error) {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return "", err
	}
	return Build(ctx, root, outDir)
}

// ProcessOptions start one relayd process.
type ProcessOptions struct {
	// Binary is the relayd executable.
	Binary string
	// Args are all of relayd's flags. Give --listen and --admin-listen
	// (port 0 picks a free port; the bound addresses come from the log).
	Args []string
	// Env is extra environment, KEY=VALUE, added to this process's own.
	Env []string
	// LogLimit caps how many bytes of output are kept, oldest dropped
	// first; 0 keeps everything. A replica under load logs a line per
	// request, so long runs want a cap.
	LogLimit int
}

// Process is one running (or exited) relayd.
type Process struct {
	// Public and Admin are the listeners' base URLs ("http://host:port").
	Public, Admin string

	*child.Process
	logs *logBuffer
}

// StartProcess runs relayd and waits until it logs that it serves, the
// process exits, or ctx ends (DefaultStartTimeout when ctx has no deadline).
// On failure the process is killed and the error carries its output.
func StartProcess(ctx context.Context, o ProcessOptions) (*Process, error) {
	if o.Binary == "" {
		return nil, errors.New("start relayd: no binary")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}
	// Not CommandContext: the process must outlive the start-up context.
	cmd := exec.Command(o.Binary, o.Args...)
	cmd.Env = append(os.Environ(), o.Env...)
	p := &Process{logs: &logBuffer{limit: o.LogLimit}}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start relayd: stdout pipe: %w", err)
	}
	cmd.Stderr = p.logs
	serving := make(chan [2]string, 1)
	p.Process, err = child.Start(cmd, func() { p.copyLogs(stdout, serving) })
	if err != nil {
		return nil, fmt.Errorf("start relayd: %w", err)
	}

	select {
	case addrs := <-serving:
		p.Public, p.Admin = "http://"+addrs[0], "http://"+addrs[1]
		return p, nil
	case <-p.Done():
		_, exitErr := p.Exited()
		return nil, fmt.Errorf("relayd exited before serving: %v\n%s", exitErr, p.Logs())
	case <-ctx.Done():
		_ = p.Kill()
		return nil, fmt.Errorf("relayd did not start serving: %w\n%s", ctx.Err(), p.Logs())
	}
}

// copyLogs keeps every line of stdout and reports the listeners' addresses
// from the serving line.
func (p *Process) copyLogs(stdout io.Reader, serving chan<- [2]string) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	found := false
	for sc.Scan() {
		line := sc.Bytes()
		p.logs.writeLine(line)
		if found || !bytes.Contains(line, []byte(ServingMessage)) {
			continue
		}
		var entry struct{ Msg, Public, Admin string }
		if json.Unmarshal(line, &entry) == nil && entry.Msg == ServingMessage {
			found = true
			serving <- [2]string{entry.Public, entry.Admin}
		}
	}
	// A line longer than the scanner's buffer stops the scan; keep the pipe
	// drained so the process never blocks writing its logs.
	_, _ = io.Copy(p.logs, stdout)
}

// Logs returns the output kept so far (the tail, when LogLimit is set).
func (p *Process) Logs() string { return p.logs.String() }

// Readiness asks the admin listener's /readyz once and returns the status
// and body.
func (p *Process) Readiness(ctx context.Context) (int, string, error) {
	return readiness(ctx, p.Admin)
}

// WaitReady polls /readyz until it answers 200, the process exits, or ctx
// ends.
func (p *Process) WaitReady(ctx context.Context) error {
	var last string
	for {
		status, body, err := p.Readiness(ctx)
		if err == nil && status == http.StatusOK {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d %s", status, body)
		}
		select {
		case <-p.Done():
			_, exitErr := p.Exited()
			return fmt.Errorf("relayd exited before it was ready: %v\n%s", exitErr, p.Logs())
		case <-ctx.Done():
			return fmt.Errorf("relayd at %s not ready (last answer: %s): %w", p.Admin, last, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// readiness asks admin's /readyz once. The short timeout makes a hung
// replica read as not ready rather than block the caller.
func readiness(ctx context.Context, admin string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/readyz", nil)
	if err != nil {
		return 0, "", fmt.Errorf("readyz: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("readyz: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, "", fmt.Errorf("readyz: read body: %w", err)
	}
	return resp.StatusCode, string(body), nil
}

// logBuffer keeps a process's output, or its tail when limit is set.
type logBuffer struct {
	mu      sync.Mutex
	limit   int
	buf     []byte
	dropped int
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	b.trim()
	return len(p), nil
}

func (b *logBuffer) writeLine(line []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(append(b.buf, line...), '\n')
	b.trim()
}

// trim drops the oldest output beyond the limit; b.mu is held.
func (b *logBuffer) trim() {
	if b.limit > 0 && len(b.buf) > b.limit {
		// Drop whole lines from the front, down to three quarters of the
		// limit, so trimming is not done on every write.
		cut := len(b.buf) - b.limit*3/4
		if i := bytes.IndexByte(b.buf[cut:], '\n'); i >= 0 {
			cut += i + 1
		}
		b.dropped += cut
		b.buf = append(b.buf[:0], b.buf[cut:]...)
	}
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped > 0 {
		return fmt.Sprintf("[%d earlier bytes dropped]\n%s", b.dropped, b.buf)
	}
	return string(b.buf)
}
