package projection_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
)

// grantKeyOf is a real Ed25519 public key as a device record names it.
func grantKeyOf(t *testing.T, seed byte) (string, projection.GrantKey) {
	t.Helper()
	s := newKey(seed).pub.Identity
	k, err := projection.ParseGrantKey(s)
	require.NoError(t, err)
	return s, k
}

// grantsDoc is fullDoc with grants.md G-R24's two additions: mappings in
// the consents and a grant key on the device.
func grantsDoc(t *testing.T) string {
	key, _ := grantKeyOf(t, 5)
	return `{
 "sites": [{"siteId": "s1", "site": {"identity": "SI", "encryption": "SE", "encryptionSig": "SS"}}],
 "consents": [
  {"owner": "alice", "siteId": "s1", "mappings": [{"purpose": "default", "kind": "llm.generate", "service": "echo", "serviceOwner": "bob"}]},
  {"owner": "bob", "siteId": "s1", "mappings": [{"purpose": "default", "kind": "llm.generate", "service": "echo"}, {"purpose": "summarise", "kind": "llm.chat", "service": "qwen"}]},
  {"owner": "carol", "siteId": "s1", "mappings": []}
 ],
 "devices": [{"owner": "bob", "runnerId": "r1", "device": {"identity": "DI", "encryption": "DE", "encryptionSig": "DS"}, "grantKey": "` + key + `"}],
 "rosters": [{"id": "team_bob", "owner": "bob", "members": ["alice"]}]
}`
}

func TestParseMappingsAndGrantKey(t *testing.T) {
	f, err := projection.Parse([]byte(grantsDoc(t)))
	require.NoError(t, err)
	_, key := grantKeyOf(t, 5)
	require.Equal(t, []projection.ConsentRecord{
		{Owner: "alice", SiteID: "s1", Mappings: projection.NewMappings(projection.Mapping{Purpose: "default", Kind: "llm.generate", Service: "echo", ServiceOwner: "bob"})},
		{Owner: "bob", SiteID: "s1", Mappings: projection.NewMappings(
			projection.Mapping{Purpose: "default", Kind: "llm.generate", Service: "echo"},
			projection.Mapping{Purpose: "summarise", Kind: "llm.chat", Service: "qwen"})},
		{Owner: "carol", SiteID: "s1"},
	}, f.Consents)
	require.Equal(t, key, f.Devices[0].GrantKey)
	require.Equal(t, newKey(5).pub.Identity, f.Devices[0].GrantKey.String())
	require.Equal(t, []projection.Mapping{{Purpose: "summarise", Kind: "llm.chat", Service: "qwen"}}, f.Consents[1].Mappings.List()[1:])

	// What Parse reads, encoding/json writes back, and Parse reads again.
	encoded, err := json.Marshal(f)
	require.NoError(t, err)
	again, err := projection.Parse(encoded)
	require.NoError(t, err)
	require.Equal(t, f, again)

	// The device is found with its key, by either index.
	p, err := projection.FromJSON([]byte(grantsDoc(t)))
	require.NoError(t, err)
	d, ok := p.DeviceFor("r1")
	require.True(t, ok)
	require.Equal(t, key, d.GrantKey)
	d, ok = p.DeviceByFingerprint("DI")
	require.True(t, ok)
	require.Equal(t, key, d.GrantKey)
}

