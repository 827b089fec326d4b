// Package projection holds the relay's view of the control plane: which
// sites exist, which owners consented to which site, which devices are
// approved, who may run jobs for whom, and which consents were revoked.
//
// The control plane hands that view over as a JSON fixture file. This package
// defines the fixture schema and its strict parser (Parse), turns a valid
// fixture into an immutable, queryable snapshot (Projection), and keeps the
// current snapshot of a fixture file up to date while the file changes
// (Source).
//
// One fixture serves both protocols (spec §2.4.4). The v2 schema is a strict
// superset of v0's: site records may carry a key rotation (Succeeds,
// RetiringUntil) and device records a revocation (Revoked), and a v0 fixture
// parses unchanged. The v0 codec keeps asking the v0 queries; the v2 codec
// adds SitesFor, SiteIDForKey, RevokedDevice, RoutesFor, ClaimRoutesFor,
// SuccessionsFor and SiteRecord.VerifyingKeys (routes.go, succession.go).
//
// For a grant author (package admission) consent records may carry
// mappings and device records a grant key; PolicyFor answers the
// reference's PolicyStore read over them (policy.go). A fixture that uses
// either is for relayd only: the reference relay refuses the keys.
package projection

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/strictjson"
)

// Fixture is the decoded control-plane fixture: five lists of records. The
// order of records matters, because every query returns the first match.
type Fixture struct {
	Sites    []SiteRecord       `json:"sites"`
	Consents []ConsentRecord    `json:"consents"`
	Devices  []DeviceRecord     `json:"devices"`
	Rosters  []RosterRecord     `json:"rosters"`
	Revoked  []RevocationRecord `json:"revoked"`
}

// SiteRecord registers a site and its public keys. Succeeds and
// RetiringUntil come with protocol "2" and describe a key rotation: Succeeds
// lists the site's earlier keys, oldest first (see VerifySuccessions), and
// RetiringUntil (epoch milliseconds, zero when absent) is when they stop
// signing site-plane calls. A fixture without them reads as before.
type SiteRecord struct {
	SiteID        string                  `json:"siteId"`
	Site          protocol.PublicIdentity `json:"site"`
	Succeeds      []Succession            `json:"succeeds,omitempty"`
	RetiringUntil int64                   `json:"retiringUntil,omitempty"`
}

// ConsentRecord says that Owner allows jobs for SiteID to be routed to their
// devices. A paused consent still exists (it pairs and is not revoked) but
// routes nothing.
//
// Mappings (protocol "2", grants.md G-R24; absent means none) say which
// service runs Owner's work of each (purpose, kind) for this site, for a
// grant author. They live in the consent because the mapping is the
// consent: removing the record removes them, and a revocation empties them
// (PolicyFor).
type ConsentRecord struct {
	Owner    string   `json:"owner"`
	SiteID   string   `json:"siteId"`
	Paused   bool     `json:"paused"`
	Mappings Mappings `json:"mappings,omitzero"`
}

// RosterRecord lets Owner's devices run jobs owned by Members. The owner is
// not implicitly a member and membership is not transitive.
type RosterRecord struct {
	ID      string   `json:"id"`
	Owner   string   `json:"owner"`
	Members []string `json:"members"`
}

// DeviceRecord approves one device of Owner, known to the relay as RunnerID.
// Revoked (protocol "2", absent means false) keeps the record, so the device
// still pairs, but refuses its signed calls.
//
// GrantKey (protocol "2", grants.md G-R24; zero when absent) enrols the
// device for signed grants: the grant public key it pinned, or pins at its
// next pairing. A device without one keeps decision P2-D4.
type DeviceRecord struct {
	Owner    string                  `json:"owner"`
	RunnerID string                  `json:"runnerId"`
	Device   protocol.PublicIdentity `json:"device"`
	Revoked  bool                    `json:"revoked,omitempty"`
	GrantKey GrantKey                `json:"grantKey,omitzero"`
}

// RevocationRecord withdraws Owner's consent for SiteID. It wins over any
// consent record for the same pair.
type RevocationRecord struct {
	Owner  string `json:"owner"`
	SiteID string `json:"siteId"`
}

// Empty returns a fixture with all five lists empty. A relay projecting it
// routes nothing.
func Empty() *Fixture {
	return &Fixture{
		Sites:    []SiteRecord{},
		Consents: []ConsentRecord{},
		Devices:  []DeviceRecord{},
		Rosters:  []RosterRecord{},
		Revoked:  []RevocationRecord{},
	}
}

