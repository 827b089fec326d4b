package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// runner9 is a device of alice's that nothing was ever offered to.
var runner9 = device{runner: "runner_9", owner: "alice"}

// claimContract2 lists the protocol "2" claim cases.
func claimContract2(s suite) {
	// v2: grants a stub with a lease stamped from the store clock (published case 38)
	s.run("V2LeaseOnStoreClock", claim2GrantsStubStampedFromStoreClock)
	// v2: hands one route at most two unsealed grants at a time (published case 2)
	s.run("V2TwoUnsealedPerRoute", claim2HandsOneRouteTwoUnsealed)
	// v2: counts the cap per owner, not per site (published case 3)
	s.run("V2CapPerOwner", claim2CountsCapPerOwner)
	// v2: counts the cap per site, not per owner alone (P2-R4.4.1)
	s.run("V2CapPerSite", claim2CountsCapPerSite)
	// v2: counts the cap across every device serving the route (P2-R4.4.1)
	s.run("V2CapAcrossDevices", claim2CountsCapAcrossDevices)
	// v2: lets a sealing site keep working (published case 6)
	s.run("V2SealingSiteKeepsWorking", claim2LetsSealingSiteKeepWorking)
	// v2: frees a slot when a grant is released (P2-R4.4.1)
	s.run("V2ReleaseFreesSlot", claim2FreesSlotWhenReleased)
	// v0: has no unsealed cap, and its grants do not count toward protocol 2's (§2.4.3)
	s.run("V0NoUnsealedCap", claim0HasNoCap)
	// v2: re-offers an abandoned grant only to the device that abandoned it (published case 4)
	s.run("V2ReofferToAbandoner", claim2ReoffersAbandonedGrantOnly)
	// v2: leaves an unabandoned job free for whoever asks (published case 5)
	s.run("V2UnabandonedIsFree", claim2LeavesUnabandonedJobFree)
	// a re-offered job is claimable by others once its runner refused it (P2-D8, P2-S44)
	s.run("P2_D8_ReofferEndsOnRefusal", claim2ReofferEndsOnRefusal)
	// a re-offered job is claimable by others once its runner let one window pass (P2-D8)
	s.run("P2_D8_ReofferEndsAfterOneWindow", claim2ReofferEndsAfterWindow)
	// the re-offer runner's own next lapse re-offers it for another window (P2-D8, §4.5)
	s.run("P2_D8_ReofferRestartsOnOwnLapse", claim2ReofferRestartsOnOwnLapse)
	// a lapse applied late re-offers for one window past the lapsed sealing window, not past the sweep (P2-D8)
	s.run("P2_D8_ReofferWindowFollowsTheLapse", claim2ReofferWindowFollowsLapse)
	// v2: grants only what the routes allow (published case 8)
	s.run("V2OnlyWhatRoutesAllow", claim2GrantsOnlyWhatRoutesAllow)
	// v2: honours a private job's audience (published case 14)
	s.run("V2PrivateAudience", claim2HonoursPrivateAudience)
	// v2: still offers a private job to its owner's own machine (published case 15)
	s.run("V2PrivateToOwner", claim2OffersPrivateToOwner)
	// v2: offers a roster member's team job, not their private one, to the roster owner's machine (P2-R4.2.4)
	s.run("V2TeamJobToRosterOwner", claim2OffersTeamJobToRoster)
	// v2: offers a job to any device that serves its kind (published case 29)
	s.run("V2AnyDeviceServingKind", claim2OffersJobServesKind)
	// v2: does not offer a job to a device that serves a different kind (published case 30)
	s.run("V2NotToOtherKind", claim2DoesNotOfferOtherKind)
	// v2: grants across routes of several sites in first-enqueue order (P2-R4.1.5)
	s.run("V2AcrossSitesInOrder", claim2GrantsAcrossSitesInOrder)
	// sees only its own protocol's jobs, both ways (§2.4.3 item 3)
	s.run("OwnProtocolOnly", claimSeesOnlyOwnProtocol)
	// v2: stops offering a cancelled job to anyone (§4.3 step 8)
	s.run("V2CancelledOfferedToNobody", claim2StopsOfferingCancelled)
	// v2: does not hand out a stub it cannot parse, and still grants the rest (published case 13)
	s.run("V2SkipsUnparseableStub", claim2DoesNotHandOutUnparseableStub)
	// v2: grants each job to exactly one of many concurrent claimers, never past a route's cap (P2-G1, P2-R4.4.1)
	s.run("V2ConcurrentClaimersOneEach", claim2GrantsEachJobOnceConcurrently)
}

