package projection_test

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
)

var deployDir = filepath.Join("..", "deploy")

// requireRealIdentity checks that an identity is made of real keys of the
// right sizes and that its encryption key is signed by its identity key.
func requireRealIdentity(t *testing.T, what string, p protocol.PublicIdentity) {
	t.Helper()
	identity, err := protocol.DecodeKey(p.Identity)
	require.NoError(t, err, what)
	require.Len(t, identity, ed25519.PublicKeySize, what)
	encryption, err := protocol.DecodeKey(p.Encryption)
	require.NoError(t, err, what)
	require.Len(t, encryption, 32, what)
	sig, err := protocol.DecodeKey(p.EncryptionSig)
	require.NoError(t, err, what)
	require.True(t, ed25519.Verify(identity, []byte("byollm/v1/encryption-key:"+p.Encryption), sig), what)
	require.True(t, p.IsConsistent(), what)
}

func loadExample(t *testing.T) *projection.Projection {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "fixture.example.json"))
	require.NoError(t, err)
	p, err := projection.FromJSON(raw)
	require.NoError(t, err)
	return p
}

func TestExampleFixture(t *testing.T) {
	p := loadExample(t)
	f := p.Fixture()

	require.Len(t, f.Sites, 1)
	require.Equal(t, "site_example", f.Sites[0].SiteID)
	for _, s := range f.Sites {
		requireRealIdentity(t, "site "+s.SiteID, s.Site)
	}
	require.Len(t, f.Devices, 2)
	for _, d := range f.Devices {
		requireRealIdentity(t, "device "+d.RunnerID, d.Device)
		got, ok := p.DeviceByFingerprint(d.Device.Identity)
		require.True(t, ok)
		require.Equal(t, d, got)
	}

	// What the example is meant to show.
	const site = "site_example"
	require.True(t, p.MayRouteFor("alice", site))
	require.True(t, p.PausedFor("bob", site), "bob's consent is paused")
	_, ok := p.ConsentFor("bob", site)
	require.True(t, ok, "a paused consent still pairs")
	_, ok = p.ConsentFor("carol", site)
	require.False(t, ok, "carol's revocation wins over her consent record")
	require.Equal(t, []string{"alice", "bob", "carol"}, p.OwnersRunnableBy("alice"))
	require.Equal(t, []string{"alice"}, p.RoutableOwners("alice", site))
	require.Empty(t, p.RoutableOwners("bob", site))
}

// demoKeys is the documented shape of deploy/demo-keys.json.
type demoKeys struct {
	Note string `json:"note"`
	Site struct {
		SiteID            string                  `json:"siteId"`
		IdentityPrivate   string                  `json:"identityPrivate"`
		EncryptionPrivate string                  `json:"encryptionPrivate"`
		Public            protocol.PublicIdentity `json:"public"`
	} `json:"site"`
	Devices []struct {
		RunnerID          string                  `json:"runnerId"`
		Owner             string                  `json:"owner"`
		IdentityPrivate   string                  `json:"identityPrivate"`
		EncryptionPrivate string                  `json:"encryptionPrivate"`
		Public            protocol.PublicIdentity `json:"public"`
	} `json:"devices"`
}

// requireKeysMatch checks that the private keys produce the public identity.
func requireKeysMatch(t *testing.T, what, identityPrivate, encryptionPrivate string, pub protocol.PublicIdentity) {
	t.Helper()
	priv, err := protocol.DecodeKey(identityPrivate)
	require.NoError(t, err, what)
	require.Len(t, priv, ed25519.PrivateKeySize, what)
	require.Equal(t, pub.Identity, protocol.EncodeKey(ed25519.PrivateKey(priv).Public().(ed25519.PublicKey)), what)

	xpriv, err := protocol.DecodeKey(encryptionPrivate)
	require.NoError(t, err, what)
	xkey, err := ecdh.X25519().NewPrivateKey(xpriv)
	require.NoError(t, err, what)
	require.Equal(t, pub.Encryption, protocol.EncodeKey(xkey.PublicKey().Bytes()), what)

	requireRealIdentity(t, what, pub)
}

func TestDemoKeysMatchExampleFixture(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "demo-keys.json"))
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var keys demoKeys
	require.NoError(t, dec.Decode(&keys))
	require.Contains(t, keys.Note, "never use them in production")

	p := loadExample(t)

	requireKeysMatch(t, "site", keys.Site.IdentityPrivate, keys.Site.EncryptionPrivate, keys.Site.Public)
	s, ok := p.SiteFor(keys.Site.SiteID)
	require.True(t, ok)
	require.Equal(t, keys.Site.Public, s.Site)

	require.Len(t, keys.Devices, len(p.Fixture().Devices))
	for _, d := range keys.Devices {
		requireKeysMatch(t, d.RunnerID, d.IdentityPrivate, d.EncryptionPrivate, d.Public)
		rec, ok := p.DeviceFor(d.RunnerID)
		require.True(t, ok, d.RunnerID)
		require.Equal(t, d.Owner, rec.Owner)
		require.Equal(t, d.Public, rec.Device)
	}
}
