package backend_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/backend"
)

func pendingCode() store.PendingPairing {
	return store.PendingPairing{
		DeviceCode: "device-code-0123456789abcdefghijklmnopqrstuvw", UserCode: "ABCD-EFGH",
		Device: protocol.PublicIdentity{Identity: "I", Encryption: "E", EncryptionSig: "S"},
	}
}

func TestMemoryBackendHasPairings(t *testing.T) {
	b, err := backend.Open(t.Context(), backend.Options{Kind: backend.Memory, Clock: clock.System{}})
	require.NoError(t, err)
	require.NotNil(t, b.Pairings)
	_, err = b.Pairings.StartPairing(t.Context(), store.StartPairingInput{Pending: pendingCode(), TTLMs: 60_000, Capacity: 1})
	require.NoError(t, err)
	_, ok, err := b.Pairings.PairingByUserCode(t.Context(), "ABCD-EFGH")
	require.NoError(t, err)
	require.True(t, ok)
}

// Two backends on one Valkey prefix, as two replicas open them, share the
// pending codes: a start on one is polled on the other.
func TestValkeyBackendsSharePairings(t *testing.T) {
	srv := valkeytest.Shared(t)
	o := backend.Options{Kind: backend.Valkey, Valkey: backend.ValkeyOptions{Addrs: srv.Addrs, Prefix: valkeytest.Prefix(t)}}
	var replicas []backend.Backend
	for range 2 {
		b, err := backend.Open(t.Context(), o)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Store.Close() })
		replicas = append(replicas, b)
	}
	_, err := replicas[0].Pairings.StartPairing(t.Context(), store.StartPairingInput{Pending: pendingCode(), TTLMs: 60_000, Capacity: 1})
	require.NoError(t, err)
	got, ok, err := replicas[1].Pairings.PairingByDeviceCode(t.Context(), pendingCode().DeviceCode)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "ABCD-EFGH", got.UserCode)
}