// A record without the new fields reads exactly as before, and encodes
// exactly as before: no key appears, so New's hash does not move.
func TestFixturesWithoutGrantFieldsAreUnchanged(t *testing.T) {
	f, err := projection.Parse([]byte(fullDoc))
	require.NoError(t, err)
	require.True(t, f.Consents[0].Mappings.IsZero())
	require.Empty(t, f.Consents[0].Mappings.List())
	require.NotNil(t, f.Consents[0].Mappings.List())
	require.True(t, f.Devices[0].GrantKey.IsZero())
	require.Empty(t, f.Devices[0].GrantKey.String())
	encoded, err := json.Marshal(f)
	require.NoError(t, err)
	require.NotContains(t, string(encoded), "mappings")
	require.NotContains(t, string(encoded), "grantKey")
	require.Equal(t, `{"sites":[{"siteId":"s1","site":{"identity":"SI","encryption":"SE","encryptionSig":"SS"}}],"consents":[{"owner":"alice","siteId":"s1","paused":false}],"devices":[{"owner":"alice","runnerId":"r1","device":{"identity":"DI","encryption":"DE","encryptionSig":"DS"}}],"rosters":[{"id":"ro1","owner":"alice","members":["bob"]}],"revoked":[{"owner":"carol","siteId":"s1"}]}`, string(encoded))
	sum := sha256.Sum256(encoded)
	require.Equal(t, hex.EncodeToString(sum[:]), mustNew(t, f).Hash())
}

// Replicas compare hashes; so the hash must see every new fact.
func TestHashCoversMappingsAndGrantKeys(t *testing.T) {
	base := grantsDoc(t)
	hashOf := func(doc string) string {
		p, err := projection.FromJSON([]byte(doc))
		require.NoError(t, err)
		return p.Hash()
	}
	other, _ := grantKeyOf(t, 6)
	key, _ := grantKeyOf(t, 5)
	require.NotEqual(t, hashOf(base), hashOf(strings.Replace(base, `"service": "qwen"`, `"service": "llama"`, 1)))
	require.NotEqual(t, hashOf(base), hashOf(strings.Replace(base, key, other, 1)))

	f, err := projection.Parse([]byte(base))
	require.NoError(t, err)
	built := mustNew(t, f).Hash()
	f.Consents[0].Mappings = projection.NewMappings(projection.Mapping{Purpose: "default", Kind: "llm.generate", Service: "echo"})
	require.NotEqual(t, built, mustNew(t, f).Hash(), "a mapping's serviceOwner counts")
	f, _ = projection.Parse([]byte(base))
	f.Devices[0].GrantKey = projection.GrantKey{}
	require.NotEqual(t, built, mustNew(t, f).Hash(), "enrolment counts")
}

