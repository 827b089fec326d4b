package store

import (
	"context"
	"encoding/json"

	"github.com/byollm/relayd/protocol"
)

// PendingPairing is one device-code pairing in progress (spec protocol-2
// §5.7): reachable by DeviceCode (poll), UserCode (approval) and
// Device.Identity (one code per keypair). DeviceCode is a secret: whoever
// holds it collects the pairing once the device is approved.
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
}

// StartPairingInput puts a new pending code.
type StartPairingInput struct {
	Pending PendingPairing // ExpiresAt is ignored: the store stamps it
	TTLMs   int64
	// Capacity is how many live codes may be pending at once.
	Capacity int
}

// Pairings holds the pending device codes every replica shares, so that a
// start on one replica and a poll on another meet. Every method is atomic,
// and expiry is judged on the store clock: a code dies at ExpiresAt.
type Pairings interface {
	// StartPairing purges expired codes, drops any pending code of the
	// same Device.Identity, then stores the new one unless Capacity live
	// codes remain (RefusedAtCapacity; the replaced code stays gone). It
	// returns the stamped ExpiresAt.
	StartPairing(ctx context.Context, in StartPairingInput) (int64, error)
	// PairingByDeviceCode returns the live code with that device code.
	PairingByDeviceCode(ctx context.Context, deviceCode string) (PendingPairing, bool, error)
	// PairingByUserCode returns the live code with exactly that user code
	// (the caller normalises it).
	PairingByUserCode(ctx context.Context, userCode string) (PendingPairing, bool, error)
	// DropPairing deletes a code; dropping an absent one is not an error.
	DropPairing(ctx context.Context, deviceCode string) error
}
