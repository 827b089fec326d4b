package plane_test

// Upstream's long-jobs cases (RB-F26–RB-F29), driven through heartbeats with the
// store clock moved by hand instead of real time passing.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// shortLease keeps clock advances small; the sealing window stays 10 s.
const shortLease = 2000

// running claims, seals and fetches a job, leaving it running on d.
func running(t *testing.T, b *bundle, d *peer.Daemon, id string) protocol.ClaimedStub {
	t.Helper()
	b.enqueue(t, b.stub(t, id, "alice"))
	c := b.claimOne(t, d, id)
	b.seal(t, c, `{"prompt":"long"}`)
	_, err := d.Fetch(b.ctx, id, c.Lease.ID)
	require.NoError(t, err)
	b.requireState(t, id, store.Running)
	return c
}

func TestLongJobs_StaysWithTheDeviceRunningItUnderOneLeaseAndRunsOnce(t *testing.T) { // RB-F26, RB-F28
	eachStore(t, &setupOpts{LeaseMs: shortLease}, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		c := running(t, b, d, "job-1")
		require.Equal(t, c.Lease.ExpiresAt, b.job(t, "job-1").ClaimedBy.LeaseExpiresAt)

		// Five beats, each three quarters of a lease apart: well past the
		// first expiry, and never lapsing.
		last := c.Lease.ExpiresAt
		for range 5 {
			b.advance(1500 * time.Millisecond)
			before := b.storeNow(t)
			hb, err := d.Heartbeat(b.ctx, []protocol.LeaseRef{lease(c)})
			require.NoError(t, err)
			require.Equal(t, protocol.HeartbeatResponse{Revoked: false, Cancel: []string{}, Lost: []string{}, ServerTime: b.relayNow()}, hb)

			j := b.requireState(t, "job-1", store.Running)
			require.Equal(t, c.Lease.ID, j.ClaimedBy.LeaseID, "one lease id for the job's whole life")
			require.Equal(t, "runner_alice", j.ClaimedBy.RunnerID)
			require.Greater(t, j.ClaimedBy.LeaseExpiresAt, last, "the renewal moved the expiry")
			require.GreaterOrEqual(t, j.ClaimedBy.LeaseExpiresAt, before+shortLease, "renewed to store now + lease")
			last = j.ClaimedBy.LeaseExpiresAt
		}
		require.Greater(t, b.storeNow(t), c.Lease.ExpiresAt, "the job outlived its first lease")

		// Another device asking for work does not get it.
		require.Empty(t, b.claim(t, b.paired(t, "alice2"), 8))
		b.finish(t, d, c, `{"outcome":{"text":"done"}}`)
		res, err := b.site.Results(b.ctx)
		require.NoError(t, err)
		require.Len(t, res.Jobs, 1)
		require.Equal(t, c.Lease.ID, res.Jobs[0].LeaseID)
		b.requireState(t, "job-1", store.Done)
	})
}

func TestLongJobs_DeviceThatStopsHeartbeatingLosesTheJob(t *testing.T) { // RB-F27
	eachStore(t, &setupOpts{LeaseMs: shortLease}, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		c := running(t, b, d, "job-1")

		b.advance((shortLease + 100) * time.Millisecond)
		// Another device's heartbeat sweeps, as upstream's sweep did.
		other := b.paired(t, "alice2")
		_, err := other.Heartbeat(b.ctx, nil)
		require.NoError(t, err)
		j := b.requireState(t, "job-1", store.Queued)
		require.Nil(t, j.ClaimedBy)
		require.Nil(t, j.Payload)

		// The silent device finds out at its next beat, and its result is refused.
		hb, err := d.Heartbeat(b.ctx, []protocol.LeaseRef{lease(c)})
		require.NoError(t, err)
		require.Equal(t, []string{"job-1"}, hb.Lost)
		env, err := peer.Seal(d.Keys(), b.keys["site"].Public(), c.ID, protocol.DirectionResult, c.DeadlineAt, []byte(`{"late":true}`))
		require.NoError(t, err)
		_, err = d.Result(b.ctx, c.ID, c.Lease.ID, env, protocol.DispositionOK)
		requireRefused(t, err, 403, bodyNotHolder)

		next := b.claimOne(t, other, "job-1")
		require.NotEqual(t, c.Lease.ID, next.Lease.ID)
	})
}

func TestLongJobs_HeartbeatRenewsTheLeasesItNames(t *testing.T) { // RB-F28
	eachStore(t, &setupOpts{LeaseMs: shortLease}, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"), b.stub(t, "job-2", "alice"))
		jobs := b.claim(t, d, 2)
		require.Len(t, jobs, 2)
		b.advance(time.Second)

		now := b.storeNow(t)
		hb, err := d.Heartbeat(b.ctx, []protocol.LeaseRef{lease(jobs[0])})
		require.NoError(t, err)
		require.Empty(t, hb.Lost)
		renewed := b.job(t, "job-1").ClaimedBy
		require.GreaterOrEqual(t, renewed.LeaseExpiresAt, now+shortLease)
		require.Equal(t, jobs[0].Lease.ID, renewed.LeaseID)
		// The lease it did not name is untouched.
		require.Equal(t, jobs[1].Lease.ExpiresAt, b.job(t, "job-2").ClaimedBy.LeaseExpiresAt)
	})
}

func TestLongJobs_UnknownLeaseIsReportedLostAndRenewsNothing(t *testing.T) { // RB-F29
	eachStore(t, &setupOpts{LeaseMs: shortLease}, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")
		b.advance(time.Second)

		hb, err := d.Heartbeat(b.ctx, []protocol.LeaseRef{{JobID: "job-1", LeaseID: "00000000-0000-4000-8000-000000000000"}, {JobID: "no-such-job", LeaseID: c.Lease.ID}})
		require.NoError(t, err)
		require.Equal(t, []string{"job-1", "no-such-job"}, hb.Lost)
		j := b.requireState(t, "job-1", store.AwaitingPayload)
		require.Equal(t, c.Lease.ID, j.ClaimedBy.LeaseID)
		require.Equal(t, c.Lease.ExpiresAt, j.ClaimedBy.LeaseExpiresAt, "the holder's expiry is unchanged")
	})
}
