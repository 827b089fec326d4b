package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/leaktest"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
)

// frozenAnswer is what a caller gets while the store cannot answer.
const frozenAnswer = `{"error":"server-error","message":"the relay's routing store is unavailable; try again","retryAfter":1}`

// A Valkey frozen by SIGSTOP accepts connections and answers nothing: no
// connection error tells the client to give up. The store deadline does:
// a claim and a site call through a real relayd get the retryable 503
// whose retryAfter equals Retry-After in seconds (decision P2-D1), readiness
// fails, and both recover when the server resumes, without a restart. Durations are logged, not asserted (docs/performance.md,
// "Frozen Valkey", quotes them).
func TestP2_D1_AFrozenValkeyIsA503WithRetryAfterAndRecoversWithoutARestart(t *testing.T) {
	srv := valkeytest.Start(t)
	leaktest.Check(t) // while the server still runs: Run closes the Valkey client it opened
	if !srv.CanRestart() {
		t.Skip("the server did not come from a binary this test can freeze")
	}
	r := startWith(t, []string{"--store", "valkey", "--valkey-addr", srv.Addr, "--valkey-prefix", valkeytest.Prefix(t),
		"--verification-url", "https://pair.example/device"})
	d, site := demoDaemon(t, r), demoSite(t, r)
	_, err := d.Claim(t.Context(), []string{protocol.KindGenerate}, 1)
	require.NoError(t, err, "a claim works before the freeze")

	srv.Freeze(t)
	// A generous deadline, over seven times the store timeout, that a
	// relay without one misses (a frozen claim took 27 s before).
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	calls := []struct {
		name string
		do   func() (peer.RawResponse, error)
	}{
		{"claim", func() (peer.RawResponse, error) { return d.Do(ctx, "claim", claimRequest(t, d)) }},
		{"site pending", func() (peer.RawResponse, error) { return site.Do(ctx, http.MethodGet, "pending", nil) }},
		{"protocol 2 pair start", func() (peer.RawResponse, error) { return d.Do(ctx, "pair", pairStartRequest(t)) }},
	}
	for _, c := range calls {
		start := time.Now()
		resp, err := c.do()
		took := time.Since(start)
		require.NoError(t, err, c.name)
		require.Equal(t, http.StatusServiceUnavailable, resp.Status, "%s: body %s", c.name, resp.Body)
		require.JSONEq(t, frozenAnswer, string(resp.Body), c.name)
		require.Equal(t, "1", resp.Header.Get("Retry-After"), c.name)
		t.Logf("frozen Valkey: %s answered 503 after %v", c.name, took.Round(time.Millisecond))
	}

	start := time.Now()
	status, body := readyz(t, r)
	readyTook := time.Since(start)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "unavailable", body["status"])
	t.Logf("frozen Valkey: /readyz answered 503 after %v", readyTook.Round(time.Millisecond))

	srv.Thaw(t)
	require.Eventually(t, func() bool {
		status, _ := readyz(t, r)
		return status == http.StatusOK
	}, time.Minute, 20*time.Millisecond, "readiness comes back by itself")
	_, err = d.Claim(t.Context(), []string{protocol.KindGenerate}, 1)
	require.NoError(t, err, "claims work again without restarting the relay")
}

// demoDaemon is the example fixture's first demo device, paired with r.
func demoDaemon(t *testing.T, r *running) *peer.Daemon {
	t.Helper()
	keys, err := peer.LoadDemoKeys("../deploy/demo-keys.json")
	require.NoError(t, err)
	dev := keys.Devices[0]
	d, err := peer.NewDaemon(peer.Config{BaseURLs: []string{r.public}}, dev.Keys, "")
	require.NoError(t, err)
	_, err = d.Pair(t.Context(), dev.Owner)
	require.NoError(t, err)
	return d
}

// demoSite is the example fixture's demo site, talking to r.
func demoSite(t *testing.T, r *running) *peer.Site {
	t.Helper()
	keys, err := peer.LoadDemoKeys("../deploy/demo-keys.json")
	require.NoError(t, err)
	s, err := peer.NewSite(peer.Config{BaseURLs: []string{r.public}}, keys.Site.Keys, keys.Site.SiteID)
	require.NoError(t, err)
	return s
}

// pairStartRequest is the body of a protocol "2" device-code start, which
// stores a pending code: a call on the pending device codes, not on the
// routing store.
func pairStartRequest(t *testing.T) []byte {
	t.Helper()
	keys, err := peer.GenerateKeys()
	require.NoError(t, err)
	body, err := json.Marshal(map[string]any{
		"protocolVersion": "2", "action": "start",
		"daemon": map[string]any{"version": "0.1.1", "label": "laptop", "platform": "linux"},
		"device": keys.Public(), "capabilities": []any{},
	})
	require.NoError(t, err)
	return body
}

// claimRequest is the body of a one-job claim by d.
func claimRequest(t *testing.T, d *peer.Daemon) []byte {
	t.Helper()
	body, err := json.Marshal(protocol.ClaimRequest{ProtocolVersion: protocol.Version, RunnerID: d.RunnerID(),
		Capabilities: peer.Capabilities([]string{protocol.KindGenerate}), Max: 1})
	require.NoError(t, err)
	return body
}
