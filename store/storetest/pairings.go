package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// PairingsHarness is one fresh, empty store.Pairings under test and the
// levers its contract needs.
type PairingsHarness struct {
	Pairings store.Pairings
	// Now reads the clock the store judges expiry by.
	Now func(t *testing.T) int64
	// Advance moves that clock forward by d. Between calls it must stand
	// still, as Harness.Advance does, so that stamps are exact.
	Advance func(t *testing.T, d time.Duration)
}

// NewPairingsHarness builds a fresh harness for one case, isolated from
// every other (they run in parallel).
type NewPairingsHarness func(t *testing.T) PairingsHarness

// pairingTTL is the code lifetime the contract starts codes with: the
// relay's, so the stamps are the ones a daemon sees.
const pairingTTL = 10 * time.Minute

// pairingPerDevice is how many codes of one identity the contract's starts
// allow (StartPairingInput.PerDevice), unless a case says otherwise.
const pairingPerDevice = 4

// RunPairings runs every case of the Pairings contract (spec protocol-2
// §5.5, §5.7), each on a store of its own and in parallel with the others.
func RunPairings(t *testing.T, newHarness NewPairingsHarness) {
	cases := []struct {
		name string
		run  func(t *testing.T, p *pairings)
	}{
		{"StartStampsExpiryOnTheStoreClock", pairingStartStamps},
		{"LookupsFindTheCodeByEitherCode", pairingLookups},
		{"KeepsEveryFieldVerbatim", pairingKeepsFields},
		{"RecordedCapacityRun", pairingRecordedCapacityRun},
		{"ReplacedCodeStaysGoneWhenRefused", pairingReplacedStaysGone},
		{"ZeroCapacityRefusesEverything", pairingZeroCapacity},
		{"ExpiresAtExactlyExpiresAt", pairingExpiresExactly},
		{"ExpiredCodesFreeCapacity", pairingExpiredFreeCapacity},
		{"OneCodePerKeypair", pairingOneCodePerKeypair},
		{"DropForgetsTheCode", pairingDrop},
		{"FirstStartedWinsASharedUserCode", pairingSharedUserCode},
		{"ConcurrentStartsNeverExceedCapacity", pairingConcurrentStarts},
		{"KeepsOriginAndKnownAtStart", pairingKeepsOrigin},
		{"AStartFromAnotherOriginLeavesTheCode", pairingOtherOriginKeeps},
		{"AStartFromTheSameOriginReplacesItsCode", pairingSameOriginReplaces},
		{"PerDeviceBoundsOneIdentitysCodes", pairingPerDeviceBound},
		{"LiveCodesCountsOnlyLiveCodes", pairingLiveCodesCount},
		{"ApproveMarksExactlyThatCode", pairingApproveMarks},
		{"DropSpendsEveryCodeOfTheIdentity", pairingDropSpendsIdentity},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			require.NotNil(t, h.Pairings)
			require.NotNil(t, h.Now)
			require.NotNil(t, h.Advance)
			c.run(t, &pairings{h: h, ctx: t.Context()})
		})
	}
}

// pairings is what each case works with.
type pairings struct {
	h   PairingsHarness
	ctx context.Context
}

// pendingFor is a pending code for the contract device of runner, with
// codes derived from tag so that each start is told apart.
func pendingFor(runner, tag string) store.PendingPairing {
	return store.PendingPairing{
		DeviceCode:   "device-code-" + tag + "-0123456789abcdefghijklmnop",
		UserCode:     userCodeFor(tag),
		Device:       identityOf(device{runner: runner}),
		Label:        "laptop " + tag,
		Platform:     "linux",
		Capabilities: []byte(`[{"kind":"generate","models":["m"]}]`),
	}
}

// userCodeFor makes a well-formed user code from tag.
func userCodeFor(tag string) string {
	code := []byte("AAAA-0000")
	for i := 0; i < len(tag) && i < 4; i++ {
		code[5+i] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"[int(tag[i])%32]
	}
	return string(code)
}

func (p *pairings) start(t *testing.T, in store.PendingPairing, capacity int) (int64, error) {
	t.Helper()
	return p.h.Pairings.StartPairing(p.ctx, store.StartPairingInput{
		Pending: in, TTLMs: pairingTTL.Milliseconds(), Capacity: capacity, PerDevice: pairingPerDevice,
	})
}

