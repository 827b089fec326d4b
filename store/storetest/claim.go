package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// claimContract lists the claim cases.
func claimContract(s suite) {
	// grants a stub with a fresh lease stamped from the store clock (RB-F70, RB-F71, RB-F110, RB-A6.4)
	s.run("FreshLeaseOnStoreClock", claimGrantsStubFreshLeaseStamped)
	// grants at most max, and leaves the rest claimable (RB-F57)
	s.run("AtMostMax", claimGrantsMostMax)
	// grants nothing for a max of zero (RB-B6)
	s.run("MaxZeroGrantsNothing", claimGrantsNothingMaxZero)
	// grants in first-enqueue order, and a requeued job keeps its place (RB-G14)
	s.run("FirstEnqueueOrder", claimGrantsFirstEnqueueOrder)
	// offers nothing whose owner is not in the routes (RB-F56, RB-F96)
	s.run("OwnerNotInRoutes", claimOffersNothingWhoseOwnerNot)
	// offers nothing of a kind the device did not advertise (RB-F59)
	s.run("KindNotAdvertised", claimOffersNothingKindDeviceDid)
	// offers nothing to a device that advertises no kind (RB-A6.6)
	s.run("NoKindAdvertised", claimOffersNothingDeviceThatAdvertises)
	// never offers a job of another site (RB-F47)
	s.run("NeverAnotherSite", claimNeverOffersJobAnotherSite)
	// does not offer a member's self job to the roster owner's machine (RB-F60, RB-F101)
	s.run("MembersSelfJobNotToRosterOwner", claimDoesNotOfferMembersSelf)
	// offers a self job to its owner's own machine (RB-F61, RB-F102)
	s.run("SelfJobToOwner", claimOffersSelfJobOwnersOwn)
	// offers a roster member's public and named jobs to the owner's machine (RB-F62)
	s.run("RosterMembersPublicAndNamed", claimOffersRosterMembersPublicNamed)
	// stops offering a cancelled job to anyone (RB-F38)
	s.run("CancelledOfferedToNobody", claimStopsOfferingCancelledJobAnyone)
	// sweeps first, so an abandoned job is claimable again under a new lease (RB-F58)
	s.run("SweepsFirst", claimSweepsFirst)
	// stops offering a job whose deadline has passed, and drops it (RB-F66, RB-F105)
	s.run("PastDeadlineDropped", claimStopsOfferingJobWhoseDeadline)
	// grants each job to exactly one of many concurrent claimers (RB-F83, RB-B6 CLAIM_ATOMIC)
	s.run("ConcurrentClaimersOneEach", claimGrantsEachJobExactlyOne)
	// does not hand out a stub it cannot parse, and still grants the rest (RB-F100, RB-B6)
	s.run("SkipsUnparseableStub", claimDoesNotHandOutStub)
}

func claimGrantsStubFreshLeaseStamped(t *testing.T, b *bundle) {
	s := b.stub(t, "a")
	b.enqueueOn(t, Site, s)
	now := b.now(t)
	c := b.claimOne(t, alice)
	require.Equal(t, s, c.JobStub)
	require.Regexp(t, leaseIDPattern, c.Lease.ID)
	require.Equal(t, alice.runner, c.Lease.RunnerID)
	require.Equal(t, now+leaseMs, c.Lease.ExpiresAt, "expiresAt is store now + leaseMs")
	j := b.requireState(t, "a", store.AwaitingPayload)
	require.Equal(t, &store.Claim{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice), LeaseID: c.Lease.ID, LeaseExpiresAt: now + leaseMs}, j.ClaimedBy)
	require.Equal(t, now+protocol.AwaitingPayloadMs, j.AwaitingUntil, "awaitingUntil is store now + 10000")
}

func claimGrantsMostMax(t *testing.T, b *bundle) {
	b.enqueue(t, "a", "b", "c")
	require.Equal(t, []string{"a", "b"}, ids(b.claimFor(t, alice, 2)))
	b.requireState(t, "c", store.Queued)
	require.Equal(t, []string{"c"}, ids(b.claimFor(t, alice2, 64)))
}

func claimGrantsNothingMaxZero(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	require.Empty(t, b.claimFor(t, alice, 0))
	b.requireState(t, "a", store.Queued)
}

func claimGrantsFirstEnqueueOrder(t *testing.T, b *bundle) {
	b.enqueueOn(t, Site, b.stub(t, "a", ownedBy("bob")))
	b.enqueueOn(t, Site, b.stub(t, "b", ofKind(protocol.KindChat)))
	b.enqueueOn(t, Site, b.stub(t, "c", ownedBy("bob"), ofKind(protocol.KindChat)))
	b.enqueue(t, "d")
	first := b.claimFor(t, bob, 2, "alice", "bob")
	require.Equal(t, []string{"a", "b"}, ids(first))
	released, err := b.s.Release(b.ctx, store.ReleaseInput{SiteID: Site, RunnerID: bob.runner, Leases: []protocol.LeaseRef{ref(first[0])}, Reason: protocol.ReasonShutdown})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, released)
	require.Equal(t, []string{"a", "c", "d"}, ids(b.claimFor(t, bob, 64, "bob", "alice")))
}

func claimOffersNothingWhoseOwnerNot(t *testing.T, b *bundle) {
	b.enqueueOn(t, Site, b.stub(t, "mine"))
	b.enqueueOn(t, Site, b.stub(t, "theirs", ownedBy("carol")))
	require.Equal(t, []string{"mine"}, ids(b.claimFor(t, alice, 64)))
	b.requireState(t, "theirs", store.Queued)
}