func TestParseRefusesMalformedGrantFields(t *testing.T) {
	key, _ := grantKeyOf(t, 5)
	raw, err := protocol.DecodeKey(key)
	require.NoError(t, err)
	mapping := `{"purpose": "summarise", "kind": "llm.chat", "service": "qwen"}`
	device := `"grantKey": "` + key + `"`
	for _, c := range []struct {
		name, old, replacement, want string
	}{
		{"unknown consent key", mapping + `]`, mapping + `], "x": [`, `unknown key "x"`},
		{"mappings null", `"mappings": []`, `"mappings": null`, "consents[2].mappings: null is not allowed"},
		{"mappings an object", `"mappings": []`, `"mappings": {}`, "consents[2].mappings: must be an array"},
		{"mapping not an object", `"mappings": []`, `"mappings": ["echo"]`, "consents[2].mappings[0]: must be an object"},
		{"unknown mapping key", mapping, `{"purpose": "summarise", "kind": "llm.chat", "service": "qwen", "owner": "bob"}`, `consents[1].mappings[1]: unknown key "owner"`},
		{"repeated mapping key", mapping, `{"purpose": "summarise", "kind": "llm.chat", "service": "qwen", "service": "x"}`, `duplicate key "service"`},
		{"no purpose", mapping, `{"kind": "llm.chat", "service": "qwen"}`, "consents[1].mappings[1].purpose: required"},
		{"no kind", mapping, `{"purpose": "summarise", "service": "qwen"}`, "consents[1].mappings[1].kind: required"},
		{"no service", mapping, `{"purpose": "summarise", "kind": "llm.chat"}`, "consents[1].mappings[1].service: required"},
		{"empty purpose", mapping, `{"purpose": "", "kind": "llm.chat", "service": "qwen"}`, "consents[1].mappings[1].purpose: must be a non-empty string"},
		{"empty service", mapping, `{"purpose": "p", "kind": "llm.chat", "service": ""}`, "consents[1].mappings[1].service: must be a non-empty string"},
		{"empty serviceOwner", mapping, `{"purpose": "p", "kind": "llm.chat", "service": "q", "serviceOwner": ""}`, "consents[1].mappings[1].serviceOwner: must be a non-empty string"},
		{"null serviceOwner", mapping, `{"purpose": "p", "kind": "llm.chat", "service": "q", "serviceOwner": null}`, "serviceOwner: null is not allowed"},
		{"number serviceOwner", mapping, `{"purpose": "p", "kind": "llm.chat", "service": "q", "serviceOwner": 1}`, "serviceOwner: must be a string"},
		{"unknown kind", mapping, `{"purpose": "p", "kind": "llm.embed", "service": "q"}`, `consents[1].mappings[1].kind: "llm.embed" is not a job kind`},
		{"kind case", mapping, `{"purpose": "p", "kind": "LLM.chat", "service": "q"}`, "is not a job kind"},
		{"empty grantKey", device, `"grantKey": ""`, "devices[0].grantKey: must be the unpadded base64url"},
		{"null grantKey", device, `"grantKey": null`, "devices[0].grantKey: null is not allowed"},
		{"number grantKey", device, `"grantKey": 5`, "devices[0].grantKey: must be a string"},
		{"padded grantKey", device, `"grantKey": "` + key + `="`, "devices[0].grantKey: must be the unpadded base64url"},
		{"standard base64 grantKey", device, `"grantKey": "` + strings.NewReplacer("-", "+", "_", "/").Replace(newKey(2).pub.Identity) + `"`, "unpadded base64url"},
		{"31-byte grantKey", device, `"grantKey": "` + protocol.EncodeKey(raw[:31]) + `"`, "32-byte"},
		{"33-byte grantKey", device, `"grantKey": "` + protocol.EncodeKey(append(raw, 1)) + `"`, "32-byte"},
		{"non-canonical grantKey", device, `"grantKey": "` + nonCanonical(t, key) + `"`, "unpadded base64url"},
		{"all-zero grantKey", device, `"grantKey": "` + protocol.EncodeKey(make([]byte, 32)) + `"`, "all-zero"},
		{"grantKey on a consent", `"owner": "carol", "siteId": "s1"`, `"owner": "carol", "siteId": "s1", ` + device, `unknown key "grantKey"`},
		{"mappings on a device", device, device + `, "mappings": []`, `unknown key "mappings"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := grantsDoc(t)
			require.Contains(t, doc, c.old)
			_, err := projection.Parse([]byte(strings.Replace(doc, c.old, c.replacement, 1)))
			require.ErrorContains(t, err, c.want)
			_, err = projection.FromJSON([]byte(strings.Replace(doc, c.old, c.replacement, 1)))
			require.Error(t, err)
		})
	}
}

// nonCanonical spells key's bytes with non-zero padding bits in its last
// character, which Go's lenient decoder reads as the same key.
func nonCanonical(t *testing.T, key string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, key[len(key)-1])
	spelled := key[:len(key)-1] + string(alphabet[last|1])
	if spelled == key {
		spelled = key[:len(key)-1] + string(alphabet[last|2])
	}
	raw, err := protocol.DecodeKey(spelled)
	require.NoError(t, err, "Go reads it")
	want, _ := protocol.DecodeKey(key)
	require.Equal(t, want, raw, "as the same key")
	return spelled
}

func TestValidateRefusesGrantFieldsBuiltInCode(t *testing.T) {
	for name, m := range map[string]projection.Mapping{
		"no purpose":   {Kind: "llm.chat", Service: "q"},
		"no service":   {Purpose: "p", Kind: "llm.chat"},
		"unknown kind": {Purpose: "p", Kind: "llm.embed", Service: "q"},
		"no kind":      {Purpose: "p", Service: "q"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := projection.New(&projection.Fixture{Consents: []projection.ConsentRecord{{Owner: "o", SiteID: "s", Mappings: projection.NewMappings(m)}}})
			require.Error(t, err)
		})
	}
	_, err := projection.New(&projection.Fixture{Consents: []projection.ConsentRecord{{Owner: "o", SiteID: "s",
		Mappings: projection.NewMappings(projection.Mapping{Purpose: "p", Kind: "llm.chat", Service: "q"})}}})
	require.NoError(t, err)
}

// Mappings stay comparable, as ConsentRecord always was, and compare by
// content.
func TestMappingsCompareByContent(t *testing.T) {
	a := projection.Mapping{Purpose: "p", Kind: "llm.chat", Service: "q"}
	b := projection.Mapping{Purpose: "p", Kind: "llm.chat", Service: "q", ServiceOwner: "bob"}
	require.True(t, projection.NewMappings(a, b) == projection.NewMappings(a, b))
	require.False(t, projection.NewMappings(a, b) == projection.NewMappings(b, a))
	require.True(t, projection.NewMappings() == projection.Mappings{})
	list := projection.NewMappings(a).List()
	list[0].Service = "changed"
	require.Equal(t, "q", projection.NewMappings(a).List()[0].Service)
	var decoded projection.ConsentRecord
	require.NoError(t, json.Unmarshal([]byte(`{"owner":"o","siteId":"s","paused":false,"mappings":[{"purpose":"p","kind":"llm.chat","service":"q"}]}`), &decoded))
	require.Equal(t, projection.ConsentRecord{Owner: "o", SiteID: "s", Mappings: projection.NewMappings(a)}, decoded)
}

// Two mappings for one (purpose, kind) are valid, the first wins, and the
// loader says so.
func TestDuplicateMappingsAreLoggedAtLoad(t *testing.T) {
	doc := strings.Replace(grantsDoc(t), `"service": "qwen"}`, `"service": "qwen"}, {"purpose": "default", "kind": "llm.generate", "service": "later"}`, 1)
	p, err := projection.FromJSON([]byte(doc))
	require.NoError(t, err)
	require.Equal(t, []string{"consents[1].mappings[2] repeats the (purpose, kind) of mappings[0], which wins"}, p.Warnings())
	clean, err := projection.FromJSON([]byte(grantsDoc(t)))
	require.NoError(t, err)
	require.Empty(t, clean.Warnings())

	path := filepath.Join(t.TempDir(), "fixture.json")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	var logs bytes.Buffer
	src, err := projection.Open(context.Background(), projection.Options{Path: path, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), PollInterval: -1})
	require.NoError(t, err)
	require.Equal(t, p.Hash(), src.Current().Hash())
	require.Contains(t, logs.String(), `"warning":"consents[1].mappings[2] repeats`)
}

