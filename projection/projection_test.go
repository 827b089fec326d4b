package projection_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
)

// id makes a recognisable (not cryptographically valid) identity; the
// projection never checks signatures.
func id(name string) protocol.PublicIdentity {
	return protocol.PublicIdentity{Identity: name + "-id", Encryption: name + "-enc", EncryptionSig: name + "-sig"}
}

func mustNew(t *testing.T, f *projection.Fixture) *projection.Projection {
	t.Helper()
	p, err := projection.New(f)
	require.NoError(t, err)
	return p
}

func TestSiteForFirstMatch(t *testing.T) {
	p := mustNew(t, &projection.Fixture{
		Sites: []projection.SiteRecord{
			{SiteID: "s1", Site: id("first")},
			{SiteID: "s2", Site: id("other")},
			{SiteID: "s1", Site: id("second")},
		},
	})
	s, ok := p.SiteFor("s1")
	require.True(t, ok)
	require.Equal(t, projection.SiteRecord{SiteID: "s1", Site: id("first")}, s)

	s, ok = p.SiteFor("s2")
	require.True(t, ok)
	require.Equal(t, id("other"), s.Site)

	_, ok = p.SiteFor("S1")
	require.False(t, ok, "site ids are compared exactly")
	_, ok = p.SiteFor("")
	require.False(t, ok)
}

func TestDeviceQueries(t *testing.T) {
	shared := id("shared")
	rotated := shared
	rotated.Encryption = "rotated-enc"
	p := mustNew(t, &projection.Fixture{
		Devices: []projection.DeviceRecord{
			{Owner: "alice", RunnerID: "r1", Device: shared},
			{Owner: "bob", RunnerID: "r2", Device: rotated}, // same identity key, shadowed
			{Owner: "carol", RunnerID: "r1", Device: id("carol")},
			{Owner: "dave", RunnerID: "r4", Device: id("dave")},
		},
	})

	d, ok := p.DeviceFor("r1")
	require.True(t, ok)
	require.Equal(t, projection.DeviceRecord{Owner: "alice", RunnerID: "r1", Device: shared}, d)
	d, ok = p.DeviceFor("r4")
	require.True(t, ok)
	require.Equal(t, "dave", d.Owner)
	_, ok = p.DeviceFor("r9")
	require.False(t, ok)

	// First device whose identity key is string-equal, whatever the
	// encryption key.
	d, ok = p.DeviceByFingerprint("shared-id")
	require.True(t, ok)
	require.Equal(t, "alice", d.Owner)
	require.Equal(t, "r1", d.RunnerID)
	d, ok = p.DeviceByFingerprint("dave-id")
	require.True(t, ok)
	require.Equal(t, "r4", d.RunnerID)

	// Only the raw identity text matches: not the key id, not the
	// encryption key, not another spelling.
	_, ok = p.DeviceByFingerprint("shared-enc")
	require.False(t, ok)
	_, ok = p.DeviceByFingerprint("SHARED-ID")
	require.False(t, ok)
	_, ok = p.DeviceByFingerprint("")
	require.False(t, ok)
}

func TestDeviceByFingerprintIgnoresKeyID(t *testing.T) {
	raw := make([]byte, 32)
	raw[0] = 7
	identity := protocol.EncodeKey(raw)
	p := mustNew(t, &projection.Fixture{Devices: []projection.DeviceRecord{
		{Owner: "alice", RunnerID: "r1", Device: protocol.PublicIdentity{Identity: identity, Encryption: "e", EncryptionSig: "s"}},
	}})
	_, ok := p.DeviceByFingerprint(identity)
	require.True(t, ok)
	_, ok = p.DeviceByFingerprint(protocol.KeyID(raw))
	require.False(t, ok)
}

// DeviceByKeyID finds a device by its identity's key id, the first of
// two records sharing the key, and nothing by the identity itself or by a
// key that does not decode.
func TestDeviceByKeyIDFindsTheFirstRecordOfTheKey(t *testing.T) {
	raw := make([]byte, 32)
	raw[0] = 9
	identity := protocol.EncodeKey(raw)
	p := mustNew(t, &projection.Fixture{Devices: []projection.DeviceRecord{
		{Owner: "carol", RunnerID: "r0", Device: id("undecodable")},
		{Owner: "alice", RunnerID: "r1", Device: protocol.PublicIdentity{Identity: identity, Encryption: "e", EncryptionSig: "s"}},
		{Owner: "bob", RunnerID: "r2", Device: protocol.PublicIdentity{Identity: identity, Encryption: "e2", EncryptionSig: "s2"}},
	}})
	d, ok := p.DeviceByKeyID(protocol.KeyID(raw))
	require.True(t, ok)
	require.Equal(t, "r1", d.RunnerID)
	_, ok = p.DeviceByKeyID(identity)
	require.False(t, ok)
	_, ok = p.DeviceByKeyID("")
	require.False(t, ok)
}