func claim2GrantsStubStampedFromStoreClock(t *testing.T, b *bundle) {
	s := b.stub2(t, "a")
	b.enqueue2On(t, Site, s)
	now := b.now(t)
	got := b.claimInput(t, store.ClaimInput{Proto: store.Proto2, RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice),
		Routes: []store.Route{on(Site, "alice")}, Kinds: []string{protocol.KindGenerate}, Max: 10, LeaseMs: 45_000})
	require.Len(t, got, 1)
	require.Equal(t, s, got[0].JobStub)
	require.Regexp(t, leaseIDPattern, got[0].Lease.ID)
	require.Equal(t, now+45_000, got[0].Lease.ExpiresAt)
	j := b.requireState(t, "a", store.AwaitingPayload)
	require.Equal(t, &store.Claim{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice), LeaseID: got[0].Lease.ID, LeaseExpiresAt: now + 45_000}, j.ClaimedBy)
	require.Equal(t, now+protocol.AwaitingPayloadMs, j.AwaitingUntil)
}

func enqueueNumbered(t *testing.T, b *bundle, site, prefix, owner string, n int) {
	for i := range n {
		b.enqueue2On(t, site, b.stub2(t, fmt.Sprintf("%s%d", prefix, i), ownedBy(owner)))
	}
}

func claim2HandsOneRouteTwoUnsealed(t *testing.T, b *bundle) {
	enqueueNumbered(t, b, Site, "j", "alice", 10)
	require.Equal(t, []string{"j0", "j1"}, ids(b.claim2(t, alice, 10)))
	require.Empty(t, b.claim2(t, alice, 10), "no third grant while two wait for their payload")
	b.requireState(t, "j2", store.Queued)
}

func claim2CountsCapPerOwner(t *testing.T, b *bundle) {
	enqueueNumbered(t, b, Site, "a", "alice", 3)
	enqueueNumbered(t, b, Site, "b", "bob", 3)
	require.Equal(t, []string{"a0", "a1"}, ids(b.claim2(t, alice, 10)))
	require.Equal(t, []string{"b0", "b1"}, ids(b.claim2(t, bob, 10)))
}

func claim2CountsCapPerSite(t *testing.T, b *bundle) {
	enqueueNumbered(t, b, Site, "here", "alice", 3)
	enqueueNumbered(t, b, OtherSite, "there", "alice", 3)
	require.Equal(t, []string{"here0", "here1"}, ids(b.claim2(t, alice, 10, on(Site, "alice"))))
	require.Equal(t, []string{"there0", "there1"}, ids(b.claim2(t, alice, 10, on(Site, "alice"), on(OtherSite, "alice"))))
}

func claim2CountsCapAcrossDevices(t *testing.T, b *bundle) {
	enqueueNumbered(t, b, Site, "j", "alice", 3)
	require.Len(t, b.claim2(t, alice, 1), 1)
	require.Len(t, b.claim2(t, alice2, 10), 1, "the second device gets the route's last slot")
	require.Empty(t, b.claim2(t, runner9, 10))
}

func claim2LetsSealingSiteKeepWorking(t *testing.T, b *bundle) {
	enqueueNumbered(t, b, Site, "j", "alice", 4)
	first := b.claim2(t, alice, 10)
	require.Equal(t, []string{"j0", "j1"}, ids(first))
	for _, c := range first {
		b.sealOn(t, Site, c)
	}
	require.Equal(t, []string{"j2", "j3"}, ids(b.claim2(t, alice, 10)))
}

func claim2FreesSlotWhenReleased(t *testing.T, b *bundle) {
	enqueueNumbered(t, b, Site, "j", "alice", 3)
	first := b.claim2(t, alice, 10)
	require.Len(t, first, 2)
	require.Equal(t, []string{"j0"}, b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(first[0])}, Reason: protocol.ReasonShutdown}))
	require.Equal(t, []string{"j0"}, ids(b.claim2(t, alice2, 10)), "the freed slot goes to the first queued job")
}

func claim0HasNoCap(t *testing.T, b *bundle) {
	for i := range 5 {
		b.enqueue(t, fmt.Sprintf("v0-%d", i))
	}
	enqueueNumbered(t, b, Site, "v2-", "alice", 3)
	require.Len(t, b.claimFor(t, alice, 10), 5, "every protocol-0 job is granted at once")
	require.Equal(t, []string{"v2-0", "v2-1"}, ids(b.claim2(t, alice, 10)), "five unsealed v0 grants leave protocol 2's cap untouched")
}

