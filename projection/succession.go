package projection

import (
	"errors"
	"fmt"
	"time"

	"github.com/byollm/relayd/protocol"
)

// MaxSuccessionChain is the longest succession chain a site record may
// carry, the protocol's MAX_SUCCESSION_CHAIN.
const MaxSuccessionChain = 64

// maxSafeInteger is the largest integer a JavaScript number holds exactly;
// the reference refuses a larger retiringUntil, and so does this schema.
const maxSafeInteger = 1<<53 - 1

// Succession is one link of a site's key rotation: the earlier identity,
// and its Ed25519 signature over SuccessionStatement naming the key that
// replaced it.
type Succession struct {
	Identity  protocol.PublicIdentity `json:"identity"`
	Signature string                  `json:"signature"`
}

const successionDomain = "byollm/v1/site-succession:"

// SuccessionStatement is what an outgoing site key signs to name its
// successor: the domain, then both key ids, oldest first.
func SuccessionStatement(fromKeyID, toKeyID string) []byte {
	return []byte(successionDomain + fromKeyID + ":" + toKeyID)
}

// Errors VerifySuccessions wraps, for callers and tests that tell them apart.
var (
	ErrChainTooLong = errors.New("succession chain too long")
	ErrBrokenLink   = errors.New("succession link does not verify")
)

// VerifySuccessions checks a site's succession chain the way the
// published daemon walks it (walkSuccession in @byollm/protocol 0.1.1): the
// LAST link must be signed by its own key naming the site's current key,
// and each earlier link must name the link after it. The chain is
// therefore oldest first, newest predecessor last. (Spec §4.10 and §7.1 say
// the reverse, following the reference's comments; its code, which every
// daemon runs, reads the chain this way, and a chain in the other order
// fails as a broken link.) Each link's identity must also be consistent
// (its encryption key signed by its identity key). An empty chain is valid.
//
// The reference relay trusts the projection and verifies nothing; relayd
// refuses such a fixture on load instead, because every daemon would refuse
// the chain anyway, and an operator learns of the mistake at once.
func VerifySuccessions(s SiteRecord) error {
	if len(s.Succeeds) == 0 {
		return nil
	}
	if len(s.Succeeds) > MaxSuccessionChain {
		return fmt.Errorf("%w: %d links, at most %d", ErrChainTooLong, len(s.Succeeds), MaxSuccessionChain)
	}
	successor, ok := protocol.KeyIDOf(s.Site.Identity)
	if !ok {
		return fmt.Errorf("%w: the current identity key is not base64url", ErrBrokenLink)
	}
	for i := len(s.Succeeds) - 1; i >= 0; i-- {
		link := s.Succeeds[i]
		from, ok := protocol.KeyIDOf(link.Identity.Identity)
		if !ok || !link.Identity.IsConsistent() {
			return fmt.Errorf("%w: link %d: inconsistent identity", ErrBrokenLink, i)
		}
		if !protocol.VerifyEd25519(link.Identity.Identity, SuccessionStatement(from, successor), link.Signature) {
			return fmt.Errorf("%w: link %d: signature by %s naming %s", ErrBrokenLink, i, from, successor)
		}
		successor = from
	}
	return nil
}

// VerifyingKeys lists the identity keys (as they travel) whose signatures
// authenticate this site's site-plane calls at relay-clock time now: the
// current key first, then, only while now is strictly before
// RetiringUntil, every key of Succeeds in order. Without RetiringUntil the
// old keys never sign. Callers try the keys in order and stop at the first
// success or at the first stale timestamp.
func (s SiteRecord) VerifyingKeys(now time.Time) []string {
	keys := []string{s.Site.Identity}
	if !s.Retiring(now) {
		return keys
	}
	for _, link := range s.Succeeds {
		keys = append(keys, link.Identity.Identity)
	}
	return keys
}

// Retiring reports whether the site's earlier keys still sign at relay
// clock time now (whole milliseconds, as the reference's Date.now()).
func (s SiteRecord) Retiring(now time.Time) bool {
	return s.RetiringUntil != 0 && now.UnixMilli() < s.RetiringUntil
}

// Rotation is what a heartbeat tells a daemon about one rotated site: its
// chain and, when set, the end of the retiring window.
type Rotation struct {
	Succeeds      []Succession `json:"succeeds"`
	RetiringUntil int64        `json:"retiringUntil,omitempty"`
}

// SuccessionsFor returns the heartbeat's successions for owner: for each
// site of SitesFor(owner) with a non-empty chain, its Rotation keyed by the
// key id of its current key. It is empty (never nil) when no pinned site
// has rotated, in which case the heartbeat omits the field. As in the
// reference, a later site with the same key id wins.
func (p *Projection) SuccessionsFor(owner string) map[string]Rotation {
	out := map[string]Rotation{}
	for _, s := range p.SitesFor(owner) {
		if len(s.Succeeds) == 0 {
			continue
		}
		// Validation guarantees a site with a chain has a decodable key.
		id, _ := protocol.KeyIDOf(s.Site.Identity)
		out[id] = Rotation{Succeeds: append([]Succession(nil), s.Succeeds...), RetiringUntil: s.RetiringUntil}
	}
	return out
}
