package projection_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/projection"
)

// This file mirrors the published PolicyStore contract
// (describePolicyStoreContract, control-plane/store-contract.ts; grants.md
// G-R53) over the projection: each act of the reference harness edits a
// fixture, the projection is rebuilt, and PolicyFor must answer what the
// reference's read answers.

// The suite's people and sites are opaque ids.
const (
	siteA = "9a1c4f7e-0000-4000-8000-00000000a001"
	siteB = "9a1c4f7e-0000-4000-8000-00000000b002"
	alice = "3f0e2b11-0000-4000-8000-0000000a11ce"
	bob   = "3f0e2b11-0000-4000-8000-000000000b0b"
	carol = "3f0e2b11-0000-4000-8000-0000000ca201"
	dave  = "3f0e2b11-0000-4000-8000-0000000da4e0"
)

var (
	mapping         = projection.Mapping{Purpose: "default", Kind: "llm.generate", Service: "echo"}
	teammateMapping = projection.Mapping{Purpose: "default", Kind: "llm.generate", Service: "echo", ServiceOwner: carol}
)

// policyHarness is the reference harness's acts, as fixture edits.
type policyHarness struct {
	t *testing.T
	f projection.Fixture
}

func newPolicyHarness(t *testing.T) *policyHarness { return &policyHarness{t: t} }

// consent replaces the first consent record of (site, user), or adds one,
// with these mappings and no pause, as MemoryPolicyStore.consent does.
func (h *policyHarness) consent(site, user string, ms ...projection.Mapping) {
	rec := projection.ConsentRecord{Owner: user, SiteID: site, Mappings: projection.NewMappings(ms...)}
	h.f.Revoked = slices.DeleteFunc(h.f.Revoked, func(r projection.RevocationRecord) bool { return r.Owner == user && r.SiteID == site })
	for i, c := range h.f.Consents {
		if c.Owner == user && c.SiteID == site {
			h.f.Consents[i] = rec
			return
		}
	}
	h.f.Consents = append(h.f.Consents, rec)
}

// revokeByDeleting withdraws consent by removing the record, mappings and all.
func (h *policyHarness) revokeByDeleting(site, user string) {
	h.f.Consents = slices.DeleteFunc(h.f.Consents, func(c projection.ConsentRecord) bool { return c.Owner == user && c.SiteID == site })
}

// revokeByEntry withdraws consent with a revoked entry, leaving the record
// and its mappings in place.
func (h *policyHarness) revokeByEntry(site, user string) {
	h.f.Revoked = append(h.f.Revoked, projection.RevocationRecord{Owner: user, SiteID: site})
}

func (h *policyHarness) pause(site, user string) {
	for i, c := range h.f.Consents {
		if c.Owner == user && c.SiteID == site {
			h.f.Consents[i].Paused = true
			return
		}
	}
}

func (h *policyHarness) addMember(owner, user string) {
	h.f.Rosters = append(h.f.Rosters, projection.RosterRecord{ID: "team_" + owner, Owner: owner, Members: []string{user}})
}

// removeMember removes user from every roster owner owns.
func (h *policyHarness) removeMember(owner, user string) {
	for i, r := range h.f.Rosters {
		if r.Owner == owner {
			h.f.Rosters[i].Members = slices.DeleteFunc(slices.Clone(r.Members), func(m string) bool { return m == user })
		}
	}
}

func (h *policyHarness) read(site, user, owner string) projection.Policy {
	h.t.Helper()
	return mustNew(h.t, &h.f).PolicyFor(site, user, owner)
}

// revokers are the two ways relayd's fixture withdraws a consent; the
// contract's revocation cases run under both.
var revokers = map[string]func(*policyHarness, string, string){
	"record deleted":   (*policyHarness).revokeByDeleting,
	"revocation entry": (*policyHarness).revokeByEntry,
}

