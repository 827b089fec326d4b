package valkey

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/store"
)

// A daemon call that checks its runner's pairing and then stamps its
// presence reads the presence once: the check costs no read the stamp
// does not already make, for a claim and a touch alike.
func TestACheckedCallReadsItsPresenceOnce(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	pinClock(t, s)
	ctx := t.Context()
	_, err := s.Pair(ctx, store.PairInput{RunnerID: "r1", Owner: "alice", Device: testDevice})
	require.NoError(t, err)
	paired := &store.Admission{Paired: &store.Paired{Owner: "alice", Device: testDevice}}

	hgets := func(call func(admit *store.Admission) error, admit *store.Admission) int {
		t.Helper()
		require.NoError(t, s.client.Do(ctx, s.client.B().ConfigResetstat().Build()).Error())
		require.NoError(t, call(admit))
		return commandCalls(t, s, "hget")
	}
	calls := map[string]func(admit *store.Admission) error{
		"claim": func(admit *store.Admission) error {
			in := claimInput("r1", 1)
			in.Touch, in.Admit = true, admit
			_, err := s.Claim(ctx, in)
			return err
		},
		"touch": func(admit *store.Admission) error {
			_, err := s.Touch(ctx, store.TouchInput{RunnerID: "r1", Admit: admit})
			return err
		},
	}
	for name, call := range calls {
		require.Equal(t, hgets(call, nil), hgets(call, paired), "%s: the pairing check read the presence a second time", name)
	}
}
