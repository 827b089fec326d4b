package pairing_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/pairing"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
)

// device is a consistent identity made from seed.
func device(seed byte) protocol.PublicIdentity {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	encryption := protocol.EncodeKey(bytes.Repeat([]byte{seed ^ 0x55}, 32))
	return protocol.PublicIdentity{
		Identity:      protocol.EncodeKey(priv.Public().(ed25519.PublicKey)),
		Encryption:    encryption,
		EncryptionSig: protocol.EncodeKey(ed25519.Sign(priv, protocol.EncryptionKeyMessage(encryption))),
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}

// baseDoc is a fixture laid out by hand, with a revoked device of carol's.
func baseDoc(t *testing.T) string {
	return `{
  "sites": [ {"siteId": "s1", "site": {"identity": "SI", "encryption": "SE", "encryptionSig": "SS"}} ],
  "consents": [
    {"owner": "alice", "siteId": "s1"}
  ],
  "devices": [
    {"owner": "bob", "runnerId": "r_bob", "device": {"identity": "BI", "encryption": "BE", "encryptionSig": "BS"}},
    {"owner": "carol", "runnerId": "r_carol", "device": ` + mustJSON(t, device(3)) + `, "revoked": true}
  ],
  "revoked": [{"owner": "dave", "siteId": "s1"}]
}
`
}

func writeFixture(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fixture.json")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o640))
	return path
}

func load(t *testing.T, path string) *projection.Projection {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	p, err := projection.FromJSON(raw)
	require.NoError(t, err)
	return p
}

// requireOnlyFile checks the directory holds the fixture and no leftovers.
func requireOnlyFile(t *testing.T, path string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")
	require.Equal(t, filepath.Base(path), entries[0].Name())
}

func TestApproveAdds(t *testing.T) {
	path := writeFixture(t, baseDoc(t))
	before := load(t, path).Fixture()
	a := pairing.Approval{Owner: "alice", RunnerID: "r_alice", Device: device(1)}

	outcome, err := pairing.Approve(path, a)
	require.NoError(t, err)
	require.Equal(t, pairing.Added, outcome)

	after := load(t, path)
	got, ok := after.DeviceByFingerprint(a.Device.Identity)
	require.True(t, ok)
	require.Equal(t, projection.DeviceRecord{Owner: "alice", RunnerID: "r_alice", Device: a.Device}, got)
	want := before
	want.Devices = append(want.Devices, got)
	require.Equal(t, want, after.Fixture(), "everything else is kept")

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, kept := range []string{
		`[ {"siteId": "s1", "site": {"identity": "SI", "encryption": "SE", "encryptionSig": "SS"}} ]`,
		"[\n    {\"owner\": \"alice\", \"siteId\": \"s1\"}\n  ]",
		`{"owner": "bob", "runnerId": "r_bob", "device": {"identity": "BI", "encryption": "BE", "encryptionSig": "BS"}}`,
		`[{"owner": "dave", "siteId": "s1"}]`,
	} {
		require.Contains(t, string(raw), kept, "other values keep their bytes")
	}
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), info.Mode().Perm(), "the file keeps its mode")
	requireOnlyFile(t, path)

	outcome, err = pairing.Approve(path, a)
	require.NoError(t, err)
	require.Equal(t, pairing.Unchanged, outcome)
	again, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, raw, again, "approving again writes nothing")
}

func TestApproveReapproves(t *testing.T) {
	path := writeFixture(t, baseDoc(t))
	a := pairing.Approval{Owner: "erin", RunnerID: "r_erin", Device: device(3)}

	outcome, err := pairing.Approve(path, a)
	require.NoError(t, err)
	require.Equal(t, pairing.Reapproved, outcome)

	p := load(t, path)
	f := p.Fixture()
	require.Len(t, f.Devices, 2, "replaced in place, not appended")
	require.Equal(t, projection.DeviceRecord{Owner: "erin", RunnerID: "r_erin", Device: a.Device}, f.Devices[1])
	require.False(t, p.RevokedDevice("r_erin"), "re-approval clears the revocation")
	_, ok := p.DeviceFor("r_carol")
	require.False(t, ok)
}

func TestApproveWithoutDevicesList(t *testing.T) {
	path := writeFixture(t, `{"consents": []}`)
	outcome, err := pairing.Approve(path, pairing.Approval{Owner: "alice", RunnerID: "r1", Device: device(1)})
	require.NoError(t, err)
	require.Equal(t, pairing.Added, outcome)
	_, ok := load(t, path).DeviceFor("r1")
	require.True(t, ok)
}

