package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/byollm/relayd/internal/child"
	"github.com/byollm/relayd/internal/fleet"
)

// StoreReference is the lifecycle target that runs the published reference
// relay under Node instead of relayd replicas.
const StoreReference = "reference"

// ReferenceVersion is the published @byollm/relay the reference target
// measures: the one protocol "2" is written against.
const ReferenceVersion = "0.1.1"

// Reference says where the reference relay comes from: the interop
// suite's control host (interop/launchers/control-host.mjs), which puts
// @byollm/relay from interop/node_modules on a loopback port.
type Reference struct {
	// Node is the node executable; "" means node on PATH.
	Node string
	// InteropDir is the checkout's interop directory; "" means the one
	// beside the current module's go.mod.
	InteropDir string
}

// referenceRelay is one running control host.
type referenceRelay struct {
	proc  *child.Process
	stdin io.WriteCloser
	url   string
	// label names what runs, as the result reports it.
	label  string
	stderr *tailBuffer
}

// referenceFiles resolves the node executable, the host script and the
// installed relay's version, or says what is missing and how to get it.
func referenceFiles(ctx context.Context, ref Reference) (node, host, version string, err error) {
	node = ref.Node
	if node == "" {
		node = "node"
	}
	if node, err = exec.LookPath(node); err != nil {
		return "", "", "", fmt.Errorf("reference target: no node executable (%w): install Node or pass --node", err)
	}
	dir := ref.InteropDir
	if dir == "" {
		root, err := fleet.ModuleRoot(ctx)
		if err != nil {
			return "", "", "", fmt.Errorf("reference target: %w", err)
		}
		dir = filepath.Join(root, "interop")
	}
	host = filepath.Join(dir, "launchers", "control-host.mjs")
	if _, err := os.Stat(host); err != nil {
		return "", "", "", fmt.Errorf("reference target: control host: %w", err)
	}
	manifest := filepath.Join(dir, "node_modules", "@byollm", "relay", "package.json")
	data, err := os.ReadFile(manifest)
	if err != nil {
		return "", "", "", fmt.Errorf("reference target: @byollm/relay is not installed (%w): run `cd interop && npm ci --no-audit --no-fund`", err)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &pkg); err != nil {
		return "", "", "", fmt.Errorf("reference target: %s: %w", manifest, err)
	}
	if pkg.Version != ReferenceVersion {
		return "", "", "", fmt.Errorf("reference target: interop/node_modules has @byollm/relay %s, want %s: run `cd interop && npm ci --no-audit --no-fund`",
			pkg.Version, ReferenceVersion)
	}
	return node, host, pkg.Version, nil
}

// startReference runs the control host on fixturePath, relayd's own
// fixture file: the reference reads the same document (the interop suite
// hands both relays one fixture), so nothing is translated.
func startReference(ctx context.Context, ref Reference, fixturePath string) (*referenceRelay, error) {
	node, host, version, err := referenceFiles(ctx, ref)
	if err != nil {
		return nil, err
	}
	nodeVersion, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("reference target: %s --version: %w", node, err)
	}
	// Not CommandContext: the relay outlives the start-up context.
	cmd := exec.Command(node, host, fixturePath)
	cmd.Dir = filepath.Dir(host)
	// The interop suite's trace would log every exchange: not what is measured.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "INTEROP_TRACE=") })
	r := &referenceRelay{stderr: &tailBuffer{limit: 64 << 10},
		label: fmt.Sprintf("@byollm/relay %s under node %s", version, strings.TrimSpace(string(nodeVersion)))}
	cmd.Stderr = r.stderr
	// The host exits when its stdin closes: Close does that.
	if r.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("reference target: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("reference target: %w", err)
	}
	ports := make(chan string, 1)
	if r.proc, err = child.Start(cmd, func() { readPorts(stdout, ports) }); err != nil {
		return nil, fmt.Errorf("reference target: %w", err)
	}
	return r, r.awaitListening(ctx, ports)
}

// readPorts passes on the host's first stdout line, its ports, and drains
// the rest.
func readPorts(stdout io.Reader, ports chan<- string) {
	br := bufio.NewReader(stdout)
	line, _ := br.ReadString('\n')
	ports <- line
	_, _ = io.Copy(io.Discard, br)
}

func (r *referenceRelay) awaitListening(ctx context.Context, ports <-chan string) error {
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	var line string
	select {
	case line = <-ports:
	case <-timer.C:
	case <-ctx.Done():
	}
	var p struct {
		Relay int `json:"relay"`
	}
	if err := json.Unmarshal([]byte(line), &p); err != nil || p.Relay == 0 {
		_ = r.proc.Kill()
		return fmt.Errorf("reference target: the control host did not listen (first line %q)\n%s", line, r.stderr.String())
	}
	r.url = fmt.Sprintf("http://127.0.0.1:%d", p.Relay)
	return nil
}

// cpuSeconds is the Node process's CPU time, user and system, every
// thread, read from /proc as the Go replicas' process_cpu_seconds_total is.
func (r *referenceRelay) cpuSeconds() (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.proc.PID()))
	if err != nil {
		return 0, fmt.Errorf("reference target: cpu: %w", err)
	}
	return parseProcStatCPU(string(data))
}

// Close ends the host by closing its stdin, then by SIGKILL if it lingers.
func (r *referenceRelay) Close() error {
	_ = r.stdin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.proc.Wait(ctx); errors.Is(err, context.DeadlineExceeded) {
		return r.proc.Kill()
	}
	return nil
}

// userHZ is the unit of /proc's CPU times: USER_HZ, 100 on every Linux
// architecture Go's own procfs readers support.
const userHZ = 100

// parseProcStatCPU reads utime and stime from a /proc/<pid>/stat line.
// The command name, in parentheses, may hold spaces, so fields count from
// after its closing parenthesis: state is field 3, utime 14, stime 15.
func parseProcStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no command name in %q", stat)
	}
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the name, want at least 13", len(fields))
	}
	var ticks float64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: %w", err)
		}
		ticks += float64(n)
	}
	return ticks / userHZ, nil
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		b.buf = b.buf[over:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// ReferenceRelay is a running reference relay for a test that drives it
// directly, such as a differential test against relayd: the same control
// host the reference target runs, on one loopback port.
type ReferenceRelay struct{ r *referenceRelay }

// StartReference runs the reference relay on fixturePath, a relayd fixture
// file, and returns once it listens.
func StartReference(ctx context.Context, ref Reference, fixturePath string) (*ReferenceRelay, error) {
	r, err := startReference(ctx, ref, fixturePath)
	if err != nil {
		return nil, err
	}
	return &ReferenceRelay{r: r}, nil
}

// URL is the relay's origin, for both planes.
func (r *ReferenceRelay) URL() string { return r.r.url }

// Label names the published relay and the node that runs it.
func (r *ReferenceRelay) Label() string { return r.r.label }

// Stderr is the tail of what the host wrote to stderr, for a failure report.
func (r *ReferenceRelay) Stderr() string { return r.r.stderr.String() }

// Close stops the relay.
func (r *ReferenceRelay) Close() error { return r.r.Close() }
