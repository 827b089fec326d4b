package pairing

import (
	"encoding/json"
	"time"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// Timing and capacity (spec §5.3, §5.5). What a pending code is, when it
// dies and how a start is admitted are the store's contract
// (store.Pairings), written once there.
const (
	// CodeTTL is how long a pending code lives, PAIRING_CODE_TTL_MS.
	CodeTTL = 10 * time.Minute
	// PollInterval is the pollIntervalMs a start answer tells the daemon.
	PollInterval = 2 * time.Second
	// DefaultCapacity is how many live codes may be pending at once,
	// MAX_OUTSTANDING_PAIRINGS; --pairing-capacity overrides it.
	DefaultCapacity = 500
	// CodesPerDevice is how many live codes one device identity may have,
	// each started from another client address (a start from an address
	// that holds one replaces it). The reference keeps one per identity;
	// relayd keeps others' starts beside it, so that naming a public
	// identity cannot cancel its code (issue 27), and bounds them so that
	// naming it cannot fill the store either.
	CodesPerDevice = 4
)

// Details is what the approving side may learn of a pending pairing (the
// admin listener's answer, decision P2-D3): everything but the device code,
// which would let its holder collect the pairing.
type Details struct {
	UserCode     string                  `json:"userCode"`
	Device       protocol.PublicIdentity `json:"device"`
	Label        string                  `json:"label"`
	Platform     string                  `json:"platform"`
	Capabilities json.RawMessage         `json:"capabilities"`
	ExpiresAt    int64                   `json:"expiresAt"`
}

// DetailsOf returns p without its secret. Capabilities a start never
// stated read as an empty list, so the answer always holds an array.
func DetailsOf(p store.PendingPairing) Details {
	caps := p.Capabilities
	if len(caps) == 0 {
		caps = json.RawMessage("[]")
	}
	return Details{
		UserCode: p.UserCode, Device: p.Device, Label: p.Label, Platform: p.Platform,
		Capabilities: caps, ExpiresAt: p.ExpiresAt,
	}
}
