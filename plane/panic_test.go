package plane_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// panicky is a store whose claim panics, as a bug would.
type panicky struct{ store.RoutingStore }

func (panicky) Claim(context.Context, store.ClaimInput) ([]protocol.ClaimedStub, error) {
	panic("a bug in claim")
}

// A panic while serving is a logged JSON 500 on a connection that stays
// usable, never a dropped connection; the next request is served.
func TestRB_G26_PanicIsAJSON500AndTheRelayKeepsServing(t *testing.T) {
	wrap := func(s store.RoutingStore) store.RoutingStore { return panicky{s} }
	eachStore(t, &setupOpts{WrapStore: wrap}, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		resp, err := d.Do(b.ctx, "claim", claimBody(t, "runner_alice"))
		require.NoError(t, err)
		requireAnswer(t, resp, http.StatusInternalServerError, `{"error":"server-error","message":"internal error","retryAfter":1}`)
		require.Equal(t, "1", resp.Header.Get("Retry-After"), "header and body agree, in seconds")
		_, err = d.Heartbeat(b.ctx, nil)
		require.NoError(t, err)
	})
}
