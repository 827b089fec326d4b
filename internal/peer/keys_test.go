package peer

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
)

func mustKeys(t *testing.T) Keys {
	t.Helper()
	k, err := GenerateKeys()
	require.NoError(t, err)
	return k
}

func TestGenerateKeysPublicIdentityIsConsistent(t *testing.T) {
	k := mustKeys(t)
	pub := k.Public()
	require.True(t, pub.IsConsistent())
	require.Equal(t, pub, k.Public(), "Ed25519 is deterministic, so Public is stable")

	id, err := protocol.DecodeKey(pub.Identity)
	require.NoError(t, err)
	require.Len(t, id, 32)
	require.Equal(t, []byte(k.IdentityPublic()), id)
	enc, err := protocol.DecodeKey(pub.Encryption)
	require.NoError(t, err)
	require.Len(t, enc, 32)
	require.NotContains(t, pub.Identity+pub.Encryption+pub.EncryptionSig, "=", "keys travel unpadded")

	require.Regexp(t, regexp.MustCompile(`^BYOLLM(-[0-9A-HJKMNP-TV-Z]{4}){6}$`), k.KeyID())
	require.Equal(t, protocol.KeyID(id), k.KeyID())
	require.NotEqual(t, k.KeyID(), mustKeys(t).KeyID())
}

func TestNewKeysRefusesMismatchedIdentityHalves(t *testing.T) {
	a, b := mustKeys(t), mustKeys(t)
	forged := append(ed25519.PrivateKey(nil), a.IdentityPrivate()[:32]...)
	forged = append(forged, b.IdentityPublic()...)
	_, err := NewKeys(forged, a.EncryptionPrivate())
	require.ErrorContains(t, err, "does not match the seed")

	_, err = NewKeys(a.IdentityPrivate()[:32], a.EncryptionPrivate())
	require.ErrorContains(t, err, "want 64")

	same, err := NewKeys(a.IdentityPrivate(), a.EncryptionPrivate())
	require.NoError(t, err)
	require.Equal(t, a.Public(), same.Public())
}

// demoFile writes the demo key file shape by hand, not through
// MarshalDemoKeys, so the test pins the format other tools write.
func demoFile(t *testing.T, site Keys, dev Keys) []byte {
	t.Helper()
	enc := func(k Keys) (string, string) {
		e := k.EncryptionPrivate()
		return protocol.EncodeKey(k.IdentityPrivate()), protocol.EncodeKey(e[:])
	}
	sid, senc := enc(site)
	did, denc := enc(dev)
	doc := map[string]any{
		"note": "demo only",
		"site": map[string]any{
			"siteId": "site-demo", "identityPrivate": sid, "encryptionPrivate": senc, "public": site.Public(),
		},
		"devices": []any{map[string]any{
			"runnerId": "runner-1", "owner": "alice", "identityPrivate": did, "encryptionPrivate": denc, "public": dev.Public(),
		}},
	}
	data, err := json.Marshal(doc)
	require.NoError(t, err)
	return data
}

func TestLoadDemoKeys(t *testing.T) {
	site, dev := mustKeys(t), mustKeys(t)
	path := filepath.Join(t.TempDir(), "demo-keys.json")
	require.NoError(t, os.WriteFile(path, demoFile(t, site, dev), 0o600))

	got, err := LoadDemoKeys(path)
	require.NoError(t, err)
	require.Equal(t, "demo only", got.Note)
	require.Equal(t, "site-demo", got.Site.SiteID)
	require.Equal(t, site.Public(), got.Site.Keys.Public())
	d, ok := got.Device("runner-1")
	require.True(t, ok)
	require.Equal(t, "alice", d.Owner)
	require.Equal(t, dev.Public(), d.Keys.Public())
	_, ok = got.Device("runner-2")
	require.False(t, ok)

	// MarshalDemoKeys writes what ParseDemoKeys reads.
	again, err := MarshalDemoKeys(got)
	require.NoError(t, err)
	back, err := ParseDemoKeys(again)
	require.NoError(t, err)
	require.Equal(t, got.Site.Keys.Public(), back.Site.Keys.Public())
	require.Equal(t, got.Devices[0].Keys.Public(), back.Devices[0].Keys.Public())
}

func TestLoadDemoKeysRefusesInconsistentFile(t *testing.T) {
	site, dev, other := mustKeys(t), mustKeys(t), mustKeys(t)

	var doc map[string]any
	require.NoError(t, json.Unmarshal(demoFile(t, site, dev), &doc))
	doc["site"].(map[string]any)["public"] = other.Public()
	data, err := json.Marshal(doc)
	require.NoError(t, err)
	_, err = ParseDemoKeys(data)
	require.ErrorContains(t, err, "public.identity does not match")

	require.NoError(t, json.Unmarshal(demoFile(t, site, dev), &doc))
	doc["devices"].([]any)[0].(map[string]any)["encryptionPrivate"] = "AAAA"
	data, err = json.Marshal(doc)
	require.NoError(t, err)
	_, err = ParseDemoKeys(data)
	require.ErrorContains(t, err, "device runner-1: encryptionPrivate is 3 bytes")

	_, err = LoadDemoKeys(filepath.Join(t.TempDir(), "missing.json"))
	require.ErrorContains(t, err, "read demo keys")
}

// The published demo key file must stay loadable and self-consistent.
func TestRepositoryDemoKeys(t *testing.T) {
	const path = "../deploy/demo-keys.json"
	if _, err := os.Stat(path); os.IsNotExist(err) {
		t.Skip("no deploy/demo-keys.json in this checkout")
	}
	got, err := LoadDemoKeys(path)
	require.NoError(t, err)
	require.NotEmpty(t, got.Site.SiteID)
	require.NotEmpty(t, got.Devices)
}
