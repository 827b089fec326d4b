// Package valkeytest gives tests a real Valkey-protocol server, never an
// imitation. In order of preference it uses:
//
//  1. the server at VALKEY_ADDR (host:port), when set;
//  2. a valkey-server or redis-server binary on PATH, started on a free
//     loopback port in a temporary directory and stopped at cleanup;
//  3. a valkey/valkey container, when a Docker engine answers a ping
//     within two seconds: started through github.com/ory/dockertest/v3 with
//     its port on a free loopback port, purged at cleanup and given an
//     engine-side expiry in case the test process dies first.
//
// With none of them the test is skipped with a note on how to get one,
// unless CI or RELAYD_REQUIRE_VALKEY is set, where it fails instead.
//
// StartCluster starts a three-primary cluster from the same binary (or uses
// VALKEY_CLUSTER_ADDRS); it has no Docker route. Tests isolate themselves either with a fresh
// server or, on a shared one, with a unique key prefix from Prefix.
package valkeytest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/internal/child"
)

// Server is a running server (or cluster) for one test.
type Server struct {
	// Addr is the address to connect to; for a cluster, one of its nodes.
	Addr string
	// Addrs lists every node (one entry for a standalone server).
	Addrs []string
	// Cluster says Addrs form a Valkey Cluster.
	Cluster bool
	// Source says where the server came from: "env", "binary" or "docker".
	Source string

	procs []*process // binary-started nodes, so tests can stop and restart them
}

// Options adjusts a binary-started server.
type Options struct {
	// Persist turns on AOF persistence, written before each reply (off by
	// default: tests are faster without it).
	Persist bool
	// Binary names the server to start (a name on PATH or a path), for a
	// test that must run on one engine: the store contract runs on Redis
	// as well as Valkey. Empty means the preferred binary on PATH.
	Binary string
	// Args are more server arguments, such as "--enable-debug-command",
	// "yes" for a test that makes the server reload its data.
	Args []string
}

// Start returns a standalone server for t.
func Start(t testing.TB) *Server { return StartWith(t, Options{}) }

// StartWith is Start with options for a binary-started server.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	if addr := os.Getenv("VALKEY_ADDR"); addr != "" {
		if err := waitPing(context.Background(), addr, 5*time.Second); err != nil {
			t.Fatalf("valkeytest: VALKEY_ADDR=%s does not answer PING: %v", addr, err)
		}
		return &Server{Addr: addr, Addrs: []string{addr}, Source: "env"}
	}
	if o.Binary != "" {
		bin, err := exec.LookPath(o.Binary)
		if err != nil {
			unavailable(t, o.Binary)
			return nil
		}
		p := startProcess(t, bin, o, nil)
		return &Server{Addr: p.addr, Addrs: []string{p.addr}, Source: "binary", procs: []*process{p}}
	}
	if bin := serverBinary(); bin != "" {
		p := startProcess(t, bin, o, nil)
		return &Server{Addr: p.addr, Addrs: []string{p.addr}, Source: "binary", procs: []*process{p}}
	}
	if pool, err := dockerPool("", enginePingTimeout); err == nil {
		addr := startContainer(t, pool)
		return &Server{Addr: addr, Addrs: []string{addr}, Source: "docker"}
	}
	unavailable(t, "a Valkey-protocol server")
	return nil
}

var shared struct {
	once   sync.Once
	server *Server
	err    error
}

// Shared returns one standalone server for the whole test process, for
// suites with many parallel tests that each isolate themselves with Prefix.
// It is never stopped by a test; a binary-started one ends with the process.
func Shared(t testing.TB) *Server {
	t.Helper()
	if addr := os.Getenv("VALKEY_ADDR"); addr != "" {
		return Start(t)
	}
	shared.once.Do(func() {
		bin := serverBinary()
		if bin == "" {
			return
		}
		dir, err := os.MkdirTemp("", "valkeytest-shared-")
		if err != nil {
			shared.err = err
			return
		}
		p, err := launch(dir, bin, Options{}, nil)
		if err != nil {
			shared.err = fmt.Errorf("starting %s: %w", bin, err)
			return
		}
		shared.server = &Server{Addr: p.addr, Addrs: []string{p.addr}, Source: "binary"}
	})
	if shared.err != nil {
		t.Fatalf("valkeytest: shared server: %v", shared.err)
	}
	if shared.server == nil {
		return Start(t) // no binary: Docker, or skip (or fail in CI)
	}
	return shared.server
}

