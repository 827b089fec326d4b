package projection_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
)

// key is a deterministic Ed25519 identity for tests.
type key struct {
	priv ed25519.PrivateKey
	pub  protocol.PublicIdentity
	id   string
}

func newKey(seed byte) key {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	identity := protocol.EncodeKey(priv.Public().(ed25519.PublicKey))
	encryption := protocol.EncodeKey(bytes.Repeat([]byte{seed ^ 0xff}, 32))
	sig := protocol.EncodeKey(ed25519.Sign(priv, protocol.EncryptionKeyMessage(encryption)))
	id, _ := protocol.KeyIDOf(identity)
	return key{priv: priv, pub: protocol.PublicIdentity{Identity: identity, Encryption: encryption, EncryptionSig: sig}, id: id}
}

// link is old's succession to next.
func link(old, next key) projection.Succession {
	sig := ed25519.Sign(old.priv, projection.SuccessionStatement(old.id, next.id))
	return projection.Succession{Identity: old.pub, Signature: protocol.EncodeKey(sig)}
}

// rotated is a site whose keys went keys[0] → keys[1] → … → keys[n-1],
// with the chain oldest first, as the published daemon walks it.
func rotated(siteID string, retiringUntil int64, keys ...key) projection.SiteRecord {
	s := projection.SiteRecord{SiteID: siteID, Site: keys[len(keys)-1].pub, RetiringUntil: retiringUntil}
	for i := 1; i < len(keys); i++ {
		s.Succeeds = append(s.Succeeds, link(keys[i-1], keys[i]))
	}
	return s
}

func chainOf(n int) []key {
	keys := make([]key, n)
	for i := range keys {
		keys[i] = newKey(byte(i + 1))
	}
	return keys
}

func TestSuccessionChains(t *testing.T) {
	k1, k2, k3 := newKey(1), newKey(2), newKey(3)
	valid := rotated("s", 0, k1, k2, k3)
	tests := []struct {
		name string
		site func() projection.SiteRecord
		want error
	}{
		{"no chain", func() projection.SiteRecord { return projection.SiteRecord{SiteID: "s", Site: k3.pub} }, nil},
		{"one link", func() projection.SiteRecord { return rotated("s", 0, k2, k3) }, nil},
		{"two links", func() projection.SiteRecord { return valid }, nil},
		{"64 links", func() projection.SiteRecord { return rotated("s", 0, chainOf(65)...) }, nil},
		{"65 links", func() projection.SiteRecord { return rotated("s", 0, chainOf(66)...) }, projection.ErrChainTooLong},
		{"newest predecessor first (the spec's order, not the daemon's)", func() projection.SiteRecord {
			s := valid
			s.Succeeds = []projection.Succession{valid.Succeeds[1], valid.Succeeds[0]}
			return s
		}, projection.ErrBrokenLink},
		{"broken signature", func() projection.SiteRecord {
			s := rotated("s", 0, k1, k2, k3)
			s.Succeeds[0].Signature = protocol.EncodeKey(ed25519.Sign(k1.priv, []byte("something else")))
			return s
		}, projection.ErrBrokenLink},
		{"signed by the wrong key", func() projection.SiteRecord {
			s := rotated("s", 0, k2, k3)
			s.Succeeds[0].Signature = protocol.EncodeKey(ed25519.Sign(k3.priv, projection.SuccessionStatement(k2.id, k3.id)))
			return s
		}, projection.ErrBrokenLink},
		{"names another successor", func() projection.SiteRecord {
			s := rotated("s", 0, k1, k2)
			s.Site = k3.pub
			return s
		}, projection.ErrBrokenLink},
		{"inconsistent link identity", func() projection.SiteRecord {
			s := rotated("s", 0, k2, k3)
			s.Succeeds[0].Identity.Encryption = k1.pub.Encryption
			return s
		}, projection.ErrBrokenLink},
		{"current key not base64url", func() projection.SiteRecord {
			s := rotated("s", 0, k2, k3)
			s.Site.Identity = "not a key!"
			return s
		}, projection.ErrBrokenLink},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			site := tc.site()
			err := projection.VerifySuccessions(site)
			_, newErr := projection.New(&projection.Fixture{Sites: []projection.SiteRecord{site}})
			if tc.want == nil {
				require.NoError(t, err)
				require.NoError(t, newErr)
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.ErrorContains(t, newErr, "sites[0].succeeds: ")
		})
	}
}

