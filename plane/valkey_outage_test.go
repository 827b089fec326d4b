package plane_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/valkey"
)

// A real Valkey going away: the relay answers 503 with Retry-After and
// fails readiness, then recovers by itself when the server is back, with
// the routing state (AOF on) intact.
func TestValkeyOutageIs503AndTheRelayRecoversByItself(t *testing.T) {
	srv := valkeytest.StartWith(t, valkeytest.Options{Persist: true})
	if !srv.CanRestart() {
		t.Skip("the server did not come from a binary this test can stop and restart")
	}
	own := func(t *testing.T) (store.RoutingStore, func(time.Duration)) {
		s, err := valkey.New(t.Context(), valkey.Options{Addrs: srv.Addrs, KeyPrefix: valkeytest.Prefix(t), DialTimeout: time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s, func(time.Duration) { t.Fatal("this test does not move the store clock") }
	}
	b := setup(t, own, nil)
	d := b.paired(t, "alice")
	b.enqueue(t, b.stub(t, "survivor", "alice"))
	c := b.claimOne(t, d, "survivor")

	srv.Stop(t)
	resp, err := d.Do(b.ctx, "claim", claimBody(t, "runner_alice"))
	require.NoError(t, err)
	requireAnswer(t, resp, http.StatusServiceUnavailable, `{"error":"server-error","message":"the relay's routing store is unavailable; try again","retryAfter":1}`)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	ready := b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/readyz"})
	require.Equal(t, http.StatusServiceUnavailable, ready.Status)

	srv.Restart(t)
	require.Eventually(t, func() bool {
		return b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/readyz"}).Status == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "readiness comes back without restarting the relay")

	hb, err := d.Heartbeat(b.ctx, []protocol.LeaseRef{lease(c)})
	require.NoError(t, err)
	require.Empty(t, hb.Lost, "the grant survived the restart")
	require.Equal(t, c.Lease.ID, b.pending(t, "survivor").LeaseID)
}
