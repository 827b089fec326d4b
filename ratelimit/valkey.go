package ratelimit

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	storevalkey "github.com/byollm/relayd/store/valkey"
)

//go:embed bucket.lua
var bucketScript string

// Valkey is a Limiter keeping its buckets in Valkey, under the relay's
// hash-tagged key prefix, and deciding each request in one script on
// Valkey's TIME. Replicas sharing the server and prefix share every
// bucket. It is safe for concurrent use.
type Valkey struct {
	client   valkey.Client
	rate     Rate
	prefix   string
	clockKey string
	script   *valkey.Lua
}

var _ Limiter = (*Valkey)(nil)

// NewValkey returns a limiter of rate on client, with its keys under
// prefix (which must carry a hash tag, as the store's does, so that a
// bucket and the clock lever it reads share a slot). The caller keeps the
// client.
func NewValkey(client valkey.Client, prefix string, rate Rate) (*Valkey, error) {
	if err := storevalkey.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	if err := rate.Validate(); err != nil {
		return nil, err
	}
	if !rate.Enabled() {
		return nil, errDisabled
	}
	return &Valkey{
		client: client, rate: rate, prefix: prefix,
		clockKey: storevalkey.ClockKey(prefix),
		// Not retryable: a retry after a lost reply would take a second
		// token, where a refusal to the caller costs it one retry.
		script: valkey.NewLuaScript(bucketScript),
	}, nil
}

// Key is the Valkey key of the bucket of a caller key under prefix.
func Key(prefix, key string) string { return prefix + "ratelimit:" + key }

// Allow implements Limiter.
func (v *Valkey) Allow(ctx context.Context, key string) (Decision, error) {
	if key == "" {
		return Decision{}, errEmptyKey
	}
	keys := []string{Key(v.prefix, key), v.clockKey}
	args := []string{strconv.FormatInt(v.rate.Every.Microseconds(), 10), strconv.Itoa(v.rate.Burst)}
	reply, err := v.script.Exec(ctx, v.client, keys, args).AsIntSlice()
	if err != nil {
		return Decision{}, fmt.Errorf("ratelimit: valkey: %w", err)
	}
	if len(reply) != 2 {
		return Decision{}, fmt.Errorf("ratelimit: valkey: unexpected reply %v", reply)
	}
	if reply[0] == 1 {
		return Decision{Allowed: true}, nil
	}
	return Decision{RetryAfter: time.Duration(reply[1]) * time.Microsecond}, nil
}
