package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/fleet"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/pairing"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/backend"
)

// approveFixture writes a fixture in which alice consents to site_a, and
// returns its path.
func approveFixture(t *testing.T) string {
	t.Helper()
	site, err := peer.GenerateKeys()
	require.NoError(t, err)
	f := projection.Empty()
	f.Sites = []projection.SiteRecord{{SiteID: "site_a", Site: site.Public()}}
	f.Consents = []projection.ConsentRecord{{Owner: "alice", SiteID: "site_a"}}
	raw, err := json.MarshalIndent(f, "", "  ")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "fixture.json")
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	return path
}

// approve runs the real binary's approve subcommand.
func approve(t *testing.T, args ...string) (exit int, stdout, stderr string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), fleet.TestBinary(t), append([]string{"approve"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode(), out.String(), errOut.String()
	}
	require.NoError(t, err)
	return 0, out.String(), errOut.String()
}

// TestD3_ApproveAPendingCodeOnAnotherReplica: two relayd processes share
// one Valkey. A code pending in the store (put there as a start on any
// replica puts it) is looked up through replica 1's admin listener by the
// approve command, which writes the device into the fixture; then both
// replicas know the device, without a restart.
func TestD3_ApproveAPendingCodeOnAnotherReplica(t *testing.T) {
	srv := valkeytest.Start(t)
	prefix := valkeytest.Prefix(t)
	path := approveFixture(t)
	f := fleet.StartForTest(t, fleet.Options{
		Fixture: path, SiteID: "site_a", Replicas: 2, Valkey: fleet.Valkey{Addrs: srv.Addrs, Prefix: prefix},
		Args: []string{"--fixture-poll", "100ms"},
	})
	keys, err := peer.GenerateKeys()
	require.NoError(t, err)
	b, err := backend.Open(t.Context(), backend.Options{Kind: backend.Valkey, Valkey: backend.ValkeyOptions{Addrs: srv.Addrs, Prefix: prefix}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Store.Close() })
	_, err = b.Pairings.StartPairing(t.Context(), store.StartPairingInput{
		Pending: store.PendingPairing{DeviceCode: "device-code-0123456789abcdefghijklmnopqrstu", UserCode: "ABCD-EF12", Device: keys.Public(), Label: "laptop", Platform: "linux"},
		TTLMs:   pairing.CodeTTL.Milliseconds(), Capacity: pairing.DefaultCapacity,
	})
	require.NoError(t, err)

	daemons := make([]*peer.Daemon, f.Len())
	for i, r := range f.Replicas() {
		daemons[i], err = peer.NewDaemon(peer.Config{BaseURLs: []string{r.PublicURL()}}, keys, "")
		require.NoError(t, err)
		_, err = daemons[i].Pair(t.Context(), "alice")
		require.ErrorContains(t, err, protocol.MsgDeviceNotApproved, "replica %d before the approval", i)
	}

	exit, stdout, stderr := approve(t, "--admin", f.Replica(1).AdminURL(), "--fixture", path, "--owner", "alice", "abcd-ef12")
	require.Equal(t, 0, exit, stderr)
	var res struct{ RunnerID, Owner, KeyID string }
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	keyID, _ := protocol.KeyIDOf(keys.Public().Identity)
	require.Equal(t, "alice", res.Owner)
	require.Equal(t, keyID, res.KeyID)
	require.Regexp(t, `^runner_[0-9a-f]{12}$`, res.RunnerID)

	for i, d := range daemons {
		require.Eventually(t, func() bool {
			resp, err := d.Pair(t.Context(), "alice")
			return err == nil && resp.RunnerID == res.RunnerID
		}, 10*time.Second, 50*time.Millisecond, "replica %d pairs the approved device once it reloads", i)
	}

	exit, stdout, stderr = approve(t, "--admin", f.Replica(0).AdminURL(), "--fixture", path, "--owner", "alice", "WXYZ-2345")
	require.Equal(t, 1, exit)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "no pending pairing has that user code WXYZ-2345")
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
}