// Enrolments counts the device records per grant key once per projection:
// each key once, in the order of its first record, revoked records
// included, records without a key left out.
func TestEnrolmentsCountRecordsPerGrantKey(t *testing.T) {
	_, k1 := grantKeyOf(t, 7)
	_, k2 := grantKeyOf(t, 8)
	device := func(runner string, seed byte, k projection.GrantKey, revoked bool) projection.DeviceRecord {
		return projection.DeviceRecord{Owner: "bob", RunnerID: runner, Device: newKey(seed).pub, GrantKey: k, Revoked: revoked}
	}
	p, err := projection.New(&projection.Fixture{Devices: []projection.DeviceRecord{
		device("r1", 11, k2, false), device("r2", 12, projection.GrantKey{}, false), device("r3", 13, k1, false),
		device("r4", 14, k2, true), device("r5", 15, k2, false),
	}})
	require.NoError(t, err)
	type count struct {
		key     projection.GrantKey
		devices int
	}
	var got []count
	for k, n := range p.Enrolments() {
		got = append(got, count{k, n})
	}
	require.Equal(t, []count{{k2, 3}, {k1, 1}}, got)

	for range p.Enrolments() {
		break // stopping early is allowed
	}
	empty, err := projection.New(projection.Empty())
	require.NoError(t, err)
	for range empty.Enrolments() {
		t.Fatal("an empty projection names no key")
	}
}
