package projection

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iter"
	"slices"

	"github.com/byollm/relayd/protocol"
)

// Projection is an immutable, validated snapshot of a fixture with the
// queries the relay planes ask. Wherever several records match, the first
// one in fixture order wins, exactly as if the lists were scanned; the maps
// below only remember where that first match is.
//
// A Projection is safe for concurrent use. Build one with New or FromJSON;
// the zero value is not usable.
type Projection struct {
	f    *Fixture
	hash string

	siteByID         map[string]int // siteId → index of the first site
	siteByKeyID      map[string]int // current key id → index of the first site
	sitesInIDOrder   []int          // every site index, by siteId in JavaScript order
	deviceByRunner   map[string]int // runnerId → index of the first device
	deviceByIdentity map[string]int // device.identity → index of the first device
	deviceByKeyID    map[string]int // key id of device.identity → index of the first device
	consentByPair    map[pair]int   // (owner, siteId) → index of the first consent
	revokedPairs     map[pair]struct{}
	runnable         map[string][]string            // roster owner → ownersRunnableBy
	runnableSet      map[string]map[string]struct{} // the same, as a set
	members          map[string]map[string]struct{} // roster owner → listed members only
	enrolments       []enrolment                    // each grantKey the device records name, first use first
	mappings         [][]Mapping                    // each consent's mappings, decoded, by consent index
	warnings         []string
}

// enrolment is one grant key the device records name, and how many of
// them name it.
type enrolment struct {
	key     GrantKey
	devices int
}

// pair is an (owner, site) key.
type pair struct{ owner, siteID string }

// New validates f and builds its projection. The projection keeps its own
// copy, so f may be changed afterwards. Its Hash is the SHA-256 of f's JSON
// encoding (encoding/json, fields in declaration order), because no file
// bytes exist.
func New(f *Fixture) (*Projection, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	c := f.clone()
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("fixture: encode for hashing: %w", err)
	}
	return build(c, raw), nil
}

// FromJSON parses a fixture document strictly (see Parse) and builds its
// projection. Its Hash is the SHA-256 of exactly these bytes, so replicas
// that loaded the same file report the same hash.
func FromJSON(data []byte) (*Projection, error) {
	f, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return build(f, data), nil
}

// build indexes an already validated fixture that nobody else holds.
func build(f *Fixture, raw []byte) *Projection {
	sum := sha256.Sum256(raw)
	p := &Projection{
		f:                f,
		hash:             hex.EncodeToString(sum[:]),
		siteByID:         make(map[string]int, len(f.Sites)),
		deviceByRunner:   make(map[string]int, len(f.Devices)),
		deviceByIdentity: make(map[string]int, len(f.Devices)),
		deviceByKeyID:    make(map[string]int, len(f.Devices)),
		consentByPair:    make(map[pair]int, len(f.Consents)),
		revokedPairs:     make(map[pair]struct{}, len(f.Revoked)),
		runnable:         map[string][]string{},
		runnableSet:      map[string]map[string]struct{}{},
		members:          map[string]map[string]struct{}{},
		warnings:         duplicateMappings(f.Consents),
	}
	// Record only the first index per key: later duplicates are shadowed,
	// as they would be by a front-to-back scan.
	for i, s := range f.Sites {
		firstIndex(p.siteByID, s.SiteID, i)
		p.sitesInIDOrder = append(p.sitesInIDOrder, i)
	}
	p.siteByKeyID = indexKeyIDs(f.Sites)
	// Stable, so records sharing an id stay in fixture order, as V8's
	// stable sort leaves them.
	slices.SortStableFunc(p.sitesInIDOrder, func(i, j int) int {
		switch a, b := f.Sites[i].SiteID, f.Sites[j].SiteID; {
		case JSLess(a, b):
			return -1
		case JSLess(b, a):
			return 1
		}
		return 0
	})
	for i, d := range f.Devices {
		firstIndex(p.deviceByRunner, d.RunnerID, i)
		firstIndex(p.deviceByIdentity, d.Device.Identity, i)
		if id, ok := protocol.KeyIDOf(d.Device.Identity); ok {
			firstIndex(p.deviceByKeyID, id, i)
		}
	}
	p.enrolments = enrolments(f.Devices)
	p.mappings = make([][]Mapping, len(f.Consents))
	for i, c := range f.Consents {
		firstIndex(p.consentByPair, pair{c.Owner, c.SiteID}, i)
		p.mappings[i] = c.Mappings.List()
	}
	for _, r := range f.Revoked {
		p.revokedPairs[pair{r.Owner, r.SiteID}] = struct{}{}
	}
	for _, r := range f.Rosters {
		set, ok := p.runnableSet[r.Owner]
		if !ok {
			// The device owner always comes first.
			set = map[string]struct{}{r.Owner: {}}
			p.runnableSet[r.Owner] = set
			p.runnable[r.Owner] = []string{r.Owner}
		}
		if p.members[r.Owner] == nil {
			p.members[r.Owner] = map[string]struct{}{}
		}
		for _, m := range r.Members {
			p.members[r.Owner][m] = struct{}{}
			if _, dup := set[m]; !dup {
				set[m] = struct{}{}
				p.runnable[r.Owner] = append(p.runnable[r.Owner], m)
			}
		}
	}
	return p
}

