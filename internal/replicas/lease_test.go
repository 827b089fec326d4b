package replicas_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/workload"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// Sweeps race: every replica sweeps every 5 ms, and the test adds four
// loops of explicit sweeps on the same store, while daemons abandon a tenth
// of their grants so that leases keep lapsing. Each lapsed job must go back
// to the queue once and on to exactly one new holder: none lost, none
// granted twice under live leases.
func TestSweepersRacing_LapsedLeasesRequeueOnce(t *testing.T) {
	eachProtocol(t, testSweepersRacing)
}

func testSweepersRacing(t *testing.T, proto string) {
	r := protoRig(t, proto, rigOptions{fleet: fleet.Options{LeaseMs: 1500, SweepInterval: 5 * time.Millisecond}})
	st := r.store()

	ctx, stop := context.WithCancel(r.ctx)
	var sweeps, requeued, failures atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				res, err := st.Sweep(ctx)
				if err != nil {
					if ctx.Err() == nil {
						failures.Add(1)
					}
					continue
				}
				sweeps.Add(1)
				requeued.Add(int64(len(res.Requeued)))
			}
		})
	}
	run := r.runWorkload(workload.Config{
		Protocol: proto, Jobs: sizeFor(proto, faultJobs(t), 4), AbandonFraction: 0.1, ReplayFraction: 0.05,
		HeartbeatInterval: 300 * time.Millisecond, StallTimeout: 30 * time.Second,
	})
	stop()
	wg.Wait()

	rep := requireClean(t, run)
	t.Logf("explicit sweeps: %d, requeuing %d jobs; failed %d", sweeps.Load(), requeued.Load(), failures.Load())
	require.Zero(t, failures.Load(), "explicit sweeps never fail")
	require.Positive(t, rep.Abandoned, "some grants were abandoned")
	// A "2" job abandoned after its payload was sealed goes back to its
	// holder under the same lease (RD-D14); any other goes to someone else.
	require.GreaterOrEqual(t, rep.Regranted+rep.Returned, rep.Abandoned/2, "abandoned jobs went to someone else, or back to their holder")
	require.Positive(t, sweeps.Load())
	requireEveryProtocolServed(t, proto, rep)
}

// A daemon that stops heartbeating loses its job within lease + sweep
// interval, to the background sweeper alone; another daemon then gets it,
// and the first daemon's late result and fetch are refused.
func TestLeaseLapse_SilentDaemonLosesItsJobToAnother(t *testing.T) {
	// A 4 s lease, heartbeats every third of it: a 1.5 s lease lapsed once
	// in CI before its first heartbeat, the test process held back 1.9 s
	// by the packages testing beside it under -race.
	const leaseMs, sweep = 4000, 200 * time.Millisecond
	r := newRig(t, rigOptions{fleet: fleet.Options{LeaseMs: leaseMs, SweepInterval: sweep}})
	urls := r.fleet.PublicURLs()
	owner := r.fx.Owners[0]
	devs := r.fx.DevicesOf(owner)
	site := r.siteAt(urls[2])
	a := r.daemonAt(devs[0], urls[0], urls[1])
	b := r.daemonAt(devs[1], urls[2], urls[0])

	stub := r.stub(site, "lapse-1", owner)
	_, err := site.Enqueue(r.ctx, stub)
	require.NoError(t, err)
	claimed, err := a.Claim(r.ctx, []string{protocol.KindGenerate}, 1)
	require.NoError(t, err)
	require.Len(t, claimed.Jobs, 1)
	leaseA := claimed.Jobs[0].Lease
	pending, err := site.AwaitPending(r.ctx, stub.ID)
	require.NoError(t, err)
	_, err = site.SendPayload(r.ctx, pending, stub.DeadlineAt, []byte(`{"prompt":"hello"}`))
	require.NoError(t, err)
	_, err = a.Fetch(r.ctx, stub.ID, leaseA.ID)
	require.NoError(t, err)

	ref := []protocol.LeaseRef{{JobID: stub.ID, LeaseID: leaseA.ID}}
	lapse := heartbeatThenFallSilent(t, r, a, ref, leaseMs*time.Millisecond, sweep)

	// A's result, handed in now, is refused: nobody holds the job.
	result, err := peer.Seal(devs[0].Keys, site.Keys().Public(), stub.ID, protocol.DirectionResult, stub.DeadlineAt, []byte(`{"text":"late"}`))
	require.NoError(t, err)
	_, err = a.Result(r.ctx, stub.ID, leaseA.ID, result, protocol.DispositionOK)
	requireRefused(t, err, http.StatusForbidden, protocol.CodeUnauthorized, "this runner does not hold the job")

	// B gets the job, under a lease that starts no earlier than A's ended.
	claimed, err = b.Claim(r.ctx, []string{protocol.KindGenerate}, 1)
	require.NoError(t, err)
	require.Len(t, claimed.Jobs, 1)
	leaseB := claimed.Jobs[0].Lease
	require.Equal(t, stub.ID, claimed.Jobs[0].ID)
	require.Equal(t, devs[1].RunnerID, leaseB.RunnerID)
	require.GreaterOrEqual(t, leaseB.ExpiresAt-leaseMs, lapse)

	// A's late result, fetch and heartbeat all fail now that B holds it.
	_, err = a.Result(r.ctx, stub.ID, leaseA.ID, result, protocol.DispositionOK)
	requireRefused(t, err, http.StatusForbidden, protocol.CodeUnauthorized, "this runner does not hold the job")
	_, err = a.Fetch(r.ctx, stub.ID, leaseA.ID)
	requireRefused(t, err, http.StatusForbidden, protocol.CodeUnauthorized, "this runner does not hold the job")
	hb, err := a.Heartbeat(r.ctx, ref)
	require.NoError(t, err)
	require.Equal(t, []string{stub.ID}, hb.Lost)

	finishOnB(t, r, site, b, devs[1], stub, leaseB)
}

