package admission

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// The law's world (grants.md G-R24's example): bob owns the team and its
// devices, alice is a member, carol is neither.
var (
	siteIdentity = protocol.EncodeKey(bytes.Repeat([]byte{0x51}, 32))
	siteKeyID    = protocol.KeyID(bytes.Repeat([]byte{0x51}, 32))
)

func teamFixture() *projection.Fixture {
	return &projection.Fixture{
		Sites: []projection.SiteRecord{{SiteID: "site_demo", Site: protocol.PublicIdentity{Identity: siteIdentity, Encryption: "E", EncryptionSig: "S"}}},
		Consents: []projection.ConsentRecord{
			{Owner: "alice", SiteID: "site_demo", Mappings: projection.NewMappings(
				projection.Mapping{Purpose: "default", Kind: "llm.generate", Service: "echo", ServiceOwner: "bob"})},
			{Owner: "bob", SiteID: "site_demo", Mappings: projection.NewMappings(
				projection.Mapping{Purpose: "default", Kind: "llm.generate", Service: "echo"})},
			{Owner: "carol", SiteID: "site_demo"},
		},
		Rosters: []projection.RosterRecord{{ID: "team_bob", Owner: "bob", Members: []string{"alice"}}},
	}
}

func capability(kind, service, scope string) proto2.Capability {
	return proto2.Capability{Kind: kind, Service: service, BackendID: "openai-http", BackendClass: "http", Model: "m", OfferScope: scope}
}

func stubOf(owner string) proto2.JobStub {
	return proto2.JobStub{ID: "job_1", Kind: "llm.generate", Owner: owner, Site: siteKeyID, Audience: "team", SizeClass: "small", DeadlineAt: 1_900_000_000_000}
}

// lawCase is one row of G-R54: a change to the team world and the claim,
// and the decision expected.
type lawCase struct {
	name    string
	fixture func(*projection.Fixture)
	claim   func(*Claim)
	law     Law
	want    Decision
	// off is what the same claim gets with the owner's default off
	// (--grant-own-default=false), for the rows that pin that default.
	off Decision
}

func consentOf(f *projection.Fixture, owner string) *projection.ConsentRecord {
	for i := range f.Consents {
		if f.Consents[i].Owner == owner {
			return &f.Consents[i]
		}
	}
	panic("no consent for " + owner)
}

func withMappings(f *projection.Fixture, owner string, ms ...projection.Mapping) {
	consentOf(f, owner).Mappings = projection.NewMappings(ms...)
}

func dropConsent(f *projection.Fixture, owner string) {
	for i, c := range f.Consents {
		if c.Owner == owner {
			f.Consents = append(f.Consents[:i], f.Consents[i+1:]...)
			return
		}
	}
}

var (
	gen     = "llm.generate"
	granted = func(user, purpose, kind, service string) Decision {
		return Decision{Granted: true, Terms: Terms{JobID: "job_1", Site: siteKeyID, User: user, Owner: "bob", Purpose: purpose, Kind: kind, Service: service}}
	}
	decline = func(r Reason) Decision { return Decision{Reason: r} }
	on      = Law{OwnDefault: true}
)

var grantCases = []lawCase{
	{name: "own job with its mapping on a private service", claim: func(c *Claim) {
		c.Stub = stubOf("bob")
		c.Capabilities = []proto2.Capability{capability(gen, "echo", "private")}
	}, want: granted("bob", "default", gen, "echo")},
	{name: "member's job with its mapping on a team service", want: granted("alice", "default", gen, "echo")},
	{name: "an explicit purpose is looked up and signed", fixture: func(f *projection.Fixture) {
		withMappings(f, "alice", projection.Mapping{Purpose: "summarise", Kind: "llm.chat", Service: "qwen", ServiceOwner: "bob"})
	}, claim: func(c *Claim) {
		c.Stub.Purpose, c.Stub.Kind = "summarise", "llm.chat"
		c.Capabilities = []proto2.Capability{capability("llm.chat", "qwen", "team")}
	}, want: granted("alice", "summarise", "llm.chat", "qwen")},
	{name: "the first of two mappings for one slot wins", fixture: func(f *projection.Fixture) {
		withMappings(f, "alice",
			projection.Mapping{Purpose: "default", Kind: gen, Service: "echo", ServiceOwner: "bob"},
			projection.Mapping{Purpose: "default", Kind: gen, Service: "llama", ServiceOwner: "bob"})
	}, claim: func(c *Claim) {
		c.Capabilities = []proto2.Capability{capability(gen, "llama", "team"), capability(gen, "echo", "team")}
	}, want: granted("alice", "default", gen, "echo")},
}

