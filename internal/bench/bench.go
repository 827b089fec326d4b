// Package bench measures relayd end to end: full-lifecycle throughput and
// per-endpoint latency through real replicas, claim latency against store
// depth for both stores, and the limit one Valkey sets (EVALSHA of a
// trivial script) measured on the same server in the same run.
package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/workload"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// Lifecycle describes one throughput run.
type Lifecycle struct {
	// Binary is the relayd executable.
	Binary string
	// Store is "memory", "valkey", or StoreReference (the published relay
	// under Node, one process); Replicas how many relayd processes.
	Store    string
	Replicas int
	// ValkeyAddr is the Valkey server for the valkey store.
	ValkeyAddr string
	// Jobs, Daemons and SiteConcurrency shape the load.
	Jobs, Daemons, SiteConcurrency int
	// Protocol is the peers' wire protocol: workload.ProtocolV0 (""),
	// ProtocolV2 or ProtocolMixed. "2" and mixed publish their "2" jobs
	// from two sites under the same ids.
	Protocol string
	// GOMAXPROCS, when positive, caps each replica's Go scheduler, as a
	// container CPU limit would.
	GOMAXPROCS int
	// LoadedReplicas, when positive, sends the load to only the first that
	// many replicas; the others run, idle. It tells what spreading each
	// peer's requests over the replicas costs from what the processes
	// themselves do.
	LoadedReplicas int
	// Prefill queues this many jobs for an owner nobody serves before the
	// run, so they only add size.
	Prefill int
	// CPUProfile, when set, receives a CPU profile of the first replica
	// taken during the run (ProfileSeconds long).
	CPUProfile     string
	ProfileSeconds int
	// Reference locates the published relay for Store "reference".
	Reference Reference
	// Logf receives progress.
	Logf func(format string, args ...any)
}

// Result is what one run measured. Figures are for this machine and this
// run only; compare them as ratios within one run.
type Result struct {
	Scenario      string                      `json:"scenario"`
	Round         int                         `json:"round,omitempty"`
	Protocol      string                      `json:"protocol"`
	Store         string                      `json:"store"`
	Replicas      int                         `json:"replicas"`
	Reference     string                      `json:"reference,omitempty"`
	Loaded        int                         `json:"loadedReplicas,omitempty"`
	GOMAXPROCS    int                         `json:"gomaxprocs,omitempty"`
	Daemons       int                         `json:"daemons"`
	Jobs          int                         `json:"jobs"`
	Prefill       int                         `json:"prefill"`
	Collected     int                         `json:"collected"`
	JobsPerSecond float64                     `json:"jobsPerSecond"`
	Latency       map[string]workload.Latency `json:"latency"`
	Errors        map[string]int              `json:"errors"`
	Violations    int                         `json:"violations"`
	// StoreOpsPerSecond counts the relay's store operations (from
	// /metrics, every replica) over the run's elapsed time;
	// StoreOpsPerJob splits them by operation.
	StoreOpsPerSecond float64            `json:"storeOpsPerSecond"`
	StoreOpsPerJob    map[string]float64 `json:"storeOpsPerJob"`
	// CPU is what each part of the run spent per collected job.
	CPU CPUPerJob `json:"cpuPerJob"`
	// ValkeyCommandsPerJob and ValkeyBytesPerJob come from the server's
	// INFO stats before and after the run (valkey store only).
	ValkeyCommandsPerJob float64 `json:"valkeyCommandsPerJob,omitempty"`
	ValkeyBytesPerJob    float64 `json:"valkeyBytesPerJob,omitempty"`
}

// CPUPerJob is CPU time, user and system, per collected job, in
// milliseconds. The load generator shares the machine with the relays and
// Valkey, so jobs/s measures all three; RelayAndStore is what routing
// alone costs, and Capacity what that cost allows on Cores cores if the
// load came from elsewhere.
type CPUPerJob struct {
	Relay         float64 `json:"relayMs"`
	Valkey        float64 `json:"valkeyMs,omitempty"`
	LoadGenerator float64 `json:"loadGeneratorMs"`
	RelayAndStore float64 `json:"relayAndStoreMs"`
	Cores         int     `json:"cores"`
	Capacity      float64 `json:"capacityJobsPerSecond"`
}

