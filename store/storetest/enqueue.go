package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/store"
)

// enqueueContract lists the enqueue cases.
func enqueueContract(s suite) {
	// creates a queued job holding the stub exactly as sent
	s.run("CreatesQueuedJob", enqueueCreatesQueuedJobHoldingStub)
	// is idempotent by job id: a republish keeps the claimed job and ignores the new stub (RB-F94, RB-F51)
	s.run("IdempotentByID", enqueueIdempotentJobID)
	// refuses an id another site is already using (RB-F95)
	s.run("RefusesIDOfAnotherSite", enqueueRefusesIDAnotherSiteAlready)
	// accepts a stub whose deadline has passed, and drops it at the next sweep (RB-A11.5, RB-G13)
	s.run("PastDeadlineDroppedAtSweep", enqueueAcceptsStubWhoseDeadlineHas)
	// keeps no tombstone: an id dropped at its deadline can be enqueued afresh (RB-B2)
	s.run("NoTombstone", enqueueKeepsNoTombstone)
	// lists every job in first-enqueue order, up to a limit (RB-B3)
	s.run("JobsInOrderUpToLimit", enqueueListsEveryJobFirstEnqueueOrder)
}

func enqueueCreatesQueuedJobHoldingStub(t *testing.T, b *bundle) {
	s := b.stub(t, "a")
	res := b.enqueueOn(t, Site, s)
	require.Equal(t, store.EnqueueResult{State: store.Queued, Created: true}, res)
	j := b.requireState(t, "a", store.Queued)
	require.Equal(t, s, j.Stub)
	require.Equal(t, Site, j.SiteID)
	require.Nil(t, j.ClaimedBy)
	require.Empty(t, j.RefusedBy)
	require.False(t, j.Cancelled)
}

func enqueueIdempotentJobID(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	changed := b.stub(t, "a", forAudience("self"), deadlineIn(t, b, 2*time.Hour))
	res := b.enqueueOn(t, Site, changed)
	require.Equal(t, store.EnqueueResult{State: store.AwaitingPayload}, res)
	j := b.requireState(t, "a", store.AwaitingPayload)
	require.Equal(t, c.Lease.ID, j.ClaimedBy.LeaseID, "the republish keeps the grant")
	require.Equal(t, c.JobStub, j.Stub, "the new stub is discarded")
}

func enqueueRefusesIDAnotherSiteAlready(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	before := b.job(t, "a")
	_, err := b.s.Enqueue(b.ctx, store.EnqueueInput{SiteID: OtherSite, Stub: b.stub(t, "a", ownedBy("mallory"))})
	if b.h.SitesApart {
		require.NoError(t, err, "apart, the check does not span sites")
		require.Equal(t, before, b.job(t, "a"), "the original is untouched")
		return
	}
	requireRefusal(t, err, store.RefusedIDTaken)
	require.Equal(t, before, b.job(t, "a"), "the original is untouched")
	require.Equal(t, store.EnqueueResult{State: store.Queued}, b.enqueueOn(t, Site, b.stub(t, "a")), "a same-site replay still answers")
}

func enqueueAcceptsStubWhoseDeadlineHas(t *testing.T, b *bundle) {
	res := b.enqueueOn(t, Site, b.stub(t, "late", deadlineIn(t, b, -time.Second)))
	require.Equal(t, store.Queued, res.State)
	sw, err := b.s.Sweep(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"late"}, sw.Expired)
	b.requireGone(t, "late")
}

func enqueueKeepsNoTombstone(t *testing.T, b *bundle) {
	b.enqueueOn(t, Site, b.stub(t, "a", deadlineIn(t, b, time.Second)))
	b.claimOne(t, alice)
	b.advance(t, 2*time.Second)
	res := b.enqueueOn(t, Site, b.stub(t, "a"))
	require.Equal(t, store.EnqueueResult{State: store.Queued, Created: true}, res)
	j := b.requireState(t, "a", store.Queued)
	require.Nil(t, j.ClaimedBy)
}

func enqueueListsEveryJobFirstEnqueueOrder(t *testing.T, b *bundle) {
	b.enqueue(t, "c", "a", "b")
	all, err := b.s.Jobs(b.ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"c", "a", "b"}, jobIDs(all))
	two, err := b.s.Jobs(b.ctx, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"c", "a"}, jobIDs(two))
	_, ok, err := b.s.Job(b.ctx, Site, "missing")
	require.NoError(t, err)
	require.False(t, ok)
}
