package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/store"
)

// The cases below pin how codes of one device identity live side by side
// (issue 27): a device's public identity is public, so a start from
// another client address must not cancel its pending code, only a start
// from the same address (a restarted daemon) replaces it, and only the
// code an operator approved is marked.

// fromOrigin is pendingFor started from origin.
func fromOrigin(runner, tag, origin string) store.PendingPairing {
	in := pendingFor(runner, tag)
	in.Origin = origin
	return in
}

// withLive is in as a lookup finds it beside n-1 other live codes of its
// identity.
func withLive(in store.PendingPairing, n int) store.PendingPairing {
	in.LiveCodes = n
	return in
}

func pairingKeepsOrigin(t *testing.T, p *pairings) {
	in := fromOrigin(alice.runner, "a", "203.0.113.7")
	in.KnownAtStart = true
	// What only the store sets is ignored on the way in.
	in.Approved, in.LiveCodes = true, 9
	want := in
	want.Approved = false
	p.requireLive(t, stamped(want, p.mustStart(t, in, 5)))

	other := fromOrigin(bob.runner, "b", "2001:db8::/64")
	p.requireLive(t, stamped(other, p.mustStart(t, other, 5)))
}

func pairingOtherOriginKeeps(t *testing.T, p *pairings) {
	mine := fromOrigin(alice.runner, "a1", "198.51.100.1")
	expReal := p.mustStart(t, mine, 5)
	// Other capabilities, the same public identity, another address.
	other := fromOrigin(alice.runner, "a2", "203.0.113.9")
	other.Capabilities = []byte(`[{"kind":"chat","models":["attacker"]}]`)
	expOther := p.mustStart(t, other, 5)

	p.requireLive(t, withLive(stamped(mine, expReal), 2))
	p.requireLive(t, withLive(stamped(other, expOther), 2))
	// Neither is marked: nobody approved either.
	got, _ := p.byDevice(t, mine.DeviceCode)
	require.False(t, got.Approved)
}

func pairingSameOriginReplaces(t *testing.T, p *pairings) {
	first := fromOrigin(alice.runner, "a1", "198.51.100.1")
	p.mustStart(t, first, 5)
	other := fromOrigin(alice.runner, "a2", "203.0.113.9")
	expOther := p.mustStart(t, other, 5)
	p.h.Advance(t, time.Second)
	restarted := fromOrigin(alice.runner, "a3", "198.51.100.1")
	expRestarted := p.mustStart(t, restarted, 5)

	p.requireGone(t, first)
	p.requireLive(t, withLive(stamped(restarted, expRestarted), 2))
	p.requireLive(t, withLive(stamped(other, expOther), 2))
}

func pairingPerDeviceBound(t *testing.T, p *pairings) {
	start := func(in store.PendingPairing) (int64, error) {
		return p.h.Pairings.StartPairing(p.ctx, store.StartPairingInput{
			Pending: in, TTLMs: pairingTTL.Milliseconds(), Capacity: 10, PerDevice: 2,
		})
	}
	a := fromOrigin(alice.runner, "a", "192.0.2.1")
	b := fromOrigin(alice.runner, "b", "192.0.2.2")
	c := fromOrigin(alice.runner, "c", "192.0.2.3")
	expA, err := start(a)
	require.NoError(t, err)
	_, err = start(b)
	require.NoError(t, err)
	_, err = start(c)
	require.Equal(t, store.RefusedAtCapacity, store.RefusalOf(err), "a third address is refused: %v", err)
	p.requireGone(t, c)
	p.requireLive(t, withLive(stamped(a, expA), 2))

	// An address that holds a code may start again: it replaces its own.
	b2 := fromOrigin(alice.runner, "b2", "192.0.2.2")
	expB2, err := start(b2)
	require.NoError(t, err)
	p.requireGone(t, b)
	p.requireLive(t, withLive(stamped(b2, expB2), 2))
	// The bound is one identity's: another device starts as ever.
	_, err = start(fromOrigin(bob.runner, "bob", "192.0.2.3"))
	require.NoError(t, err)

	// Expired codes free the identity's slots.
	p.h.Advance(t, pairingTTL)
	_, err = start(c)
	require.NoError(t, err)
}

func pairingLiveCodesCount(t *testing.T, p *pairings) {
	early := fromOrigin(alice.runner, "a1", "192.0.2.1")
	p.mustStart(t, early, 5)
	p.h.Advance(t, pairingTTL/2)
	late := fromOrigin(alice.runner, "a2", "192.0.2.2")
	expLate := p.mustStart(t, late, 5)
	p.requireLive(t, withLive(stamped(late, expLate), 2))
	p.h.Advance(t, pairingTTL/2)
	p.requireGone(t, early)
	p.requireLive(t, stamped(late, expLate))
}

func pairingApproveMarks(t *testing.T, p *pairings) {
	mine := fromOrigin(alice.runner, "a1", "198.51.100.1")
	expReal := p.mustStart(t, mine, 5)
	other := fromOrigin(alice.runner, "a2", "203.0.113.9")
	expOther := p.mustStart(t, other, 5)
	identity := mine.Device.Identity

	_, ok, err := p.h.Pairings.ApprovePairing(p.ctx, mine.UserCode, identityOf(device{runner: bob.runner}).Identity)
	require.NoError(t, err)
	require.False(t, ok, "a user code is approved only for the identity the operator saw")
	_, ok, err = p.h.Pairings.ApprovePairing(p.ctx, "ZZZZ-ZZZZ", identity)
	require.NoError(t, err)
	require.False(t, ok, "an unknown user code")

	marked := withLive(stamped(mine, expReal), 2)
	marked.Approved = true
	for range 2 { // marking again is no error and changes nothing
		got, ok, err := p.h.Pairings.ApprovePairing(p.ctx, mine.UserCode, identity)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, marked, got)
	}
	p.requireLive(t, marked)
	p.requireLive(t, withLive(stamped(other, expOther), 2))

	// A dead code cannot be approved.
	p.h.Advance(t, pairingTTL)
	_, ok, err = p.h.Pairings.ApprovePairing(p.ctx, other.UserCode, identity)
	require.NoError(t, err)
	require.False(t, ok)
}

func pairingDropSpendsIdentity(t *testing.T, p *pairings) {
	mine := fromOrigin(alice.runner, "a1", "198.51.100.1")
	other := fromOrigin(alice.runner, "a2", "203.0.113.9")
	bobs := fromOrigin(bob.runner, "b", "203.0.113.9")
	p.mustStart(t, mine, 5)
	p.mustStart(t, other, 5)
	expBob := p.mustStart(t, bobs, 5)

	require.NoError(t, p.h.Pairings.DropPairing(p.ctx, mine.DeviceCode))
	p.requireGone(t, mine)
	p.requireGone(t, other)
	p.requireLive(t, stamped(bobs, expBob))

	// The identity starts afresh, from either address.
	again := fromOrigin(alice.runner, "a3", "203.0.113.9")
	p.requireLive(t, stamped(again, p.mustStart(t, again, 5)))
}
