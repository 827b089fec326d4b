package plane_test

// Protocol "2"'s decisions (spec protocol-2.md §10, P2-D1–P2-D11) and the
// ambiguities it settles (§2.4.6, P2-A1–P2-A10), each a named test through real
// sockets on every store.

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/plane"
	"github.com/byollm/relayd/plane/codec2"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// P2-D1: a start refused because too many codes are pending says when to
// come back, in whole seconds, in the body and in Retry-After alike; the
// reference says neither.
func TestP2_D1_PairingAtCapacitySaysWhenToComeBackInSeconds(t *testing.T) {
	opts := bothProtocols()
	opts.V2.PairingCapacity = 1
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		require.Equal(t, http.StatusOK, b.pair2(t, pairStartBody(b.keys["stranger"].Public())).Status)
		resp := b.pair2(t, pairStartBody(b.keys["alice"].Public()))
		requireAnswer(t, resp, http.StatusTooManyRequests,
			`{"error":"rate-limited","message":"too many pairings are in progress right now — try again in a few minutes","retryAfter":60}`)
		require.Equal(t, "60", resp.Header.Get("Retry-After"))
		wire, err := proto2.DecodeWireError(resp.Body)
		require.NoError(t, err, "the daemon reads it as a WireError")
		require.Equal(t, int64(60), wire.RetryAfter)
		require.Equal(t, int64(60), int64(codec2.PairingRetryAfterSeconds))
		// The same keypair starting again replaces its own code (§5.5).
		require.Equal(t, http.StatusOK, b.pair2(t, pairStartBody(b.keys["stranger"].Public())).Status)
	})
}

// envelopeOf returns an envelope whose serialised size is exactly n UTF-16
// code units, as §3.12.1 counts them.
func envelopeOf(t *testing.T, n int64, recipient, sender, direction string) protocol.SealedEnvelope {
	t.Helper()
	e := protocol.SealedEnvelope{RecipientKeyID: recipient, SenderKeyID: sender, Direction: direction, DeadlineAt: 1800086400000}
	e.Ciphertext = strings.Repeat("A", int(n-proto2.EnvelopeBytes(e)))
	require.Equal(t, n, proto2.EnvelopeBytes(e))
	return e
}

// P2-D2: protocol "2" applies the reference's 6 MiB rule exactly, before the
// store, on payload and result; neither --max-ciphertext-bytes (4 MiB by
// default, a protocol "0" cap) nor the default body cap refuses an
// envelope the rule accepts.
func TestP2_D2_V2AppliesExactlyTheSixMiBEnvelopeRule(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		require.Less(t, int64(protocol.DefaultMaxCiphertextBytes), int64(proto2.MaxEnvelopeBytes))
		site := b.site2(t, "site", siteMain)
		d := b.device2(t, "alice")
		ceiling := envelopeOf(t, proto2.MaxEnvelopeBytes, "r", "s", "payload")
		over := envelopeOf(t, proto2.MaxEnvelopeBytes+1, "r", "s", "payload")
		tooLarge := `{"error":"bad-request","message":"this message is 6.1 MB and the limit is 6.0 MB — it is a limit on one message rather than on how many you send. Split the work into smaller jobs and send them separately. Every plan has the same ceiling."}`

		// Exactly at the ceiling the rule passes, so the store answers.
		requireAnswer(t, site.payload(t, "nobody-holds-this", ceiling), http.StatusNotFound, bodyUnknownJob)
		requireAnswer(t, site.payload(t, "nobody-holds-this", over), http.StatusBadRequest, tooLarge)
		ceiling = envelopeOf(t, proto2.MaxEnvelopeBytes, "r", "s", "result")
		over = envelopeOf(t, proto2.MaxEnvelopeBytes+1, "r", "s", "result")
		requireAnswer(t, d.result(t, "nobody-holds-this", "lease", ceiling), http.StatusNotFound, bodyUnknownJob)
		requireAnswer(t, d.result(t, "nobody-holds-this", "lease", over), http.StatusBadRequest, tooLarge)
	})
}

