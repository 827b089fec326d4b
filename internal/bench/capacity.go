package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/backend"
)

// LayoutOneSlot is the Valkey store's default key layout: every key under
// the store's one hash tag, so a cluster keeps all of them on one primary
// (docs/architecture.md). It is the only layout the store has today.
const LayoutOneSlot = "one-slot"

// LayoutBucketsBound is not a layout the store has: it is the bound a
// site-sharded layout (docs/sharding.md) can reach. Each of a fixed set of
// buckets is a whole one-slot store under its own hash tag, each site's
// jobs live in one bucket, and each worker's runner serves one site, so no
// call ever needs two buckets. A real sharded layout adds the calls that
// cross them (a claim over several buckets, the runner's own tag), so it
// can only do worse than this.
const LayoutBucketsBound = "buckets-bound"

// LayoutSharded is the store's site-sharded layout (docs/sharding.md,
// --valkey-layout sharded): buckets of sites, runner groups and a global
// tag on one cluster client, a claim over the buckets of its routes.
const LayoutSharded = "sharded"

// CapacityOptions configures one run of the capacity scenario.
type CapacityOptions struct {
	// Primaries is the size of the loopback cluster the run starts.
	Primaries int
	// Workers call the store at once, each routing its own owner's jobs
	// through one of Sites sites, round robin.
	Workers, Sites int
	// Duration is how long the workers run.
	Duration time.Duration
	// Layout is LayoutOneSlot (when empty), LayoutBucketsBound or
	// LayoutSharded; Buckets is the bucket count of the last two.
	Layout  string
	Buckets int
	// Protocol is the mix's protocol, 0 or 2 (saturateWorkerOf).
	// LayoutSharded runs "2" only: its protocol-"0" state is one bucket.
	Protocol int
}

// Capacity is what one layout on a number of primaries costs per job: the
// store driven directly with the per-job mix of the limit scenario
// (perJobOps), spread over many sites, and every primary's CPU read from
// INFO before and after. The busiest primary is the ceiling, so its CPU
// per job is the figure the projection divides.
type Capacity struct {
	Scenario  string  `json:"scenario"`
	Layout    string  `json:"layout"`
	Buckets   int     `json:"buckets,omitempty"`
	Protocol  string  `json:"protocol"`
	Primaries int     `json:"primaries"`
	Workers   int     `json:"workers"`
	Sites     int     `json:"sites"`
	Seconds   float64 `json:"seconds"`
	Jobs      int64   `json:"jobs"`
	// JobsPerSec is what this run achieved, load generator and servers
	// sharing the machine.
	JobsPerSec float64 `json:"jobsPerSec"`
	// ServerCPUUsPerJob is the busiest primary's CPU per job, in µs.
	ServerCPUUsPerJob float64 `json:"serverCpuUsPerJob"`
	// PrimaryCPUUsPerJob is each primary's, in the cluster's order.
	PrimaryCPUUsPerJob []float64 `json:"primaryCpuUsPerJob"`
	// ProjectedJobsPerSec is 1e6 / ServerCPUUsPerJob: the jobs per second
	// at which the busiest primary would spend one full core.
	ProjectedJobsPerSec float64 `json:"projectedJobsPerSec"`
	// RatioToFirst is ProjectedJobsPerSec over the first run's of the
	// same scenario, set on the later runs by the caller.
	RatioToFirst float64 `json:"ratioToFirst,omitempty"`
}

// layout names the layout o runs.
func (o CapacityOptions) layout() string {
	if o.Layout == "" {
		return LayoutOneSlot
	}
	return o.Layout
}

// check refuses options no run can take.
func (o CapacityOptions) check() error {
	switch {
	case o.Workers < 1 || o.Sites < 1:
		return errors.New("capacity: at least one worker and one site are needed")
	case o.Protocol != 0 && o.Protocol != 2:
		return fmt.Errorf("capacity: protocol %d (want 0 or 2)", o.Protocol)
	case o.layout() == LayoutOneSlot:
		return nil
	case o.layout() != LayoutBucketsBound && o.layout() != LayoutSharded:
		return fmt.Errorf("capacity: unknown layout %q (want %s, %s or %s)", o.Layout, LayoutOneSlot, LayoutBucketsBound, LayoutSharded)
	case o.Buckets < 1:
		return fmt.Errorf("capacity: the %s layout needs at least one bucket, not %d", o.Layout, o.Buckets)
	case o.layout() == LayoutSharded && o.Protocol != 2:
		return errors.New("capacity: the sharded layout keeps protocol \"0\" in one bucket: run it with protocol 2")
	}
	return nil
}

