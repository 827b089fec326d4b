// Package fleet runs real relayd processes for tests and benchmarks: one
// replica or several sharing one Valkey, each its own process on loopback
// ports, with readiness waits, SIGTERM, kill -9 and restarts on the same
// addresses. It also writes a self-consistent fixture and key file for any
// number of devices.
//
// It is the one package that runs relayd processes, for tests (StartForTest,
// TestBinary, HoldEnqueue tie them to a test's lifetime) and for the
// benchmark command (Start, Build) alike; the process plumbing it shares with
// internal/valkeytest lives in internal/child.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Store kinds, as relayd's --store flag names them.
const (
	StoreMemory = "memory"
	StoreValkey = "valkey"
)

// DefaultLogLimit is how many bytes of output each replica keeps unless
// Options.LogLimit says otherwise: enough for the tail of a long run.
const DefaultLogLimit = 4 << 20

// Valkey says which Valkey the replicas share.
type Valkey struct {
	// Addrs are host:port addresses: the server, or cluster seed nodes.
	Addrs []string
	// Cluster says Addrs are Valkey Cluster seeds.
	Cluster bool
	// Prefix is the key prefix (with a hash tag); "" means relayd's default.
	Prefix string
	// Buckets, when positive, starts the replicas on the sharded layout
	// with that many buckets (--valkey-layout sharded); 0 keeps one slot.
	Buckets int
}

// Options describe a fleet of replicas.
type Options struct {
	// Binary is the relayd executable (see Build).
	Binary string
	// Replicas is how many relayd processes to run; 0 means 1.
	Replicas int
	// Fixture is the fixture path every replica loads; SiteID the site
	// they route for.
	Fixture string
	SiteID  string
	// Store is StoreMemory or StoreValkey; "" means StoreValkey when
	// Valkey.Addrs is set, else StoreMemory. The memory store cannot be
	// shared, so it allows one replica only.
	Store  string
	Valkey Valkey
	// LeaseMs, SweepInterval and ShutdownTimeout set the flags of the same
	// name when non-zero.
	LeaseMs         int64
	SweepInterval   time.Duration
	ShutdownTimeout time.Duration
	// LogLevel sets --log-level when non-empty. Below info the serving
	// line that reports the bound addresses is not printed, so info or
	// debug is required.
	LogLevel string
	// Args are extra flags for every replica.
	Args []string
	// ReplicaArgs, when set, returns extra flags for replica i (for example
	// a per-replica clock offset).
	ReplicaArgs func(i int) []string
	// Env is extra environment for every replica, KEY=VALUE.
	Env []string
	// LogLimit caps the output each replica keeps; 0 means DefaultLogLimit
	// and a negative value keeps everything.
	LogLimit int
}

// Fleet is a set of running replicas. Its methods are safe for concurrent
// use.
type Fleet struct {
	replicas []*Replica
}

