package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/ratelimit/limitertest"
)

// The Valkey limiter runs the same suite from store/valkey's tests.
func TestMemoryContract(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, rate ratelimit.Rate) (ratelimit.Limiter, func(time.Duration)) {
		c := clock.NewManual(time.Now())
		m, err := ratelimit.NewMemory(rate, c)
		require.NoError(t, err)
		return m, c.Advance
	})
}