func claimOffersNothingKindDeviceDid(t *testing.T, b *bundle) {
	b.enqueue(t, "gen")
	got := b.claimInput(t, store.ClaimInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice),
		Routes: []store.Route{{SiteID: Site, Owner: "alice"}}, Kinds: []string{protocol.KindChat}, Max: 64, LeaseMs: leaseMs})
	require.Empty(t, got)
	b.requireState(t, "gen", store.Queued)
}

func claimOffersNothingDeviceThatAdvertises(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	got := b.claimInput(t, store.ClaimInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice),
		Routes: []store.Route{{SiteID: Site, Owner: "alice"}}, Max: 64, LeaseMs: leaseMs})
	require.Empty(t, got)
}

func claimNeverOffersJobAnotherSite(t *testing.T, b *bundle) {
	b.enqueueOn(t, OtherSite, b.stub(t, "foreign"))
	require.Empty(t, b.claimFor(t, alice, 64))
	j, ok, err := b.s.Job(b.ctx, OtherSite, "foreign")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, store.Queued, j.State)
}

func claimDoesNotOfferMembersSelf(t *testing.T, b *bundle) {
	b.enqueueOn(t, Site, b.stub(t, "private", forAudience(protocol.AudienceSelf)))
	require.Empty(t, b.claimFor(t, bob, 64, "bob", "alice"))
	b.requireState(t, "private", store.Queued)
}

func claimOffersSelfJobOwnersOwn(t *testing.T, b *bundle) {
	b.enqueueOn(t, Site, b.stub(t, "private", forAudience(protocol.AudienceSelf)))
	require.Equal(t, []string{"private"}, ids(b.claimFor(t, alice, 64)))
}

func claimOffersRosterMembersPublicNamed(t *testing.T, b *bundle) {
	b.enqueueOn(t, Site, b.stub(t, "pub", forAudience(protocol.AudiencePublic)))
	b.enqueueOn(t, Site, b.stub(t, "named", forAudience(protocol.AudienceNamed)))
	require.Equal(t, []string{"pub", "named"}, ids(b.claimFor(t, bob, 64, "bob", "alice")))
}

func claimStopsOfferingCancelledJobAnyone(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	ok, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: "a", SiteID: Site})
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, b.claimFor(t, alice, 64))
	j := b.requireState(t, "a", store.Queued)
	require.Nil(t, j.ClaimedBy)
}

func claimSweepsFirst(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	first := b.claimOne(t, alice)
	b.advance(t, protocol.AwaitingPayloadMs*time.Millisecond+time.Second)
	second := b.claimOne(t, alice2)
	require.Equal(t, "a", second.ID)
	require.NotEqual(t, first.Lease.ID, second.Lease.ID)
}

func claimStopsOfferingJobWhoseDeadline(t *testing.T, b *bundle) {
	b.enqueueOn(t, Site, b.stub(t, "a", deadlineIn(t, b, time.Minute)))
	b.advance(t, time.Minute)
	require.Empty(t, b.claimFor(t, alice, 64))
	b.requireGone(t, "a")
}

func claimGrantsEachJobExactlyOne(t *testing.T, b *bundle) {
	const jobs, claimers = 40, 8
	for i := range jobs {
		b.enqueue(t, fmt.Sprintf("job-%02d", i))
	}
	holders := b.raceClaims(t, claimers, store.Proto0, []store.Route{{SiteID: Site, Owner: "alice"}})
	require.Len(t, holders, jobs, "every job was granted")
	b.requireOneHolderEach(t, holders)
}

// raceClaims has claimers devices of alice claim on routes at once, up to
// three jobs a call, until each is granted nothing; it returns who was
// granted each job.
func (b *bundle) raceClaims(t *testing.T, claimers int, proto store.Proto, routes []store.Route) map[string][]string {
	t.Helper()
	var mu sync.Mutex
	holders := map[string][]string{}
	var wg sync.WaitGroup
	for w := range claimers {
		d := device{runner: fmt.Sprintf("runner_%d", w), owner: "alice"}
		wg.Go(func() {
			for {
				got, err := b.s.Claim(b.ctx, store.ClaimInput{Proto: proto, RunnerID: d.runner, Owner: d.owner, Device: identityOf(d),
					Routes: routes, Kinds: []string{protocol.KindGenerate}, Max: 3, LeaseMs: leaseMs})
				if err != nil || len(got) == 0 {
					return
				}
				mu.Lock()
				for _, c := range got {
					holders[c.ID] = append(holders[c.ID], d.runner)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return holders
}

// requireOneHolderEach checks each job raced for went to one device, the
// one the store says holds it.
func (b *bundle) requireOneHolderEach(t *testing.T, holders map[string][]string) {
	t.Helper()
	for id, h := range holders {
		require.Len(t, h, 1, "job %s granted to %v", id, h)
		require.Equal(t, h[0], b.job(t, id).ClaimedBy.RunnerID)
	}
}

func claimDoesNotHandOutStub(t *testing.T, b *bundle) {
	if b.h.WriteUnparseableJob == nil {
		t.Skip("this store keeps no serialised records, so no stored stub can fail to parse")
	}
	b.h.WriteUnparseableJob(t, "legacy", Site, "alice", protocol.KindGenerate)
	b.enqueue(t, "good")
	require.Equal(t, []string{"good"}, ids(b.claimFor(t, alice, 64)))
	require.Empty(t, b.claimFor(t, alice2, 64))
}