func TestConsentQueries(t *testing.T) {
	p := mustNew(t, &projection.Fixture{
		Consents: []projection.ConsentRecord{
			{Owner: "alice", SiteID: "s1"},
			{Owner: "bob", SiteID: "s1", Paused: true},
			{Owner: "bob", SiteID: "s1"}, // shadowed by the paused one
			{Owner: "carol", SiteID: "s1"},
			{Owner: "carol", SiteID: "s2"},
			{Owner: "dave", SiteID: "s1", Paused: true},
			{Owner: "erin", SiteID: "s2"},
			{Owner: "erin", SiteID: "s2", Paused: true}, // shadowed by the live one
		},
		Revoked: []projection.RevocationRecord{
			{Owner: "carol", SiteID: "s1"},    // revokes a live consent
			{Owner: "dave", SiteID: "s1"},     // revokes a paused consent
			{Owner: "frank", SiteID: "s1"},    // revokes nothing
			{Owner: "carol", SiteID: "s1"},    // repeated, harmless
			{Owner: "alice", SiteID: "s3"},    // other site, no effect on s1
			{Owner: "ALICE", SiteID: "s1"},    // exact comparison only
			{Owner: "alice", SiteID: "S1"},    // exact comparison only
			{Owner: "erin", SiteID: "s2x"},    // near miss
			{Owner: "erinx", SiteID: "s2"},    // near miss
			{Owner: "erin", SiteID: "s2\x00"}, // no separator confusion
		},
	})

	cases := []struct {
		owner, site     string
		consent, paused bool
		route           bool
	}{
		{"alice", "s1", true, false, true},
		{"alice", "s2", false, false, false},
		{"alice", "s3", false, false, false},
		{"bob", "s1", true, true, false}, // first record is the paused one
		{"carol", "s1", false, false, false},
		{"carol", "s2", true, false, true},
		{"dave", "s1", false, false, false},
		{"erin", "s2", true, false, true}, // first record is the live one
		{"frank", "s1", false, false, false},
		{"nobody", "s1", false, false, false},
		{"", "", false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.owner+"@"+tc.site, func(t *testing.T) {
			c, ok := p.ConsentFor(tc.owner, tc.site)
			require.Equal(t, tc.consent, ok, "ConsentFor")
			if ok {
				require.Equal(t, projection.ConsentRecord{Owner: tc.owner, SiteID: tc.site, Paused: tc.paused}, c)
			} else {
				require.Zero(t, c)
			}
			require.Equal(t, tc.paused, p.PausedFor(tc.owner, tc.site), "PausedFor")
			require.Equal(t, tc.route, p.MayRouteFor(tc.owner, tc.site), "MayRouteFor")
		})
	}
}

func TestRevocationAloneWithConsentPresent(t *testing.T) {
	f := &projection.Fixture{Consents: []projection.ConsentRecord{{Owner: "alice", SiteID: "s1"}}}
	p := mustNew(t, f)
	_, ok := p.ConsentFor("alice", "s1")
	require.True(t, ok)

	f.Revoked = []projection.RevocationRecord{{Owner: "alice", SiteID: "s1"}}
	p = mustNew(t, f)
	_, ok = p.ConsentFor("alice", "s1")
	require.False(t, ok, "a revocation wins over a consent that is still present")
	require.False(t, p.MayRouteFor("alice", "s1"))
	require.False(t, p.PausedFor("alice", "s1"))
	require.Empty(t, p.RoutableOwners("alice", "s1"))
}

// rosterFixture reproduces the upstream roster example and adds the edge
// cases around it: repeated members, the owner listed in their own roster,
// a roster that would make membership transitive if it were, and an empty
// roster.
func rosterFixture() *projection.Fixture {
	return &projection.Fixture{
		Rosters: []projection.RosterRecord{
			{ID: "r1", Owner: "bob", Members: []string{"alice"}},
			{ID: "r2", Owner: "erin", Members: []string{"dave"}},
			{ID: "r3", Owner: "bob", Members: []string{"erin", "alice", "bob"}},
			{ID: "r4", Owner: "carol", Members: []string{}},
		},
	}
}

