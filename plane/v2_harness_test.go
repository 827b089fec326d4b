package plane_test

// Protocol "2" clients for the end-to-end tests: raw, signed requests
// with bodies written as the published 0.1.1 daemon and site SDK write
// them, answers checked byte for byte or decoded strictly with proto2.

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/plane"
	"github.com/byollm/relayd/plane/codec2"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

const verificationURL = "https://relay.example/pair"

// bothProtocols is a relay serving "0" and "2", with device-code pairing.
func bothProtocols(mods ...fixtureMod) *setupOpts {
	return &setupOpts{
		Protocols: plane.Protocols{V0: true, V2: true},
		V2:        codec2.Options{VerificationURL: verificationURL},
		Fixture:   mods,
	}
}

// daemon2 is a protocol "2" daemon with the named keys signing as runner;
// "2" needs no pairing before signed calls (§3.3).
type daemon2 struct {
	b      *bundle
	d      *peer.Daemon
	runner string
}

func (b *bundle) daemon2(t *testing.T, keys, runner string) *daemon2 {
	t.Helper()
	return &daemon2{b: b, d: b.daemonAt(t, keys, b.url, runner), runner: runner}
}

// device2 is the v2 daemon of one of the world's devices.
func (b *bundle) device2(t *testing.T, name string) *daemon2 {
	t.Helper()
	return b.daemon2(t, name, deviceNamed(name).runner)
}

// post sends body, encoded as JSON, signed, to the endpoint.
func (d *daemon2) post(t *testing.T, endpoint string, body any) peer.RawResponse {
	t.Helper()
	raw := mustJSON(t, body)
	return d.b.raw(t, signedDaemon(d.d, http.MethodPost, d.d.Path(endpoint), endpoint, raw))
}

// capabilities2 is what the 0.1.1 daemon offers for an echo backend.
func capabilities2(kinds ...string) []proto2.Capability {
	if kinds == nil {
		kinds = []string{protocol.KindGenerate, protocol.KindChat}
	}
	out := []proto2.Capability{}
	for _, k := range kinds {
		out = append(out, proto2.Capability{Kind: k, Service: "echo", BackendID: "openai-http", BackendClass: "http", Model: "echo-model", OfferScope: "private"})
	}
	return out
}

func (d *daemon2) claim(t *testing.T, maxJobs int) peer.RawResponse {
	t.Helper()
	return d.post(t, "claim", proto2.ClaimRequest{ProtocolVersion: "2", RunnerID: d.runner, Capabilities: capabilities2(), Max: maxJobs})
}

// claimed claims and decodes the answer as the daemon does, strictly.
func (d *daemon2) claimed(t *testing.T, maxJobs int) []proto2.ClaimedStub {
	t.Helper()
	resp := d.claim(t, maxJobs)
	require.Equal(t, http.StatusOK, resp.Status, "claim: %s", resp.Body)
	out, err := proto2.DecodeClaimResponse(resp.Body)
	require.NoError(t, err, "claim answer %s", resp.Body)
	return out.Jobs
}

func (d *daemon2) fetch(t *testing.T, jobID, leaseID string) peer.RawResponse {
	t.Helper()
	return d.post(t, "fetch", proto2.FetchRequest{ProtocolVersion: "2", RunnerID: d.runner, JobID: jobID, LeaseID: leaseID})
}

func (d *daemon2) result(t *testing.T, jobID, leaseID string, env protocol.SealedEnvelope) peer.RawResponse {
	t.Helper()
	return d.post(t, "result", proto2.ResultRequest{ProtocolVersion: "2", RunnerID: d.runner, JobID: jobID, LeaseID: leaseID, Envelope: env, Disposition: "ok"})
}

func (d *daemon2) heartbeatAs(t *testing.T, version string, leases ...proto2.GrantRef) peer.RawResponse {
	t.Helper()
	return d.post(t, "heartbeat", proto2.HeartbeatRequest{
		ProtocolVersion: "2", RunnerID: d.runner, DaemonVersion: version, Capabilities: capabilities2(),
		Withheld: []proto2.WithheldKind{}, ActiveLeases: nonNilRefs(leases),
	})
}

func (d *daemon2) heartbeat(t *testing.T, leases ...proto2.GrantRef) peer.RawResponse {
	t.Helper()
	return d.heartbeatAs(t, "0.1.1", leases...)
}

func (d *daemon2) release(t *testing.T, reason string, leases ...proto2.GrantRef) peer.RawResponse {
	t.Helper()
	return d.post(t, "release", proto2.ReleaseRequest{ProtocolVersion: "2", RunnerID: d.runner, Leases: nonNilRefs(leases), Reason: reason})
}

func nonNilRefs(refs []proto2.GrantRef) []proto2.GrantRef {
	if refs == nil {
		return []proto2.GrantRef{}
	}
	return refs
}

func grant(c proto2.ClaimedStub) proto2.GrantRef {
	return proto2.GrantRef{JobID: c.ID, LeaseID: c.Lease.ID}
}

// pair posts an unsigned pair body.
func (b *bundle) pair2(t *testing.T, body any) peer.RawResponse {
	t.Helper()
	return b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: "/byollm/pair", Header: http.Header{"Content-Type": {"application/json"}}, Body: mustJSON(t, body)})
}

func pairStartBody(device protocol.PublicIdentity) map[string]any {
	return map[string]any{
		"protocolVersion": "2", "action": "start",
		"daemon": map[string]any{"version": "0.1.1", "label": "laptop", "platform": "linux"},
		"device": device, "capabilities": capabilities2(),
	}
}

func pairPollBody(deviceCode string) map[string]any {
	return map[string]any{"protocolVersion": "2", "action": "poll", "deviceCode": deviceCode}
}

