package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// payloadContract lists the payload cases.
func payloadContract(s suite) {
	// stores the payload of a job awaiting it and makes it ready (RB-B10)
	s.run("MakesReady", payloadStoresPayloadJobAwaitingMakes)
	// answers not-found for an unknown job or another site's job (RB-B10, RB-F25)
	s.run("NotFound", payloadAnswersNotFoundUnknownJobAnother)
	// is too late for a job not awaiting a payload, naming its state (RB-B10, RB-F20)
	s.run("TooLateNamesState", payloadTooLateJobNotAwaiting)
	// a payload sealed to an earlier holder is refused, and the job waits for its own (P2-D11)
	s.run("P2_D11_StaleSealIsRefused", payloadRefusesSealToEarlierHolder)
	// a payload naming no device that holds the job is refused (P2-D11)
	s.run("P2_D11_SealNamingNoHolder", payloadRefusesSealNamingNoHolder)
	// is too late once the sealing window lapsed, whether or not a sweep ran (relayd RB-G8)
	s.run("TooLateOnceWindowLapsed", payloadTooLateOnceSealingWindow)
}

// cancelContract lists the cancel cases.
func cancelContract(s suite) {
	// flags a site's own job, leaving its state alone, and is idempotent (RB-B11, RB-F106)
	s.run("FlagsOwnJob", cancelFlagsSitesOwnJob)
	// refuses to cancel a job of another site, or an unknown one (RB-F39, RB-F106)
	s.run("AnotherSitesOrUnknown", cancelRefusesCancelJobAnotherSite)
	// accepts a cancel of a done job (RB-B11, RB-A13.2)
	s.run("DoneJob", cancelAcceptsCancelDoneJob)
}

// cancelRequestsContract lists the cancelRequests cases.
func cancelRequestsContract(s suite) {
	// names a cancelled job to the device holding it, and to nobody else (RB-F37, RB-F106)
	s.run("NamesToHolderOnly", cancelRequestsNamesCancelledJobDeviceHolding)
	// lists cancelled jobs in first-enqueue order (RB-B12)
	s.run("FirstEnqueueOrder", cancelRequestsListsCancelledJobsFirstEnqueueOrder)
	// never lists a finished job (relayd RB-G11)
	s.run("NeverFinished", cancelRequestsNeverListsFinishedJob)
	// drops a cancelled job the sweep took back (RB-B16)
	s.run("DropsSweptJob", cancelRequestsDropsCancelledJobSweepTook)
}

// pendingContract lists the pending cases.
func pendingContract(s suite) {
	// lists the site's jobs awaiting a payload, cancelled ones included, in order (RB-B4, RB-A14.3)
	s.run("AwaitingPayloadInOrder", pendingListsSitesJobsAwaitingPayload)
}

// resultsContract lists the results cases.
func resultsContract(s suite) {
	// lists the site's done jobs on every poll without consuming them (RB-B5, RB-A15.3, RB-F6)
	s.run("EveryPollWithoutConsuming", resultsListsSitesDoneJobsEvery)
	// summarises jobs for the debug page with sizes, never bodies
	s.run("SummariesSizesNotBodies", resultsSummariesGiveSizesNotBodies)
}

func resultsSummariesGiveSizesNotBodies(t *testing.T, b *bundle) {
	b.enqueue(t, "sealed", "done", "queued")
	b.seal(t, b.claimOne(t, alice))
	b.runToDone(t, b.claimOne(t, alice))
	all, err := b.s.Jobs(b.ctx, 0)
	require.NoError(t, err)
	sums, err := b.s.JobSummaries(b.ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"sealed", "done", "queued"}, jobIDs(all))
	require.Len(t, sums, len(all))
	for i, sum := range sums {
		require.Nil(t, sum.Payload, sum.ID)
		require.Nil(t, sum.Result, sum.ID)
		require.Equal(t, all[i].Payload != nil, sum.PayloadBytes > 0, sum.ID)
		require.Equal(t, all[i].Result != nil, sum.ResultBytes > 0, sum.ID)
		want := all[i].Clone()
		want.Payload, want.Result = nil, nil
		require.Equal(t, want, sum.Job)
	}
	require.Positive(t, sums[0].PayloadBytes)
	require.Positive(t, sums[1].ResultBytes)
	require.Zero(t, sums[2].PayloadBytes+sums[2].ResultBytes)
	one, err := b.s.JobSummaries(b.ctx, 1)
	require.NoError(t, err)
	require.Len(t, one, 1)
}

