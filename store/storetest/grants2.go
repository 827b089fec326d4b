package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// fetchContract2 lists the protocol "2" fetch cases.
func fetchContract2(s suite) {
	// v2: refuses a stale lease and honours the current one (published case 9)
	s.run("V2StaleLease", fetch2RefusesStaleLease)
	// v2: will not answer for one job with another job's lease (published case 10)
	s.run("V2AnotherJobsLease", fetch2WillNotAnswerWithAnotherJobsLease)
	// v2: refuses a payload for a job that already finished (published case 27)
	s.run("V2FinishedJob", fetch2RefusesFinishedJob)
	// v2: says not-ready for a job finished without a payload (P2-ST9, P2-S15)
	s.run("V2DoneWithoutPayloadNotReady", fetch2NotReadyForJobFinishedWithoutPayload)
	// v2: tells a runner nothing about another site's job id (published case 28)
	s.run("V2AnotherSitesJob", fetch2TellsNothingAboutAnotherSitesJob)
	// v2: answers not-holder only for another runner's current lease on that job (P2-R4.1.3)
	s.run("V2NotHolderOnlyForCurrentLease", fetch2NotHolderOnlyForCurrentLease)
	// v2: resolves by the lease which of two sites' same-id jobs is meant (P2-R4.1.3)
	s.run("V2ResolvesByLease", fetch2ResolvesByLeaseAcrossSites)
	// holder-scoped calls find only their own protocol's jobs, both ways (§2.4.3 item 6)
	s.run("OwnProtocolOnly", fetchFindsOnlyOwnProtocol)
	// v2: answers a lapsed grant not-found, whether or not a sweep ran (relayd RB-G8) (P2-R4.1.3, RB-G8)
	s.run("V2LapsedGrantNotFound", fetch2LapsedGrantSameWithOrWithoutSweep)
}

// resultContract2 lists the protocol "2" result cases.
func resultContract2(s suite) {
	// v2: records a result once (published case 24)
	s.run("V2RecordsOnce", result2RecordsOnce)
	// v2: answers the device that finished it with duplicate, and a stranger not-holder (published case 25)
	s.run("V2DuplicateAndStranger", result2AnswersDuplicateAndStranger)
	// v2: refuses a result produced under a grant that ended (published case 26)
	s.run("V2EndedGrant", result2RefusesEndedGrant)
	// v2: accepts a result before the payload, keeping the grant (P2-ST10)
	s.run("V2BeforePayload", result2AcceptsBeforePayload)
	// v2: refuses another lease on a done job (P2-ST10 step 3)
	s.run("V2OtherLeaseOnDoneJob", result2RefusesOtherLeaseOnDoneJob)
	// v2: a result the holder's device did not seal is refused (P2-D11)
	s.run("P2_D11_V2OtherDevice", result2RefusesResultFromAnotherDevice)
}

// releaseContract2 lists the protocol "2" release cases.
func releaseContract2(s suite) {
	// v2: does not offer a job back to the runner that refused it (published case 16)
	s.run("V2NotBackToRefuser", release2DoesNotOfferBackToRefuser)
	// v2: does not offer a job back to a runner before its not-before (published case 17)
	s.run("V2HonoursNotBefore", release2HonoursNotBefore)
	// v2: offers it again once the not-before has passed (published case 18)
	s.run("V2OffersAfterNotBefore", release2OffersAgainAfterNotBefore)
	// v2: a later not-before replaces the earlier one (P2-ST11 step 2)
	s.run("V2LaterNotBeforeReplaces", release2NotBeforeOverwrites)
	// v2: will not un-finish a job that is already done (published case 19)
	s.run("V2NeverUnfinishes", release2WillNotUnFinish)
	// v2: keeps a job claimable by a runner that only went away (published case 20)
	s.run("V2ShutdownKeepsClaimable", release2KeepsClaimableAfterShutdown)
	// v2: keeps the sealing bookkeeping across a release (P2-ST20)
	s.run("V2KeepsSealingBookkeeping", release2KeepsSealingBookkeeping)
	// v2: skips a lease that is not the current grant, another runner's grant and unknown jobs (P2-ST11)
	s.run("V2SkipsWhatItDoesNotHold", release2SkipsWhatItDoesNotHold)
}

