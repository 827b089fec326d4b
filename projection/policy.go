package projection

import "fmt"

// This file answers, over the projection, the one question a grant author
// asks of its policy store (grants.md G-R22, G-R23): the reference's
// PolicyStore.read (control-plane/dist/store.d.ts:39-169).

// Consent states, as PolicySnapshot.consented spells them.
const (
	ConsentYes    = "yes"
	ConsentPaused = "paused"
	ConsentNo     = "no"
)

// Policy is the reference's PolicySnapshot without declares and advertised,
// which only the enqueue question reads (G-R13).
type Policy struct {
	// Consented is ConsentYes, ConsentPaused or ConsentNo.
	Consented string
	// Member says whether a roster owned by the device owner lists the
	// user. It is meaningful only when the two differ: a person is not a
	// member of their own rosters unless listed.
	Member bool
	// Mappings are the user's mappings for the site, in fixture order:
	// none when Consented is ConsentNo. The slice is the caller's.
	Mappings []Mapping
}

// PolicyFor reads (siteID, user, owner) as the reference's store does,
// where siteID is a fixture site id, user the job's owner and owner the
// device's:
//   - consented: ConsentNo when a revocation names (user, siteID) or no
//     consent record exists, ConsentPaused when the first record is
//     paused, otherwise ConsentYes;
//   - member: some roster whose owner is owner lists user;
//   - mappings: the first consent record's, unless consented is ConsentNo.
//
// Mappings whose (purpose, kind) repeats stay in the list: the author takes
// the first, as the reference's find does.
func (p *Projection) PolicyFor(siteID, user, owner string) Policy {
	pol := Policy{Consented: ConsentNo, Mappings: []Mapping{}}
	_, pol.Member = p.members[owner][user]
	k := pair{user, siteID}
	i, ok := p.consentByPair[k]
	if _, revoked := p.revokedPairs[k]; revoked || !ok {
		return pol
	}
	pol.Consented = ConsentYes
	if p.f.Consents[i].Paused {
		pol.Consented = ConsentPaused
	}
	// Decoded once per projection (build): a claim's policy read costs a
	// copy, not a JSON decoding.
	pol.Mappings = append(pol.Mappings, p.mappings[i]...)
	return pol
}

// Warnings lists what is valid in the fixture but probably not meant, for
// the loader to log: today, a consent with two mappings for the same
// (purpose, kind), of which only the first is ever used.
func (p *Projection) Warnings() []string { return append([]string(nil), p.warnings...) }

func duplicateMappings(consents []ConsentRecord) []string {
	var out []string
	for i, c := range consents {
		first := map[[2]string]int{}
		for j, m := range c.Mappings.List() {
			slot := [2]string{m.Purpose, m.Kind}
			if k, dup := first[slot]; dup {
				out = append(out, fmt.Sprintf("consents[%d].mappings[%d] repeats the (purpose, kind) of mappings[%d], which wins", i, j, k))
				continue
			}
			first[slot] = j
		}
	}
	return out
}
