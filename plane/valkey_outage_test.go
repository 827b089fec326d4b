package plane_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/metrics"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/valkey"
)

// A real Valkey going away: the relay answers 503 with Retry-After and
// fails readiness, then recovers by itself when the server is back, with
// the routing state (AOF on) intact.
func TestValkeyOutageIs503AndTheRelayRecoversByItself(t *testing.T) {
	srv := valkeytest.StartWith(t, valkeytest.Options{Persist: true})
	if !srv.CanRestart() {
		t.Skip("the server did not come from a binary this test can stop and restart")
	}
	own := func(t *testing.T) (store.RoutingStore, func(time.Duration)) {
		s, err := valkey.New(t.Context(), valkey.Options{Addrs: srv.Addrs, KeyPrefix: valkeytest.Prefix(t), DialTimeout: time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s, func(time.Duration) { t.Fatal("this test does not move the store clock") }
	}
	b := setup(t, own, nil)
	d := b.paired(t, "alice")
	b.enqueue(t, b.stub(t, "survivor", "alice"))
	c := b.claimOne(t, d, "survivor")

	srv.Stop(t)
	resp, err := d.Do(b.ctx, "claim", claimBody(t, "runner_alice"))
	require.NoError(t, err)
	requireAnswer(t, resp, http.StatusServiceUnavailable, `{"error":"server-error","message":"the relay's routing store is unavailable; try again","retryAfter":1}`)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	ready := b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/readyz"})
	require.Equal(t, http.StatusServiceUnavailable, ready.Status)

	srv.Restart(t)
	require.Eventually(t, func() bool {
		return b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/readyz"}).Status == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "readiness comes back without restarting the relay")

	hb, err := d.Heartbeat(b.ctx, []protocol.LeaseRef{lease(c)})
	require.NoError(t, err)
	require.Empty(t, hb.Lost, "the grant survived the restart")
	require.Equal(t, c.Lease.ID, b.pending(t, "survivor").LeaseID)
}

// Issue 23 item 6: a Valkey restart shorter than the store deadline never
// reaches a daemon as a 503 (the published daemon drops a job whose fetch
// or result fails). A fetch and a result, each sent while the server is
// stopped, are answered 200 once it is back; the result takes effect
// once: the daemon's replay of it is a duplicate, and the site reads one
// result. The retries show in relayd_store_retries_total.
func TestAShortValkeyRestartIsNotA503(t *testing.T) {
	srv := valkeytest.StartWith(t, valkeytest.Options{Persist: true})
	if !srv.CanRestart() {
		t.Skip("the server did not come from a binary this test can stop and restart")
	}
	m := metrics.New()
	retried := make(chan struct{}, 1)
	own := func(t *testing.T) (store.RoutingStore, func(time.Duration)) {
		s, err := valkey.New(t.Context(), valkey.Options{Addrs: srv.Addrs, KeyPrefix: valkeytest.Prefix(t), DialTimeout: time.Second,
			OnRetry: func(op store.Op, cause string) {
				m.StoreRetried(op, cause)
				select {
				case retried <- struct{}{}:
				default:
				}
			}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s, func(time.Duration) { t.Fatal("this test does not move the store clock") }
	}
	b := setup(t, own, nil)
	d := b.paired(t, "alice")
	b.enqueue(t, b.stub(t, "restarted", "alice"))
	c := b.claimOne(t, d, "restarted")
	b.seal(t, c, `{"prompt":"p"}`)

	// acrossRestart sends call with the server stopped, restarts it once
	// the store has retried, and returns the call's error.
	acrossRestart := func(call func() error) error {
		srv.Stop(t)
		select {
		case <-retried:
		default:
		}
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case <-retried:
		case err := <-done:
			t.Fatalf("answered during the outage: %v", err)
		}
		srv.Restart(t)
		return <-done
	}
	var fetched protocol.FetchResponse
	require.NoError(t, acrossRestart(func() (err error) {
		fetched, err = d.Fetch(b.ctx, c.ID, c.Lease.ID)
		return err
	}), "the fetch is answered 200 across the restart")
	plain, err := peer.Open(d.Keys(), fetched.Envelope, peer.Expectation{JobID: c.ID, Direction: protocol.DirectionPayload,
		SenderIdentity: b.keys["site"].Public().Identity})
	require.NoError(t, err)
	require.JSONEq(t, `{"prompt":"p"}`, string(plain))

	env, err := peer.Seal(d.Keys(), b.keys["site"].Public(), c.ID, protocol.DirectionResult, c.DeadlineAt, json.RawMessage(`{"outcome":{"text":"r"}}`))
	require.NoError(t, err)
	var res protocol.ResultResponse
	require.NoError(t, acrossRestart(func() (err error) {
		res, err = d.Result(b.ctx, c.ID, c.Lease.ID, env, protocol.DispositionOK)
		return err
	}), "the result is answered 200 across the restart")
	require.Equal(t, protocol.ResultResponse{Accepted: true, State: "done"}, res)
	replay, err := d.Result(b.ctx, c.ID, c.Lease.ID, env, protocol.DispositionOK)
	require.NoError(t, err)
	require.Equal(t, protocol.ResultResponse{Duplicate: true, State: "done"}, replay, "a replay is a duplicate")
	results, err := b.site.Results(b.ctx)
	require.NoError(t, err)
	require.Len(t, results.Jobs, 1, "one result")

	scrape := httptest.NewRecorder()
	m.Handler().ServeHTTP(scrape, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, err := io.ReadAll(scrape.Result().Body)
	require.NoError(t, err)
	for _, op := range []string{"fetch", "result"} {
		require.Contains(t, string(body), `relayd_store_retries_total{cause="connect",op="`+op+`"}`, "the retries are counted")
	}
}