// renewContract2 lists the protocol "2" renew cases.
func renewContract2(s suite) {
	// v2: renews a grant it still holds, and extends the sweep with it (published case 11)
	s.run("V2RenewsHeldGrant", renew2RenewsHeldGrant)
	// v2: reports a lease the runner no longer holds as lost, and renews nothing (published case 12)
	s.run("V2LostWhenNotHeld", renew2ReportsLostAsSent)
	// v2: renews whatever state the job is in, and never the sealing window (P2-ST15)
	s.run("V2AnyStateNeverSealingWindow", renew2HasNoStateGuard)
}

func fetch2RefusesStaleLease(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	b.sealOn(t, Site, c)
	stale := lease2(c)
	stale.LeaseID = "00000000-0000-4000-8000-000000000000"
	_, err := b.s.Fetch(b.ctx, stale)
	requireRefusal(t, err, store.RefusedStaleLease)
	b.requireState(t, "a", store.Ready)
	env, err := b.fetch2(c)
	require.NoError(t, err)
	require.Equal(t, envelope(protocol.DirectionPayload, "a"), env)
	b.requireState(t, "a", store.Running)
}

func fetch2WillNotAnswerWithAnotherJobsLease(t *testing.T, b *bundle) {
	b.enqueue2(t, "mine", "other")
	cs := b.claim2(t, alice, 10)
	require.Equal(t, []string{"mine", "other"}, ids(cs))
	for _, c := range cs {
		b.sealOn(t, Site, c)
	}
	crossed := lease2(cs[0])
	crossed.JobID = "other"
	_, err := b.s.Fetch(b.ctx, crossed)
	requireRefusal(t, err, store.RefusedStaleLease)
	b.requireState(t, "mine", store.Ready)
	b.requireState(t, "other", store.Ready)
	env, err := b.fetch2(cs[1])
	require.NoError(t, err)
	require.Equal(t, envelope(protocol.DirectionPayload, "other"), env)
}

func fetch2RefusesFinishedJob(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	b.runToDone2(t, Site, c)
	_, err := b.fetch2(c)
	requireRefusal(t, err, store.RefusedFinished)
	b.requireState(t, "a", store.Done)
}

func fetch2NotReadyForJobFinishedWithoutPayload(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	require.False(t, b.complete2(t, c, protocol.DispositionError).Duplicate)
	_, err := b.fetch2(c)
	requireRefusal(t, err, store.RefusedNotReady)
	b.requireState(t, "a", store.Done)
}

func fetch2TellsNothingAboutAnotherSitesJob(t *testing.T, b *bundle) {
	b.enqueue2(t, "mine")
	mine := b.claim2One(t, alice)
	b.enqueue2On(t, OtherSite, b.stub2(t, "secret", ownedBy("bob")))
	b.claim2One(t, bob, on(OtherSite, "bob"))
	for _, id := range []string{"secret", "no-such-job-anywhere"} {
		in := lease2(mine)
		in.JobID = id
		_, err := b.s.Fetch(b.ctx, in)
		requireRefusal(t, err, store.RefusedNotFound)
	}
}

func fetch2NotHolderOnlyForCurrentLease(t *testing.T, b *bundle) {
	b.enqueue2(t, "held", "unclaimed")
	c := b.claim2One(t, alice)
	b.sealOn(t, Site, c)
	stranger := lease2(c)
	stranger.RunnerID = bob.runner
	_, err := b.s.Fetch(b.ctx, stranger)
	requireRefusal(t, err, store.RefusedNotHolder)
	stranger.LeaseID = "00000000-0000-4000-8000-000000000000"
	_, err = b.s.Fetch(b.ctx, stranger)
	requireRefusal(t, err, store.RefusedNotFound)
	_, err = b.s.Fetch(b.ctx, store.LeaseInput{Proto: store.Proto2, JobID: "unclaimed", RunnerID: alice.runner, LeaseID: c.Lease.ID})
	requireRefusal(t, err, store.RefusedNotFound)
}

