package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// fetchContract lists the fetch cases.
func fetchContract(s suite) {
	// refuses an unknown job (RB-B7)
	s.run("UnknownJob", fetchRefusesUnknownJob)
	// refuses a runner that does not hold the job (RB-F76)
	s.run("NotHolder", fetchRefusesRunnerThatDoesNot)
	// refuses a stale lease and honours the current one (RB-F74, RB-F97)
	s.run("StaleLease", fetchRefusesStaleLeaseHonoursCurrent)
	// says not-ready until the site has sealed (RB-F88)
	s.run("NotReadyUntilSealed", fetchSaysNotReadyUntilSiteHas)
	// refuses to reopen a finished job (relayd RB-G9)
	s.run("FinishedJob", fetchRefusesReopenFinishedJob)
}

// resultContract lists the result cases.
func resultContract(s suite) {
	// records a result once; a replay by the holder is a duplicate and changes nothing (RB-F77, RB-F107)
	s.run("RecordsOnce", resultRecordsResultOnce)
	// answers a stranger not-holder even once the job is done (RB-F108, RB-B8)
	s.run("StrangerNotHolderWhenDone", resultAnswersStrangerNotHolderEvenOnce)
	// refuses a result produced under a grant that ended (RB-F78, RB-F109)
	s.run("EndedGrant", resultRefusesResultProducedUnderGrant)
	// a result the holder's device did not seal is refused (P2-D11)
	s.run("P2_D11_OtherDevice", resultRefusesResultFromAnotherDevice)
	// refuses a stale lease on a done job (RB-B8.3)
	s.run("StaleLeaseOnDoneJob", resultRefusesStaleLeaseDoneJob)
	// accepts a result before the payload, and keeps the grant after (RB-B8)
	s.run("BeforePayload", resultAcceptsResultBeforePayload)
	// refuses a result after the lease lapsed, whether or not a sweep ran (relayd RB-G8)
	s.run("AfterLeaseLapsed", resultRefusesResultAfterLeaseLapsed)
}

// releaseContract lists the release cases.
func releaseContract(s suite) {
	// gives back the grant it names (RB-F80)
	s.run("GivesBackNamedGrant", releaseGivesBackGrantNames)
	// skips a lease id that is not the current grant, another runner's grant and unknown jobs (RB-F79, RB-B9)
	s.run("SkipsWhatItDoesNotHold", releaseSkipsLeaseIDThatNot)
	// releases a duplicated entry once, in request order (RB-B9)
	s.run("DuplicateEntryOnce", releaseReleasesDuplicatedEntryOnce)
	// does not offer a job back to the runner that refused it, and offers it to another (RB-F63, RB-F64, RB-F103, RB-F40)
	s.run("NotBackToRefuser", releaseDoesNotOfferJobBack)
	// keeps a job claimable by a runner that only went away (RB-F65, RB-F104, RB-F41)
	s.run("ShutdownKeepsClaimable", releaseKeepsJobClaimableRunnerThat)
	// does not un-finish a done job (relayd RB-G10)
	s.run("NeverUnfinishes", releaseDoesNotUnFinishDoneJob)
}

// renewContract lists the renew cases.
func renewContract(s suite) {
	// renews a grant it still holds, and the stored expiry follows (RB-F28, RB-F98)
	s.run("RenewsHeldGrant", renewRenewsGrantStillHolds)
	// reports a lease the runner no longer holds as lost, and renews nothing (RB-F29, RB-F99)
	s.run("LostWhenNotHeld", renewReportsLeaseRunnerNoLonger)
	// tells a device mid-flight that its job is gone (RB-F69)
	s.run("GoneMidFlight", renewTellsDeviceMidFlightThatJob)
	// reports a lapsed lease as lost even before a sweep (relayd RB-G8)
	s.run("LapsedIsLost", renewReportsLapsedLeaseAsLost)
	// never extends the sealing window (RB-B13, RB-D2)
	s.run("NeverExtendsSealingWindow", renewNeverExtendsSealingWindow)
}