func payloadStoresPayloadJobAwaitingMakes(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	b.seal(t, c)
	j := b.requireState(t, "a", store.Ready)
	require.Equal(t, envelope(protocol.DirectionPayload, "a"), *j.Payload)
	require.Zero(t, j.AwaitingUntil, "sealing clears the window")
}

func payloadAnswersNotFoundUnknownJobAnother(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	b.claimOne(t, alice)
	for _, in := range []store.PayloadInput{{JobID: "nope", SiteID: Site}, {JobID: "a", SiteID: OtherSite}} {
		in.Envelope = envelope(protocol.DirectionPayload, "x")
		requireRefusal(t, b.s.Payload(b.ctx, in), store.RefusedNotFound)
	}
	b.requireState(t, "a", store.AwaitingPayload)
}

func payloadTooLateJobNotAwaiting(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	err := b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: envelope(protocol.DirectionPayload, "x")})
	require.Equal(t, &store.Refusal{Code: store.RefusedTooLate, Was: store.Queued}, err)
	c := b.claimOne(t, alice)
	b.seal(t, c)
	err = b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: envelope(protocol.DirectionPayload, "again")})
	require.Equal(t, &store.Refusal{Code: store.RefusedTooLate, Was: store.Ready}, err)
	require.Equal(t, envelope(protocol.DirectionPayload, "a"), *b.job(t, "a").Payload, "the first payload stays")
}

func payloadRefusesSealToEarlierHolder(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	first := b.claimOne(t, alice)
	_, err := b.s.Release(b.ctx, store.ReleaseInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(first)}, Reason: protocol.ReasonShutdown})
	require.NoError(t, err)
	second := b.claimOne(t, alice2)

	// The site read pending while alice's laptop held the job, and
	// sealed to it; her second device holds it now.
	err = b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: envelopeFor(alice.runner, protocol.DirectionPayload, "stale")})
	requireRefusal(t, err, store.RefusedOtherDevice)
	j := b.requireState(t, "a", store.AwaitingPayload)
	require.Nil(t, j.Payload, "nothing of the stale seal is kept")
	require.Equal(t, second.Lease.ID, j.ClaimedBy.LeaseID, "the second device's grant stands")

	b.seal(t, second)
	require.Equal(t, envelopeFor(alice2.runner, protocol.DirectionPayload, "a"), *b.requireState(t, "a", store.Ready).Payload)
}

func payloadRefusesSealNamingNoHolder(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	b.claimOne(t, alice)
	wrong := envelope(protocol.DirectionPayload, "x")
	wrong.RecipientKeyID = siteKeyID
	requireRefusal(t, b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: wrong}), store.RefusedOtherDevice)
	b.requireState(t, "a", store.AwaitingPayload)
}

func payloadTooLateOnceSealingWindow(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	b.claimOne(t, alice)
	b.advance(t, protocol.AwaitingPayloadMs*time.Millisecond)
	err := b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: envelope(protocol.DirectionPayload, "late")})
	require.Equal(t, &store.Refusal{Code: store.RefusedTooLate, Was: store.Queued}, err)
	j := b.requireState(t, "a", store.Queued)
	require.Nil(t, j.Payload)
}

func cancelFlagsSitesOwnJob(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	b.claimOne(t, alice)
	for range 2 {
		ok, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: "a", SiteID: Site})
		require.NoError(t, err)
		require.True(t, ok)
	}
	j := b.requireState(t, "a", store.AwaitingPayload)
	require.True(t, j.Cancelled)
}

func cancelRefusesCancelJobAnotherSite(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	ok, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: "a", SiteID: OtherSite})
	require.NoError(t, err)
	require.False(t, ok)
	require.False(t, b.job(t, "a").Cancelled)
	ok, err = b.s.Cancel(b.ctx, store.CancelInput{JobID: "nope", SiteID: Site})
	require.NoError(t, err)
	require.False(t, ok)
}

