package plane_test

// Upstream's multi-site (RB-F30–RB-F32), paused-consent (RB-F33–RB-F36) and refusal
// (RB-F37–RB-F41) cases, over HTTP.

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

func TestMultiSite_StubNamingTheSiteThatSignedItIsQueued(t *testing.T) { // RB-F30
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		s := b.stub(t, "job-1", "alice")
		require.Equal(t, b.keys["site"].KeyID(), s.Site)
		b.enqueue(t, s)
		b.requireState(t, "job-1", store.Queued)
	})
}

func TestMultiSite_StubNamingAnotherRegisteredSiteIsRefused(t *testing.T) { // RB-F31, RB-A16 #23, RB-G1
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		_, err := b.site.Enqueue(b.ctx, b.stub(t, "job-1", "alice", namedSite(b.keys["other"].KeyID())))
		requireRefused(t, err, 403, bodyStubWrongSite)
		b.requireNoJob(t, "job-1")
	})
}

func TestMultiSite_StubNamingASiteNobodyRegisteredIsRefused(t *testing.T) { // RB-F32, RB-A16 #23
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		_, err := b.site.Enqueue(b.ctx, b.stub(t, "job-1", "alice", namedSite(b.keys["stranger"].KeyID())))
		requireRefused(t, err, 403, bodyStubWrongSite)
		b.requireNoJob(t, "job-1")
	})
}

func TestPausedConsent_PairsAndIsNotToldItWasRevoked(t *testing.T) { // RB-F33, RB-G19, RB-A9.5
	eachStore(t, &setupOpts{Fixture: []fixtureMod{withConsent("alice", true)}}, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		resp, err := d.Do(b.ctx, "heartbeat", heartbeatBody(t, "runner_alice"))
		require.NoError(t, err)
		// Exact bytes: no awaitingConsent, no leases, nothing extra.
		requireAnswer(t, resp, 200, `{"revoked":false,"cancel":[],"lost":[],"serverTime":`+itoa(b.relayNow())+`}`)
	})
}

func TestPausedConsent_KeepsRenewingLeasesItAlreadyHolds(t *testing.T) { // RB-G19, RB-A9.5
	eachStore(t, &setupOpts{LeaseMs: 2000}, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")
		b.project(t, withConsent("alice", true))

		b.advance(1500 * time.Millisecond)
		hb, err := d.Heartbeat(b.ctx, []protocol.LeaseRef{lease(c)})
		require.NoError(t, err)
		require.False(t, hb.Revoked)
		require.Empty(t, hb.Lost)
		require.Greater(t, b.job(t, "job-1").ClaimedBy.LeaseExpiresAt, c.Lease.ExpiresAt, "paused still renews")
		// Work already granted goes on: fetch is not refused.
		_, err = d.Fetch(b.ctx, c.ID, c.Lease.ID)
		requireRefused(t, err, 409, bodyNotReady)
	})
}

func TestPausedConsent_ClaimsNothingWhilePausedAndEverythingAfterReconsent(t *testing.T) { // RB-F34, RB-A6.5
	eachStore(t, &setupOpts{Fixture: []fixtureMod{withConsent("alice", true)}}, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"), b.stub(t, "job-2", "alice"))
		resp, err := d.Do(b.ctx, "claim", claimBody(t, "runner_alice"))
		require.NoError(t, err)
		requireAnswer(t, resp, 200, `{"jobs":[],"leaseMs":60000}`)
		b.requireState(t, "job-1", store.Queued)

		b.project(t, withConsent("alice", false))
		jobs := b.claim(t, d, 8)
		require.Equal(t, []string{"job-1", "job-2"}, []string{jobs[0].ID, jobs[1].ID})
	})
}

func TestPausedConsent_PausedRosterMembersWorkDoesNotLandOnTheAdminsMachine(t *testing.T) { // RB-F35
	opts := &setupOpts{Fixture: []fixtureMod{withRoster("bob", "alice"), withConsent("alice", true)}}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		bob := b.paired(t, "bob")
		b.enqueue(t, b.stub(t, "alice-named", "alice", audience(protocol.AudienceNamed)), b.stub(t, "bob-own", "bob"))
		jobs := b.claim(t, bob, 8)
		require.Len(t, jobs, 1)
		require.Equal(t, "bob-own", jobs[0].ID)
		b.requireState(t, "alice-named", store.Queued)
	})
}