// mustStart starts in and checks the stamp.
func (p *pairings) mustStart(t *testing.T, in store.PendingPairing, capacity int) int64 {
	t.Helper()
	now := p.h.Now(t)
	expiresAt, err := p.start(t, in, capacity)
	require.NoError(t, err)
	require.Equal(t, now+pairingTTL.Milliseconds(), expiresAt)
	return expiresAt
}

func (p *pairings) requireAtCapacity(t *testing.T, in store.PendingPairing, capacity int) {
	t.Helper()
	_, err := p.start(t, in, capacity)
	require.Error(t, err)
	require.Equal(t, store.RefusedAtCapacity, store.RefusalOf(err), "refused at capacity, not failed: %v", err)
}

func (p *pairings) byDevice(t *testing.T, deviceCode string) (store.PendingPairing, bool) {
	t.Helper()
	got, ok, err := p.h.Pairings.PairingByDeviceCode(p.ctx, deviceCode)
	require.NoError(t, err)
	return got, ok
}

func (p *pairings) byUser(t *testing.T, userCode string) (store.PendingPairing, bool) {
	t.Helper()
	got, ok, err := p.h.Pairings.PairingByUserCode(p.ctx, userCode)
	require.NoError(t, err)
	return got, ok
}

// requireLive checks want is found, whole, by both its codes.
func (p *pairings) requireLive(t *testing.T, want store.PendingPairing) {
	t.Helper()
	got, ok := p.byDevice(t, want.DeviceCode)
	require.True(t, ok, "found by device code")
	require.Equal(t, want, got)
	got, ok = p.byUser(t, want.UserCode)
	require.True(t, ok, "found by user code")
	require.Equal(t, want, got)
}

// requireGone checks in is found by neither of its codes.
func (p *pairings) requireGone(t *testing.T, in store.PendingPairing) {
	t.Helper()
	_, ok := p.byDevice(t, in.DeviceCode)
	require.False(t, ok, "%s is not found by device code", in.Label)
	_, ok = p.byUser(t, in.UserCode)
	require.False(t, ok, "%s is not found by user code", in.Label)
}

// stamped is in as a lookup finds it when it is its identity's only live
// code.
func stamped(in store.PendingPairing, expiresAt int64) store.PendingPairing {
	in.ExpiresAt = expiresAt
	in.LiveCodes = 1
	return in
}

func pairingStartStamps(t *testing.T, p *pairings) {
	in := pendingFor(alice.runner, "a")
	in.ExpiresAt = 1 // ignored: the store stamps it
	now := p.h.Now(t)
	expiresAt, err := p.h.Pairings.StartPairing(p.ctx, store.StartPairingInput{Pending: in, TTLMs: 90_000, Capacity: 5, PerDevice: 1})
	require.NoError(t, err)
	require.Equal(t, now+90_000, expiresAt, "the store clock plus the TTL")
	p.requireLive(t, stamped(in, expiresAt))
}

func pairingLookups(t *testing.T, p *pairings) {
	a := pendingFor(alice.runner, "a")
	b := pendingFor(bob.runner, "b")
	p.requireLive(t, stamped(a, p.mustStart(t, a, 5)))
	p.requireLive(t, stamped(b, p.mustStart(t, b, 5)))

	_, ok := p.byDevice(t, "device-code-unknown-0123456789abcdefghij")
	require.False(t, ok, "an unknown device code")
	_, ok = p.byUser(t, "ZZZZ-ZZZZ")
	require.False(t, ok, "an unknown user code")
	lower := []byte(a.UserCode)
	lower[0] = 'a'
	_, ok = p.byUser(t, string(lower))
	require.False(t, ok, "the user code is matched exactly: the caller normalises")
	_, ok = p.byUser(t, a.UserCode[:4]+a.UserCode[5:])
	require.False(t, ok, "the dash is part of the code")
	_, ok = p.byDevice(t, a.UserCode)
	require.False(t, ok, "a user code is no device code")
}

func pairingKeepsFields(t *testing.T, p *pairings) {
	in := pendingFor(alice.runner, "a")
	in.Label = "Ünïcode laptop: \"quoted\" 1:2|3"
	in.Platform = "darwin"
	in.Capabilities = []byte(`[ {"kind": "chat", "models": ["x:y", "ü"]} ]`)
	p.requireLive(t, stamped(in, p.mustStart(t, in, 5)))

	bare := pendingFor(bob.runner, "b")
	bare.Label, bare.Platform, bare.Capabilities = "", "", nil
	p.requireLive(t, stamped(bare, p.mustStart(t, bare, 5)))
}

