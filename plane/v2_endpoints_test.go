package plane_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/pairing"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// The heartbeat's floor and update offer (§3.9, §4.13), with the
// reference's recorded run: floor 0.1.1, offer 0.1.2.
func TestV2_HeartbeatFloorAndUpdateOffer(t *testing.T) {
	opts := bothProtocols()
	opts.V2.DaemonFloor, opts.V2.UpdateOffer = "0.1.1", "0.1.2"
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		d := b.device2(t, "alice")
		tail := `"awaitingConsent":[],"cancel":[],"lost":[],"serverTime":` + itoa(b.relayNow()) + `}`
		for version, want := range map[string]string{
			"0.1.1":   `{"sites":` + b.sitesJSON(t, "site") + `,"updateTo":"0.1.2",` + tail,
			"0.1.2":   `{"sites":` + b.sitesJSON(t, "site") + `,` + tail,
			"garbage": `{"sites":` + b.sitesJSON(t, "site") + `,` + tail,
		} {
			requireAnswer(t, d.heartbeatAs(t, version), http.StatusOK, want)
		}
		for _, old := range []string{"0.1.0", "0.1.0-alpha.82"} {
			require.Equal(t, http.StatusUpgradeRequired, d.heartbeatAs(t, old).Status, old)
		}
		// The floor is the heartbeat's alone (P2-S37).
		requireAnswer(t, d.claim(t, 1), http.StatusOK, `{"jobs":[],"leaseMs":60000}`)
	})
}

// A heartbeat pins every site its owner consents to, paused included, and
// names the paused ones in awaitingConsent; an owner consenting to none is
// serving nothing: everything held is lost and nothing renewed (P2-S13).
func TestV2_HeartbeatSitesAwaitingConsentAndTheEmptyBranch(t *testing.T) {
	eachStore(t, bothProtocols(withSiteConsent("alice", siteOther, true)), func(t *testing.T, b *bundle) {
		d, _, c := claimed2(t, b)
		requireAnswer(t, d.heartbeat(t, grant(c)), http.StatusOK,
			`{"sites":`+b.sitesJSON(t, "site", "other")+`,"awaitingConsent":["`+b.keys["other"].KeyID()+`"],"cancel":[],"lost":[],"serverTime":`+itoa(b.relayNow())+`}`)

		b.project(t, withoutConsent("alice"))
		gone := proto2.GrantRef{JobID: "elsewhere", LeaseID: "l"}
		before := b.job(t, c.ID).ClaimedBy.LeaseExpiresAt
		b.advance(time.Second)
		requireAnswer(t, d.heartbeat(t, grant(c), gone, grant(c)), http.StatusOK,
			`{"sites":{},"awaitingConsent":[],"cancel":[],"lost":[`+string(mustJSON(t, grant(c)))+`,{"jobId":"elsewhere","leaseId":"l"},`+string(mustJSON(t, grant(c)))+`],"serverTime":`+itoa(b.relayNow())+`}`)
		require.Equal(t, before, b.job(t, c.ID).ClaimedBy.LeaseExpiresAt, "nothing renewed")
	})
}

// A heartbeat renews what the caller holds, names cancelled jobs as grants
// and what it lost, and keeps what the daemon offers in presence.
func TestV2_HeartbeatRenewsCancelsAndRecordsWhatTheDaemonOffers(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		d, site, c := claimed2(t, b)
		b.advance(time.Second)
		unknown := proto2.GrantRef{JobID: "nothing", LeaseID: "l"}
		requireAnswer(t, d.heartbeat(t, grant(c), unknown), http.StatusOK,
			`{"sites":`+b.sitesJSON(t, "site")+`,"awaitingConsent":[],"cancel":[],"lost":[{"jobId":"nothing","leaseId":"l"}],"serverTime":`+itoa(b.relayNow())+`}`)
		require.Equal(t, b.storeNow(t)+60_000, b.job(t, c.ID).ClaimedBy.LeaseExpiresAt, "renewed on the store clock")

		requireAnswer(t, site.post(t, "cancel", proto2.CancelRequest{ProtocolVersion: "2", SiteID: siteMain, JobID: c.ID}), http.StatusOK, `{"cancelled":true}`)
		requireAnswer(t, site.post(t, "cancel", proto2.CancelRequest{ProtocolVersion: "2", SiteID: siteMain, JobID: "nothing"}), http.StatusOK, `{"cancelled":false}`)
		withheld := []proto2.WithheldKind{{Kind: protocol.KindChat, Claimants: []proto2.Claimant{{Service: "a", Offer: "private"}, {Service: "b", Offer: "team"}}}}
		resp := d.post(t, "heartbeat", proto2.HeartbeatRequest{ProtocolVersion: "2", RunnerID: "runner_alice", DaemonVersion: "0.1.1",
			Capabilities: capabilities2(protocol.KindGenerate), Withheld: withheld, ActiveLeases: []proto2.GrantRef{grant(c)}})
		requireAnswer(t, resp, http.StatusOK,
			`{"sites":`+b.sitesJSON(t, "site")+`,"awaitingConsent":[],"cancel":[`+string(mustJSON(t, grant(c)))+`],"lost":[],"serverTime":`+itoa(b.relayNow())+`}`)
		p, ok := b.presence(t, "runner_alice")
		require.True(t, ok)
		require.JSONEq(t, string(mustJSON(t, capabilities2(protocol.KindGenerate))), string(p.Capabilities))
		require.JSONEq(t, string(mustJSON(t, withheld)), string(p.Withheld))
	})
}

