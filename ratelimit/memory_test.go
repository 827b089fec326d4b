package ratelimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
)

func TestMemoryForgetsBucketsThatAreFullAgain(t *testing.T) {
	c := clock.NewManual(time.Now())
	m, err := NewMemory(Rate{Every: 10 * time.Millisecond, Burst: 5}, c)
	require.NoError(t, err)
	for i := range 100 {
		_, err := m.Allow(t.Context(), "addr:"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		require.NoError(t, err)
	}
	require.Equal(t, 100, m.size())
	// One token each was taken; after one Every every bucket is full
	// again, and the next pass forgets them all but the new caller.
	c.Advance(50 * time.Millisecond)
	_, err = m.Allow(t.Context(), "new")
	require.NoError(t, err)
	require.Equal(t, 1, m.size())
}

func TestNewMemoryRefusesARateThatCannotBeKept(t *testing.T) {
	_, err := NewMemory(Rate{}, clock.System{})
	require.ErrorIs(t, err, ErrDisabled)
	_, err = NewMemory(Rate{Every: time.Second}, clock.System{})
	require.ErrorContains(t, err, "burst 0")
	_, err = NewMemory(Rate{Every: time.Nanosecond, Burst: 1}, clock.System{})
	require.ErrorContains(t, err, "microsecond")
}
