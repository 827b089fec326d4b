// Command relaybench measures relayd end to end through real replicas with
// signed, sealed Go peers: full-lifecycle throughput per store and replica
// count (and, as the reference, the published @byollm/relay 0.1.1 under
// Node on the same "2" work), claim latency against store depth for both
// stores (with a PNG plot), the EVALSHA limit of the same Valkey, and the
// capacity of the store's key layout on loopback clusters of several
// primaries (the busiest primary's CPU per job). Each result is printed as
// one JSON line. See docs/performance.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/byollm/relayd/internal/bench"
	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/plot"
	"github.com/byollm/relayd/internal/workload"
)

func main() {
	var (
		relayd     = flag.String("relayd", "", "relayd binary (default: build this checkout)")
		valkeyAddr = flag.String("valkey-addr", "", "Valkey host:port for the valkey scenarios (they are skipped without it)")
		scenarios  = flag.String("scenarios", "lifecycle,limit,depth", "comma-separated: lifecycle, limit, depth, capacity (the store driven directly on loopback clusters of --primaries, started by the run)")
		primaries  = flag.String("primaries", "1,3", "cluster sizes for the capacity scenario")
		capSites   = flag.Int("capacity-sites", 64, "sites the capacity scenario's workers route through, round robin")
		capLayouts = flag.String("capacity-layouts", bench.LayoutOneSlot, "comma-separated layouts the capacity scenario runs on each cluster size: "+bench.LayoutOneSlot+", "+bench.LayoutSharded+" (--valkey-layout sharded, docs/sharding.md), "+bench.LayoutBucketsBound+" (the bound of a site-sharded layout: independent buckets)")
		capBuckets = flag.Int("capacity-buckets", 48, "buckets of the "+bench.LayoutBucketsBound+" and "+bench.LayoutSharded+" layouts")
		capProto   = flag.Int("capacity-protocol", 0, "protocol of the capacity scenario's per-job mix, 0 or 2; the "+bench.LayoutSharded+" layout always runs 2")
		jsonOnly   = flag.Bool("json", false, "print only the JSON result lines, no progress on stderr")
		storesFlag = flag.String("stores", "", `comma-separated lifecycle targets, run in this order: reference (the published @byollm/relay 0.1.1 under Node, --protocol 2 only), memory, valkey (default: memory, and valkey when --valkey-addr is set)`)
		rounds     = flag.Int("rounds", 1, "run every lifecycle target this many times, alternating, so a noisy machine weighs on all of them alike")
		node       = flag.String("node", "", "node executable for the reference target (default: node on PATH)")
		interopDir = flag.String("interop-dir", "", "the checkout's interop directory, with node_modules installed, for the reference target (default: <module root>/interop)")
		jobs       = flag.Int("jobs", 3000, "jobs per lifecycle run")
		proto      = flag.String("protocol", "0", `the peers' wire protocol: 0, 2 (the published clients'), or mixed ("0" and "2" peers at once)`)
		daemons    = flag.Int("daemons", 16, "daemons")
		siteConc   = flag.Int("site-concurrency", 16, "concurrent enqueues and seals of the site")
		prefill    = flag.Int("prefill", 0, "jobs queued for an owner nobody serves before each lifecycle run")
		replicas   = flag.String("replicas", "1,3", "replica counts for the valkey lifecycle runs")
		depths     = flag.String("depths", "1000,10000,100000,1000000", "store depths for the depth scenario")
		depthJobs  = flag.Int("depth-jobs", 400, "jobs run at each depth")
		plotPath   = flag.String("plot", "", "write the claim-latency plot (PNG) here")
		clients    = flag.Int("limit-clients", 50, "redis-benchmark clients for the limit")
		requests   = flag.Int("limit-requests", 200000, "redis-benchmark requests for the limit")
		loadProf   = flag.String("load-cpuprofile", "", "write a CPU profile of this process (the load generator) over the whole run here")
		loadedReps = flag.Int("loaded-replicas", 0, "send the lifecycle load to only the first N replicas, the others idle (0: all)")
		maxProcs   = flag.Int("replica-gomaxprocs", 0, "GOMAXPROCS of each replica (0: Go's default, every core)")
		satWorkers = flag.Int("saturate-workers", 64, "concurrent workers calling the Valkey store directly in the limit and capacity scenarios")
		satSeconds = flag.Int("saturate-seconds", 5, "how long those workers run (per cluster size in the capacity scenario)")
		cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the first replica of each lifecycle run to this path, suffixed .<store>-<replicas>")
	)
	flag.Parse()
	stores, err := parseStores(*storesFlag, *valkeyAddr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "relaybench: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err = profiled(*loadProf, func() error {
		return run(ctx, options{primaries: ints(*primaries), capacitySites: *capSites, capacityLayouts: split(*capLayouts), capacityBuckets: *capBuckets, capacityProtocol: *capProto, quiet: *jsonOnly,
			relayd: *relayd, valkeyAddr: *valkeyAddr, scenarios: split(*scenarios), stores: stores, rounds: *rounds, jobs: *jobs, daemons: *daemons, protocol: *proto,
			reference: bench.Reference{Node: *node, InteropDir: *interopDir},
			siteConc:  *siteConc, prefill: *prefill, replicas: ints(*replicas), depths: ints(*depths), depthJobs: *depthJobs,
			plotPath: *plotPath, clients: *clients, requests: *requests, cpuProfile: *cpuProfile,
			satWorkers: *satWorkers, satSeconds: *satSeconds, maxProcs: *maxProcs, loadedReplicas: *loadedReps,
		})
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "relaybench: %v\n", err)
		os.Exit(1)
	}
}

