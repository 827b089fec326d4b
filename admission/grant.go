package admission

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// grantIDPrefix starts every grant id, as the reference's do
// (control-plane/engine.ts:69).
const grantIDPrefix = "grant_"

// NewGrantID draws a fresh grant id from random: "grant_" and a lowercase
// UUIDv4, the reference's format (G-R33). A UUIDv4 is 128 bits of which
// 122 are random, so replicas need no coordination to never repeat one:
// the device only needs ids unique within its 120 s window. Pass
// crypto/rand.Reader in production.
func NewGrantID(random io.Reader) (string, error) {
	var u [16]byte
	if _, err := io.ReadFull(random, u[:]); err != nil {
		return "", fmt.Errorf("admission: draw a grant id: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // the RFC 9562 variant
	h := hex.EncodeToString(u[:])
	return grantIDPrefix + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

// Sign signs claims with signer and returns the grant as a claimed stub
// carries it (proto2.SignedGrant, G-R27). Claims the daemon would refuse
// are an error, never a grant.
func Sign(ctx context.Context, signer Signer, c Claims) (proto2.SignedGrant, error) {
	statement, err := Statement(c)
	if err != nil {
		return proto2.SignedGrant{}, err
	}
	signature, err := signer.Sign(ctx, statement)
	if err != nil {
		return proto2.SignedGrant{}, fmt.Errorf("admission: sign grant with %s: %w", KeyID(signer), err)
	}
	return proto2.SignedGrant{
		GrantID: c.GrantID, JobID: c.JobID, Site: c.Site, User: c.User, Owner: c.Owner,
		Purpose: c.Purpose, Kind: c.Kind, Service: c.Service, IssuedAt: c.IssuedAt, Signature: signature,
	}, nil
}

// Verify reports whether grant's signature is publicKey's over the
// statement of its claims. It is the daemon's bad-signature check only;
// relayd uses it to check what it signs (and, later, what an external
// author returns).
func Verify(publicKey string, grant proto2.SignedGrant) bool {
	statement, err := Statement(ClaimsOf(grant))
	if err != nil {
		return false
	}
	return protocol.VerifyEd25519(publicKey, statement, grant.Signature)
}

// ClaimsOf is grant without its signature.
func ClaimsOf(g proto2.SignedGrant) Claims {
	return Claims{
		GrantID: g.GrantID, JobID: g.JobID, Site: g.Site, User: g.User, Owner: g.Owner,
		Purpose: g.Purpose, Kind: g.Kind, Service: g.Service, IssuedAt: g.IssuedAt,
	}
}
