package admission

import (
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol/proto2"
)

// Reason says why a job was declined. The daemon never sees it and the
// relay never branches on it: it is for logs and metrics (relay/index.ts:54-56).
type Reason string

// The reasons, a closed set (grants.md G-R12). Only NotConsented and
// NotAMember are permanent.
const (
	ReasonUnknownSite       Reason = "unknown-site"       // no current site key has the stub's key id
	ReasonStoreUnavailable  Reason = "store-unavailable"  // the policy read failed (an external store)
	ReasonNotConsented      Reason = "not-consented"      // the job's owner has no live consent for the site
	ReasonConsentPaused     Reason = "consent-paused"     // that consent is paused
	ReasonNotAMember        Reason = "not-a-member"       // the job's owner is on no roster of the device's owner
	ReasonUnmapped          Reason = "unmapped"           // no mapping for the job's (purpose, kind)
	ReasonResolvedElsewhere Reason = "resolved-elsewhere" // the mapping names a service this device does not offer the job
	ReasonAuthorUnavailable Reason = "author-unavailable" // the external author failed
	ReasonAuthorInvalid     Reason = "author-invalid"     // the external author's grant would be refused
	ReasonSignFailed        Reason = "sign-failed"        // the grant could not be signed
)

// Permanent reports whether a decline for this reason bars the job from
// this device for good (control-plane/engine.ts:386-393): the relay then
// releases it as refused rather than for 30 s.
func (r Reason) Permanent() bool { return r == ReasonNotConsented || r == ReasonNotAMember }

// defaultPurpose is the purpose of a stub that names none
// (RESERVED_PURPOSE, protocol/manifest.ts:45).
const defaultPurpose = "default"

// Claim is one claimed job, with what the law reads about the claim
// (grants.md G-R3).
type Claim struct {
	Stub proto2.JobStub
	// DeviceOwner is the claiming device's owner, from its projection
	// record (P2-D7).
	DeviceOwner string
	// Capabilities are this claim request's, service and offer scope
	// included.
	Capabilities []proto2.Capability
	// Lease and RunnerID are the claim's lease on the job and the claiming
	// runner: the local law reads neither, an external author is sent both
	// (G-R3, G-R36).
	Lease    proto2.Lease
	RunnerID string
}

// Terms are what a granted job's grant says, less its id, its time and its
// signature.
type Terms struct {
	JobID, Site, User, Owner, Purpose, Kind, Service string
}

// Decision is the law's answer for one claim: granted with Terms, or
// declined for a Reason.
type Decision struct {
	Granted bool
	Terms   Terms  // when Granted
	Reason  Reason // when not Granted

	// authored is a decline an external author made, and permanent its
	// own word on permanence, which is trusted (G-R38).
	authored, permanent bool
}

// Permanent reports whether a decline bars the job from this device: an
// external author's decline is permanent exactly when it said so, the
// local law's when its reason is one of the two permanent ones.
func (d Decision) Permanent() bool {
	if d.authored {
		return !d.Granted && d.permanent
	}
	return !d.Granted && d.Reason.Permanent()
}

func declined(r Reason) Decision { return Decision{Reason: r} }

// Law is the reference control plane's grant law (control-plane/engine.ts:
// 190-334), applied to relayd's projection.
type Law struct {
	// OwnDefault is relayd's fallback for the owner's own unmapped work
	// (G-R8, a difference): on, an own job of a kind this claim offers
	// from exactly one service runs on that service.
	OwnDefault bool
}

// Decide applies the law to one claim over p, which must be the
// projection in force when the grant is authored (G-R5). It is pure: the
// same projection and claim always give the same decision. The steps run
// in the reference's order, and the first that fails gives the reason
// (G-R4 to G-R11):
//
//  0. the stub's site key names a current site, else unknown-site;
//  1. one policy read of (site, job owner, device owner);
//  2. consent, for every job, the owner's own included: no gives
//     not-consented, paused gives consent-paused;
//  3. membership, for another owner's job only: not-a-member;
//  4. the first mapping of the job's (purpose, kind), purpose "default"
//     when the stub has none; else the owner's default; else unmapped;
//  5. the mapped service is the device owner's, else resolved-elsewhere;
//  6. this claim offers that service for the kind, at scope team unless
//     the job is the owner's, else resolved-elsewhere.
func (l Law) Decide(p *projection.Projection, c Claim) Decision {
	stub := c.Stub
	siteID, ok := p.SiteIDForKey(stub.Site)
	if !ok {
		return declined(ReasonUnknownSite)
	}
	policy := p.PolicyFor(siteID, stub.Owner, c.DeviceOwner)
	switch policy.Consented {
	case projection.ConsentNo:
		return declined(ReasonNotConsented)
	case projection.ConsentPaused:
		return declined(ReasonConsentPaused)
	}
	own := stub.Owner == c.DeviceOwner
	if !own && !policy.Member {
		return declined(ReasonNotAMember)
	}
	purpose := stub.Purpose
	if purpose == "" {
		purpose = defaultPurpose
	}
	m, ok := firstMapping(policy.Mappings, purpose, stub.Kind)
	if !ok && l.OwnDefault && own {
		m, ok = ownDefault(c.Capabilities, stub.Kind)
	}
	if !ok {
		return declined(ReasonUnmapped)
	}
	serviceOwner := m.ServiceOwner
	if serviceOwner == "" { // no owner names the user's own service
		serviceOwner = stub.Owner
	}
	if serviceOwner != c.DeviceOwner || !offers(c.Capabilities, stub.Kind, m.Service, own) {
		return declined(ReasonResolvedElsewhere)
	}
	return Decision{Granted: true, Terms: Terms{
		JobID: stub.ID, Site: stub.Site, User: stub.Owner, Owner: c.DeviceOwner,
		Purpose: purpose, Kind: stub.Kind, Service: m.Service,
	}}
}

// firstMapping is the first mapping for (purpose, kind), compared as
// strings (control-plane/engine.ts:250-252).
func firstMapping(ms []projection.Mapping, purpose, kind string) (projection.Mapping, bool) {
	for _, m := range ms {
		if m.Purpose == purpose && m.Kind == kind {
			return m, true
		}
	}
	return projection.Mapping{}, false
}

// ownDefault is G-R8's fallback: the one service this claim offers kind
// from, when it offers it from exactly one. Two or more are what the
// daemon's withheld exists for; the relay cannot see which is the default.
func ownDefault(caps []proto2.Capability, kind string) (projection.Mapping, bool) {
	var found []proto2.Capability
	for _, c := range caps {
		if c.Kind == kind {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		return projection.Mapping{}, false
	}
	return projection.Mapping{Kind: kind, Service: found[0].Service}, true
}

// offers reports whether some capability runs kind on service for this
// job: any scope for the owner's own job, and only "team" for another's.
// team is an allowlist, so a scope this code does not know never widens.
func offers(caps []proto2.Capability, kind, service string, own bool) bool {
	for _, c := range caps {
		if c.Kind == kind && c.Service == service && (own || c.OfferScope == proto2.AudienceTeam) {
			return true
		}
	}
	return false
}