func fetchRefusesUnknownJob(t *testing.T, b *bundle) {
	_, err := b.s.Fetch(b.ctx, store.LeaseInput{SiteID: Site, JobID: "nope", RunnerID: alice.runner, LeaseID: "x"})
	requireRefusal(t, err, store.RefusedNotFound)
}

func fetchRefusesRunnerThatDoesNot(t *testing.T, b *bundle) {
	b.enqueue(t, "unclaimed", "held")
	_, err := b.s.Fetch(b.ctx, store.LeaseInput{SiteID: Site, JobID: "unclaimed", RunnerID: alice.runner, LeaseID: "x"})
	requireRefusal(t, err, store.RefusedNotHolder)
	c := b.claimOne(t, alice)
	b.seal(t, c)
	_, err = b.s.Fetch(b.ctx, store.LeaseInput{SiteID: Site, JobID: c.ID, RunnerID: bob.runner, LeaseID: c.Lease.ID})
	requireRefusal(t, err, store.RefusedNotHolder)
}

func fetchRefusesStaleLeaseHonoursCurrent(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	b.seal(t, c)
	stale := lease(c)
	stale.LeaseID = "00000000-0000-4000-8000-000000000000"
	_, err := b.s.Fetch(b.ctx, stale)
	requireRefusal(t, err, store.RefusedStaleLease)
	b.requireState(t, "a", store.Ready)
	env, err := b.s.Fetch(b.ctx, lease(c))
	require.NoError(t, err)
	require.Equal(t, envelope(protocol.DirectionPayload, "a"), env)
	b.requireState(t, "a", store.Running)
}

func fetchSaysNotReadyUntilSiteHas(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	_, err := b.s.Fetch(b.ctx, lease(c))
	requireRefusal(t, err, store.RefusedNotReady)
	b.requireState(t, "a", store.AwaitingPayload)
}

func fetchRefusesReopenFinishedJob(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	b.runToDone(t, c)
	_, err := b.s.Fetch(b.ctx, lease(c))
	requireRefusal(t, err, store.RefusedFinished)
	b.requireState(t, "a", store.Done)
	fin, err := b.s.Results(b.ctx, Site)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, jobIDs(fin), "the result is still delivered")
}

func resultRecordsResultOnce(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	b.seal(t, c)
	require.Equal(t, store.ResultOutcome{}, b.complete(t, c, protocol.DispositionOK))
	require.Equal(t, store.ResultOutcome{Duplicate: true}, b.complete(t, c, protocol.DispositionError))
	j := b.requireState(t, "a", store.Done)
	require.Equal(t, protocol.DispositionOK, j.Disposition)
	require.Equal(t, envelope(protocol.DirectionResult, "a-ok"), *j.Result)
}

func resultAnswersStrangerNotHolderEvenOnce(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	b.runToDone(t, c)
	_, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: store.LeaseInput{SiteID: Site, JobID: "a", RunnerID: bob.runner, LeaseID: c.Lease.ID}, Envelope: envelope(protocol.DirectionResult, "x"), Disposition: protocol.DispositionOK})
	requireRefusal(t, err, store.RefusedNotHolder)
	_, err = b.s.Result(b.ctx, store.ResultInput{LeaseInput: store.LeaseInput{SiteID: Site, JobID: "nope", RunnerID: alice.runner, LeaseID: c.Lease.ID}, Envelope: envelope(protocol.DirectionResult, "x"), Disposition: protocol.DispositionOK})
	requireRefusal(t, err, store.RefusedNotFound)
}

func resultRefusesResultProducedUnderGrant(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	first := b.claimOne(t, alice)
	_, err := b.s.Release(b.ctx, store.ReleaseInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(first)}, Reason: protocol.ReasonShutdown})
	require.NoError(t, err)
	second := b.claimOne(t, alice)
	_, err = b.s.Result(b.ctx, store.ResultInput{LeaseInput: lease(first), Envelope: envelope(protocol.DirectionResult, "old"), Disposition: protocol.DispositionOK})
	requireRefusal(t, err, store.RefusedStaleLease)
	j := b.requireState(t, "a", store.AwaitingPayload)
	require.Nil(t, j.Result)
	require.Equal(t, second.Lease.ID, j.ClaimedBy.LeaseID)
}

