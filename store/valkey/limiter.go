package valkey

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
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
	c := call{op: opBucket, keys: append(append(make([]string, 0, len(s.keys)+1), s.keys...), BucketKey(s.prefix, key)), args: rateArgs(l.rate.Every, l.rate.Burst)}
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

// rateArgs is how a script reads a rate: microseconds between two
// requests, then requests when full.
func rateArgs(every time.Duration, burst int) []string {
	return []string{strconv.FormatInt(every.Microseconds(), 10), strconv.Itoa(burst)}
}

// admitted returns c with the admission a of runner's call: its arguments
// after the request id, and the bucket it may charge as the last key. A
// nil admission admits every call, and charges no bucket.
func (s *Store) admitted(c call, runner string, a *store.Admission) (call, error) {
	args := []string{runner, "0", "", "", "0", "0", "0", "0", "", "", "", "0", "", "0"}
	bucket := BucketKey(s.prefix, "")
	if a != nil && a.Paired != nil {
		device, err := json.Marshal(a.Paired.Device)
		if err != nil {
			return call{}, fmt.Errorf("valkey store: %s: encoding the admitted device: %w", c.op, err)
		}
		args[1], args[2], args[3] = "1", a.Paired.Owner, string(device)
	}
	if a != nil && a.Charge != nil {
		if a.Charge.Key == "" {
			return call{}, fmt.Errorf("valkey store: %s: %w", c.op, ratelimit.ErrEmptyKey)
		}
		rate := rateArgs(a.Charge.Every, a.Charge.Burst)
		args[4], args[5], args[6] = "1", rate[0], rate[1]
		bucket = BucketKey(s.prefix, a.Charge.Key)
		c.charged = true
	}
	if a != nil && a.Pair != nil {
		p := a.Pair
		device, err := json.Marshal(p.Device)
		if err != nil {
			return call{}, fmt.Errorf("valkey store: %s: encoding the paired device: %w", c.op, err)
		}
		copy(args[7:], []string{"1", p.Owner, string(device), string(p.Capabilities), flag(p.Capabilities != nil), string(p.Withheld), flag(p.Withheld != nil)})
	}
	c.args = slices.Concat(c.args[:admitAt(c.op)], args, c.args[admitAt(c.op):])
	c.keys = append(slices.Clip(c.keys), bucket)
	return c, nil
}

// admitAt is where an admission's arguments start in a call of op: after
// the request id of a remembering write.
func admitAt(op store.Op) int {
	if isRemembering(op) {
		return 1
	}
	return 0
}

// chargeFlag is the position of the charge flag among an admission's
// arguments (admitted).
const chargeFlag = 4

// uncharged is the charged call c without its charge: the admission's
// other checks still run, and no bucket is spent.
func uncharged(c call) call {
	c.args = slices.Clone(c.args)
	c.args[admitAt(c.op)+chargeFlag] = "0"
	c.charged = false
	return c
}