// StartCluster returns a cluster of three primaries (no replicas) for t:
// the nodes at VALKEY_CLUSTER_ADDRS (comma separated) when set, else three
// nodes started from a server binary on PATH.
func StartCluster(t testing.TB) *Server {
	t.Helper()
	if env := os.Getenv("VALKEY_CLUSTER_ADDRS"); env != "" {
		addrs := strings.Split(env, ",")
		return &Server{Addr: addrs[0], Addrs: addrs, Cluster: true, Source: "env"}
	}
	return StartClusterWith(t, ClusterOptions{})
}

// unavailable skips t, or fails it where a server is required.
func unavailable(t testing.TB, what string) {
	t.Helper()
	msg := "valkeytest: cannot find " + what + ": set VALKEY_ADDR=host:port, put valkey-server or redis-server on PATH " +
		"(Debian: apt-get install redis-server), or start a Docker engine"
	if os.Getenv("CI") != "" || os.Getenv("RELAYD_REQUIRE_VALKEY") != "" {
		t.Fatal(msg + " (required here: CI or RELAYD_REQUIRE_VALKEY is set)")
	}
	t.Skip(msg)
}

// Client returns a client connected to the server, closed at cleanup.
func (s *Server) Client(t testing.TB) valkey.Client {
	t.Helper()
	opt := valkey.ClientOption{InitAddress: s.Addrs, DisableCache: true}
	if !s.Cluster {
		opt.ForceSingleClient = true
	}
	c, err := valkey.NewClient(opt)
	if err != nil {
		t.Fatalf("valkeytest: connecting to %v: %v", s.Addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Prefix returns a key prefix unique to this test, carrying its own hash
// tag, for isolation on a shared server.
func Prefix(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := regexp.MustCompile(`[^A-Za-z0-9_]+`).ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return "test:{" + name + "-" + hex.EncodeToString(b[:]) + "}:"
}

// Flush empties every node. Use it only on a server this test owns.
func (s *Server) Flush(t testing.TB) {
	t.Helper()
	for _, a := range s.Addrs {
		if _, err := command(context.Background(), a, "FLUSHALL"); err != nil {
			t.Fatalf("valkeytest: FLUSHALL on %s: %v", a, err)
		}
	}
}

// CanRestart says whether Stop and Restart work: only for servers this
// package started from a binary.
func (s *Server) CanRestart() bool { return len(s.procs) > 0 }

// Stop stops every node (keeping its data directory), as a crash would.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if !s.CanRestart() {
		t.Skip("valkeytest: this server was not started here and cannot be stopped")
	}
	for _, p := range s.procs {
		p.stop()
	}
}

// Restart starts every stopped node again on its old port and waits until
// it answers.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if !s.CanRestart() {
		t.Skip("valkeytest: this server was not started here and cannot be restarted")
	}
	for _, p := range s.procs {
		if err := p.restart(); err != nil {
			t.Fatalf("valkeytest: restarting %s: %v", p.addr, err)
		}
	}
	if s.Cluster {
		if err := waitClusterOK(context.Background(), s.Addrs, 30*time.Second); err != nil {
			t.Fatalf("valkeytest: cluster after restart: %v", err)
		}
	}
}

// Version returns the server's version line from INFO server.
func (s *Server) Version(t testing.TB) string {
	t.Helper()
	info, err := command(context.Background(), s.Addr, "INFO", "server")
	if err != nil {
		t.Fatalf("valkeytest: INFO: %v", err)
	}
	// Valkey also reports the Redis version it is compatible with (7.2.4
	// for 8.0), on an earlier line, so its own field must win wherever it is.
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	for _, engine := range []string{"valkey", "redis"} {
		if v, ok := fields[engine+"_version"]; ok {
			return engine + " " + v
		}
	}
	return "unknown"
}