func resultRefusesResultFromAnotherDevice(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	b.seal(t, c)
	forged := envelopeFor(bob.runner, protocol.DirectionResult, "forged")
	_, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: lease(c), Envelope: forged, Disposition: protocol.DispositionOK})
	requireRefusal(t, err, store.RefusedOtherDevice)
	j := b.requireState(t, "a", store.Ready)
	require.Nil(t, j.Result, "nothing of the refused result is kept")

	require.False(t, b.complete(t, c, protocol.DispositionOK).Duplicate, "the holder's own result is still the first")
	_, err = b.s.Result(b.ctx, store.ResultInput{LeaseInput: lease(c), Envelope: forged, Disposition: protocol.DispositionOK})
	requireRefusal(t, err, store.RefusedOtherDevice)
	require.Equal(t, envelope(protocol.DirectionResult, "a-ok"), *b.requireState(t, "a", store.Done).Result)
}

func resultRefusesStaleLeaseDoneJob(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	b.runToDone(t, c)
	stale := lease(c)
	stale.LeaseID = "00000000-0000-4000-8000-000000000000"
	_, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: stale, Envelope: envelope(protocol.DirectionResult, "x"), Disposition: protocol.DispositionOK})
	requireRefusal(t, err, store.RefusedStaleLease)
}

func resultAcceptsResultBeforePayload(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	require.False(t, b.complete(t, c, protocol.DispositionCanceled).Duplicate)
	j := b.requireState(t, "a", store.Done)
	require.Equal(t, c.Lease.ID, j.ClaimedBy.LeaseID)
	require.Equal(t, protocol.DispositionCanceled, j.Disposition)
}

func resultRefusesResultAfterLeaseLapsed(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	b.seal(t, c)
	b.advance(t, leaseMs*time.Millisecond)
	_, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: lease(c), Envelope: envelope(protocol.DirectionResult, "late"), Disposition: protocol.DispositionOK})
	requireRefusal(t, err, store.RefusedNotHolder)
	j := b.requireState(t, "a", store.Queued)
	require.Nil(t, j.Result)
}

func releaseGivesBackGrantNames(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	b.seal(t, c)
	got, err := b.s.Release(b.ctx, store.ReleaseInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, got)
	j := b.requireState(t, "a", store.Queued)
	require.Nil(t, j.ClaimedBy)
	require.Nil(t, j.Payload, "a requeue drops the payload")
	require.Zero(t, j.AwaitingUntil)
}

func releaseSkipsLeaseIDThatNot(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	got, err := b.s.Release(b.ctx, store.ReleaseInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{
		{JobID: "a", LeaseID: "00000000-0000-4000-8000-000000000000"}, {JobID: "nope", LeaseID: c.Lease.ID},
	}})
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = b.s.Release(b.ctx, store.ReleaseInput{SiteID: Site, RunnerID: bob.runner, Leases: []protocol.LeaseRef{ref(c)}})
	require.NoError(t, err)
	require.Empty(t, got)
	b.requireState(t, "a", store.AwaitingPayload)
}

func releaseReleasesDuplicatedEntryOnce(t *testing.T, b *bundle) {
	b.enqueue(t, "a", "b")
	cs := b.claimFor(t, alice, 2)
	got, err := b.s.Release(b.ctx, store.ReleaseInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(cs[1]), ref(cs[0]), ref(cs[1])}})
	require.NoError(t, err)
	require.Equal(t, []string{"b", "a"}, got)
}

func releaseDoesNotOfferJobBack(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	for range 2 {
		_, err := b.s.Release(b.ctx, store.ReleaseInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: protocol.ReasonRefused})
		require.NoError(t, err)
	}
	require.Empty(t, b.claimFor(t, alice, 64))
	j := b.requireState(t, "a", store.Queued)
	require.Equal(t, []string{alice.runner}, j.RefusedBy)
	again := b.claimOne(t, alice2)
	require.Equal(t, "a", again.ID)
	require.Equal(t, []string{alice.runner}, b.job(t, "a").RefusedBy, "refusals are never cleared")
}

