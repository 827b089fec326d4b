// Package limitertest is the behaviour every ratelimit.Limiter must show.
// Each implementation runs it from its own tests with Run, so that the
// in-process and the Valkey limiter cannot drift apart.
package limitertest

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/ratelimit"
)

// NewLimiter returns a fresh limiter of rate that shares no bucket with any
// other, and a function moving its clock forward. Between calls to advance
// the clock must stand still, so that the suite can assert exact waits.
type NewLimiter func(t *testing.T, rate ratelimit.Rate) (l ratelimit.Limiter, advance func(time.Duration))

// Run runs every case against limiters from newLimiter.
func Run(t *testing.T, newLimiter NewLimiter) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newLimiter)
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, newLimiter NewLimiter)
}{
	{"a full bucket allows Burst at once and then names the wait for one token", func(t *testing.T, newLimiter NewLimiter) {
		l, _ := newLimiter(t, ratelimit.Rate{Every: 100 * time.Millisecond, Burst: 3})
		for range 3 {
			allowed(t, l, "k")
		}
		refused(t, l, "k", 100*time.Millisecond)
	}},
	{"a refusal takes no token", func(t *testing.T, newLimiter NewLimiter) {
		l, advance := newLimiter(t, ratelimit.Rate{Every: time.Second, Burst: 2})
		allowed(t, l, "k")
		allowed(t, l, "k")
		for range 5 {
			refused(t, l, "k", time.Second)
		}
		advance(time.Second)
		allowed(t, l, "k")
		refused(t, l, "k", time.Second)
	}},
	{"the wait shrinks as time passes", func(t *testing.T, newLimiter NewLimiter) {
		l, advance := newLimiter(t, ratelimit.Rate{Every: time.Second, Burst: 1})
		allowed(t, l, "k")
		advance(400 * time.Millisecond)
		refused(t, l, "k", 600*time.Millisecond)
		advance(600 * time.Millisecond)
		allowed(t, l, "k")
	}},
	{"tokens come back one per Every, in part", func(t *testing.T, newLimiter NewLimiter) {
		l, advance := newLimiter(t, ratelimit.Rate{Every: 100 * time.Millisecond, Burst: 4})
		for range 4 {
			allowed(t, l, "k")
		}
		advance(250 * time.Millisecond)
		allowed(t, l, "k")
		allowed(t, l, "k")
		refused(t, l, "k", 50*time.Millisecond)
	}},
	{"an idle bucket fills up to Burst and no further", func(t *testing.T, newLimiter NewLimiter) {
		l, advance := newLimiter(t, ratelimit.Rate{Every: 10 * time.Millisecond, Burst: 3})
		for range 3 {
			allowed(t, l, "k")
		}
		advance(time.Hour)
		for range 3 {
			allowed(t, l, "k")
		}
		refused(t, l, "k", 10*time.Millisecond)
	}},
	{"each key is its own bucket, whatever it spells", func(t *testing.T, newLimiter NewLimiter) {
		l, _ := newLimiter(t, ratelimit.Rate{Every: time.Minute, Burst: 1})
		keys := []string{"runner:a", "runner:b", "site:a", "addr:192.0.2.1", "addr:2001:db8::/64",
			"runner:{other-tag}", "runner:with space", "site:ünïcode", "runner:" + strings.Repeat("x", 2000)}
		for _, k := range keys {
			allowed(t, l, k)
		}
		for _, k := range keys {
			refused(t, l, k, time.Minute)
		}
	}},
	{"concurrent requests never take more than the bucket holds", func(t *testing.T, newLimiter NewLimiter) {
		l, _ := newLimiter(t, ratelimit.Rate{Every: time.Hour, Burst: 10})
		var wg sync.WaitGroup
		var granted atomic.Int32
		for range 50 {
			wg.Go(func() {
				d, err := l.Allow(t.Context(), "k")
				if err == nil && d.Allowed {
					granted.Add(1)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int32(10), granted.Load())
	}},
	{"an empty key is an error, not a shared bucket", func(t *testing.T, newLimiter NewLimiter) {
		l, _ := newLimiter(t, ratelimit.Rate{Every: time.Second, Burst: 1})
		_, err := l.Allow(t.Context(), "")
		require.Error(t, err)
	}},
}

func allowed(t *testing.T, l ratelimit.Limiter, key string) {
	t.Helper()
	d, err := l.Allow(t.Context(), key)
	require.NoError(t, err)
	require.Equal(t, ratelimit.Decision{Allowed: true}, d, "key %.40q", key)
}

func refused(t *testing.T, l ratelimit.Limiter, key string, wait time.Duration) {
	t.Helper()
	d, err := l.Allow(t.Context(), key)
	require.NoError(t, err)
	require.Equal(t, ratelimit.Decision{RetryAfter: wait}, d, "key %.40q", key)
}

// Allower charges one request to key through the limiter of a rate that
// limiterOf returns (a store's own, whose buckets its admissions share)
// and reports whether it was allowed, or else the wait: the store
// contract's view of a store's limiter.
func Allower(limiterOf func(ratelimit.Rate) (ratelimit.Limiter, error)) func(t *testing.T, key string, every time.Duration, burst int) (bool, time.Duration) {
	return func(t *testing.T, key string, every time.Duration, burst int) (bool, time.Duration) {
		l, err := limiterOf(ratelimit.Rate{Every: every, Burst: burst})
		require.NoError(t, err)
		d, err := l.Allow(t.Context(), key)
		require.NoError(t, err)
		return d.Allowed, d.RetryAfter
	}
}
