package plane_test

// Every refusal of relay-behaviour.md RB-A16, byte for byte, and the orders of
// the auth pipelines (RB-A3, RB-A4) that decide which refusal wins.

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// pairBody is the fixture pairing body for keys presented as owner.
func pairBody(t *testing.T, owner string, device protocol.PublicIdentity) []byte {
	t.Helper()
	return mustJSON(t, protocol.PairRequest{ProtocolVersion: "0", Owner: owner, Device: device})
}

func postPair(t *testing.T, b *bundle, body []byte) peer.RawResponse {
	t.Helper()
	return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/pair", Body: body})
}

// claimedJob enqueues a job for alice and has alice's daemon claim it.
func claimedJob(t *testing.T, b *bundle) (*peer.Daemon, protocol.ClaimedStub) {
	t.Helper()
	d := b.paired(t, "alice")
	b.enqueue(t, b.stub(t, "job-1", "alice"))
	return d, b.claimOne(t, d, "job-1")
}

func fetchBody(t *testing.T, runner, jobID, leaseID string) []byte {
	t.Helper()
	return mustJSON(t, protocol.FetchRequest{ProtocolVersion: "0", RunnerID: runner, JobID: jobID, LeaseID: leaseID})
}

// resultBody is a result sealed by the runner's own device, as the store
// requires of the holder's (P2-D11).
func (b *bundle) resultBody(t *testing.T, runner, jobID, leaseID string) []byte {
	t.Helper()
	device := b.keys[strings.TrimPrefix(runner, "runner_")]
	env := protocol.SealedEnvelope{Ciphertext: "opaque", RecipientKeyID: b.keys["site"].KeyID(), SenderKeyID: device.KeyID(), Direction: protocol.DirectionResult, DeadlineAt: 1}
	return mustJSON(t, protocol.ResultRequest{ProtocolVersion: "0", RunnerID: runner, JobID: jobID, LeaseID: leaseID, Envelope: env, Disposition: protocol.DispositionOK})
}

// payloadBody is a payload sealed to alice's laptop, the holder in every
// test that sends it.
func (b *bundle) payloadBody(t *testing.T, jobID string) []byte {
	t.Helper()
	env := protocol.SealedEnvelope{Ciphertext: "opaque", RecipientKeyID: b.keys["alice"].KeyID(), SenderKeyID: b.keys["site"].KeyID(), Direction: protocol.DirectionPayload, DeadlineAt: 1}
	return mustJSON(t, protocol.PayloadRequest{SiteID: siteMain, JobID: jobID, Envelope: env})
}

// a16Case is one refusal of RB-A16: what to set up and send, and the exact
// answer.
type a16Case struct {
	name   string
	opts   *setupOpts
	send   func(t *testing.T, b *bundle) peer.RawResponse
	status int
	body   func(b *bundle) string
}

func TestEveryA16RefusalByteForByte(t *testing.T) { // RB-A16 #1–#26, RB-F93
	cases := slices.Concat(a16AuthRefusals(), a16RequestRefusals(), a16PairRefusals(), a16SiteWriteRefusals())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, tc.opts, func(t *testing.T, b *bundle) {
				requireAnswer(t, tc.send(t, b), tc.status, tc.body(b))
			})
		})
	}
}

