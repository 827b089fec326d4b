package codec

import (
	"context"
	"errors"

	"github.com/byollm/relayd/store"
)

// Route is one endpoint of a codec C, whatever its request and answer
// types: it answers an authenticated caller Who from In, the body or the
// request its decoder reads. A codec keeps a table of them per plane.
type Route[C, Who, In any] interface {
	Serve(ctx context.Context, c C, who Who, in In) (any, error)
}

// Admit is a codec's check of a decoded request before its handler runs:
// given what decode returned, it answers the refusal of a request that did
// not decode or may not go on (with whatever the caller owes settled
// first), or nil to go on.
type Admit[C, Who, Req any] func(c C, ctx context.Context, who Who, req Req, decodeErr error) error

// Endpoint is the route decode reads, admit lets through and handle
// answers.
func Endpoint[C, Who, In, Req, Resp any](admit Admit[C, Who, Req], decode func(In) (Req, error), handle func(C, context.Context, Who, Req) (Resp, error)) Route[C, Who, In] {
	return endpoint[C, Who, In, Req, Resp]{admit: admit, decode: decode, handle: handle}
}

type endpoint[C, Who, In, Req, Resp any] struct {
	admit  Admit[C, Who, Req]
	decode func(In) (Req, error)
	handle func(C, context.Context, Who, Req) (Resp, error)
}

func (e endpoint[C, Who, In, Req, Resp]) Serve(ctx context.Context, c C, who Who, in In) (any, error) {
	req, err := e.decode(in)
	if refusal := e.admit(c, ctx, who, req, err); refusal != nil {
		return nil, refusal
	}
	return Answer(e.handle(c, ctx, who, req))
}

// SiteRequest is a decoded site-plane request, which names the site it
// says it acts for: a codec's site routes check that it is the signer.
type SiteRequest interface{ ForSite() string }

// Answer passes on a typed answer, or its error without the zero value.
func Answer[T any](v T, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return v, nil
}

// Refuse answers refusal to a site whose call refuses before its store
// write, the owed charge taken first: over its rate, the site is told so
// instead, as when it was charged first.
func (s *SiteCaller) Refuse(ctx context.Context, e *Env, refusal Refusal) error {
	if limited := s.Pay(ctx, e); limited != nil {
		return limited
	}
	return refusal
}

// StoreError is a codec's answer to an error from store operation op: an
// admission's rate charge refused as the limiter refuses, another store
// refusal as the codec's table maps it (nil for a code the protocol does
// not know), and anything else a store failure.
func StoreError(op store.Op, err error, table func(store.Op, *store.Refusal) Refusal) error {
	var refused *store.Refusal
	if errors.As(err, &refused) {
		if refused.Code == store.RefusedRateLimited {
			return RateLimited(refused.RetryAfter)
		}
		if refusal := table(op, refused); refusal != nil {
			return refusal
		}
	}
	return Failed(op, err)
}
