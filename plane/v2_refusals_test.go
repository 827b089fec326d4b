package plane_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/plane"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// claimed2 enqueues a v2 job for alice and has alice's device claim it.
func claimed2(t *testing.T, b *bundle) (*daemon2, *site2, proto2.ClaimedStub) {
	t.Helper()
	site := b.site2(t, "site", siteMain)
	site.enqueued(t, site.stub2(t, "job-1", "alice"))
	d := b.device2(t, "alice")
	jobs := d.claimed(t, 1)
	require.Len(t, jobs, 1)
	return d, site, jobs[0]
}

func fixturePair(owner string, device protocol.PublicIdentity) map[string]any {
	return map[string]any{"protocolVersion": "2", "owner": owner, "device": device}
}

// v2Refusal is one row of §3.17: what to set up and send, and the exact
// answer ("" for the clock-skew body, which names the relay's time).
type v2Refusal struct {
	row    string
	opts   *setupOpts
	send   func(t *testing.T, b *bundle) peer.RawResponse
	status int
	body   string
}

// Every refusal of spec §3.17 the relay can give, with its exact body. Rows
// 2 and 3 (the debug page) are relayd's admin listener's (difference RB-E);
// rows 31-35 need an enqueue policy relayd does not have (P2-D5).
func TestV2_EveryRefusal(t *testing.T) {
	for _, tc := range slices.Concat(v2CallRefusals(), v2JobAndPairRefusals()) {
		t.Run(tc.row, func(t *testing.T) {
			opts := tc.opts
			if opts == nil {
				opts = bothProtocols()
			}
			eachStore(t, opts, func(t *testing.T, b *bundle) {
				resp := tc.send(t, b)
				body := tc.body
				if body == "" {
					body = bodyClockSkew(b.relayNow())
				}
				requireAnswer(t, resp, tc.status, body)
				require.Empty(t, resp.Header.Get("Retry-After"), "only P2-D1's refusals say when to come back")
				if body != bodyNotFoundPath {
					// The 0.1.1 daemon reads refusals strictly (§3.18).
					_, err := proto2.DecodeWireError(resp.Body)
					require.NoError(t, err, "a WireError: %s", resp.Body)
				}
			})
		})
	}
}

// v2CallRefusals are rows 1-15: the path, the version, the signature,
// the body and whose it is.
func v2CallRefusals() []v2Refusal {
	return []v2Refusal{
		{"1 unknown path", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/byollm/nothing?protocolVersion=2"})
		}, 404, bodyNotFoundPath},
		{"4 no version, daemon plane", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: []byte(`{"max":1}`)})
		}, 400, bodyNoVersion},
		{"4 empty version, site plane", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/relay/site/enqueue", Body: []byte(`{"protocolVersion":""}`)})
		}, 400, bodyNoVersion},
		{"5 wrong version", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/results?siteId=s&protocolVersion=99"})
		}, 400, `{"error":"unsupported-protocol-version","message":"this server speaks protocol 0, 2 and the daemon asked for 99. This daemon is newer than the server; the server needs upgrading.","supported":["0","2"],"minimum":"0"}`},
		{"6 unsigned, daemon plane", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Body: []byte(`{"protocolVersion":"2","max":1}`)})
		}, 401, bodyNotSigned},
		{"6 unsigned, site plane", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: "/relay/site/pending?siteId=" + siteMain + "&protocolVersion=2"})
		}, 401, bodyNotSigned},
		{"7 runner not recognised", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.daemon2(t, "stranger", "nobody").claim(t, 1)
		}, 401, bodyRunnerUnknown},
		{"8 site not registered", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.site2(t, "stranger", "site_nobody").get(t, "pending")
		}, 401, bodySiteUnknown},
		{"9 clock skew", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			d := b.device2(t, "alice")
			body := mustJSON(t, proto2.ClaimRequest{ProtocolVersion: "2", RunnerID: "runner_alice", Capabilities: capabilities2(), Max: 1})
			return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/claim", Header: d.d.SignHeadersAt("claim", body, b.relayNow()-120_001), Body: body})
		}, 401, ""},
		{"10 bad signature", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.daemon2(t, "bob", "runner_alice").claim(t, 1)
		}, 401, bodyBadSignature},
		{"11 revoked, heartbeat included", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			b.project(t, withRevokedDevice("runner_alice"))
			return b.device2(t, "alice").heartbeat(t)
		}, 403, bodyRevoked},
		{"11 revoked before the schema", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			b.project(t, withRevokedDevice("runner_alice"))
			return b.device2(t, "alice").post(t, "claim", map[string]any{"protocolVersion": "2", "nonsense": true})
		}, 403, bodyRevoked},
		{"12 daemon schema", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			// "0"'s paused is an unknown key under "2".
			return b.device2(t, "alice").post(t, "heartbeat", map[string]any{"protocolVersion": "2", "runnerId": "runner_alice", "daemonVersion": "0.1.1",
				"capabilities": []any{}, "activeLeases": []any{}, "paused": false})
		}, 400, bodySchema},
		{"13 site schema", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			site := b.site2(t, "site", siteMain)
			stub := site.stub2(t, "job-1", "alice")
			stub.Audience = "self"
			return site.enqueue(t, stub)
		}, 400, bodySchema},
		{"14 not your site", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			site := b.site2(t, "site", siteMain)
			return site.post(t, "cancel", proto2.CancelRequest{ProtocolVersion: "2", SiteID: siteOther, JobID: "j"})
		}, 403, bodyNotYourSite},
		{"15 runner id is not the key's", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.device2(t, "alice").post(t, "claim", proto2.ClaimRequest{ProtocolVersion: "2", RunnerID: "runner_bob", Capabilities: capabilities2(), Max: 1})
		}, 403, `{"error":"forbidden","message":"runner id does not match the key"}`},
	}
}