// a16AuthRefusals are RB-A16 #1–#7: the path, the signature and who signs.
func a16AuthRefusals() []a16Case {
	return []a16Case{
		{"01 unknown path", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/literally/anything/claim"})
		}, 404, fixed(bodyNotFoundPath)},
		{"01 unknown endpoint under the base path", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claims"})
		}, 404, fixed(bodyNotFoundPath)},
		{"02 daemon plane unsigned", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/heartbeat", Body: heartbeatBody(t, "runner_alice")})
		}, 401, fixed(bodyNotSigned)},
		{"02 site plane unsigned", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/cancel", Body: []byte(`{"siteId":"site_main","jobId":"x"}`)})
		}, 401, fixed(bodyNotSigned)},
		{"03 runner never paired", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			resp, err := b.daemonAt(t, "alice", b.url, "runner_alice").Do(b.ctx, "claim", claimBody(t, "runner_alice"))
			require.NoError(t, err)
			return resp
		}, 401, fixed(bodyRunnerUnknown)},
		{"04 site not registered", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return siteDo(b.ctx, t, b.siteAs(t, "stranger", "site_nobody"), http.MethodGet, "results", nil)
		}, 401, fixed(bodySiteUnknown)},
		{"05 daemon plane stale", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			d := b.paired(t, "alice")
			body := claimBody(t, "runner_alice")
			return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Header: d.SignHeadersAt("claim", body, b.relayNow()-120_001), Body: body})
		}, 401, func(b *bundle) string { return bodyClockSkew(b.relayNow()) }},
		{"05 site plane stale", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			body := []byte(`{"siteId":"site_main","jobId":"x"}`)
			return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/cancel", Header: b.site.SignHeadersAt("site/cancel", body, b.relayNow()+120_001), Body: body})
		}, 401, func(b *bundle) string { return bodyClockSkew(b.relayNow()) }},
		{"06 daemon plane bad signature", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			b.paired(t, "alice")
			resp, err := b.daemonAt(t, "alice2", b.url, "runner_alice").Do(b.ctx, "claim", claimBody(t, "runner_alice"))
			require.NoError(t, err)
			return resp
		}, 401, fixed(bodyBadSignature)},
		{"06 site plane bad signature", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return siteDo(b.ctx, t, b.siteAs(t, "other", siteMain), http.MethodGet, "pending", nil)
		}, 401, fixed(bodyBadSignature)},
		{"07 revoked", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			d, c := claimedJob(t, b)
			b.project(t, withRevocation("alice"))
			resp, err := d.Do(b.ctx, "release", mustJSON(t, protocol.ReleaseRequest{ProtocolVersion: "0", RunnerID: "runner_alice", Leases: []protocol.LeaseRef{lease(c)}, Reason: "shutdown"}))
			require.NoError(t, err)
			return resp
		}, 403, fixed(bodyRevoked)},
	}
}

// a16RequestRefusals are RB-A16 #8–#16: the body, whose it is, and the job
// and lease it names.
func a16RequestRefusals() []a16Case {
	return []a16Case{
		{"08 daemon schema", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			resp, err := b.paired(t, "alice").Do(b.ctx, "claim", []byte(`{"protocolVersion":"0","runnerId":"runner_alice","capabilities":[],"max":65}`))
			require.NoError(t, err)
			return resp
		}, 400, fixed(bodySchema)},
		{"09 site schema", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			// An extra stub field such as audienceAllow is refused (RB-A11.1, RB-F8).
			body := []byte(`{"siteId":"site_main","stub":{"id":"j","kind":"llm.generate","owner":"alice","site":"` + b.keys["site"].KeyID() +
				`","audience":"named","sizeClass":"small","streaming":false,"deadlineAt":9999999999999,"audienceAllow":["bob"]}}`)
			return siteDo(b.ctx, t, b.site, http.MethodPost, "enqueue", body)
		}, 400, fixed(bodySchema)},
		{"10 body siteId is not the signer", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return siteDo(b.ctx, t, b.site, http.MethodPost, "enqueue", enqueueBody(t, siteOther, b.stub(t, "j", "alice")))
		}, 403, fixed(bodyNotYourSite)},
		{"10 query siteId is not the signer", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/pending?siteId=site_other", Header: b.site.SignHeaders("site/pending", nil)})
		}, 403, fixed(bodyNotYourSite)},
		{"11 signer is not the relay site", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return siteDo(b.ctx, t, b.otherSite, http.MethodPost, "cancel", []byte(`{"siteId":"site_other","jobId":"x"}`))
		}, 403, fixed(bodyNotRoutedForYou)},
		{"12 claim runnerId is not the caller", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			b.paired(t, "alice2")
			resp, err := b.paired(t, "alice").Do(b.ctx, "claim", claimBody(t, "runner_alice2"))
			require.NoError(t, err)
			return resp
		}, 401, fixed(bodyRunnerMismatch)},
		{"13 fetch unknown job", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			resp, err := b.paired(t, "alice").Do(b.ctx, "fetch", fetchBody(t, "runner_alice", "nope", "l"))
			require.NoError(t, err)
			return resp
		}, 404, fixed(bodyUnknownJob)},
		{"13 result unknown job", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			resp, err := b.paired(t, "alice").Do(b.ctx, "result", b.resultBody(t, "runner_alice", "nope", "l"))
			require.NoError(t, err)
			return resp
		}, 404, fixed(bodyUnknownJob)},
		{"14 fetch by a runner that does not hold the job", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			_, c := claimedJob(t, b)
			resp, err := b.paired(t, "alice2").Do(b.ctx, "fetch", fetchBody(t, "runner_alice2", c.ID, c.Lease.ID))
			require.NoError(t, err)
			return resp
		}, 403, fixed(bodyNotHolder)},
		{"14 result by a runner that does not hold the job", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			_, c := claimedJob(t, b)
			resp, err := b.paired(t, "alice2").Do(b.ctx, "result", b.resultBody(t, "runner_alice2", c.ID, c.Lease.ID))
			require.NoError(t, err)
			return resp
		}, 403, fixed(bodyNotHolder)},
		{"15 fetch under a stale lease", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			d, c := claimedJob(t, b)
			resp, err := d.Do(b.ctx, "fetch", fetchBody(t, "runner_alice", c.ID, "00000000-0000-4000-8000-000000000000"))
			require.NoError(t, err)
			return resp
		}, 403, fixed(bodyStaleLease)},
		{"15 result under a stale lease", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			d, c := claimedJob(t, b)
			resp, err := d.Do(b.ctx, "result", b.resultBody(t, "runner_alice", c.ID, "00000000-0000-4000-8000-000000000000"))
			require.NoError(t, err)
			return resp
		}, 403, fixed(bodyStaleLease)},
		{"16 fetch before the seal", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			d, c := claimedJob(t, b)
			resp, err := d.Do(b.ctx, "fetch", fetchBody(t, "runner_alice", c.ID, c.Lease.ID))
			require.NoError(t, err)
			return resp
		}, 409, fixed(bodyNotReady)},
	}
}

