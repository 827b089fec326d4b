package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
)

// Each way of building a Limit answers the codecs' two questions (can a
// store operation take the charge, and at which rate) one way only.
func TestALimitIsOneOfThreeStates(t *testing.T) {
	rate := Rate{Every: time.Second, Burst: 2}
	l, err := NewMemory(rate, clock.NewManual(time.Now()))
	require.NoError(t, err)
	for _, tc := range []struct {
		name           string
		limit          Limit
		enabled, apart bool
		stored         Rate
	}{
		{name: "zero", limit: Limit{}},
		{name: "stored without a limiter", limit: Stored(nil, rate)},
		{name: "apart without a limiter", limit: Apart(nil)},
		{name: "stored", limit: Stored(l, rate), enabled: true, stored: rate},
		{name: "stored at a disabled rate", limit: Stored(l, Rate{}), enabled: true, apart: true},
		{name: "apart", limit: Apart(l), enabled: true, apart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.enabled, tc.limit.Enabled())
			require.Equal(t, tc.enabled, tc.limit.Limiter() != nil)
			require.Equal(t, tc.apart, tc.limit.ChargedApart())
			got, stored := tc.limit.Stored()
			require.Equal(t, tc.stored.Enabled(), stored)
			require.Equal(t, tc.stored, got)
		})
	}
}

func TestALimitOfNothingAllowsEveryRequest(t *testing.T) {
	for range 3 {
		d, err := Limit{}.Allow(context.Background(), "runner:r")
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	l, err := NewMemory(Rate{Every: time.Hour, Burst: 1}, clock.NewManual(time.Now()))
	require.NoError(t, err)
	limit := Apart(l)
	d, err := limit.Allow(context.Background(), "runner:r")
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = limit.Allow(context.Background(), "runner:r")
	require.NoError(t, err)
	require.False(t, d.Allowed, "the limiter's own bucket, empty after one")
	require.Equal(t, time.Hour, d.RetryAfter)
}