// The reference's recorded run (spec §5.5): with capacity 2, a, b, c give
// ok, ok, at-capacity; a again gives ok, because it replaced its own code.
func pairingRecordedCapacityRun(t *testing.T, p *pairings) {
	a := pendingFor(alice.runner, "a")
	b := pendingFor(bob.runner, "b")
	c := pendingFor(alice2.runner, "c")
	a2 := pendingFor(alice.runner, "a2")
	expA := p.mustStart(t, a, 2)
	expB := p.mustStart(t, b, 2)
	p.requireAtCapacity(t, c, 2)
	p.requireGone(t, c)
	expA2 := p.mustStart(t, a2, 2)

	p.requireGone(t, a)
	p.requireLive(t, stamped(b, expB))
	p.requireLive(t, stamped(a2, expA2))
	require.Equal(t, expA, expA2, "the clock stood still")
}

// A refused start has already dropped the keypair's old code (spec §5.5
// step 3).
func pairingReplacedStaysGone(t *testing.T, p *pairings) {
	a := pendingFor(alice.runner, "a")
	b := pendingFor(bob.runner, "b")
	c := pendingFor(alice2.runner, "c")
	for _, in := range []store.PendingPairing{a, b, c} {
		p.mustStart(t, in, 3)
	}
	a2 := pendingFor(alice.runner, "a2")
	p.requireAtCapacity(t, a2, 2)
	p.requireGone(t, a)
	p.requireGone(t, a2)
	_, ok := p.byDevice(t, b.DeviceCode)
	require.True(t, ok, "other keypairs' codes stay")
}

func pairingZeroCapacity(t *testing.T, p *pairings) {
	a := pendingFor(alice.runner, "a")
	p.requireAtCapacity(t, a, 0)
	p.requireGone(t, a)
}

func pairingExpiresExactly(t *testing.T, p *pairings) {
	a := pendingFor(alice.runner, "a")
	expiresAt := p.mustStart(t, a, 5)
	p.h.Advance(t, pairingTTL-time.Millisecond)
	require.Equal(t, expiresAt-1, p.h.Now(t))
	p.requireLive(t, stamped(a, expiresAt))
	p.h.Advance(t, time.Millisecond)
	require.Equal(t, expiresAt, p.h.Now(t))
	p.requireGone(t, a)
}

func pairingExpiredFreeCapacity(t *testing.T, p *pairings) {
	a := pendingFor(alice.runner, "a")
	b := pendingFor(bob.runner, "b")
	p.mustStart(t, a, 1)
	p.requireAtCapacity(t, b, 1)
	p.h.Advance(t, pairingTTL-time.Millisecond)
	p.requireAtCapacity(t, b, 1)
	p.h.Advance(t, time.Millisecond)
	p.requireLive(t, stamped(b, p.mustStart(t, b, 1)))
	p.requireGone(t, a)
}

func pairingOneCodePerKeypair(t *testing.T, p *pairings) {
	a1 := pendingFor(alice.runner, "a1")
	p.mustStart(t, a1, 5)
	p.h.Advance(t, time.Second)
	a2 := pendingFor(alice.runner, "a2")
	exp2 := p.mustStart(t, a2, 5)
	p.requireGone(t, a1)
	p.requireLive(t, stamped(a2, exp2))

	// A new code of the same keypair also replaces one that shares its
	// user code.
	a3 := pendingFor(alice.runner, "a3")
	a3.UserCode = a2.UserCode
	exp3 := p.mustStart(t, a3, 5)
	_, ok := p.byDevice(t, a2.DeviceCode)
	require.False(t, ok)
	p.requireLive(t, stamped(a3, exp3))
}

func pairingDrop(t *testing.T, p *pairings) {
	a := pendingFor(alice.runner, "a")
	b := pendingFor(bob.runner, "b")
	p.mustStart(t, a, 2)
	expB := p.mustStart(t, b, 2)
	require.NoError(t, p.h.Pairings.DropPairing(p.ctx, a.DeviceCode))
	p.requireGone(t, a)
	p.requireLive(t, stamped(b, expB))
	require.NoError(t, p.h.Pairings.DropPairing(p.ctx, a.DeviceCode), "dropping again is no error")
	require.NoError(t, p.h.Pairings.DropPairing(p.ctx, "never-started-0123456789abcdefghij"))

	// The dropped code no longer counts, and its keypair may start again.
	a2 := pendingFor(alice.runner, "a2")
	p.requireLive(t, stamped(a2, p.mustStart(t, a2, 2)))
	p.requireLive(t, stamped(b, expB))
}