// Parse decodes and validates a fixture document. It is strict: the document
// must be one JSON object in valid UTF-8, without unpaired surrogate
// escapes; unknown keys (compared exactly, case included), repeated keys
// and null values are refused at every level;
// "consents" is required while the other lists default to empty; every
// string field must be non-empty; "paused" and "revoked" default to false;
// a succession chain must verify (VerifySuccessions).
func Parse(data []byte) (*Fixture, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("fixture: not valid UTF-8")
	}
	if err := checkShape(data); err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	// encoding/json reads an unpaired surrogate escape as U+FFFD, so an
	// owner "\ud800" would match a request naming U+FFFD. The strict parser
	// the request bodies go through refuses it (and everything else that
	// reads two ways), so the fixture is read as strictly as they are.
	if _, err := strictjson.Parse(data); err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}

	var w wireFixture
	dec := json.NewDecoder(bytes.NewReader(data))
	// checkShape already refused unknown keys exactly; this is the second
	// line of defence should the two ever disagree.
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}

	f, err := w.fixture()
	if err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// Validate checks what the schema requires of a fixture built in code:
// every string field non-empty, every member name non-empty, and for
// protocol "2" a succession chain of at most MaxSuccessionChain links whose
// signatures verify (see VerifySuccessions) and a retiringUntil that is a
// positive safe integer when present. Nil lists are fine and mean empty.
func (f *Fixture) Validate() error {
	if f == nil {
		return errors.New("fixture: nil fixture")
	}
	var v validator
	for i, s := range f.Sites {
		v.site(i, s)
	}
	for i, c := range f.Consents {
		v.nonEmpty(c.Owner, "consents[%d].owner", i)
		v.nonEmpty(c.SiteID, "consents[%d].siteId", i)
		for j, m := range c.Mappings.List() {
			v.mapping(fmt.Sprintf("consents[%d].mappings[%d]", i, j), m)
		}
	}
	for i, d := range f.Devices {
		v.nonEmpty(d.Owner, "devices[%d].owner", i)
		v.nonEmpty(d.RunnerID, "devices[%d].runnerId", i)
		v.identity(fmt.Sprintf("devices[%d].device", i), d.Device)
	}
	for i, r := range f.Rosters {
		v.nonEmpty(r.ID, "rosters[%d].id", i)
		v.nonEmpty(r.Owner, "rosters[%d].owner", i)
		for j, m := range r.Members {
			v.nonEmpty(m, "rosters[%d].members[%d]", i, j)
		}
	}
	for i, r := range f.Revoked {
		v.nonEmpty(r.Owner, "revoked[%d].owner", i)
		v.nonEmpty(r.SiteID, "revoked[%d].siteId", i)
	}
	return errors.Join(v.errs...)
}

// validator collects every schema violation of a fixture, so an operator
// fixing the file sees them all at once.
type validator struct{ errs []error }

func (v *validator) fail(err error) { v.errs = append(v.errs, fmt.Errorf("fixture: %w", err)) }

func (v *validator) nonEmpty(s string, format string, args ...any) {
	if s == "" {
		v.fail(fmt.Errorf(format+": must be a non-empty string", args...))
	}
}

// mappingKinds are the kinds a mapping may name: protocol "2"'s closed kind
// vocabulary (decision DG9). A mapping for any other kind could never match.
var mappingKinds = []string{protocol.KindGenerate, protocol.KindChat}

func (v *validator) mapping(at string, m Mapping) {
	v.nonEmpty(m.Purpose, "%s.purpose", at)
	v.nonEmpty(m.Service, "%s.service", at)
	if !slices.Contains(mappingKinds, m.Kind) {
		v.fail(fmt.Errorf("%s.kind: %q is not a job kind (want %s)", at, m.Kind, strings.Join(mappingKinds, " or ")))
	}
}

func (v *validator) identity(at string, p protocol.PublicIdentity) {
	v.nonEmpty(p.Identity, "%s.identity", at)
	v.nonEmpty(p.Encryption, "%s.encryption", at)
	v.nonEmpty(p.EncryptionSig, "%s.encryptionSig", at)
}