// profiled runs f, writing a CPU profile of this process to path when
// path is set.
func profiled(path string, f func() error) error {
	if path == "" {
		return f()
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := pprof.StartCPUProfile(out); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	return f()
}

type options struct {
	relayd, valkeyAddr, plotPath, cpuProfile         string
	protocol                                         string
	scenarios, stores                                []string
	rounds                                           int
	reference                                        bench.Reference
	jobs, daemons, siteConc, prefill                 int
	replicas, depths                                 []int
	depthJobs, clients, requests                     int
	satWorkers, satSeconds, maxProcs                 int
	loadedReplicas                                   int
	primaries                                        []int
	capacitySites, capacityBuckets, capacityProtocol int
	capacityLayouts                                  []string
	quiet                                            bool
}

func run(ctx context.Context, o options) error {
	logf := func(format string, args ...any) {
		if !o.quiet {
			fmt.Fprintf(os.Stderr, "# "+format+"\n", args...)
		}
	}
	if has(o.scenarios, "capacity") {
		if err := runCapacity(ctx, o, logf); err != nil {
			return err
		}
		if len(o.scenarios) == 1 {
			return nil // nothing else to run, so no relayd to build
		}
	}
	if o.relayd == "" {
		dir, err := os.MkdirTemp("", "relaybench-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if o.relayd, err = fleet.BuildCheckout(ctx, dir); err != nil {
			return err
		}
	}
	switch o.protocol {
	case workload.ProtocolV0, workload.ProtocolV2, workload.ProtocolMixed:
	default:
		return fmt.Errorf("--protocol %q: want 0, 2 or mixed", o.protocol)
	}
	base := bench.Lifecycle{Binary: o.relayd, ValkeyAddr: o.valkeyAddr, Jobs: o.jobs, Daemons: o.daemons, Protocol: o.protocol,
		SiteConcurrency: o.siteConc, Prefill: o.prefill, GOMAXPROCS: o.maxProcs, LoadedReplicas: o.loadedReplicas, Reference: o.reference, Logf: logf}
	stores := o.stores
	if o.valkeyAddr == "" {
		logf("no --valkey-addr: valkey scenarios skipped")
	}
	if has(stores, bench.StoreReference) && has(o.scenarios, "depth") {
		return errors.New("the reference target runs the lifecycle scenario only (it has no store to prefill): pass --scenarios lifecycle")
	}

	var best float64
	if has(o.scenarios, "lifecycle") {
		var err error
		if best, err = runLifecycles(ctx, o, base, stores); err != nil {
			return err
		}
	}
	if has(o.scenarios, "limit") && o.valkeyAddr != "" {
		if err := runLimit(ctx, o, best, logf); err != nil {
			return err
		}
	}
	if has(o.scenarios, "depth") {
		return runDepths(ctx, o, base, stores)
	}
	return nil
}

// runLifecycles runs the lifecycle scenario on each store and replica
// count, every round in turn, and returns the best store ops/s seen on
// Valkey.
func runLifecycles(ctx context.Context, o options, base bench.Lifecycle, stores []string) (float64, error) {
	var best float64
	for round := 1; round <= max(o.rounds, 1); round++ {
		for _, st := range stores {
			counts := []int{1}
			if st == "valkey" {
				counts = o.replicas
			}
			for _, n := range counts {
				res, err := runLifecycle(ctx, o, base, st, n)
				if err != nil {
					return 0, err
				}
				if o.rounds > 1 {
					res.Round = round
				}
				emit(res)
				if st == "valkey" && res.StoreOpsPerSecond > best {
					best = res.StoreOpsPerSecond
				}
			}
		}
	}
	return best, nil
}

// runLifecycle runs one target once.
func runLifecycle(ctx context.Context, o options, base bench.Lifecycle, st string, replicas int) (bench.Result, error) {
	l := base
	l.Store, l.Replicas = st, replicas
	if o.cpuProfile != "" && st != bench.StoreReference {
		// Each run's first replica, so that the memory relay's profile
		// can be set beside a Valkey replica's from the same session.
		l.CPUProfile, l.ProfileSeconds = fmt.Sprintf("%s.%s-%d", o.cpuProfile, st, replicas), 5
	}
	l.Logf("lifecycle: %s, %d replica(s), %d jobs", st, replicas, l.Jobs)
	return bench.RunLifecycle(ctx, l)
}

// parseStores reads --stores: known targets, each once, in the order
// given. Empty means memory, and valkey when there is a server; a valkey
// target named without one is refused rather than skipped.
func parseStores(list, valkeyAddr string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		if valkeyAddr == "" {
			return []string{"memory"}, nil
		}
		return []string{"memory", "valkey"}, nil
	}
	var out []string
	for _, st := range split(list) {
		switch {
		case st != "memory" && st != "valkey" && st != bench.StoreReference:
			return nil, fmt.Errorf("--stores: unknown target %q: want reference, memory or valkey", st)
		case has(out, st):
			return nil, fmt.Errorf("--stores: %q named twice", st)
		case st == "valkey" && valkeyAddr == "":
			return nil, errors.New("--stores names valkey but no --valkey-addr is set")
		}
		out = append(out, st)
	}
	return out, nil
}

