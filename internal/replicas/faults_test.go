package replicas_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/internal/workload"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// kill -9 of a replica mid-flight: requests to it fail in transport and the
// balancer sends them to the others; a claim or result that had already run
// when the connection died is retried elsewhere. No job is lost and none
// runs twice under a live lease. The replica then comes back on the same
// address and takes work again.
func TestKill9_ClientsRetryElsewhereAndNothingIsLostOrRunTwice(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto string) { testKill9(t, proto, rigOptions{}) })
}

// testKill9 runs the kill -9 test on the rig o describes (its fleet's
// lease and sweep are the test's).
func testKill9(t *testing.T, proto string, o rigOptions) {
	// Short leases so that a grant orphaned by the crash (its claim ran,
	// its answer died with the replica) comes back quickly.
	o.fleet = fleet.Options{LeaseMs: 3000, SweepInterval: 200 * time.Millisecond}
	r := protoRig(t, proto, o)
	run := r.startWorkload(workload.Config{Protocol: proto, Jobs: sizeFor(proto, faultJobs(t), 4), ReplayFraction: 0.1, StallTimeout: 30 * time.Second})

	require.NoError(t, run.WaitCollected(r.ctx, atPercent(run, 30)))
	victim := r.fleet.Replica(1)
	require.NoError(t, victim.Kill())
	t.Logf("killed replica 1 at %+v", run.Progress())

	require.NoError(t, run.WaitCollected(r.ctx, atPercent(run, 60)))
	require.NoError(t, victim.Restart(r.ctx))
	t.Logf("replica 1 back at %+v", run.Progress())

	rep := requireClean(t, run)
	refused := 0
	for kind, n := range rep.Errors {
		if strings.Contains(kind, "try: connection refused") {
			refused += n
		}
	}
	require.Positive(t, refused, "requests reached the dead replica and were retried: %v", rep.Errors)
	require.Positive(t, rep.Retries)
	requireEveryProtocolServed(t, proto, rep)
}

// Valkey restarted with AOF on: routing state survives; while it is down
// every replica answers 503 server-error with Retry-After and fails /readyz;
// when it is back everything recovers without restarting relayd. Two
// outages: one at a quiet point, where the whole routing state is compared
// before and after, and one under load.
func TestValkeyRestart_StateSurvivesAndRelaysRecoverByThemselves(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto string) {
		testValkeyRestart(t, valkeytest.StartWith(t, valkeytest.Options{Persist: true}), proto, 0)
	})
}

// testValkeyRestart runs the restart test on a layout: one slot, or
// sharded over that many buckets.
// testValkeyRestart runs on srv, which persists every write before it
// acknowledges it (valkeytest's Persist: appendfsync always), so that
// "survives" is exact rather than "up to the last second": one server,
// or every node of a cluster, stopped and started again.
func testValkeyRestart(t *testing.T, srv *valkeytest.Server, proto string, buckets int) {
	if !srv.CanRestart() {
		t.Skip("this test stops and restarts Valkey, which it cannot do to a server it did not start (VALKEY_ADDR)")
	}

	// A 10 s lease: a claim that ran just as Valkey died, whose answer was
	// lost, leaves a grant nobody knows of; it comes back when the lease
	// lapses.
	r := protoRig(t, proto, rigOptions{valkey: srv, spares: 1, buckets: buckets, fleet: fleet.Options{LeaseMs: 10_000, SweepInterval: 200 * time.Millisecond}})
	urls := r.fleet.PublicURLs()
	st := r.store()
	pids := map[int]int{}
	for i, rep := range r.fleet.Replicas() {
		pids[i] = rep.Process().PID()
	}

	// Some state of every kind: finished jobs with results, paired
	// daemons, a sealed job held under a lease, two queued jobs.
	requireClean(t, r.runWorkload(workload.Config{Protocol: proto, Jobs: 100}))
	spare := r.fx.Spares[0]
	h := r.handPeers(proto, spare, urls[0], urls[1])
	for _, id := range []string{"kept-1", "kept-2", "kept-3"} {
		require.NoError(t, h.enqueue(r.ctx, id, spare.Owner))
	}
	claimed, err := h.claim(r.ctx, 1)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	held := claimed[0]
	require.NoError(t, h.seal(r.ctx, held, []byte(`{"prompt":"survive"}`)))

	before := snapshot(t, r.ctx, st)
	srv.Stop(t)
	requireOutageAnswers(t, r)
	srv.Restart(t)
	require.NoError(t, r.fleet.WaitReady(r.ctx), "every replica is ready again by itself")
	// The test's own store handle met the outage too, and its listings are
	// never resent by valkey-go (a lost listing reply is reported, not run
	// again), and each of its pooled connections finds the restart on its
	// own: read the whole state again until one read of it succeeds.
	var after routingState
	eventually(t, 10*time.Second, "the test's store reads the whole state again", func() bool {
		var err error
		after, err = readState(r.ctx, st)
		return err == nil
	})
	require.Equal(t, before, after, "the routing state is as it was")
	requireNotRestarted(t, r, pids)
	requireStillLive(t, r, h, held, spare)
	restartUnderLoad(t, r, srv, proto, pids)
}