// v2Doc is the spec §7.2 example with real keys, its chain oldest first
// (see VerifySuccessions for why not as the spec writes it).
func v2Doc(t *testing.T) []byte {
	t.Helper()
	k1, k2, k3, other := newKey(1), newKey(2), newKey(3), newKey(4)
	f := projection.Fixture{
		Sites: []projection.SiteRecord{
			rotated("site_example", 1796500000000, k1, k2, k3),
			{SiteID: "site_other", Site: other.pub},
		},
		Consents: []projection.ConsentRecord{
			{Owner: "alice", SiteID: "site_example"},
			{Owner: "bob", SiteID: "site_example", Paused: true},
			{Owner: "alice", SiteID: "site_other"},
		},
		Devices: []projection.DeviceRecord{
			{Owner: "alice", RunnerID: "runner_alice_laptop", Device: newKey(10).pub},
			{Owner: "bob", RunnerID: "runner_bob_old", Device: newKey(11).pub, Revoked: true},
		},
		Rosters: []projection.RosterRecord{{ID: "roster_alice", Owner: "alice", Members: []string{"bob"}}},
		Revoked: []projection.RevocationRecord{{Owner: "carol", SiteID: "site_example"}},
	}
	raw, err := json.MarshalIndent(f, "", "  ")
	require.NoError(t, err)
	return raw
}

func TestParseV2Example(t *testing.T) {
	raw := v2Doc(t)
	require.Contains(t, string(raw), `"retiringUntil": 1796500000000`)
	require.Contains(t, string(raw), `"revoked": true`)
	p, err := projection.FromJSON(raw)
	require.NoError(t, err)

	site, ok := p.SiteFor("site_example")
	require.True(t, ok)
	require.Len(t, site.Succeeds, 2)
	require.Equal(t, int64(1796500000000), site.RetiringUntil)
	require.Equal(t, []projection.Route{{"site_example", "alice"}, {"site_other", "alice"}}, p.RoutesFor("alice"))
	require.Empty(t, p.RoutesFor("bob"), "bob's only consent is paused")
	require.Equal(t, []string{"site_example"}, siteIDs(p.SitesFor("bob")))
	require.Equal(t, []string{"site_example"}, siteIDs(p.AwaitingConsentFor("bob")))
	require.Empty(t, p.AwaitingConsentFor("alice"))
	require.True(t, p.RevokedDevice("runner_bob_old"))
	require.False(t, p.RevokedDevice("runner_alice_laptop"))
	require.False(t, p.RevokedDevice("nobody"))
	require.Empty(t, p.SitesFor("carol"), "revoked")

	// New hashes the encoding, which round-trips the v2 fields.
	f, err := projection.Parse(raw)
	require.NoError(t, err)
	q, err := projection.New(f)
	require.NoError(t, err)
	require.Equal(t, p.Fixture(), q.Fixture())
}

func TestV0FixtureEncodesWithoutV2Fields(t *testing.T) {
	f, err := projection.Parse([]byte(fullDoc))
	require.NoError(t, err)
	raw, err := json.Marshal(f)
	require.NoError(t, err)
	for _, k := range []string{"succeeds", "retiringUntil", `"revoked":false`} {
		require.NotContains(t, string(raw), k, "a v0 fixture hashes as it did before v2 existed")
	}
}

