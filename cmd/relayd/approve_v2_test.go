package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// postPair sends an unsigned protocol "2" pair body and returns the answer.
func postPair(t *testing.T, public string, body map[string]any) (int, []byte) {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(public+"/byollm/pair", "application/json", bytes.NewReader(raw))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// startPairing is what `byollm connect` sends first.
func startPairing(t *testing.T, public string, device protocol.PublicIdentity) proto2.PairStartResponse {
	t.Helper()
	status, body := postPair(t, public, map[string]any{
		"protocolVersion": "2", "action": "start",
		"daemon":       map[string]any{"version": "0.1.1", "label": "laptop", "platform": "linux"},
		"device":       device,
		"capabilities": []proto2.Capability{{Kind: protocol.KindGenerate, Service: "m", BackendID: "openai-http", BackendClass: "http", Model: "m", OfferScope: "private"}},
	})
	require.Equal(t, http.StatusOK, status, string(body))
	start, err := proto2.DecodePairStartResponse(body)
	require.NoError(t, err)
	return start
}

// poll is what `byollm connect` sends until it is answered.
func poll(t *testing.T, public, deviceCode string) proto2.PairPollResponse {
	t.Helper()
	status, body := postPair(t, public, map[string]any{"protocolVersion": "2", "action": "poll", "deviceCode": deviceCode})
	require.Equal(t, http.StatusOK, status, string(body))
	answer, err := proto2.DecodePairPollResponse(body)
	require.NoError(t, err)
	return answer
}

// approveDeviceCodeFlow runs the whole flow on a fleet: start on the
// first replica, approve through the last one's admin listener, and poll
// on every replica, the first of them collecting the pairing.
func approveDeviceCodeFlow(t *testing.T, f *fleet.Fleet, path string) {
	keys, err := peer.GenerateKeys()
	require.NoError(t, err)
	start := startPairing(t, f.Replica(0).PublicURL(), keys.Public())
	require.Equal(t, "https://example.test/activate", start.VerificationURL)
	for _, r := range f.Replicas() {
		require.Equal(t, "pending", poll(t, r.PublicURL(), start.DeviceCode).Status)
	}

	last := f.Replica(f.Len() - 1)
	exit, stdout, stderr := approve(t, "--admin", last.AdminURL(), "--fixture", path, "--owner", "alice", start.UserCode)
	require.Equal(t, 0, exit, stderr)
	var res struct{ RunnerID, Owner, KeyID string }
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))

	collector := f.Replica(f.Len() / 2)
	var answer proto2.PairPollResponse
	require.Eventually(t, func() bool {
		answer = poll(t, collector.PublicURL(), start.DeviceCode)
		return answer.Status != "pending"
	}, 10*time.Second, 50*time.Millisecond, "the poll answers once the replica reloads")
	require.Equal(t, "approved", answer.Status)
	require.Equal(t, res.RunnerID, answer.RunnerID)
	require.Equal(t, "alice", answer.Owner)
	require.NotNil(t, answer.Sites)
	for _, r := range f.Replicas() {
		require.Equal(t, "expired", poll(t, r.PublicURL(), start.DeviceCode).Status, "the code is spent on every replica")
	}
}

// TestP2_D3_DeviceCodeFlowWithApproveOnMemory: the published daemon's flow
// against one relayd on the memory store, approved with relayd approve.
func TestP2_D3_DeviceCodeFlowWithApproveOnMemory(t *testing.T) {
	path := approveFixture(t)
	f := fleet.StartForTest(t, fleet.Options{
		Fixture: path, SiteID: "site_a",
		Args: []string{"--protocols", "0,2", "--verification-url", "https://example.test/activate", "--fixture-poll", "100ms"},
	})
	approveDeviceCodeFlow(t, f, path)
}

// TestP2_D3_DeviceCodeFlowAcrossThreeReplicas: start on one replica, approve
// through another's admin listener, collect on a third.
func TestP2_D3_DeviceCodeFlowAcrossThreeReplicas(t *testing.T) {
	srv := valkeytest.Start(t)
	path := approveFixture(t)
	f := fleet.StartForTest(t, fleet.Options{
		Fixture: path, SiteID: "site_a", Replicas: 3, Valkey: fleet.Valkey{Addrs: srv.Addrs, Prefix: valkeytest.Prefix(t)},
		Args: []string{"--protocols", "0,2", "--verification-url", "https://example.test/activate", "--fixture-poll", "100ms"},
	})
	approveDeviceCodeFlow(t, f, path)
}
