package replicas_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/internal/workload"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/valkey"
)

// Sizes. The defaults keep the whole package near two minutes on a 2-core
// machine under -race; docs/replicas.md says how to run larger ones.

// envInt reads a positive size from the environment, or returns def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s=%q", name, v)
	require.Positive(t, n, "%s", name)
	return n
}

func byRace(underRace, plain int) int {
	if raceEnabled {
		return underRace
	}
	return plain
}

// raceJobs is the size of the main race test: RELAYD_RACE_JOBS, 5,000 by
// default, 2,000 under -race, where the "0" run at 5,000 was the longest
// test in CI (126 s) and the larger runs are documented commands.
func raceJobs(t *testing.T) int { return envInt(t, "RELAYD_RACE_JOBS", byRace(2000, 5000)) }

// daemonCount is how many daemons each workload runs: RELAYD_RACE_DAEMONS,
// 16 by default.
func daemonCount(t *testing.T) int { return envInt(t, "RELAYD_RACE_DAEMONS", 16) }

// clusterJobs is the size of the cluster race test: RELAYD_CLUSTER_JOBS.
func clusterJobs(t *testing.T) int {
	return envInt(t, "RELAYD_CLUSTER_JOBS", byRace(1500, 5000))
}

// faultJobs is the size of each failure test's workload: RELAYD_FAULT_JOBS.
func faultJobs(t *testing.T) int { return envInt(t, "RELAYD_FAULT_JOBS", byRace(600, 2000)) }

// rig is one test's relay: Valkey, a fixture and a fleet of replicas.
type rig struct {
	t      *testing.T
	ctx    context.Context
	valkey *valkeytest.Server
	prefix string
	fx     *fleet.Fixture
	fleet  *fleet.Fleet
	// buckets is the sharded layout's, or 0 for one slot.
	buckets int
}

type rigOptions struct {
	// replicas defaults to 3.
	replicas int
	// valkey defaults to a fresh standalone server.
	valkey *valkeytest.Server
	// owners share the pool's devices; 0 means 4.
	owners int
	spares int
	// extraSites register more sites, which publish "2" jobs beside the
	// main one under the same ids; a "2" or mixed workload uses them.
	extraSites int
	// fleet supplies lease, sweep, shutdown and per-replica flags.
	fleet fleet.Options
	// buckets, when positive, runs the replicas on the sharded layout.
	buckets int
}

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	if o.replicas == 0 {
		o.replicas = 3
	}
	if o.owners == 0 {
		o.owners = 4
	}
	if o.valkey == nil {
		o.valkey = valkeytest.Start(t)
	}
	// End a little before go test's own -timeout, so a stuck run fails
	// with its report rather than a goroutine dump.
	deadline := time.Now().Add(time.Hour)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-10 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	fx, err := fleet.WriteFixture(t.TempDir(), fleet.FixtureOptions{Devices: daemonCount(t), Owners: o.owners, Spares: o.spares, ExtraSites: o.extraSites})
	require.NoError(t, err)
	r := &rig{t: t, ctx: ctx, valkey: o.valkey, prefix: valkeytest.Prefix(t), fx: fx, buckets: o.buckets}
	fo := o.fleet
	fo.Replicas, fo.Fixture, fo.SiteID = o.replicas, fx.Path, fx.SiteID
	// These tests are about routing; the per-caller and per-site rate
	// limits (which the workload obeys) would only slow them down.
	fo.Args = append([]string{"--rate-limit", "0", "--site-rate-limit", "0"}, fo.Args...)
	fo.Valkey = fleet.Valkey{Addrs: o.valkey.Addrs, Cluster: o.valkey.Cluster, Prefix: r.prefix, Buckets: o.buckets}
	r.fleet = fleet.StartForTest(t, fo)
	return r
}