// requireStillLive: after the restart the daemon is still recognised,
// fetches the sealed job under its old lease, and claims the queued ones.
func requireStillLive(t *testing.T, r *rig, h *hand, held handJob, spare peer.DemoDevice) {
	t.Helper()
	require.NoError(t, h.heartbeat(r.ctx, []protocol.LeaseRef{held.ref}))
	fetched, err := h.fetch(r.ctx, held.ref)
	require.NoError(t, err)
	plain, err := peer.Open(spare.Keys, fetched.Envelope, peer.Expectation{JobID: held.ref.JobID, Direction: protocol.DirectionPayload, SenderIdentity: h.site.Keys().Public().Identity})
	require.NoError(t, err)
	require.JSONEq(t, `{"prompt":"survive"}`, string(plain))
	rest, err := h.claim(r.ctx, 8)
	require.NoError(t, err)
	ids := []string{held.ref.JobID}
	for _, j := range rest {
		ids = append(ids, j.ref.JobID)
	}
	require.ElementsMatch(t, []string{"kept-1", "kept-2", "kept-3"}, ids)
}

// restartUnderLoad stops and restarts Valkey with a workload at 30 %: the
// workload meets the outage and ends clean, and no replica was restarted.
func restartUnderLoad(t *testing.T, r *rig, srv *valkeytest.Server, proto string, pids map[int]int) {
	t.Helper()
	run := r.startWorkload(workload.Config{Protocol: proto, Jobs: sizeFor(proto, faultJobs(t), 4), ReplayFraction: 0.1, Allow503: true, StallTimeout: 60 * time.Second})
	require.NoError(t, run.WaitCollected(r.ctx, atPercent(run, 30)))
	srv.Stop(t)
	t.Logf("Valkey stopped at %+v", run.Progress())
	requireOutageAnswers(t, r)
	srv.Restart(t)
	t.Logf("Valkey back at %+v", run.Progress())
	require.NoError(t, r.fleet.WaitReady(r.ctx))
	rep := requireClean(t, run)
	require.Positive(t, rep.Statuses[http.StatusServiceUnavailable], "the workload met the outage")
	requireNotRestarted(t, r, pids)
	requireEveryProtocolServed(t, proto, rep)
}

// requireNotRestarted: every replica still runs as the process pids
// recorded.
func requireNotRestarted(t *testing.T, r *rig, pids map[int]int) {
	t.Helper()
	for i, rep := range r.fleet.Replicas() {
		require.Equal(t, pids[i], rep.Process().PID(), "replica %d was not restarted", i)
	}
}

