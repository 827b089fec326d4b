package plane_test

// Upstream's site-plane-auth cases (RB-F42–RB-F55), over HTTP.

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

func enqueueBody(t *testing.T, siteID string, s protocol.JobStub) []byte {
	t.Helper()
	return mustJSON(t, protocol.EnqueueRequest{SiteID: siteID, Stub: s})
}

func TestSitePlane_UnsignedEnqueueIsRefusedAndStoresNothing(t *testing.T) { // RB-F42
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		body := enqueueBody(t, siteMain, b.stub(t, "job-1", "alice"))
		resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/enqueue", Body: body})
		requireAnswer(t, resp, 401, bodyNotSigned)
		b.requireNoJob(t, "job-1")

		// Two of three headers is still unsigned.
		h := b.site.SignHeaders("site/enqueue", body)
		h.Del(protocol.HeaderSignature)
		resp = b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/enqueue", Header: h, Body: body})
		requireAnswer(t, resp, 401, bodyNotSigned)
		b.requireNoJob(t, "job-1")
	})
}

func TestSitePlane_UnsignedReadsOfWhoIsOnlineAreRefused(t *testing.T) { // RB-F43
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		for _, route := range []string{"pending", "results"} {
			resp := b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/" + route + "?siteId=" + siteMain})
			requireAnswer(t, resp, 401, bodyNotSigned)
		}
	})
}

func TestSitePlane_ReadsOnlyItsOwnCallerHeader(t *testing.T) { // RB-A2.1
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		// A site signature under the daemon plane's caller header is unsigned here.
		h := b.site.SignHeaders("site/pending", nil)
		h.Set(protocol.HeaderRunner, h.Get(protocol.HeaderSite))
		h.Del(protocol.HeaderSite)
		resp := b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/pending?siteId=" + siteMain, Header: h})
		requireAnswer(t, resp, 401, bodyNotSigned)
	})
}

func TestSitePlane_SignatureFromAKeyThatIsNotTheSitesIsRefused(t *testing.T) { // RB-F44, RB-A16 #6
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		impostor := b.siteAs(t, "stranger", siteMain)
		resp, err := impostor.Do(b.ctx, http.MethodPost, "enqueue", enqueueBody(t, siteMain, b.stub(t, "job-1", "alice")))
		require.NoError(t, err)
		requireAnswer(t, resp, 401, bodyBadSignature)
		b.requireNoJob(t, "job-1")
	})
}

func TestSitePlane_SiteTheControlPlaneNeverRegisteredIsRefused(t *testing.T) { // RB-F45, RB-A16 #4
	noSites := func(f *projection.Fixture, _ keyring) { f.Sites = []projection.SiteRecord{} }
	eachStore(t, &setupOpts{Fixture: []fixtureMod{noSites}}, func(t *testing.T, b *bundle) {
		_, err := b.site.Enqueue(b.ctx, b.stub(t, "job-1", "alice"))
		requireRefused(t, err, 401, bodySiteUnknown)
		b.requireNoJob(t, "job-1")
	})
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		// Unknown even with a stale timestamp: registration is checked first.
		nobody := b.siteAs(t, "stranger", "site_nobody")
		h := nobody.SignHeadersAt("site/pending", nil, b.relayNow()-10*60_000)
		resp := b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/pending?siteId=site_nobody", Header: h})
		requireAnswer(t, resp, 401, bodySiteUnknown)
	})
}

func TestSitePlane_RegisteredSiteThisRelayDoesNotRouteForIsRefused(t *testing.T) { // RB-F46, RB-A16 #11, RB-G25
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		s := b.otherSite.Stub("job-1", protocol.KindGenerate, "alice", b.storeNow(t)+jobTTL.Milliseconds())
		_, err := b.otherSite.Enqueue(b.ctx, s)
		requireRefused(t, err, 403, bodyNotRoutedForYou)
		b.requireNoJob(t, "job-1")
		_, err = b.otherSite.Pending(b.ctx)
		requireRefused(t, err, 403, bodyNotRoutedForYou)
	})
}

func TestSitePlane_DaemonIsNeverOfferedAnotherSitesJob(t *testing.T) { // RB-F47
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		// Written straight into the store, as a shared store would hold it.
		foreign := b.otherSite.Stub("foreign", protocol.KindGenerate, "alice", b.storeNow(t)+jobTTL.Milliseconds())
		_, err := b.store.Enqueue(b.ctx, store.EnqueueInput{SiteID: siteOther, Stub: foreign})
		require.NoError(t, err)
		require.Empty(t, b.claim(t, d, 64))
		b.requireState(t, "foreign", store.Queued)
	})
}

func TestSitePlane_BodyNamingASiteTheSignatureDoesNotIsForbidden(t *testing.T) { // RB-F48, RB-A16 #10
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		for name, body := range map[string][]byte{
			"enqueue": enqueueBody(t, siteOther, b.stub(t, "job-1", "alice")),
			"payload": []byte(`{"siteId":"site_other","jobId":"job-1","envelope":{"ciphertext":"x","recipientKeyId":"r","senderKeyId":"s","direction":"payload","deadlineAt":1}}`),
			"cancel":  []byte(`{"siteId":"site_other","jobId":"job-1"}`),
		} {
			resp, err := b.site.Do(b.ctx, http.MethodPost, name, body)
			require.NoError(t, err)
			requireAnswer(t, resp, 403, bodyNotYourSite)
		}
		b.requireNoJob(t, "job-1")
	})
}