func TestParseV2Strictness(t *testing.T) {
	k2, k3 := newKey(2), newKey(3)
	l := link(k2, k3)
	site := func(extra string) string {
		id, _ := json.Marshal(k3.pub)
		return `{"consents": [], "sites": [{"siteId": "s", "site": ` + string(id) + extra + `}]}`
	}
	linkJSON, _ := json.Marshal(l)
	linkIdentity, _ := json.Marshal(l.Identity)
	good := `, "succeeds": [` + string(linkJSON) + `]`
	accepts := map[string]string{
		"chain":                good,
		"empty chain":          `, "succeeds": []`,
		"retiringUntil":        good + `, "retiringUntil": 1796500000000`,
		"retiringUntil 1":      `, "retiringUntil": 1`,
		"exponent integer":     `, "retiringUntil": 1.7965e12`,
		"fraction zero":        `, "retiringUntil": 1796500000000.0`,
		"largest safe integer": `, "retiringUntil": 9007199254740991`,
	}
	for name, doc := range accepts {
		t.Run("accepts "+name, func(t *testing.T) {
			_, err := projection.Parse([]byte(site(doc)))
			require.NoError(t, err)
		})
	}
	refusals := []struct{ name, extra, want string }{
		{"retiringUntil zero", `, "retiringUntil": 0`, "sites[0].retiringUntil: must be a positive safe integer"},
		{"retiringUntil negative", `, "retiringUntil": -5`, "sites[0].retiringUntil: must be a positive safe integer"},
		{"retiringUntil fraction", `, "retiringUntil": 1.5`, "sites[0].retiringUntil: must be a positive safe integer"},
		{"retiringUntil 2^53", `, "retiringUntil": 9007199254740992`, "sites[0].retiringUntil: must be a positive safe integer"},
		{"retiringUntil huge", `, "retiringUntil": 1e400`, "sites[0].retiringUntil: must be a positive safe integer"},
		{"retiringUntil string", `, "retiringUntil": "1"`, "sites[0].retiringUntil: must be a number"},
		{"retiringUntil null", `, "retiringUntil": null`, "sites[0].retiringUntil: null is not allowed"},
		{"succeeds null", `, "succeeds": null`, "sites[0].succeeds: null is not allowed"},
		{"succeeds object", `, "succeeds": {}`, "sites[0].succeeds: must be an array"},
		{"unknown link key", `, "succeeds": [{"identity": ` + string(linkIdentity) + `, "signature": "x", "at": 1}]`, `sites[0].succeeds[0]: unknown key "at"`},
		{"link without signature", `, "succeeds": [{"identity": ` + string(linkIdentity) + `}]`, "sites[0].succeeds[0].signature: required"},
		{"link without identity", `, "succeeds": [{"signature": "x"}]`, "sites[0].succeeds[0].identity: required"},
		{"empty signature", `, "succeeds": [{"identity": ` + string(linkIdentity) + `, "signature": ""}]`, "sites[0].succeeds[0].signature: must be a non-empty string"},
		{"bad signature", `, "succeeds": [{"identity": ` + string(linkIdentity) + `, "signature": "x"}]`, "sites[0].succeeds: succession link does not verify"},
		{"site key in other case", `, "Succeeds": []`, `sites[0]: unknown key "Succeeds"`},
	}
	for _, tc := range refusals {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			_, err := projection.Parse([]byte(site(tc.extra)))
			require.ErrorContains(t, err, tc.want)
		})
	}
	for name, tc := range map[string]struct{ device, want string }{
		"revoked string": {`"revoked": "yes"`, "devices[0].revoked: must be a boolean"},
		"revoked null":   {`"revoked": null`, "devices[0].revoked: null is not allowed"},
	} {
		t.Run("refuses "+name, func(t *testing.T) {
			_, err := projection.Parse([]byte(edit(t, `"runnerId": "r1"`, `"runnerId": "r1", `+tc.device)))
			require.ErrorContains(t, err, tc.want)
		})
	}
	f, err := projection.Parse([]byte(edit(t, `"runnerId": "r1"`, `"runnerId": "r1", "revoked": false`)))
	require.NoError(t, err)
	require.False(t, f.Devices[0].Revoked)
}

func TestVerifyingKeysRetiringWindow(t *testing.T) {
	k1, k2, k3 := newKey(1), newKey(2), newKey(3)
	const until = int64(1796500000000)
	s := rotated("s", until, k1, k2, k3)
	all := []string{k3.pub.Identity, k1.pub.Identity, k2.pub.Identity}
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	tests := []struct {
		name string
		site projection.SiteRecord
		now  time.Time
		want []string
	}{
		{"long before", s, at(0), all},
		{"one ms before", s, at(until - 1), all},
		{"sub-millisecond before the end counts as before", s, at(until - 1).Add(999 * time.Microsecond), all},
		{"at the end", s, at(until), all[:1]},
		{"after", s, at(until + 1), all[:1]},
		{"no retiringUntil", rotated("s", 0, k1, k2, k3), at(0), all[:1]},
		{"no chain", projection.SiteRecord{SiteID: "s", Site: k3.pub, RetiringUntil: until}, at(0), all[:1]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.site.VerifyingKeys(tc.now))
		})
	}
}

