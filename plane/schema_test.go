package plane_test

// Schema edges that only show over the wire (relay-behaviour.md RB-A6, RB-A9, RB-A10,
// RB-A14, RB-G5, RB-G16, RB-G18), and the deployment posture audit (RB-F10).

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

func TestRB_G18_IntegersAcceptIntegralFormsAndLeaseItemsAreNotStrict(t *testing.T) {
	eachStore(t, &setupOpts{LeaseMs: 5000}, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"), b.stub(t, "job-2", "alice"), b.stub(t, "job-3", "alice"))

		resp, err := d.Do(b.ctx, "claim", []byte(`{"protocolVersion":"0","runnerId":"runner_alice","capabilities":[],"max":2.0}`))
		require.NoError(t, err)
		requireAnswer(t, resp, 200, `{"jobs":[],"leaseMs":5000}`)
		for _, bad := range []string{"1.5", "0", "65", `"1"`, "-1"} {
			resp, err = d.Do(b.ctx, "claim", []byte(`{"protocolVersion":"0","runnerId":"runner_alice","capabilities":[],"max":`+bad+`}`))
			require.NoError(t, err)
			requireAnswer(t, resp, 400, bodySchema)
		}

		// max 2.0 grants two, and leaseMs is the configured lease.
		caps := string(mustJSON(t, peer.Capabilities([]string{protocol.KindGenerate})))
		claim, err := d.Do(b.ctx, "claim", []byte(`{"protocolVersion":"0","runnerId":"runner_alice","capabilities":`+caps+`,"max":2.0}`))
		require.NoError(t, err)
		require.Equal(t, 200, claim.Status)
		require.Contains(t, string(claim.Body), `"leaseMs":5000`)
		require.Equal(t, store.AwaitingPayload, b.job(t, "job-2").State)
		require.Equal(t, store.Queued, b.job(t, "job-3").State)
		l1 := b.job(t, "job-1").ClaimedBy.LeaseID
		l2 := b.job(t, "job-2").ClaimedBy.LeaseID

		// Lease items carry unknown keys without complaint; the top level does not.
		hb := `{"protocolVersion":"0","runnerId":"runner_alice","daemonVersion":"x","capabilities":[],"paused":true,` +
			`"activeLeases":[{"jobId":"job-1","leaseId":"` + l1 + `","startedAt":1,"note":{"any":"thing"}}]}`
		resp, err = d.Do(b.ctx, "heartbeat", []byte(hb))
		require.NoError(t, err)
		requireAnswer(t, resp, 200, `{"revoked":false,"cancel":[],"lost":[],"serverTime":`+itoa(b.relayNow())+`}`)
		resp, err = d.Do(b.ctx, "heartbeat", []byte(hb[:len(hb)-1]+`,"awaitingConsent":false}`))
		require.NoError(t, err)
		requireAnswer(t, resp, 400, bodySchema)

		rel := `{"protocolVersion":"0","runnerId":"runner_alice","reason":"shutdown","leases":[{"jobId":"job-2","leaseId":"` + l2 + `","extra":true}]}`
		resp, err = d.Do(b.ctx, "release", []byte(rel))
		require.NoError(t, err)
		requireAnswer(t, resp, 200, `{"released":["job-2"]}`)
		// reason is required on the wire.
		resp, err = d.Do(b.ctx, "release", []byte(`{"protocolVersion":"0","runnerId":"runner_alice","leases":[]}`))
		require.NoError(t, err)
		requireAnswer(t, resp, 400, bodySchema)
	})
}

func TestRB_G5_OnlyClaimChecksTheBodyRunnerIdAndOnlyAfterTheSchema(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		// Schema first: a mismatched runner id in a malformed claim is a 400.
		resp, err := d.Do(b.ctx, "claim", []byte(`{"protocolVersion":"0","runnerId":"runner_bob","capabilities":[],"max":0}`))
		require.NoError(t, err)
		requireAnswer(t, resp, 400, bodySchema)
		resp, err = d.Do(b.ctx, "claim", claimBody(t, "runner_bob"))
		require.NoError(t, err)
		requireAnswer(t, resp, 401, bodyRunnerMismatch)

		// Elsewhere the body's runner id is read and ignored: the signer acts.
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")
		resp, err = d.Do(b.ctx, "heartbeat", heartbeatBody(t, "runner_bob", lease(c)))
		require.NoError(t, err)
		requireAnswer(t, resp, 200, `{"revoked":false,"cancel":[],"lost":[],"serverTime":`+itoa(b.relayNow())+`}`)
		resp, err = d.Do(b.ctx, "fetch", fetchBody(t, "runner_bob", c.ID, c.Lease.ID))
		require.NoError(t, err)
		requireAnswer(t, resp, 409, bodyNotReady)
		resp, err = d.Do(b.ctx, "release", mustJSON(t, protocol.ReleaseRequest{ProtocolVersion: "0", RunnerID: "runner_bob", Leases: []protocol.LeaseRef{lease(c)}, Reason: "pause"}))
		require.NoError(t, err)
		requireAnswer(t, resp, 200, `{"released":["job-1"]}`)
	})
}

