package ratelimit

import "context"

// Limit is one of the relay's rate limits whole: the limiter that decides
// a request charged on its own and, when the routing store keeps that
// limiter's buckets, their rate, so that a store operation can take a
// caller's charge within itself and spend from the very bucket the
// limiter would. Built by Stored or Apart, a Limit cannot pair a limiter
// with a rate or a store charge that disagrees with it.
//
// A Limit is in one of three states, each a question the codecs ask:
//
//   - no limit (the zero Limit): nothing is charged anywhere;
//   - stored: a call's store operation may take the charge (Stored says
//     the rate), and a call that never reaches one is charged through
//     the limiter, from the same bucket;
//   - apart: every request is charged through the limiter, in a call of
//     its own (ChargedApart), for the store cannot reach its buckets.
type Limit struct {
	limiter Limiter
	// stored is the rate of the limiter's buckets when the routing store
	// keeps them; disabled otherwise.
	stored Rate
}

// Stored is the limit of l, the limiter a routing store built beside its
// own state for rate (store/backend builds the relay's limiters so), whose
// buckets a store operation can then charge (store.Charge). A nil l is no
// limit, whatever the rate; an l with a disabled rate has no buckets the
// store knows of, and is charged apart.
func Stored(l Limiter, rate Rate) Limit {
	if l == nil {
		return Limit{}
	}
	return Limit{limiter: l, stored: rate}
}

// Apart is the limit of l, whose buckets the routing store does not keep:
// every request is charged through l in a call of its own. A nil l is no
// limit.
func Apart(l Limiter) Limit { return Limit{limiter: l} }

// Enabled reports whether the limit limits anything.
func (l Limit) Enabled() bool { return l.limiter != nil }

// Limiter is the limit's limiter; nil when it limits nothing.
func (l Limit) Limiter() Limiter { return l.limiter }

// Stored returns the rate of the limit's buckets, and true, when the
// routing store keeps them; false when there is nothing a store operation
// could charge (no limit, or a limit charged apart).
func (l Limit) Stored() (Rate, bool) {
	if l.limiter == nil || !l.stored.Enabled() {
		return Rate{}, false
	}
	return l.stored, true
}

// ChargedApart reports whether a caller must be charged through the
// limiter before its store operation, because that operation cannot take
// the charge: the limit is on, and its buckets are not the store's.
func (l Limit) ChargedApart() bool {
	_, stored := l.Stored()
	return l.limiter != nil && !stored
}

// Allow charges one request to key through the limiter. A limit that
// limits nothing allows every request.
func (l Limit) Allow(ctx context.Context, key string) (Decision, error) {
	if l.limiter == nil {
		return Decision{Allowed: true}, nil
	}
	return l.limiter.Allow(ctx, key)
}
