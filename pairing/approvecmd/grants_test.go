package approvecmd_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/admission"
	"github.com/byollm/relayd/pairing/approvecmd"
	"github.com/byollm/relayd/plane/codec2"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
)

// grantSigner is a grant key held by the test.
type grantSigner struct{ private ed25519.PrivateKey }

func (s grantSigner) PublicKey() string {
	return protocol.EncodeKey(s.private.Public().(ed25519.PublicKey))
}

func (s grantSigner) Sign(_ context.Context, statement []byte) (string, error) {
	return protocol.EncodeKey(ed25519.Sign(s.private, statement)), nil
}

// grantsWith is a relay's grant author holding fresh keys, the first
// current; it returns their grant keys too.
func grantsWith(t *testing.T, n int) (*codec2.Grants, []projection.GrantKey) {
	t.Helper()
	var signers []admission.Signer
	var keys []projection.GrantKey
	for range n {
		_, private, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		s := grantSigner{private}
		k, err := projection.ParseGrantKey(s.PublicKey())
		require.NoError(t, err)
		signers, keys = append(signers, s), append(keys, k)
	}
	ring, err := admission.NewKeyRing(signers...)
	require.NoError(t, err)
	return &codec2.Grants{Author: admission.Author{Keys: ring, Random: rand.Reader}}, keys
}

func (w *world) approved(t *testing.T, args ...string) (approvecmd.Result, projection.DeviceRecord) {
	t.Helper()
	code, stdout, stderr := run(t, w.args(args...)...)
	require.Equal(t, 0, code, stderr)
	var res approvecmd.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	d, ok := w.load(t).DeviceByFingerprint(w.device.Identity)
	require.True(t, ok)
	return res, d
}

// G-R26: on a relay with a grant key, a new device is enrolled with the
// current one, and the line printed says so.
func TestApproveEnrolsANewDeviceWithTheRelaysCurrentKey(t *testing.T) {
	grants, keys := grantsWith(t, 2)
	w := newWorldWith(t, grants, nil)
	res, d := w.approved(t, "--owner", "alice", userCode)
	require.Equal(t, keys[0], d.GrantKey)
	require.Equal(t, keys[0].String(), res.GrantKey)
}

// G-R26: re-approval keeps the grantKey the record has, whatever the
// relay's current key, unless --grant-key says otherwise.
func TestApproveKeepsAnExistingGrantKeyOnReapproval(t *testing.T) {
	grants, keys := grantsWith(t, 2)
	w := newWorldWith(t, grants, func(f *projection.Fixture, device protocol.PublicIdentity) {
		f.Devices = append(f.Devices, projection.DeviceRecord{Owner: "alice", RunnerID: "runner_old", Device: device, Revoked: false, GrantKey: keys[1]})
	})
	_, d := w.approved(t, "--owner", "alice", userCode)
	require.Equal(t, projection.DeviceRecord{Owner: "alice", RunnerID: "runner_old", Device: w.device, GrantKey: keys[1]}, d)

	_, d = w.approved(t, "--owner", "alice", "--grant-key", keys[0].String(), userCode)
	require.Equal(t, keys[0], d.GrantKey, "an explicit key replaces it")
	res, d := w.approved(t, "--owner", "alice", "--grant-key", "none", userCode)
	require.True(t, d.GrantKey.IsZero(), "none un-enrols")
	require.Empty(t, res.GrantKey)
}

// Without a grant key on the relay, or with --grant-key none, nothing is
// enrolled; a malformed key is refused before anything is written.
func TestApproveWithoutAGrantKeyEnrolsNothing(t *testing.T) {
	_, d := newWorld(t).approved(t, "--owner", "alice", userCode)
	require.True(t, d.GrantKey.IsZero())
	grants, _ := grantsWith(t, 1)
	_, d = newWorldWith(t, grants, nil).approved(t, "--owner", "alice", "--grant-key", "none", userCode)
	require.True(t, d.GrantKey.IsZero())

	w := newWorldWith(t, grants, nil)
	code, _, stderr := run(t, w.args("--owner", "alice", "--grant-key", "not-a-key", userCode)...)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--grant-key: must be the unpadded base64url")
	_, ok := w.load(t).DeviceByFingerprint(w.device.Identity)
	require.False(t, ok)
}