func fetch2ResolvesByLeaseAcrossSites(t *testing.T, b *bundle) {
	b.enqueue2(t, "shared")
	b.enqueue2On(t, OtherSite, b.stub2(t, "shared"))
	here := b.claim2One(t, alice, on(Site, "alice"))
	there := b.claim2One(t, alice, on(OtherSite, "alice"))
	for _, site := range []string{Site, OtherSite} {
		require.NoError(t, b.s.Payload(b.ctx, store.PayloadInput{JobID: "shared", SiteID: site, Envelope: envelopeFor(alice.runner, protocol.DirectionPayload, site)}))
	}
	env, err := b.fetch2(there)
	require.NoError(t, err)
	require.Equal(t, envelopeFor(alice.runner, protocol.DirectionPayload, OtherSite), env)
	require.Equal(t, store.Running, b.jobOn(t, OtherSite, "shared").State)
	require.Equal(t, store.Ready, b.jobOn(t, Site, "shared").State)
	env, err = b.fetch2(here)
	require.NoError(t, err)
	require.Equal(t, envelopeFor(alice.runner, protocol.DirectionPayload, Site), env)
}

func fetchFindsOnlyOwnProtocol(t *testing.T, b *bundle) {
	b.enqueue(t, "v0")
	b.enqueue2(t, "v2")
	v0 := b.claimOne(t, alice)
	v2 := b.claim2One(t, alice)
	b.seal(t, v0)
	b.sealOn(t, Site, v2)
	asV0 := lease(v2)
	_, err := b.s.Fetch(b.ctx, asV0)
	requireRefusal(t, err, store.RefusedNotFound)
	_, err = b.s.Fetch(b.ctx, lease2(v0))
	requireRefusal(t, err, store.RefusedNotFound)
	b.requireState(t, "v0", store.Ready)
	b.requireState(t, "v2", store.Ready)
}

func result2RecordsOnce(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	b.sealOn(t, Site, c)
	require.Equal(t, store.ResultOutcome{}, b.complete2(t, c, protocol.DispositionOK))
	require.Equal(t, store.ResultOutcome{Duplicate: true}, b.complete2(t, c, protocol.DispositionError))
	j := b.requireState(t, "a", store.Done)
	require.Equal(t, protocol.DispositionOK, j.Disposition)
	require.Equal(t, envelope(protocol.DirectionResult, "a-ok"), *j.Result)
}

func result2AnswersDuplicateAndStranger(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	b.runToDone2(t, Site, c)
	require.True(t, b.complete2(t, c, protocol.DispositionOK).Duplicate)
	stranger := lease2(c)
	stranger.RunnerID = alice2.runner
	_, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: stranger, Envelope: envelopeFor(alice2.runner, protocol.DirectionResult, "x"), Disposition: protocol.DispositionOK})
	requireRefusal(t, err, store.RefusedNotHolder)
	require.Equal(t, envelope(protocol.DirectionResult, "a-ok"), *b.requireState(t, "a", store.Done).Result)
}

func result2RefusesEndedGrant(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	first := b.claim2One(t, alice)
	b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(first)}, Reason: protocol.ReasonShutdown})
	second := b.claim2One(t, alice)
	_, err := b.result2(first, protocol.DispositionOK)
	requireRefusal(t, err, store.RefusedStaleLease)
	j := b.requireState(t, "a", store.AwaitingPayload)
	require.Nil(t, j.Result)
	require.Equal(t, second.Lease.ID, j.ClaimedBy.LeaseID)
}

func result2AcceptsBeforePayload(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	require.False(t, b.complete2(t, c, protocol.DispositionCanceled).Duplicate)
	j := b.requireState(t, "a", store.Done)
	require.Equal(t, c.Lease.ID, j.ClaimedBy.LeaseID, "the grant is kept")
	require.Equal(t, protocol.DispositionCanceled, j.Disposition)
}