func TestOwnersRunnableBy(t *testing.T) {
	p := mustNew(t, rosterFixture())

	// The upstream example.
	require.Equal(t, []string{"dave"}, p.OwnersRunnableBy("dave"))
	require.Equal(t, []string{"bob", "alice", "erin"}, p.OwnersRunnableBy("bob"))
	require.Equal(t, []string{"alice"}, p.OwnersRunnableBy("alice"), "membership does not run in reverse")

	// Not transitive: bob runs for erin, erin runs for dave, bob does not
	// run for dave.
	require.Equal(t, []string{"erin", "dave"}, p.OwnersRunnableBy("erin"))
	require.NotContains(t, p.OwnersRunnableBy("bob"), "dave")

	require.Equal(t, []string{"carol"}, p.OwnersRunnableBy("carol"), "an empty roster adds nobody")
	require.Equal(t, []string{"stranger"}, p.OwnersRunnableBy("stranger"))

	// The caller owns the slice.
	got := p.OwnersRunnableBy("bob")
	got[0] = "mallory"
	require.Equal(t, []string{"bob", "alice", "erin"}, p.OwnersRunnableBy("bob"))
}

func TestMayRunForAgreesWithOwnersRunnableBy(t *testing.T) {
	p := mustNew(t, rosterFixture())
	owners := []string{"alice", "bob", "carol", "dave", "erin"}
	checked := 0
	for _, deviceOwner := range owners {
		runnable := p.OwnersRunnableBy(deviceOwner)
		for _, jobOwner := range owners {
			require.Equal(t, slices.Contains(runnable, jobOwner), p.MayRunFor(deviceOwner, jobOwner),
				"MayRunFor(%s, %s) against OwnersRunnableBy = %v", deviceOwner, jobOwner, runnable)
			checked++
		}
	}
	require.Equal(t, 25, checked)

	require.True(t, p.MayRunFor("bob", "alice"))
	require.False(t, p.MayRunFor("alice", "bob"))
	require.False(t, p.MayRunFor("bob", "dave"))
	require.True(t, p.MayRunFor("stranger", "stranger"))
	require.False(t, p.MayRunFor("stranger", "bob"))
}

func TestRoutableOwners(t *testing.T) {
	base := func() *projection.Fixture {
		f := rosterFixture()
		f.Rosters = append(f.Rosters, projection.RosterRecord{
			ID: "r5", Owner: "bob", Members: []string{"carol", "dave", "frank"},
		})
		for _, o := range []string{"alice", "bob", "carol", "erin"} {
			f.Consents = append(f.Consents, projection.ConsentRecord{Owner: o, SiteID: "s1"})
		}
		f.Consents = append(f.Consents,
			projection.ConsentRecord{Owner: "dave", SiteID: "s1", Paused: true},
			projection.ConsentRecord{Owner: "frank", SiteID: "s2"}, // other site only
		)
		return f
	}

	t.Run("filtered, in runnable order", func(t *testing.T) {
		p := mustNew(t, base())
		require.Equal(t, []string{"bob", "alice", "erin", "carol", "dave", "frank"}, p.OwnersRunnableBy("bob"))
		// dave is paused and frank never consented to s1.
		require.Equal(t, []string{"bob", "alice", "erin", "carol"}, p.RoutableOwners("bob", "s1"))
		require.Equal(t, []string{"alice"}, p.RoutableOwners("alice", "s1"))
	})

	t.Run("member revoked", func(t *testing.T) {
		f := base()
		f.Revoked = []projection.RevocationRecord{{Owner: "alice", SiteID: "s1"}}
		p := mustNew(t, f)
		require.Equal(t, []string{"bob", "erin", "carol"}, p.RoutableOwners("bob", "s1"))
	})

	t.Run("device owner paused", func(t *testing.T) {
		f := base()
		f.Consents[1].Paused = true // bob
		p := mustNew(t, f)
		got := p.RoutableOwners("bob", "s1")
		require.NotNil(t, got)
		require.Empty(t, got)
		_, ok := p.ConsentFor("bob", "s1")
		require.True(t, ok, "paused still counts as consent")
	})

	t.Run("device owner revoked", func(t *testing.T) {
		f := base()
		f.Revoked = []projection.RevocationRecord{{Owner: "bob", SiteID: "s1"}}
		p := mustNew(t, f)
		got := p.RoutableOwners("bob", "s1")
		require.NotNil(t, got)
		require.Empty(t, got)
	})

	t.Run("device owner without consent", func(t *testing.T) {
		p := mustNew(t, base())
		require.Empty(t, p.RoutableOwners("bob", "s2"), "bob has no consent for s2 though frank does")
		require.Equal(t, []string{"frank"}, p.RoutableOwners("frank", "s2"))
		require.Empty(t, p.RoutableOwners("stranger", "s1"))
	})

	t.Run("both need consent", func(t *testing.T) {
		p := mustNew(t, &projection.Fixture{
			Consents: []projection.ConsentRecord{{Owner: "bob", SiteID: "s1"}},
			Rosters:  []projection.RosterRecord{{ID: "r", Owner: "bob", Members: []string{"alice"}}},
		})
		require.Equal(t, []string{"bob"}, p.RoutableOwners("bob", "s1"))
	})
}