// Site plane.

// site2 signs as a site with the named keys.
type site2 struct {
	b    *bundle
	peer *peer.Site
}

func (b *bundle) site2(t *testing.T, keys, siteID string) *site2 {
	t.Helper()
	return &site2{b: b, peer: b.siteAs(t, keys, siteID)}
}

func (s *site2) post(t *testing.T, name string, body any) peer.RawResponse {
	t.Helper()
	raw := mustJSON(t, body)
	return s.b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: peer.SitePathPrefix + name, Header: s.peer.SignHeaders("site/"+name, raw), Body: raw})
}

// get reads pending or results as the 0.1.1 SDK does, the version in the
// query.
func (s *site2) get(t *testing.T, name string) peer.RawResponse {
	t.Helper()
	path := peer.SitePathPrefix + name + "?siteId=" + url.QueryEscape(s.peer.SiteID()) + "&protocolVersion=2"
	return s.b.raw(t, peer.RawRequest{Method: http.MethodGet, Path: path, Header: s.peer.SignHeaders("site/"+name, nil)})
}

// stub2 is a well-formed v2 stub of this site for owner, audience team as
// the SDK's cloud lane always sends.
func (s *site2) stub2(t *testing.T, id, owner string) proto2.JobStub {
	t.Helper()
	return proto2.JobStub{
		ID: id, Kind: protocol.KindGenerate, Owner: owner, Site: s.peer.Keys().KeyID(), Audience: "team",
		SizeClass: "small", DeadlineAt: s.b.storeNow(t) + jobTTL.Milliseconds(),
	}
}

func (s *site2) enqueue(t *testing.T, stub proto2.JobStub) peer.RawResponse {
	t.Helper()
	return s.post(t, "enqueue", proto2.EnqueueRequest{ProtocolVersion: "2", SiteID: s.peer.SiteID(), Stub: stub})
}

// enqueued publishes new stubs, each answered queued.
func (s *site2) enqueued(t *testing.T, stubs ...proto2.JobStub) {
	t.Helper()
	for _, st := range stubs {
		requireAnswer(t, s.enqueue(t, st), http.StatusOK, `{"jobId":"`+st.ID+`","state":"queued"}`)
	}
}

func (s *site2) payload(t *testing.T, jobID string, env protocol.SealedEnvelope) peer.RawResponse {
	t.Helper()
	return s.post(t, "payload", proto2.PayloadRequest{ProtocolVersion: "2", SiteID: s.peer.SiteID(), JobID: jobID, Envelope: env})
}

// pendingFor is the site's pending entry for a job, which must be listed.
func (s *site2) pendingFor(t *testing.T, jobID string) protocol.PendingJob {
	t.Helper()
	resp := s.get(t, "pending")
	require.Equal(t, http.StatusOK, resp.Status, "pending: %s", resp.Body)
	out, err := proto2.DecodePendingResponse(resp.Body)
	require.NoError(t, err)
	for _, p := range out.Jobs {
		if p.JobID == jobID {
			return p
		}
	}
	require.Failf(t, "job not pending", "%s not in %s", jobID, resp.Body)
	return protocol.PendingJob{}
}

// seal seals plaintext to the device that claimed the job and sends it.
func (s *site2) seal(t *testing.T, c proto2.ClaimedStub, plaintext string) protocol.SealedEnvelope {
	t.Helper()
	env, err := s.peer.SealFor(s.pendingFor(t, c.ID), c.ID, c.DeadlineAt, json.RawMessage(plaintext))
	require.NoError(t, err)
	requireAnswer(t, s.payload(t, c.ID, env), http.StatusOK, `{"jobId":"`+c.ID+`","state":"ready"}`)
	return env
}

// sealedResult is a result from d's keys to the site with keys siteKeys.
func (b *bundle) sealedResult(t *testing.T, d *daemon2, siteKeys string, c proto2.ClaimedStub, plaintext string) protocol.SealedEnvelope {
	t.Helper()
	env, err := peer.Seal(d.d.Keys(), b.keys[siteKeys].Public(), c.ID, protocol.DirectionResult, c.DeadlineAt, json.RawMessage(plaintext))
	require.NoError(t, err)
	return env
}

// Fixture changes for protocol "2".

// withDevice approves the named keys as runner for owner.
func withDevice(keys, owner, runner string) fixtureMod {
	return func(f *projection.Fixture, k keyring) {
		f.Devices = append(f.Devices, projection.DeviceRecord{Owner: owner, RunnerID: runner, Device: k[keys].Public()})
	}
}

// withRevokedDevice marks the runner's device record revoked.
func withRevokedDevice(runner string) fixtureMod {
	return func(f *projection.Fixture, _ keyring) {
		for i := range f.Devices {
			if f.Devices[i].RunnerID == runner {
				f.Devices[i].Revoked = true
			}
		}
	}
}

// withSiteConsent adds owner's consent to siteID.
func withSiteConsent(owner, siteID string, paused bool) fixtureMod {
	return func(f *projection.Fixture, _ keyring) {
		f.Consents = append(f.Consents, projection.ConsentRecord{Owner: owner, SiteID: siteID, Paused: paused})
	}
}

// sitesJSON is the sites map of the named site keys, in the order given.
func (b *bundle) sitesJSON(t *testing.T, keys ...string) string {
	t.Helper()
	var k proto2.Keyed[protocol.PublicIdentity]
	for _, name := range keys {
		k = append(k, proto2.Entry[protocol.PublicIdentity]{Key: b.keys[name].KeyID(), Value: b.keys[name].Public()})
	}
	out, err := proto2.Marshal(k)
	require.NoError(t, err)
	return string(out)
}