func result2RefusesOtherLeaseOnDoneJob(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	b.runToDone2(t, Site, c)
	stale := lease2(c)
	stale.LeaseID = "00000000-0000-4000-8000-000000000000"
	_, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: stale, Envelope: envelope(protocol.DirectionResult, "x"), Disposition: protocol.DispositionOK})
	requireRefusal(t, err, store.RefusedStaleLease)
}

func result2RefusesResultFromAnotherDevice(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	b.sealOn(t, Site, c)
	forged := envelopeFor(bob.runner, protocol.DirectionResult, "forged")
	_, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: lease2(c), Envelope: forged, Disposition: protocol.DispositionOK})
	requireRefusal(t, err, store.RefusedOtherDevice)
	require.Nil(t, b.requireState(t, "a", store.Ready).Result)
	require.False(t, b.complete2(t, c, protocol.DispositionOK).Duplicate)
}

func release2DoesNotOfferBackToRefuser(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	require.Equal(t, []string{"a"}, b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: protocol.ReasonRefused}))
	require.Empty(t, b.claim2(t, alice, 10))
	require.Equal(t, []string{alice.runner}, b.requireState(t, "a", store.Queued).RefusedBy)
	require.Equal(t, "a", b.claim2One(t, alice2).ID)
}

func release2HonoursNotBefore(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	now := b.now(t)
	require.Equal(t, []string{"a"}, b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: protocol.ReasonBackendDown, RetryAfterMs: 600_000}))
	require.Equal(t, map[string]int64{alice.runner: now + 600_000}, b.job(t, "a").RetryAfter, "stamped on the store clock")
	b.advance(t, 599*time.Second)
	require.Empty(t, b.claim2(t, alice, 10))
	require.Equal(t, "a", b.claim2One(t, alice2).ID, "every other runner may take it at once")
}

func release2OffersAgainAfterNotBefore(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, RetryAfterMs: 1_000})
	b.advance(t, time.Second)
	require.Equal(t, "a", b.claim2One(t, alice).ID)
}

func release2NotBeforeOverwrites(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, RetryAfterMs: 1_000})
	b.advance(t, time.Second)
	c = b.claim2One(t, alice)
	now := b.now(t)
	b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, RetryAfterMs: 60_000})
	require.Equal(t, map[string]int64{alice.runner: now + 60_000}, b.job(t, "a").RetryAfter)
	b.advance(t, 30*time.Second)
	require.Empty(t, b.claim2(t, alice, 10))
}

func release2WillNotUnFinish(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	_, err := b.fetch2(c)
	requireRefusal(t, err, store.RefusedNotReady)
	require.False(t, b.complete2(t, c, protocol.DispositionOK).Duplicate)
	require.Empty(t, b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: protocol.ReasonShutdown}))
	b.requireState(t, "a", store.Done)
	fin, err := b.s.Results(b.ctx, Site)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, jobIDs(fin))
	require.Empty(t, b.claim2(t, alice2, 10))
}

func release2KeepsClaimableAfterShutdown(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	require.Equal(t, []string{"a"}, b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: protocol.ReasonShutdown}))
	again := b.claim2One(t, alice)
	require.Equal(t, "a", again.ID)
	require.NotEqual(t, c.Lease.ID, again.Lease.ID)
}

func release2KeepsSealingBookkeeping(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	b.claim2One(t, alice)
	b.lapse(t)
	c := b.claim2One(t, alice)
	b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: protocol.ReasonPause})
	j := b.requireState(t, "a", store.Queued)
	require.Equal(t, 1, j.SealAttempts, "a release is not a seal")
	require.Equal(t, alice.runner, j.ReofferTo)
	require.Nil(t, j.ClaimedBy)
}

func release2SkipsWhatItDoesNotHold(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	require.Empty(t, b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{
		{JobID: "a", LeaseID: "00000000-0000-4000-8000-000000000000"}, {JobID: "nope", LeaseID: c.Lease.ID},
	}}))
	require.Empty(t, b.release2(t, store.ReleaseInput{RunnerID: bob.runner, Leases: []protocol.LeaseRef{ref(c)}}))
	require.Equal(t, c.Lease.ID, b.requireState(t, "a", store.AwaitingPayload).ClaimedBy.LeaseID)
}