// No collision check is made on user codes (spec §5.5); when two live codes
// share one, a lookup finds the one started first.
func pairingSharedUserCode(t *testing.T, p *pairings) {
	a := pendingFor(alice.runner, "a")
	b := pendingFor(bob.runner, "b")
	b.UserCode = a.UserCode
	expA := p.mustStart(t, a, 5)
	expB := p.mustStart(t, b, 5)
	got, ok := p.byUser(t, a.UserCode)
	require.True(t, ok)
	require.Equal(t, stamped(a, expA), got, "the first started")

	require.NoError(t, p.h.Pairings.DropPairing(p.ctx, a.DeviceCode))
	got, ok = p.byUser(t, a.UserCode)
	require.True(t, ok)
	require.Equal(t, stamped(b, expB), got, "then the other")
}

// Starts are atomic: however they interleave, no more than the capacity
// are kept.
func pairingConcurrentStarts(t *testing.T, p *pairings) {
	const starts, capacity = 16, 5
	var wg sync.WaitGroup
	errs := make([]error, starts)
	for i := range starts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := pendingFor(fmt.Sprintf("runner_%d", i), fmt.Sprintf("c%02d", i))
			_, errs[i] = p.h.Pairings.StartPairing(p.ctx, store.StartPairingInput{Pending: in, TTLMs: pairingTTL.Milliseconds(), Capacity: capacity})
		}()
	}
	wg.Wait()
	kept := 0
	for i, err := range errs {
		in := pendingFor(fmt.Sprintf("runner_%d", i), fmt.Sprintf("c%02d", i))
		_, ok := p.byDevice(t, in.DeviceCode)
		if err == nil {
			kept++
			require.True(t, ok, "an accepted start is kept")
			continue
		}
		require.Equal(t, store.RefusedAtCapacity, store.RefusalOf(err), "%v", err)
		require.False(t, ok, "a refused start is not kept")
	}
	require.Equal(t, capacity, kept)
}

// BenchPairings measures one pairing's whole life in the store (start,
// both lookups, drop) while depth other codes are pending, for each depth:
// the cost must stay flat as the store fills (spec §5.7, no scans).
func BenchPairings(b *testing.B, depths []int, fresh func(b *testing.B) store.Pairings) {
	for _, depth := range depths {
		b.Run(fmt.Sprintf("pending=%d", depth), func(b *testing.B) {
			p := fresh(b)
			ctx := b.Context()
			n := 0
			start := func(tag string) store.PendingPairing {
				n++
				// The store checks no key, so a cheap identity keeps the
				// measurement on the store.
				in := store.PendingPairing{
					DeviceCode: "device-code-0123456789abcdefghijklmnopqrstu-" + tag, UserCode: numberedUserCode(n),
					Device: protocol.PublicIdentity{Identity: "identity-" + tag, Encryption: "e", EncryptionSig: "s"},
					Label:  "bench", Platform: "linux", Capabilities: []byte(`[{"kind":"generate","models":["m"]}]`),
				}
				if _, err := p.StartPairing(ctx, store.StartPairingInput{Pending: in, TTLMs: pairingTTL.Milliseconds(), Capacity: depth + 1}); err != nil {
					b.Fatal(err)
				}
				return in
			}
			for i := range depth {
				start(fmt.Sprintf("fill%d", i))
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				in := start(fmt.Sprintf("bench%d", i))
				if _, ok, err := p.PairingByUserCode(ctx, in.UserCode); err != nil || !ok {
					b.Fatalf("by user code: %v %v", ok, err)
				}
				if _, ok, err := p.PairingByDeviceCode(ctx, in.DeviceCode); err != nil || !ok {
					b.Fatalf("by device code: %v %v", ok, err)
				}
				if err := p.DropPairing(ctx, in.DeviceCode); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// numberedUserCode is a distinct well-formed user code for each n < 32^8.
func numberedUserCode(n int) string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	code := []byte("0000-0000")
	for i := 8; i >= 0 && n > 0; i-- {
		if i == 4 {
			continue
		}
		code[i] = alphabet[n%32]
		n /= 32
	}
	return string(code)
}
