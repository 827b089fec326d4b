package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// payloadContract2 lists the protocol "2" payload cases.
func payloadContract2(s suite) {
	// v2: stores the payload of the site's own job, by (site, id) (P2-ST12, P2-R4.1.4)
	s.run("V2BySiteAndID", payload2StoresBySiteAndID)
	// v2: is too late for a job not awaiting a payload, naming its state (P2-ST12)
	s.run("V2TooLateNamesState", payload2TooLateNamingState)
	// v2: a seal clears the sealing attempts and keeps the re-offer (P2-ST12, §4.5)
	s.run("V2ClearsSealAttempts", payload2ClearsSealAttempts)
	// v2: a late seal applies the lapse it finds, whether or not a sweep ran (P2-S17)
	s.run("V2LateSealAppliesLapse", payload2LateSealAppliesLapse)
	// v2: a payload sealed to the device whose window lapsed is refused (P2-D11)
	s.run("P2_D11_V2StaleSealIsRefused", payload2RefusesStaleSeal)
}

// cancelContract2 lists the protocol "2" cancel cases.
func cancelContract2(s suite) {
	// v2: cancels the site's own job only, by (site, id) (published case 23, P2-R4.1.4)
	s.run("V2OwnJobOnly", cancel2CancelsOwnJobOnly)
}

// cancelRequestsContract2 lists the protocol "2" cancelRequests cases.
func cancelRequestsContract2(s suite) {
	// v2: names a cancelled job to the device holding it, and offers it to nobody (published case 23)
	s.run("V2NamesToHolderOnly", cancelRequests2NamesHeldJob)
	// v2: names cancelled jobs in any state, done included (P2-ST14)
	s.run("V2IncludesDone", cancelRequests2IncludesDone)
	// lists only its own protocol's cancelled jobs (§2.4.3 item 6)
	s.run("OwnProtocolOnly", cancelRequestsOnlyOwnProtocol)
}

// pendingContract2 lists the protocol "2" pending cases.
func pendingContract2(s suite) {
	// lists the site's jobs awaiting a payload whatever their protocol (P2-A6, P2-ST5)
	s.run("EveryProtocol", pendingListsEveryProtocol)
}

// resultsContract2 lists the protocol "2" results cases.
func resultsContract2(s suite) {
	// lists the site's done jobs whatever their protocol (P2-A6, P2-ST6)
	s.run("EveryProtocol", resultsListsEveryProtocol)
}

func payload2StoresBySiteAndID(t *testing.T, b *bundle) {
	b.enqueue2(t, "shared")
	b.enqueue2On(t, OtherSite, b.stub2(t, "shared"))
	here := b.claim2One(t, alice, on(Site, "alice"))
	b.claim2One(t, alice, on(OtherSite, "alice"))
	requireRefusal(t, b.s.Payload(b.ctx, store.PayloadInput{JobID: "shared", SiteID: "site_unknown", Envelope: envelope(protocol.DirectionPayload, "x")}), store.RefusedNotFound)
	b.sealOn(t, Site, here)
	j := b.jobOn(t, Site, "shared")
	require.Equal(t, store.Ready, j.State)
	require.Equal(t, envelope(protocol.DirectionPayload, "shared"), *j.Payload)
	require.Zero(t, j.AwaitingUntil)
	other := b.jobOn(t, OtherSite, "shared")
	require.Equal(t, store.AwaitingPayload, other.State, "the other site's job with that id is untouched")
	require.Nil(t, other.Payload)
}

func payload2TooLateNamingState(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	err := b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: envelope(protocol.DirectionPayload, "x")})
	require.Equal(t, &store.Refusal{Code: store.RefusedTooLate, Was: store.Queued}, err)
	c := b.claim2One(t, alice)
	b.runToDone2(t, Site, c)
	err = b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: envelope(protocol.DirectionPayload, "again")})
	require.Equal(t, &store.Refusal{Code: store.RefusedTooLate, Was: store.Done}, err)
}

func payload2ClearsSealAttempts(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	b.claim2One(t, alice)
	b.lapse(t)
	b.claim2One(t, alice)
	b.lapse(t)
	c := b.claim2One(t, alice)
	require.Equal(t, 2, b.job(t, "a").SealAttempts)
	b.sealOn(t, Site, c)
	j := b.requireState(t, "a", store.Ready)
	require.Zero(t, j.SealAttempts, "only a seal clears the count")
	require.Equal(t, alice.runner, j.ReofferTo, "and reofferTo stays")

	b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: protocol.ReasonShutdown})
	b.claim2One(t, alice)
	sw := b.lapse(t)
	require.Equal(t, []string{"a"}, sw.Requeued, "a lapse after a seal is the first again, not the third")
	require.Equal(t, 1, b.requireState(t, "a", store.Queued).SealAttempts)
}

func payload2LateSealAppliesLapse(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	b.claim2One(t, alice)
	b.advance(t, sealingWindow)
	err := b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: envelope(protocol.DirectionPayload, "late")})
	require.Equal(t, &store.Refusal{Code: store.RefusedTooLate, Was: store.Queued}, err)
	j := b.requireState(t, "a", store.Queued)
	require.Equal(t, 1, j.SealAttempts)
	require.Equal(t, alice.runner, j.ReofferTo)
	require.Empty(t, b.sweep(t).Lapsed, "the lapse is counted once")
}