func releaseKeepsJobClaimableRunnerThat(t *testing.T, b *bundle) {
	for _, reason := range []string{protocol.ReasonShutdown, protocol.ReasonPause, protocol.ReasonRevoked, protocol.ReasonBackendDown, ""} {
		b.enqueue(t, "a-"+reason)
		c := b.claimOne(t, alice)
		got, err := b.s.Release(b.ctx, store.ReleaseInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: reason})
		require.NoError(t, err)
		require.Equal(t, []string{c.ID}, got)
		require.Equal(t, c.ID, b.claimOne(t, alice).ID, "reason %q", reason)
	}
}

func releaseDoesNotUnFinishDoneJob(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	b.runToDone(t, c)
	got, err := b.s.Release(b.ctx, store.ReleaseInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: protocol.ReasonRefused})
	require.NoError(t, err)
	require.Empty(t, got)
	b.requireState(t, "a", store.Done)
	fin, err := b.s.Results(b.ctx, Site)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, jobIDs(fin))
}

func renewRenewsGrantStillHolds(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	b.seal(t, c)
	b.advance(t, 5*time.Second)
	now := b.now(t)
	res, err := b.s.Renew(b.ctx, store.RenewInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, LeaseMs: leaseMs})
	require.NoError(t, err)
	require.Empty(t, res.Lost)
	require.Equal(t, []store.Renewal{{JobID: "a", ExpiresAt: now + leaseMs}}, res.Renewed)
	require.Greater(t, res.Renewed[0].ExpiresAt, c.Lease.ExpiresAt)
	j := b.job(t, "a")
	require.Equal(t, res.Renewed[0].ExpiresAt, j.ClaimedBy.LeaseExpiresAt)
	require.Equal(t, c.Lease.ID, j.ClaimedBy.LeaseID, "one lease id for the job's whole life")
}

func renewReportsLeaseRunnerNoLonger(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	res, err := b.s.Renew(b.ctx, store.RenewInput{SiteID: Site, RunnerID: alice.runner, LeaseMs: leaseMs, Leases: []protocol.LeaseRef{
		{JobID: "a", LeaseID: "00000000-0000-4000-8000-000000000000"}, {JobID: "nope", LeaseID: c.Lease.ID},
	}})
	require.NoError(t, err)
	require.Empty(t, res.Renewed)
	require.Equal(t, []protocol.LeaseRef{
		{JobID: "a", LeaseID: "00000000-0000-4000-8000-000000000000"}, {JobID: "nope", LeaseID: c.Lease.ID},
	}, res.Lost, "each lost grant as the caller named it")
	res, err = b.s.Renew(b.ctx, store.RenewInput{SiteID: Site, RunnerID: bob.runner, Leases: []protocol.LeaseRef{ref(c)}, LeaseMs: leaseMs})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, lostJobs(res))
	j := b.job(t, "a")
	require.Equal(t, c.Lease.ID, j.ClaimedBy.LeaseID)
	require.Equal(t, c.Lease.ExpiresAt, j.ClaimedBy.LeaseExpiresAt)
}

func renewTellsDeviceMidFlightThatJob(t *testing.T, b *bundle) {
	b.enqueueOn(t, Site, b.stub(t, "a", deadlineIn(t, b, 20*time.Second)))
	c := b.claimOne(t, alice)
	b.seal(t, c)
	b.advance(t, 20*time.Second)
	_, err := b.s.Sweep(b.ctx)
	require.NoError(t, err)
	res, err := b.s.Renew(b.ctx, store.RenewInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, LeaseMs: leaseMs})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, lostJobs(res))
}

func renewReportsLapsedLeaseAsLost(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	b.seal(t, c)
	b.advance(t, leaseMs*time.Millisecond)
	res, err := b.s.Renew(b.ctx, store.RenewInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, LeaseMs: leaseMs})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, lostJobs(res))
	b.requireState(t, "a", store.Queued)
}

func renewNeverExtendsSealingWindow(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	before := b.job(t, "a").AwaitingUntil
	b.advance(t, time.Second)
	_, err := b.s.Renew(b.ctx, store.RenewInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, LeaseMs: leaseMs})
	require.NoError(t, err)
	require.Equal(t, before, b.job(t, "a").AwaitingUntil)
}