func (v *validator) site(i int, s SiteRecord) {
	v.nonEmpty(s.SiteID, "sites[%d].siteId", i)
	v.identity(fmt.Sprintf("sites[%d].site", i), s.Site)
	if s.RetiringUntil < 0 || s.RetiringUntil > maxSafeInteger {
		v.fail(fmt.Errorf("sites[%d].retiringUntil: must be a positive safe integer", i))
	}
	for j, link := range s.Succeeds {
		at := fmt.Sprintf("sites[%d].succeeds[%d]", i, j)
		v.identity(at+".identity", link.Identity)
		v.nonEmpty(link.Signature, "%s.signature", at)
	}
	if err := VerifySuccessions(s); err != nil {
		v.fail(fmt.Errorf("sites[%d].succeeds: %w", i, err))
	}
}

// clone returns a deep copy of f with nil lists replaced by empty ones, so
// a Projection never shares memory with its caller.
func (f *Fixture) clone() *Fixture {
	c := Empty()
	for _, s := range f.Sites {
		if s.Succeeds != nil {
			s.Succeeds = append([]Succession{}, s.Succeeds...)
		}
		c.Sites = append(c.Sites, s)
	}
	c.Consents = append(c.Consents, f.Consents...)
	c.Devices = append(c.Devices, f.Devices...)
	c.Revoked = append(c.Revoked, f.Revoked...)
	for _, r := range f.Rosters {
		r.Members = append([]string{}, r.Members...)
		c.Rosters = append(c.Rosters, r)
	}
	return c
}

// The wire types mirror the fixture with pointers, so that a missing
// required field can be told apart from a zero value. Nulls never reach
// them: checkShape refuses every null first.
type (
	wireFixture struct {
		Sites    *[]wireSite       `json:"sites"`
		Consents *[]wireConsent    `json:"consents"`
		Devices  *[]wireDevice     `json:"devices"`
		Rosters  *[]wireRoster     `json:"rosters"`
		Revoked  *[]wireRevocation `json:"revoked"`
	}
	wireIdentity struct {
		Identity      *string `json:"identity"`
		Encryption    *string `json:"encryption"`
		EncryptionSig *string `json:"encryptionSig"`
	}
	wireSite struct {
		SiteID        *string           `json:"siteId"`
		Site          *wireIdentity     `json:"site"`
		Succeeds      *[]wireSuccession `json:"succeeds"`
		RetiringUntil *json.Number      `json:"retiringUntil"`
	}
	wireSuccession struct {
		Identity  *wireIdentity `json:"identity"`
		Signature *string       `json:"signature"`
	}
	wireConsent struct {
		Owner    *string        `json:"owner"`
		SiteID   *string        `json:"siteId"`
		Paused   *bool          `json:"paused"`
		Mappings *[]wireMapping `json:"mappings"`
	}
	wireMapping struct {
		Purpose      *string `json:"purpose"`
		Kind         *string `json:"kind"`
		Service      *string `json:"service"`
		ServiceOwner *string `json:"serviceOwner"`
	}
	wireRoster struct {
		ID      *string   `json:"id"`
		Owner   *string   `json:"owner"`
		Members *[]string `json:"members"`
	}
	wireDevice struct {
		Owner    *string       `json:"owner"`
		RunnerID *string       `json:"runnerId"`
		Device   *wireIdentity `json:"device"`
		Revoked  *bool         `json:"revoked"`
		GrantKey *string       `json:"grantKey"`
	}
	wireRevocation struct {
		Owner  *string `json:"owner"`
		SiteID *string `json:"siteId"`
	}
)

// required collects "missing field" errors while converting wire records.
type required struct{ errs []error }

func (r *required) str(p *string, format string, args ...any) string {
	if p == nil {
		r.errs = append(r.errs, fmt.Errorf(format+": required", args...))
		return ""
	}
	return *p
}

func (r *required) identity(p *wireIdentity, at string) protocol.PublicIdentity {
	if p == nil {
		r.errs = append(r.errs, fmt.Errorf("%s: required", at))
		return protocol.PublicIdentity{}
	}
	return protocol.PublicIdentity{
		Identity:      r.str(p.Identity, "%s.identity", at),
		Encryption:    r.str(p.Encryption, "%s.encryption", at),
		EncryptionSig: r.str(p.EncryptionSig, "%s.encryptionSig", at),
	}
}

func (r *required) site(s wireSite, i int) SiteRecord {
	rec := SiteRecord{
		SiteID: r.str(s.SiteID, "sites[%d].siteId", i),
		Site:   r.identity(s.Site, fmt.Sprintf("sites[%d].site", i)),
	}
	if s.Succeeds != nil {
		rec.Succeeds = []Succession{}
		for j, link := range *s.Succeeds {
			at := fmt.Sprintf("sites[%d].succeeds[%d]", i, j)
			rec.Succeeds = append(rec.Succeeds, Succession{
				Identity:  r.identity(link.Identity, at+".identity"),
				Signature: r.str(link.Signature, "%s.signature", at),
			})
		}
	}
	if s.RetiringUntil != nil {
		ms, ok := positiveSafeInteger(*s.RetiringUntil)
		if !ok {
			r.errs = append(r.errs, fmt.Errorf("sites[%d].retiringUntil: must be a positive safe integer", i))
		}
		rec.RetiringUntil = ms
	}
	return rec
}

