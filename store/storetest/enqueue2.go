package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// enqueueContract2 lists the protocol "2" enqueue cases.
func enqueueContract2(s suite) {
	// v2: creates a queued job tagged with its protocol (P2-ST2)
	s.run("V2TaggedWithProtocol", enqueue2CreatesQueuedJobTagged)
	// v2: is idempotent by job id (published case 1)
	s.run("V2IdempotentByID", enqueue2IdempotentJobID)
	// v2: gives two sites the same id without either seeing the other (published case 7)
	s.run("V2TwoSitesOneID", enqueue2GivesTwoSitesSameID)
	// v2: never refuses an id, not even one a protocol-0 job of another site holds (P2-ST2, P2-A4)
	s.run("V2NeverRefusesID", enqueue2NeverRefusesID)
	// v0: is refused id-taken by a protocol-0 job of another site only, never by a protocol-2 one (P2-A4)
	s.run("V0IDTakenOnlyByV0", enqueue0IDTakenOnlyByV0)
	// republishing under the other protocol returns the existing job and keeps its protocol (P2-A3)
	s.run("AcrossProtocolsKeepsFirst", enqueueAcrossProtocolsKeeps)
	// v2: lists every job of every site and protocol in first-enqueue order (P2-ST4)
	s.run("V2JobsOfEverySite", enqueue2ListsEveryJobEverySite)
	// v2: keeps no tombstone: an id dropped at its deadline can be enqueued afresh (P2-ST2)
	s.run("V2NoTombstone", enqueue2KeepsNoTombstone)
	// v2: reports the sealing bookkeeping in Job and Jobs alike (§6.1)
	s.run("V2SealingBookkeeping", enqueue2ReportsBookkeeping)
}

func enqueue2CreatesQueuedJobTagged(t *testing.T, b *bundle) {
	s := b.stub2(t, "a")
	s.Purpose = "summarise"
	require.Equal(t, store.EnqueueResult{State: store.Queued, Created: true}, b.enqueue2On(t, Site, s))
	j := b.requireState(t, "a", store.Queued)
	require.Equal(t, store.Proto2, j.Proto)
	require.Equal(t, s, j.Stub, "the stub is kept exactly, purpose included")
	require.Equal(t, Site, j.SiteID)
	require.Empty(t, j.RefusedBy)
	require.Zero(t, j.SealAttempts)
	require.Empty(t, j.ReofferTo)
	require.Empty(t, j.RetryAfter)
}

func enqueue2IdempotentJobID(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	res := b.enqueue2On(t, Site, b.stub2(t, "a", forAudience(audienceTeam), deadlineIn(t, b, 2*time.Hour)))
	require.Equal(t, store.EnqueueResult{State: store.AwaitingPayload}, res)
	j := b.requireState(t, "a", store.AwaitingPayload)
	require.Equal(t, c.Lease.ID, j.ClaimedBy.LeaseID, "the republish keeps the grant")
	require.Equal(t, c.JobStub, j.Stub, "the new stub is ignored")
}

func enqueue2GivesTwoSitesSameID(t *testing.T, b *bundle) {
	mine := b.stub2(t, "shared")
	theirs := b.stub2(t, "shared", ownedBy("bob"))
	require.True(t, b.enqueue2On(t, Site, mine).Created)
	require.True(t, b.enqueue2On(t, OtherSite, theirs).Created, "another site's id is no obstacle")
	require.Equal(t, mine, b.jobOn(t, Site, "shared").Stub)
	require.Equal(t, theirs, b.jobOn(t, OtherSite, "shared").Stub)

	got := b.claim2(t, alice, 10)
	require.Len(t, got, 1)
	require.Equal(t, mine, got[0].JobStub, "a claim for the site gets only its own job")
	require.Equal(t, store.Queued, b.jobOn(t, OtherSite, "shared").State)

	before := b.jobOn(t, OtherSite, "shared")
	require.Equal(t, store.EnqueueResult{State: store.Queued}, b.enqueue2On(t, OtherSite, theirs))
	require.Equal(t, before, b.jobOn(t, OtherSite, "shared"), "a replay leaves the stored job as it was")
}

func enqueue2NeverRefusesID(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	require.True(t, b.enqueue2On(t, OtherSite, b.stub2(t, "a", ownedBy("bob"))).Created)
	require.Equal(t, store.Proto0, b.job(t, "a").Proto)
	require.Equal(t, store.Proto2, b.jobOn(t, OtherSite, "a").Proto)
}

