package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// withdrawnContract2 lists the cases of decision RD-D12: a protocol "2"
// holder's calls name the sites its owner still consents to (Sites), and
// a job of any other site is worked on no further, though release still
// gives it back.
func withdrawnContract2(s suite) {
	// v2: fetch and result of a job of a site outside Sites are refused withdrawn, after the holder checks (RD-D12)
	s.run("RD_D12_FetchAndResultRefused", withdrawn2RefusesFetchAndResult)
	// v2: a heartbeat renews only grants on jobs of its Sites; the rest are lost and lapse into the queue (RD-D12)
	s.run("RD_D12_HeartbeatRenewsOnlyItsSites", withdrawn2HeartbeatRenewsOnlyItsSites)
	// v2: release gives back a job of a withdrawn site (RD-D12)
	s.run("RD_D12_ReleaseStillGivesBack", withdrawn2ReleaseStillGivesBack)
}

// heldOnBothSites has alice claim a v2 job on Site and one on OtherSite,
// both sealed.
func heldOnBothSites(t *testing.T, b *bundle) (here, there protocol.ClaimedStub) {
	b.enqueue2(t, "here")
	b.enqueue2On(t, OtherSite, b.stub2(t, "there"))
	here = b.claim2One(t, alice, on(Site, "alice"))
	there = b.claim2One(t, alice, on(OtherSite, "alice"))
	b.sealOn(t, Site, here)
	b.sealOn(t, OtherSite, there)
	return here, there
}

// only is the lease of c restricted to sites.
func only(c protocol.ClaimedStub, sites ...string) store.LeaseInput {
	in := lease2(c)
	in.Sites = append([]string{}, sites...)
	return in
}

func withdrawn2RefusesFetchAndResult(t *testing.T, b *bundle) {
	here, there := heldOnBothSites(t, b)
	_, err := b.s.Fetch(b.ctx, only(here, OtherSite))
	requireRefusal(t, err, store.RefusedWithdrawn)
	require.Equal(t, store.Ready, b.jobOn(t, Site, "here").State, "a refused fetch hands nothing over")
	env, err := b.s.Fetch(b.ctx, only(there, OtherSite))
	require.NoError(t, err)
	require.Equal(t, envelopeFor(alice.runner, protocol.DirectionPayload, "there"), env)

	// The holder checks come first: a stranger and a stale lease are told
	// what they always are.
	stranger := only(here)
	stranger.RunnerID = bob.runner
	_, err = b.s.Fetch(b.ctx, stranger)
	requireRefusal(t, err, store.RefusedNotHolder)
	stale := only(here)
	stale.LeaseID = "00000000-0000-4000-8000-000000000000"
	_, err = b.s.Fetch(b.ctx, stale)
	requireRefusal(t, err, store.RefusedStaleLease)

	// An empty list is no site at all; nil restricts nothing.
	result := store.ResultInput{LeaseInput: only(here), Envelope: envelopeFor(alice.runner, protocol.DirectionResult, "here"), Disposition: protocol.DispositionOK}
	_, err = b.s.Result(b.ctx, result)
	requireRefusal(t, err, store.RefusedWithdrawn)
	require.Equal(t, store.Ready, b.jobOn(t, Site, "here").State, "a refused result records nothing")
	done, err := b.s.Results(b.ctx, Site)
	require.NoError(t, err)
	require.Empty(t, done)
	result.Sites = nil
	res, err := b.s.Result(b.ctx, result)
	require.NoError(t, err)
	require.False(t, res.Duplicate)
}

func withdrawn2HeartbeatRenewsOnlyItsSites(t *testing.T, b *bundle) {
	here, there := heldOnBothSites(t, b)
	b.advance(t, time.Second)
	now := b.now(t)
	res := b.heartbeat(t, store.HeartbeatInput{Proto: store.Proto2, RunnerID: alice.runner, Serving: true, Sites: []string{OtherSite},
		Leases: []protocol.LeaseRef{ref(here), ref(there)}, LeaseMs: leaseMs})
	require.Equal(t, store.RenewResult{
		Renewed: []store.Renewal{{JobID: "there", ExpiresAt: now + leaseMs}},
		Lost:    []protocol.LeaseRef{ref(here)},
	}, res.Renewed)
	require.Equal(t, here.Lease.ExpiresAt, b.jobOn(t, Site, "here").ClaimedBy.LeaseExpiresAt, "nothing renewed")

	// The lost grant lapses at its own expiry, into the queue; the renewed
	// one is still held.
	b.advance(t, time.Duration(here.Lease.ExpiresAt-now)*time.Millisecond)
	b.sweep(t)
	// Sealed, it waits one lease length for its holder (RD-D14), which cannot
	// claim it again while the site is withdrawn.
	require.Empty(t, b.claim2(t, alice, 10, on(OtherSite, alice.owner)))
	b.advance(t, store.HolderReturnMs*time.Millisecond)
	b.sweep(t)
	require.Equal(t, store.Queued, b.jobOn(t, Site, "here").State)
	require.Equal(t, store.Ready, b.jobOn(t, OtherSite, "there").State)
	require.Equal(t, alice.runner, b.jobOn(t, OtherSite, "there").ClaimedBy.RunnerID)
}

func withdrawn2ReleaseStillGivesBack(t *testing.T, b *bundle) {
	here, _ := heldOnBothSites(t, b)
	_, err := b.s.Fetch(b.ctx, only(here, OtherSite))
	requireRefusal(t, err, store.RefusedWithdrawn)
	got := b.release2(t, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(here)}, Reason: protocol.ReasonRevoked})
	require.Equal(t, []string{"here"}, got)
	require.Equal(t, store.Queued, b.jobOn(t, Site, "here").State)
	require.Empty(t, b.jobOn(t, Site, "here").RefusedBy, "a revoked release bars nobody")
}