func TestRB_G16_ReadQueryIsUnsignedFirstValueWinsAndDecoded(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		h := b.site.SignHeaders("site/results", nil)
		for query, want := range map[string]string{
			"?siteId=site%5Fmain":                 `{"jobs":[]}`,
			"?siteId=site_main&siteId=site_other": `{"jobs":[]}`,
			"?other=1&siteId=site_main":           `{"jobs":[]}`,
			"?siteId=site_other&siteId=site_main": bodyNotYourSite,
			"?siteId=site+main":                   bodyNotYourSite,
			"?siteId=":                            bodySchema,
			"?siteid=site_main":                   bodySchema,
		} {
			resp := b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/results" + query, Header: h})
			status := 200
			switch want {
			case bodyNotYourSite:
				status = 403
			case bodySchema:
				status = 400
			}
			requireAnswer(t, resp, status, want)
		}
	})
}

func TestEnqueueAcceptsAnyOwnerAndAnExpiredDeadline(t *testing.T) { // RB-A4 (no consent on the site plane), RB-A11.5, RB-G13, RB-G24
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		b.enqueue(t, b.stub(t, "nobodys", "someone who never consented"))
		b.enqueue(t, b.stub(t, "expired", "alice", deadline(b.storeNow(t)-1)))
		// The expired one is gone at the next sweep; the other waits, unroutable.
		_, err := b.site.Pending(b.ctx)
		require.NoError(t, err)
		b.requireNoJob(t, "expired")
		require.Empty(t, b.claim(t, b.paired(t, "alice"), 8))
		b.requireState(t, "nobodys", store.Queued)
	})
}

func TestDeploymentPosture_RefusesEveryStrangerInJSON(t *testing.T) { // RB-F10, RB-F11, RB-E6
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		enq := enqueueBody(t, siteMain, b.stub(t, "job-1", "alice"))
		stranger := b.siteAs(t, "stranger", siteMain)
		strangerDaemon := b.daemonAt(t, "stranger", b.url, "runner_alice")
		b.paired(t, "alice")
		for name, resp := range map[string]peer.RawResponse{
			"unsigned enqueue":        b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/enqueue", Body: enq}),
			"unsigned pending":        b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/pending?siteId=" + siteMain}),
			"unsigned results":        b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/results?siteId=" + siteMain}),
			"unsigned claim":          b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: claimBody(t, "runner_alice")}),
			"stranger-signed enqueue": siteDo(b.ctx, t, stranger, http.MethodPost, "enqueue", enq),
			"stranger-signed claim":   b.raw(t, signedDaemon(strangerDaemon, http.MethodPost, "/byollm/claim", "claim", claimBody(t, "runner_alice"))),
			"anything/claim":          b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/literally/anything/claim"}),
			"debug page":              b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/debug"}),
		} {
			require.Contains(t, []int{401, 403, 404}, resp.Status, name)
			require.Equal(t, []string{"application/json"}, resp.Header.Values("Content-Type"), name)
			var body protocol.ErrorBody
			require.NoError(t, json.Unmarshal(resp.Body, &body), name)
			require.NotEmpty(t, body.Error, name)
		}
		b.requireNoJob(t, "job-1")
	})
}

func TestRB_G23_ClaimNarrowsByKindOnlyAmongTheCapabilityFields(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t,
			b.stub(t, "big-public", "alice", audience(protocol.AudiencePublic), streaming(true), func(s *protocol.JobStub) { s.SizeClass = protocol.SizeClassUnbounded }),
			b.stub(t, "chat", "alice", kind(protocol.KindChat)),
		)
		// A "self" offer scope and an unusual backend do not stop a public,
		// unbounded, streaming job; only the kind narrows.
		caps := []protocol.Capability{{Kind: protocol.KindGenerate, BackendID: "claude-cli", BackendClass: "process", Model: "m", OfferScope: protocol.OfferScopeSelf}}
		resp, err := d.ClaimWith(b.ctx, caps, 8)
		require.NoError(t, err)
		require.Len(t, resp.Jobs, 1)
		require.Equal(t, "big-public", resp.Jobs[0].ID)
		b.requireState(t, "chat", store.Queued)
		// No capabilities at all claims nothing.
		resp, err = d.ClaimWith(b.ctx, []protocol.Capability{}, 8)
		require.NoError(t, err)
		require.Empty(t, resp.Jobs)
		b.requireState(t, "chat", store.Queued)
	})
}