var declineCases = []lawCase{
	{name: "own job without consent", fixture: func(f *projection.Fixture) { dropConsent(f, "bob") },
		claim: func(c *Claim) { c.Stub = stubOf("bob") }, want: decline(ReasonNotConsented)},
	{name: "own job whose consent was revoked while the record remains", fixture: func(f *projection.Fixture) {
		f.Revoked = append(f.Revoked, projection.RevocationRecord{Owner: "bob", SiteID: "site_demo"})
	}, claim: func(c *Claim) { c.Stub = stubOf("bob") }, want: decline(ReasonNotConsented)},
	{name: "a paused consent", fixture: func(f *projection.Fixture) { consentOf(f, "alice").Paused = true },
		want: decline(ReasonConsentPaused)},
	{name: "not a member", fixture: func(f *projection.Fixture) { f.Rosters = nil }, want: decline(ReasonNotAMember)},
	{name: "a consent but not a member", claim: func(c *Claim) { c.Stub = stubOf("carol") }, want: decline(ReasonNotAMember)},
	{name: "neither consent nor membership: the first failing step wins", fixture: func(f *projection.Fixture) {
		f.Rosters = nil
		dropConsent(f, "alice")
	}, want: decline(ReasonNotConsented)},
	{name: "a member without a mapping", fixture: func(f *projection.Fixture) { withMappings(f, "alice") }, law: on,
		want: decline(ReasonUnmapped)},
	{name: "a mapping for another purpose", fixture: func(f *projection.Fixture) {
		withMappings(f, "alice", projection.Mapping{Purpose: "summarise", Kind: gen, Service: "echo", ServiceOwner: "bob"})
	}, want: decline(ReasonUnmapped)},
	{name: "a mapping to carol's service", fixture: func(f *projection.Fixture) {
		withMappings(f, "alice", projection.Mapping{Purpose: "default", Kind: gen, Service: "echo", ServiceOwner: "carol"})
	}, want: decline(ReasonResolvedElsewhere)},
	{name: "a mapping without a service owner, claimed by a teammate", fixture: func(f *projection.Fixture) {
		withMappings(f, "alice", projection.Mapping{Purpose: "default", Kind: gen, Service: "echo"})
	}, want: decline(ReasonResolvedElsewhere)},
	{name: "own job mapped to a teammate's service", claim: func(c *Claim) {
		c.Stub, c.DeviceOwner = stubOf("alice"), "alice"
	}, want: decline(ReasonResolvedElsewhere)},
	{name: "a private scope for a member", claim: func(c *Claim) {
		c.Capabilities = []proto2.Capability{capability(gen, "echo", "private")}
	}, want: decline(ReasonResolvedElsewhere)},
	{name: "a scope the law does not know does not widen", claim: func(c *Claim) {
		c.Capabilities = []proto2.Capability{capability(gen, "echo", "public")}
	}, want: decline(ReasonResolvedElsewhere)},
	{name: "the service offered only for another kind", claim: func(c *Claim) {
		c.Capabilities = []proto2.Capability{capability("llm.chat", "echo", "team")}
	}, want: decline(ReasonResolvedElsewhere)},
	{name: "no capabilities at all", claim: func(c *Claim) { c.Capabilities = nil }, want: decline(ReasonResolvedElsewhere)},
	{name: "an unknown site key", claim: func(c *Claim) { c.Stub.Site = "BYOLLM-0000-0000-0000-0000-0000-0000" },
		want: decline(ReasonUnknownSite)},
	{name: "a site key that is only a site id", claim: func(c *Claim) { c.Stub.Site = "site_demo" },
		want: decline(ReasonUnknownSite)},
}

// ownDefaultCases pin relayd's difference G-R8: the owner's own unmapped
// work runs on the one service the claim offers for its kind. The
// reference engine declines all of them unmapped.
var ownDefaultCases = []lawCase{
	{name: "one service for the kind is granted", fixture: func(f *projection.Fixture) { withMappings(f, "bob") },
		claim: func(c *Claim) {
			c.Stub = stubOf("bob")
			c.Capabilities = []proto2.Capability{capability(gen, "llama", "private"), capability("llm.chat", "qwen", "private")}
		}, want: granted("bob", "default", gen, "llama"), off: decline(ReasonUnmapped)},
	{name: "an explicit purpose falls back too, and is signed", fixture: func(f *projection.Fixture) { withMappings(f, "bob") },
		claim: func(c *Claim) {
			c.Stub = stubOf("bob")
			c.Stub.Purpose = "summarise"
			c.Capabilities = []proto2.Capability{capability(gen, "echo", "team")}
		}, want: granted("bob", "summarise", gen, "echo"), off: decline(ReasonUnmapped)},
	{name: "two services for the kind are unmapped", fixture: func(f *projection.Fixture) { withMappings(f, "bob") },
		claim: func(c *Claim) {
			c.Stub = stubOf("bob")
			c.Capabilities = []proto2.Capability{capability(gen, "echo", "private"), capability(gen, "llama", "private")}
		}, want: decline(ReasonUnmapped), off: decline(ReasonUnmapped)},
	{name: "no service for the kind is unmapped", fixture: func(f *projection.Fixture) { withMappings(f, "bob") },
		claim: func(c *Claim) {
			c.Stub = stubOf("bob")
			c.Capabilities = []proto2.Capability{capability("llm.chat", "echo", "private")}
		}, want: decline(ReasonUnmapped), off: decline(ReasonUnmapped)},
	{name: "a member's job gets no default", fixture: func(f *projection.Fixture) { withMappings(f, "alice") },
		want: decline(ReasonUnmapped), off: decline(ReasonUnmapped)},
	{name: "a mapping wins over the default", claim: func(c *Claim) {
		c.Stub = stubOf("bob")
		c.Capabilities = []proto2.Capability{capability(gen, "llama", "private"), capability("llm.generate", "echo", "private")}
	}, want: granted("bob", "default", gen, "echo"), off: granted("bob", "default", gen, "echo")},
	{name: "a paused consent still declines first", fixture: func(f *projection.Fixture) {
		withMappings(f, "bob")
		consentOf(f, "bob").Paused = true
	}, claim: func(c *Claim) { c.Stub = stubOf("bob") }, want: decline(ReasonConsentPaused), off: decline(ReasonConsentPaused)},
	{name: "no consent still declines first", fixture: func(f *projection.Fixture) { dropConsent(f, "bob") },
		claim: func(c *Claim) { c.Stub = stubOf("bob") }, want: decline(ReasonNotConsented), off: decline(ReasonNotConsented)},
}