func TestSitePlane_SignatureMadeForAnotherEndpointIsRefused(t *testing.T) { // RB-F49, RB-A2.8
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		h := b.site.SignHeaders("site/pending", nil)
		resp := b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/results?siteId=" + siteMain, Header: h})
		requireAnswer(t, resp, 401, bodyBadSignature)
		// The same headers on the route they were made for pass.
		resp = b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/pending?siteId=" + siteMain, Header: h})
		requireAnswer(t, resp, 200, `{"jobs":[]}`)
	})
}

func TestSitePlane_DaemonSignaturePresentedOnTheSitePlaneIsRefused(t *testing.T) { // RB-F50, RB-A2.8
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		body := enqueueBody(t, siteMain, b.stub(t, "job-1", "alice"))

		// Moved as is: the runner id is no registered site.
		dh := d.SignHeaders("claim", body)
		h := http.Header{}
		h.Set(protocol.HeaderSite, dh.Get(protocol.HeaderRunner))
		h.Set(protocol.HeaderIssuedAt, dh.Get(protocol.HeaderIssuedAt))
		h.Set(protocol.HeaderSignature, dh.Get(protocol.HeaderSignature))
		resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/enqueue", Header: h, Body: body})
		requireAnswer(t, resp, 401, bodySiteUnknown)

		// Naming the site, but made by the daemon's key for the daemon plane.
		asSite := b.daemonAt(t, "alice", b.url, siteMain)
		dh = asSite.SignHeaders("site/enqueue", body)
		h.Set(protocol.HeaderSite, siteMain)
		h.Set(protocol.HeaderIssuedAt, dh.Get(protocol.HeaderIssuedAt))
		h.Set(protocol.HeaderSignature, dh.Get(protocol.HeaderSignature))
		resp = b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/enqueue", Header: h, Body: body})
		requireAnswer(t, resp, 401, bodyBadSignature)
		b.requireNoJob(t, "job-1")

		// The real site still works.
		b.enqueue(t, b.stub(t, "job-1", "alice"))
	})
}

func TestSitePlane_RepublishKeepsAClaimedJobAwaitingPayloadWithTheSameLease(t *testing.T) { // RB-F51, RB-A11.4, RB-G13
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		s := b.stub(t, "job-1", "alice")
		b.enqueue(t, s)
		c := b.claimOne(t, d, s.ID)

		changed := s
		changed.DeadlineAt++
		changed.Streaming = true
		resp, err := b.site.Enqueue(b.ctx, changed)
		require.NoError(t, err)
		require.Equal(t, protocol.EnqueueResponse{JobID: s.ID, State: "awaiting-payload"}, resp)

		j := b.requireState(t, s.ID, store.AwaitingPayload)
		require.Equal(t, c.Lease.ID, j.ClaimedBy.LeaseID)
		require.Equal(t, s, j.Stub, "the republished stub is discarded")
		require.Equal(t, c.Lease.ID, b.pending(t, s.ID).LeaseID)
	})
}

func TestSitePlane_RunnerRevokedOnlyByTheRevokedListCannotClaim(t *testing.T) { // RB-F52, RB-A3 order
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		b.project(t, withRevocation("alice")) // alice's consent record stays

		_, err := d.Claim(b.ctx, []string{protocol.KindGenerate}, 8)
		requireRefused(t, err, 403, bodyRevoked)
		// A capability shape the schema rejects still gets 403: revocation
		// is checked before the body.
		resp, err := d.Do(b.ctx, "claim", []byte(`{"protocolVersion":"0","runnerId":"runner_alice","capabilities":[{"kind":"llm.generate"}],"max":1}`))
		require.NoError(t, err)
		requireAnswer(t, resp, 403, bodyRevoked)
		b.requireState(t, "job-1", store.Queued)
	})
}

func TestSitePlane_DaemonClaimSignedTenMinutesAheadNamesTheClock(t *testing.T) { // RB-F54, RB-A16 #5
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		body := claimBody(t, "runner_alice")
		req := peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Header: d.SignHeadersAt("claim", body, b.relayNow()+10*60_000), Body: body}
		resp := b.raw(t, req)
		requireAnswer(t, resp, 401, bodyClockSkew(b.relayNow()))
		var e protocol.ErrorBody
		require.NoError(t, json.Unmarshal(resp.Body, &e))
		require.Contains(t, e.Message, "time")
	})
}

func TestSitePlane_BadDaemonSignatureIsPlainUnauthorized(t *testing.T) { // RB-F55, RB-A16 #6
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		b.paired(t, "alice")
		impostor := b.daemonAt(t, "stranger", b.url, "runner_alice")
		resp, err := impostor.Do(b.ctx, "claim", claimBody(t, "runner_alice"))
		require.NoError(t, err)
		requireAnswer(t, resp, 401, bodyBadSignature)
	})
}

// siteDo is a site-plane request with an explicit context, for table cases.
func siteDo(ctx context.Context, t *testing.T, s *peer.Site, method, name string, body []byte) peer.RawResponse {
	t.Helper()
	resp, err := s.Do(ctx, method, name, body)
	require.NoError(t, err)
	return resp
}