func cancelAcceptsCancelDoneJob(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	b.runToDone(t, b.claimOne(t, alice))
	ok, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: "a", SiteID: Site})
	require.NoError(t, err)
	require.True(t, ok)
	b.requireState(t, "a", store.Done)
}

func cancelRequestsNamesCancelledJobDeviceHolding(t *testing.T, b *bundle) {
	b.enqueue(t, "a", "b")
	cs := b.claimFor(t, alice, 2)
	_, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: cs[1].ID, SiteID: Site})
	require.NoError(t, err)
	got, err := b.cancelRequests(alice.runner)
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, got)
	got, err = b.cancelRequests(bob.runner)
	require.NoError(t, err)
	require.Empty(t, got)
}

func cancelRequestsListsCancelledJobsFirstEnqueueOrder(t *testing.T, b *bundle) {
	b.enqueue(t, "a", "b", "c")
	b.claimFor(t, alice, 3)
	for _, id := range []string{"c", "a"} {
		_, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: id, SiteID: Site})
		require.NoError(t, err)
	}
	got, err := b.cancelRequests(alice.runner)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "c"}, got)
}

func cancelRequestsNeverListsFinishedJob(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	_, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: "a", SiteID: Site})
	require.NoError(t, err)
	b.runToDone(t, c)
	got, err := b.cancelRequests(alice.runner)
	require.NoError(t, err)
	require.Empty(t, got)
}

func cancelRequestsDropsCancelledJobSweepTook(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	b.claimOne(t, alice)
	_, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: "a", SiteID: Site})
	require.NoError(t, err)
	b.advance(t, protocol.AwaitingPayloadMs*time.Millisecond)
	_, err = b.s.Sweep(b.ctx)
	require.NoError(t, err)
	got, err := b.cancelRequests(alice.runner)
	require.NoError(t, err)
	require.Empty(t, got)
	require.Empty(t, b.claimFor(t, alice2, 64), "and it is offered to nobody")
}

func pendingListsSitesJobsAwaitingPayload(t *testing.T, b *bundle) {
	b.enqueue(t, "a", "b", "c", "d")
	b.enqueueOn(t, OtherSite, b.stub(t, "foreign"))
	cs := b.claimFor(t, alice, 3)
	b.seal(t, cs[1])
	_, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: "c", SiteID: Site})
	require.NoError(t, err)
	got, err := b.s.Pending(b.ctx, Site)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "c"}, jobIDs(got))
	require.Equal(t, cs[0].Lease.ID, got[0].ClaimedBy.LeaseID)
	require.Equal(t, identityOf(alice), got[0].ClaimedBy.Device)
	require.Equal(t, cs[0].Lease.ExpiresAt, got[0].ClaimedBy.LeaseExpiresAt)
	require.NotEqual(t, got[0].AwaitingUntil, got[0].ClaimedBy.LeaseExpiresAt)
	other, err := b.s.Pending(b.ctx, OtherSite)
	require.NoError(t, err)
	require.Empty(t, other)
}

func resultsListsSitesDoneJobsEvery(t *testing.T, b *bundle) {
	b.enqueue(t, "a", "b", "c")
	cs := b.claimFor(t, alice, 3)
	b.runToDone(t, cs[2])
	b.runToDone(t, cs[0])
	b.seal(t, cs[1])
	for range 2 {
		got, err := b.s.Results(b.ctx, Site)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "c"}, jobIDs(got))
		require.Equal(t, alice.owner, got[0].ClaimedBy.Owner, "the pairing owner travels with the result")
		require.Equal(t, alice.runner, got[0].ClaimedBy.RunnerID)
		require.Equal(t, envelope(protocol.DirectionResult, "a-ok"), *got[0].Result)
		require.Nil(t, got[0].Payload, "a listing sites poll leaves out the payload they sealed")
	}
	job, _, err := b.s.Job(b.ctx, Site, "a")
	require.NoError(t, err)
	require.NotNil(t, job.Payload, "the job itself keeps its payload")
	other, err := b.s.Results(b.ctx, OtherSite)
	require.NoError(t, err)
	require.Empty(t, other)
}
