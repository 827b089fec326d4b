package server_test

import (
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// With --grant-key-file the server wires the author into the claim path
// and its counters into /metrics: a device enrolled with a key the
// replica lacks is offered nothing and counted (G-R15, G-R51), and the
// admin listener names the replica's key (G-R50).
func TestGrantKeyFileWiresTheAuthorIntoClaimsAndMetrics(t *testing.T) {
	path, private := writeGrantKey(t, 0x31)
	public := protocol.EncodeKey(private.Public().(ed25519.PublicKey))
	r := startWith(t, []string{"--grant-key-file", path})
	_, other := writeGrantKey(t, 0x32)
	enrolWith(t, r, "runner_alice_laptop", protocol.EncodeKey(other.Public().(ed25519.PublicKey)))

	demo, err := peer.LoadDemoKeys("../deploy/demo-keys.json")
	require.NoError(t, err)
	alice, ok := demo.Device("runner_alice_laptop")
	require.True(t, ok, "the demo keys hold alice's laptop")
	daemon, err := peer.NewDaemon(peer.Config{BaseURLs: []string{r.public}}, alice.Keys, alice.RunnerID)
	require.NoError(t, err)
	body, err := json.Marshal(proto2.ClaimRequest{ProtocolVersion: "2", RunnerID: alice.RunnerID, Capabilities: []proto2.Capability{}, Max: 1})
	require.NoError(t, err)
	resp, err := daemon.Do(t.Context(), "claim", body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.JSONEq(t, `{"jobs":[],"leaseMs":60000}`, string(resp.Body))

	require.Contains(t, get(t, r.admin+"/metrics"), `relayd_grant_claims_skipped_total{cause="key-unavailable"} 1`)
	keyID, _ := protocol.KeyIDOf(public)
	require.JSONEq(t, `{"current":{"publicKey":"`+public+`","keyId":"`+keyID+`","signer":"local"},"keys":[{"publicKey":"`+public+`","keyId":"`+keyID+`","signer":"local"}]}`,
		get(t, r.admin+"/grant-keys"))
}

// enrolWith sets runner's grantKey in the running server's fixture and
// waits for the reload to be in force.
func enrolWith(t *testing.T, r *running, runner, grantKey string) {
	t.Helper()
	before := projectionHash(t, r)
	raw, err := os.ReadFile(r.fixture)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	for _, d := range doc["devices"].([]any) {
		if d.(map[string]any)["runnerId"] == runner {
			d.(map[string]any)["grantKey"] = grantKey
		}
	}
	changed, err := json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(r.fixture, changed, 0o600))
	r.reload <- struct{}{}
	require.Eventually(t, func() bool { return projectionHash(t, r) != before }, 10*time.Second, 20*time.Millisecond)
}

// projectionHash is the projection /readyz names; with a grant key its
// body also holds a grants object, so it is read as any.
func projectionHash(t *testing.T, r *running) any {
	t.Helper()
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(get(t, r.admin+"/readyz")), &body))
	return body["projection"]
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}
