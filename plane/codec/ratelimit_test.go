package codec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
)

// A store operation charges the bucket the limit's own limiter keeps, at
// its rate, and nothing for a limit it cannot reach.
func TestStoreChargeIsTheLimitersOwnBucket(t *testing.T) {
	rate := ratelimit.Rate{Every: time.Second, Burst: 3}
	l, err := ratelimit.NewMemory(rate, clock.NewManual(time.Now()))
	require.NoError(t, err)
	require.Equal(t, &store.Charge{Key: "site:s", Every: time.Second, Burst: 3}, StoreCharge(ratelimit.Stored(l, rate), SiteKey("s")))
	require.Nil(t, StoreCharge(ratelimit.Apart(l), SiteKey("s")))
	require.Nil(t, StoreCharge(ratelimit.Limit{}, SiteKey("s")))
}

// A caller over its rate is refused with the wait rounded up to whole
// seconds; a limit of nothing never refuses.
func TestChargeRefusesACallerOverItsRate(t *testing.T) {
	l, err := ratelimit.NewMemory(ratelimit.Rate{Every: 1500 * time.Millisecond, Burst: 1}, clock.NewManual(time.Now()))
	require.NoError(t, err)
	env := &Env{}
	limit := ratelimit.Stored(l, ratelimit.Rate{Every: 1500 * time.Millisecond, Burst: 1})
	require.Nil(t, env.Charge(t.Context(), limit, RunnerKey("r")))
	refusal := env.Charge(t.Context(), limit, RunnerKey("r"))
	require.NotNil(t, refusal)
	status, _, retryAfter := refusal.Wire()
	require.Equal(t, 429, status)
	require.Equal(t, int64(2), retryAfter)
	require.Nil(t, env.Charge(t.Context(), ratelimit.Limit{}, RunnerKey("r")))
}
