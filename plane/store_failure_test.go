package plane_test

// What callers see when the store cannot answer: a retryable JSON 503, and
// readiness failing, rather than a dropped connection or a half-done write.

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// outage wraps a store and, while down, fails the calls a relay makes.
type outage struct {
	store.RoutingStore
	down atomic.Bool
}

var errDown = errors.New("store is down")

func (o *outage) Claim(ctx context.Context, in store.ClaimInput) ([]protocol.ClaimedStub, error) {
	if o.down.Load() {
		return nil, errDown
	}
	return o.RoutingStore.Claim(ctx, in)
}

func (o *outage) Enqueue(ctx context.Context, in store.EnqueueInput) (store.EnqueueResult, error) {
	if o.down.Load() {
		return store.EnqueueResult{}, errDown
	}
	return o.RoutingStore.Enqueue(ctx, in)
}

func (o *outage) Ping(ctx context.Context) error {
	if o.down.Load() {
		return errDown
	}
	return o.RoutingStore.Ping(ctx)
}

func TestStoreOutageIsARetryableJSON503AndNotReady(t *testing.T) {
	wrap := func(s store.RoutingStore) store.RoutingStore { return &outage{RoutingStore: s} }
	eachStore(t, &setupOpts{WrapStore: wrap}, func(t *testing.T, b *bundle) {
		o := b.store.(*outage)
		d := b.paired(t, "alice")
		o.down.Store(true)

		const unavailable = `{"error":"server-error","message":"the relay's routing store is unavailable; try again","retryAfter":1}`
		resp, err := d.Do(b.ctx, "claim", claimBody(t, "runner_alice"))
		require.NoError(t, err)
		requireAnswer(t, resp, 503, unavailable)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
		resp = siteDo(b.ctx, t, b.site, http.MethodPost, "enqueue", enqueueBody(t, siteMain, b.stub(t, "job-1", "alice")))
		requireAnswer(t, resp, 503, unavailable)

		ready := b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/readyz"})
		require.Equal(t, 503, ready.Status)
		health := b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/healthz"})
		require.Equal(t, 200, health.Status, "the process is alive")

		o.down.Store(false)
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		b.claimOne(t, d, "job-1")
	})
}