func TestPolicyStoreContract(t *testing.T) {
	policyConsentCases(t)
	policyMembershipCases(t)
	t.Run("ids are opaque: site a with user b:c is not site a:b with user c", func(t *testing.T) {
		h := newPolicyHarness(t)
		h.consent("a", "b:c", mapping)
		require.Equal(t, projection.ConsentNo, h.read("a:b", "c", "c").Consented)
		require.Equal(t, projection.ConsentYes, h.read("a", "b:c", "b:c").Consented)
	})
}

// policyConsentCases are the contract's cases of what a consent reads:
// yes, no or paused, with its mappings, for its own person and site only.
func policyConsentCases(t *testing.T) {
	none := []projection.Mapping{}
	t.Run("nobody consented reads no", func(t *testing.T) {
		got := newPolicyHarness(t).read(siteA, alice, alice)
		require.Equal(t, projection.Policy{Consented: projection.ConsentNo, Mappings: none}, got)
	})
	t.Run("a consent with a mapping reads yes and the mapping", func(t *testing.T) {
		h := newPolicyHarness(t)
		h.consent(siteA, alice, mapping)
		got := h.read(siteA, alice, alice)
		require.Equal(t, projection.ConsentYes, got.Consented)
		require.Equal(t, []projection.Mapping{mapping}, got.Mappings)
	})
	t.Run("a teammate's mapping keeps its owner", func(t *testing.T) {
		h := newPolicyHarness(t)
		h.consent(siteA, alice, teammateMapping)
		require.Equal(t, []projection.Mapping{teammateMapping}, h.read(siteA, alice, carol).Mappings)
	})
	t.Run("two same-named services stay apart", func(t *testing.T) {
		h := newPolicyHarness(t)
		mine := projection.Mapping{Purpose: "mine", Kind: "llm.generate", Service: "echo"}
		theirs := projection.Mapping{Purpose: "theirs", Kind: "llm.generate", Service: "echo", ServiceOwner: carol}
		h.consent(siteA, alice, mine, theirs)
		got := h.read(siteA, alice, alice).Mappings
		require.Equal(t, []projection.Mapping{mine, theirs}, got)
		require.Empty(t, got[0].ServiceOwner, "mine is the user's own")
		require.Equal(t, carol, got[1].ServiceOwner)
	})
	t.Run("a consent without mappings reads yes and none", func(t *testing.T) {
		h := newPolicyHarness(t)
		h.consent(siteA, alice)
		require.Equal(t, projection.Policy{Consented: projection.ConsentYes, Mappings: none}, h.read(siteA, alice, alice))
	})
	for how, revoke := range revokers {
		t.Run("revoked reads no and no mappings, "+how, func(t *testing.T) {
			h := newPolicyHarness(t)
			h.consent(siteA, alice, mapping)
			revoke(h, siteA, alice)
			require.Equal(t, projection.Policy{Consented: projection.ConsentNo, Mappings: none}, h.read(siteA, alice, alice))
		})
	}
	t.Run("paused reads paused, not no, and keeps the mappings", func(t *testing.T) {
		h := newPolicyHarness(t)
		h.consent(siteA, alice, mapping)
		h.pause(siteA, alice)
		got := h.read(siteA, alice, alice)
		require.Equal(t, projection.ConsentPaused, got.Consented)
		require.Equal(t, []projection.Mapping{mapping}, got.Mappings)
		h.consent(siteA, alice, mapping)
		require.Equal(t, projection.ConsentYes, h.read(siteA, alice, alice).Consented, "consenting again lifts the pause")
	})
	t.Run("another person's consent is not yours", func(t *testing.T) {
		h := newPolicyHarness(t)
		h.consent(siteA, bob, mapping)
		require.Equal(t, projection.ConsentNo, h.read(siteA, alice, alice).Consented)
	})
	t.Run("another site's consent is not this one's", func(t *testing.T) {
		h := newPolicyHarness(t)
		h.consent(siteB, alice, mapping)
		require.Equal(t, projection.ConsentNo, h.read(siteA, alice, alice).Consented)
		require.Empty(t, h.read(siteA, alice, alice).Mappings)
	})
}