// Release gives grants back, answering the ids released in request order;
// a finished job is skipped.
func TestV2_ReleaseSkipsFinishedJobs(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		d, site, c := claimed2(t, b)
		site.seal(t, c, `{"prompt":"p"}`)
		require.Equal(t, http.StatusOK, d.fetch(t, c.ID, c.Lease.ID).Status)
		requireAnswer(t, d.result(t, c.ID, c.Lease.ID, b.sealedResult(t, d, "site", c, `{"r":1}`)), http.StatusOK, `{"accepted":true,"state":"done"}`)
		site.enqueued(t, site.stub2(t, "job-2", "alice"))
		jobs := d.claimed(t, 1)
		require.Len(t, jobs, 1)
		requireAnswer(t, d.release(t, "refused", grant(c), grant(jobs[0])), http.StatusOK, `{"released":["job-2"]}`)
		b.requireState(t, c.ID, store.Done)
		require.Empty(t, d.claimed(t, 1), "a refused job is never offered to its refuser again")
	})
}

// v0 and v2 jobs never meet in a claim (§2.4.3), and a republish of a
// (site, id) under the other protocol answers the job as it is (P2-A3).
func TestP2_A3_ProtocolsKeepTheirOwnJobs(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "v2-job", "alice"))
		b.enqueue(t, b.stub(t, "v0-job", "alice"))
		v0 := b.paired(t, "alice")
		require.Equal(t, []string{"v0-job"}, ids(b.claim(t, v0, 8)))
		jobs := b.device2(t, "alice2").claimed(t, 8)
		require.Len(t, jobs, 1)
		require.Equal(t, "v2-job", jobs[0].ID)

		// The first protocol to enqueue a (site, id) keeps it.
		stub := site.stub2(t, "v0-job", "alice")
		requireAnswer(t, site.enqueue(t, stub), http.StatusOK, `{"jobId":"v0-job","state":"awaiting-payload"}`)
		require.Equal(t, store.Proto0, b.job(t, "v0-job").Proto)
		require.Equal(t, store.Proto2, b.job(t, "v2-job").Proto)
	})
}

func ids(jobs []protocol.ClaimedStub) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

// Every registered site may use the site plane under "2", and two sites
// may use the same job id without either seeing the other's (§4.1).
func TestV2_EverySiteRoutesAndIDsAreTheirOwn(t *testing.T) {
	eachStore(t, bothProtocols(withSiteConsent("alice", siteOther, false)), func(t *testing.T, b *bundle) {
		main, other := b.site2(t, "site", siteMain), b.site2(t, "other", siteOther)
		main.enqueued(t, main.stub2(t, "same-id", "alice"))
		other.enqueued(t, other.stub2(t, "same-id", "alice"))
		d := b.device2(t, "alice")
		jobs := d.claimed(t, 8)
		require.Len(t, jobs, 2)
		require.ElementsMatch(t, []string{b.keys["site"].KeyID(), b.keys["other"].KeyID()}, []string{jobs[0].Site, jobs[1].Site})
		for _, c := range jobs {
			s := main
			if c.Site == b.keys["other"].KeyID() {
				s = other
			}
			s.seal(t, c, `{"prompt":"p"}`)
			require.Equal(t, http.StatusOK, d.fetch(t, c.ID, c.Lease.ID).Status, "lease-first resolution finds each")
		}
	})
}

