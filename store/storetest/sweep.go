package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// sweepContract lists the sweep cases.
func sweepContract(s suite) {
	// drops a job at its deadline, and the ciphertext with it (RB-F67, RB-B17.1)
	s.run("DropsAtDeadline", sweepDropsJobDeadline)
	// reports only what it dropped itself, not a job an operation already dropped and replaced (RB-B17, RB-G8)
	s.run("ReportsOnlyItsOwnDrops", sweepReportsOnlyWhatDroppedItself)
	// leaves a job whose deadline has not passed alone (RB-F68)
	s.run("LeavesLiveJob", sweepLeavesJobWhoseDeadlineHas)
	// requeues a job whose site never sealed, stub intact (RB-F20, RB-B17.2)
	s.run("RequeuesUnsealed", sweepRequeuesJobWhoseSiteNever)
	// takes a running job from a device whose lease lapsed (RB-F27, RB-B17.3)
	s.run("TakesLapsedLease", sweepTakesRunningJobFromDevice)
	// keeps a renewed grant past its first expiry (RB-F26)
	s.run("KeepsRenewedGrant", sweepKeepsRenewedGrantPastFirst)
	// never requeues queued or done jobs, nor lease-expires one awaiting its payload (RB-B17)
	s.run("NeverQueuedOrDone", sweepNeverRequeuesQueuedDoneJobs)
	// reports requeued then expired, each in first-enqueue order (RB-B17, RB-G12)
	s.run("RequeuedThenExpired", sweepReportsRequeuedThenExpired)
}

// clockContract lists the clock cases.
func clockContract(s suite) {
	// is the store's own, and moves with it (RB-B1, RB-D5)
	s.run("OwnClockMoves", clockStoresOwn)
}

// presenceContract lists the presence cases.
func presenceContract(s suite) {
	// stamps a pairing from the store clock (RB-F72, RB-B14)
	s.run("PairStampsStoreClock", presenceStampsPairingFromStoreClock)
	// refreshes owner and keys on a second pairing (relayd RB-G7)
	s.run("RepairRefreshesOwnerKeys", presenceRefreshesOwnerKeysSecondPairing)
	// touches a known runner's last-seen time and nobody else's (relayd RB-G7)
	s.run("TouchKnownRunnerOnly", presenceTouchesKnownRunnersLastSeenTime)
	// stamps the runner within claim, fetch and result when asked, refused or not (relayd RB-G7)
	s.run("StampsWithinCalls", presenceStampsRunnerWithinClaim)
	// lists everyone in first-pair order, up to a limit (RB-B15)
	s.run("RunnersInPairOrder", presenceListsEveryoneFirstPairOrder)
}

func sweepDropsJobDeadline(t *testing.T, b *bundle) {
	b.enqueueOn(t, Site, b.stub(t, "a", deadlineIn(t, b, 30*time.Second)))
	c := b.claimOne(t, alice)
	b.runToDone(t, c)
	b.advance(t, 30*time.Second) // exactly the deadline: boundaries are inclusive
	res, err := b.s.Sweep(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, res.Expired)
	require.Empty(t, res.Requeued)
	b.requireGone(t, "a")
	all, err := b.s.Jobs(b.ctx, 0)
	require.NoError(t, err)
	require.Empty(t, all)
	fin, err := b.s.Results(b.ctx, Site)
	require.NoError(t, err)
	require.Empty(t, fin)
}

func sweepReportsOnlyWhatDroppedItself(t *testing.T, b *bundle) {
	b.enqueueOn(t, Site, b.stub(t, "a", deadlineIn(t, b, 5*time.Second)))
	b.advance(t, 5*time.Second)
	// The republish finds the old job past its deadline, drops it and
	// creates a fresh one under the same id.
	require.True(t, b.enqueueOn(t, Site, b.stub(t, "a")).Created)
	res, err := b.s.Sweep(b.ctx)
	require.NoError(t, err)
	require.Empty(t, res.Expired)
	require.Empty(t, res.Requeued)
	b.requireState(t, "a", store.Queued)
}

func sweepLeavesJobWhoseDeadlineHas(t *testing.T, b *bundle) {
	b.enqueueOn(t, Site, b.stub(t, "a", deadlineIn(t, b, time.Minute)))
	b.advance(t, 59*time.Second)
	res, err := b.s.Sweep(b.ctx)
	require.NoError(t, err)
	require.Empty(t, res.Expired)
	require.Empty(t, res.Requeued)
	b.requireState(t, "a", store.Queued)
}

