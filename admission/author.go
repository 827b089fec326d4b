package admission

import (
	"context"
	"io"
	"time"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol/proto2"
)

// Author is relayd's local grant author (decision DG1): the law over the
// projection, then a grant signed with the key the device is enrolled with.
type Author struct {
	Law  Law
	Keys *KeyRing
	// Random is where grant ids come from: crypto/rand.Reader in
	// production.
	Random io.Reader
}

// Outcome is the author's answer for one claim: Grant is set exactly when
// Decision is granted and the grant was signed.
type Outcome struct {
	Decision Decision
	Grant    *proto2.SignedGrant
}

// Author decides c over p, the projection in force now (G-R5), and signs
// a granted job with the ring's key for grantKey, issued at now on the
// relay clock (G-R32). A grant that cannot be signed (the ring lacks the
// device's key, the claims are not valid, the signer failed) is a
// transient decline, never an error for the claim to fail on (G-R17).
func (a Author) Author(ctx context.Context, p *projection.Projection, c Claim, grantKey projection.GrantKey, now time.Time) Outcome {
	d := a.Law.Decide(p, c)
	if !d.Granted {
		return Outcome{Decision: d}
	}
	grant, err := a.sign(ctx, d.Terms, grantKey, now)
	if err != nil {
		return Outcome{Decision: declined(ReasonSignFailed)}
	}
	return Outcome{Decision: d, Grant: &grant}
}

func (a Author) sign(ctx context.Context, t Terms, grantKey projection.GrantKey, now time.Time) (proto2.SignedGrant, error) {
	signer, ok := a.Keys.Lookup(grantKey.String())
	if !ok {
		return proto2.SignedGrant{}, errKeyUnavailable
	}
	id, err := NewGrantID(a.Random)
	if err != nil {
		return proto2.SignedGrant{}, err
	}
	return Sign(ctx, signer, Claims{
		GrantID: id, JobID: t.JobID, Site: t.Site, User: t.User, Owner: t.Owner,
		Purpose: t.Purpose, Kind: t.Kind, Service: t.Service, IssuedAt: now.UnixMilli(),
	})
}