// heartbeatThenFallSilent has a, the holder of ref's running job, keep it
// by heartbeating past one lease, then fall silent: only a replica's
// background sweeper can requeue the job, within lease + sweep interval.
// It returns when the renewed lease lapses, in store milliseconds.
//
// Every instant it compares is read from the store's clock (Valkey TIME),
// the one the relay decides by: this process's clock is another, and a
// machine whose wall clock is stepped under a running test makes the two
// disagree by the step (CI saw a requeue 0.7 s "before" its lapse so).
func heartbeatThenFallSilent(t *testing.T, r *rig, a *peer.Daemon, ref []protocol.LeaseRef, lease, sweep time.Duration) int64 {
	t.Helper()
	st := r.store()
	storeNow := func() int64 {
		now, err := st.Now(r.ctx)
		require.NoError(t, err)
		return now
	}
	stubID, leaseID := ref[0].JobID, ref[0].LeaseID
	// While it heartbeats, it keeps the job well past one lease.
	var lastSent int64
	for range 4 {
		time.Sleep(lease / 3) // the heartbeat cadence itself, not a wait for a condition
		lastSent = storeNow()
		hb, err := a.Heartbeat(r.ctx, ref)
		require.NoError(t, err)
		require.Empty(t, hb.Lost, "a heartbeating holder keeps its lease")
	}
	job, ok, err := st.Job(r.ctx, r.fx.SiteID, stubID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, store.Running, job.State)
	require.Equal(t, leaseID, job.ClaimedBy.LeaseID)
	lapse := job.ClaimedBy.LeaseExpiresAt
	require.GreaterOrEqual(t, lapse, lastSent+lease.Milliseconds(), "the last heartbeat renewed the lease from when it was sent")

	// Then it falls silent. Reads do not sweep, and nobody else calls the
	// relay, so only a replica's background sweeper can requeue the job.
	// A read that the store's clock says came before the lapse must still
	// find the job running.
	var seenAt int64
	eventually(t, 10*time.Second, "the silent daemon's job goes back to the queue", func() bool {
		job, _, err := st.Job(r.ctx, r.fx.SiteID, stubID)
		require.NoError(t, err)
		after := storeNow()
		if after < lapse {
			require.Equal(t, store.Running, job.State, "requeued before the renewed lease could have lapsed")
		}
		seenAt = after
		return job.State == store.Queued
	})
	late := time.Duration(seenAt-lapse) * time.Millisecond
	t.Logf("requeue seen %s after the lease lapsed, by the store clock (sweep interval %s)", late, sweep)
	// One sweep interval, plus this test's own poll and scheduling on a busy
	// 2-core machine under -race; without a background sweeper the job would
	// never come back at all, which the wait above already catches.
	require.LessOrEqual(t, late, sweep+2*time.Second, "requeued within lease + sweep interval")
	return lapse
}

// finishOnB has b run the job under leaseB, and the site collect b's
// result, opened with the key pending named for b.
func finishOnB(t *testing.T, r *rig, site *peer.Site, b *peer.Daemon, devB peer.DemoDevice, stub protocol.JobStub, leaseB protocol.Lease) {
	t.Helper()
	pending, err := site.AwaitPending(r.ctx, stub.ID)
	require.NoError(t, err)
	require.Equal(t, leaseB.ID, pending.LeaseID)
	_, err = site.SendPayload(r.ctx, pending, stub.DeadlineAt, []byte(`{"prompt":"hello"}`))
	require.NoError(t, err)
	ran, err := b.Fetch(r.ctx, stub.ID, leaseB.ID)
	require.NoError(t, err)
	plain, err := peer.Open(devB.Keys, ran.Envelope, peer.Expectation{JobID: stub.ID, Direction: protocol.DirectionPayload, SenderIdentity: site.Keys().Public().Identity})
	require.NoError(t, err)
	require.JSONEq(t, `{"prompt":"hello"}`, string(plain))
	resultB, err := peer.Seal(devB.Keys, site.Keys().Public(), stub.ID, protocol.DirectionResult, stub.DeadlineAt, []byte(`{"text":"from b"}`))
	require.NoError(t, err)
	ans, err := b.Result(r.ctx, stub.ID, leaseB.ID, resultB, protocol.DispositionOK)
	require.NoError(t, err)
	require.True(t, ans.Accepted)
	fin, err := site.AwaitResult(r.ctx, stub.ID)
	require.NoError(t, err)
	require.Equal(t, leaseB.ID, fin.LeaseID)
	got, err := peer.Open(site.Keys(), fin.Envelope, peer.Expectation{JobID: stub.ID, Direction: protocol.DirectionResult, SenderIdentity: pending.Device.Identity})
	require.NoError(t, err)
	require.JSONEq(t, `{"text":"from b"}`, string(got))
}

// requireRefused checks a relay refusal's status, code and message.
func requireRefused(t *testing.T, err error, status int, code protocol.Code, message string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, status, peer.ErrorStatus(err), "%v", err)
	require.Equal(t, code, peer.ErrorCode(err), "%v", err)
	var e *peer.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, message, e.Body.Message)
}
