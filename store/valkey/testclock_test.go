package valkey

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
)

// Issue 12 finding 8: a production store's clock is Valkey TIME, whatever
// anyone writes at the test clock key. Both lever shapes (an offset and a
// pin) are written raw, as an intruder with write access to Valkey could,
// and a claim's lease expiry still falls within TIME readings taken around
// it.
func TestProductionStoreIgnoresTheClockKey(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	ctx := t.Context()
	s, err := NewFromClient(client, valkeytest.Prefix(t))
	require.NoError(t, err)
	mustEnqueue(t, s, "offset", "pinned")

	const leaseMs = 30_000
	for _, lever := range []string{"86400000", "@1000"} {
		require.NoError(t, client.Do(ctx, client.B().Set().Key(ClockKey(s.prefix)).Value(lever).Build()).Error())
		before := serverTime(t, client)
		got := mustClaim(t, s, "r1", 1)
		after := serverTime(t, client)
		require.Len(t, got, 1, "lever %q", lever)
		require.GreaterOrEqual(t, got[0].Lease.ExpiresAt, before+leaseMs, "lever %q moved the clock", lever)
		require.LessOrEqual(t, got[0].Lease.ExpiresAt, after+leaseMs, "lever %q moved the clock", lever)
	}
	now, err := s.Now(ctx)
	require.NoError(t, err)
	require.InDelta(t, serverTime(t, client), now, float64(time.Minute.Milliseconds()), "Now is TIME, not the lever")
}

// TestClockOf refuses a production store rather than hand out a clock
// that writes a key its scripts would ignore.
func TestClockHelpersFailOnAProductionStore(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	s, err := NewFromClient(client, valkeytest.Prefix(t))
	require.NoError(t, err)
	clock, err := TestClockOf(s)
	require.ErrorIs(t, err, errNoTestClock)
	require.Nil(t, clock)
	n, err := client.Do(t.Context(), client.B().Exists().Key(ClockKey(s.prefix)).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "no clock key was written")
}

// The scripts a production store runs cannot name the lever: the key is
// not declared in their header and no code reads it; only the scripts of a
// store opened for tests do. The limiter passes it only in test mode.
func TestProductionScriptsHaveNoClockLever(t *testing.T) {
	prod, err := loadScripts()
	require.NoError(t, err)
	test, err := buildScripts(true)
	require.NoError(t, err)
	for _, op := range scripted() {
		require.NotContains(t, prod[op].source, "K.clock", "%s reads the clock lever", op)
		require.NotContains(t, prod[op].source, "clock = KEYS[", "%s declares the clock lever", op)
		if strings.Contains(prod[op].source, "clock_now()") || strings.Contains(prod[op].source, "clock_us()") {
			require.Contains(t, test[op].source, "GET', K.clock", "%s in test mode lacks the lever", op)
		}
	}
	require.NotContains(t, declaredKeys(false), "clock")
	require.Contains(t, declaredKeys(true), "clock")

	require.NotContains(t, prod[opBucket].source, "K.clock", "a production limiter reads no lever")
	s, err := NewFromClient(nil, valkeytest.Prefix(t))
	require.NoError(t, err)
	for _, k := range s.keys {
		require.NotEqual(t, ClockKey(s.prefix), k)
	}
}
