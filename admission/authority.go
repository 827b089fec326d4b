package admission

import (
	"context"
	"time"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
)

// Authority is what the claim pipeline asks to author one claimed job:
// the local law and key ring (Author), an external author (External), or
// both side by side (Authors, G-R35).
type Authority interface {
	// Author decides c over p, the projection in force now (G-R5), for a
	// device enrolled with grantKey, at now on the relay clock. It never
	// fails: every failure is a decline (G-R17, G-R38).
	Author(ctx context.Context, p *projection.Projection, c Claim, grantKey projection.GrantKey, now time.Time) Outcome
	// Holds reports whether this authority authors for devices enrolled
	// with publicKey (the string the key travels as).
	Holds(publicKey string) bool
	// AuthorKeys lists the public keys it authors with, current first.
	AuthorKeys() []KeyInfo
}

// Where a key's grants are signed, as /grant-keys and /readyz name it
// (G-R50), and the mode label of relayd_grant_author_duration_seconds.
const (
	SignerLocal    = "local"
	SignerExternal = "external"
)

// KeyInfo is one public key an authority authors with: never more than
// its public half.
type KeyInfo struct {
	PublicKey string
	KeyID     string
	// Signer is SignerLocal or SignerExternal.
	Signer string
}

func keyInfo(publicKey, signer string) KeyInfo {
	id, _ := protocol.KeyIDOf(publicKey)
	return KeyInfo{PublicKey: publicKey, KeyID: id, Signer: signer}
}

// Holds reports whether the ring holds publicKey.
func (a Author) Holds(publicKey string) bool {
	_, ok := a.Keys.Lookup(publicKey)
	return ok
}

// AuthorKeys lists the ring's keys, current first.
func (a Author) AuthorKeys() []KeyInfo {
	out := []KeyInfo{}
	for _, k := range a.Keys.PublicKeys() {
		out = append(out, keyInfo(k, SignerLocal))
	}
	return out
}

// Authors puts the local author and an external one side by side
// (G-R35): a device enrolled with one of the external author's keys is
// authored by it, every other device by the local law, which allows a
// migration from one to the other. Either may be nil; the external
// author's keys come first, so its first key is current.
type Authors struct {
	Local    Authority
	External Authority
	// Observe, when set, hears how long each authoring took, by mode
	// (SignerLocal, SignerExternal): relayd_grant_author_duration_seconds.
	Observe func(mode string, took time.Duration)
}

// Author routes the claim to the authority that holds grantKey.
func (a Authors) Author(ctx context.Context, p *projection.Projection, c Claim, grantKey projection.GrantKey, now time.Time) Outcome {
	mode, next := a.route(grantKey.String())
	if next == nil {
		return Outcome{Decision: declined(ReasonSignFailed)}
	}
	start := time.Now()
	out := next.Author(ctx, p, c, grantKey, now)
	if a.Observe != nil {
		a.Observe(mode, time.Since(start))
	}
	return out
}

// route is the authority for a device enrolled with publicKey: the
// external one when it holds the key, else the local one (which declines
// a key it lacks), else none.
func (a Authors) route(publicKey string) (string, Authority) {
	if a.External != nil && a.External.Holds(publicKey) {
		return SignerExternal, a.External
	}
	if a.Local != nil {
		return SignerLocal, a.Local
	}
	return "", nil
}

// Holds reports whether either authority authors for publicKey.
func (a Authors) Holds(publicKey string) bool {
	return (a.External != nil && a.External.Holds(publicKey)) || (a.Local != nil && a.Local.Holds(publicKey))
}

// AuthorKeys lists the external author's keys, then the local ones.
func (a Authors) AuthorKeys() []KeyInfo {
	out := []KeyInfo{}
	for _, next := range []Authority{a.External, a.Local} {
		if next != nil {
			out = append(out, next.AuthorKeys()...)
		}
	}
	return out
}