func claim2ReoffersAbandonedGrantOnly(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	first := b.claim2One(t, alice)
	b.advance(t, sealingWindow+time.Second)
	require.Empty(t, b.claim2(t, alice2, 10), "another device is not offered the abandoned job")
	again := b.claim2One(t, alice)
	require.Equal(t, "a", again.ID)
	require.NotEqual(t, first.Lease.ID, again.Lease.ID)
	j := b.requireState(t, "a", store.AwaitingPayload)
	require.Equal(t, alice.runner, j.ReofferTo)
	require.Equal(t, 1, j.SealAttempts)
}

func claim2LeavesUnabandonedJobFree(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	require.Equal(t, "a", b.claim2One(t, runner9).ID)
	require.Empty(t, b.job(t, "a").ReofferTo)
}

func claim2ReofferEndsOnRefusal(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	b.claim2One(t, alice)
	b.lapse(t)
	again := b.claim2One(t, alice)
	require.Equal(t, []string{"a"}, b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(again)}, Reason: protocol.ReasonRefused}))
	require.Empty(t, b.claim2(t, alice, 10), "the runner that refused it is not offered it")
	require.Equal(t, "a", b.claim2One(t, alice2).ID, "and the job is no longer kept for it")
	require.Equal(t, alice.runner, b.job(t, "a").ReofferTo, "reofferTo is never cleared")
}

func claim2ReofferEndsAfterWindow(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	b.claim2One(t, alice)
	awaitingUntil := b.job(t, "a").AwaitingUntil
	b.lapse(t)
	j := b.requireState(t, "a", store.Queued)
	require.Equal(t, alice.runner, j.ReofferTo)
	require.Equal(t, awaitingUntil+protocol.AwaitingPayloadMs, j.ReofferUntil, "the re-offer lasts one sealing window past the lapse")

	b.advance(t, sealingWindow-time.Millisecond)
	require.Empty(t, b.claim2(t, alice2, 10), "a millisecond before the re-offer ends")
	b.advance(t, time.Millisecond)
	require.Equal(t, "a", b.claim2One(t, alice2).ID, "claimable by anyone once it ends")
	j = b.requireState(t, "a", store.AwaitingPayload)
	require.Equal(t, alice.runner, j.ReofferTo)
	require.Equal(t, 1, j.SealAttempts)
	reofferUntil := j.ReofferUntil

	// Another device's lapse counts, but re-offers the job to nobody.
	b.lapse(t)
	j = b.requireState(t, "a", store.Queued)
	require.Equal(t, 2, j.SealAttempts)
	require.Equal(t, alice.runner, j.ReofferTo)
	require.Equal(t, reofferUntil, j.ReofferUntil)
	require.Equal(t, "a", b.claim2One(t, runner9).ID)
}

func claim2ReofferRestartsOnOwnLapse(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	b.claim2One(t, alice)
	b.lapse(t)
	b.claim2One(t, alice)
	awaitingUntil := b.job(t, "a").AwaitingUntil
	b.lapse(t)
	j := b.requireState(t, "a", store.Queued)
	require.Equal(t, awaitingUntil+protocol.AwaitingPayloadMs, j.ReofferUntil)
	require.Empty(t, b.claim2(t, alice2, 10))

	b.advance(t, sealingWindow)
	b.claim2One(t, alice2)
	require.Equal(t, 2, b.job(t, "a").SealAttempts)
	require.Equal(t, []string{"a"}, b.lapse(t).Expired, "the third consecutive lapse evicts, whoever held it")
}

func claim2GrantsOnlyWhatRoutesAllow(t *testing.T, b *bundle) {
	b.enqueue2(t, "mine")
	b.enqueue2On(t, Site, b.stub2(t, "theirs", ownedBy("mallory"), forAudience(audienceTeam)))
	require.Equal(t, []string{"mine"}, ids(b.claim2(t, alice, 10)))
	b.requireState(t, "theirs", store.Queued)
}

func claim2HonoursPrivateAudience(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	owner := device{runner: "runner_1", owner: "owner"}
	require.Empty(t, b.claim2(t, owner, 10, on(Site, "owner"), on(Site, "alice")))
	b.requireState(t, "a", store.Queued)
}

func claim2OffersPrivateToOwner(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	require.Equal(t, []string{"a"}, ids(b.claim2(t, alice, 10)))
}

func claim2OffersTeamJobToRoster(t *testing.T, b *bundle) {
	b.enqueue2(t, "private")
	b.enqueue2On(t, Site, b.stub2(t, "team", forAudience(audienceTeam)))
	b.enqueue2On(t, Site, b.stub2(t, "own", ownedBy("bob")))
	require.Equal(t, []string{"team", "own"}, ids(b.claim2(t, bob, 10, on(Site, "bob"), on(Site, "alice"))))
	require.Equal(t, []string{"private"}, ids(b.claim2(t, alice, 10)))
}

