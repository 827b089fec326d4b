package plane_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/store"
)

// RD-D14: a sealed job goes back to its holder. The 0.1.1 daemon gives up a
// fetch or a result that failed on the wire (a killed replica, a Valkey
// restart past the store deadline) and lets the lease lapse; the 0.1.1
// site SDK completes a job only under the first lease it sealed to. So
// when a "2" job's lease lapses with its payload sealed, relayd keeps the
// payload and the lease id and offers the job back to its holder alone, for
// one lease length: the holder's next claim gets the same lease id with a
// fresh expiry, the job is still ready, the site is never asked to seal it
// again, and the result the holder sends under that lease completes it.
// Until that claim the lapsed lease fetches nothing; past the window the
// job is requeued as the reference requeues it.
func TestRD_D14_ASealedJobGoesBackToItsHolder(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "job-a", "alice"))
		d, other := b.device2(t, "alice"), b.device2(t, "alice2")
		first := d.claimed(t, 4)
		require.Len(t, first, 1)
		a := first[0]
		site.seal(t, a, `{"prompt":"a"}`)
		require.Equal(t, http.StatusOK, d.fetch(t, a.ID, a.Lease.ID).Status)

		// The daemon's result never arrived; its lease lapses.
		b.advance(time.Duration(a.Lease.ExpiresAt-b.storeNow(t)) * time.Millisecond)
		require.Equal(t, http.StatusNotFound, d.fetch(t, a.ID, a.Lease.ID).Status, "the lapsed lease fetches nothing until it is granted again")
		requireAnswer(t, site.get(t, "pending"), http.StatusOK, `{"jobs":[]}`)
		require.Empty(t, other.claimed(t, 4), "no other device is offered it")

		again := d.claimed(t, 4)
		require.Len(t, again, 1)
		require.Equal(t, a.Lease.ID, again[0].Lease.ID, "the lease the site sealed to")
		require.Equal(t, b.storeNow(t)+60_000, again[0].Lease.ExpiresAt, "with a fresh expiry")
		require.Equal(t, http.StatusOK, d.fetch(t, a.ID, a.Lease.ID).Status, "ready again, no new seal")
		requireAnswer(t, d.result(t, a.ID, a.Lease.ID, b.sealedResult(t, d, "site", a, `{"r":"a"}`)), http.StatusOK, `{"accepted":true,"state":"done"}`)
		results := site.results(t)
		require.Len(t, results, 1)
		require.Equal(t, a.Lease.ID, results[0].LeaseID, "completed under the lease the site adopted")
	})
}

// RD-D14's window ends: a holder that does not claim again within one lease
// length of the lapse loses the job to the queue, under a new lease.
func TestRD_D14_AHolderThatDoesNotReturnLosesTheJob(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "job-a", "alice"))
		d, other := b.device2(t, "alice"), b.device2(t, "alice2")
		a := d.claimed(t, 4)[0]
		site.seal(t, a, `{"prompt":"a"}`)
		b.advance(time.Duration(a.Lease.ExpiresAt-b.storeNow(t)+store.HolderReturnMs) * time.Millisecond)
		taken := other.claimed(t, 4)
		require.Len(t, taken, 1)
		require.NotEqual(t, a.Lease.ID, taken[0].Lease.ID)
		b.requireState(t, "job-a", store.AwaitingPayload)
		require.Empty(t, d.claimed(t, 4))
	})
}