// a16PairRefusals are RB-A16 #17–#22: the refusals of POST /byollm/pair.
func a16PairRefusals() []a16Case {
	return []a16Case{
		{"17 pair schema: a device-code pairing body", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return postPair(t, b, []byte(`{"protocolVersion":"0","owner":"alice","device":`+string(mustJSON(t, b.keys["alice"].Public()))+`,"deviceName":"laptop"}`))
		}, 400, fixed(bodyPairSchema)},
		{"18 pair identity not self-consistent", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			dev := b.keys["alice"].Public()
			dev.Encryption = b.keys["bob"].Public().Encryption
			return postPair(t, b, pairBody(t, "alice", dev))
		}, 400, fixed(bodyInconsistent)},
		{"19 pair without consent", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return postPair(t, b, pairBody(t, "carol", b.keys["carol"].Public()))
		}, 403, fixed(bodyNoConsent)},
		{"20 pair while the relay site is unregistered", &setupOpts{Fixture: []fixtureMod{withoutSite(siteMain)}}, func(t *testing.T, b *bundle) peer.RawResponse {
			return postPair(t, b, pairBody(t, "alice", b.keys["alice"].Public()))
		}, 403, fixed(bodyPairSiteUnknown)},
		{"21 pair device not approved", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return postPair(t, b, pairBody(t, "alice", b.keys["stranger"].Public()))
		}, 403, fixed(bodyDeviceNotApproved)},
		{"22 pair device approved for another owner", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return postPair(t, b, pairBody(t, "bob", b.keys["alice"].Public()))
		}, 403, fixed(bodyDeviceOtherOwner)},
	}
}