func TestSuccessionsFor(t *testing.T) {
	k1, k2, other := newKey(1), newKey(2), newKey(4)
	p, err := projection.New(&projection.Fixture{
		Sites: []projection.SiteRecord{
			rotated("a", 0, k1, k2),
			{SiteID: "b", Site: other.pub},
			rotated("c", 1796500000000, newKey(5), newKey(6)),
		},
		Consents: []projection.ConsentRecord{
			{Owner: "alice", SiteID: "a", Paused: true},
			{Owner: "alice", SiteID: "b"},
			{Owner: "bob", SiteID: "b"},
		},
	})
	require.NoError(t, err)
	got := p.SuccessionsFor("alice")
	require.Equal(t, map[string]projection.Rotation{k2.id: {Succeeds: []projection.Succession{link(k1, k2)}}}, got,
		"a paused consent still pins the site and its chain; site c is not pinned")
	require.Empty(t, p.SuccessionsFor("bob"))
	require.NotNil(t, p.SuccessionsFor("nobody"))

	raw, err := json.Marshal(got[k2.id])
	require.NoError(t, err)
	require.NotContains(t, string(raw), "retiringUntil", "omitted when the record has none")
}

func TestSiteIDForKey(t *testing.T) {
	k1, k2 := newKey(1), newKey(2)
	p, err := projection.New(&projection.Fixture{Sites: []projection.SiteRecord{
		rotated("first", 0, k1, k2),
		{SiteID: "second", Site: k2.pub},
		{SiteID: "fake", Site: protocol.PublicIdentity{Identity: "!!", Encryption: "e", EncryptionSig: "s"}},
	}})
	require.NoError(t, err)
	got, ok := p.SiteIDForKey(k2.id)
	require.True(t, ok)
	require.Equal(t, "first", got, "the first site with that current key")
	_, ok = p.SiteIDForKey(k1.id)
	require.False(t, ok, "a retiring key names no site")
	_, ok = p.SiteIDForKey("!!")
	require.False(t, ok)
}

func TestRevokedDeviceFirstRecordWins(t *testing.T) {
	p, err := projection.New(&projection.Fixture{Devices: []projection.DeviceRecord{
		{Owner: "a", RunnerID: "r", Device: newKey(1).pub},
		{Owner: "a", RunnerID: "r", Device: newKey(2).pub, Revoked: true},
		{Owner: "a", RunnerID: "q", Device: newKey(3).pub, Revoked: true},
	}})
	require.NoError(t, err)
	require.False(t, p.RevokedDevice("r"), "the shadowed record does not count")
	require.True(t, p.RevokedDevice("q"))
	d, ok := p.DeviceByFingerprint(newKey(3).pub.Identity)
	require.True(t, ok, "a revoked device is still found by fingerprint: pairing does not check revocation")
	require.True(t, d.Revoked)
}

// routesCase is a fixture, an owner, and the routes RoutesFor and
// ClaimRoutesFor give that owner (none when want is nil).
type routesCase struct {
	name      string
	f         projection.Fixture
	owner     string
	want      []projection.Route
	wantClaim []projection.Route
}

