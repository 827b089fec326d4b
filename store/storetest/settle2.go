package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// settleContract2 lists the cases of a held claim and its settle (spec
// grants.md G-R16, G-R18, G-R56): the claim path of a device enrolled for
// grants holds what it claims until the grants are decided, so that no
// site adopts a lease about to be declined.
func settleContract2(s suite) {
	// a held claim awaits its payload unlisted and counts toward the unsealed cap (G-R56)
	s.run("HeldIsUnlisted", settle2HeldIsUnlisted)
	// a granted settle lists the job with a sealing window from the settle (G-R56)
	s.run("GrantedLists", settle2GrantedLists)
	// a refused settle bars the runner for good, and another runner can claim (G-R56)
	s.run("RefusedBarsRunner", settle2RefusedBars)
	// a returned settle bars the runner until store now + the delay, then offers it again (G-R56)
	s.run("ReturnedWaitsDelay", settle2ReturnedWaits)
	// a held job that lapses unsettled goes back as a plain requeue (G-R56)
	s.run("HeldLapseIsPlainRequeue", settle2HeldLapseIsPlain)
	// a settle acts only on current grants of its runner, and answers which were current (G-R56)
	s.run("OnlyCurrentGrants", settle2OnlyCurrent)
	// a replayed settle changes nothing and answers alike (G-R56)
	s.run("ReplayChangesNothing", settle2Replayed)
	// a held job sealed to its holder anyway is ready, and a granted settle leaves it so (G-R56)
	s.run("SealedWhileHeldIsReady", settle2SealedWhileHeld)
}

// retryAfterMs is the not-before a returned grant gets (RETRY_AFTER_MS).
const retryAfterMs = 30_000

// claimHeld is a v2 Hold claim by d on (Site, d's owner) for up to max.
func (b *bundle) claimHeld(t *testing.T, d device, max int) []protocol.ClaimedStub {
	return b.claimInput(t, store.ClaimInput{
		Proto: store.Proto2, RunnerID: d.runner, Owner: d.owner, Device: identityOf(d), Routes: []store.Route{on(Site, d.owner)},
		Kinds: []string{protocol.KindGenerate, protocol.KindChat}, Max: max, LeaseMs: leaseMs, Hold: true,
	})
}

func (b *bundle) settle(t *testing.T, in store.SettleGrantsInput) []protocol.LeaseRef {
	got, err := b.s.SettleGrants(b.ctx, in)
	require.NoError(t, err)
	require.NotNil(t, got, "settle returns an empty list, not nil")
	return got
}

func (b *bundle) pendingIDs(t *testing.T) []string {
	jobs, err := b.s.Pending(b.ctx, Site)
	require.NoError(t, err)
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func refs(cs ...protocol.ClaimedStub) []protocol.LeaseRef {
	out := []protocol.LeaseRef{}
	for _, c := range cs {
		out = append(out, ref(c))
	}
	return out
}

func settle2HeldIsUnlisted(t *testing.T, b *bundle) {
	b.enqueue2(t, "a", "b", "c")
	held := b.claimHeld(t, alice, 2)
	require.Equal(t, []string{"a", "b"}, ids(held))
	b.requireState(t, "a", store.AwaitingPayload)
	require.Empty(t, b.pendingIDs(t), "no site sees a held job")
	require.Empty(t, b.claim2(t, alice2, 10), "held jobs fill the route's unsealed cap")
	err := b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: envelopeFor(alice2.runner, protocol.DirectionPayload, "a")})
	requireRefusal(t, err, store.RefusedOtherDevice)
}

func settle2GrantedLists(t *testing.T, b *bundle) {
	b.enqueue2(t, "a", "b")
	held := b.claimHeld(t, alice, 2)
	b.advance(t, 4*time.Second)
	now := b.now(t)
	got := b.settle(t, store.SettleGrantsInput{RunnerID: alice.runner, Granted: refs(held...), RetryAfterMs: retryAfterMs})
	require.Equal(t, refs(held...), got)
	require.Equal(t, []string{"a", "b"}, b.pendingIDs(t))
	j := b.requireState(t, "a", store.AwaitingPayload)
	require.Equal(t, now+protocol.AwaitingPayloadMs, j.AwaitingUntil, "the site gets a whole sealing window")

	// The window is the settle's: it has not lapsed when the claim's would have.
	b.advance(t, sealingWindow-time.Second)
	b.sweep(t)
	b.requireState(t, "a", store.AwaitingPayload)
	b.sealOn(t, Site, held[0])
	b.requireState(t, "a", store.Ready)
}

func settle2RefusedBars(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	held := b.claimHeld(t, alice, 1)
	require.Empty(t, b.settle(t, store.SettleGrantsInput{RunnerID: alice.runner, Refused: refs(held...), RetryAfterMs: retryAfterMs}))
	j := b.requireState(t, "a", store.Queued)
	require.Equal(t, []string{alice.runner}, j.RefusedBy)
	require.Empty(t, j.RetryAfter, "a refusal sets no not-before")
	require.Empty(t, j.ReofferTo)
	require.Empty(t, b.claim2(t, alice, 10), "never offered to that runner again")
	require.Equal(t, "a", b.claim2One(t, alice2).ID)
}

