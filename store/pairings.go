package store

import (
	"context"
	"encoding/json"

	"github.com/byollm/relayd/protocol"
)

// PendingPairing is one device-code pairing in progress (spec protocol-2
// §5.7): reachable by DeviceCode (poll), UserCode (approval) and
// Device.Identity. DeviceCode is a secret, but not enough on its own to
// collect a pairing: the device's public identity is public, so anyone
// may start a code for it, and only the code an operator approved
// (Approved), or a lone code started before its device was approved, may
// be collected (see the codec's poll).
type PendingPairing struct {
	DeviceCode string
	UserCode   string
	Device     protocol.PublicIdentity
	Label      string
	Platform   string
	// Capabilities are the start request's, as the codec validated them.
	Capabilities json.RawMessage
	// ExpiresAt is stamped by the store: its clock at start plus the TTL.
	ExpiresAt int64
	// Origin is the client address the start was charged to. A later
	// start of the same identity from the same origin replaces this code
	// (a daemon restarted mid-pairing); one from another origin leaves it.
	Origin string
	// KnownAtStart: the projection already approved Device when the code
	// was started, so no operator looked at this code before approving.
	KnownAtStart bool
	// Approved is set by ApprovePairing: an operator approved this very
	// code, by its user code. StartPairing ignores it.
	Approved bool
	// LiveCodes is set by the lookups: how many live codes Device.Identity
	// has, this one included. StartPairing ignores it.
	LiveCodes int
}

// StartPairingInput puts a new pending code.
type StartPairingInput struct {
	Pending PendingPairing // ExpiresAt, Approved and LiveCodes are ignored
	TTLMs   int64
	// Capacity is how many live codes may be pending at once.
	Capacity int
	// PerDevice is how many live codes one Device.Identity may have, each
	// from another origin; zero or less bounds them only by Capacity.
	PerDevice int
}

// Pairings holds the pending device codes every replica shares, so that a
// start on one replica and a poll on another meet. Every method is atomic,
// and expiry is judged on the store clock: a code dies at ExpiresAt.
type Pairings interface {
	// StartPairing purges expired codes and drops the pending codes of the
	// same Device.Identity and the same Origin (a restart replaces its own
	// code; the reference drops every code of the identity, spec §5.5).
	// It refuses with RefusedAtCapacity when the identity still has
	// PerDevice live codes (from other origins, which stay), or when
	// Capacity live codes remain (the replaced code stays gone). Otherwise
	// it stores the new code and returns the stamped ExpiresAt.
	StartPairing(ctx context.Context, in StartPairingInput) (int64, error)
	// PairingByDeviceCode returns the live code with that device code.
	PairingByDeviceCode(ctx context.Context, deviceCode string) (PendingPairing, bool, error)
	// PairingByUserCode returns the live code with exactly that user code
	// (the caller normalises it).
	PairingByUserCode(ctx context.Context, userCode string) (PendingPairing, bool, error)
	// ApprovePairing marks approved the first started live code with
	// exactly that user code and that device identity, and returns it;
	// false when there is none. Marking twice is no error.
	ApprovePairing(ctx context.Context, userCode, identity string) (PendingPairing, bool, error)
	// DropPairing spends a code: it deletes it and every other code of its
	// device identity, so that once a device has paired no other code of
	// its can be collected. Dropping an absent code is not an error.
	DropPairing(ctx context.Context, deviceCode string) error
}
