package codec2

import (
	"context"

	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// caller is an authenticated daemon-plane caller.
type caller struct {
	// device is the projection's record of the runner: who it is for
	// every store call, whatever its presence says (decision P2-D7).
	device projection.DeviceRecord
	// proj is the projection the call was authenticated under; handlers
	// decide with the same one, even if a reload lands meanwhile.
	proj *projection.Projection
	// admit, until the caller's first store call takes it, is what that
	// call owes: its presence written (and its rate charge, when the
	// store keeps the limiter's buckets), first.
	admit *store.Admission
	// skewMs is the signature's issuedAt less the relay clock, read as it
	// was verified: the device clock guard's d (grants.md G-R15).
	skewMs int64
}

// admission hands over what the caller's first store call owes, once.
func (who *caller) admission() *store.Admission {
	a := who.admit
	who.admit = nil
	return a
}

// daemonRoute is one signed daemon endpoint, whatever its types.
type daemonRoute = codec.Route[*Codec, *caller, []byte]

// signed is the daemon endpoint decode reads and handle answers, its store
// call carrying the caller's admission.
func signed[Req, Resp any](decode func([]byte) (Req, error), handle func(*Codec, context.Context, *caller, Req) (Resp, error)) daemonRoute {
	return codec.Endpoint(decoded[Req], decode, handle)
}

// decoded refuses a body the endpoint's schema does not read, the
// caller's presence written first.
func decoded[Req any](c *Codec, ctx context.Context, who *caller, _ Req, err error) error {
	if err != nil {
		return c.refuse(ctx, who, proto2.SchemaRefusal())
	}
	return nil
}

// daemonPlane authenticates the caller (§3.3, with decision P2-D7) and runs
// the endpoint, whose store call writes the caller's presence first
// (refuse does when the endpoint refuses before calling the store).
func (c *Codec) daemonPlane(ctx context.Context, req *codec.Request, route daemonRoute) (any, error) {
	who, err := c.authenticate(ctx, req)
	if err != nil {
		return nil, err
	}
	return route.Serve(ctx, c, who, req.Body.Raw())
}

// authenticate identifies and verifies a daemon-plane caller in the
// reference's order: signature present, runner known, signature valid,
// device not revoked. Unlike the reference, the projection alone says who
// a runner is (P2-D7): a runner whose device record is gone is not
// recognised whatever presence remains. The caller's presence is written
// by its first store call; with the limiter's buckets in the store, a
// caller who passes every other step owes that call its charge too: one
// round trip for all, and the charge still before anything is written.
func (c *Codec) authenticate(ctx context.Context, req *codec.Request) (*caller, error) {
	sig, ok := protocol.ParseSignature(req.Header, protocol.HeaderRunner)
	if !ok {
		return nil, proto2.NotSigned()
	}
	proj := c.env.Projection()
	dev, known := proj.DeviceFor(sig.CallerID)
	if !known {
		return nil, proto2.RunnerNotRecognised()
	}
	if refusal := c.env.Verify(sig, req.Endpoint, req.Body, dev.Device.Identity); refusal != nil {
		return nil, refusal
	}
	skew := sig.IssuedAt - c.env.NowMs()
	owed, key := &store.Admission{Pair: &store.PairInput{Proto: store.Proto2, Owner: dev.Owner, Device: dev.Device}}, codec.RunnerKey(dev.RunnerID)
	if !c.env.RunnerLimit.ChargedApart() && !dev.Revoked {
		owed.Charge = codec.StoreCharge(c.env.RunnerLimit, key)
		return &caller{device: dev, proj: proj, admit: owed, skewMs: skew}, nil
	}
	// Charged only now, under the verified runner id: a stranger naming
	// someone else's runner cannot spend that runner's tokens.
	if refusal := c.env.Charge(ctx, c.env.RunnerLimit, key); refusal != nil {
		return nil, refusal
	}
	if dev.Revoked {
		return nil, proto2.Revoked()
	}
	return &caller{device: dev, proj: proj, admit: owed, skewMs: skew}, nil
}

// refuse answers refusal, given before the endpoint's store call: the
// caller's presence is written first, what that call would have owed
// included, so that every authenticated call is seen whatever its answer.
func (c *Codec) refuse(ctx context.Context, who *caller, refusal *proto2.Refusal) error {
	if err := c.stamp(ctx, who); err != nil {
		return err
	}
	return refusal
}

// stamp writes the caller's presence as the projection has it, on the
// store clock, with what its first store call owes (nothing once that
// call ran). Presence is a cache (P2-D7): it is rebuilt whenever it is
// missing or out of date, and routes nothing.
func (c *Codec) stamp(ctx context.Context, who *caller) error {
	a := who.admission()
	if a == nil {
		return nil
	}
	in := *a.Pair
	in.RunnerID, in.Admit = who.device.RunnerID, &store.Admission{Charge: a.Charge}
	if _, err := c.env.Store.Pair(ctx, in); err != nil {
		return storeError(store.OpPair, err)
	}
	return nil
}
