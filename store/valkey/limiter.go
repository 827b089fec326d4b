package valkey

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/ratelimit"
)

//go:embed bucket.lua
var bucketScript string

// Limiter is a ratelimit.Limiter keeping its buckets in the store's
// Valkey, under the store's key prefix, and deciding each request in one
// script on Valkey's TIME (moved by the test clock lever only on a store
// opened for tests). Replicas sharing
// the server and prefix share every bucket. It is safe for concurrent use.
type Limiter struct {
	client valkey.Client
	rate   ratelimit.Rate
	prefix string
	// clockKey is the test clock lever, '' on a production store.
	clockKey string
	script   *valkey.Lua
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
	l := &Limiter{
		client: s.client, rate: rate, prefix: s.prefix,
		// Not retryable: a retry after a lost reply would take a second
		// token, where a refusal to the caller costs it one retry.
		script: valkey.NewLuaScript(bucketScript),
	}
	if s.testClock {
		l.clockKey = ClockKey(s.prefix)
	}
	return l, nil
}

// BucketKey is the Valkey key of the bucket of a caller key under prefix.
func BucketKey(prefix, key string) string { return prefix + "ratelimit:" + key }

// Allow implements ratelimit.Limiter.
func (l *Limiter) Allow(ctx context.Context, key string) (ratelimit.Decision, error) {
	if key == "" {
		return ratelimit.Decision{}, ratelimit.ErrEmptyKey
	}
	keys := []string{BucketKey(l.prefix, key)}
	if l.clockKey != "" {
		keys = append(keys, l.clockKey)
	}
	args := []string{strconv.FormatInt(l.rate.Every.Microseconds(), 10), strconv.Itoa(l.rate.Burst)}
	reply, err := l.script.Exec(ctx, l.client, keys, args).AsIntSlice()
	if err != nil {
		return ratelimit.Decision{}, fmt.Errorf("ratelimit: valkey: %w", err)
	}
	if len(reply) != 2 {
		return ratelimit.Decision{}, fmt.Errorf("ratelimit: valkey: unexpected reply %v", reply)
	}
	if reply[0] == 1 {
		return ratelimit.Decision{Allowed: true}, nil
	}
	return ratelimit.Decision{RetryAfter: time.Duration(reply[1]) * time.Microsecond}, nil
}
