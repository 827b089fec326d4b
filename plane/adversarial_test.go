package plane_test

// Attacks on the protocol, over real sockets and on every store: replays
// inside the freshness window, signatures moved between endpoints and
// planes, query smuggling, and callers the projection stopped trusting
// while they held work. docs/security.md lists each with its test; the
// tests that already covered an attack elsewhere are named there too.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// recorded is a request exactly as it went out, and its first answer.
type recorded struct {
	name  string
	req   peer.RawRequest
	first peer.RawResponse
}

// recorder sends raw requests and keeps them for replaying.
type recorder struct {
	b    *bundle
	sent []recorded
}

func (r *recorder) send(t *testing.T, name string, req peer.RawRequest) peer.RawResponse {
	t.Helper()
	resp := r.b.raw(t, req)
	require.Equal(t, http.StatusOK, resp.Status, "%s: %s", name, resp.Body)
	r.sent = append(r.sent, recorded{name: name, req: req, first: resp})
	return resp
}

func (r *recorder) daemon(t *testing.T, d *peer.Daemon, endpoint string, body []byte) peer.RawResponse {
	t.Helper()
	return r.send(t, endpoint, signedDaemon(d, http.MethodPost, "/byollm/"+endpoint, endpoint, body))
}

func (r *recorder) site(t *testing.T, method, name, query string, body []byte) peer.RawResponse {
	t.Helper()
	return r.send(t, "site/"+name, peer.RawRequest{Method: method, Path: "/relay/site/" + name + query, Header: r.b.site.SignHeaders("site/"+name, body), Body: body})
}

// Every signed request of a whole job's life, replayed byte for byte while
// its timestamp is still fresh, changes nothing stored and gets an answer
// that only restates what happened: a duplicate result, a finished job, an
// empty claim. Once the window has passed, every signed replay is refused.
func TestAdversarial_ReplaysInsideTheFreshnessWindowChangeNothing(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		r := &recorder{b: b}
		d := b.daemonAt(t, "alice", b.url, "runner_alice")
		r.send(t, "pair", peer.RawRequest{Method: http.MethodPost, Path: "/byollm/pair", Body: pairBody(t, "alice", b.keys["alice"].Public())})
		r.site(t, http.MethodPost, "enqueue", "", enqueueBody(t, siteMain, b.stub(t, "job-1", "alice")))
		r.site(t, http.MethodPost, "enqueue", "", enqueueBody(t, siteMain, b.stub(t, "job-2", "alice")))
		var claimed protocol.ClaimResponse
		require.NoError(t, json.Unmarshal(r.daemon(t, d, "claim", claimBody(t, "runner_alice")).Body, &claimed))
		require.Len(t, claimed.Jobs, 2)
		c1, c2 := claimed.Jobs[0], claimed.Jobs[1]
		r.site(t, http.MethodGet, "pending", "?siteId="+siteMain, nil)
		r.site(t, http.MethodPost, "payload", "", b.payloadBody(t, c1.ID))
		r.daemon(t, d, "fetch", fetchBody(t, "runner_alice", c1.ID, c1.Lease.ID))
		r.daemon(t, d, "heartbeat", heartbeatBody(t, "runner_alice", lease(c1), lease(c2)))
		r.daemon(t, d, "result", b.resultBody(t, "runner_alice", c1.ID, c1.Lease.ID))
		r.daemon(t, d, "release", mustJSON(t, protocol.ReleaseRequest{ProtocolVersion: "0", RunnerID: "runner_alice", Leases: []protocol.LeaseRef{lease(c2)}, Reason: protocol.ReasonRefused}))
		r.site(t, http.MethodPost, "cancel", "", []byte(`{"siteId":"site_main","jobId":"job-2"}`))
		r.site(t, http.MethodGet, "results", "?siteId="+siteMain, nil)
		before := b.dumpState(t)

		// Replayed well inside the window, as an eavesdropper could.
		b.clock.Advance(100 * time.Second)
		for _, rec := range r.sent {
			resp := b.raw(t, rec.req)
			switch rec.name {
			case "pair", "site/results", "site/cancel":
				requireAnswer(t, resp, 200, string(rec.first.Body))
			case "site/pending":
				// A read answers with what is true now: nothing awaits a payload.
				requireAnswer(t, resp, 200, `{"jobs":[]}`)
			case "site/enqueue":
				require.Equal(t, 200, resp.Status)
				require.Regexp(t, `^\{"jobId":"job-[12]","state":"(done|queued)"\}$`, string(resp.Body), "the existing job, unchanged")
			case "claim":
				requireAnswer(t, resp, 200, emptyClaim)
			case "site/payload":
				requireAnswer(t, resp, 409, bodyTooLate(store.Done))
			case "fetch":
				requireAnswer(t, resp, 409, bodyAlreadyFinished)
			case "heartbeat":
				requireAnswer(t, resp, 200, `{"revoked":false,"cancel":[],"lost":["job-2"],"serverTime":`+itoa(b.relayNow())+`}`)
			case "result":
				requireAnswer(t, resp, 200, `{"accepted":false,"duplicate":true,"state":"done"}`)
			case "release":
				requireAnswer(t, resp, 200, `{"released":[]}`)
			default:
				t.Fatalf("no expectation for %s", rec.name)
			}
			require.Equal(t, before, b.dumpState(t), "replaying %s changed the state", rec.name)
		}

		// Past the window every signed replay is stale; pair needs no signature.
		b.clock.Advance(20*time.Second + time.Millisecond)
		for _, rec := range r.sent {
			resp := b.raw(t, rec.req)
			if rec.name == "pair" {
				require.Equal(t, 200, resp.Status)
				continue
			}
			requireAnswer(t, resp, 401, bodyClockSkew(b.relayNow()))
		}
		require.Equal(t, before, b.dumpState(t))
	})
}