// MeasureCapacity starts a loopback cluster of o.Primaries from the server
// binary on PATH, runs the per-job mix against it for o.Duration, and stops
// it.
func MeasureCapacity(ctx context.Context, o CapacityOptions) (Capacity, error) {
	if err := o.check(); err != nil {
		return Capacity{}, err
	}
	dir, err := os.MkdirTemp("", "relaybench-capacity-")
	if err != nil {
		return Capacity{}, fmt.Errorf("capacity: %w", err)
	}
	defer os.RemoveAll(dir)
	cluster, err := valkeytest.Launch(ctx, dir, o.Primaries)
	if err != nil {
		return Capacity{}, fmt.Errorf("capacity: %w", err)
	}
	defer cluster.Close()
	stores, closeStores, err := openCapacityStores(ctx, cluster.Addrs, o)
	if err != nil {
		return Capacity{}, err
	}
	defer closeStores()
	return driveCapacity(ctx, o, stores, cluster.Addrs)
}

// openCapacityStores opens the one store of LayoutOneSlot or
// LayoutSharded (which routes each site itself), or, for
// LayoutBucketsBound, one store per bucket, each under its own hash tag,
// all on one cluster client as the sharded layout has them (a client per
// bucket would batch fewer calls per write and cost the servers more).
// The closer it returns closes them all.
func openCapacityStores(ctx context.Context, addrs []string, o CapacityOptions) ([]store.RoutingStore, func(), error) {
	if o.layout() == LayoutSharded {
		b, err := backend.Open(ctx, backend.Options{Kind: backend.Valkey, Valkey: backend.ValkeyOptions{Addrs: addrs, Cluster: true,
			Prefix: "capacity:{relayd}:", Layout: backend.LayoutSharded, Buckets: o.Buckets}})
		if err != nil {
			return nil, nil, fmt.Errorf("capacity: opening the store: %w", err)
		}
		return []store.RoutingStore{b.Store}, func() { _ = b.Store.Close() }, nil
	}
	prefixes := []string{"capacity:{relayd}:"}
	if o.layout() == LayoutBucketsBound {
		prefixes = prefixes[:0]
		for i := range o.Buckets {
			prefixes = append(prefixes, "capacity:{b"+strconv.Itoa(i)+"}:")
		}
	}
	stores, closeAll, err := backend.OpenValkeySharing(ctx, backend.ValkeyOptions{Addrs: addrs, Cluster: true}, prefixes)
	if err != nil {
		return nil, nil, fmt.Errorf("capacity: opening the store: %w", err)
	}
	return stores, closeAll, nil
}

// bucketOf is the bucket of a site among n: the same site always lands in
// the same one.
func bucketOf(site string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(site))
	return int(h.Sum32() % uint32(n))
}

// driveCapacity runs the workers against stores (each worker's site in
// its bucket's store) and reads the CPU of every node in addrs around
// them.
func driveCapacity(ctx context.Context, o CapacityOptions, stores []store.RoutingStore, addrs []string) (Capacity, error) {
	before, err := nodeCPU(ctx, addrs)
	if err != nil {
		return Capacity{}, err
	}
	var jobs atomic.Int64
	elapsed, err := runFor(ctx, o.Workers, o.Duration, func(ctx context.Context, w int) error {
		site := "site-capacity-" + strconv.Itoa(w%o.Sites)
		return saturateWorkerOf(ctx, stores[bucketOf(site, len(stores))], store.Proto(o.Protocol), site, w, &jobs)
	})
	if err != nil {
		return Capacity{}, fmt.Errorf("capacity: %w", err)
	}
	after, err := nodeCPU(ctx, addrs)
	if err != nil {
		return Capacity{}, err
	}
	c := Capacity{Scenario: "capacity", Layout: o.layout(), Buckets: o.Buckets, Protocol: strconv.Itoa(o.Protocol), Primaries: o.Primaries, Workers: o.Workers, Sites: o.Sites,
		Seconds: elapsed.Seconds(), Jobs: jobs.Load()}
	if c.Jobs == 0 {
		return Capacity{}, errors.New("capacity: no job completed")
	}
	c.JobsPerSec = float64(c.Jobs) / c.Seconds
	for i := range addrs {
		us := 1e6 * (after[i] - before[i]) / float64(c.Jobs)
		c.PrimaryCPUUsPerJob = append(c.PrimaryCPUUsPerJob, us)
		c.ServerCPUUsPerJob = max(c.ServerCPUUsPerJob, us)
	}
	if c.ServerCPUUsPerJob > 0 {
		c.ProjectedJobsPerSec = 1e6 / c.ServerCPUUsPerJob
	}
	return c, nil
}

// nodeCPU reads each node's CPU seconds (user and system) from INFO.
func nodeCPU(ctx context.Context, addrs []string) ([]float64, error) {
	out := make([]float64, 0, len(addrs))
	for _, a := range addrs {
		s, err := readValkeyStats(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("capacity: %s: %w", a, err)
		}
		out = append(out, s.cpuSeconds)
	}
	return out, nil
}
