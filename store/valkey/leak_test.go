package valkey

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/leaktest"
	"github.com/byollm/relayd/internal/valkeytest"
)

// A store that opened its own client closes it: the client's readers,
// writers and (for a cluster) topology refresh end with Close, so a relay
// that shuts down leaves no loop talking to Valkey.
func TestCloseStopsTheClientsGoroutines(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		srv := valkeytest.Start(t)
		leaktest.Check(t) // while the server still runs: its end would stop the client too
		s, err := New(t.Context(), Options{Addrs: []string{srv.Addr}, KeyPrefix: valkeytest.Prefix(t)})
		require.NoError(t, err)
		mustEnqueue(t, s, "a")
		require.Len(t, mustClaim(t, s, "r1", 1), 1)
		require.NoError(t, s.Close())
	})
	t.Run("cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("cluster start-up skipped in -short mode")
		}
		cl := valkeytest.StartCluster(t)
		leaktest.Check(t)
		s, err := New(t.Context(), Options{Addrs: cl.Addrs, Cluster: true, KeyPrefix: valkeytest.Prefix(t)})
		require.NoError(t, err)
		mustEnqueue(t, s, "a")
		require.Len(t, mustClaim(t, s, "r1", 1), 1)
		require.NoError(t, s.Close())
	})
}