// Start launches every replica and waits until each answers /readyz with
// 200. On failure everything started so far is killed.
func Start(ctx context.Context, o Options) (*Fleet, error) {
	if o.Binary == "" {
		return nil, errors.New("fleet: no relayd binary")
	}
	if o.Fixture == "" || o.SiteID == "" {
		return nil, errors.New("fleet: a fixture and a site id are required")
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Store == "" {
		o.Store = StoreMemory
		if len(o.Valkey.Addrs) > 0 {
			o.Store = StoreValkey
		}
	}
	switch o.Store {
	case StoreMemory:
		if o.Replicas > 1 {
			return nil, fmt.Errorf("fleet: the memory store is private to one process; %d replicas need the valkey store", o.Replicas)
		}
	case StoreValkey:
		if len(o.Valkey.Addrs) == 0 {
			return nil, errors.New("fleet: the valkey store needs Valkey.Addrs")
		}
	default:
		return nil, fmt.Errorf("fleet: unknown store %q", o.Store)
	}
	switch {
	case o.LogLimit == 0:
		o.LogLimit = DefaultLogLimit
	case o.LogLimit < 0:
		o.LogLimit = 0
	}

	f := &Fleet{}
	for i := range o.Replicas {
		f.replicas = append(f.replicas, &Replica{
			Index: i, binary: o.Binary, env: o.Env, logLimit: o.LogLimit,
			args: replicaArgs(o, i), public: "127.0.0.1:0", admin: "127.0.0.1:0",
		})
	}
	// Start them side by side: each spends most of its start-up waiting.
	errs := make([]error, len(f.replicas))
	var wg sync.WaitGroup
	for i, r := range f.replicas {
		wg.Go(func() { errs[i] = r.start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.Close()
		return nil, fmt.Errorf("fleet: %w", err)
	}
	return f, nil
}

// replicaArgs builds replica i's flags, listeners excluded.
func replicaArgs(o Options, i int) []string {
	args := []string{"--fixture", o.Fixture, "--site-id", o.SiteID, "--store", o.Store}
	if o.Store == StoreValkey {
		args = append(args, "--valkey-addr", strings.Join(o.Valkey.Addrs, ","))
		if o.Valkey.Cluster {
			args = append(args, "--valkey-cluster")
		}
		if o.Valkey.Prefix != "" {
			args = append(args, "--valkey-prefix", o.Valkey.Prefix)
		}
		if o.Valkey.Buckets > 0 {
			args = append(args, "--valkey-layout", "sharded", "--valkey-buckets", strconv.Itoa(o.Valkey.Buckets))
		}
	}
	if o.LeaseMs > 0 {
		args = append(args, "--lease-ms", strconv.FormatInt(o.LeaseMs, 10))
	}
	if o.SweepInterval > 0 {
		args = append(args, "--sweep-interval", o.SweepInterval.String())
	}
	if o.ShutdownTimeout > 0 {
		args = append(args, "--shutdown-timeout", o.ShutdownTimeout.String())
	}
	if o.LogLevel != "" {
		args = append(args, "--log-level", o.LogLevel)
	}
	args = append(args, o.Args...)
	if o.ReplicaArgs != nil {
		args = append(args, o.ReplicaArgs(i)...)
	}
	return args
}

// Replicas returns every replica, in index order.
func (f *Fleet) Replicas() []*Replica { return append([]*Replica(nil), f.replicas...) }

// Replica returns replica i.
func (f *Fleet) Replica(i int) *Replica { return f.replicas[i] }

// Len is the number of replicas.
func (f *Fleet) Len() int { return len(f.replicas) }

// PublicURLs lists every replica's public base URL, in index order. The
// addresses stay the same across restarts, so clients can keep the list as
// a load balancer keeps its backends.
func (f *Fleet) PublicURLs() []string {
	out := make([]string, len(f.replicas))
	for i, r := range f.replicas {
		out[i] = r.PublicURL()
	}
	return out
}

// AdminURLs lists every replica's admin base URL, in index order.
func (f *Fleet) AdminURLs() []string {
	out := make([]string, len(f.replicas))
	for i, r := range f.replicas {
		out[i] = r.AdminURL()
	}
	return out
}

// WaitReady waits until every running replica answers /readyz with 200.
func (f *Fleet) WaitReady(ctx context.Context) error {
	var errs []error
	for _, r := range f.replicas {
		if r.Running() {
			errs = append(errs, r.WaitReady(ctx))
		}
	}
	return errors.Join(errs...)
}

// Close kills every replica still running.
func (f *Fleet) Close() {
	for _, r := range f.replicas {
		_ = r.Kill()
	}
}

// Logs returns every replica's output, each under a header naming it.
func (f *Fleet) Logs() string {
	var b strings.Builder
	for _, r := range f.replicas {
		fmt.Fprintf(&b, "===== replica %d (%s) =====\n%s\n", r.Index, r.PublicURL(), r.Logs())
	}
	return b.String()
}

// Replica is one relayd of a fleet. It keeps its listen addresses across
// restarts.
type Replica struct {
	// Index is the replica's position in the fleet.
	Index int

	binary   string
	env      []string
	logLimit int
	args     []string

	mu      sync.Mutex
	public  string // host:port to listen on; port 0 until first bound
	admin   string
	proc    *Process
	earlier []string // logs of earlier incarnations
}

func (r *Replica) start(ctx context.Context) error {
	r.mu.Lock()
	if r.proc != nil {
		if exited, _ := r.proc.Exited(); !exited {
			r.mu.Unlock()
			return fmt.Errorf("replica %d is already running", r.Index)
		}
		r.earlier = append(r.earlier, r.proc.Logs())
	}
	args := append([]string{"--listen", r.public, "--admin-listen", r.admin}, r.args...)
	r.mu.Unlock()

	p, err := StartProcess(ctx, ProcessOptions{Binary: r.binary, Args: args, Env: r.env, LogLimit: r.logLimit})
	if err != nil {
		return fmt.Errorf("replica %d: %w", r.Index, err)
	}
	r.mu.Lock()
	r.proc = p
	// Pin the ports the first start picked, so a restart comes back where
	// clients (and a load balancer) expect it.
	r.public, r.admin = hostPort(p.Public), hostPort(p.Admin)
	r.mu.Unlock()
	if err := p.WaitReady(ctx); err != nil {
		_ = p.Kill()
		return fmt.Errorf("replica %d: %w", r.Index, err)
	}
	return nil
}

func hostPort(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	return u.Host
}

// Process returns the current incarnation's process.
func (r *Replica) Process() *Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// PublicURL is the replica's public base URL ("http://127.0.0.1:port").
func (r *Replica) PublicURL() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return "http://" + r.public
}

// AdminURL is the replica's admin base URL.
func (r *Replica) AdminURL() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return "http://" + r.admin
}

// Args returns the flags the replica runs with, listeners excluded.
func (r *Replica) Args() []string { return append([]string(nil), r.args...) }

// Running reports whether the current incarnation is still running.
func (r *Replica) Running() bool {
	p := r.Process()
	if p == nil {
		return false
	}
	exited, _ := p.Exited()
	return !exited
}

// Readiness asks /readyz once.
func (r *Replica) Readiness(ctx context.Context) (int, string, error) {
	return readiness(ctx, r.AdminURL())
}

// WaitReady polls /readyz until it answers 200.
func (r *Replica) WaitReady(ctx context.Context) error {
	p := r.Process()
	if p == nil {
		return fmt.Errorf("replica %d was never started", r.Index)
	}
	if err := p.WaitReady(ctx); err != nil {
		return fmt.Errorf("replica %d: %w", r.Index, err)
	}
	return nil
}

// Stop sends SIGTERM and waits for the replica to drain and exit. It
// returns the exit error: nil for a clean drain.
func (r *Replica) Stop(ctx context.Context) error {
	p := r.Process()
	if p == nil {
		return nil
	}
	if exited, err := p.Exited(); exited {
		return err
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("replica %d: %w", r.Index, err)
	}
	if err := p.Wait(ctx); err != nil {
		return fmt.Errorf("replica %d: %w", r.Index, err)
	}
	return nil
}

// Kill stops the replica at once, as kill -9 would.
func (r *Replica) Kill() error {
	p := r.Process()
	if p == nil {
		return nil
	}
	if err := p.Kill(); err != nil {
		return fmt.Errorf("replica %d: %w", r.Index, err)
	}
	return nil
}

// Restart starts the replica again on the same addresses and waits until it
// is ready. A replica still running is stopped with SIGTERM first.
func (r *Replica) Restart(ctx context.Context) error {
	if r.Running() {
		if err := r.Stop(ctx); err != nil {
			return err
		}
	}
	return r.start(ctx)
}

// Logs returns the output of every incarnation so far, oldest first.
func (r *Replica) Logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	parts := append([]string(nil), r.earlier...)
	if r.proc != nil {
		parts = append(parts, r.proc.Logs())
	}
	return strings.Join(parts, "----- restarted -----\n")
}