func serverBinary() string {
	for _, name := range []string{"valkey-server", "redis-server"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func cliBinary() string {
	for _, name := range []string{"valkey-cli", "redis-cli"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// process is one binary-started server node.
type process struct {
	bin  string
	args []string
	dir  string
	addr string
	proc *child.Process
}

func startProcess(t testing.TB, bin string, o Options, extra []string) *process {
	t.Helper()
	p, err := launch(t.TempDir(), bin, o, extra)
	if err != nil {
		t.Fatalf("valkeytest: starting %s: %v", bin, err)
	}
	t.Cleanup(p.stop)
	return p
}

// launch starts a node with its files under parent.
func launch(parent, bin string, o Options, extra []string) (*process, error) {
	var lastErr error
	// A port found free can be taken before the server binds it; try again.
	for range 5 {
		dir, err := os.MkdirTemp(parent, "node")
		if err != nil {
			return nil, err
		}
		port, err := freePort(len(extra) > 0)
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		p := &process{bin: bin, dir: dir, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
		p.args = []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", map[bool]string{true: "yes", false: "no"}[o.Persist],
			"--daemonize", "no", "--protected-mode", "no", "--logfile", filepath.Join(dir, "server.log"),
		}
		if o.Persist {
			// A test that persists kills the server and expects every
			// acknowledged write back. With the default everysec policy a
			// busy disk lets the server postpone its AOF write and answer
			// anyway, so a kill -9 can lose what it acknowledged.
			p.args = append(p.args, "--appendfsync", "always")
		}
		p.args = append(append(p.args, o.Args...), extra...)
		if lastErr = p.start(); lastErr == nil {
			return p, nil
		}
		p.stop()
	}
	return nil, lastErr
}

func (p *process) start() error {
	cmd := exec.Command(p.bin, p.args...)
	cmd.Dir = p.dir
	proc, err := child.Start(cmd, nil)
	if err != nil {
		return err
	}
	p.proc = proc
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		if err := waitPing(ctx, p.addr, 100*time.Millisecond); err == nil {
			return nil
		}
		select {
		case <-proc.Done():
			log, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
			return fmt.Errorf("server exited before answering: %s", lastLines(string(log), 5))
		case <-ctx.Done():
			return fmt.Errorf("server at %s did not answer PING in time", p.addr)
		default:
		}
	}
}

// restart starts a stopped node again on its port. A child the killed
// server forked (an AOF rewrite) keeps its listening socket until it sees
// its parent gone, so a refused bind is tried again for a while.
func (p *process) restart() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := p.start()
		if err == nil || !strings.Contains(err.Error(), "Address already in use") || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop terminates the node and waits for it to exit.
func (p *process) stop() {
	if p.proc != nil {
		_ = p.proc.Kill()
	}
}

// lastLines is the tail of a server's log, on one line.
func lastLines(s string, n int) string {
	return strings.Join(child.LastLines(strings.TrimSpace(s), n), " | ")
}

// freePort returns a loopback port that is free now; for a cluster node it
// also checks the bus port (port+10000).
func freePort(withBus bool) (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !withBus {
			return port, nil
		}
		if port+10000 > 65535 {
			continue
		}
		bl, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		if err != nil {
			continue
		}
		_ = bl.Close()
		return port, nil
	}
	return 0, errors.New("no free port pair")
}

// waitPing polls PING until the server answers PONG or the time is up.
func waitPing(ctx context.Context, addr string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		reply, err := command(ctx, addr, "PING")
		if err == nil && reply == "PONG" {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("PING answered %q", reply)
			}
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// command sends one command over a fresh connection and returns a simple,
// bulk or integer reply as text. It is enough for readiness and set-up and
// keeps those free of any client library's retry behaviour.
func command(ctx context.Context, addr string, args ...string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unsupported reply %q", line)
}
