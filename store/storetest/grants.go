package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

func init() {
	register("takePayload",
		testCase{"refuses an unknown job", func(t *testing.T, b *bundle) { // B7
			_, err := b.s.Fetch(b.ctx, store.LeaseInput{JobID: "nope", RunnerID: alice.runner, LeaseID: "x"})
			requireRefusal(t, err, store.RefusedNotFound)
		}},
		testCase{"refuses a runner that does not hold the job", func(t *testing.T, b *bundle) { // F76
			b.enqueue(t, "unclaimed", "held")
			_, err := b.s.Fetch(b.ctx, store.LeaseInput{JobID: "unclaimed", RunnerID: alice.runner, LeaseID: "x"})
			requireRefusal(t, err, store.RefusedNotHolder)
			c := b.claimOne(t, alice)
			b.seal(t, c)
			_, err = b.s.Fetch(b.ctx, store.LeaseInput{JobID: c.ID, RunnerID: bob.runner, LeaseID: c.Lease.ID})
			requireRefusal(t, err, store.RefusedNotHolder)
		}},
		testCase{"refuses a stale lease and honours the current one", func(t *testing.T, b *bundle) { // F74, F97
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			b.seal(t, c)
			stale := lease(c)
			stale.LeaseID = "00000000-0000-4000-8000-000000000000"
			_, err := b.s.Fetch(b.ctx, stale)
			requireRefusal(t, err, store.RefusedStaleLease)
			b.requireState(t, "a", store.Ready)
			env, err := b.s.Fetch(b.ctx, lease(c))
			require.NoError(t, err)
			require.Equal(t, envelope(protocol.DirectionPayload, "a"), env)
			b.requireState(t, "a", store.Running)
		}},
		testCase{"says not-ready until the site has sealed", func(t *testing.T, b *bundle) { // F88
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			_, err := b.s.Fetch(b.ctx, lease(c))
			requireRefusal(t, err, store.RefusedNotReady)
			b.requireState(t, "a", store.AwaitingPayload)
		}},
		testCase{"refuses to reopen a finished job (relayd G9)", func(t *testing.T, b *bundle) {
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			b.runToDone(t, c)
			_, err := b.s.Fetch(b.ctx, lease(c))
			requireRefusal(t, err, store.RefusedFinished)
			b.requireState(t, "a", store.Done)
			fin, err := b.s.Results(b.ctx, Site)
			require.NoError(t, err)
			require.Equal(t, []string{"a"}, jobIDs(fin), "the result is still delivered")
		}},
	)

	register("complete",
		testCase{"records a result once; a replay by the holder is a duplicate and changes nothing", func(t *testing.T, b *bundle) { // F77, F107
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			b.seal(t, c)
			require.Equal(t, store.ResultOutcome{}, b.complete(t, c, protocol.DispositionOK))
			require.Equal(t, store.ResultOutcome{Duplicate: true}, b.complete(t, c, protocol.DispositionError))
			j := b.requireState(t, "a", store.Done)
			require.Equal(t, protocol.DispositionOK, j.Disposition)
			require.Equal(t, envelope(protocol.DirectionResult, "a-ok"), *j.Result)
		}},
		testCase{"answers a stranger not-holder even once the job is done", func(t *testing.T, b *bundle) { // F108, B8
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			b.runToDone(t, c)
			_, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: store.LeaseInput{JobID: "a", RunnerID: bob.runner, LeaseID: c.Lease.ID}, Envelope: envelope(protocol.DirectionResult, "x"), Disposition: protocol.DispositionOK})
			requireRefusal(t, err, store.RefusedNotHolder)
			_, err = b.s.Result(b.ctx, store.ResultInput{LeaseInput: store.LeaseInput{JobID: "nope", RunnerID: alice.runner, LeaseID: c.Lease.ID}, Envelope: envelope(protocol.DirectionResult, "x"), Disposition: protocol.DispositionOK})
			requireRefusal(t, err, store.RefusedNotFound)
		}},
		testCase{"refuses a result produced under a grant that ended", func(t *testing.T, b *bundle) { // F78, F109
			b.enqueue(t, "a")
			first := b.claimOne(t, alice)
			_, err := b.s.Release(b.ctx, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(first)}, Reason: protocol.ReasonShutdown})
			require.NoError(t, err)
			second := b.claimOne(t, alice)
			_, err = b.s.Result(b.ctx, store.ResultInput{LeaseInput: lease(first), Envelope: envelope(protocol.DirectionResult, "old"), Disposition: protocol.DispositionOK})
			requireRefusal(t, err, store.RefusedStaleLease)
			j := b.requireState(t, "a", store.AwaitingPayload)
			require.Nil(t, j.Result)
			require.Equal(t, second.Lease.ID, j.ClaimedBy.LeaseID)
		}},
		testCase{"D11_ResultFromAnotherDeviceIsRefused: a result the holder's device did not seal is refused", func(t *testing.T, b *bundle) {
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			b.seal(t, c)
			forged := envelopeFor(bob.runner, protocol.DirectionResult, "forged")
			_, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: lease(c), Envelope: forged, Disposition: protocol.DispositionOK})
			requireRefusal(t, err, store.RefusedOtherDevice)
			j := b.requireState(t, "a", store.Ready)
			require.Nil(t, j.Result, "nothing of the refused result is kept")

			require.False(t, b.complete(t, c, protocol.DispositionOK).Duplicate, "the holder's own result is still the first")
			_, err = b.s.Result(b.ctx, store.ResultInput{LeaseInput: lease(c), Envelope: forged, Disposition: protocol.DispositionOK})
			requireRefusal(t, err, store.RefusedOtherDevice)
			require.Equal(t, envelope(protocol.DirectionResult, "a-ok"), *b.requireState(t, "a", store.Done).Result)
		}},
		testCase{"refuses a stale lease on a done job", func(t *testing.T, b *bundle) { // B8.3
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			b.runToDone(t, c)
			stale := lease(c)
			stale.LeaseID = "00000000-0000-4000-8000-000000000000"
			_, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: stale, Envelope: envelope(protocol.DirectionResult, "x"), Disposition: protocol.DispositionOK})
			requireRefusal(t, err, store.RefusedStaleLease)
		}},
		testCase{"accepts a result before the payload, and keeps the grant after", func(t *testing.T, b *bundle) { // B8
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			require.False(t, b.complete(t, c, protocol.DispositionCanceled).Duplicate)
			j := b.requireState(t, "a", store.Done)
			require.Equal(t, c.Lease.ID, j.ClaimedBy.LeaseID)
			require.Equal(t, protocol.DispositionCanceled, j.Disposition)
		}},
		testCase{"refuses a result after the lease lapsed, whether or not a sweep ran (relayd G8)", func(t *testing.T, b *bundle) {
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			b.seal(t, c)
			b.advance(t, leaseMs*time.Millisecond)
			_, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: lease(c), Envelope: envelope(protocol.DirectionResult, "late"), Disposition: protocol.DispositionOK})
			requireRefusal(t, err, store.RefusedNotHolder)
			j := b.requireState(t, "a", store.Queued)
			require.Nil(t, j.Result)
		}},
	)

	register("releaseLeases",
		testCase{"gives back the grant it names", func(t *testing.T, b *bundle) { // F80
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			b.seal(t, c)
			got, err := b.s.Release(b.ctx, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}})
			require.NoError(t, err)
			require.Equal(t, []string{"a"}, got)
			j := b.requireState(t, "a", store.Queued)
			require.Nil(t, j.ClaimedBy)
			require.Nil(t, j.Payload, "a requeue drops the payload")
			require.Zero(t, j.AwaitingUntil)
		}},
		testCase{"skips a lease id that is not the current grant, another runner's grant and unknown jobs", func(t *testing.T, b *bundle) { // F79, B9
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			got, err := b.s.Release(b.ctx, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{
				{JobID: "a", LeaseID: "00000000-0000-4000-8000-000000000000"}, {JobID: "nope", LeaseID: c.Lease.ID},
			}})
			require.NoError(t, err)
			require.Empty(t, got)
			got, err = b.s.Release(b.ctx, store.ReleaseInput{RunnerID: bob.runner, Leases: []protocol.LeaseRef{ref(c)}})
			require.NoError(t, err)
			require.Empty(t, got)
			b.requireState(t, "a", store.AwaitingPayload)
		}},
		testCase{"releases a duplicated entry once, in request order", func(t *testing.T, b *bundle) { // B9
			b.enqueue(t, "a", "b")
			cs := b.claimFor(t, alice, 2)
			got, err := b.s.Release(b.ctx, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(cs[1]), ref(cs[0]), ref(cs[1])}})
			require.NoError(t, err)
			require.Equal(t, []string{"b", "a"}, got)
		}},
		testCase{"does not offer a job back to the runner that refused it, and offers it to another", func(t *testing.T, b *bundle) { // F63, F64, F103, F40
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			for range 2 {
				_, err := b.s.Release(b.ctx, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: protocol.ReasonRefused})
				require.NoError(t, err)
			}
			require.Empty(t, b.claimFor(t, alice, 64))
			j := b.requireState(t, "a", store.Queued)
			require.Equal(t, []string{alice.runner}, j.RefusedBy)
			again := b.claimOne(t, alice2)
			require.Equal(t, "a", again.ID)
			require.Equal(t, []string{alice.runner}, b.job(t, "a").RefusedBy, "refusals are never cleared")
		}},
		testCase{"keeps a job claimable by a runner that only went away", func(t *testing.T, b *bundle) { // F65, F104, F41
			for _, reason := range []string{protocol.ReasonShutdown, protocol.ReasonPause, protocol.ReasonRevoked, protocol.ReasonBackendDown, ""} {
				b.enqueue(t, "a-"+reason)
				c := b.claimOne(t, alice)
				got, err := b.s.Release(b.ctx, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: reason})
				require.NoError(t, err)
				require.Equal(t, []string{c.ID}, got)
				require.Equal(t, c.ID, b.claimOne(t, alice).ID, "reason %q", reason)
			}
		}},
		testCase{"does not un-finish a done job (relayd G10)", func(t *testing.T, b *bundle) {
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			b.runToDone(t, c)
			got, err := b.s.Release(b.ctx, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: protocol.ReasonRefused})
			require.NoError(t, err)
			require.Empty(t, got)
			b.requireState(t, "a", store.Done)
			fin, err := b.s.Results(b.ctx, Site)
			require.NoError(t, err)
			require.Equal(t, []string{"a"}, jobIDs(fin))
		}},
	)

	register("renewLeases",
		testCase{"renews a grant it still holds, and the stored expiry follows", func(t *testing.T, b *bundle) { // F28, F98
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			b.seal(t, c)
			b.advance(t, 5*time.Second)
			now := b.now(t)
			res, err := b.s.Renew(b.ctx, store.RenewInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, LeaseMs: leaseMs})
			require.NoError(t, err)
			require.Empty(t, res.Lost)
			require.Equal(t, []store.Renewal{{JobID: "a", ExpiresAt: now + leaseMs}}, res.Renewed)
			require.Greater(t, res.Renewed[0].ExpiresAt, c.Lease.ExpiresAt)
			j := b.job(t, "a")
			require.Equal(t, res.Renewed[0].ExpiresAt, j.ClaimedBy.LeaseExpiresAt)
			require.Equal(t, c.Lease.ID, j.ClaimedBy.LeaseID, "one lease id for the job's whole life")
		}},
		testCase{"reports a lease the runner no longer holds as lost, and renews nothing", func(t *testing.T, b *bundle) { // F29, F99
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			res, err := b.s.Renew(b.ctx, store.RenewInput{RunnerID: alice.runner, LeaseMs: leaseMs, Leases: []protocol.LeaseRef{
				{JobID: "a", LeaseID: "00000000-0000-4000-8000-000000000000"}, {JobID: "nope", LeaseID: c.Lease.ID},
			}})
			require.NoError(t, err)
			require.Empty(t, res.Renewed)
			require.Equal(t, []string{"a", "nope"}, res.Lost)
			res, err = b.s.Renew(b.ctx, store.RenewInput{RunnerID: bob.runner, Leases: []protocol.LeaseRef{ref(c)}, LeaseMs: leaseMs})
			require.NoError(t, err)
			require.Equal(t, []string{"a"}, res.Lost)
			j := b.job(t, "a")
			require.Equal(t, c.Lease.ID, j.ClaimedBy.LeaseID)
			require.Equal(t, c.Lease.ExpiresAt, j.ClaimedBy.LeaseExpiresAt)
		}},
		testCase{"tells a device mid-flight that its job is gone", func(t *testing.T, b *bundle) { // F69
			b.enqueueOn(t, Site, b.stub(t, "a", deadlineIn(t, b, 20*time.Second)))
			c := b.claimOne(t, alice)
			b.seal(t, c)
			b.advance(t, 20*time.Second)
			_, err := b.s.Sweep(b.ctx)
			require.NoError(t, err)
			res, err := b.s.Renew(b.ctx, store.RenewInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, LeaseMs: leaseMs})
			require.NoError(t, err)
			require.Equal(t, []string{"a"}, res.Lost)
		}},
		testCase{"reports a lapsed lease as lost even before a sweep (relayd G8)", func(t *testing.T, b *bundle) {
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			b.seal(t, c)
			b.advance(t, leaseMs*time.Millisecond)
			res, err := b.s.Renew(b.ctx, store.RenewInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, LeaseMs: leaseMs})
			require.NoError(t, err)
			require.Equal(t, []string{"a"}, res.Lost)
			b.requireState(t, "a", store.Queued)
		}},
		testCase{"never extends the sealing window", func(t *testing.T, b *bundle) { // B13, D2
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			before := b.job(t, "a").AwaitingUntil
			b.advance(t, time.Second)
			_, err := b.s.Renew(b.ctx, store.RenewInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, LeaseMs: leaseMs})
			require.NoError(t, err)
			require.Equal(t, before, b.job(t, "a").AwaitingUntil)
		}},
	)
}