// What a replayed claim can do while jobs wait: grant them to the device
// that signed it, never to anyone else. Whoever replays it learns nothing
// (the answer goes to them, but it is routing metadata, and the payload is
// sealed to the signer's key), and the job returns to the queue when the
// sealing window lapses unused. docs/security.md lists this as accepted.
func TestAdversarial_ReplayedClaimOnlyEverGrantsToTheDeviceThatSignedIt(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		req := signedDaemon(d, http.MethodPost, "/byollm/claim", "claim", claimBody(t, "runner_alice"))
		requireAnswer(t, b.raw(t, req), 200, emptyClaim)

		b.enqueue(t, b.stub(t, "job-1", "alice"))
		b.clock.Advance(time.Minute)
		resp := b.raw(t, req)
		require.Equal(t, 200, resp.Status)
		j := b.requireState(t, "job-1", store.AwaitingPayload)
		require.Equal(t, "runner_alice", j.ClaimedBy.RunnerID)
		require.Equal(t, b.keys["alice"].Public(), b.pending(t, "job-1").Device, "the site seals to the signer's key")

		b.advance(protocol.AwaitingPayloadMs * time.Millisecond)
		b.claimOne(t, b.paired(t, "alice2"), "job-1")
	})
}

func TestAdversarial_DaemonSignatureForOneEndpointIsRefusedOnEveryOther(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		body := claimBody(t, "runner_alice")
		h := d.SignHeaders("claim", body)
		for _, endpoint := range []string{"fetch", "result", "heartbeat", "release"} {
			resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/" + endpoint, Header: h, Body: body})
			requireAnswer(t, resp, 401, bodyBadSignature)
		}
		// Onto the site plane, under the site's header: no such site.
		sh := http.Header{}
		sh.Set(protocol.HeaderSite, h.Get(protocol.HeaderRunner))
		sh.Set(protocol.HeaderIssuedAt, h.Get(protocol.HeaderIssuedAt))
		sh.Set(protocol.HeaderSignature, h.Get(protocol.HeaderSignature))
		requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/cancel", Header: sh, Body: body}), 401, bodySiteUnknown)
		// The endpoint is the last path segment (RB-G15), so the same request
		// under another prefix is the same endpoint and passes.
		requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/any/where/claim", Header: h, Body: body}), 200, emptyClaim)

		// Site signatures are bound to their endpoint the same way.
		cancel := []byte(`{"siteId":"site_main","jobId":"x"}`)
		sh = b.site.SignHeaders("site/cancel", cancel)
		requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/enqueue", Header: sh, Body: cancel}), 401, bodyBadSignature)
		requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/cancel", Header: sh, Body: cancel}), 200, `{"cancelled":false}`)
	})
}

// The reverse of TestSitePlane_DaemonSignaturePresentedOnTheSitePlaneIsRefused.
func TestAdversarial_SiteKeyOnTheDaemonPlaneIsRefused(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		b.paired(t, "alice")
		body := claimBody(t, "runner_alice")
		asDaemon := func(caller string) peer.RawResponse {
			h := http.Header{}
			protocol.SignRequest(h, protocol.HeaderRunner, b.keys["site"].IdentityPrivate(), "claim", caller, b.relayNow(), body)
			return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Header: h, Body: body})
		}
		// Naming itself, the site is no runner anyone paired.
		requireAnswer(t, asDaemon(siteMain), 401, bodyRunnerUnknown)
		// Naming a paired runner, its key is not that runner's.
		requireAnswer(t, asDaemon("runner_alice"), 401, bodyBadSignature)
		// A site signature as is, under the site's header, is unsigned here.
		h := b.site.SignHeaders("claim", body)
		requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Header: h, Body: body}), 401, bodyNotSigned)
	})
}

