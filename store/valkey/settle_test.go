package valkey

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// The settle keeps no memo (its entry in operations says alike): after its reply is lost,
// valkey-go's re-run answers what the first run did, the granted lease
// still current, and changes nothing (dropReply compares the whole store
// before and after the retry, a second of store time later).
func TestARetriedSettleAnswersAlikeWithoutAMemo(t *testing.T) {
	ctx := t.Context()
	h := newLossyStores(t)
	_, err := h.direct.Pair(ctx, store.PairInput{RunnerID: "drop-settler", Owner: "alice", Device: testDevice})
	require.NoError(t, err)
	enqueue2(t, h.direct, "granted-job", "refused-job")
	in := claimInput("drop-settler", 2)
	in.Proto, in.Hold = store.Proto2, true
	held, err := h.direct.Claim(ctx, in)
	require.NoError(t, err)
	require.Len(t, held, 2, "the unsealed cap is two")
	ref := func(c protocol.ClaimedStub) []protocol.LeaseRef {
		return []protocol.LeaseRef{{JobID: c.ID, LeaseID: c.Lease.ID}}
	}
	settle := store.SettleGrantsInput{RunnerID: "drop-settler", Granted: ref(held[0]), Refused: ref(held[1]), RetryAfterMs: 30_000}

	var got []protocol.LeaseRef
	require.NoError(t, h.dropReply(t, held[1].Lease.ID, func() (err error) {
		got, err = h.lossy.SettleGrants(ctx, settle)
		return err
	}))
	require.Equal(t, ref(held[0]), got, "the retry answers the granted lease, as the first run did")
	keys, err := h.direct.client.Do(ctx, h.direct.client.B().Keys().Pattern(globEscape(h.direct.prefix+memoKeyPrefix+string(store.OpSettleGrants))+"*").Build()).AsStrSlice()
	require.NoError(t, err)
	require.Empty(t, keys, "no memo of the settle")

	j, ok, err := h.direct.Job(ctx, testSite, "refused-job")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, store.Queued, j.State)
	require.Equal(t, []string{"drop-settler"}, j.RefusedBy, "refused once")
	pending, err := h.direct.Pending(ctx, testSite)
	require.NoError(t, err)
	require.Len(t, pending, 1, "only the granted job is listed")
	require.Equal(t, "granted-job", pending[0].ID)
}