// v2JobAndPairRefusals are rows 16-37: the job and lease a call names, the
// envelope's size, the daemon floor, pairing and a site's writes.
func v2JobAndPairRefusals() []v2Refusal {
	noDeviceCode := &setupOpts{Protocols: plane.Protocols{V0: true, V2: true}}
	withFloor := bothProtocols()
	withFloor.V2.DaemonFloor = "0.1.1"
	return []v2Refusal{
		{"16 unknown job", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.device2(t, "alice").fetch(t, "nothing", "lease")
		}, 404, bodyUnknownJob},
		{"17 not the holder", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			_, _, c := claimed2(t, b)
			return b.device2(t, "alice2").fetch(t, c.ID, c.Lease.ID)
		}, 403, `{"error":"forbidden","message":"this runner does not hold the job"}`},
		{"18 stale lease", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			d, _, c := claimed2(t, b)
			requireAnswer(t, d.release(t, "shutdown", grant(c)), 200, `{"released":["job-1"]}`)
			require.Len(t, d.claimed(t, 1), 1)
			return d.fetch(t, c.ID, c.Lease.ID)
		}, 403, `{"error":"forbidden","message":"that lease is no longer current"}`},
		{"19 not sealed", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			d, _, c := claimed2(t, b)
			return d.fetch(t, c.ID, c.Lease.ID)
		}, 409, bodyNotReady},
		{"20 finished", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			d, site, c := claimed2(t, b)
			site.seal(t, c, `{"prompt":"p"}`)
			require.Equal(t, 200, d.fetch(t, c.ID, c.Lease.ID).Status)
			requireAnswer(t, d.result(t, c.ID, c.Lease.ID, b.sealedResult(t, d, "site", c, `{"r":1}`)), 200, `{"accepted":true,"state":"done"}`)
			return d.fetch(t, c.ID, c.Lease.ID)
		}, 409, bodyAlreadyFinished},
		{"21 envelope over 6 MiB", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.site2(t, "site", siteMain).payload(t, "j", envelopeOf(t, proto2.MaxEnvelopeBytes+1, "r", "s", "payload"))
		}, 400, `{"error":"bad-request","message":"this message is 6.1 MB and the limit is 6.0 MB — it is a limit on one message rather than on how many you send. Split the work into smaller jobs and send them separately. Every plan has the same ceiling."}`},
		{"22 below the floor", withFloor, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.device2(t, "alice").heartbeatAs(t, "0.1.0")
		}, 426, "{\"error\":\"daemon-below-floor\",\"message\":\"byollm 0.1.0 is below the supported floor (0.1.1). Run `npm i -g byollm@latest`, then `byollm start`.\",\"floor\":\"0.1.1\"}"},
		{"23 pair schema", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.pair2(t, map[string]any{"protocolVersion": "2", "action": "start", "owner": "alice", "device": b.keys["alice"].Public()})
		}, 400, bodyPairSchema},
		{"24 inconsistent identity", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			device := b.keys["alice"].Public()
			device.EncryptionSig = b.keys["bob"].Public().EncryptionSig
			return b.pair2(t, pairStartBody(device))
		}, 400, bodyInconsistent},
		{"25 no consent to any site", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.pair2(t, fixturePair("carol", b.keys["carol"].Public()))
		}, 403, bodyNoConsent},
		{"26 device not approved", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.pair2(t, fixturePair("alice", b.keys["stranger"].Public()))
		}, 403, `{"error":"forbidden","message":"this device has not been approved by its owner"}`},
		{"27 device of another owner", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.pair2(t, fixturePair("bob", b.keys["alice"].Public()))
		}, 403, bodyDeviceOtherOwner},
		{"28 no device-code flow", noDeviceCode, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.pair2(t, pairStartBody(b.keys["stranger"].Public()))
		}, 501, `{"error":"bad-request","message":"this relay does not offer device-code pairing"}`},
		{"30 stub names another site", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			site := b.site2(t, "site", siteMain)
			stub := site.stub2(t, "job-1", "alice")
			stub.Site = b.keys["other"].KeyID()
			return site.enqueue(t, stub)
		}, 403, `{"error":"forbidden","message":"that stub does not name the site that signed it"}`},
		{"36 payload for an unknown job", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			return b.site2(t, "site", siteMain).payload(t, "nothing", envelopeOf(t, 200, "r", "s", "payload"))
		}, 404, bodyUnknownJob},
		{"36 payload for another site's job", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			_, _, c := claimed2(t, b)
			return b.site2(t, "other", siteOther).payload(t, c.ID, envelopeOf(t, 200, "r", "s", "payload"))
		}, 404, bodyUnknownJob},
		{"37 payload for a job not awaiting one", nil, func(t *testing.T, b *bundle) peer.RawResponse {
			site := b.site2(t, "site", siteMain)
			site.enqueued(t, site.stub2(t, "job-1", "alice"))
			return site.payload(t, "job-1", envelopeOf(t, 200, "r", "s", "payload"))
		}, 409, bodyTooLate("queued")},
	}
}
