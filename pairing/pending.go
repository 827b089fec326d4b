package pairing

import (
	"encoding/json"
	"time"

	"github.com/byollm/relayd/protocol"
)

// Timing and capacity (spec §5.3, §5.5).
const (
	// CodeTTL is how long a pending code lives, PAIRING_CODE_TTL_MS.
	CodeTTL = 10 * time.Minute
	// PollInterval is the pollIntervalMs a start answer tells the daemon.
	PollInterval = 2 * time.Second
	// DefaultCapacity is how many live codes may be pending at once,
	// MAX_OUTSTANDING_PAIRINGS; --pairing-capacity overrides it.
	DefaultCapacity = 500
)

// Pending is one device-code pairing in progress: what a store must keep
// (spec §5.7), reachable by DeviceCode (poll), UserCode (approval) and
// Device.Identity (one code per keypair). DeviceCode is a secret: whoever
// holds it collects the pairing once the device is approved.
type Pending struct {
	DeviceCode string
	UserCode   string
	Device     protocol.PublicIdentity
	Label      string
	Platform   string
	// Capabilities are the start request's, as the codec validated them;
	// an approved poll writes them into presence.
	Capabilities json.RawMessage
	// ExpiresAt is in epoch milliseconds, as on the wire.
	ExpiresAt int64
}

// ExpiresAt is when a code issued at now expires, in epoch milliseconds.
func ExpiresAt(now time.Time) int64 { return now.UnixMilli() + CodeTTL.Milliseconds() }

// Expired reports whether a code expiring at expiresAt is dead at now: it
// dies at expiresAt itself, not a millisecond later.
func Expired(expiresAt int64, now time.Time) bool { return expiresAt <= now.UnixMilli() }

// Live reports whether p can still be polled or approved at now.
func (p Pending) Live(now time.Time) bool { return !Expired(p.ExpiresAt, now) }

// Details is what the approving side may learn of a pending pairing (the
// admin listener's answer, decision D3): everything but the device code.
type Details struct {
	UserCode     string                  `json:"userCode"`
	Device       protocol.PublicIdentity `json:"device"`
	Label        string                  `json:"label"`
	Platform     string                  `json:"platform"`
	Capabilities json.RawMessage         `json:"capabilities"`
	ExpiresAt    int64                   `json:"expiresAt"`
}

// Details returns p without its secret.
func (p Pending) Details() Details {
	return Details{
		UserCode: p.UserCode, Device: p.Device, Label: p.Label, Platform: p.Platform,
		Capabilities: p.Capabilities, ExpiresAt: p.ExpiresAt,
	}
}

// Held is what the capacity rule needs to know of a stored code.
type Held struct {
	DeviceCode string
	Identity   string // Device.Identity, as it travels
	ExpiresAt  int64
}

// Held returns the part of p the capacity rule reads.
func (p Pending) Held() Held {
	return Held{DeviceCode: p.DeviceCode, Identity: p.Device.Identity, ExpiresAt: p.ExpiresAt}
}

// PutPlan is what a store must do to put a new code.
type PutPlan struct {
	// Remove lists the device codes to delete, expired ones and any of the
	// same keypair, in the order they were held. They go even when the
	// new code is refused.
	Remove []string
	// Stored is false when the store is at capacity: the answer is then
	// 429 and the new code is not kept.
	Stored bool
}

// PlanPut applies the reference's put (spec §5.5) to the codes a store
// holds: purge the expired ones, drop every code of the incoming keypair
// (one code per keypair, so a restarted connect replaces its code), and
// refuse when the remaining count is at least capacity. A capacity below
// one refuses everything.
func PlanPut(held []Held, incoming Held, now time.Time, capacity int) PutPlan {
	plan := PutPlan{Remove: []string{}}
	remaining := 0
	for _, h := range held {
		if Expired(h.ExpiresAt, now) || h.Identity == incoming.Identity {
			plan.Remove = append(plan.Remove, h.DeviceCode)
			continue
		}
		remaining++
	}
	plan.Stored = remaining < capacity
	return plan
}

// FindByUserCode returns the first live pending pairing whose user code is
// typed once normalised, the reference's byUserCode. It suits a store that
// can list its codes; others index by the normalised code.
func FindByUserCode(pending []Pending, typed string, now time.Time) (Pending, bool) {
	want := NormalizeUserCode(typed)
	for _, p := range pending {
		if p.UserCode == want && p.Live(now) {
			return p, true
		}
	}
	return Pending{}, false
}