func TestPausedConsent_DeviceOwnerPausedRunsNothingForTheSite(t *testing.T) { // RB-F36
	opts := &setupOpts{Fixture: []fixtureMod{withRoster("bob", "alice"), withConsent("bob", true)}}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		bob := b.paired(t, "bob")
		b.enqueue(t, b.stub(t, "alice-named", "alice", audience(protocol.AudienceNamed)))
		require.Empty(t, b.claim(t, bob, 8))
		b.requireState(t, "alice-named", store.Queued)

		// It was the pause: lifting it routes the job to bob's machine.
		b.project(t, withConsent("bob", false))
		b.claimOne(t, bob, "alice-named")
	})
}

func TestRefusal_CancelledJobIsNamedToTheDeviceHoldingIt(t *testing.T) { // RB-F37, RB-A13.2, RB-A14.3
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")

		resp, err := b.site.Cancel(b.ctx, "job-1")
		require.NoError(t, err)
		require.True(t, resp.Cancelled)
		// A repeat is still true, and pending keeps listing it (RB-A14.3).
		resp, err = b.site.Cancel(b.ctx, "job-1")
		require.NoError(t, err)
		require.True(t, resp.Cancelled)
		b.pending(t, "job-1")

		hb, err := d.Heartbeat(b.ctx, []protocol.LeaseRef{lease(c)})
		require.NoError(t, err)
		require.Equal(t, []string{"job-1"}, hb.Cancel)
		require.Empty(t, hb.Lost)
		require.False(t, hb.Revoked)
		// Only the holder hears of it.
		hb, err = b.paired(t, "alice2").Heartbeat(b.ctx, nil)
		require.NoError(t, err)
		require.Empty(t, hb.Cancel)
	})
}

func TestRefusal_CancelledJobIsOfferedToNobody(t *testing.T) { // RB-F38
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		resp, err := b.site.Cancel(b.ctx, "job-1")
		require.NoError(t, err)
		require.True(t, resp.Cancelled)
		require.Empty(t, b.claim(t, b.paired(t, "alice"), 8))
		require.Empty(t, b.claim(t, b.paired(t, "alice2"), 8))
		j := b.requireState(t, "job-1", store.Queued)
		require.Nil(t, j.ClaimedBy)
		require.True(t, j.Cancelled)
	})
}

func TestRefusal_CancelOfAnotherSitesJobIsRefused(t *testing.T) { // RB-F39
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		foreign := b.otherSite.Stub("foreign", protocol.KindGenerate, "alice", b.storeNow(t)+jobTTL.Milliseconds())
		_, err := b.store.Enqueue(b.ctx, store.EnqueueInput{SiteID: siteOther, Stub: foreign})
		require.NoError(t, err)

		resp, err := b.site.Do(b.ctx, http.MethodPost, "cancel", []byte(`{"siteId":"site_main","jobId":"foreign"}`))
		require.NoError(t, err)
		requireAnswer(t, resp, 200, `{"cancelled":false}`)
		require.False(t, b.job(t, "foreign").Cancelled)

		resp, err = b.site.Do(b.ctx, http.MethodPost, "cancel", []byte(`{"siteId":"site_main","jobId":"nobody-knows"}`))
		require.NoError(t, err)
		requireAnswer(t, resp, 200, `{"cancelled":false}`)
	})
}

func TestRefusal_RefusedJobIsNotOfferedBackToTheRunnerThatRefusedIt(t *testing.T) { // RB-F40, RB-A10.2
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")

		body := mustJSON(t, protocol.ReleaseRequest{ProtocolVersion: "0", RunnerID: "runner_alice", Leases: []protocol.LeaseRef{lease(c)}, Reason: protocol.ReasonRefused})
		resp, err := d.Do(b.ctx, "release", body)
		require.NoError(t, err)
		requireAnswer(t, resp, 200, `{"released":["job-1"]}`)
		j := b.requireState(t, "job-1", store.Queued)
		require.Nil(t, j.ClaimedBy)

		require.Empty(t, b.claim(t, d, 8))
		b.claimOne(t, b.paired(t, "alice2"), "job-1")
	})
}

func TestRefusal_JobGoesBackToARunnerThatOnlyWentAway(t *testing.T) { // RB-F41
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")

		rel, err := d.Release(b.ctx, []protocol.LeaseRef{lease(c)}, protocol.ReasonShutdown)
		require.NoError(t, err)
		require.Equal(t, []string{"job-1"}, rel.Released)
		b.requireState(t, "job-1", store.Queued)

		again := b.claimOne(t, d, "job-1")
		require.NotEqual(t, c.Lease.ID, again.Lease.ID)
		// The old grant releases nothing now.
		rel, err = d.Release(b.ctx, []protocol.LeaseRef{lease(c)}, protocol.ReasonShutdown)
		require.NoError(t, err)
		require.Empty(t, rel.Released)
	})
}
