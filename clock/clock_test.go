package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
)

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, clock.Sleep(ctx, time.Hour), context.Canceled)
	require.NoError(t, clock.Sleep(t.Context(), 0))
}

func TestManualAndOffsetClocks(t *testing.T) {
	start := time.UnixMilli(1_750_000_000_000)
	m := clock.NewManual(start)
	m.Advance(time.Second)
	require.Equal(t, start.Add(time.Second), m.Now())
	require.Equal(t, start.Add(time.Second).UnixMilli()+60_000, clock.UnixMilli(clock.Offset{Base: m, Delta: time.Minute}))
}