// RunLifecycle starts the replicas (or the reference relay), fills the
// store, drives the workload and reports.
func RunLifecycle(ctx context.Context, l Lifecycle) (Result, error) {
	logf := l.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	dir, err := os.MkdirTemp("", "relaybench-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	extra := 0
	if l.Protocol != "" && l.Protocol != workload.ProtocolV0 {
		extra = 1
	}
	fx, err := fleet.WriteFixture(dir, fleet.FixtureOptions{Devices: l.Daemons, ExtraSites: extra})
	if err != nil {
		return Result{}, err
	}
	prefix := fmt.Sprintf("bench:{%d}:", time.Now().UnixNano())
	tg, err := startTarget(ctx, l, fx, prefix)
	if err != nil {
		return Result{}, err
	}
	defer tg.close()

	if l.Prefill > 0 {
		start := time.Now()
		if err := prefill(ctx, l, fx, tg.publicURLs(), prefix); err != nil {
			return Result{}, fmt.Errorf("prefill: %w", err)
		}
		logf("prefilled %d jobs in %s", l.Prefill, time.Since(start).Round(time.Millisecond))
	}
	before, err := takeSample(ctx, l, tg)
	if err != nil {
		return Result{}, err
	}
	profiled := make(chan error, 1)
	if l.CPUProfile != "" {
		go func() { profiled <- cpuProfile(ctx, tg.adminURLs()[0], l.ProfileSeconds, l.CPUProfile) }()
	} else {
		profiled <- nil
	}
	urls := tg.publicURLs()
	if n := loaded(l); n > 0 {
		urls = urls[:n]
	}
	run, err := workload.Execute(ctx, workload.Config{
		BaseURLs: urls, Keys: fx.Pool(), Protocol: l.Protocol, ExtraSites: fx.ExtraSites, Jobs: l.Jobs, EnqueueConcurrency: l.SiteConcurrency,
		// Finished jobs stay listed in results until their deadline, so a
		// short one keeps the site's polls the size a real site's would be.
		SealWorkers: l.SiteConcurrency, JobTTL: time.Minute, Logf: logf,
	})
	if err != nil {
		return Result{}, fmt.Errorf("workload: %w", err)
	}
	loadCPU := selfCPU() - before.load
	if err := <-profiled; err != nil {
		return Result{}, err
	}
	after, err := takeSample(ctx, l, tg)
	if err != nil {
		return Result{}, err
	}
	res := lifecycleResult(l, run, before, after, loadCPU)
	res.Reference = tg.label()
	return res, nil
}

// loaded is how many replicas a run sends its load to when that is not
// all of them, else 0.
func loaded(l Lifecycle) int {
	if l.LoadedReplicas > 0 && l.LoadedReplicas < l.Replicas {
		return l.LoadedReplicas
	}
	return 0
}

// replicaOptions are the bench's replicas: rate limits off, since this
// measures the relay, not its throttle.
func replicaOptions(l Lifecycle, fx *fleet.Fixture, prefix string) fleet.Options {
	opts := fleet.Options{Binary: l.Binary, Replicas: l.Replicas, Fixture: fx.Path, SiteID: fx.SiteID, Store: l.Store,
		LogLevel: "info", LogLimit: 1 << 20, Args: []string{"--rate-limit", "0", "--site-rate-limit", "0"}}
	if l.CPUProfile != "" {
		opts.Args = append(opts.Args, "--pprof")
	}
	if l.GOMAXPROCS > 0 {
		opts.Env = append(opts.Env, fmt.Sprintf("GOMAXPROCS=%d", l.GOMAXPROCS))
	}
	if l.Store == "valkey" {
		opts.Valkey = fleet.Valkey{Addrs: []string{l.ValkeyAddr}, Prefix: prefix}
	}
	return opts
}

// sample is the counters read on each side of a measured run.
type sample struct {
	relays relayCounters
	valkey valkeyStats
	load   time.Duration // this process's CPU time
}

func takeSample(ctx context.Context, l Lifecycle, tg target) (sample, error) {
	var s sample
	var err error
	if l.Store == "valkey" {
		if s.valkey, err = readValkeyStats(ctx, l.ValkeyAddr); err != nil {
			return sample{}, err
		}
	}
	if s.relays, err = tg.counters(ctx); err != nil {
		return sample{}, err
	}
	s.load = selfCPU()
	return s, nil
}

// lifecycleResult turns a finished run and the counters around it into the
// reported numbers, per job where that makes sense.
func lifecycleResult(l Lifecycle, run *workload.Run, before, after sample, loadCPU time.Duration) Result {
	rep := run.Report()
	res := Result{
		Scenario: "lifecycle", Protocol: rep.Protocol, Store: l.Store, Replicas: l.Replicas, Loaded: loaded(l), GOMAXPROCS: l.GOMAXPROCS, Daemons: rep.Daemons, Jobs: l.Jobs, Prefill: l.Prefill,
		Collected: rep.Collected, JobsPerSecond: rep.JobsPerSecond, Latency: rep.Latency, Errors: rep.Errors,
		Violations: len(run.Check()),
	}
	if rep.Elapsed > 0 {
		res.StoreOpsPerSecond = (after.relays.ops() - before.relays.ops()) / rep.Elapsed.Seconds()
	}
	if rep.Collected == 0 {
		return res
	}
	perJob := func(v float64) float64 { return v / float64(rep.Collected) }
	res.StoreOpsPerJob = map[string]float64{}
	for name, n := range after.relays.opsByName {
		if d := n - before.relays.opsByName[name]; d > 0 {
			res.StoreOpsPerJob[name] = perJob(d)
		}
	}
	res.CPU = CPUPerJob{
		Relay:         perJob(1000 * (after.relays.cpuSeconds - before.relays.cpuSeconds)),
		LoadGenerator: perJob(float64(loadCPU.Microseconds()) / 1000),
		Cores:         runtime.NumCPU(),
	}
	if l.Store == "valkey" {
		res.ValkeyCommandsPerJob = perJob(float64(after.valkey.commands - before.valkey.commands))
		res.ValkeyBytesPerJob = perJob(float64(after.valkey.bytes() - before.valkey.bytes()))
		res.CPU.Valkey = perJob(1000 * (after.valkey.cpuSeconds - before.valkey.cpuSeconds))
	}
	res.CPU.RelayAndStore = res.CPU.Relay + res.CPU.Valkey
	if res.CPU.RelayAndStore > 0 {
		res.CPU.Capacity = float64(res.CPU.Cores) * 1000 / res.CPU.RelayAndStore
	}
	return res
}

// prefill queues jobs for an owner nobody serves: straight into Valkey
// through the store (fast, and the records are the ones enqueue writes),
// or through the relay's own enqueue for the memory store, which lives in
// the relay process.
func prefill(ctx context.Context, l Lifecycle, fx *fleet.Fixture, urls []string, prefix string) error {
	deadline := time.Now().Add(time.Hour).UnixMilli()
	stub := func(i int64) protocol.JobStub {
		return protocol.JobStub{ID: "idle-" + strconv.FormatInt(i, 10), Kind: protocol.KindGenerate, Owner: "nobody",
			Site: fx.SiteKeyID(), Audience: protocol.AudiencePublic, SizeClass: "small", DeadlineAt: deadline}
	}
	var enqueue func(ctx context.Context, s protocol.JobStub) error
	workers := 32
	if l.Store == "valkey" {
		st, err := openValkey(ctx, l.ValkeyAddr, prefix)
		if err != nil {
			return err
		}
		defer st.Close()
		workers = 128
		enqueue = func(ctx context.Context, s protocol.JobStub) error {
			_, err := st.Enqueue(ctx, store.EnqueueInput{SiteID: fx.SiteID, Stub: s})
			return err
		}
	} else {
		site, err := peer.NewSite(peer.Config{BaseURLs: urls}, fx.Keys.Site.Keys, fx.SiteID)
		if err != nil {
			return err
		}
		enqueue = func(ctx context.Context, s protocol.JobStub) error {
			_, err := site.Enqueue(ctx, s)
			return err
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(l.Prefill) {
					return
				}
				if err := enqueue(ctx, stub(i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// Depth measures claim latency through one replica with `depth` jobs
// queued for an owner nobody serves.
func Depth(ctx context.Context, l Lifecycle, depth int) (Result, error) {
	l.Replicas, l.Prefill = 1, depth
	res, err := RunLifecycle(ctx, l)
	res.Scenario = "depth"
	return res, err
}

// parseFloat reads a number from a metrics or INFO line value.
func parseFloat(s string) float64 {
	v, _ := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return v
}
