package valkey

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
)

// opBucket takes a request from one rate bucket: a Limiter's whole call.
const opBucket store.Op = "bucket"

// Limiter is a ratelimit.Limiter keeping its buckets in the store's
// Valkey, under the store's key prefix, and deciding each request in one
// script on the store's clock. Replicas sharing the server and prefix
// share every bucket, and an admission (store.Admission) charging the
// same key and rate spends from the same one. It is safe for concurrent
// use.
type Limiter struct {
	store *Store
	rate  ratelimit.Rate
}

var _ ratelimit.Limiter = (*Limiter)(nil)

// Limiter returns a limiter of rate whose buckets live beside this store's
// routing state, on its client and clock. A disabled rate is refused: a
// relay without a limit has no limiter at all.
func (s *Store) Limiter(rate ratelimit.Rate) (ratelimit.Limiter, error) {
	if err := rate.Validate(); err != nil {
		return nil, err
	}
	if !rate.Enabled() {
		return nil, ratelimit.ErrDisabled
	}
	return &Limiter{store: s, rate: rate}, nil
}

// BucketKey is the Valkey key of the bucket of a caller key under prefix.
func BucketKey(prefix, key string) string { return prefix + "ratelimit:" + key }

// Allow implements ratelimit.Limiter.
func (l *Limiter) Allow(ctx context.Context, key string) (ratelimit.Decision, error) {
	if key == "" {
		return ratelimit.Decision{}, ratelimit.ErrEmptyKey
	}
	s := l.store
	c := s.newCall(bucketArgs{Every: l.rate.Every.Microseconds(), Burst: l.rate.Burst})
	c.keys = append(slices.Clip(c.keys), BucketKey(s.prefix, key))
	msg, err := s.exec(ctx, c)
	if err != nil {
		return ratelimit.Decision{}, fmt.Errorf("ratelimit: %w", err)
	}
	reply, err := msg.AsIntSlice()
	if err != nil || len(reply) != 2 {
		return ratelimit.Decision{}, fmt.Errorf("ratelimit: valkey: unexpected reply %v", msg)
	}
	if reply[0] == 1 {
		return ratelimit.Decision{Allowed: true}, nil
	}
	return ratelimit.Decision{RetryAfter: time.Duration(reply[1]) * time.Microsecond}, nil
}

// admitted returns c with the admission a of runner's call: its
// arguments (admissionArgs) after the request id, and the bucket it may
// charge as the last key. A nil admission admits every call, and charges
// no bucket. A rate travels as the microseconds between two requests,
// then the requests when full.
func (s *Store) admitted(c call, runner string, a *store.Admission) (call, error) {
	sc := s.scripts[c.op]
	if sc.admit == nil {
		return call{}, fmt.Errorf("valkey store: %s: checks no admission", c.op)
	}
	args := admissionArgs{Runner: runner}
	bucket := BucketKey(s.prefix, "")
	if a != nil && a.Paired != nil {
		device, err := json.Marshal(a.Paired.Device)
		if err != nil {
			return call{}, fmt.Errorf("valkey store: %s: encoding the admitted device: %w", c.op, err)
		}
		args.Paired, args.Owner, args.Device = true, a.Paired.Owner, string(device)
	}
	if a != nil && a.Charge != nil {
		if a.Charge.Key == "" {
			return call{}, fmt.Errorf("valkey store: %s: %w", c.op, ratelimit.ErrEmptyKey)
		}
		args.Charge, args.Every, args.Burst = true, a.Charge.Every.Microseconds(), a.Charge.Burst
		bucket = BucketKey(s.prefix, a.Charge.Key)
		c.charged = true
		c.chargeAt = sc.admitAt + sc.admit.pos("charge")
	}
	if a != nil && a.Pair != nil {
		p := a.Pair
		device, err := json.Marshal(p.Device)
		if err != nil {
			return call{}, fmt.Errorf("valkey store: %s: encoding the paired device: %w", c.op, err)
		}
		args.Pair, args.PairOwner, args.PairDevice = true, p.Owner, string(device)
		args.Caps, args.CapsGiven = string(p.Capabilities), p.Capabilities != nil
		args.Withheld, args.WithheldGiven = string(p.Withheld), p.Withheld != nil
	}
	if c.err == nil {
		c.args = slices.Concat(c.args[:sc.admitAt], sc.admit.pack(nil, args), c.args[sc.admitAt:])
	}
	c.keys = append(slices.Clip(c.keys), bucket)
	c.unadmitted = false
	return c, nil
}

// uncharged is the charged call c without its charge: the admission's
// other checks still run, and no bucket is spent.
func uncharged(c call) call {
	c.args = slices.Clone(c.args)
	c.args[c.chargeAt] = flag(false)
	c.charged = false
	return c
}