func sweepRequeuesJobWhoseSiteNever(t *testing.T, b *bundle) {
	s := b.stub(t, "a")
	b.enqueueOn(t, Site, s)
	b.claimOne(t, alice)
	b.advance(t, protocol.AwaitingPayloadMs*time.Millisecond)
	res, err := b.s.Sweep(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, res.Requeued)
	j := b.requireState(t, "a", store.Queued)
	require.Equal(t, s, j.Stub)
	require.Nil(t, j.ClaimedBy)
}

func sweepTakesRunningJobFromDevice(t *testing.T, b *bundle) {
	b.enqueue(t, "a", "b")
	cs := b.claimFor(t, alice, 2)
	b.seal(t, cs[0])
	_, err := b.s.Fetch(b.ctx, lease(cs[0]))
	require.NoError(t, err)
	b.seal(t, cs[1])
	b.advance(t, leaseMs*time.Millisecond)
	res, err := b.s.Sweep(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, res.Requeued, "running and ready grants lapse alike")
	j := b.requireState(t, "a", store.Queued)
	require.Nil(t, j.ClaimedBy)
	require.Nil(t, j.Payload)
}

func sweepKeepsRenewedGrantPastFirst(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	b.seal(t, c)
	for range 3 {
		b.advance(t, leaseMs*time.Millisecond/2)
		res, err := b.s.Renew(b.ctx, store.RenewInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, LeaseMs: leaseMs})
		require.NoError(t, err)
		require.Empty(t, res.Lost)
		sw, err := b.s.Sweep(b.ctx)
		require.NoError(t, err)
		require.Empty(t, sw.Requeued)
	}
	require.Equal(t, c.Lease.ID, b.requireState(t, "a", store.Ready).ClaimedBy.LeaseID)
}

func sweepNeverRequeuesQueuedDoneJobs(t *testing.T, b *bundle) {
	b.enqueue(t, "awaiting", "done", "queued")
	cs := b.claimFor(t, alice, 2)
	b.runToDone(t, cs[1])
	res, err := b.s.Renew(b.ctx, store.RenewInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(cs[0])}, LeaseMs: 1})
	require.NoError(t, err)
	require.Len(t, res.Renewed, 1)
	b.advance(t, time.Second)
	sw, err := b.s.Sweep(b.ctx)
	require.NoError(t, err)
	require.Empty(t, sw.Requeued)
	b.requireState(t, "queued", store.Queued)
	b.requireState(t, "done", store.Done)
	b.requireState(t, "awaiting", store.AwaitingPayload)
}

func sweepReportsRequeuedThenExpired(t *testing.T, b *bundle) {
	b.enqueue(t, "r1")
	b.enqueueOn(t, Site, b.stub(t, "x1", deadlineIn(t, b, 5*time.Second)))
	b.enqueue(t, "r2")
	b.enqueueOn(t, Site, b.stub(t, "x2", deadlineIn(t, b, 5*time.Second)))
	require.Len(t, b.claimFor(t, alice, 64), 4)
	b.advance(t, protocol.AwaitingPayloadMs*time.Millisecond)
	res, err := b.s.Sweep(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"r1", "r2"}, res.Requeued)
	require.Equal(t, []string{"x1", "x2"}, res.Expired)
}

func clockStoresOwn(t *testing.T, b *bundle) {
	before := b.now(t)
	require.Positive(t, before)
	b.advance(t, time.Hour)
	require.GreaterOrEqual(t, b.now(t), before+time.Hour.Milliseconds())
}

func presenceStampsPairingFromStoreClock(t *testing.T, b *bundle) {
	now := b.now(t)
	p, err := b.s.Pair(b.ctx, store.PairInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice)})
	require.NoError(t, err)
	require.Equal(t, store.Presence{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice), LastSeenAt: now}, p)
	got, ok, err := b.s.Presence(b.ctx, alice.runner)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, p, got)
}

func presenceRefreshesOwnerKeysSecondPairing(t *testing.T, b *bundle) {
	_, err := b.s.Pair(b.ctx, store.PairInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice)})
	require.NoError(t, err)
	b.advance(t, time.Minute)
	rotated := identityOf(alice)
	rotated.Encryption = "enc-rotated"
	now := b.now(t)
	p, err := b.s.Pair(b.ctx, store.PairInput{RunnerID: alice.runner, Owner: "alice-renamed", Device: rotated})
	require.NoError(t, err)
	require.Equal(t, store.Presence{RunnerID: alice.runner, Owner: "alice-renamed", Device: rotated, LastSeenAt: now}, p)
}

