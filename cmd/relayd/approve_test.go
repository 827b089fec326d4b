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
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
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

// TestP2_D3_ApprovalReachesEveryReplicaAndBothProtocols: two relayd processes
// share one Valkey. A daemon starts a device-code pairing on replica 0; the
// approve command, asking replica 1's admin listener, writes the device
// into the fixture; then both replicas know the device without a restart,
// on the protocol "0" fixture exchange too.
func TestP2_D3_ApprovalReachesEveryReplicaAndBothProtocols(t *testing.T) {
	srv := valkeytest.Start(t)
	path := approveFixture(t)
	f := fleet.StartForTest(t, fleet.Options{
		Fixture: path, SiteID: "site_a", Replicas: 2, Valkey: fleet.Valkey{Addrs: srv.Addrs, Prefix: valkeytest.Prefix(t)},
		Args: []string{"--protocols", "0,2", "--verification-url", "https://example.test/activate", "--fixture-poll", "100ms"},
	})
	keys, err := peer.GenerateKeys()
	require.NoError(t, err)
	start := startPairing(t, f.Replica(0).PublicURL(), keys.Public())

	daemons := make([]*peer.Daemon, f.Len())
	for i, r := range f.Replicas() {
		daemons[i], err = peer.NewDaemon(peer.Config{BaseURLs: []string{r.PublicURL()}}, keys, "")
		require.NoError(t, err)
		_, err = daemons[i].Pair(t.Context(), "alice")
		require.ErrorContains(t, err, protocol.MsgDeviceNotApproved, "replica %d before the approval", i)
	}

	exit, stdout, stderr := approve(t, "--admin", f.Replica(1).AdminURL(), "--fixture", path, "--owner", "alice", strings.ToLower(start.UserCode))
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
