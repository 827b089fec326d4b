package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// holderContract2 lists the cases of README RD-D14: a sealed protocol-"2"
// job whose lease lapses goes back to its holder under the same lease.
func holderContract2(s suite) {
	// v2: a sealed job's lapsed lease goes back to its holder, same lease id, still ready (RD-D14)
	s.run("RD_D14_SameLeaseStillReady", holder2RegrantsSameLease)
	// v2: while it waits for its holder, no other runner is offered it and the site sees no pending job (RD-D14)
	s.run("RD_D14_HiddenFromOthers", holder2HiddenFromOthers)
	// v2: the holder must come back with the device the payload was sealed to (RD-D14)
	s.run("RD_D14_SameDeviceOnly", holder2SameDeviceOnly)
	// v2: a holder that does not come back within store.HolderReturnMs loses it to the queue (RD-D14)
	s.run("RD_D14_WindowEndsToQueue", holder2WindowEnds)
	// v2: an unsealed job's lapse is unchanged: a sealing lapse, a new lease (RD-D14)
	s.run("RD_D14_UnsealedUnchanged", holder2UnsealedUnchanged)
	// v2: the holder's window is store.HolderReturnMs whatever the lease length (RD-D14)
	s.run("RD_D14_WindowIgnoresLeaseLength", holder2WindowIgnoresLeaseLength)
}

// sealedAndLapsed claims job id for alice, seals it, lets her fetch it
// (running) and lets the lease lapse: the daemon lost its result.
func (b *bundle) sealedAndLapsed(t *testing.T, id string) protocol.ClaimedStub {
	b.enqueue2(t, id)
	c := b.claim2One(t, alice)
	b.sealOn(t, Site, c)
	_, err := b.fetch2(c)
	require.NoError(t, err)
	b.advance(t, leaseMs*time.Millisecond)
	return c
}

func holder2RegrantsSameLease(t *testing.T, b *bundle) {
	c := b.sealedAndLapsed(t, "a")
	res := b.sweep(t)
	require.Empty(t, normalised(res).Requeued, "kept for its holder, not requeued")
	j := b.requireState(t, "a", store.Ready)
	require.NotNil(t, j.Payload, "the sealed payload is kept")
	require.Zero(t, j.SealAttempts, "a lease lapse is no sealing attempt")

	now := b.now(t)
	again := b.claim2One(t, alice)
	require.Equal(t, c.ID, again.ID)
	require.Equal(t, c.Lease.ID, again.Lease.ID, "the lease the site sealed to")
	require.Equal(t, now+leaseMs, again.Lease.ExpiresAt, "with a fresh expiry")
	b.requireState(t, "a", store.Ready)
	_, err := b.fetch2(again)
	require.NoError(t, err, "fetched again straight away: no new seal")
	require.False(t, b.complete2(t, again, protocol.DispositionOK).Duplicate)
	b.requireState(t, "a", store.Done)
}

func holder2HiddenFromOthers(t *testing.T, b *bundle) {
	b.sealedAndLapsed(t, "a")
	require.Empty(t, b.claim2(t, alice2, 10), "another device is not offered it")
	pending, err := b.s.Pending(b.ctx, Site)
	require.NoError(t, err)
	require.Empty(t, pending, "the site is never asked to seal it again")
}

func holder2SameDeviceOnly(t *testing.T, b *bundle) {
	b.sealedAndLapsed(t, "a")
	rotated := identityOf(alice2) // another key under alice's runner id
	got := b.claimInput(t, store.ClaimInput{
		Proto: store.Proto2, RunnerID: alice.runner, Owner: alice.owner, Device: rotated, Routes: []store.Route{on(Site, alice.owner)},
		Kinds: []string{protocol.KindGenerate, protocol.KindChat}, Max: 10, LeaseMs: leaseMs,
	})
	require.Empty(t, got, "a payload sealed to one key never goes to another")
	b.requireState(t, "a", store.Ready)
}

func holder2WindowEnds(t *testing.T, b *bundle) {
	c := b.sealedAndLapsed(t, "a")
	b.sweep(t)
	b.advance(t, store.HolderReturnMs*time.Millisecond)
	res := b.sweep(t)
	require.Equal(t, store.SweepResult{Requeued: []string{"a"}}, normalised(res))
	j := b.requireState(t, "a", store.Queued)
	require.Nil(t, j.Payload)
	require.Nil(t, j.ClaimedBy)
	_, err := b.fetch2(c)
	require.Error(t, err, "the old lease is spent")
	require.NotEqual(t, c.Lease.ID, b.claim2One(t, alice2).Lease.ID, "anyone may claim it, under a new lease")
}

func holder2UnsealedUnchanged(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	c := b.claim2One(t, alice)
	b.lapse(t)
	j := b.requireState(t, "a", store.Queued)
	require.Equal(t, 1, j.SealAttempts)
	require.NotEqual(t, c.Lease.ID, b.claim2One(t, alice).Lease.ID)
}

// holder2WindowIgnoresLeaseLength: with leases far shorter than the
// window, a holder that comes back several lease lengths after the lapse,
// but within store.HolderReturnMs, still gets its job. The published
// daemon's way back (a 10 s sleep after an error, an idle poll of up to
// 11.5 s, a 30 s breaker on re-working a job) does not shrink with the
// relay's lease (README RD-D14).
func holder2WindowIgnoresLeaseLength(t *testing.T, b *bundle) {
	const short = 5_000
	require.Less(t, 4*short, store.HolderReturnMs, "the case needs a lease well under the window")
	claim := func(d device) []protocol.ClaimedStub {
		return b.claimInput(t, store.ClaimInput{
			Proto: store.Proto2, RunnerID: d.runner, Owner: d.owner, Device: identityOf(d), Routes: []store.Route{on(Site, d.owner)},
			Kinds: []string{protocol.KindGenerate}, Max: 1, LeaseMs: short,
		})
	}
	b.enqueue2(t, "a")
	first := claim(alice)
	require.Len(t, first, 1)
	b.sealOn(t, Site, first[0])
	_, err := b.fetch2(first[0])
	require.NoError(t, err)
	b.advance(t, (short+3*short)*time.Millisecond) // lapsed three lease lengths ago
	require.Empty(t, normalised(b.sweep(t)).Requeued, "still waiting for its holder")
	require.Empty(t, claim(alice2), "and for no one else")
	again := claim(alice)
	require.Len(t, again, 1, "the holder gets it back past a lease length")
	require.Equal(t, first[0].Lease.ID, again[0].Lease.ID)
}
