// Package codec0 serves wire protocol "0": the reference relay's daemon
// and site planes (relay-behaviour.md RB-A3–RB-A15) with relayd's design
// differences (design.md §3). For each request it authenticates the
// caller, decodes the body strictly, runs the endpoint against the routing
// store and returns the answer's body or a refusal; transport, routing,
// version classification and writing are the plane's.
//
// Each endpoint is a function from a decoded, authenticated request to a
// response or an error. Every store error goes through one table (see
// refusals.go) that turns the store's refusals into this protocol's.
package codec0

import (
	"context"

	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/protocol"
)

// Codec is protocol "0"'s codec.
type Codec struct {
	env    *codec.Env
	daemon map[string]daemonRoute
	site   map[string]siteRoute
}

var _ codec.Codec = (*Codec)(nil)

// New returns the codec serving from env.
func New(env *codec.Env) *Codec {
	return &Codec{
		env: env,
		daemon: map[string]daemonRoute{
			"claim":     signed((*protocol.Body).Claim, (*Codec).claim),
			"fetch":     signed((*protocol.Body).Fetch, (*Codec).fetch),
			"result":    signed((*protocol.Body).Result, (*Codec).result),
			"heartbeat": signed((*protocol.Body).Heartbeat, (*Codec).heartbeat),
			"release":   signed((*protocol.Body).Release, (*Codec).release),
		},
		site: map[string]siteRoute{
			"enqueue": forSite(fromBody((*protocol.Body).Enqueue), (*Codec).enqueue),
			"payload": forSite(fromBody((*protocol.Body).Payload), (*Codec).payload),
			"cancel":  forSite(fromBody((*protocol.Body).Cancel), (*Codec).cancel),
			"pending": forSite(fromQuery, (*Codec).pending),
			"results": forSite(fromQuery, (*Codec).results),
		},
	}
}

// Serve implements codec.Codec. The plane routes only the endpoints every
// version has, so the final not-found is a guard, not a path a caller
// can reach.
func (c *Codec) Serve(ctx context.Context, req *codec.Request) (any, error) {
	switch req.Plane {
	case codec.Daemon:
		if req.Endpoint == "pair" {
			return codec.Answer(c.pair(ctx, req.Body))
		}
		if route, ok := c.daemon[req.Endpoint]; ok {
			return c.daemonPlane(ctx, req, route)
		}
	case codec.Site:
		if route, ok := c.site[req.Endpoint]; ok {
			return c.sitePlane(ctx, req, route)
		}
	}
	return nil, protocol.NotFoundPath()
}

func schemaRefusal() *protocol.Refusal {
	return protocol.Refuse(protocol.CodeBadRequest, protocol.MsgSchema)
}

// nonNil keeps an empty list an empty JSON array rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
