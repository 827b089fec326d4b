package valkey

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/storetest"
)

// TestPairingsContract runs the Pairings contract on one standalone server
// and on a cluster, each case under its own prefix with a pinned clock.
func TestPairingsContract(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	storetest.RunPairings(t, func(t *testing.T) storetest.PairingsHarness { return pairingsHarness(t, client) })
}

func TestPairingsContractCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start-up skipped in -short mode")
	}
	srv := valkeytest.StartCluster(t)
	client := srv.Client(t)
	storetest.RunPairings(t, func(t *testing.T) storetest.PairingsHarness { return pairingsHarness(t, client) })
}

func pairingsHarness(t *testing.T, client valkey.Client) storetest.PairingsHarness {
	s := newTestStore(t, client)
	pinClock(t, s)
	return storetest.PairingsHarness{
		Pairings: s.Pairings(),
		Now: func(t *testing.T) int64 {
			now, err := s.Now(t.Context())
			require.NoError(t, err)
			return now
		},
		Advance: func(t *testing.T, d time.Duration) { advance(t, s, d) },
	}
}

func testPending(tag string) store.PendingPairing {
	return store.PendingPairing{
		DeviceCode: "device-code-" + tag + "-0123456789abcdefghijklmnopq", UserCode: "ABCD-" + tag,
		Device: protocol.PublicIdentity{Identity: "identity-" + tag, Encryption: "enc", EncryptionSig: "sig"},
		Label:  "laptop", Platform: "linux", Capabilities: []byte(`[]`),
	}
}

// Two replicas are two clients on one server and one prefix: a code
// started through one is found, and spent, through the other, on the
// running server clock.
func TestPairingsAcrossReplicas(t *testing.T) {
	srv := valkeytest.Start(t)
	prefix := valkeytest.Prefix(t)
	replica := func() store.Pairings {
		s, err := NewFromClient(srv.Client(t), prefix)
		require.NoError(t, err)
		require.NoError(t, s.Ping(t.Context()))
		return s.Pairings()
	}
	a, b := replica(), replica()
	in := testPending("AAAA")
	expiresAt, err := a.StartPairing(t.Context(), store.StartPairingInput{Pending: in, TTLMs: 600_000, Capacity: 2})
	require.NoError(t, err)
	in.ExpiresAt, in.LiveCodes = expiresAt, 1

	got, ok, err := b.PairingByUserCode(t.Context(), in.UserCode)
	require.NoError(t, err)
	require.True(t, ok, "the other replica finds the code by its user code")
	require.Equal(t, in, got)
	got, ok, err = b.PairingByDeviceCode(t.Context(), in.DeviceCode)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, in, got)

	// The capacity is global: the other replica counts this code.
	_, err = b.StartPairing(t.Context(), store.StartPairingInput{Pending: testPending("BBBB"), TTLMs: 600_000, Capacity: 2})
	require.NoError(t, err)
	_, err = b.StartPairing(t.Context(), store.StartPairingInput{Pending: testPending("CCCC"), TTLMs: 600_000, Capacity: 2})
	require.Equal(t, store.RefusedAtCapacity, store.RefusalOf(err))

	require.NoError(t, b.DropPairing(t.Context(), in.DeviceCode))
	_, ok, err = a.PairingByDeviceCode(t.Context(), in.DeviceCode)
	require.NoError(t, err)
	require.False(t, ok, "spent on one replica, gone on the other")
}

// Every key a start writes expires with its last code, so nothing stays
// behind once no code is pending; and a drop that empties them deletes them.
func TestPairingsLeaveNothingBehind(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	s := newTestStore(t, client)
	in := testPending("AAAA")
	expiresAt, err := s.Pairings().StartPairing(t.Context(), store.StartPairingInput{Pending: in, TTLMs: 600_000, Capacity: 2})
	require.NoError(t, err)
	keys := []string{"pairings", "pairing_expiry", "pairing_identity", "pairing_user"}
	for _, k := range keys {
		at, err := client.Do(t.Context(), client.B().Pexpiretime().Key(s.prefix+k).Build()).AsInt64()
		require.NoError(t, err)
		require.Equal(t, expiresAt, at, "%s expires with the code", k)
	}
	require.NoError(t, s.Pairings().DropPairing(t.Context(), in.DeviceCode))
	for _, k := range keys {
		n, err := client.Do(t.Context(), client.B().Exists().Key(s.prefix+k).Build()).AsInt64()
		require.NoError(t, err)
		require.Zero(t, n, "%s is gone with the last code", k)
	}
}

// A record this code cannot read is an error, not a missing code.
func TestPairingsUnreadableRecordIsAnError(t *testing.T) {
	_, err := decodePairing("d", frame("9", "u"))
	require.ErrorIs(t, err, errUnreadable)
	_, err = decodePairing("d", "not framed")
	require.ErrorIs(t, err, errUnreadable)
}

func BenchmarkPairings(b *testing.B) {
	srv := valkeytest.Start(b)
	client := srv.Client(b)
	storetest.BenchPairings(b, []int{100, 10_000}, func(b *testing.B) store.Pairings {
		return newTestStore(b, client).Pairings()
	})
}

// A code a relay of the first record layout stored (before origins and
// approval marks, one code per identity) reads on with those fields empty,
// can be marked approved, and is spent as any other.
func TestPairingsReadTheFirstRecordLayout(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	s := newTestStore(t, client)
	in := testPending("AAAA")
	in.Origin, in.KnownAtStart = "192.0.2.1", true
	expiresAt, err := s.Pairings().StartPairing(t.Context(), store.StartPairingInput{Pending: in, TTLMs: 600_000, Capacity: 2, PerDevice: 4})
	require.NoError(t, err)
	raw, err := client.Do(t.Context(), client.B().Hget().Key(s.prefix+"pairings").Field(in.DeviceCode).Build()).ToString()
	require.NoError(t, err)
	f, err := unframe(raw)
	require.NoError(t, err)
	require.Len(t, f, pairingFields)
	require.NoError(t, client.Do(t.Context(), client.B().Hset().Key(s.prefix+"pairings").FieldValue().
		FieldValue(in.DeviceCode, frame(f[:pairingFirstFields]...)).Build()).Error())

	want := in
	want.ExpiresAt, want.LiveCodes, want.Origin, want.KnownAtStart = expiresAt, 1, "", false
	got, ok, err := s.Pairings().PairingByDeviceCode(t.Context(), in.DeviceCode)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, want, got)

	want.Approved = true
	got, ok, err = s.Pairings().ApprovePairing(t.Context(), in.UserCode, in.Device.Identity)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, want, got)
	require.NoError(t, s.Pairings().DropPairing(t.Context(), in.DeviceCode))
	_, ok, err = s.Pairings().PairingByUserCode(t.Context(), in.UserCode)
	require.NoError(t, err)
	require.False(t, ok)
}