func renew2RenewsHeldGrant(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	b.sealOn(t, Site, c)
	b.advance(t, 5*time.Second)
	now := b.now(t)
	res := b.renew2(t, alice.runner, ref(c))
	require.Empty(t, res.Lost)
	require.Equal(t, []store.Renewal{{JobID: "a", ExpiresAt: now + leaseMs}}, res.Renewed)
	require.Greater(t, res.Renewed[0].ExpiresAt, c.Lease.ExpiresAt)
	require.Equal(t, res.Renewed[0].ExpiresAt, b.job(t, "a").ClaimedBy.LeaseExpiresAt)
	b.advance(t, leaseMs*time.Millisecond-time.Millisecond)
	require.Empty(t, b.sweep(t).Requeued, "the sweep honours the renewed expiry")
	b.requireState(t, "a", store.Ready)
}

func renew2ReportsLostAsSent(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	res := b.renew2(t, alice.runner, protocol.LeaseRef{JobID: "a", LeaseID: "a-grant-that-ended"})
	require.Empty(t, res.Renewed)
	require.Equal(t, []protocol.LeaseRef{{JobID: "a", LeaseID: "a-grant-that-ended"}}, res.Lost)
	j := b.job(t, "a")
	require.Equal(t, c.Lease.ID, j.ClaimedBy.LeaseID)
	require.Equal(t, c.Lease.ExpiresAt, j.ClaimedBy.LeaseExpiresAt)
	require.Equal(t, []protocol.LeaseRef{ref(c)}, b.renew2(t, bob.runner, ref(c)).Lost)
}

func renew2HasNoStateGuard(t *testing.T, b *bundle) {
	b.enqueue2(t, "done", "awaiting")
	cs := b.claim2(t, alice, 10)
	b.runToDone2(t, Site, cs[0])
	awaitingUntil := b.job(t, "awaiting").AwaitingUntil
	b.advance(t, time.Second)
	now := b.now(t)
	res := b.renew2(t, alice.runner, ref(cs[0]), ref(cs[1]))
	require.Empty(t, res.Lost)
	require.Equal(t, []store.Renewal{{JobID: "done", ExpiresAt: now + leaseMs}, {JobID: "awaiting", ExpiresAt: now + leaseMs}}, res.Renewed)
	require.Equal(t, awaitingUntil, b.job(t, "awaiting").AwaitingUntil, "the sealing window is not extended")
	b.requireState(t, "done", store.Done)
}

func fetch2LapsedGrantSameWithOrWithoutSweep(t *testing.T, b *bundle) {
	b.enqueue2(t, "unswept", "swept")
	cs := b.claim2(t, alice, 10)
	for _, c := range cs {
		b.sealOn(t, Site, c)
	}
	b.advance(t, leaseMs*time.Millisecond)
	_, err := b.fetch2(cs[0])
	requireRefusal(t, err, store.RefusedNotFound)
	_, err = b.result2(cs[0], protocol.DispositionOK)
	requireRefusal(t, err, store.RefusedNotFound)
	// Sealed, both wait for their holder's next claim (RD-D14): the fetch
	// applied the lapse to the unswept one, and the sweep finds nothing
	// left to requeue.
	require.Empty(t, b.sweep(t).Requeued, "the unswept job's lapse was applied by the fetch")
	_, err = b.fetch2(cs[1])
	requireRefusal(t, err, store.RefusedNotFound)
	require.Equal(t, []protocol.LeaseRef{ref(cs[0]), ref(cs[1])}, b.renew2(t, alice.runner, ref(cs[0]), ref(cs[1])).Lost)
	b.requireState(t, "unswept", store.Ready)
	b.advance(t, store.HolderReturnMs*time.Millisecond)
	require.ElementsMatch(t, []string{"unswept", "swept"}, b.sweep(t).Requeued, "requeued once the holder's window is over")
}
