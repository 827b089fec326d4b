package codec2

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/byollm/relayd/pairing"
	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// Poll answers (§5.4); the relay never says denied.
const (
	statusPending  = "pending"
	statusExpired  = "expired"
	statusApproved = "approved"
)

// pair serves the unsigned pair endpoint (§5.1): the body is the first of
// a device-code start, a poll and a fixture exchange whose schema it
// meets. The plane has charged it to the client's address already.
func (c *Codec) pair(ctx context.Context, r *codec.Request) (any, error) {
	req, err := c.decode.Pair(r.Body.Raw())
	if err != nil {
		return nil, proto2.PairSchemaRefusal()
	}
	switch {
	case req.Start != nil:
		return codec.Answer(c.pairStart(ctx, *req.Start, r.ClientAddr))
	case req.Poll != nil:
		return codec.Answer(c.pairPoll(ctx, *req.Poll))
	}
	return codec.Answer(c.pairFixture(ctx, *req.Fixture))
}

// pairStart hands out a device code and a user code for a keypair (§5.3).
// The code lives in the store, so any replica answers its poll. A start is
// unsigned and a device identity is public, so it replaces only the codes
// of its identity started from the same client address (a daemon
// restarted mid-pairing sends a fresh start); one from another address
// gets a code of its own beside them (issue 27, RD-D13).
func (c *Codec) pairStart(ctx context.Context, req proto2.PairStartRequest, clientAddr string) (proto2.PairStartResponse, error) {
	var none proto2.PairStartResponse
	if c.opts.VerificationURL == "" || c.env.Pairings == nil {
		return none, proto2.NoDeviceCode()
	}
	if !req.Device.IsConsistent() {
		return none, proto2.InconsistentDevice()
	}
	codes, err := pairing.NewCodes(c.env.Random)
	if err != nil {
		return none, fmt.Errorf("pair start: %w", err)
	}
	caps, err := proto2.Marshal(nonNil(req.Capabilities))
	if err != nil {
		return none, fmt.Errorf("pair start: encode capabilities: %w", err)
	}
	_, known := c.env.Projection().DeviceByFingerprint(req.Device.Identity)
	expiresAt, err := c.env.Pairings.StartPairing(ctx, store.StartPairingInput{
		Pending: store.PendingPairing{
			DeviceCode: codes.DeviceCode, UserCode: codes.UserCode, Device: req.Device,
			Label: req.Daemon.Label, Platform: req.Daemon.Platform, Capabilities: json.RawMessage(caps),
			Origin: clientAddr, KnownAtStart: known,
		},
		TTLMs:     pairing.CodeTTL.Milliseconds(),
		Capacity:  c.opts.PairingCapacity,
		PerDevice: pairing.CodesPerDevice,
	})
	if err != nil {
		return none, storeError(store.OpStartPairing, err)
	}
	return proto2.PairStartResponse{
		DeviceCode: codes.DeviceCode, UserCode: codes.UserCode, VerificationURL: c.opts.VerificationURL,
		ExpiresAt: expiresAt, PollIntervalMs: pairing.PollInterval.Milliseconds(),
	}, nil
}

// pairPoll tells a daemon whether its code was approved: once the
// projection holds a device record with the code's keys and the code may
// collect it (collectable), the poll records the pairing and spends the
// code with every other code of the device (§5.4).
func (c *Codec) pairPoll(ctx context.Context, req proto2.PairPollRequest) (proto2.PairPollResponse, error) {
	var none proto2.PairPollResponse
	if c.env.Pairings == nil {
		return none, proto2.NoDeviceCode()
	}
	pending, ok, err := c.env.Pairings.PairingByDeviceCode(ctx, req.DeviceCode)
	if err != nil {
		return none, storeError(store.OpPairingByDeviceCode, err)
	}
	if !ok {
		return proto2.PairPollResponse{Status: statusExpired}, nil
	}
	proj := c.env.Projection()
	approved, ok := proj.DeviceByFingerprint(pending.Device.Identity)
	if !ok || !collectable(pending) {
		return proto2.PairPollResponse{Status: statusPending}, nil
	}
	sites := sitesByKeyID(proj.SitesFor(approved.Owner))
	// The keys the projection approved, as the fixture exchange stores
	// them (RB-G7); the capabilities the start said, and nothing withheld.
	if _, err := c.env.Store.Pair(ctx, store.PairInput{
		Proto: store.Proto2, RunnerID: approved.RunnerID, Owner: approved.Owner, Device: approved.Device,
		Capabilities: pending.Capabilities, Withheld: json.RawMessage("[]"),
	}); err != nil {
		return none, storeError(store.OpPair, err)
	}
	if err := c.env.Pairings.DropPairing(ctx, req.DeviceCode); err != nil {
		return none, storeError(store.OpDropPairing, err)
	}
	return proto2.PairPollResponse{Status: statusApproved, RunnerID: approved.RunnerID, Owner: approved.Owner, Sites: &sites,
		ControlPlanePublic: c.opts.Grants.PublicKeyFor(approved.GrantKey)}, nil
}

// collectable reports whether an approved device's pending code may
// collect its pairing. Anyone may start a code for a public identity, so
// the approval belongs to the code an operator approved by its user code
// (pairing.Approve marks it). A code nobody marked still collects in the
// one case where no one else could have: it is its device's only live
// code and was started before the projection approved the device, the
// flow of a fixture written by hand after reading the code. The reference
// lets any code of an approved device collect (§5.4).
func collectable(p store.PendingPairing) bool {
	return p.Approved || (p.LiveCodes == 1 && !p.KnownAtStart)
}

// pairFixture is the fixture exchange (§5.2): a device the projection
// approved for its owner, whose owner consents to any site, pairs at once.
func (c *Codec) pairFixture(ctx context.Context, req proto2.PairFixtureRequest) (proto2.PairFixtureResponse, error) {
	var none proto2.PairFixtureResponse
	if !req.Device.IsConsistent() {
		return none, proto2.InconsistentDevice()
	}
	proj := c.env.Projection()
	sites := proj.SitesFor(req.Owner)
	if len(sites) == 0 {
		return none, proto2.NoConsent()
	}
	approved, ok := proj.DeviceByFingerprint(req.Device.Identity)
	if !ok {
		return none, proto2.DeviceNotApproved()
	}
	if approved.Owner != req.Owner {
		return none, proto2.DeviceOtherOwner()
	}
	// Store the keys the projection approved, never the ones presented:
	// pairing is unsigned (RB-G7).
	if _, err := c.env.Store.Pair(ctx, store.PairInput{
		Proto: store.Proto2, RunnerID: approved.RunnerID, Owner: approved.Owner, Device: approved.Device,
		Capabilities: json.RawMessage("[]"), Withheld: json.RawMessage("[]"),
	}); err != nil {
		return none, storeError(store.OpPair, err)
	}
	return proto2.PairFixtureResponse{ProtocolVersion: proto2.Version, RunnerID: approved.RunnerID, Sites: sitesByKeyID(sites),
		ControlPlanePublic: c.opts.Grants.PublicKeyFor(approved.GrantKey)}, nil
}
