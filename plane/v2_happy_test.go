package plane_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// A device pairs through the device-code flow, approved by a fixture
// change as relayd's approve command makes one, then runs one job of the
// site end to end: every answer as the published clients parse it.
func TestV2HappyPath(t *testing.T) {
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		device := b.keys["stranger"].Public()

		resp := b.pair2(t, pairStartBody(device))
		require.Equal(t, http.StatusOK, resp.Status, "start: %s", resp.Body)
		start, err := proto2.DecodePairStartResponse(resp.Body)
		require.NoError(t, err)
		require.Equal(t, verificationURL, start.VerificationURL)
		require.Equal(t, int64(2000), start.PollIntervalMs)
		require.Len(t, start.DeviceCode, 43)
		require.Regexp(t, `^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}$`, start.UserCode)
		require.Equal(t, b.storeNow(t)+600_000, start.ExpiresAt)

		requireAnswer(t, b.pair2(t, pairPollBody(start.DeviceCode)), http.StatusOK, `{"status":"pending"}`)
		b.project(t, withDevice("stranger", "alice", "runner_dave"))
		requireAnswer(t, b.pair2(t, pairPollBody(start.DeviceCode)), http.StatusOK,
			`{"status":"approved","runnerId":"runner_dave","owner":"alice","sites":`+b.sitesJSON(t, "site")+`}`)
		requireAnswer(t, b.pair2(t, pairPollBody(start.DeviceCode)), http.StatusOK, `{"status":"expired"}`)
		p, ok := b.presence(t, "runner_dave")
		require.True(t, ok, "an approved poll records presence")
		require.JSONEq(t, string(mustJSON(t, capabilities2())), string(p.Capabilities))

		d := b.daemon2(t, "stranger", "runner_dave")
		requireAnswer(t, d.heartbeat(t), http.StatusOK,
			`{"sites":`+b.sitesJSON(t, "site")+`,"awaitingConsent":[],"cancel":[],"lost":[],"serverTime":`+itoa(b.relayNow())+`}`)
		requireAnswer(t, d.claim(t, 1), http.StatusOK, `{"jobs":[],"leaseMs":60000}`)

		site := b.site2(t, "site", siteMain)
		stub := site.stub2(t, "job-1", "alice")
		site.enqueued(t, stub)
		jobs := d.claimed(t, 1)
		require.Len(t, jobs, 1)
		c := jobs[0]
		require.Equal(t, stub, c.JobStub)
		require.Equal(t, "runner_dave", c.Lease.RunnerID)
		requireAnswer(t, d.fetch(t, c.ID, c.Lease.ID), http.StatusConflict, `{"error":"not-ready","message":"the site has not sealed this job yet"}`)

		payload := site.seal(t, c, `{"prompt":"hello"}`)
		resp = d.fetch(t, c.ID, c.Lease.ID)
		require.Equal(t, http.StatusOK, resp.Status, "fetch: %s", resp.Body)
		fetched, err := proto2.DecodeFetchResponse(resp.Body)
		require.NoError(t, err)
		require.Equal(t, payload, fetched.Envelope)

		requireAnswer(t, d.heartbeat(t, grant(c)), http.StatusOK,
			`{"sites":`+b.sitesJSON(t, "site")+`,"awaitingConsent":[],"cancel":[],"lost":[],"serverTime":`+itoa(b.relayNow())+`}`)
		result := b.sealedResult(t, d, "site", c, `{"outcome":{"text":"hi"}}`)
		requireAnswer(t, d.result(t, c.ID, c.Lease.ID, result), http.StatusOK, `{"accepted":true,"state":"done"}`)
		requireAnswer(t, d.result(t, c.ID, c.Lease.ID, result), http.StatusOK, `{"accepted":false,"duplicate":true,"state":"done"}`)

		resp = site.get(t, "results")
		require.Equal(t, http.StatusOK, resp.Status, "results: %s", resp.Body)
		results, err := proto2.DecodeResultsResponse(resp.Body)
		require.NoError(t, err)
		require.Len(t, results.Jobs, 1)
		fin := results.Jobs[0]
		require.Equal(t, protocol.FinishedJob{
			JobID: c.ID, Envelope: result, Disposition: "ok", RunnerID: "runner_dave", LeaseID: c.Lease.ID, Device: device, RunnerOwner: "alice",
		}, fin)
		opened, err := site.peer.OpenResult(fin)
		require.NoError(t, err)
		require.JSONEq(t, `{"outcome":{"text":"hi"}}`, string(opened))
		requireAnswer(t, d.claim(t, 1), http.StatusOK, `{"jobs":[],"leaseMs":60000}`)
	})
}
