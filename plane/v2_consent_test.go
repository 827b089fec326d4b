package plane_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/plane/codec2"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// The refusals of RD-D12, as they travel.
const (
	bodyConsentWithdrawn = `{"error":"forbidden","message":"` + codec2.MsgConsentWithdrawn + `"}`
	bodyHolderWithdrew   = `{"error":"too-late","message":"` + codec2.MsgHolderWithdrew + `"}`
)

// withoutSiteConsent removes owner's consent record for siteID alone.
func withoutSiteConsent(owner, siteID string) fixtureMod {
	return func(f *projection.Fixture, _ keyring) {
		f.Consents = slices.DeleteFunc(f.Consents, func(c projection.ConsentRecord) bool { return c.Owner == owner && c.SiteID == siteID })
	}
}

// heldForTwoSites has alice's "2" device hold, for siteMain, job-a sealed
// and fetched (running) and job-b unsealed, whose pending entry it
// returns, and, for siteOther, job-o sealed.
func heldForTwoSites(t *testing.T, b *bundle) (d *daemon2, a, o proto2.ClaimedStub, bRead protocol.PendingJob) {
	t.Helper()
	site, other := b.site2(t, "site", siteMain), b.site2(t, "other", siteOther)
	site.enqueued(t, site.stub2(t, "job-a", "alice"), site.stub2(t, "job-b", "alice"))
	other.enqueued(t, other.stub2(t, "job-o", "alice"))
	d = b.device2(t, "alice")
	jobs := map[string]proto2.ClaimedStub{}
	for _, j := range d.claimed(t, 8) {
		jobs[j.ID] = j
	}
	require.Len(t, jobs, 3)
	a, o = jobs["job-a"], jobs["job-o"]
	site.seal(t, a, `{"prompt":"a"}`)
	require.Equal(t, http.StatusOK, d.fetch(t, a.ID, a.Lease.ID).Status)
	other.seal(t, o, `{"prompt":"o"}`)
	return d, a, o, site.pendingFor(t, "job-b")
}

// RD-D12: once alice withdraws her consent to siteMain, by removing the
// record or by a revocation that names it, while she still consents to
// siteOther, her device may do no more of siteMain's work it holds:
// siteMain's pending no longer lists its unsealed claim and a payload for
// it is refused; fetch and result are refused 403 forbidden (never
// revoked, which would stop the daemon's work for siteOther too); the
// heartbeat stops pinning siteMain and names the grant lost without
// renewing it. siteOther's job goes on. The job itself lapses into the
// queue, where no route reaches it until consent is back, or is given back
// at once by a release, as the 0.1.1 daemon releases it ("revoked").
// The "2" twin of TestAdversarial_ConsentRevokedMidJobLeavesNoResultBehind.
func TestRD_D12_WithdrawnConsentStopsHeldWork(t *testing.T) {
	for name, withdraw := range map[string]fixtureMod{
		"consent removed": withoutSiteConsent("alice", siteMain),
		"revoked entry":   withRevocation("alice"),
	} {
		t.Run(name, func(t *testing.T) {
			eachStore(t, bothProtocols(withSiteConsent("alice", siteOther, false)), func(t *testing.T, b *bundle) {
				d, a, o, bRead := heldForTwoSites(t, b)
				site, other := b.site2(t, "site", siteMain), b.site2(t, "other", siteOther)
				b.project(t, withdraw)

				requireAnswer(t, site.get(t, "pending"), http.StatusOK, `{"jobs":[]}`)
				sealed, err := site.peer.SealFor(bRead, "job-b", a.DeadlineAt, json.RawMessage(`{"prompt":"b"}`))
				require.NoError(t, err)
				requireAnswer(t, site.payload(t, "job-b", sealed), http.StatusConflict, bodyHolderWithdrew)
				require.Nil(t, b.requireState(t, "job-b", store.AwaitingPayload).Payload)

				requireAnswer(t, d.fetch(t, a.ID, a.Lease.ID), http.StatusForbidden, bodyConsentWithdrawn)
				requireAnswer(t, d.result(t, a.ID, a.Lease.ID, b.sealedResult(t, d, "site", a, `{"r":"a"}`)), http.StatusForbidden, bodyConsentWithdrawn)
				require.Nil(t, b.requireState(t, a.ID, store.Running).Result)
				requireAnswer(t, site.get(t, "results"), http.StatusOK, `{"jobs":[]}`)

				expires := b.job(t, a.ID).ClaimedBy.LeaseExpiresAt
				b.advance(time.Second)
				requireAnswer(t, d.heartbeat(t, grant(a), grant(o)), http.StatusOK,
					`{"sites":`+b.sitesJSON(t, "other")+`,"awaitingConsent":[],"cancel":[],"lost":[`+string(mustJSON(t, grant(a)))+`],"serverTime":`+itoa(b.relayNow())+`}`)
				require.Equal(t, expires, b.job(t, a.ID).ClaimedBy.LeaseExpiresAt, "a withdrawn site's grant is not renewed")
				require.Equal(t, b.storeNow(t)+60_000, b.job(t, o.ID).ClaimedBy.LeaseExpiresAt, "the other site's is")

				// The other site's work goes on.
				require.Equal(t, http.StatusOK, d.fetch(t, o.ID, o.Lease.ID).Status)
				requireAnswer(t, d.result(t, o.ID, o.Lease.ID, b.sealedResult(t, d, "other", o, `{"r":"o"}`)), http.StatusOK, `{"accepted":true,"state":"done"}`)
				require.Len(t, other.results(t), 1)

				// Release still gives a job back, barring nobody.
				requireAnswer(t, d.release(t, protocol.ReasonRevoked, proto2.GrantRef{JobID: "job-b", LeaseID: bRead.LeaseID}), http.StatusOK, `{"released":["job-b"]}`)
				b.requireState(t, "job-b", store.Queued)

				// The unrenewed grant lapses; sealed, it waits one lease
				// length for its holder (RD-D14), which cannot claim it while
				// consent is withdrawn, and then goes into the queue, where no
				// route reaches it until consent is back; then the old lease
				// is stale.
				b.advance(time.Duration(expires-b.storeNow(t)) * time.Millisecond)
				require.Empty(t, d.claimed(t, 8))
				b.advance(store.HolderReturnMs * time.Millisecond)
				requireAnswer(t, site.get(t, "pending"), http.StatusOK, `{"jobs":[]}`)
				b.requireState(t, a.ID, store.Queued)
				require.Empty(t, d.claimed(t, 8))
				b.project(t, withSiteConsent("alice", siteMain, false), func(f *projection.Fixture, _ keyring) { f.Revoked = nil })
				again := d.claimed(t, 8)
				require.Equal(t, []string{"job-a", "job-b"}, claimedIDs(again))
				requireAnswer(t, d.result(t, a.ID, a.Lease.ID, b.sealedResult(t, d, "site", a, `{"r":"a"}`)), http.StatusForbidden,
					`{"error":"forbidden","message":"`+proto2.MsgStaleLease+`"}`)
			})
		})
	}
}