// routesForCases are the worked examples of the spec and the cases around
// them: pauses, revocations, unregistered sites, duplicates.
func routesForCases() []routesCase {
	site := func(id string) projection.SiteRecord {
		return projection.SiteRecord{SiteID: id, Site: protocol.PublicIdentity{Identity: id + "I", Encryption: "E", EncryptionSig: "S"}}
	}
	consent := func(owner, siteID string, paused bool) projection.ConsentRecord {
		return projection.ConsentRecord{Owner: owner, SiteID: siteID, Paused: paused}
	}
	roster := []projection.RosterRecord{{ID: "r", Owner: "bob", Members: []string{"alice", "carol", "bob"}}}
	return []routesCase{
		{
			name: "spec worked example, bob",
			f: projection.Fixture{
				Sites:    []projection.SiteRecord{site("A"), site("B")},
				Consents: []projection.ConsentRecord{consent("bob", "A", false), consent("alice", "A", false), consent("alice", "B", false)},
				Rosters:  []projection.RosterRecord{{ID: "r", Owner: "bob", Members: []string{"alice"}}},
			},
			owner:     "bob",
			want:      []projection.Route{{"A", "bob"}, {"A", "alice"}},
			wantClaim: []projection.Route{{"A", "bob"}},
		},
		{
			name: "spec worked example, alice: rosters do not work in reverse",
			f: projection.Fixture{
				Sites:    []projection.SiteRecord{site("A"), site("B")},
				Consents: []projection.ConsentRecord{consent("bob", "A", false), consent("alice", "A", false), consent("alice", "B", false)},
				Rosters:  []projection.RosterRecord{{ID: "r", Owner: "bob", Members: []string{"alice"}}},
			},
			owner:     "alice",
			want:      []projection.Route{{"A", "alice"}, {"B", "alice"}},
			wantClaim: []projection.Route{{"A", "alice"}, {"B", "alice"}},
		},
		{
			name: "device owner paused: nothing for that site, members included",
			f: projection.Fixture{
				Sites:    []projection.SiteRecord{site("A")},
				Consents: []projection.ConsentRecord{consent("bob", "A", true), consent("alice", "A", false)},
				Rosters:  roster,
			},
			owner: "bob",
		},
		{
			name: "member paused or revoked: that member's route goes silently",
			f: projection.Fixture{
				Sites:    []projection.SiteRecord{site("A")},
				Consents: []projection.ConsentRecord{consent("bob", "A", false), consent("alice", "A", true), consent("carol", "A", false)},
				Rosters:  roster,
				Revoked:  []projection.RevocationRecord{{Owner: "carol", SiteID: "A"}},
			},
			owner:     "bob",
			want:      []projection.Route{{"A", "bob"}},
			wantClaim: []projection.Route{{"A", "bob"}},
		},
		{
			name: "revocation beats a consent that still exists",
			f: projection.Fixture{
				Sites:    []projection.SiteRecord{site("A"), site("B")},
				Consents: []projection.ConsentRecord{consent("bob", "A", false), consent("bob", "B", false)},
				Revoked:  []projection.RevocationRecord{{Owner: "bob", SiteID: "A"}},
			},
			owner:     "bob",
			want:      []projection.Route{{"B", "bob"}},
			wantClaim: []projection.Route{{"B", "bob"}},
		},
		{
			name: "unregistered site routes nothing; duplicate sites and members add nothing",
			f: projection.Fixture{
				Sites:    []projection.SiteRecord{site("A"), site("A")},
				Consents: []projection.ConsentRecord{consent("bob", "A", false), consent("bob", "Z", false), consent("alice", "A", false)},
				Rosters:  append(roster, projection.RosterRecord{ID: "r2", Owner: "bob", Members: []string{"alice"}}),
			},
			owner:     "bob",
			want:      []projection.Route{{"A", "bob"}, {"A", "alice"}},
			wantClaim: []projection.Route{{"A", "bob"}},
		},
		{name: "unknown owner", f: projection.Fixture{Sites: []projection.SiteRecord{site("A")}}, owner: "nobody"},
	}
}

func TestRoutesFor(t *testing.T) {
	tests := routesForCases()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := projection.New(&tc.f)
			require.NoError(t, err)
			want, wantClaim := tc.want, tc.wantClaim
			if want == nil {
				want, wantClaim = []projection.Route{}, []projection.Route{}
			}
			require.Equal(t, want, p.RoutesFor(tc.owner))
			require.Equal(t, wantClaim, p.ClaimRoutesFor(tc.owner), "P2-D4: only the device owner's own jobs")
			for _, r := range p.RoutesFor(tc.owner) {
				require.True(t, p.MayRunFor(tc.owner, r.Owner))
				require.True(t, p.MayRouteFor(r.Owner, r.SiteID))
			}
		})
	}
}

func TestJSLess(t *testing.T) {
	tests := []struct {
		a, b   string
		jsLess bool
	}{
		{"a", "b", true},
		{"b", "a", false},
		{"a", "a", false},
		{"", "a", true},
		{"a", "", false},
		{"ab", "abc", true},
		{"Z", "a", true},
		{"\u00e9", "z", false},
		// Where the orders differ: a supplementary character is two code
		// units from 0xD800, below every BMP character from U+E000.
		{"\U0001F600", "\uFF61", true},
		{"\uFF61", "\U0001F600", false},
		{"\uE000", "\U00010000", false},
		{"\U00010000", "\uE000", true},
		// Below the surrogates the two orders agree.
		{"\uD7FF", "\U00010000", true},
		{"\U0001F600", "\U0001F601", true},
		{"\U0001F600", "\U00020000", true},
		{"x\U0001F600", "x\uFFFD", true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q<%q", tc.a, tc.b), func(t *testing.T) {
			require.Equal(t, tc.jsLess, projection.JSLess(tc.a, tc.b))
		})
	}
	require.False(t, "\U0001F600" < "\uFF61", "Go's byte order disagrees here, which is the point")
}

