package valkey

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// TestResultsListingReusesDecodingsOnlyOfUnchangedBytes: a poll may reuse
// what the previous poll decoded, but what it returns is the store's state
// now, and no caller can change what another is given.
func TestResultsListingReusesDecodingsOnlyOfUnchangedBytes(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	mustEnqueue(t, s, "a", "b")
	for _, c := range mustClaim(t, s, "r1", 2) {
		require.NoError(t, s.Payload(ctx, store.PayloadInput{JobID: c.ID, SiteID: testSite, Envelope: env(protocol.DirectionPayload, c.ID)}))
		_, err := s.Fetch(ctx, leaseOf(c))
		require.NoError(t, err)
		_, err = s.Result(ctx, store.ResultInput{LeaseInput: leaseOf(c), Envelope: env(protocol.DirectionResult, c.ID), Disposition: "ok"})
		require.NoError(t, err)
	}
	first, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Len(t, first, 2)
	want := first[0].Clone()

	// A caller scribbling on its listing changes nobody else's.
	first[0].Result.Ciphertext = "scribbled"
	first[0].ClaimedBy.Owner = "mallory"
	for range 2 {
		again, err := s.Results(ctx, testSite)
		require.NoError(t, err)
		require.Equal(t, want, again[0])
		again[0].Result.Ciphertext = "scribbled on a reused decoding"
		again[0].ClaimedBy.Owner = "mallory"
	}

	// A changed record (a done job cancelled) and changed result bytes are
	// decoded afresh.
	_, err = s.Cancel(ctx, store.CancelInput{JobID: "a", SiteID: testSite})
	require.NoError(t, err)
	other, err := json.Marshal(env(protocol.DirectionResult, "rewritten"))
	require.NoError(t, err)
	require.NoError(t, s.client.Do(ctx, s.client.B().Hset().Key(s.key("result")).FieldValue().FieldValue(jobKey(testSite, "b"), string(other)).Build()).Error())
	now, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.True(t, now[0].Cancelled)
	require.Equal(t, "ct-rewritten", now[1].Result.Ciphertext)
	require.Equal(t, "ct-a", now[0].Result.Ciphertext)
}
