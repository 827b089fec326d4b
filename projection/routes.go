package projection

import (
	"unicode/utf8"

	"github.com/byollm/relayd/protocol"
)

// This file holds the queries protocol "2" adds (spec §7.3). The v0 codec
// never calls them, except RevokedDevice and SiteRecord.VerifyingKeys,
// which relayd applies to both protocols.

// Route names the jobs of one owner for one site: what a claim may see. It
// has the same fields as store.Route, so either converts to the other.
type Route struct {
	SiteID string
	Owner  string
}

// SitesFor lists the sites whose consent for owner is live, paused
// included (ConsentFor), sorted by site id in JavaScript string order
// (UTF-16 code units, see JSLess), records with equal ids in fixture
// order. These are the sites a pairing answer and a heartbeat pin. The
// slice is the caller's.
func (p *Projection) SitesFor(owner string) []SiteRecord {
	out := []SiteRecord{}
	for _, i := range p.sitesInIDOrder {
		s := p.f.Sites[i]
		if _, ok := p.ConsentFor(owner, s.SiteID); ok {
			out = append(out, s)
		}
	}
	return out
}

// AwaitingConsentFor lists the sites of SitesFor(owner) that may not route
// for owner, which means their consent is paused: the heartbeat's
// awaitingConsent, in the same order.
func (p *Projection) AwaitingConsentFor(owner string) []SiteRecord {
	out := []SiteRecord{}
	for _, s := range p.SitesFor(owner) {
		if !p.MayRouteFor(owner, s.SiteID) {
			out = append(out, s)
		}
	}
	return out
}

// SiteIDForKey returns the id of the first site whose current identity key
// has this key id. Earlier keys of a rotation are not known here, so a stub
// enqueued before a rotation names no site any more.
func (p *Projection) SiteIDForKey(keyID string) (string, bool) {
	i, ok := p.siteByKeyID[keyID]
	if !ok {
		return "", false
	}
	return p.f.Sites[i].SiteID, true
}

// RevokedDevice reports whether the first device record with this runner id
// is revoked. Protocol "2" refuses every signed call of such a runner, and
// relayd refuses it on protocol "0" too (spec P2-A7).
func (p *Projection) RevokedDevice(runnerID string) bool {
	d, ok := p.DeviceFor(runnerID)
	return ok && d.Revoked
}

// RoutesFor is the reference's route set for a device of deviceOwner (spec
// §4.2): in fixture order, for every site deviceOwner may route for, each
// owner of OwnersRunnableBy(deviceOwner) who may route for that site too.
// Both the device owner and the job owner therefore need a live, unpaused
// consent. The slice has no repeats and is never nil.
//
// A v2 claim must use ClaimRoutesFor instead (decision P2-D4).
func (p *Projection) RoutesFor(deviceOwner string) []Route {
	out := []Route{}
	seen := map[Route]struct{}{}
	owners := p.OwnersRunnableBy(deviceOwner)
	for _, s := range p.f.Sites {
		if !p.MayRouteFor(deviceOwner, s.SiteID) {
			continue
		}
		for _, o := range owners {
			r := Route{SiteID: s.SiteID, Owner: o}
			if _, dup := seen[r]; dup || !p.MayRouteFor(o, s.SiteID) {
				continue
			}
			seen[r] = struct{}{}
			out = append(out, r)
		}
	}
	return out
}

// ClaimRoutesFor is what a v2 claim by a device of deviceOwner may see:
// RoutesFor narrowed to deviceOwner's own jobs. Without a grant author
// (decision P2-D4) a team job of a roster member could only be offered and
// then refused by the published daemon, so it is never offered; rosters
// widen nothing until an author exists.
func (p *Projection) ClaimRoutesFor(deviceOwner string) []Route {
	out := []Route{}
	for _, r := range p.RoutesFor(deviceOwner) {
		if r.Owner == deviceOwner {
			out = append(out, r)
		}
	}
	return out
}

// indexKeyIDs maps each current site key id to its first site. Keys that
// do not decode have no key id and cannot be found by one.
func indexKeyIDs(sites []SiteRecord) map[string]int {
	m := make(map[string]int, len(sites))
	for i, s := range sites {
		if id, ok := protocol.KeyIDOf(s.Site.Identity); ok {
			firstIndex(m, id, i)
		}
	}
	return m
}

// JSLess reports whether a sorts before b under JavaScript's string
// comparison, which compares UTF-16 code units rather than code points.
// The two orders differ only when a supplementary character (U+10000 and
// up, two code units from 0xD800) meets a BMP character from U+E000: the
// supplementary one sorts first in JavaScript and last in Go. Strings are
// taken as valid UTF-8, as the fixture parser guarantees.
func JSLess(a, b string) bool {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return utf16Lead(ra) < utf16Lead(rb) || (utf16Lead(ra) == utf16Lead(rb) && ra < rb)
		}
		a, b = a[na:], b[nb:]
	}
	return a == "" && b != ""
}

// utf16Lead is the first UTF-16 code unit of r.
func utf16Lead(r rune) rune {
	if r < 0x10000 {
		return r
	}
	return 0xD800 + (r-0x10000)>>10
}