// a16SiteWriteRefusals are RB-A16 #23–#26: the refusals of a site's
// enqueue and payload.
func a16SiteWriteRefusals() []a16Case {
	return []a16Case{
		{"23 stub naming another site's key", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return siteDo(b.ctx, t, b.site, http.MethodPost, "enqueue", enqueueBody(t, siteMain, b.stub(t, "j", "alice", namedSite("BYOLLM-0000-0000-0000-0000-0000-0000"))))
		}, 403, fixed(bodyStubWrongSite)},
		{"24 job id held by another site", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			// Only a shared store can hold another site's job (RB-G25).
			foreign := b.otherSite.Stub("shared-id", protocol.KindGenerate, "alice", b.storeNow(t)+jobTTL.Milliseconds())
			_, err := b.store.Enqueue(b.ctx, store.EnqueueInput{SiteID: siteOther, Stub: foreign})
			require.NoError(t, err)
			return siteDo(b.ctx, t, b.site, http.MethodPost, "enqueue", enqueueBody(t, siteMain, b.stub(t, "shared-id", "alice")))
		}, 403, fixed(bodyIDTaken)},
		{"25 payload for an unknown job", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return siteDo(b.ctx, t, b.site, http.MethodPost, "payload", b.payloadBody(t, "nope"))
		}, 404, fixed(bodyUnknownJob)},
		{"25 payload for another site's job", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			foreign := b.otherSite.Stub("foreign", protocol.KindGenerate, "alice", b.storeNow(t)+jobTTL.Milliseconds())
			_, err := b.store.Enqueue(b.ctx, store.EnqueueInput{SiteID: siteOther, Stub: foreign})
			require.NoError(t, err)
			return siteDo(b.ctx, t, b.site, http.MethodPost, "payload", b.payloadBody(t, "foreign"))
		}, 404, fixed(bodyUnknownJob)},
		{"26 payload for a queued job", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			b.enqueue(t, b.stub(t, "job-1", "alice"))
			return siteDo(b.ctx, t, b.site, http.MethodPost, "payload", b.payloadBody(t, "job-1"))
		}, 409, fixed(bodyTooLate(store.Queued))},
		{"26 payload for a job already sealed", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			_, c := claimedJob(t, b)
			b.seal(t, c, `{"prompt":"p"}`)
			return siteDo(b.ctx, t, b.site, http.MethodPost, "payload", b.payloadBody(t, "job-1"))
		}, 409, fixed(bodyTooLate(store.Ready))},
	}
}

func fixed(body string) func(*bundle) string { return func(*bundle) string { return body } }

func TestAuthOrder_RevokedRunnerWithAMalformedBodyGets403Not400(t *testing.T) { // RB-A3.4 before RB-A3.6, RB-G6
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.project(t, withRevocation("alice"))
		// The body declares protocol "0" and nothing else it needs.
		for _, endpoint := range []string{"claim", "fetch", "result", "release"} {
			resp, err := d.Do(b.ctx, endpoint, []byte(`{"protocolVersion":"0","nonsense":true}`))
			require.NoError(t, err)
			requireAnswer(t, resp, 403, bodyRevoked)
		}
		// Heartbeat is exempt from revocation, so its schema is what refuses.
		resp, err := d.Do(b.ctx, "heartbeat", []byte(`{"protocolVersion":"0","nonsense":true}`))
		require.NoError(t, err)
		requireAnswer(t, resp, 400, bodySchema)
	})
}

func TestAuthOrder_UnknownRunnerWithAStaleTimestampIsNotRecognised(t *testing.T) { // RB-A3.2 before RB-A3.3
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.daemonAt(t, "alice", b.url, "runner_alice") // never paired
		body := claimBody(t, "runner_alice")
		resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Header: d.SignHeadersAt("claim", body, b.relayNow()-3_600_000), Body: body})
		requireAnswer(t, resp, 401, bodyRunnerUnknown)
	})
}

func TestAuthOrder_StaleAndBadlySignedIsClockSkew(t *testing.T) { // RB-A2.5
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		b.paired(t, "alice")
		impostor := b.daemonAt(t, "stranger", b.url, "runner_alice")
		body := claimBody(t, "runner_alice")
		resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Header: impostor.SignHeadersAt("claim", body, b.relayNow()-200_000), Body: body})
		requireAnswer(t, resp, 401, bodyClockSkew(b.relayNow()))

		bodyS := []byte(`{"siteId":"site_main","jobId":"x"}`)
		impostorSite := b.siteAs(t, "stranger", siteMain)
		resp = b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/cancel", Header: impostorSite.SignHeadersAt("site/cancel", bodyS, b.relayNow()+200_000), Body: bodyS})
		requireAnswer(t, resp, 401, bodyClockSkew(b.relayNow()))
	})
}