// The site-plane reads take siteId from the query, which no signature
// covers (RB-G16); whatever it says, only the signer's own siteId is served.
// Complements "10 query siteId is not the signer" of
// TestEveryA16RefusalByteForByte and TestRB_G16_ReadQueryIsUnsignedFirstValueWinsAndDecoded.
func TestAdversarial_SiteIDInTheQueryThatTheSignatureDoesNotNameIsRefused(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		b.claimOne(t, d, "job-1")
		for _, route := range []string{"pending", "results"} {
			h := b.site.SignHeaders("site/"+route, nil)
			for query, want := range map[string]string{
				"?siteId=site_other":         bodyNotYourSite,
				"?siteId=SITE_MAIN":          bodyNotYourSite,
				"?siteId=site_main%00":       bodyNotYourSite,
				"?siteId=site_main%20":       bodyNotYourSite,
				"?siteId=%20site_main":       bodyNotYourSite,
				"?siteId=site%5Fother":       bodyNotYourSite,
				"?siteId=%EF%BB%BFsite_main": bodyNotYourSite,
				"?siteId=site_main%FF":       bodySchema,
				"?siteId[]=site_main":        bodySchema,
				"?SiteId=site_main":          bodySchema,
				"?siteId":                    bodySchema,
			} {
				resp := b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/" + route + query, Header: h})
				status := 403
				if want == bodySchema {
					status = 400
				}
				requireAnswer(t, resp, status, want)
			}
			// The other registered site, asking about the relay's site in
			// the query, is still not the relay's site.
			oh := b.otherSite.SignHeaders("site/"+route, nil)
			requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/" + route + "?siteId=site_main", Header: oh}), 403, bodyNotYourSite)
		}
	})
}

// A device removed from the projection while it holds a job can neither
// fetch the payload nor deliver a result; the job goes back to the queue
// when its lease runs out and the owner's other device can take it.
// Complements TestRB_G7_RunnerWhoseDeviceRowIsGoneIsNotRecognised.
func TestAdversarial_DeviceRemovedMidJobCanNeitherFetchNorDeliver(t *testing.T) {
	eachStore(t, &setupOpts{LeaseMs: 5000}, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")
		b.seal(t, c, `{"prompt":"p"}`)
		b.project(t, withoutDevice("runner_alice"))
		before := b.dumpState(t)

		for endpoint, body := range map[string][]byte{
			"fetch":     fetchBody(t, "runner_alice", c.ID, c.Lease.ID),
			"result":    b.resultBody(t, "runner_alice", c.ID, c.Lease.ID),
			"heartbeat": heartbeatBody(t, "runner_alice", lease(c)),
			"release":   mustJSON(t, protocol.ReleaseRequest{ProtocolVersion: "0", RunnerID: "runner_alice", Leases: []protocol.LeaseRef{lease(c)}, Reason: protocol.ReasonShutdown}),
		} {
			resp, err := d.Do(b.ctx, endpoint, body)
			require.NoError(t, err)
			requireAnswer(t, resp, 401, bodyRunnerUnknown)
		}
		require.Equal(t, before, b.dumpState(t))
		_, err := d.Pair(b.ctx, "alice")
		requireRefused(t, err, 403, bodyDeviceNotApproved)

		b.advance(5 * time.Second)
		other := b.paired(t, "alice2")
		again := b.claimOne(t, other, "job-1")
		require.NotEqual(t, c.Lease.ID, again.Lease.ID)
	})
}

// Consent revoked while a device runs a job: its result is refused and
// never reaches the site, the heartbeat tells it routing is revoked, and
// the job returns to the queue when the lease lapses. When consent comes
// back the device claims afresh; the old grant stays dead.
// Complements TestFreezeGate5_RevocationKillsRoutingWithinOneHeartbeat.
func TestAdversarial_ConsentRevokedMidJobLeavesNoResultBehind(t *testing.T) {
	eachStore(t, &setupOpts{LeaseMs: 5000}, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"))
		c := b.claimOne(t, d, "job-1")
		b.seal(t, c, `{"prompt":"p"}`)
		_, err := d.Fetch(b.ctx, c.ID, c.Lease.ID)
		require.NoError(t, err)

		b.project(t, withRevocation("alice"))
		resp, err := d.Do(b.ctx, "result", b.resultBody(t, "runner_alice", c.ID, c.Lease.ID))
		require.NoError(t, err)
		requireAnswer(t, resp, 403, bodyRevoked)
		j := b.requireState(t, c.ID, store.Running)
		require.Nil(t, j.Result)
		fin, err := b.site.Results(b.ctx)
		require.NoError(t, err)
		require.Empty(t, fin.Jobs)

		hb, err := d.Heartbeat(b.ctx, []protocol.LeaseRef{lease(c)})
		require.NoError(t, err)
		require.True(t, hb.Revoked)
		require.Equal(t, []string{c.ID}, hb.Lost)

		b.advance(5 * time.Second)
		_, err = b.site.Pending(b.ctx) // sweeps
		require.NoError(t, err)
		b.requireState(t, c.ID, store.Queued)

		b.project(t, func(f *projection.Fixture, _ keyring) { f.Revoked = nil })
		again := b.claimOne(t, d, c.ID)
		require.NotEqual(t, c.Lease.ID, again.Lease.ID)
		resp, err = d.Do(b.ctx, "result", b.resultBody(t, "runner_alice", c.ID, c.Lease.ID))
		require.NoError(t, err)
		requireAnswer(t, resp, 403, bodyStaleLease)
	})
}

