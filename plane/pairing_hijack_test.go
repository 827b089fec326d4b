package plane_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// Addresses of the real daemon and of someone who only knows its public
// identity, as a load balancer in front reports them (--trust-forwarded-for).
const (
	daemonAddr   = "198.51.100.1"
	attackerAddr = "203.0.113.9"
)

// pairFrom posts an unsigned pair body from the client address addr.
func (b *bundle) pairFrom(t *testing.T, addr string, body any) peer.RawResponse {
	t.Helper()
	return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/pair", Body: mustJSON(t, body),
		Header: http.Header{"Content-Type": {"application/json"}, "X-Forwarded-For": {addr}}})
}

// startFrom starts a device code for device from addr, offering caps.
func (b *bundle) startFrom(t *testing.T, addr string, device protocol.PublicIdentity, caps []proto2.Capability) proto2.PairStartResponse {
	t.Helper()
	body := pairStartBody(device)
	body["capabilities"] = caps
	resp := b.pairFrom(t, addr, body)
	require.Equal(t, http.StatusOK, resp.Status, "start: %s", resp.Body)
	out, err := proto2.DecodePairStartResponse(resp.Body)
	require.NoError(t, err)
	return out
}

// pollFrom polls deviceCode from addr and returns the status it answers.
func (b *bundle) pollFrom(t *testing.T, addr, deviceCode string) string {
	t.Helper()
	resp := b.pairFrom(t, addr, pairPollBody(deviceCode))
	require.Equal(t, http.StatusOK, resp.Status, "poll: %s", resp.Body)
	out, err := proto2.DecodePairPollResponse(resp.Body)
	require.NoError(t, err)
	return out.Status
}

// markApproved is the admin step of `relayd approve`: mark the code the
// user read out approved for the device the operator saw.
func (b *bundle) markApproved(t *testing.T, userCode string, device protocol.PublicIdentity) {
	t.Helper()
	body, err := json.Marshal(map[string]string{"identity": device.Identity})
	require.NoError(t, err)
	resp, err := http.Post(b.adminURL+"/pairings/"+userCode+"/approval", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "approval: %s", answer)
}

// eachStoreFromAddresses runs test on each store, with both protocols, on a
// relay that trusts X-Forwarded-For so that pairings can come from
// daemonAddr or attackerAddr; device is the identity of the "stranger" keys,
// which the fixture lists nowhere until a test projects it.
func eachStoreFromAddresses(t *testing.T, test func(t *testing.T, b *bundle, device protocol.PublicIdentity)) {
	opts := bothProtocols()
	opts.TrustForwardedFor = true
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		test(t, b, b.keys["stranger"].Public())
	})
}

// attackerCaps are capabilities the real daemon never offered.
func attackerCaps() []proto2.Capability {
	caps := capabilities2(protocol.KindChat)
	caps[0].Model = "attacker-model"
	return caps
}

// RD-D13 (issue 27): someone who knows only a device's public identity starts
// codes for it from another address, as often as the rate limit lets them.
// The real daemon's code stays pending (the reference answers it expired:
// one code per keypair), the attacker's poll never answers approved, and
// the presence written at approval holds the real daemon's capabilities.
func TestRD_D13_AStartFromAnotherAddressCannotCancelOrCollectAPairing(t *testing.T) {
	eachStoreFromAddresses(t, func(t *testing.T, b *bundle, device protocol.PublicIdentity) {
		mine := b.startFrom(t, daemonAddr, device, capabilities2())
		theirs := b.startFrom(t, attackerAddr, device, attackerCaps())
		require.Equal(t, "pending", b.pollFrom(t, daemonAddr, mine.DeviceCode), "the real code is not cancelled")
		require.Equal(t, "pending", b.pollFrom(t, attackerAddr, theirs.DeviceCode))

		// Faster than the daemon polls, the attacker starts again and again:
		// each replaces only its own code.
		for range 3 {
			theirs = b.startFrom(t, attackerAddr, device, attackerCaps())
			require.Equal(t, "pending", b.pollFrom(t, daemonAddr, mine.DeviceCode))
		}

		// The operator approves the code the user read out, as `relayd
		// approve` does: mark it, then write the device into the fixture.
		b.markApproved(t, mine.UserCode, device)
		b.project(t, withDevice("stranger", "alice", "runner_dave"))
		require.Equal(t, "pending", b.pollFrom(t, attackerAddr, theirs.DeviceCode), "an unmarked code beside the marked one never collects")
		requireAnswer(t, b.pairFrom(t, daemonAddr, pairPollBody(mine.DeviceCode)), http.StatusOK,
			`{"status":"approved","runnerId":"runner_dave","owner":"alice","sites":`+b.sitesJSON(t, "site")+`}`)
		require.Equal(t, "expired", b.pollFrom(t, attackerAddr, theirs.DeviceCode), "spent with the device's pairing")

		// After the pairing, a fresh start for the approved device collects
		// nothing either: no operator looked at it.
		late := b.startFrom(t, attackerAddr, device, attackerCaps())
		require.Equal(t, "pending", b.pollFrom(t, attackerAddr, late.DeviceCode))
		p, ok := b.presence(t, "runner_dave")
		require.True(t, ok)
		require.JSONEq(t, string(mustJSON(t, capabilities2())), string(p.Capabilities), "the real daemon's capabilities")
	})
}

