package valkey

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// The pending device codes live beside the routing state, under the same
// hash-tagged prefix, so that a start on one replica and a poll on another
// meet (spec protocol-2 §5.7). store/lua/common/90_pairings.lua describes the four keys: the
// records by device code, and indexes by expiry, by device identity and by
// user code, so every operation is O(log n) and none walks every code but
// the few of one identity (StartPairingInput.PerDevice bounds them).
// Each is one script on the store clock; the two lookups change nothing
// but read the clock to judge expiry, so they run as ordinary scripts.

// pairingFormat is the pending pairing record format. It is the pairing
// records' own, apart from the job records', so that either can change
// without the other.
const pairingFormat = "1"

// Field positions of a pending pairing record. The device code is the
// record's hash field, not a field of the record.
const (
	pairingVersion = iota
	pairingUser
	pairingIdentity
	pairingExpires
	pairingSeq
	pairingDevice
	pairingLabel
	pairingPlatform
	pairingCapabilities
	// The fields below came later; a record of the first layout ends
	// before them and reads them as empty.
	pairingOrigin
	pairingKnown
	pairingApproved
	pairingFields
)

// pairingFirstFields is how many fields a record of the first layout
// has: one a relay wrote before it read origins stays readable.
const pairingFirstFields = pairingOrigin

// pairingFieldNames are the names the scripts give the record's fields.
var pairingFieldNames = [pairingFields]string{
	pairingVersion: "v", pairingUser: "user", pairingIdentity: "identity", pairingExpires: "expires",
	pairingSeq: "seq", pairingDevice: "device", pairingLabel: "label", pairingPlatform: "platform",
	pairingCapabilities: "caps", pairingOrigin: "origin", pairingKnown: "known", pairingApproved: "approved",
}

// Pairings returns the store's pending device codes, which share its
// client, prefix and clock.
func (s *Store) Pairings() store.Pairings { return pairings{s: s} }

type pairings struct{ s *Store }

var _ store.Pairings = pairings{}

// StartPairing implements store.Pairings.
func (p pairings) StartPairing(ctx context.Context, in store.StartPairingInput) (int64, error) {
	pending := in.Pending
	device, err := json.Marshal(pending.Device)
	if err != nil {
		return 0, fmt.Errorf("valkey store: %s: encoding device: %w", store.OpStartPairing, err)
	}
	c := p.s.newWrite(pending.Device.Identity, startPairingArgs{DeviceCode: pending.DeviceCode, UserCode: pending.UserCode,
		Identity: pending.Device.Identity, Device: string(device), Label: pending.Label, Platform: pending.Platform,
		Caps: string(pending.Capabilities), TTLMs: in.TTLMs, Capacity: in.Capacity, Origin: pending.Origin,
		Known: pending.KnownAtStart, PerDevice: in.PerDevice})
	parts, err := p.s.execWrite(ctx, c)
	if err != nil {
		return 0, err
	}
	if err := wantParts(store.OpStartPairing, parts, 1); err != nil {
		return 0, err
	}
	expiresAt, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("valkey store: %s: expiresAt %q: %w", store.OpStartPairing, parts[0], err)
	}
	return expiresAt, nil
}

// PairingByDeviceCode implements store.Pairings.
func (p pairings) PairingByDeviceCode(ctx context.Context, deviceCode string) (store.PendingPairing, bool, error) {
	return p.lookup(ctx, pairingByDeviceCodeArgs{DeviceCode: deviceCode})
}

// PairingByUserCode implements store.Pairings.
func (p pairings) PairingByUserCode(ctx context.Context, userCode string) (store.PendingPairing, bool, error) {
	return p.lookup(ctx, pairingByUserCodeArgs{UserCode: userCode})
}

// ApprovePairing implements store.Pairings.
func (p pairings) ApprovePairing(ctx context.Context, userCode, identity string) (store.PendingPairing, bool, error) {
	return p.lookup(ctx, approvePairingArgs{UserCode: userCode, Identity: identity})
}

// lookup runs a lookup script, whose reply is nil or {device code, record,
// the identity's live code count}.
func (p pairings) lookup(ctx context.Context, args opArgs) (store.PendingPairing, bool, error) {
	op := args.op()
	msg, err := p.s.exec(ctx, p.s.newCall(args))
	if err != nil {
		return store.PendingPairing{}, false, err
	}
	if msg.IsNil() {
		return store.PendingPairing{}, false, nil
	}
	parts, err := msg.AsStrSlice()
	if err != nil || len(parts) != 3 {
		return store.PendingPairing{}, false, fmt.Errorf("valkey store: %s: unexpected reply %v", op, msg)
	}
	pending, err := decodePairing(parts[0], parts[1])
	if err != nil {
		return store.PendingPairing{}, false, fmt.Errorf("valkey store: %s: %w", op, err)
	}
	if pending.LiveCodes, err = strconv.Atoi(parts[2]); err != nil {
		return store.PendingPairing{}, false, fmt.Errorf("valkey store: %s: live codes %q: %w", op, parts[2], err)
	}
	return pending, true, nil
}

// DropPairing implements store.Pairings.
func (p pairings) DropPairing(ctx context.Context, deviceCode string) error {
	_, err := p.s.execWrite(ctx, p.s.newCall(dropPairingArgs{DeviceCode: deviceCode}))
	return err
}

// decodePairing builds a pending pairing from its stored record.
func decodePairing(deviceCode, raw string) (store.PendingPairing, error) {
	f, err := unframe(raw)
	if err != nil || len(f) < pairingFirstFields || f[pairingVersion] != pairingFormat {
		return store.PendingPairing{}, fmt.Errorf("pending pairing: %w", errUnreadable)
	}
	expiresAt, err := strconv.ParseInt(f[pairingExpires], 10, 64)
	if err != nil {
		return store.PendingPairing{}, fmt.Errorf("pending pairing: expiresAt: %w", err)
	}
	var device protocol.PublicIdentity
	if err := json.Unmarshal([]byte(f[pairingDevice]), &device); err != nil {
		return store.PendingPairing{}, fmt.Errorf("pending pairing: device: %w", err)
	}
	pending := store.PendingPairing{
		DeviceCode: deviceCode, UserCode: f[pairingUser], Device: device,
		Label: f[pairingLabel], Platform: f[pairingPlatform], ExpiresAt: expiresAt,
	}
	if caps := f[pairingCapabilities]; caps != "" {
		pending.Capabilities = json.RawMessage(caps)
	}
	later := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	pending.Origin = later(pairingOrigin)
	pending.KnownAtStart = later(pairingKnown) == "1"
	pending.Approved = later(pairingApproved) == "1"
	return pending, nil
}