// runLimit measures the Valkey store driven directly and the EVALSHA limit
// of the server, and sets the best lifecycle rate against them.
func runLimit(ctx context.Context, o options, best float64, logf func(string, ...any)) error {
	logf("limit: the Valkey store driven directly by %d workers for %d s, then EVALSHA of a trivial script", o.satWorkers, o.satSeconds)
	sat, err := bench.Saturate(ctx, o.valkeyAddr, o.satWorkers, time.Duration(o.satSeconds)*time.Second)
	if err != nil {
		return err
	}
	lim, err := bench.MeasureLimit(ctx, o.valkeyAddr, o.clients, o.requests)
	if err != nil {
		return err
	}
	if best > 0 {
		lim.StoreOpsPerSecond, lim.Ratio = best, best/lim.EvalshaPerSecond
	}
	emit(struct {
		Scenario string `json:"scenario"`
		bench.Limit
		Saturation bench.Saturation `json:"storeSaturation"`
		// SaturationRatio is the store's own ops/s over the EVALSHA limit;
		// SameClientRatio over trivial EVALSHA through the same client.
		SaturationRatio float64 `json:"storeSaturationRatio"`
		SameClientRatio float64 `json:"sameClientRatio"`
	}{"limit", lim, sat, sat.OpsPerSecond / lim.EvalshaPerSecond, sat.OpsPerSecond / sat.TrivialPerSecond})
	return nil
}

// runCapacity runs the capacity scenario on each layout once per cluster
// size, in the order given, and sets each later run's projection against
// the first's of the same layout.
func runCapacity(ctx context.Context, o options, logf func(string, ...any)) error {
	for _, layout := range o.capacityLayouts {
		co := bench.CapacityOptions{Workers: o.satWorkers, Sites: o.capacitySites, Layout: layout, Protocol: o.capacityProtocol,
			Duration: time.Duration(o.satSeconds) * time.Second}
		if layout != bench.LayoutOneSlot {
			co.Buckets = o.capacityBuckets
		}
		if layout == bench.LayoutSharded {
			co.Protocol = 2
		}
		var first float64
		for _, n := range o.primaries {
			co.Primaries = n
			logf("capacity: %s layout, protocol %d, %d primaries, %d workers over %d sites for %d s", layout, co.Protocol, n, o.satWorkers, o.capacitySites, o.satSeconds)
			c, err := bench.MeasureCapacity(ctx, co)
			if err != nil {
				return err
			}
			if first == 0 {
				first = c.ProjectedJobsPerSec
			} else if first > 0 {
				c.RatioToFirst = c.ProjectedJobsPerSec / first
			}
			emit(c)
		}
	}
	return nil
}

// runDepths measures claim latency against store depth on each store and
// plots it.
func runDepths(ctx context.Context, o options, base bench.Lifecycle, stores []string) error {
	chart := plot.Chart{Title: "Claim latency against store depth (p50 and p99, one replica)", XLabel: "jobs already queued",
		YLabel: "claim latency (ms)", LogX: true}
	for _, st := range stores {
		p50 := plot.Series{Name: st + " p50"}
		p99 := plot.Series{Name: st + " p99"}
		for _, d := range o.depths {
			l := base
			l.Store, l.Jobs = st, o.depthJobs
			l.Logf("depth: %s store, %d queued", st, d)
			res, err := bench.Depth(ctx, l, d)
			if err != nil {
				return err
			}
			emit(res)
			c := res.Latency["claim"]
			p50.Points = append(p50.Points, plot.Point{X: float64(d), Y: c.P50})
			p99.Points = append(p99.Points, plot.Point{X: float64(d), Y: c.P99})
		}
		chart.Series = append(chart.Series, p50, p99)
	}
	if o.plotPath == "" || len(o.depths) <= 1 {
		return nil
	}
	png, err := chart.PNG()
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.plotPath, png, 0o644); err != nil {
		return err
	}
	base.Logf("wrote %s", o.plotPath)
	return nil
}

func emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "relaybench: %v\n", err)
		return
	}
	fmt.Println(string(b))
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func ints(s string) []int {
	var out []int
	for _, p := range split(s) {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "relaybench: %q is not a positive number\n", p)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