// The owner's default's rows, on (the default) and off.
func TestGrants_OwnDefault(t *testing.T) {
	t.Run("on", func(t *testing.T) { runLawCases(t, withLaw(ownDefaultCases, on, false)) })
	t.Run("off", func(t *testing.T) { runLawCases(t, withLaw(ownDefaultCases, Law{}, true)) })
}

// Every other row of the law decides alike with the owner's default on
// and off: the default touches nothing but the owner's unmapped work.
func TestLawDecidesAlikeWithTheOwnDefaultOnOrOff(t *testing.T) {
	for _, law := range []Law{{}, on} {
		t.Run(fmt.Sprintf("OwnDefault=%v", law.OwnDefault), func(t *testing.T) {
			runLawCases(t, withLaw(grantCases, law, false))
			runLawCases(t, withLaw(declineCases, law, false))
		})
	}
}

// withLaw is cases decided by law, each expecting its off decision when
// off is set.
func withLaw(cases []lawCase, law Law, off bool) []lawCase {
	out := make([]lawCase, len(cases))
	for i, tc := range cases {
		tc.law = law
		if off {
			tc.want = tc.off
		}
		out[i] = tc
	}
	return out
}

func TestLawDecides(t *testing.T) {
	runLawCases(t, grantCases)
	runLawCases(t, declineCases)
}

func runLawCases(t *testing.T, cases []lawCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := teamFixture()
			if tc.fixture != nil {
				tc.fixture(f)
			}
			p, err := projection.New(f)
			require.NoError(t, err)
			c := Claim{Stub: stubOf("alice"), DeviceOwner: "bob", Capabilities: []proto2.Capability{capability(gen, "echo", "team")}}
			if tc.claim != nil {
				tc.claim(&c)
			}
			got := tc.law.Decide(p, c)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.want.Reason == ReasonNotConsented || tc.want.Reason == ReasonNotAMember, got.Permanent())
		})
	}
}

// Only not-consented and not-a-member are permanent (G-R12).
func TestOnlyConsentAndMembershipDeclinesArePermanent(t *testing.T) {
	for _, r := range []Reason{ReasonUnknownSite, ReasonStoreUnavailable, ReasonConsentPaused, ReasonUnmapped,
		ReasonResolvedElsewhere, ReasonAuthorUnavailable, ReasonAuthorInvalid, ReasonSignFailed} {
		require.False(t, r.Permanent(), r)
	}
	require.True(t, ReasonNotConsented.Permanent())
	require.True(t, ReasonNotAMember.Permanent())
	require.False(t, Decision{Granted: true, Reason: ReasonNotAMember}.Permanent(), "a grant is never a permanent decline")
}

// The author reads the projection in force when it authors (G-R5): a
// roster removed between the claim and the authoring declines, for good.
func TestLawReadsTheProjectionItIsGiven(t *testing.T) {
	before, err := projection.New(teamFixture())
	require.NoError(t, err)
	f := teamFixture()
	f.Rosters = nil
	after, err := projection.New(f)
	require.NoError(t, err)
	c := Claim{Stub: stubOf("alice"), DeviceOwner: "bob", Capabilities: []proto2.Capability{capability(gen, "echo", "team")}}
	require.True(t, Law{}.Decide(before, c).Granted)
	d := Law{}.Decide(after, c)
	require.Equal(t, decline(ReasonNotAMember), d)
	require.True(t, d.Permanent())
}