// A stub whose owner never consented to the site is accepted (the site
// plane checks no consent, RB-G24) and reaches no device: not the owner's,
// who cannot even pair, and not one whose roster names the owner. Once the
// owner consents, the roster device may run it.
// Complements TestEnqueueAcceptsAnyOwnerAndAnExpiredDeadline.
func TestAdversarial_StubWhoseOwnerNeverConsentedReachesNoDevice(t *testing.T) {
	opts := &setupOpts{Fixture: []fixtureMod{withRoster("alice", "carol")}}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		b.enqueue(t, b.stub(t, "carols", "carol", audience(protocol.AudiencePublic)), b.stub(t, "carols-named", "carol", audience(protocol.AudienceNamed)))
		_, err := b.daemon(t, "carol").Pair(b.ctx, "carol")
		requireRefused(t, err, 403, bodyNoConsent)
		for _, name := range []string{"alice", "alice2", "bob"} {
			require.Empty(t, b.claim(t, b.paired(t, name), protocol.MaxClaim), name)
		}
		b.requireState(t, "carols", store.Queued)

		b.project(t, withConsent("carol", false))
		got := b.claim(t, b.paired(t, "alice"), protocol.MaxClaim)
		require.Len(t, got, 2)
	})
}

// claim's max at and beyond its bounds (RB-A6.1, RB-G18): integers 1 to 64 in
// any JSON form that means one; everything else is a schema refusal that
// grants nothing. Complements TestRB_G18_IntegersAcceptIntegralFormsAndLeaseItemsAreNotStrict.
func TestAdversarial_ClaimMaxAtAndBeyondTheBounds(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		const jobs = 1 + 2 + 10 + 64 + 1
		for i := range jobs {
			b.enqueue(t, b.stub(t, fmt.Sprintf("job-%03d", i), "alice"))
		}
		caps := string(mustJSON(t, peer.Capabilities([]string{protocol.KindGenerate})))
		claim := func(max string) peer.RawResponse {
			resp, err := d.Do(b.ctx, "claim", []byte(`{"protocolVersion":"0","runnerId":"runner_alice","capabilities":`+caps+`,"max":`+max+`}`))
			require.NoError(t, err)
			return resp
		}
		queued := func() int {
			all, err := b.store.Jobs(b.ctx, 0)
			require.NoError(t, err)
			n := 0
			for _, j := range all {
				if j.State == store.Queued {
					n++
				}
			}
			return n
		}

		for _, bad := range []string{"0", "65", "1.5", "-1", "1e400", "-1e400", "64.5", "1e-1", "9007199254740993", `"1"`, "null", "true", "[1]"} {
			requireAnswer(t, claim(bad), 400, bodySchema)
			require.Equal(t, jobs, queued(), "max %s granted something", bad)
		}
		for _, bad := range []string{"0x10", "+1", "01", ".5"} {
			// Not JSON numbers at all, so the body is no JSON, and declares
			// no version either (P2-A1 when "2" is served).
			b.requireUndeclared(t, claim(bad), 400, bodySchema)
			require.Equal(t, jobs, queued(), "max %s granted something", bad)
		}
		left := jobs
		for _, tc := range []struct {
			max  string
			want int
		}{{"1", 1}, {"2.0", 2}, {"1e1", 10}, {"64", 64}, {"6.4e1", 1}} {
			resp := claim(tc.max)
			require.Equal(t, 200, resp.Status, "max %s: %s", tc.max, resp.Body)
			var got protocol.ClaimResponse
			require.NoError(t, json.Unmarshal(resp.Body, &got))
			require.Len(t, got.Jobs, tc.want, "max %s", tc.max)
			left -= tc.want
			require.Equal(t, left, queued())
		}
	})
}
