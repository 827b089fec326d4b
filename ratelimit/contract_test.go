package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/ratelimit/limitertest"
	"github.com/byollm/relayd/store/valkey"
)

func TestMemoryContract(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, rate ratelimit.Rate) (ratelimit.Limiter, func(time.Duration)) {
		c := clock.NewManual(time.Now())
		m, err := ratelimit.NewMemory(rate, c)
		require.NoError(t, err)
		return m, c.Advance
	})
}

// TestValkeyContract runs the suite on a real server, each case under a
// prefix of its own, with the store's clock lever pinned so that waits are
// exact: the limiter reads the same clock the routing store does.
func TestValkeyContract(t *testing.T) {
	srv := valkeytest.Shared(t)
	client := srv.Client(t)
	limitertest.Run(t, func(t *testing.T, rate ratelimit.Rate) (ratelimit.Limiter, func(time.Duration)) {
		st, err := valkey.NewFromClient(client, valkeytest.Prefix(t))
		require.NoError(t, err)
		require.NoError(t, st.PinClockForTest(t.Context()))
		l, err := ratelimit.NewValkey(client, st.Prefix(), rate)
		require.NoError(t, err)
		return l, func(d time.Duration) { require.NoError(t, st.AdvanceClockForTest(t.Context(), d)) }
	})
}
