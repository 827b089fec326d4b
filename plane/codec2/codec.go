// Package codec2 serves wire protocol "2" (the npm 0.1.1 packages): the
// daemon plane with device-code pairing, multi-site claims keyed by
// (site, id) and lease-first job resolution, and the site plane for every
// registered site (shared/spec/protocol-2.md §3-§5), with relayd's
// decisions P2-D1–P2-D11 (§10). Transport, routing, version classification and
// writing are the plane's, as for every codec.
//
// The vocabulary (request shapes, strict decoders, refusal bodies, the
// 6 MiB envelope rule, version ordering) is protocol/proto2's; routing
// rules are the store's; who may do what is the projection's. This
// package joins the three, one endpoint at a time.
package codec2

import (
	"context"

	"github.com/byollm/relayd/pairing"
	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// Options are protocol "2"'s own settings.
type Options struct {
	// VerificationURL is where a person approves a device code; empty
	// turns the device-code flow off (start answers 501).
	VerificationURL string
	// DaemonFloor is the oldest daemon version a heartbeat accepts; empty
	// for none.
	DaemonFloor string
	// UpdateOffer is the version offered to daemons as updateTo; empty
	// for none.
	UpdateOffer string
	// PairingCapacity is how many device codes may be pending at once;
	// zero is pairing.DefaultCapacity.
	PairingCapacity int
	// Limits bounds the bodies' open lists.
	Limits proto2.Limits
	// Grants, when set, makes relayd the grant author of the devices
	// whose records name a grant key (docs/grants.md); nil keeps decision
	// P2-D4 for every device.
	Grants *Grants
}

// Codec is protocol "2"'s codec.
type Codec struct {
	env    *codec.Env
	opts   Options
	decode proto2.Decoder
	daemon map[string]daemonRoute
	site   map[string]siteRoute
}

var _ codec.Codec = (*Codec)(nil)

// New returns the codec serving from env with opts; a PairingCapacity of
// zero is pairing.DefaultCapacity.
func New(env *codec.Env, opts Options) *Codec {
	if opts.PairingCapacity <= 0 {
		opts.PairingCapacity = pairing.DefaultCapacity
	}
	c := &Codec{env: env, opts: opts, decode: proto2.Decoder{Limits: opts.Limits}}
	d := c.decode
	// Every signed call writes the caller's presence within its own
	// store call (the heartbeat's with what the daemon offers), saving a
	// round trip.
	c.daemon = map[string]daemonRoute{
		"claim":     signed(d.Claim, (*Codec).claim),
		"fetch":     signed(d.Fetch, (*Codec).fetch),
		"result":    signed(d.Result, (*Codec).result),
		"heartbeat": signed(d.Heartbeat, (*Codec).heartbeat),
		"release":   signed(d.Release, (*Codec).release),
	}
	c.site = map[string]siteRoute{
		"enqueue": forSite(fromBody(d.Enqueue, func(r proto2.EnqueueRequest) enqueueRequest { return enqueueRequest(r) }), (*Codec).enqueue),
		"payload": forSite(fromBody(d.Payload, func(r proto2.PayloadRequest) payloadRequest { return payloadRequest(r) }), (*Codec).payload),
		"cancel":  forSite(fromBody(d.Cancel, func(r proto2.CancelRequest) cancelRequest { return cancelRequest(r) }), (*Codec).cancel),
		"pending": forSite(fromQuery, (*Codec).pending),
		"results": forSite(fromQuery, (*Codec).results),
	}
	return c
}

// Serve implements codec.Codec. The plane routes only the endpoints every
// version has, so the final not-found is a guard.
func (c *Codec) Serve(ctx context.Context, req *codec.Request) (any, error) {
	switch req.Plane {
	case codec.Daemon:
		if req.Endpoint == "pair" {
			return c.pair(ctx, req)
		}
		if route, ok := c.daemon[req.Endpoint]; ok {
			return c.daemonPlane(ctx, req, route)
		}
	case codec.Site:
		if route, ok := c.site[req.Endpoint]; ok {
			return c.sitePlane(ctx, req, route)
		}
	}
	return nil, proto2.NotFoundPath()
}

// nonNil keeps an empty list an empty JSON array rather than null, which
// the daemon's strict schemas refuse.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// keyID is a public identity's key id, or "" when its key does not decode.
func keyID(p protocol.PublicIdentity) string {
	id, _ := protocol.KeyIDOf(p.Identity)
	return id
}