func settle2ReturnedWaits(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	held := b.claimHeld(t, alice, 1)
	now := b.now(t)
	require.Empty(t, b.settle(t, store.SettleGrantsInput{RunnerID: alice.runner, Returned: refs(held...), RetryAfterMs: retryAfterMs}))
	j := b.requireState(t, "a", store.Queued)
	require.Equal(t, map[string]int64{alice.runner: now + retryAfterMs}, j.RetryAfter)
	require.Empty(t, j.RefusedBy)
	require.Empty(t, b.pendingIDs(t))

	b.advance(t, retryAfterMs*time.Millisecond-time.Millisecond)
	require.Empty(t, b.claim2(t, alice, 10), "a millisecond before the not-before")
	b.advance(t, time.Millisecond)
	require.Equal(t, "a", b.claim2One(t, alice).ID, "offered again once it passes")
}

func settle2HeldLapseIsPlain(t *testing.T, b *bundle) {
	// The replica that claimed died before it settled.
	b.enqueue2(t, "a")
	held := b.claimHeld(t, alice, 1)
	swept := b.lapse(t)
	require.Equal(t, []string{"a"}, swept.Requeued)
	require.Empty(t, swept.Lapsed, "no sealing window of a site's lapsed")
	j := b.requireState(t, "a", store.Queued)
	require.Empty(t, j.ReofferTo, "no re-offer")
	require.Zero(t, j.SealAttempts, "no seal attempt")
	require.Empty(t, j.RefusedBy)
	require.Empty(t, j.RetryAfter)
	require.Equal(t, "a", b.claim2One(t, alice2).ID, "any device may take it at once")

	// Settling the dead claim's lease now changes nothing.
	require.Empty(t, b.settle(t, store.SettleGrantsInput{RunnerID: alice.runner, Granted: refs(held...)}))
	require.Equal(t, alice2.runner, b.requireState(t, "a", store.AwaitingPayload).ClaimedBy.RunnerID)
}

func settle2OnlyCurrent(t *testing.T, b *bundle) {
	b.enqueue2(t, "a", "b")
	held := b.claimHeld(t, alice, 2)
	stale := held[1]
	stale.Lease.ID = "00000000-0000-4000-8000-000000000000"
	missing := protocol.LeaseRef{JobID: "nope", LeaseID: held[0].Lease.ID}

	// Another runner's settle moves nothing.
	require.Empty(t, b.settle(t, store.SettleGrantsInput{RunnerID: bob.runner, Granted: refs(held[0]), Refused: refs(held[1])}))
	require.Empty(t, b.pendingIDs(t))
	b.requireState(t, "b", store.AwaitingPayload)

	got := b.settle(t, store.SettleGrantsInput{RunnerID: alice.runner,
		Granted: []protocol.LeaseRef{ref(held[0]), ref(stale), missing}, Returned: refs(stale), RetryAfterMs: retryAfterMs})
	require.Equal(t, refs(held[0]), got, "only the current grant is answered")
	require.Equal(t, []string{"a"}, b.pendingIDs(t))
	j := b.requireState(t, "b", store.AwaitingPayload)
	require.Empty(t, j.RetryAfter, "a stale lease returns nothing")
}

func settle2Replayed(t *testing.T, b *bundle) {
	b.enqueue2(t, "a", "b")
	held := b.claimHeld(t, alice, 2)
	in := store.SettleGrantsInput{RunnerID: alice.runner, Granted: refs(held[0]), Refused: refs(held[1]), RetryAfterMs: retryAfterMs}
	first := b.settle(t, in)
	require.Equal(t, refs(held[0]), first)
	awaitingUntil := b.job(t, "a").AwaitingUntil

	b.advance(t, time.Second)
	require.Equal(t, first, b.settle(t, in))
	require.Equal(t, awaitingUntil, b.job(t, "a").AwaitingUntil, "a replay does not restart the window")
	j := b.requireState(t, "b", store.Queued)
	require.Equal(t, []string{alice.runner}, j.RefusedBy, "refused once")
	require.Equal(t, []string{"a"}, b.pendingIDs(t))
}

func settle2SealedWhileHeld(t *testing.T, b *bundle) {
	// No listing showed it, but a site that knows the device may seal.
	b.enqueue2(t, "a")
	held := b.claimHeld(t, alice, 1)
	b.sealOn(t, Site, held[0])
	b.requireState(t, "a", store.Ready)
	b.advance(t, time.Second)
	require.Equal(t, refs(held...), b.settle(t, store.SettleGrantsInput{RunnerID: alice.runner, Granted: refs(held...)}))
	j := b.requireState(t, "a", store.Ready)
	require.Zero(t, j.AwaitingUntil, "no sealing window for a sealed job")
	_, err := b.fetch2(held[0])
	require.NoError(t, err)
}