func TestAuthOrder_SkewOfExactly120000msIsAcceptedEitherWay(t *testing.T) { // RB-A2.5, RB-D3
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		body := claimBody(t, "runner_alice")
		for _, skew := range []int64{-120_000, 120_000} {
			resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Header: d.SignHeadersAt("claim", body, b.relayNow()+skew), Body: body})
			requireAnswer(t, resp, 200, `{"jobs":[],"leaseMs":60000}`)
			h := b.site.SignHeadersAt("site/pending", nil, b.relayNow()+skew)
			resp = b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/pending?siteId=" + siteMain, Header: h})
			requireAnswer(t, resp, 200, `{"jobs":[]}`)
		}
		for _, skew := range []int64{-120_001, 120_001} {
			resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Header: d.SignHeadersAt("claim", body, b.relayNow()+skew), Body: body})
			requireAnswer(t, resp, 401, bodyClockSkew(b.relayNow()))
		}
	})
}

func TestAuthOrder_SiteSchemaIsCheckedBeforeTheSiteIdAndTheRelaySite(t *testing.T) { // RB-A4.4 before RB-A4.5, RB-A4.6
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		// A read with no siteId at all: 400 after auth.
		resp := b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/results", Header: b.site.SignHeaders("site/results", nil)})
		requireAnswer(t, resp, 400, bodySchema)
		// The other site, malformed: schema first, then "not your site", then routing.
		resp = siteDo(b.ctx, t, b.otherSite, http.MethodPost, "cancel", []byte(`{"siteId":"site_other"}`))
		requireAnswer(t, resp, 400, bodySchema)
		resp = siteDo(b.ctx, t, b.otherSite, http.MethodPost, "cancel", []byte(`{"siteId":"site_main","jobId":"x"}`))
		requireAnswer(t, resp, 403, bodyNotYourSite)
	})
}

func TestPairIsIdempotentAndNamesTheSitesIdentity(t *testing.T) { // RB-A5.7, RB-A5.1, RB-G22
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		want := `{"protocolVersion":"0","runnerId":"runner_alice","site":` + string(mustJSON(t, b.keys["site"].Public())) + `}`
		for range 2 {
			requireAnswer(t, postPair(t, b, pairBody(t, "alice", b.keys["alice"].Public())), 200, want)
		}
		people, err := b.store.Runners(b.ctx, 0)
		require.NoError(t, err)
		require.Len(t, people, 1)
	})
}

func TestPairNeedsNoSignatureButConsentIsCheckedAgainstTheRelaySite(t *testing.T) { // RB-A5.3, RB-C3
	onlyOther := func(f *projection.Fixture, _ keyring) {
		f.Consents = []projection.ConsentRecord{{Owner: "alice", SiteID: siteOther}}
	}
	eachStore(t, &setupOpts{Fixture: []fixtureMod{onlyOther}}, func(t *testing.T, b *bundle) {
		requireAnswer(t, postPair(t, b, pairBody(t, "alice", b.keys["alice"].Public())), 403, bodyNoConsent)
	})
}

func TestSignatureHeaders_GarbageIsAFailedCheckAndRepeatsAreJoined(t *testing.T) { // RB-A2.1, RB-A2.4
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		body := claimBody(t, "runner_alice")
		send := func(edit func(h http.Header)) peer.RawResponse {
			h := d.SignHeaders("claim", body)
			edit(h)
			return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Header: h, Body: body})
		}
		// A signature that does not decode, or decodes to the wrong length, fails like a wrong one.
		for _, sig := range []string{"!!!not base64!!!", "AAAA", strings.Repeat("A", 200)} {
			requireAnswer(t, send(func(h http.Header) { h.Set(protocol.HeaderSignature, sig) }), 401, bodyBadSignature)
		}
		// Header names are case-insensitive.
		requireAnswer(t, send(func(h http.Header) {
			v := h.Get(protocol.HeaderRunner)
			h.Del(protocol.HeaderRunner)
			h["x-byollm-runner"] = []string{v}
		}), 200, emptyClaim)
		// A repeated header reads as its values joined with ", ".
		requireAnswer(t, send(func(h http.Header) { h.Add(protocol.HeaderRunner, "runner_alice") }), 401, bodyRunnerUnknown)
		requireAnswer(t, send(func(h http.Header) { h.Add(protocol.HeaderIssuedAt, h.Get(protocol.HeaderIssuedAt)) }), 401, bodyNotSigned)
		// An empty caller header is no caller.
		requireAnswer(t, send(func(h http.Header) { h.Set(protocol.HeaderRunner, "") }), 401, bodyNotSigned)
	})
}
