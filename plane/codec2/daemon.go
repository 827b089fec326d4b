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
	// every store call, whatever its presence says (decision D7).
	device projection.DeviceRecord
	// proj is the projection the call was authenticated under; handlers
	// decide with the same one, even if a reload lands meanwhile.
	proj *projection.Projection
	// admit, while set, is the rate charge still owed by a caller
	// authenticated without it: the presence stamp charges it first.
	admit *store.Admission
}

// admission hands over the caller's owed admission, once: it goes with
// the store call that stamps the caller.
func (who *caller) admission() *store.Admission {
	a := who.admit
	who.admit = nil
	return a
}

// daemonRoute is one signed daemon endpoint, whatever its types.
type daemonRoute interface {
	// stampsItself reports whether the endpoint writes the caller's
	// presence itself once its request decodes (the heartbeat, with what
	// the daemon offers), so that one store call does for both.
	stampsItself() bool
	serve(ctx context.Context, c *Codec, who *caller, body []byte) (any, error)
}

// daemonEndpoint is a signed daemon endpoint: decode reads its body and
// handle answers the decoded request.
type daemonEndpoint[Req, Resp any] struct {
	decode func([]byte) (Req, error)
	handle func(c *Codec, ctx context.Context, who *caller, req Req) (Resp, error)
	stamps bool
}

// signed is the daemon endpoint decode reads and handle answers; stamps
// says whether handle writes the caller's presence itself.
func signed[Req, Resp any](decode func([]byte) (Req, error), handle func(*Codec, context.Context, *caller, Req) (Resp, error), stamps bool) daemonRoute {
	return daemonEndpoint[Req, Resp]{decode: decode, handle: handle, stamps: stamps}
}

func (e daemonEndpoint[Req, Resp]) stampsItself() bool { return e.stamps }

func (e daemonEndpoint[Req, Resp]) serve(ctx context.Context, c *Codec, who *caller, body []byte) (any, error) {
	req, err := e.decode(body)
	if err != nil {
		return nil, c.refuse(ctx, who, e.stamps, proto2.SchemaRefusal())
	}
	return answer(e.handle(c, ctx, who, req))
}

// daemonPlane authenticates the caller (§3.3, with decision D7), stamps
// its presence, and runs the endpoint.
func (c *Codec) daemonPlane(ctx context.Context, req *codec.Request, route daemonRoute) (any, error) {
	who, err := c.authenticate(ctx, req)
	if err != nil {
		return nil, err
	}
	if !route.stampsItself() {
		if err := c.stamp(ctx, who, store.PairInput{}); err != nil {
			return nil, err
		}
	}
	return route.serve(ctx, c, who, req.Body.Raw())
}

// authenticate identifies and verifies a daemon-plane caller in the
// reference's order: signature present, runner known, signature valid,
// device not revoked. Unlike the reference, the projection alone says who
// a runner is (D7): a runner whose device record is gone is not
// recognised whatever presence remains. With the limiter's buckets in the
// store, a caller who passes every other step owes its charge to its
// first store call, which stamps it: one call for both, and the charge
// still before anything is written.
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
	if c.env.RunnerCharge != nil && !dev.Revoked {
		return &caller{device: dev, proj: proj, admit: &store.Admission{Charge: c.env.RunnerCharge(dev.RunnerID)}}, nil
	}
	// Charged only now, under the verified runner id: a stranger naming
	// someone else's runner cannot spend that runner's tokens.
	if refusal := c.env.ChargeRunner(ctx, codec.RunnerKey(dev.RunnerID)); refusal != nil {
		return nil, refusal
	}
	if dev.Revoked {
		return nil, proto2.Revoked()
	}
	return &caller{device: dev, proj: proj}, nil
}

// refuse answers refusal; when the endpoint would have written the
// caller's presence itself (owed), it is stamped first, so that every
// authenticated call is seen whatever its answer.
func (c *Codec) refuse(ctx context.Context, who *caller, owed bool, refusal *proto2.Refusal) error {
	if owed {
		if err := c.stamp(ctx, who, store.PairInput{}); err != nil {
			return err
		}
	}
	return refusal
}

// stamp writes the caller's presence as the projection has it, with the
// capabilities and withheld kinds of in when given, stamped on the store
// clock. Presence is a cache (D7): it is rebuilt whenever it is missing
// or out of date, and routes nothing.
func (c *Codec) stamp(ctx context.Context, who *caller, in store.PairInput) error {
	in.RunnerID, in.Owner, in.Device, in.Admit = who.device.RunnerID, who.device.Owner, who.device.Device, who.admission()
	if _, err := c.env.Store.Pair(ctx, in); err != nil {
		return storeError(store.OpPair, err)
	}
	return nil
}
