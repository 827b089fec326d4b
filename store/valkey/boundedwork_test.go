package valkey

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
)

// storedJobs counts the job records in the store.
func storedJobs(t *testing.T, s *Store) int64 {
	t.Helper()
	n, err := s.client.Do(t.Context(), s.client.B().Hlen().Key(s.key("job")).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// Issue 12 finding 4: a claim behind an expired backlog settled up to
// 4,096 jobs it stepped over on top of its sweep share (46,000 commands
// at 200k expired jobs). Now one claim settles at most its budget, and
// claims alone still work through the backlog to the live job behind it.
func TestClaimSettlesAtMostItsBudget(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	pinClock(t, s)
	const backlog = 5000 // more than the old step-over budget
	fill(t, s, "old", "alice", 0, backlog)
	advance(t, s, 25*time.Hour)
	mustEnqueue(t, s, "live")
	require.EqualValues(t, backlog+1, storedJobs(t, s))

	before := storedJobs(t, s)
	require.Empty(t, mustClaim(t, s, "r1", 1), "the live job is behind jobs this claim may not settle")
	settled := before - storedJobs(t, s)
	require.Positive(t, settled, "a claim takes its share of the backlog")
	require.LessOrEqual(t, settled, int64(claimSettleBudget))

	for claims := 1; ; claims++ {
		require.Less(t, claims, backlog, "claims make no progress through the backlog")
		before = storedJobs(t, s)
		got := mustClaim(t, s, "r1", 1)
		require.LessOrEqual(t, before-storedJobs(t, s), int64(claimSettleBudget))
		if len(got) > 0 {
			require.Equal(t, []string{"live"}, claimedIDs(got))
			break
		}
	}
	require.EqualValues(t, 1, storedJobs(t, s), "the claims dropped every expired job")
}