// requireOutageAnswers checks every replica while Valkey is down: a 503
// server-error with Retry-After, and a failing /readyz.
func requireOutageAnswers(t *testing.T, r *rig) {
	t.Helper()
	for i, base := range r.fleet.PublicURLs() {
		s := r.siteAt(base)
		var resp peer.RawResponse
		eventually(t, 10*time.Second, fmt.Sprintf("replica %d answers 503 while Valkey is down", i), func() bool {
			var err error
			resp, err = s.Do(r.ctx, http.MethodGet, "pending", nil)
			require.NoError(t, err)
			return resp.Status == http.StatusServiceUnavailable
		})
		var body protocol.ErrorBody
		require.NoError(t, json.Unmarshal(resp.Body, &body))
		require.Equal(t, protocol.CodeServerError, body.Error)
		require.NotEmpty(t, resp.Header.Get("Retry-After"), "a 503 says when to try again")
		eventually(t, 10*time.Second, fmt.Sprintf("replica %d fails /readyz", i), func() bool {
			status, state := readiness(t, r.ctx, r.fleet.Replica(i).AdminURL())
			return status == http.StatusServiceUnavailable && state == "unavailable"
		})
	}
}

// routingState is everything a store holds, as its reads report it.
type routingState struct {
	Jobs     []store.Job
	Presence []store.Presence
}

func snapshot(t *testing.T, ctx context.Context, st store.RoutingStore) routingState {
	t.Helper()
	state, err := readState(ctx, st)
	require.NoError(t, err)
	require.NotEmpty(t, state.Jobs)
	require.NotEmpty(t, state.Presence)
	return state
}

// readState reads every job and every runner's presence.
func readState(ctx context.Context, st store.RoutingStore) (routingState, error) {
	jobs, err := st.Jobs(ctx, 0)
	if err != nil {
		return routingState{}, err
	}
	people, err := st.Runners(ctx, 0)
	if err != nil {
		return routingState{}, err
	}
	return routingState{Jobs: jobs, Presence: people}, nil
}

// SIGTERM of a replica under load: it fails /readyz first, finishes what
// is in flight (a request held half-sent across the signal completes with
// 200), exits cleanly, and the load moves to the other replicas with
// nothing lost.
func TestSIGTERM_ReplicaDrainsUnderLoadAndNothingIsLost(t *testing.T) {
	eachProtocol(t, testSIGTERM)
}

func testSIGTERM(t *testing.T, proto string) {
	r := protoRig(t, proto, rigOptions{spares: 1, fleet: fleet.Options{ShutdownTimeout: 30 * time.Second}})
	run := r.startWorkload(workload.Config{Protocol: proto, Jobs: sizeFor(proto, faultJobs(t), 4), ReplayFraction: 0.1, StallTimeout: 30 * time.Second})
	require.NoError(t, run.WaitCollected(r.ctx, atPercent(run, 30)))

	victim := r.fleet.Replica(2)
	site := r.siteAt(victim.PublicURL())
	probe := r.stub(site, "drain-probe", r.fx.Spares[0].Owner) // nobody runs spare jobs
	finish := fleet.HoldEnqueue(t, victim.PublicURL(), site, probe)
	require.NoError(t, victim.Process().Signal(syscall.SIGTERM))
	t.Logf("SIGTERM to replica 2 at %+v", run.Progress())

	// The held request keeps the replica in its drain, so this is certain
	// to be seen: not ready, still running.
	eventually(t, 10*time.Second, "the draining replica fails /readyz", func() bool {
		status, state := readiness(t, r.ctx, victim.AdminURL())
		return status == http.StatusServiceUnavailable && state == "draining"
	})
	require.True(t, victim.Running(), "still running while a request is in flight")

	resp := finish()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the in-flight request completes: %s", body)
	require.JSONEq(t, `{"jobId":"drain-probe","state":"queued"}`, string(body))

	waitCtx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, victim.Process().Wait(waitCtx), "the replica exits cleanly after draining")
	logs := victim.Logs()
	require.Less(t, strings.Index(logs, `"msg":"draining"`), strings.Index(logs, `"msg":"stopped"`))

	rep := requireClean(t, run)
	t.Logf("tries per replica: %v", rep.Tries)
	job, ok, err := r.store().Job(r.ctx, r.fx.SiteID, "drain-probe")
	require.NoError(t, err)
	require.True(t, ok, "the request completed during the drain was stored")
	require.Equal(t, store.Queued, job.State)
	requireEveryProtocolServed(t, proto, rep)
}