// store opens the replicas' routing store directly, for reads and for
// racing them with explicit sweeps.
func (r *rig) store() store.RoutingStore {
	r.t.Helper()
	o := valkey.Options{Addrs: r.valkey.Addrs, Cluster: r.valkey.Cluster, KeyPrefix: r.prefix}
	var st store.RoutingStore
	var err error
	if r.buckets > 0 {
		st, err = valkey.NewSharded(r.ctx, o, valkey.Sharding{Buckets: r.buckets, Proto0Site: r.fx.SiteID})
	} else {
		st, err = valkey.New(r.ctx, o)
	}
	require.NoError(r.t, err)
	r.t.Cleanup(func() { _ = st.Close() })
	return st
}

// startWorkload starts a workload over every replica with the pool's
// devices; cfg supplies the job count and whatever else the test needs.
func (r *rig) startWorkload(cfg workload.Config) *workload.Run {
	r.t.Helper()
	cfg.BaseURLs = r.fleet.PublicURLs()
	cfg.Keys = r.fx.Pool()
	if cfg.Protocol != workload.ProtocolV0 && cfg.Protocol != "" && cfg.ExtraSites == nil {
		cfg.ExtraSites = r.fx.ExtraSites
	}
	if cfg.Logf == nil {
		cfg.Logf = r.t.Logf
	}
	run, err := workload.Start(r.ctx, cfg)
	require.NoError(r.t, err)
	r.t.Cleanup(run.Stop)
	return run
}

// runWorkload runs a workload to its end.
func (r *rig) runWorkload(cfg workload.Config) *workload.Run {
	r.t.Helper()
	run := r.startWorkload(cfg)
	<-run.Done()
	return run
}

// requireClean fails the test on any violation or uncollected job, and
// logs the report either way.
func requireClean(t *testing.T, run *workload.Run) workload.Report {
	t.Helper()
	<-run.Done()
	rep := run.Report()
	t.Logf("workload report:\n%s\n%s", rep, rep.JSON())
	vs := run.Check()
	require.Empty(t, vs, workload.Summary(vs, 25))
	require.Equal(t, rep.Jobs, rep.Collected, "every job's result reached the site (%s)", rep.StopReason)
	return rep
}

// atPercent is the number of results that make p percent of a run.
func atPercent(run *workload.Run, p int) int { return run.Progress().Jobs * p / 100 }

// plainClient talks to exactly one replica with no retries, so a test sees
// each answer as given.
func plainClient() *http.Client { return &http.Client{Timeout: 10 * time.Second} }

// siteAt is the site, pinned to one replica.
func (r *rig) siteAt(base string) *peer.Site {
	r.t.Helper()
	s, err := peer.NewSite(peer.Config{BaseURLs: []string{base}, HTTPClient: plainClient()}, r.fx.Keys.Site.Keys, r.fx.SiteID)
	require.NoError(r.t, err)
	return s
}

// daemonAt is a device's daemon, spreading its requests over bases, paired
// through the first of them.
func (r *rig) daemonAt(dev peer.DemoDevice, bases ...string) *peer.Daemon {
	r.t.Helper()
	d, err := peer.NewDaemon(peer.Config{BaseURLs: bases, HTTPClient: plainClient(), Kinds: []string{protocol.KindGenerate}}, dev.Keys, "")
	require.NoError(r.t, err)
	_, err = d.Pair(r.ctx, dev.Owner)
	require.NoError(r.t, err)
	return d
}

// stub is a well-formed self job of the rig's site, due in ten minutes.
func (r *rig) stub(site *peer.Site, id, owner string) protocol.JobStub {
	return site.Stub(id, protocol.KindGenerate, owner, time.Now().Add(10*time.Minute).UnixMilli())
}

// eventually polls cond every 10 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// get fetches url and returns status and body.
func get(t *testing.T, ctx context.Context, url string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := plainClient().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body
}

// readiness decodes a /readyz answer.
func readiness(t *testing.T, ctx context.Context, admin string) (int, string) {
	t.Helper()
	status, body := get(t, ctx, admin+"/readyz")
	var r struct{ Status string }
	_ = json.Unmarshal(body, &r)
	return status, r.Status
}
