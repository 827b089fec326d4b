package codec0

import (
	"context"

	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// caller is an authenticated daemon-plane caller.
type caller struct {
	// device is the projection's record of the runner, which its presence
	// was checked to match (RB-G7): who the runner is, for every store call.
	device projection.DeviceRecord
	// proj is the projection the call was authenticated under; handlers
	// decide with the same one, even if a reload lands meanwhile.
	proj *projection.Projection
	// consent is the owner's consent for the relay's site, looked up once.
	consent   projection.ConsentRecord
	consented bool
	// admit, while set, is the presence check and rate charge still owed
	// by a caller authenticated without them: the store operation that
	// stamps the caller checks them first (admission).
	admit *store.Admission
}

// admission hands over the caller's owed admission, once: it goes with
// the store operation that stamps the caller.
func (who *caller) admission() *store.Admission {
	a := who.admit
	who.admit = nil
	return a
}

// daemonRoute is one signed daemon endpoint, whatever its types.
type daemonRoute = codec.Route[*Codec, *caller, *protocol.Body]

// signed is the daemon endpoint decode reads and handle answers. Its store
// operation stamps the caller's presence (the Touch flag, or the
// heartbeat's own stamp).
func signed[Req, Resp any](decode func(*protocol.Body) (Req, error), handle func(*Codec, context.Context, *caller, Req) (Resp, error)) daemonRoute {
	return codec.Endpoint(decoded[Req], decode, handle)
}

// decoded refuses a body the endpoint's schema does not read, the caller
// stamped first.
func decoded[Req any](c *Codec, ctx context.Context, who *caller, _ Req, err error) error {
	if err != nil {
		return c.refuse(ctx, who, schemaRefusal())
	}
	return nil
}

// daemonPlane runs the daemon-plane auth pipeline (RB-A3, with relayd's RB-G7
// difference) and then the endpoint. From the consent check on, every
// call stamps the runner's presence (RB-G7): within the endpoint's own store
// operation, which saves a round trip, or, when the endpoint refuses
// before it, on its own first.
func (c *Codec) daemonPlane(ctx context.Context, req *codec.Request, route daemonRoute) (any, error) {
	who, err := c.authenticate(ctx, req)
	if err != nil {
		return nil, err
	}
	return route.Serve(ctx, c, who, req.Body)
}

// authenticate identifies and verifies a daemon-plane caller, in the
// reference's order, with relayd's rate limit once the signature checks.
//
// When the store keeps the rate buckets, a caller is first identified
// with its presence check and rate charge owed: left for its first store
// operation to check (its admission), in the order identify checks them,
// which saves a call each (TestOneStoreRoundTripPerDaemonCall). Whatever
// they answer is what checking them now would have, for every other step
// has passed. A caller refused that way is identified again with both
// checked now, for the projection alone cannot order its refusals.
func (c *Codec) authenticate(ctx context.Context, req *codec.Request) (*caller, error) {
	sig, ok := protocol.ParseSignature(req.Header, protocol.HeaderRunner)
	if !ok {
		return nil, protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgNotSigned)
	}
	if !c.env.RunnerLimit.ChargedApart() {
		if who, err := c.identify(ctx, sig, req, true); err == nil {
			return who, nil
		}
	}
	return c.identify(ctx, sig, req, false)
}

// identify runs authenticate's steps once the signature is parsed. With
// owe set it makes no store call: the presence check and the rate charge
// go to the caller's admission instead of being made in their place.
func (c *Codec) identify(ctx context.Context, sig protocol.Signature, req *codec.Request, owe bool) (*caller, error) {
	var (
		paired  store.Presence
		present = owe
	)
	if !owe {
		var err error
		if paired, present, err = c.env.Store.Presence(ctx, sig.CallerID); err != nil {
			return nil, storeError(store.OpPresence, err)
		}
	}
	proj := c.env.Projection()
	// A runner whose device record left the projection, or whose approved
	// keys or owner changed since it paired, is no longer anyone the relay
	// knows (RB-G7); pairing again takes up what the projection says now.
	dev, approved := proj.DeviceFor(sig.CallerID)
	if !present || !approved || (!owe && (dev.Device != paired.Device || dev.Owner != paired.Owner)) {
		return nil, protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgRunnerNotKnown)
	}
	if refusal := c.env.Verify(sig, req.Endpoint, req.Body, dev.Device.Identity); refusal != nil {
		return nil, refusal
	}
	who, key := &caller{device: dev, proj: proj}, codec.RunnerKey(dev.RunnerID)
	if owe {
		who.admit = &store.Admission{Paired: &store.Paired{Owner: dev.Owner, Device: dev.Device}, Charge: codec.StoreCharge(c.env.RunnerLimit, key)}
	} else if refusal := c.env.Charge(ctx, c.env.RunnerLimit, key); refusal != nil {
		// Charged only now, under the verified runner id: a stranger
		// naming someone else's runner cannot spend that runner's tokens.
		return nil, refusal
	}
	// A device the projection marks revoked is refused on every endpoint,
	// heartbeat included, as protocol "2" refuses it (spec P2-A7).
	if dev.Revoked {
		return nil, protocol.Refuse(protocol.CodeRevoked, protocol.MsgRevoked)
	}
	who.consent, who.consented = proj.ConsentFor(dev.Owner, c.env.SiteID)
	if !who.consented && req.Endpoint != "heartbeat" {
		return nil, protocol.Refuse(protocol.CodeRevoked, protocol.MsgRevoked)
	}
	return who, nil
}

// refuse is a refusal given before the endpoint's store operation ran,
// which would have stamped the caller: the stamp, with any admission the
// caller still owes, is a touch of its own first.
func (c *Codec) refuse(ctx context.Context, who *caller, refusal *protocol.Refusal) error {
	if _, err := c.env.Store.Touch(ctx, store.TouchInput{RunnerID: who.device.RunnerID, Admit: who.admission()}); err != nil {
		return storeError(store.OpTouch, err)
	}
	return refusal
}