func TestApproveRefuses(t *testing.T) {
	inconsistent := device(1)
	inconsistent.Encryption = device(2).Encryption
	tests := []struct {
		name string
		doc  string
		a    pairing.Approval
		want error
		text string
	}{
		{"empty owner", "", pairing.Approval{RunnerID: "r", Device: device(1)}, pairing.ErrInvalidApproval, "empty owner"},
		{"empty runner id", "", pairing.Approval{Owner: "o", Device: device(1)}, pairing.ErrInvalidApproval, "empty runner id"},
		{"inconsistent device", "", pairing.Approval{Owner: "o", RunnerID: "r", Device: inconsistent}, pairing.ErrInvalidApproval, "not consistent"},
		{"runner id of another device", "", pairing.Approval{Owner: "o", RunnerID: "r_bob", Device: device(1)}, pairing.ErrRunnerIDTaken, `"r_bob" is devices[0]`},
		{"re-approval onto another device's runner id", "", pairing.Approval{Owner: "o", RunnerID: "r_bob", Device: device(3)}, pairing.ErrRunnerIDTaken, ""},
		{"invalid fixture on disk", `{"consents": [], "extra": 1}`, pairing.Approval{Owner: "o", RunnerID: "r", Device: device(1)}, nil, "refusing to edit an invalid fixture"},
		{"not JSON", `{"consents": [`, pairing.Approval{Owner: "o", RunnerID: "r", Device: device(1)}, nil, "refusing to edit an invalid fixture"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := tc.doc
			if doc == "" {
				doc = baseDoc(t)
			}
			path := writeFixture(t, doc)
			outcome, err := pairing.Approve(path, tc.a)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			require.ErrorContains(t, err, tc.text)
			require.Equal(t, pairing.Unchanged, outcome)
			raw, readErr := os.ReadFile(path)
			require.NoError(t, readErr)
			require.Equal(t, doc, string(raw), "nothing is written")
			requireOnlyFile(t, path)
		})
	}
	_, err := pairing.Approve(filepath.Join(t.TempDir(), "missing.json"), pairing.Approval{Owner: "o", RunnerID: "r", Device: device(1)})
	require.Error(t, err)
}

func TestApproveFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "data", "fixture.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o750))
	require.NoError(t, os.WriteFile(target, []byte(baseDoc(t)), 0o600))
	link := filepath.Join(dir, "fixture.json")
	require.NoError(t, os.Symlink(filepath.Join("data", "fixture.json"), link))

	_, err := pairing.Approve(link, pairing.Approval{Owner: "alice", RunnerID: "r1", Device: device(1)})
	require.NoError(t, err)
	info, err := os.Lstat(link)
	require.NoError(t, err)
	require.Equal(t, os.ModeSymlink, info.Mode()&os.ModeSymlink, "the link stays a link")
	_, ok := load(t, target).DeviceFor("r1")
	require.True(t, ok)
}

// The example fixture shipped in deploy/ takes an approval and still loads.
func TestApproveDeployExample(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "fixture.example.json"))
	require.NoError(t, err)
	path := writeFixture(t, string(raw))
	outcome, err := pairing.Approve(path, pairing.Approval{Owner: "alice", RunnerID: "runner_new", Device: device(9)})
	require.NoError(t, err)
	require.Equal(t, pairing.Added, outcome)
	before, err := projection.FromJSON(raw)
	require.NoError(t, err)
	after := load(t, path).Fixture()
	require.Equal(t, before.Fixture().Devices, after.Devices[:len(after.Devices)-1])
	require.Equal(t, before.Fixture().Sites, after.Sites)
}

// A relay watching the file picks up the approval on its next reload, which
// is what makes every replica's next poll answer approved.
func TestApproveReachesASource(t *testing.T) {
	path := writeFixture(t, baseDoc(t))
	src, err := projection.Open(context.Background(), projection.Options{Path: path, PollInterval: -1})
	require.NoError(t, err)
	d := device(1)
	_, ok := src.Current().DeviceByFingerprint(d.Identity)
	require.False(t, ok)

	_, err = pairing.Approve(path, pairing.Approval{Owner: "alice", RunnerID: "r1", Device: d})
	require.NoError(t, err)
	require.NoError(t, src.Reload(context.Background()))
	got, ok := src.Current().DeviceByFingerprint(d.Identity)
	require.True(t, ok)
	require.Equal(t, "alice", got.Owner)
}

func TestOutcomeString(t *testing.T) {
	require.Equal(t, "added", pairing.Added.String())
	require.Equal(t, "re-approved", pairing.Reapproved.String())
	require.Equal(t, "unchanged", pairing.Unchanged.String())
}