func payload2RefusesStaleSeal(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	b.claim2One(t, alice)
	b.lapse(t)
	b.advance(t, sealingWindow)
	second := b.claim2One(t, alice2)

	// The site read pending while alice's laptop held the job, and sealed
	// to it after its window lapsed; her second device holds it now.
	err := b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: envelopeFor(alice.runner, protocol.DirectionPayload, "stale")})
	requireRefusal(t, err, store.RefusedOtherDevice)
	j := b.requireState(t, "a", store.AwaitingPayload)
	require.Nil(t, j.Payload)
	require.Equal(t, second.Lease.ID, j.ClaimedBy.LeaseID)
	b.sealOn(t, Site, second)
	env, err := b.fetch2(second)
	require.NoError(t, err)
	require.Equal(t, envelopeFor(alice2.runner, protocol.DirectionPayload, "a"), env)
}

func cancel2CancelsOwnJobOnly(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	b.enqueue2On(t, OtherSite, b.stub2(t, "a"))
	require.True(t, b.cancel(t, Site, "a"))
	require.True(t, b.cancel(t, Site, "a"), "idempotent")
	require.True(t, b.jobOn(t, Site, "a").Cancelled)
	require.False(t, b.jobOn(t, OtherSite, "a").Cancelled, "the other site's job with that id is untouched")
	require.False(t, b.cancel(t, "site_unknown", "a"))
}

func cancelRequests2NamesHeldJob(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	require.True(t, b.cancel(t, Site, "a"))
	require.False(t, b.cancel(t, OtherSite, "a"), "a cancel from another site is refused")
	require.Equal(t, []protocol.LeaseRef{ref(c)}, b.cancelRequests2(t, alice.runner))
	require.Empty(t, b.cancelRequests2(t, alice2.runner))
	b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: protocol.ReasonShutdown})
	require.Empty(t, b.claim2(t, alice, 10))
	require.Empty(t, b.cancelRequests2(t, alice.runner), "a released job is no longer the runner's to stop")
}

func cancelRequests2IncludesDone(t *testing.T, b *bundle) {
	b.enqueue2(t, "done", "running", "awaiting")
	cs := b.claim2(t, alice, 2)
	b.runToDone2(t, Site, cs[0])
	b.sealOn(t, Site, cs[1])
	_, err := b.fetch2(cs[1])
	require.NoError(t, err)
	third := b.claim2One(t, alice)
	for _, id := range []string{"awaiting", "done", "running"} {
		require.True(t, b.cancel(t, Site, id))
	}
	require.Equal(t, []protocol.LeaseRef{ref(cs[0]), ref(cs[1]), ref(third)}, b.cancelRequests2(t, alice.runner), "every held job, in first-enqueue order")
}

func cancelRequestsOnlyOwnProtocol(t *testing.T, b *bundle) {
	b.enqueue(t, "v0")
	b.enqueue2(t, "v2")
	v0 := b.claimOne(t, alice)
	v2 := b.claim2One(t, alice)
	require.True(t, b.cancel(t, Site, "v0"))
	require.True(t, b.cancel(t, Site, "v2"))
	require.Equal(t, []protocol.LeaseRef{ref(v2)}, b.cancelRequests2(t, alice.runner))
	got, err := b.cancelRequests(alice.runner)
	require.NoError(t, err)
	require.Equal(t, []string{v0.ID}, got)
}

func pendingListsEveryProtocol(t *testing.T, b *bundle) {
	b.enqueue(t, "v0")
	b.enqueue2(t, "v2", "sealed")
	b.enqueue2On(t, OtherSite, b.stub2(t, "foreign"))
	b.claimOne(t, alice)
	b.claim2One(t, alice, on(OtherSite, "alice"))
	cs := b.claim2(t, alice, 10)
	require.Equal(t, []string{"v2", "sealed"}, ids(cs))
	b.sealOn(t, Site, cs[1])
	got, err := b.s.Pending(b.ctx, Site)
	require.NoError(t, err)
	require.Equal(t, []string{"v0", "v2"}, jobIDs(got))
	require.Equal(t, []store.Proto{store.Proto0, store.Proto2}, []store.Proto{got[0].Proto, got[1].Proto})
	require.Equal(t, cs[0].Lease.ID, got[1].ClaimedBy.LeaseID)
}

func resultsListsEveryProtocol(t *testing.T, b *bundle) {
	b.enqueue2(t, "v2")
	b.enqueue(t, "v0")
	b.enqueue2On(t, OtherSite, b.stub2(t, "foreign"))
	b.runToDone(t, b.claimOne(t, alice))
	b.runToDone2(t, Site, b.claim2One(t, alice))
	b.runToDone2(t, OtherSite, b.claim2One(t, alice, on(OtherSite, "alice")))
	got, err := b.s.Results(b.ctx, Site)
	require.NoError(t, err)
	require.Equal(t, []string{"v2", "v0"}, jobIDs(got))
	for _, j := range got {
		require.NotNil(t, j.Result)
		require.Nil(t, j.Payload)
	}
}