func presenceTouchesKnownRunnersLastSeenTime(t *testing.T, b *bundle) {
	_, err := b.s.Pair(b.ctx, store.PairInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice)})
	require.NoError(t, err)
	b.advance(t, time.Minute)
	now := b.now(t)
	ok, err := b.s.Touch(b.ctx, store.TouchInput{RunnerID: alice.runner})
	require.NoError(t, err)
	require.True(t, ok)
	p, _, err := b.s.Presence(b.ctx, alice.runner)
	require.NoError(t, err)
	require.Equal(t, now, p.LastSeenAt)
	ok, err = b.s.Touch(b.ctx, store.TouchInput{RunnerID: bob.runner})
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = b.s.Presence(b.ctx, bob.runner)
	require.NoError(t, err)
	require.False(t, ok, "a touch creates no presence")
}

func presenceStampsRunnerWithinClaim(t *testing.T, b *bundle) {
	for _, d := range []device{alice, bob} {
		_, err := b.s.Pair(b.ctx, store.PairInput{RunnerID: d.runner, Owner: d.owner, Device: identityOf(d)})
		require.NoError(t, err)
	}
	b.enqueue(t, "a")
	lastSeen := func(d device) int64 {
		p, ok, err := b.s.Presence(b.ctx, d.runner)
		require.NoError(t, err)
		require.True(t, ok)
		return p.LastSeenAt
	}
	// Each call runs a second after the last (well within the sealing
	// window); only a touching one moves the stamp, to the store's time
	// of that call.
	step := func(d device, touch bool, call func()) {
		t.Helper()
		before := lastSeen(d)
		b.advance(t, time.Second)
		now := b.now(t)
		call()
		if touch {
			require.Equal(t, now, lastSeen(d))
		} else {
			require.Equal(t, before, lastSeen(d))
		}
	}
	claim := func(d device, touch bool) []protocol.ClaimedStub {
		return b.claimInput(t, store.ClaimInput{RunnerID: d.runner, Owner: d.owner, Device: identityOf(d),
			Routes: []store.Route{{SiteID: Site, Owner: alice.owner}}, Kinds: []string{protocol.KindGenerate}, Max: 1, LeaseMs: int64(time.Hour / time.Millisecond), Touch: touch})
	}
	var got []protocol.ClaimedStub
	step(alice, false, func() { got = claim(alice, false) })
	require.Len(t, got, 1)
	step(bob, true, func() { require.Empty(t, claim(bob, true)) }) // grants nothing, still seen
	b.seal(t, got[0])
	held := lease(got[0])
	foreign := held
	foreign.RunnerID, foreign.Touch = bob.runner, true
	step(bob, true, func() {
		_, err := b.s.Fetch(b.ctx, foreign)
		requireRefusal(t, err, store.RefusedNotHolder)
	})
	step(alice, false, func() {
		_, err := b.s.Fetch(b.ctx, held)
		require.NoError(t, err)
	})
	held.Touch = true
	step(alice, true, func() {
		_, err := b.s.Fetch(b.ctx, held)
		require.NoError(t, err)
	})
	step(alice, true, func() {
		_, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: held, Envelope: envelope(protocol.DirectionResult, "a-ok"), Disposition: protocol.DispositionOK})
		require.NoError(t, err)
	})
	step(bob, true, func() {
		_, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: foreign, Envelope: envelope(protocol.DirectionResult, "a-ok"), Disposition: protocol.DispositionOK})
		requireRefusal(t, err, store.RefusedNotHolder)
	})
	stranger := store.LeaseInput{SiteID: Site, JobID: "a", RunnerID: "runner_nobody", LeaseID: held.LeaseID, Touch: true}
	_, err := b.s.Fetch(b.ctx, stranger)
	requireRefusal(t, err, store.RefusedNotHolder)
	_, ok, err := b.s.Presence(b.ctx, stranger.RunnerID)
	require.NoError(t, err)
	require.False(t, ok, "a touch creates no presence")
}

func presenceListsEveryoneFirstPairOrder(t *testing.T, b *bundle) {
	for _, d := range []device{bob, alice, alice2} {
		_, err := b.s.Pair(b.ctx, store.PairInput{RunnerID: d.runner, Owner: d.owner, Device: identityOf(d)})
		require.NoError(t, err)
	}
	_, err := b.s.Pair(b.ctx, store.PairInput{RunnerID: bob.runner, Owner: bob.owner, Device: identityOf(bob)})
	require.NoError(t, err)
	all, err := b.s.Runners(b.ctx, 0)
	require.NoError(t, err)
	var runners []string
	for _, p := range all {
		runners = append(runners, p.RunnerID)
	}
	require.Equal(t, []string{bob.runner, alice.runner, alice2.runner}, runners)
	two, err := b.s.Runners(b.ctx, 2)
	require.NoError(t, err)
	require.Len(t, two, 2)
}
