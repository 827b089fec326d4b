package plane_test

// Upstream's two-replicas cases (RB-F81–RB-F84): two relay handlers on real
// sockets, sharing one store or each holding its own.

import (
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/plane"
	"github.com/byollm/relayd/protocol"
)

func TestTwoReplicas_SharedStoreGrantsAJobToExactlyOneOfTwoConcurrentDaemons(t *testing.T) { // RB-F83
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		second := b.replica(t, b.store)
		daemons := []*peer.Daemon{b.paired(t, "alice"), b.pairedAt(t, "alice2", second)}

		for round := range 20 {
			id := "race-" + itoa(int64(round))
			b.enqueue(t, b.stub(t, id, "alice"))

			var wg sync.WaitGroup
			start := make(chan struct{})
			got := make([][]protocol.ClaimedStub, len(daemons))
			errs := make([]error, len(daemons))
			for i, d := range daemons {
				wg.Go(func() {
					<-start
					resp, err := d.Claim(b.ctx, []string{protocol.KindGenerate}, 8)
					got[i], errs[i] = resp.Jobs, err
				})
			}
			close(start)
			wg.Wait()

			winners := 0
			for i := range daemons {
				require.NoError(t, errs[i])
				winners += len(got[i])
			}
			require.Equal(t, 1, winners, "round %d: exactly one grant", round)
		}
	})
}

func TestTwoReplicas_SharedStoreShowsBothDaemonsToBothReplicas(t *testing.T) { // RB-F84
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		second := b.replica(t, b.store)
		b.paired(t, "alice")            // paired through the first replica
		b.pairedAt(t, "alice2", second) // and through the second

		// Each runner is recognised by the replica it never paired with.
		for _, c := range []struct{ name, runner, url string }{{"alice", "runner_alice", second}, {"alice2", "runner_alice2", b.url}} {
			d := b.daemonAt(t, c.name, c.url, c.runner)
			_, err := d.Heartbeat(b.ctx, nil)
			require.NoError(t, err, "%s through the other replica", c.runner)
		}
		people, err := b.store.Runners(b.ctx, 0)
		require.NoError(t, err)
		require.Len(t, people, 2)
	})
}

func TestTwoReplicas_SeparateStoresShareNothing(t *testing.T) { // RB-F81, RB-F82
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		own, _ := b.newStore(t)
		second := b.replica(t, own)
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		b.claimOne(t, d, "job-1")

		// The second replica never saw the pairing or the job.
		resp := b.raw(t, signedDaemon(d, "POST", "/byollm/claim", "claim", claimBody(t, "runner_alice")))
		require.Equal(t, 200, resp.Status)
		far := b.raw(t, peer.RawRequest{BaseURL: second, Method: "POST", Path: "/byollm/heartbeat", Header: d.SignHeaders("heartbeat", heartbeatBody(t, "runner_alice")), Body: heartbeatBody(t, "runner_alice")})
		requireAnswer(t, far, 401, bodyRunnerUnknown)
		people, err := own.Runners(b.ctx, 0)
		require.NoError(t, err)
		require.Empty(t, people)
		jobs, err := own.Jobs(b.ctx, 0)
		require.NoError(t, err)
		require.Empty(t, jobs)
	})
}

// One clock: replicas whose own clocks are a minute apart stamp every lease
// and sealing window from the store's clock, so they agree to the
// millisecond; their local clocks only judge signature freshness.
func TestTwoReplicas_ClocksAMinuteApartAgreeOnEveryDeadline(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		ahead := b.config(b.store)
		ahead.Clock = clock.Offset{Base: b.clock, Delta: time.Minute}
		srv := httptest.NewServer(plane.New(ahead).Handler())
		t.Cleanup(srv.Close)

		d := b.pairedAt(t, "alice", srv.URL)
		b.enqueue(t, b.stub(t, "one-clock", "alice"))
		storeNow := b.storeNow(t)
		c := b.claimOne(t, d, "one-clock")
		require.Equal(t, storeNow+protocol.DefaultLeaseMs, c.Lease.ExpiresAt, "the lease comes from the store clock")

		// The site asks the other replica, whose clock is a minute behind.
		p := b.pending(t, "one-clock")
		require.Equal(t, c.Lease.ExpiresAt, p.LeaseExpiresAt)
		require.Equal(t, storeNow+protocol.AwaitingPayloadMs, p.AwaitingUntil)

		// A renewal through the replica ahead still uses the store clock.
		b.advance(5 * time.Second)
		hb, err := d.Heartbeat(b.ctx, []protocol.LeaseRef{lease(c)})
		require.NoError(t, err)
		require.Empty(t, hb.Lost)
		require.Equal(t, b.relayNow()+time.Minute.Milliseconds(), hb.ServerTime, "serverTime is the answering replica's own clock")
		require.Equal(t, b.storeNow(t)+protocol.DefaultLeaseMs, b.job(t, "one-clock").ClaimedBy.LeaseExpiresAt)
	})
}
