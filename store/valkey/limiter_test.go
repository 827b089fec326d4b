package valkey_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	vk "github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/ratelimit/limitertest"
	"github.com/byollm/relayd/store/valkey"
)

// limiterOn builds a limiter of rate on a store under prefix on client,
// and returns it with the store's test clock.
func limiterOn(t *testing.T, client vk.Client, prefix string, rate ratelimit.Rate) (*valkey.TestClock, ratelimit.Limiter) {
	t.Helper()
	st, err := valkey.NewFromClientForTest(client, prefix)
	require.NoError(t, err)
	l, err := st.Limiter(rate)
	require.NoError(t, err)
	clock, err := valkey.TestClockOf(st)
	require.NoError(t, err)
	return clock, l
}

// TestLimiterContract runs the limiter suite on a real server, each case
// under a prefix of its own, with the store's clock lever pinned so that
// waits are exact: the limiter reads the same clock the routing store does.
func TestLimiterContract(t *testing.T) {
	srv := valkeytest.Shared(t)
	client := srv.Client(t)
	limitertest.Run(t, func(t *testing.T, rate ratelimit.Rate) (ratelimit.Limiter, func(time.Duration)) {
		clock, l := limiterOn(t, client, valkeytest.Prefix(t), rate)
		require.NoError(t, clock.Pin(t.Context()))
		return l, func(d time.Duration) { require.NoError(t, clock.Advance(t.Context(), d)) }
	})
}

// An idle bucket must not stay behind: its key expires when the bucket
// would be full again, and a refusal writes nothing.
func TestValkeyBucketExpiresWhenFullAgain(t *testing.T) {
	srv := valkeytest.Shared(t)
	client := srv.Client(t)
	prefix := valkeytest.Prefix(t)
	_, l := limiterOn(t, client, prefix, ratelimit.Rate{Every: time.Second, Burst: 3})
	key := valkey.BucketKey(prefix, "runner:a")

	pttl := func() int64 {
		ms, err := client.Do(t.Context(), client.B().Pttl().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		return ms
	}
	require.Equal(t, int64(-2), pttl(), "no key before the first request")
	for range 3 {
		d, err := l.Allow(t.Context(), "runner:a")
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	// Three tokens taken: full again in three seconds, so the key lives at
	// most that long.
	ttl := pttl()
	require.Greater(t, ttl, int64(2000))
	require.LessOrEqual(t, ttl, int64(3000))
	d, err := l.Allow(t.Context(), "runner:a")
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Greater(t, d.RetryAfter, time.Duration(0))
	require.LessOrEqual(t, d.RetryAfter, time.Second)
	require.LessOrEqual(t, pttl(), ttl, "a refusal does not extend the key")
}

// On Valkey's running TIME (no lever), waits are real and shrink. The
// rate is slow beside this process's scheduling on a loaded machine (a
// 50 ms rate once let a held-back test take two tokens in a row), and
// nothing is timed here: a refusal's wait is no longer than an earlier
// one's, a later refusal waits less than the first, and the token comes
// back once the time has passed.
func TestValkeyOnTheRunningClock(t *testing.T) {
	srv := valkeytest.Shared(t)
	const every = 3 * time.Second
	_, l := limiterOn(t, srv.Client(t), valkeytest.Prefix(t), ratelimit.Rate{Every: every, Burst: 1})
	d, err := l.Allow(t.Context(), "k")
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = l.Allow(t.Context(), "k")
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Positive(t, d.RetryAfter)
	require.LessOrEqual(t, d.RetryAfter, every)
	first, last, later := d.RetryAfter, d.RetryAfter, 0
	deadline := time.Now().Add(4 * every)
	for {
		require.False(t, time.Now().After(deadline), "the token never came back")
		time.Sleep(50 * time.Millisecond) // the poll's pace, not a wait for the token
		d, err := l.Allow(t.Context(), "k")
		require.NoError(t, err)
		if d.Allowed {
			break
		}
		require.LessOrEqual(t, d.RetryAfter, last, "a later refusal waits no longer")
		last, later = d.RetryAfter, later+1
	}
	if later > 0 { // none when this process was held back past the whole wait
		require.Less(t, last, first, "the wait shrank as the time passed")
	}
}

// A bucket and the clock lever share the prefix's hash tag, so the script
// runs on a cluster without a cross-slot error.
func TestValkeyOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start-up skipped in -short mode")
	}
	srv := valkeytest.StartCluster(t)
	client := srv.Client(t)
	clock, l := limiterOn(t, client, valkeytest.Prefix(t), ratelimit.Rate{Every: time.Second, Burst: 1})
	require.NoError(t, clock.Pin(t.Context()))
	for _, key := range []string{"runner:a", "site:b", "addr:192.0.2.7"} {
		d, err := l.Allow(t.Context(), key)
		require.NoError(t, err)
		require.True(t, d.Allowed, key)
		d, err = l.Allow(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, time.Second, d.RetryAfter, key)
	}
}

func TestValkeyThatCannotAnswerIsAnError(t *testing.T) {
	srv := valkeytest.Shared(t)
	client, err := vk.NewClient(vk.ClientOption{InitAddress: srv.Addrs, ForceSingleClient: true, DisableCache: true})
	require.NoError(t, err)
	_, l := limiterOn(t, client, valkeytest.Prefix(t), ratelimit.Rate{Every: time.Second, Burst: 1})
	client.Close()
	_, err = l.Allow(t.Context(), "k")
	require.ErrorContains(t, err, "ratelimit: valkey")
}

// A limiter's keys carry its store's prefix, so a prefix without a hash
// tag, which the store refuses, can hold no bucket either.
func TestLimiterNeedsAPrefixWithAHashTag(t *testing.T) {
	_, err := valkey.NewFromClient(nil, "relayd:")
	require.ErrorContains(t, err, "hash tag")
}

func TestLimiterRefusesARateThatCannotBeKept(t *testing.T) {
	st, err := valkey.NewFromClient(nil, valkeytest.Prefix(t))
	require.NoError(t, err)
	_, err = st.Limiter(ratelimit.Rate{})
	require.ErrorIs(t, err, ratelimit.ErrDisabled)
	_, err = st.Limiter(ratelimit.Rate{Every: time.Second})
	require.ErrorContains(t, err, "burst 0")
}