// RD-D12 leaves a paused consent alone, as the reference and protocol "0"
// (RB-G19) do: a pause routes nothing new, and the work a device holds goes
// on, renewed, sealed, fetched and delivered.
func TestRD_D12_PausedConsentKeepsHeldWork(t *testing.T) {
	eachStore(t, bothProtocols(withSiteConsent("alice", siteOther, false)), func(t *testing.T, b *bundle) {
		d, a, _, bRead := heldForTwoSites(t, b)
		site := b.site2(t, "site", siteMain)
		b.project(t, withConsent("alice", true))

		require.Equal(t, bRead.LeaseID, site.pendingFor(t, "job-b").LeaseID)
		sealed, err := site.peer.SealFor(bRead, "job-b", a.DeadlineAt, json.RawMessage(`{"prompt":"b"}`))
		require.NoError(t, err)
		requireAnswer(t, site.payload(t, "job-b", sealed), http.StatusOK, `{"jobId":"job-b","state":"ready"}`)
		resp := d.heartbeat(t, grant(a))
		require.Equal(t, http.StatusOK, resp.Status)
		hb, err := proto2.DecodeHeartbeatResponse(resp.Body)
		require.NoError(t, err)
		require.Empty(t, hb.Lost)
		require.Equal(t, []string{b.keys["site"].KeyID()}, hb.AwaitingConsent)
		require.Equal(t, http.StatusOK, d.fetch(t, a.ID, a.Lease.ID).Status)
		requireAnswer(t, d.result(t, a.ID, a.Lease.ID, b.sealedResult(t, d, "site", a, `{"r":"a"}`)), http.StatusOK, `{"accepted":true,"state":"done"}`)
	})
}

// results is the site's results listing, decoded as the SDK reads it.
func (s *site2) results(t *testing.T) []protocol.FinishedJob {
	t.Helper()
	resp := s.get(t, "results")
	require.Equal(t, http.StatusOK, resp.Status, "results: %s", resp.Body)
	out, err := proto2.DecodeResultsResponse(resp.Body)
	require.NoError(t, err)
	return out.Jobs
}

func claimedIDs(jobs []proto2.ClaimedStub) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}