// enrolments counts the device records per grant key, keys in the order
// of their first record.
func enrolments(devices []DeviceRecord) []enrolment {
	var out []enrolment
	at := map[GrantKey]int{}
	for _, d := range devices {
		if d.GrantKey.IsZero() {
			continue
		}
		i, ok := at[d.GrantKey]
		if !ok {
			i = len(out)
			at[d.GrantKey] = i
			out = append(out, enrolment{key: d.GrantKey})
		}
		out[i].devices++
	}
	return out
}

func firstIndex[K comparable](m map[K]int, k K, i int) {
	if _, ok := m[k]; !ok {
		m[k] = i
	}
}

// Hash is the lowercase hex SHA-256 of the bytes this projection was loaded
// from (FromJSON), or of its fixture's JSON encoding (New), for operators
// comparing replicas.
func (p *Projection) Hash() string { return p.hash }

// Fixture returns a copy of the fixture behind the projection, for
// diagnostics such as the debug page. Changing it changes nothing here.
func (p *Projection) Fixture() *Fixture { return p.f.clone() }

// Enrolments yields each grant key the device records name once, with how
// many records (revoked ones included) name it, in the order of their
// first record. It is counted once per projection, so /readyz reads it
// without copying the fixture (grants.md G-R50).
func (p *Projection) Enrolments() iter.Seq2[GrantKey, int] {
	return func(yield func(GrantKey, int) bool) {
		for _, e := range p.enrolments {
			if !yield(e.key, e.devices) {
				return
			}
		}
	}
}

// SiteFor returns the first site registered under siteID.
func (p *Projection) SiteFor(siteID string) (SiteRecord, bool) {
	i, ok := p.siteByID[siteID]
	if !ok {
		return SiteRecord{}, false
	}
	return p.f.Sites[i], true
}

// DeviceFor returns the first approved device with this runner id.
func (p *Projection) DeviceFor(runnerID string) (DeviceRecord, bool) {
	i, ok := p.deviceByRunner[runnerID]
	if !ok {
		return DeviceRecord{}, false
	}
	return p.f.Devices[i], true
}

// DeviceByFingerprint returns the first approved device whose identity key,
// as it travels (unpadded base64url), is string-equal to identity. Key ids
// and encryption keys play no part.
func (p *Projection) DeviceByFingerprint(identity string) (DeviceRecord, bool) {
	i, ok := p.deviceByIdentity[identity]
	if !ok {
		return DeviceRecord{}, false
	}
	return p.f.Devices[i], true
}

// DeviceByKeyID returns the first approved device whose identity key has
// this key id, as envelopes name their sender and recipient.
func (p *Projection) DeviceByKeyID(keyID string) (DeviceRecord, bool) {
	i, ok := p.deviceByKeyID[keyID]
	if !ok {
		return DeviceRecord{}, false
	}
	return p.f.Devices[i], true
}

// ConsentFor returns owner's consent for siteID: the first matching consent
// record, paused or not, unless any revocation names the same owner and
// site, which wins. It answers "does a live consent exist", not "may jobs
// be routed"; see MayRouteFor for that.
func (p *Projection) ConsentFor(owner, siteID string) (ConsentRecord, bool) {
	k := pair{owner, siteID}
	if _, revoked := p.revokedPairs[k]; revoked {
		return ConsentRecord{}, false
	}
	i, ok := p.consentByPair[k]
	if !ok {
		return ConsentRecord{}, false
	}
	return p.f.Consents[i], true
}

// MayRouteFor reports whether owner's jobs for siteID may be routed: a
// consent exists, is not revoked and is not paused.
func (p *Projection) MayRouteFor(owner, siteID string) bool {
	c, ok := p.ConsentFor(owner, siteID)
	return ok && !c.Paused
}

// PausedFor reports whether owner's consent for siteID exists and is paused.
func (p *Projection) PausedFor(owner, siteID string) bool {
	c, ok := p.ConsentFor(owner, siteID)
	return ok && c.Paused
}

// OwnersRunnableBy lists whose jobs a device of deviceOwner may run:
// deviceOwner first, then the members of every roster deviceOwner owns, in
// roster then member order, without repeats. Membership is neither
// transitive nor reversed. The slice is the caller's to keep.
func (p *Projection) OwnersRunnableBy(deviceOwner string) []string {
	if owners, ok := p.runnable[deviceOwner]; ok {
		return append([]string(nil), owners...)
	}
	return []string{deviceOwner}
}

// RoutableOwners lists the owners whose jobs for siteID a device of
// deviceOwner may claim now: none unless deviceOwner itself may route for
// siteID, otherwise OwnersRunnableBy(deviceOwner) narrowed to the owners who
// may route for siteID. The result is never nil.
func (p *Projection) RoutableOwners(deviceOwner, siteID string) []string {
	out := []string{}
	if !p.MayRouteFor(deviceOwner, siteID) {
		return out
	}
	for _, o := range p.OwnersRunnableBy(deviceOwner) {
		if p.MayRouteFor(o, siteID) {
			out = append(out, o)
		}
	}
	return out
}

// MayRunFor reports whether a device of deviceOwner may run a job owned by
// jobOwner: the two are the same, or a roster of deviceOwner lists jobOwner.
// It agrees with OwnersRunnableBy for every pair.
func (p *Projection) MayRunFor(deviceOwner, jobOwner string) bool {
	if deviceOwner == jobOwner {
		return true
	}
	_, ok := p.runnableSet[deviceOwner][jobOwner]
	return ok
}