// policyMembershipCases are the contract's cases of roster membership:
// per owner, removable, and independent of consent.
func policyMembershipCases(t *testing.T) {
	t.Run("membership is per owner", func(t *testing.T) {
		h := newPolicyHarness(t)
		h.addMember(bob, alice)
		require.True(t, h.read(siteA, alice, bob).Member)
		require.False(t, h.read(siteA, alice, dave).Member)
		require.False(t, h.read(siteA, bob, alice).Member, "membership is not reversed")
	})
	t.Run("a removed member is not a member", func(t *testing.T) {
		h := newPolicyHarness(t)
		h.addMember(bob, alice)
		h.removeMember(bob, alice)
		require.False(t, h.read(siteA, alice, bob).Member)
	})
	t.Run("membership and consent are independent", func(t *testing.T) {
		h := newPolicyHarness(t)
		h.addMember(bob, alice)
		got := h.read(siteA, alice, bob)
		require.True(t, got.Member)
		require.Equal(t, projection.ConsentNo, got.Consented)
		h = newPolicyHarness(t)
		h.consent(siteA, alice, mapping)
		got = h.read(siteA, alice, bob)
		require.False(t, got.Member)
		require.Equal(t, projection.ConsentYes, got.Consented)
	})
}

// relayd's own case: a revocation entry wins over a record that still
// holds mappings, and empties them (G-R23).
func TestPolicyRevocationEntryEmptiesMappingsStillInTheRecord(t *testing.T) {
	h := newPolicyHarness(t)
	h.consent(siteA, alice, mapping, teammateMapping)
	h.revokeByEntry(siteA, alice)
	p := mustNew(t, &h.f)
	c := h.f.Consents[0]
	require.Len(t, c.Mappings.List(), 2, "the record keeps its mappings")
	require.Equal(t, projection.Policy{Consented: projection.ConsentNo, Mappings: []projection.Mapping{}}, p.PolicyFor(siteA, alice, alice))
}

// The first consent record of a (user, site) speaks for it, mappings
// included, as every other projection query does; and a person is not a
// member of their own roster unless listed, which PolicyFor says although
// the law never asks.
func TestPolicyFirstRecordAndSelfMembership(t *testing.T) {
	second := projection.Mapping{Purpose: "default", Kind: "llm.chat", Service: "qwen"}
	p := mustNew(t, &projection.Fixture{
		Consents: []projection.ConsentRecord{
			{Owner: alice, SiteID: siteA, Mappings: projection.NewMappings(mapping)},
			{Owner: alice, SiteID: siteA, Mappings: projection.NewMappings(second)},
		},
		Rosters: []projection.RosterRecord{{ID: "t", Owner: bob, Members: []string{alice}}},
	})
	require.Equal(t, []projection.Mapping{mapping}, p.PolicyFor(siteA, alice, bob).Mappings)
	require.False(t, p.PolicyFor(siteA, bob, bob).Member)
	require.True(t, p.PolicyFor(siteA, alice, bob).Member)
	got := p.PolicyFor(siteA, alice, bob).Mappings
	got[0].Service = "changed"
	require.Equal(t, "echo", p.PolicyFor(siteA, alice, bob).Mappings[0].Service, "the slice is the caller's")
}

// A policy read decodes nothing: the mappings were decoded when the
// projection was built, and the read costs one copy, which is the
// caller's to change.
func TestPolicyReadCopiesTheMappingsDecodedAtLoad(t *testing.T) {
	h := newPolicyHarness(t)
	h.consent(siteA, alice, mapping, teammateMapping)
	p, err := projection.New(&h.f)
	require.NoError(t, err)
	got := p.PolicyFor(siteA, alice, bob).Mappings
	require.Equal(t, []projection.Mapping{mapping, teammateMapping}, got)
	got[0].Service = "changed"
	require.Equal(t, []projection.Mapping{mapping, teammateMapping}, p.PolicyFor(siteA, alice, bob).Mappings, "the caller's copy")
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { p.PolicyFor(siteA, alice, bob) }), "one allocation: the copy")
}