func (r *required) consent(c wireConsent, i int) ConsentRecord {
	rec := ConsentRecord{
		Owner:  r.str(c.Owner, "consents[%d].owner", i),
		SiteID: r.str(c.SiteID, "consents[%d].siteId", i),
		Paused: c.Paused != nil && *c.Paused,
	}
	if c.Mappings != nil {
		list := make([]Mapping, 0, len(*c.Mappings))
		for j, m := range *c.Mappings {
			at := fmt.Sprintf("consents[%d].mappings[%d]", i, j)
			list = append(list, Mapping{
				Purpose:      r.str(m.Purpose, "%s.purpose", at),
				Kind:         r.str(m.Kind, "%s.kind", at),
				Service:      r.str(m.Service, "%s.service", at),
				ServiceOwner: r.present(m.ServiceOwner, "%s.serviceOwner", at),
			})
		}
		rec.Mappings = NewMappings(list...)
	}
	return rec
}

// present reads an optional string, which when present must not be empty:
// in the Go records "" means absent, so "" in the file would read as absent
// and say something else than it does.
func (r *required) present(p *string, format string, args ...any) string {
	if p != nil && *p == "" {
		r.errs = append(r.errs, fmt.Errorf(format+": must be a non-empty string", args...))
	}
	if p == nil {
		return ""
	}
	return *p
}

func (r *required) grantKey(p *string, i int) GrantKey {
	if p == nil {
		return GrantKey{}
	}
	k, err := ParseGrantKey(*p)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("devices[%d].grantKey: %w", i, err))
	}
	return k
}

// positiveSafeInteger reads a JSON number as JavaScript would (the nearest
// double, so 1e3 and 1000.0 are 1000) and accepts it when it is a whole
// number from 1 to 2^53-1, which is what the reference's schema allows.
func positiveSafeInteger(n json.Number) (int64, bool) {
	v, err := strconv.ParseFloat(string(n), 64)
	if err != nil || v < 1 || v > maxSafeInteger || v != math.Trunc(v) {
		return 0, false
	}
	return int64(v), true
}

func (w *wireFixture) fixture() (*Fixture, error) {
	var req required
	f := Empty()
	if w.Consents == nil {
		req.errs = append(req.errs, errors.New("consents: required"))
	}
	if w.Sites != nil {
		for i, s := range *w.Sites {
			f.Sites = append(f.Sites, req.site(s, i))
		}
	}
	if w.Consents != nil {
		for i, c := range *w.Consents {
			f.Consents = append(f.Consents, req.consent(c, i))
		}
	}
	if w.Devices != nil {
		for i, d := range *w.Devices {
			f.Devices = append(f.Devices, DeviceRecord{
				Owner:    req.str(d.Owner, "devices[%d].owner", i),
				RunnerID: req.str(d.RunnerID, "devices[%d].runnerId", i),
				Device:   req.identity(d.Device, fmt.Sprintf("devices[%d].device", i)),
				Revoked:  d.Revoked != nil && *d.Revoked,
				GrantKey: req.grantKey(d.GrantKey, i),
			})
		}
	}
	if w.Rosters != nil {
		for i, r := range *w.Rosters {
			rec := RosterRecord{
				ID:      req.str(r.ID, "rosters[%d].id", i),
				Owner:   req.str(r.Owner, "rosters[%d].owner", i),
				Members: []string{},
			}
			if r.Members == nil {
				req.errs = append(req.errs, fmt.Errorf("rosters[%d].members: required", i))
			} else {
				rec.Members = append(rec.Members, *r.Members...)
			}
			f.Rosters = append(f.Rosters, rec)
		}
	}
	if w.Revoked != nil {
		for i, r := range *w.Revoked {
			f.Revoked = append(f.Revoked, RevocationRecord{
				Owner:  req.str(r.Owner, "revoked[%d].owner", i),
				SiteID: req.str(r.SiteID, "revoked[%d].siteId", i),
			})
		}
	}
	if err := errors.Join(req.errs...); err != nil {
		return nil, err
	}
	return f, nil
}