func claim2OffersJobServesKind(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	got := b.claimInput(t, store.ClaimInput{Proto: store.Proto2, RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice),
		Routes: []store.Route{on(Site, "alice")}, Kinds: []string{protocol.KindGenerate}, Max: 10, LeaseMs: leaseMs})
	require.Equal(t, []string{"a"}, ids(got))
}

func claim2DoesNotOfferOtherKind(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	got := b.claimInput(t, store.ClaimInput{Proto: store.Proto2, RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice),
		Routes: []store.Route{on(Site, "alice")}, Kinds: []string{protocol.KindChat}, Max: 10, LeaseMs: leaseMs})
	require.Empty(t, got)
	b.requireState(t, "a", store.Queued)
}

func claim2GrantsAcrossSitesInOrder(t *testing.T, b *bundle) {
	b.enqueue2On(t, OtherSite, b.stub2(t, "o1"))
	b.enqueue2On(t, Site, b.stub2(t, "s1", ofKind(protocol.KindChat)))
	b.enqueue2On(t, Site, b.stub2(t, "s2", ownedBy("bob"), forAudience(audienceTeam)))
	b.enqueue2On(t, OtherSite, b.stub2(t, "o2", ownedBy("bob"), forAudience(audienceTeam)))
	got := b.claim2(t, alice, 10, on(OtherSite, "bob"), on(Site, "alice"), on(Site, "bob"), on(OtherSite, "alice"))
	if b.h.SitesApart {
		siteOf := map[string]string{"o1": OtherSite, "s1": Site, "s2": Site, "o2": OtherSite}
		var keys []string
		for _, c := range got {
			keys = append(keys, siteOf[c.ID]+"/"+c.ID)
		}
		requireEachSiteInOrder(t, []string{OtherSite + "/o1", Site + "/s1", Site + "/s2", OtherSite + "/o2"}, keys)
		return
	}
	require.Equal(t, []string{"o1", "s1", "s2", "o2"}, ids(got))
}

func claimSeesOnlyOwnProtocol(t *testing.T, b *bundle) {
	b.enqueue(t, "v0")
	b.enqueue2On(t, Site, b.stub2(t, "v2", forAudience(audienceTeam)))
	require.Equal(t, []string{"v2"}, ids(b.claim2(t, alice, 10)), "a v2 claim never sees a v0 stub")
	require.Equal(t, []string{"v0"}, ids(b.claimFor(t, alice2, 10)), "a v0 claim never sees a v2 stub")
}

func claim2StopsOfferingCancelled(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	require.True(t, b.cancel(t, Site, "a"))
	require.Empty(t, b.claim2(t, alice, 10))
	require.Nil(t, b.requireState(t, "a", store.Queued).ClaimedBy)
}

func claim2DoesNotHandOutUnparseableStub(t *testing.T, b *bundle) {
	if b.h.WriteUnparseableJob2 == nil {
		t.Skip("this store keeps no serialised records, so no stored stub can fail to parse")
	}
	b.h.WriteUnparseableJob2(t, "legacy", Site, "alice", protocol.KindGenerate)
	b.enqueue2(t, "good")
	require.Equal(t, []string{"good"}, ids(b.claim2(t, alice, 10)))
	require.Empty(t, b.claim2(t, alice2, 10))
}

func claim2GrantsEachJobOnceConcurrently(t *testing.T, b *bundle) {
	const owners, perOwner, claimers = 6, 4, 8
	var routes []store.Route
	for o := range owners {
		owner := fmt.Sprintf("owner_%d", o)
		routes = append(routes, on(Site, owner))
		for i := range perOwner {
			b.enqueue2On(t, Site, b.stub2(t, fmt.Sprintf("%s-%d", owner, i), ownedBy(owner), forAudience(audienceTeam)))
		}
	}
	holders := b.raceClaims(t, claimers, store.Proto2, routes)
	require.Len(t, holders, owners*store.UnsealedPerRoute, "each route granted exactly its cap")
	b.requireOneHolderEach(t, holders)
}

func claim2ReofferWindowFollowsLapse(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	b.claim2One(t, alice)
	awaitingUntil := b.job(t, "a").AwaitingUntil
	b.advance(t, sealingWindow+4*time.Second)
	require.Equal(t, []string{"a"}, b.sweep(t).Lapsed)
	require.Equal(t, awaitingUntil+protocol.AwaitingPayloadMs, b.requireState(t, "a", store.Queued).ReofferUntil)
	b.advance(t, sealingWindow-4*time.Second)
	require.Equal(t, "a", b.claim2One(t, alice2).ID, "one window after the lapse, whenever it was applied")
}