func TestHash(t *testing.T) {
	doc := []byte(`{"consents": [{"owner": "alice", "siteId": "s1"}]}`)
	p, err := projection.FromJSON(doc)
	require.NoError(t, err)
	sum := sha256.Sum256(doc)
	require.Equal(t, hex.EncodeToString(sum[:]), p.Hash())
	require.Len(t, p.Hash(), 64)

	// The hash is of the bytes, so equivalent documents spelled
	// differently differ, and identical bytes agree.
	again, err := projection.FromJSON(append([]byte(nil), doc...))
	require.NoError(t, err)
	require.Equal(t, p.Hash(), again.Hash())
	spaced, err := projection.FromJSON(append(append([]byte(nil), doc...), '\n'))
	require.NoError(t, err)
	require.NotEqual(t, p.Hash(), spaced.Hash())

	// Built in code: deterministic, and sensitive to content.
	a := mustNew(t, &projection.Fixture{Consents: []projection.ConsentRecord{{Owner: "alice", SiteID: "s1"}}})
	b := mustNew(t, &projection.Fixture{Consents: []projection.ConsentRecord{{Owner: "alice", SiteID: "s1"}}})
	c := mustNew(t, &projection.Fixture{Consents: []projection.ConsentRecord{{Owner: "alice", SiteID: "s1", Paused: true}}})
	require.Equal(t, a.Hash(), b.Hash())
	require.NotEqual(t, a.Hash(), c.Hash())
	require.Equal(t, mustNew(t, &projection.Fixture{}).Hash(), mustNew(t, projection.Empty()).Hash(),
		"nil and empty lists are the same fixture")
}

func TestProjectionIsIsolatedFromItsFixture(t *testing.T) {
	f := rosterFixture()
	f.Consents = []projection.ConsentRecord{{Owner: "bob", SiteID: "s1"}, {Owner: "alice", SiteID: "s1"}}
	f.Sites = []projection.SiteRecord{{SiteID: "s1", Site: id("site")}}
	p := mustNew(t, f)
	hash := p.Hash()

	// Changing the caller's fixture afterwards changes nothing.
	f.Rosters[0].Members[0] = "mallory"
	f.Consents[0].Paused = true
	f.Sites[0].SiteID = "changed"
	require.Equal(t, []string{"bob", "alice", "erin"}, p.OwnersRunnableBy("bob"))
	require.True(t, p.MayRouteFor("bob", "s1"))
	_, ok := p.SiteFor("s1")
	require.True(t, ok)

	// Nor does changing the copy Fixture hands out.
	out := p.Fixture()
	out.Rosters[0].Members[0] = "mallory"
	out.Consents = nil
	require.Equal(t, []string{"bob", "alice", "erin"}, p.OwnersRunnableBy("bob"))
	require.True(t, p.MayRouteFor("bob", "s1"))
	require.Equal(t, hash, p.Hash())
	require.Len(t, p.Fixture().Consents, 2)
}

func TestFromJSONQueries(t *testing.T) {
	p, err := projection.FromJSON([]byte(fullDoc))
	require.NoError(t, err)
	s, ok := p.SiteFor("s1")
	require.True(t, ok)
	require.Equal(t, "SI", s.Site.Identity)
	d, ok := p.DeviceByFingerprint("DI")
	require.True(t, ok)
	require.Equal(t, "r1", d.RunnerID)
	require.Equal(t, []string{"alice", "bob"}, p.OwnersRunnableBy("alice"))
	require.Equal(t, []string{"alice"}, p.RoutableOwners("alice", "s1"))
	_, ok = p.ConsentFor("carol", "s1")
	require.False(t, ok)
}

func TestLargeFixtureFirstMatch(t *testing.T) {
	// Many shadowed records: the index must keep the first, not the last.
	f := &projection.Fixture{}
	for i := range 1000 {
		f.Sites = append(f.Sites, projection.SiteRecord{SiteID: "s", Site: id(fmt.Sprint(i))})
		f.Consents = append(f.Consents, projection.ConsentRecord{Owner: "o", SiteID: "s", Paused: i%2 == 1})
		f.Devices = append(f.Devices, projection.DeviceRecord{Owner: fmt.Sprint(i), RunnerID: "r", Device: id("d")})
	}
	p := mustNew(t, f)
	s, _ := p.SiteFor("s")
	require.Equal(t, id("0"), s.Site)
	c, _ := p.ConsentFor("o", "s")
	require.False(t, c.Paused)
	d, _ := p.DeviceFor("r")
	require.Equal(t, "0", d.Owner)
	d, _ = p.DeviceByFingerprint("d-id")
	require.Equal(t, "0", d.Owner)
}