// RD-D13: a fixture written by hand approves a device whose one pending code
// was started before it; with a second code beside it nobody can tell
// which is the device's, so neither collects until one is marked.
func TestRD_D13_AHandWrittenApprovalCollectsOnlyALoneCode(t *testing.T) {
	eachStoreFromAddresses(t, func(t *testing.T, b *bundle, device protocol.PublicIdentity) {
		mine := b.startFrom(t, daemonAddr, device, capabilities2())
		theirs := b.startFrom(t, attackerAddr, device, attackerCaps())
		b.project(t, withDevice("stranger", "alice", "runner_dave"))
		require.Equal(t, "pending", b.pollFrom(t, attackerAddr, theirs.DeviceCode))
		require.Equal(t, "pending", b.pollFrom(t, daemonAddr, mine.DeviceCode))

		b.markApproved(t, mine.UserCode, device)
		require.Equal(t, "pending", b.pollFrom(t, attackerAddr, theirs.DeviceCode))
		require.Equal(t, "approved", b.pollFrom(t, daemonAddr, mine.DeviceCode))
	})
}

// RD-D13: a daemon restarted mid-pairing starts again from its own address
// with the same keys; its new code replaces the old one, as the
// reference's does, and pairs.
func TestRD_D13_ARestartedDaemonReplacesItsOwnCode(t *testing.T) {
	eachStoreFromAddresses(t, func(t *testing.T, b *bundle, device protocol.PublicIdentity) {
		theirs := b.startFrom(t, attackerAddr, device, attackerCaps())
		killed := b.startFrom(t, daemonAddr, device, capabilities2())
		restarted := b.startFrom(t, daemonAddr, device, capabilities2())
		require.Equal(t, "expired", b.pollFrom(t, daemonAddr, killed.DeviceCode))
		require.Equal(t, "pending", b.pollFrom(t, attackerAddr, theirs.DeviceCode), "another address's code is not the restart's to replace")

		b.markApproved(t, restarted.UserCode, device)
		b.project(t, withDevice("stranger", "alice", "runner_dave"))
		require.Equal(t, "approved", b.pollFrom(t, daemonAddr, restarted.DeviceCode))
	})
}

// RD-D13: one identity holds at most pairing.CodesPerDevice codes, each from
// its own address; a fifth address is refused as a start at capacity is,
// and an address that holds one may always start again.
func TestRD_D13_OneDeviceHoldsABoundedNumberOfCodes(t *testing.T) {
	eachStoreFromAddresses(t, func(t *testing.T, b *bundle, device protocol.PublicIdentity) {
		for _, addr := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", daemonAddr} {
			b.startFrom(t, addr, device, capabilities2())
		}
		resp := b.pairFrom(t, attackerAddr, pairStartBody(device))
		require.Equal(t, http.StatusTooManyRequests, resp.Status, "%s", resp.Body)
		restarted := b.startFrom(t, daemonAddr, device, capabilities2())
		require.Equal(t, "pending", b.pollFrom(t, daemonAddr, restarted.DeviceCode))
	})
}
