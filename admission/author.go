package admission

import (
	"context"
	"io"
	"time"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
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
	prepared := a.Prepare(ctx, p, c, grantKey, now)
	return Outcome{Decision: prepared.Decision, Grant: prepared.Grant()}
}

// Prepared is a decision whose grant, when granted, is certain: its id is
// drawn, its claims checked and its statement built, and all that may be
// left is the signature of relayd's own key, which cannot fail. So a
// caller may settle the decision first and sign while the store answers
// (plane/codec2): the settle's round trip then hides the signature's
// time, and a job settled granted always has its grant.
type Prepared struct {
	Decision Decision
	grant    *proto2.SignedGrant // signed already, or all but its signature
	// statement and key are set while the signature is still to make.
	statement []byte
	key       *keySigner
}

// Prepare is Author up to the signature: the law over p, then everything
// a grant needs but the signature of relayd's own key, which Grant makes.
// A signer of another kind (a KMS, a remote signer) may fail, so Prepare
// signs with it at once, and its failure is the decline sign-failed here.
func (a Author) Prepare(ctx context.Context, p *projection.Projection, c Claim, grantKey projection.GrantKey, now time.Time) Prepared {
	d := a.Law.Decide(p, c)
	if !d.Granted {
		return Prepared{Decision: d}
	}
	prepared, err := a.prepare(ctx, d, grantKey, now)
	if err != nil {
		return Prepared{Decision: declined(ReasonSignFailed)}
	}
	return prepared
}

func (a Author) prepare(ctx context.Context, d Decision, grantKey projection.GrantKey, now time.Time) (Prepared, error) {
	signer, ok := a.Keys.Lookup(grantKey.String())
	if !ok {
		return Prepared{}, errKeyUnavailable
	}
	id, err := NewGrantID(a.Random)
	if err != nil {
		return Prepared{}, err
	}
	t := d.Terms
	claims := Claims{
		GrantID: id, JobID: t.JobID, Site: t.Site, User: t.User, Owner: t.Owner,
		Purpose: t.Purpose, Kind: t.Kind, Service: t.Service, IssuedAt: now.UnixMilli(),
	}
	key, own := signer.(*keySigner)
	if !own {
		grant, err := Sign(ctx, signer, claims)
		return Prepared{Decision: d, grant: &grant}, err
	}
	statement, err := Statement(claims)
	if err != nil {
		return Prepared{}, err
	}
	unsigned := grantOf(claims, "")
	return Prepared{Decision: d, grant: &unsigned, statement: statement, key: key}, nil
}

// Grant is the prepared grant, signed: nil exactly when the decision is
// not granted. The first call signs; it is not safe for concurrent use.
func (p *Prepared) Grant() *proto2.SignedGrant {
	if p.key != nil {
		p.grant.Signature = protocol.EncodeKey(p.key.sign(p.statement))
		p.key, p.statement = nil, nil
	}
	return p.grant
}