func TestSitesForJavaScriptOrder(t *testing.T) {
	site := func(id, identity string) projection.SiteRecord {
		return projection.SiteRecord{SiteID: id, Site: protocol.PublicIdentity{Identity: identity, Encryption: "E", EncryptionSig: "S"}}
	}
	ids := []string{"b", "\uFF61", "a", "\U0001F600", "B", "a"}
	f := &projection.Fixture{}
	for i, id := range ids {
		f.Sites = append(f.Sites, site(id, fmt.Sprint("key", i)))
		f.Consents = append(f.Consents, projection.ConsentRecord{Owner: "o", SiteID: id, Paused: i == 0})
	}
	f.Sites = append(f.Sites, site("c", "unconsented"))
	p, err := projection.New(f)
	require.NoError(t, err)

	got := p.SitesFor("o")
	require.Equal(t, []string{"B", "a", "a", "b", "\U0001F600", "\uFF61"}, siteIDs(got))
	require.Equal(t, "key2", got[1].Site.Identity, "equal ids keep fixture order")
	require.Equal(t, "key5", got[2].Site.Identity)

	goOrder := append([]string(nil), siteIDs(got)...)
	sort.Strings(goOrder)
	require.NotEqual(t, goOrder, siteIDs(got), "the test must cover an id where the orders differ")
	require.Equal(t, []string{"b"}, siteIDs(p.AwaitingConsentFor("o")))
}

func siteIDs(sites []projection.SiteRecord) []string {
	out := []string{}
	for _, s := range sites {
		out = append(out, s.SiteID)
	}
	return out
}

// An invalid v2 fixture on disk is refused exactly as an invalid v0 one:
// the projection in force stays.
func TestSourceRefusesBrokenSuccession(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fixture.json")
	good := v2Doc(t)
	require.NoError(t, os.WriteFile(path, good, 0o600))
	src, err := projection.Open(context.Background(), projection.Options{Path: path, PollInterval: -1})
	require.NoError(t, err)
	before := src.Current().Hash()

	k1 := newKey(1)
	broken := strings.Replace(string(good), `"retiringUntil": 1796500000000`, `"retiringUntil": 1796500000000, "siteId_": 1`, 1)
	require.NotEqual(t, string(good), broken)
	f, err := projection.Parse(good)
	require.NoError(t, err)
	f.Sites[0].Succeeds[0].Signature = protocol.EncodeKey(ed25519.Sign(k1.priv, []byte("not a succession")))
	badSig, err := json.Marshal(f)
	require.NoError(t, err)

	for _, doc := range [][]byte{[]byte(broken), badSig} {
		require.NoError(t, os.WriteFile(path, doc, 0o600))
		require.Error(t, src.Reload(context.Background()))
		require.Equal(t, before, src.Current().Hash())
	}
	require.Equal(t, uint64(2), src.Status().Failures)
}

// testdata/succession-0.1.1.json was made by @byollm/protocol 0.1.1's own
// generateKeys and signSuccession (K1 → K2 → K3) and checked with its
// walkSuccession before it was saved: the order the published daemon
// accepts. The same links in the opposite order are refused.
func TestSuccessionMadeByThePublishedLibrary(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "succession-0.1.1.json"))
	require.NoError(t, err)
	p, err := projection.FromJSON(raw)
	require.NoError(t, err)
	site, ok := p.SiteFor("site_rotated")
	require.True(t, ok)
	require.Len(t, site.Succeeds, 2)
	require.Len(t, site.VerifyingKeys(time.UnixMilli(site.RetiringUntil-1)), 3)

	reversed := site
	reversed.Succeeds = []projection.Succession{site.Succeeds[1], site.Succeeds[0]}
	require.ErrorIs(t, projection.VerifySuccessions(reversed), projection.ErrBrokenLink)
}
