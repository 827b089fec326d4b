package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

func init() {
	register("seal",
		testCase{"stores the payload of a job awaiting it and makes it ready", func(t *testing.T, b *bundle) { // B10
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			b.seal(t, c)
			j := b.requireState(t, "a", store.Ready)
			require.Equal(t, envelope(protocol.DirectionPayload, "a"), *j.Payload)
			require.Zero(t, j.AwaitingUntil, "sealing clears the window")
		}},
		testCase{"answers not-found for an unknown job or another site's job", func(t *testing.T, b *bundle) { // B10, F25
			b.enqueue(t, "a")
			b.claimOne(t, alice)
			for _, in := range []store.PayloadInput{{JobID: "nope", SiteID: Site}, {JobID: "a", SiteID: OtherSite}} {
				in.Envelope = envelope(protocol.DirectionPayload, "x")
				requireRefusal(t, b.s.Payload(b.ctx, in), store.RefusedNotFound)
			}
			b.requireState(t, "a", store.AwaitingPayload)
		}},
		testCase{"is too late for a job not awaiting a payload, naming its state", func(t *testing.T, b *bundle) { // B10, F20
			b.enqueue(t, "a")
			err := b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: envelope(protocol.DirectionPayload, "x")})
			require.Equal(t, &store.Refusal{Code: store.RefusedTooLate, Was: store.Queued}, err)
			c := b.claimOne(t, alice)
			b.seal(t, c)
			err = b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: envelope(protocol.DirectionPayload, "again")})
			require.Equal(t, &store.Refusal{Code: store.RefusedTooLate, Was: store.Ready}, err)
			require.Equal(t, envelope(protocol.DirectionPayload, "a"), *b.job(t, "a").Payload, "the first payload stays")
		}},
		testCase{"D11_StaleSealIsRefused: a payload sealed to an earlier holder is refused, and the job waits for its own", func(t *testing.T, b *bundle) {
			b.enqueue(t, "a")
			first := b.claimOne(t, alice)
			_, err := b.s.Release(b.ctx, store.ReleaseInput{RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(first)}, Reason: protocol.ReasonShutdown})
			require.NoError(t, err)
			second := b.claimOne(t, alice2)

			// The site read pending while alice's laptop held the job, and
			// sealed to it; her second device holds it now.
			err = b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: envelopeFor(alice.runner, protocol.DirectionPayload, "stale")})
			requireRefusal(t, err, store.RefusedOtherDevice)
			j := b.requireState(t, "a", store.AwaitingPayload)
			require.Nil(t, j.Payload, "nothing of the stale seal is kept")
			require.Equal(t, second.Lease.ID, j.ClaimedBy.LeaseID, "the second device's grant stands")

			b.seal(t, second)
			require.Equal(t, envelopeFor(alice2.runner, protocol.DirectionPayload, "a"), *b.requireState(t, "a", store.Ready).Payload)
		}},
		testCase{"D11_StaleSealIsRefused: a payload naming no device that holds the job is refused", func(t *testing.T, b *bundle) {
			b.enqueue(t, "a")
			b.claimOne(t, alice)
			wrong := envelope(protocol.DirectionPayload, "x")
			wrong.RecipientKeyID = siteKeyID
			requireRefusal(t, b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: wrong}), store.RefusedOtherDevice)
			b.requireState(t, "a", store.AwaitingPayload)
		}},
		testCase{"is too late once the sealing window lapsed, whether or not a sweep ran (relayd G8)", func(t *testing.T, b *bundle) {
			b.enqueue(t, "a")
			b.claimOne(t, alice)
			b.advance(t, protocol.AwaitingPayloadMs*time.Millisecond)
			err := b.s.Payload(b.ctx, store.PayloadInput{JobID: "a", SiteID: Site, Envelope: envelope(protocol.DirectionPayload, "late")})
			require.Equal(t, &store.Refusal{Code: store.RefusedTooLate, Was: store.Queued}, err)
			j := b.requireState(t, "a", store.Queued)
			require.Nil(t, j.Payload)
		}},
	)

	register("cancel",
		testCase{"flags a site's own job, leaving its state alone, and is idempotent", func(t *testing.T, b *bundle) { // B11, F106
			b.enqueue(t, "a")
			b.claimOne(t, alice)
			for range 2 {
				ok, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: "a", SiteID: Site})
				require.NoError(t, err)
				require.True(t, ok)
			}
			j := b.requireState(t, "a", store.AwaitingPayload)
			require.True(t, j.Cancelled)
		}},
		testCase{"refuses to cancel a job of another site, or an unknown one", func(t *testing.T, b *bundle) { // F39, F106
			b.enqueue(t, "a")
			ok, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: "a", SiteID: OtherSite})
			require.NoError(t, err)
			require.False(t, ok)
			require.False(t, b.job(t, "a").Cancelled)
			ok, err = b.s.Cancel(b.ctx, store.CancelInput{JobID: "nope", SiteID: Site})
			require.NoError(t, err)
			require.False(t, ok)
		}},
		testCase{"accepts a cancel of a done job", func(t *testing.T, b *bundle) { // B11, A13.2
			b.enqueue(t, "a")
			b.runToDone(t, b.claimOne(t, alice))
			ok, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: "a", SiteID: Site})
			require.NoError(t, err)
			require.True(t, ok)
			b.requireState(t, "a", store.Done)
		}},
	)

	register("cancelRequests",
		testCase{"names a cancelled job to the device holding it, and to nobody else", func(t *testing.T, b *bundle) { // F37, F106
			b.enqueue(t, "a", "b")
			cs := b.claimFor(t, alice, 2)
			_, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: cs[1].ID, SiteID: Site})
			require.NoError(t, err)
			got, err := b.s.CancelRequests(b.ctx, alice.runner)
			require.NoError(t, err)
			require.Equal(t, []string{"b"}, got)
			got, err = b.s.CancelRequests(b.ctx, bob.runner)
			require.NoError(t, err)
			require.Empty(t, got)
		}},
		testCase{"lists cancelled jobs in first-enqueue order", func(t *testing.T, b *bundle) { // B12
			b.enqueue(t, "a", "b", "c")
			b.claimFor(t, alice, 3)
			for _, id := range []string{"c", "a"} {
				_, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: id, SiteID: Site})
				require.NoError(t, err)
			}
			got, err := b.s.CancelRequests(b.ctx, alice.runner)
			require.NoError(t, err)
			require.Equal(t, []string{"a", "c"}, got)
		}},
		testCase{"never lists a finished job (relayd G11)", func(t *testing.T, b *bundle) {
			b.enqueue(t, "a")
			c := b.claimOne(t, alice)
			_, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: "a", SiteID: Site})
			require.NoError(t, err)
			b.runToDone(t, c)
			got, err := b.s.CancelRequests(b.ctx, alice.runner)
			require.NoError(t, err)
			require.Empty(t, got)
		}},
		testCase{"drops a cancelled job the sweep took back", func(t *testing.T, b *bundle) { // B16
			b.enqueue(t, "a")
			b.claimOne(t, alice)
			_, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: "a", SiteID: Site})
			require.NoError(t, err)
			b.advance(t, protocol.AwaitingPayloadMs*time.Millisecond)
			_, err = b.s.Sweep(b.ctx)
			require.NoError(t, err)
			got, err := b.s.CancelRequests(b.ctx, alice.runner)
			require.NoError(t, err)
			require.Empty(t, got)
			require.Empty(t, b.claimFor(t, alice2, 64), "and it is offered to nobody")
		}},
	)

	register("awaiting",
		testCase{"lists the site's jobs awaiting a payload, cancelled ones included, in order", func(t *testing.T, b *bundle) { // B4, A14.3
			b.enqueue(t, "a", "b", "c", "d")
			b.enqueueOn(t, OtherSite, b.stub(t, "foreign"))
			cs := b.claimFor(t, alice, 3)
			b.seal(t, cs[1])
			_, err := b.s.Cancel(b.ctx, store.CancelInput{JobID: "c", SiteID: Site})
			require.NoError(t, err)
			got, err := b.s.Pending(b.ctx, Site)
			require.NoError(t, err)
			require.Equal(t, []string{"a", "c"}, jobIDs(got))
			require.Equal(t, cs[0].Lease.ID, got[0].ClaimedBy.LeaseID)
			require.Equal(t, identityOf(alice), got[0].ClaimedBy.Device)
			require.Equal(t, cs[0].Lease.ExpiresAt, got[0].ClaimedBy.LeaseExpiresAt)
			require.NotEqual(t, got[0].AwaitingUntil, got[0].ClaimedBy.LeaseExpiresAt)
			other, err := b.s.Pending(b.ctx, OtherSite)
			require.NoError(t, err)
			require.Empty(t, other)
		}},
	)

	register("finished",
		testCase{"lists the site's done jobs on every poll without consuming them", func(t *testing.T, b *bundle) { // B5, A15.3, F6
			b.enqueue(t, "a", "b", "c")
			cs := b.claimFor(t, alice, 3)
			b.runToDone(t, cs[2])
			b.runToDone(t, cs[0])
			b.seal(t, cs[1])
			for range 2 {
				got, err := b.s.Results(b.ctx, Site)
				require.NoError(t, err)
				require.Equal(t, []string{"a", "c"}, jobIDs(got))
				require.Equal(t, alice.owner, got[0].ClaimedBy.Owner, "the pairing owner travels with the result")
				require.Equal(t, alice.runner, got[0].ClaimedBy.RunnerID)
				require.Equal(t, envelope(protocol.DirectionResult, "a-ok"), *got[0].Result)
				require.Nil(t, got[0].Payload, "a listing sites poll leaves out the payload they sealed")
			}
			job, _, err := b.s.Job(b.ctx, "a")
			require.NoError(t, err)
			require.NotNil(t, job.Payload, "the job itself keeps its payload")
			other, err := b.s.Results(b.ctx, OtherSite)
			require.NoError(t, err)
			require.Empty(t, other)
		}},
	)
}