// P2-D4: with no grant author, a claim offers a device only its own owner's
// jobs; a roster owner's device is not offered a member's team job, which
// the published daemon would claim only to refuse.
func TestP2_D4_ClaimOffersOnlyTheDeviceOwnersJobs(t *testing.T) {
	eachStore(t, bothProtocols(withRoster("bob", "alice")), func(t *testing.T, b *bundle) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "alice-team", "alice"), site.stub2(t, "bob-team", "bob"))
		bob := b.device2(t, "bob")
		jobs := bob.claimed(t, 8)
		require.Len(t, jobs, 1)
		require.Equal(t, "bob-team", jobs[0].ID)
		require.Empty(t, bob.claimed(t, 8), "alice's team job is not offered to bob's device")
		alice := b.device2(t, "alice")
		jobs = alice.claimed(t, 8)
		require.Len(t, jobs, 1)
		require.Equal(t, "alice-team", jobs[0].ID)
	})
}

// P2-D5: a relay serving "2" says on /readyz that no enqueue policy is
// configured; one serving "0" alone has no such policy to lack.
func TestP2_D5_ReadyzSaysNoEnqueuePolicyIsConfigured(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *setupOpts
		want string
	}{
		{"protocols 0,2", bothProtocols(), `{"status":"ready","projection":"%s","enqueuePolicy":"no enqueue policy is configured: every well-formed protocol \"2\" job is accepted at enqueue"}`},
		{"protocol 0", &setupOpts{Protocols: plane.Protocols{V0: true}}, `{"status":"ready","projection":"%s"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, tc.opts, func(t *testing.T, b *bundle) {
				resp := b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/readyz"})
				requireAnswer(t, resp, http.StatusOK, strings.Replace(tc.want, "%s", b.source.Current().Hash(), 1))
			})
		})
	}
	require.Contains(t, plane.NoEnqueuePolicy, "no enqueue policy is configured")
}

// logLines collects a relay's log records as JSON lines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// P2-D6: a sealing window that lapses is logged when a sweep sees it (the
// count is relayd_sweep_sealing_lapsed_total, see metrics).
func TestP2_D6_SealingWindowLapsesAreLogged(t *testing.T) {
	logs := &logLines{}
	opts := bothProtocols()
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "never-sealed", "alice"))
		require.Len(t, b.device2(t, "alice").claimed(t, 1), 1)
		b.advance(protocol.AwaitingPayloadMs * time.Millisecond)
		resp := site.get(t, "pending")
		requireAnswer(t, resp, http.StatusOK, `{"jobs":[]}`)
		require.Contains(t, logs.String(), `"msg":"sealing windows lapsed","lapsed":1,"job_ids":["never-sealed"]`)
	})
}

// P2-D7: the projection says who a runner is. A device listed there may call
// without ever pairing (its presence is rebuilt from the projection, on
// the store clock); once its record is gone it is not recognised, however
// much presence remains.
func TestP2_D7_TheProjectionIsAuthoritativeAndPresenceACache(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		d := b.device2(t, "alice")
		_, paired := b.presence(t, "runner_alice")
		require.False(t, paired)
		requireAnswer(t, d.claim(t, 1), http.StatusOK, `{"jobs":[],"leaseMs":60000}`)
		p, ok := b.presence(t, "runner_alice")
		require.True(t, ok, "a signed call rebuilds presence")
		require.Equal(t, "alice", p.Owner)
		require.Equal(t, b.keys["alice"].Public(), p.Device)
		require.Equal(t, b.storeNow(t), p.LastSeenAt, "stamped on the store clock")

		b.project(t, withoutDevice("runner_alice"))
		requireAnswer(t, d.heartbeat(t), http.StatusUnauthorized, bodyRunnerUnknown)
		requireAnswer(t, d.claim(t, 1), http.StatusUnauthorized, bodyRunnerUnknown)
	})
}

// P2-D11 on protocol "2": a payload sealed to a device that does not hold the
// job is refused as a late seal, and the job still waits for its own.
func TestP2_D11_V2PayloadForAnotherDeviceIsRefused(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "job-1", "alice"))
		jobs := b.device2(t, "alice").claimed(t, 1)
		require.Len(t, jobs, 1)
		c := jobs[0]
		read := site.pendingFor(t, c.ID)
		read.Device = b.keys["alice2"].Public()
		wrong, err := site.peer.SealFor(read, c.ID, c.DeadlineAt, json.RawMessage(`{"prompt":"for another device"}`))
		require.NoError(t, err)
		requireAnswer(t, site.payload(t, c.ID, wrong), http.StatusConflict, `{"error":"too-late","message":"job is awaiting a payload for another device"}`)
		require.Nil(t, b.requireState(t, c.ID, store.AwaitingPayload).Payload)
		site.seal(t, c, `{"prompt":"for the holder"}`)
	})
}

// P2-A1: on a relay serving "0" and "2", a daemon-plane request that
// declares no version is refused by name, before its signature, whatever
// its endpoint; so is a non-string version.
func TestP2_A1_DaemonPlaneWithoutAVersionIsRefusedByName(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		for _, body := range []string{`{"max":1}`, ``, `not json`, `{"protocolVersion":""}`, `[]`} {
			for _, endpoint := range []string{"pair", "claim", "fetch", "result", "heartbeat", "release"} {
				resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/" + endpoint, Body: []byte(body)})
				requireAnswer(t, resp, http.StatusBadRequest, bodyNoVersion)
			}
		}
		// The reference's probe: the number 2 is no declaration either.
		resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: []byte(`{"protocolVersion":2,"max":1}`)})
		requireAnswer(t, resp, http.StatusBadRequest, bodyNoVersion)
		// The query declares for a body that does not (P2-V2.1.3).
		resp = b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim?protocolVersion=2", Body: []byte(`not json`)})
		requireAnswer(t, resp, http.StatusUnauthorized, bodyNotSigned)
		// Unknown paths get the plain 404, with no handshake.
		requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/byollm/nothing"}), http.StatusNotFound, bodyNotFoundPath)
		requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/nothing"}), http.StatusNotFound, bodyNotFoundPath)
	})
}

// P2-A2: a site that declares "0" explicitly is served by protocol "0", as
// one that declares nothing is.
func TestP2_A2_SitePlaneDeclaringZeroIsServedAsProtocolZero(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		stub := b.stub(t, "v0-job", "alice")
		body := []byte(`{"protocolVersion":"0", "siteId":"` + siteMain + `","stub":` + string(mustJSON(t, stub)) + `}`)
		resp := b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/enqueue", Header: b.site.SignHeaders("site/enqueue", body), Body: body})
		requireAnswer(t, resp, http.StatusOK, `{"jobId":"v0-job","state":"queued"}`)
		require.Equal(t, store.Proto0, b.job(t, "v0-job").Proto)
		// With the key last, and on a read through the query.
		body = []byte(`{"siteId":"` + siteMain + `","jobId":"v0-job","protocolVersion":"0"}`)
		resp = b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/cancel", Header: b.site.SignHeaders("site/cancel", body), Body: body})
		requireAnswer(t, resp, http.StatusOK, `{"cancelled":true}`)
		resp = b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/pending?siteId=" + siteMain + "&protocolVersion=0", Header: b.site.SignHeaders("site/pending", nil)})
		requireAnswer(t, resp, http.StatusOK, `{"jobs":[]}`)
		// "0"'s own rules still hold: v0 refuses a stub in "2"'s vocabulary.
		stub.ID, stub.Audience = "v0-bad", "team"
		body = []byte(`{"protocolVersion":"0","siteId":"` + siteMain + `","stub":` + string(mustJSON(t, stub)) + `}`)
		resp = b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/enqueue", Header: b.site.SignHeaders("site/enqueue", body), Body: body})
		requireAnswer(t, resp, http.StatusBadRequest, bodySchema)
	})
}

// P2-A6: pending and results list every job of the calling site, whatever
// protocol enqueued it, on either protocol's read.
func TestP2_A6_SiteReadsListTheSitesJobsOfBothProtocols(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "v2-job", "alice"))
		b.enqueue(t, b.stub(t, "v0-job", "alice"))
		v2 := b.device2(t, "alice2").claimed(t, 1)
		require.Len(t, v2, 1)
		v0 := b.claimOne(t, b.paired(t, "alice"), "v0-job")

		ids := func(resp peer.RawResponse) []string {
			require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
			out, err := proto2.DecodePendingResponse(resp.Body)
			require.NoError(t, err)
			var got []string
			for _, j := range out.Jobs {
				got = append(got, j.JobID)
			}
			return got
		}
		require.ElementsMatch(t, []string{"v2-job", "v0-job"}, ids(site.get(t, "pending")))
		v0Read, err := b.site.Do(b.ctx, http.MethodGet, "pending", nil)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"v2-job", "v0-job"}, ids(v0Read))

		b.runToDone(t, b.paired(t, "alice"), v0)
		resp := site.get(t, "results")
		require.Equal(t, http.StatusOK, resp.Status)
		results, err := proto2.DecodeResultsResponse(resp.Body)
		require.NoError(t, err)
		require.Len(t, results.Jobs, 1)
		require.Equal(t, "v0-job", results.Jobs[0].JobID)
	})
}

// P2-A7: a device record marked revoked is refused on protocol "0" too, on
// every endpoint, heartbeat included.
func TestP2_A7_RevokedDeviceIsRefusedByProtocolZeroToo(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.project(t, withRevokedDevice("runner_alice"))
		for endpoint, body := range map[string][]byte{
			"claim":     claimBody(t, "runner_alice"),
			"heartbeat": heartbeatBody(t, "runner_alice"),
			"fetch":     []byte(`{"protocolVersion":"0","runnerId":"runner_alice","jobId":"j","leaseId":"l"}`),
		} {
			resp, err := d.Do(b.ctx, endpoint, body)
			require.NoError(t, err)
			requireAnswer(t, resp, http.StatusForbidden, bodyRevoked)
		}
		// Its owner's other device is untouched.
		_, err := b.paired(t, "alice2").Heartbeat(b.ctx, nil)
		require.NoError(t, err)
	})
}

// rotate makes newKeys the site's current key, succeeding its present key
// oldKeys, which signs until retiringUntil.
func rotate(siteID, oldKeys, newKeys string, retiringUntil int64) fixtureMod {
	return func(f *projection.Fixture, k keyring) {
		for i := range f.Sites {
			if f.Sites[i].SiteID != siteID {
				continue
			}
			old, next := k[oldKeys], k[newKeys]
			sig := ed25519.Sign(old.IdentityPrivate(), projection.SuccessionStatement(old.KeyID(), next.KeyID()))
			f.Sites[i].Site = next.Public()
			f.Sites[i].Succeeds = []projection.Succession{{Identity: old.Public(), Signature: protocol.EncodeKey(sig)}}
			f.Sites[i].RetiringUntil = retiringUntil
		}
	}
}

// P2-A8: a rotated site's earlier key still signs site-plane calls on
// protocol "0" too, strictly before retiringUntil on the relay clock.
func TestP2_A8_RetiringSiteKeysSignOnProtocolZeroToo(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		b.keys["next"] = genKeys(t)
		b.project(t, rotate(siteMain, "site", "next", b.relayNow()+1000))
		next := b.siteAs(t, "next", siteMain)
		for _, s := range []*peer.Site{b.site, next} {
			resp, err := s.Do(b.ctx, http.MethodGet, "pending", nil)
			require.NoError(t, err)
			requireAnswer(t, resp, http.StatusOK, `{"jobs":[]}`)
		}
		b.clock.Advance(time.Second)
		resp, err := b.site.Do(b.ctx, http.MethodGet, "pending", nil)
		require.NoError(t, err)
		requireAnswer(t, resp, http.StatusUnauthorized, bodyBadSignature)
		resp, err = next.Do(b.ctx, http.MethodGet, "pending", nil)
		require.NoError(t, err)
		requireAnswer(t, resp, http.StatusOK, `{"jobs":[]}`)
	})
}

// The same window on protocol "2", where the heartbeat also tells the
// daemon of the rotation, and an enqueue must still name the current key.
func TestV2_RetiringSiteKeysAndSuccessions(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		b.keys["next"] = genKeys(t)
		until := b.relayNow() + 1000
		b.project(t, rotate(siteMain, "site", "next", until))
		old := b.site2(t, "site", siteMain)
		requireAnswer(t, old.get(t, "pending"), http.StatusOK, `{"jobs":[]}`)
		stale := old.stub2(t, "names-old-key", "alice")
		requireAnswer(t, old.enqueue(t, stale), http.StatusForbidden, `{"error":"forbidden","message":"that stub does not name the site that signed it"}`)

		rotation := proto2.Keyed[proto2.SiteSuccession]{{Key: b.keys["next"].KeyID(), Value: proto2.SiteSuccession{
			Succeeds:      []proto2.Succession{{Identity: b.keys["site"].Public(), Signature: b.source.Current().Fixture().Sites[0].Succeeds[0].Signature}},
			RetiringUntil: until,
		}}}
		successions, err := proto2.Marshal(rotation)
		require.NoError(t, err)
		requireAnswer(t, b.device2(t, "alice").heartbeat(t), http.StatusOK,
			`{"sites":`+b.sitesJSON(t, "next")+`,"successions":`+string(successions)+`,"awaitingConsent":[],"cancel":[],"lost":[],"serverTime":`+itoa(b.relayNow())+`}`)

		b.clock.Advance(time.Second)
		requireAnswer(t, old.get(t, "pending"), http.StatusUnauthorized, bodyBadSignature)
		requireAnswer(t, b.site2(t, "next", siteMain).get(t, "pending"), http.StatusOK, `{"jobs":[]}`)
	})
}

// P2-A10: the advice in a version refusal compares the declared version with
// the newest one served, so a leftover "1" is told to upgrade.
func TestP2_A10_VersionAdviceComparesWithTheNewestServed(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		for declared, advice := range map[string]string{
			"1":  "Upgrade the daemon: `npm i -g byollm@latest`.",
			"10": "Upgrade the daemon: `npm i -g byollm@latest`.",
			"99": "This daemon is newer than the server; the server needs upgrading.",
		} {
			want := `{"error":"unsupported-protocol-version","message":"this server speaks protocol 0, 2 and the daemon asked for ` + declared + `. ` + advice + `","supported":["0","2"],"minimum":"0"}`
			body := []byte(`{"protocolVersion":"` + declared + `"}`)
			requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: body}), http.StatusBadRequest, want)
			requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/enqueue", Body: body}), http.StatusBadRequest, want)
			requireAnswer(t, b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/pending?siteId=x&protocolVersion=" + declared}), http.StatusBadRequest, want)
		}
	})
}

// P2-D8, end to end: a job whose sealing window lapsed is re-offered to its
// first claimant alone, and to everyone once that runner lets one more
// sealing window pass without claiming it.
func TestP2_D8_AStickyJobBecomesClaimableByOthers(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "sticky", "alice"))
		first, second := b.device2(t, "alice"), b.device2(t, "alice2")
		require.Len(t, first.claimed(t, 1), 1)
		b.advance(protocol.AwaitingPayloadMs * time.Millisecond)
		require.Empty(t, second.claimed(t, 1), "re-offered to its first claimant alone")
		b.advance(protocol.AwaitingPayloadMs*time.Millisecond + time.Millisecond)
		jobs := second.claimed(t, 1)
		require.Len(t, jobs, 1)
		require.Equal(t, "sticky", jobs[0].ID)
	})
}

// P2-D7's stamp: every authenticated call is seen, on the store clock,
// whatever its answer; a heartbeat refused for its schema or its version
// included.
func TestP2_D7_EveryAuthenticatedCallStampsPresence(t *testing.T) {
	opts := bothProtocols()
	opts.V2.DaemonFloor = "0.1.1"
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		d := b.device2(t, "alice")
		seen := func() int64 {
			p, ok := b.presence(t, "runner_alice")
			require.True(t, ok)
			return p.LastSeenAt
		}
		for _, send := range []func() peer.RawResponse{
			func() peer.RawResponse {
				return d.post(t, "heartbeat", map[string]any{"protocolVersion": "2", "nonsense": true})
			},
			func() peer.RawResponse { return d.heartbeatAs(t, "0.1.0") },
			func() peer.RawResponse { return d.post(t, "claim", map[string]any{"protocolVersion": "2"}) },
			func() peer.RawResponse { return d.fetch(t, "nothing", "l") },
		} {
			b.advance(time.Second)
			require.GreaterOrEqual(t, send().Status, 400)
			require.Equal(t, b.storeNow(t), seen())
		}
	})
}