// Pairing codes: one per keypair and client address, expiring after ten
// minutes on the store clock; a poll for an unknown or expired code says
// expired; the fixture exchange pairs an approved device at once.
func TestV2_PairingCodesAndTheFixtureExchange(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		start := func() proto2.PairStartResponse {
			resp := b.pair2(t, pairStartBody(b.keys["stranger"].Public()))
			require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
			out, err := proto2.DecodePairStartResponse(resp.Body)
			require.NoError(t, err)
			return out
		}
		first, second := start(), start()
		require.NotEqual(t, first.DeviceCode, second.DeviceCode)
		requireAnswer(t, b.pair2(t, pairPollBody(first.DeviceCode)), http.StatusOK, `{"status":"expired"}`)
		requireAnswer(t, b.pair2(t, pairPollBody(second.DeviceCode)), http.StatusOK, `{"status":"pending"}`)
		requireAnswer(t, b.pair2(t, pairPollBody("a-device-code-nobody-was-given")), http.StatusOK, `{"status":"expired"}`)
		b.advance(10 * time.Minute)
		requireAnswer(t, b.pair2(t, pairPollBody(second.DeviceCode)), http.StatusOK, `{"status":"expired"}`)
		requireAnswer(t, b.pair2(t, map[string]any{"protocolVersion": "2", "action": "poll", "deviceCode": "too-short"}), http.StatusBadRequest, bodyPairSchema)

		requireAnswer(t, b.pair2(t, fixturePair("alice", b.keys["alice"].Public())), http.StatusOK,
			`{"protocolVersion":"2","runnerId":"runner_alice","sites":`+b.sitesJSON(t, "site")+`}`)
		p, ok := b.presence(t, "runner_alice")
		require.True(t, ok)
		require.JSONEq(t, `[]`, string(p.Capabilities))
	})
	// Without --verification-url a poll still answers, as the reference's.
	eachStore(t, &setupOpts{Protocols: defaultProtocols}, func(t *testing.T, b *bundle) {
		requireAnswer(t, b.pair2(t, pairPollBody("a-device-code-nobody-was-given")), http.StatusOK, `{"status":"expired"}`)
	})
}

// A relay serving "2" alone refuses "0" by name on both planes, and a
// site that declares nothing with it.
func TestV2_ServingProtocolTwoAlone(t *testing.T) {
	only2 := bothProtocols()
	only2.Protocols.V0 = false
	eachStore(t, only2, func(t *testing.T, b *bundle) {
		noVersion := `{"error":"unsupported-protocol-version","message":"this request declared no protocol version. Upgrade the daemon: ` + "`npm i -g byollm@latest`" + `.","supported":["2"],"minimum":"2"}`
		zero := `{"error":"unsupported-protocol-version","message":"this server speaks protocol 2 and the daemon asked for 0. Upgrade the daemon: ` + "`npm i -g byollm@latest`" + `.","supported":["2"],"minimum":"2"}`
		alice := b.daemonAt(t, "alice", b.url, "runner_alice")
		requireAnswer(t, b.raw(t, signedDaemon(alice, http.MethodPost, "/byollm/claim", "claim", claimBody(t, "runner_alice"))), http.StatusBadRequest, zero)
		resp, err := b.site.Do(b.ctx, http.MethodGet, "pending", nil)
		require.NoError(t, err)
		requireAnswer(t, resp, http.StatusBadRequest, noVersion)
		requireAnswer(t, b.device2(t, "alice").claim(t, 1), http.StatusOK, `{"jobs":[],"leaseMs":60000}`)
	})
}

// Pairing codes come from the relay's injected random source: a device
// code from the first 32 bytes, then a user code, as package pairing
// draws them.
func TestV2_PairingCodesComeFromTheInjectedRandomSource(t *testing.T) {
	random := bytes.Repeat([]byte{7}, 64)
	want, err := pairing.NewCodes(bytes.NewReader(random))
	require.NoError(t, err)
	opts := bothProtocols()
	opts.Random = bytes.NewReader(random)
	b := setup(t, memoryStore, opts)
	resp := b.pair2(t, pairStartBody(b.keys["stranger"].Public()))
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	got, err := proto2.DecodePairStartResponse(resp.Body)
	require.NoError(t, err)
	require.Equal(t, want.DeviceCode, got.DeviceCode)
	require.Equal(t, want.UserCode, got.UserCode)
}

// P2-A9: protocol "0" keeps "presence only after pair": a device the
// projection lists but that never paired is not recognised by "0", while
// "2" serves it at once.
func TestP2_A9_ProtocolZeroStillNeedsAPairing(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		v0 := b.daemonAt(t, "alice", b.url, "runner_alice")
		resp, err := v0.Do(b.ctx, "claim", claimBody(t, "runner_alice"))
		require.NoError(t, err)
		requireAnswer(t, resp, http.StatusUnauthorized, bodyRunnerUnknown)
		requireAnswer(t, b.device2(t, "alice").claim(t, 1), http.StatusOK, `{"jobs":[],"leaseMs":60000}`)
		// Presence is one record per runner, shared by the protocols
		// (§2.4.3), so once "2" has rebuilt it from the projection, "0"
		// finds the runner paired: both read the same approved device.
		resp, err = v0.Do(b.ctx, "claim", claimBody(t, "runner_alice"))
		require.NoError(t, err)
		requireAnswer(t, resp, http.StatusOK, `{"jobs":[],"leaseMs":60000}`)
	})
}