func enqueue0IDTakenOnlyByV0(t *testing.T, b *bundle) {
	b.enqueue2On(t, OtherSite, b.stub2(t, "v2-held"))
	require.True(t, b.enqueueOn(t, Site, b.stub(t, "v2-held")).Created, "a protocol-2 job's id is not taken for protocol 0")

	b.enqueue(t, "v0-held")
	res, err := b.s.Enqueue(b.ctx, store.EnqueueInput{SiteID: OtherSite, Proto: store.Proto0, Stub: b.stub(t, "v0-held")})
	if b.h.SitesApart {
		require.NoError(t, err, "apart, the check does not span sites")
		require.True(t, res.Created)
		require.Equal(t, store.Proto0, b.job(t, "v0-held").Proto, "and the first site's job stands")
		return
	}
	requireRefusal(t, err, store.RefusedIDTaken)
	_, ok, err := b.s.Job(b.ctx, OtherSite, "v0-held")
	require.NoError(t, err)
	require.False(t, ok)
}

func enqueueAcrossProtocolsKeeps(t *testing.T, b *bundle) {
	b.enqueue(t, "v0")
	b.enqueue2(t, "v2")
	c := b.claim2One(t, alice)
	require.Equal(t, "v2", c.ID)

	res, err := b.s.Enqueue(b.ctx, store.EnqueueInput{SiteID: Site, Proto: store.Proto0, Stub: b.stub(t, "v2")})
	require.NoError(t, err)
	require.Equal(t, store.EnqueueResult{State: store.AwaitingPayload}, res)
	j := b.job(t, "v2")
	require.Equal(t, store.Proto2, j.Proto)
	require.Equal(t, c.JobStub, j.Stub)

	require.Equal(t, store.EnqueueResult{State: store.Queued}, b.enqueue2On(t, Site, b.stub2(t, "v0")))
	require.Equal(t, store.Proto0, b.job(t, "v0").Proto)
	require.Equal(t, protocol.AudiencePublic, b.job(t, "v0").Stub.Audience)
}

func enqueue2ListsEveryJobEverySite(t *testing.T, b *bundle) {
	b.enqueue2On(t, OtherSite, b.stub2(t, "x"))
	b.enqueue(t, "y")
	b.enqueue2(t, "x")
	all, err := b.s.Jobs(b.ctx, 0)
	require.NoError(t, err)
	var keys []string
	for _, j := range all {
		keys = append(keys, j.SiteID+"/"+j.ID)
	}
	want := []string{OtherSite + "/x", Site + "/y", Site + "/x"}
	if b.h.SitesApart {
		requireEachSiteInOrder(t, want, keys)
		return
	}
	require.Equal(t, want, keys)
}

// requireEachSiteInOrder asserts that got holds what want holds, the
// "site/id" keys of each site in want's order: what stays of an order
// across sites a store keeps apart.
func requireEachSiteInOrder(t *testing.T, want, got []string) {
	t.Helper()
	require.ElementsMatch(t, want, got)
	bySite := func(keys []string) map[string][]string {
		out := map[string][]string{}
		for _, k := range keys {
			site, _, _ := strings.Cut(k, "/")
			out[site] = append(out[site], k)
		}
		return out
	}
	require.Equal(t, bySite(want), bySite(got))
}

func enqueue2KeepsNoTombstone(t *testing.T, b *bundle) {
	b.enqueue2On(t, Site, b.stub2(t, "a", deadlineIn(t, b, time.Second)))
	b.claim2One(t, alice)
	b.advance(t, time.Second)
	require.Equal(t, store.EnqueueResult{State: store.Queued, Created: true}, b.enqueue2On(t, Site, b.stub2(t, "a")))
	require.Nil(t, b.requireState(t, "a", store.Queued).ClaimedBy)
}

func enqueue2ReportsBookkeeping(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	b.claim2One(t, alice)
	b.lapse(t)
	c := b.claim2One(t, alice)
	now := b.now(t)
	b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: protocol.ReasonRefused, RetryAfterMs: 5_000})
	j := b.requireState(t, "a", store.Queued)
	require.Equal(t, store.Proto2, j.Proto)
	require.Equal(t, 1, j.SealAttempts)
	require.Equal(t, alice.runner, j.ReofferTo)
	require.Positive(t, j.ReofferUntil)
	require.Equal(t, []string{alice.runner}, j.RefusedBy)
	require.Equal(t, map[string]int64{alice.runner: now + 5_000}, j.RetryAfter)
	all, err := b.s.Jobs(b.ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []store.Job{j}, all)
}
