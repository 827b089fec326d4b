package backend_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store/backend"
)

var (
	oncePerHour = ratelimit.Rate{Every: time.Hour, Burst: 1}
	off         = ratelimit.Rate{}
)

// allowsOnce checks l lets one request of a caller through, then refuses.
func allowsOnce(t *testing.T, l ratelimit.Limiter) {
	t.Helper()
	require.NotNil(t, l)
	d, err := l.Allow(t.Context(), "runner:a")
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = l.Allow(t.Context(), "runner:a")
	require.NoError(t, err)
	require.False(t, d.Allowed)
}

func TestMemoryBackend(t *testing.T) {
	b, err := backend.Open(t.Context(), backend.Options{Kind: backend.Memory, Clock: clock.System{}, RateLimit: oncePerHour, SiteRateLimit: off})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Store.Close() })
	require.NoError(t, b.Store.Ping(t.Context()))
	allowsOnce(t, b.RateLimit)
	require.Nil(t, b.SiteRateLimit, "a disabled rate gives no limiter")
}

// Two backends on one Valkey prefix, as two replicas open them, charge a
// caller to one bucket.
func TestValkeyBackendsShareBuckets(t *testing.T) {
	srv := valkeytest.Shared(t)
	o := backend.Options{Kind: backend.Valkey, Valkey: backend.ValkeyOptions{Addrs: srv.Addrs, Prefix: valkeytest.Prefix(t)}, SiteRateLimit: oncePerHour}
	var limiters []ratelimit.Limiter
	for range 2 {
		b, err := backend.Open(t.Context(), o)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Store.Close() })
		require.Nil(t, b.RateLimit)
		limiters = append(limiters, b.SiteRateLimit)
	}
	allowsOnce(t, limiters[0])
	d, err := limiters[1].Allow(t.Context(), "runner:a")
	require.NoError(t, err)
	require.False(t, d.Allowed, "the other replica's limiter saw the same bucket")
}

func TestUnknownBackend(t *testing.T) {
	_, err := backend.Open(t.Context(), backend.Options{Kind: "sqlite"})
	require.ErrorContains(t, err, `unknown store "sqlite"`)
}

func TestARateThatCannotBeKeptIsRefused(t *testing.T) {
	_, err := backend.Open(t.Context(), backend.Options{Kind: backend.Memory, Clock: clock.System{}, RateLimit: ratelimit.Rate{Every: time.Second}})
	require.ErrorContains(t, err, "rate limit")
}
