package plane_test

// The reference's freeze-gate scenarios (relay-behaviour.md RB-F17–RB-F25), with
// the Go site and daemon in place of the TypeScript ones.

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

var leaseIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

const (
	secretPrompt = "summarise this: the heron waits at the weir"
	secretResult = "echo: the heron waits at the weir"
)

// roundTrip drives one job through every step over HTTP and returns what
// the site opened.
func roundTrip(t *testing.T, b *bundle, d *peer.Daemon, runner string, s protocol.JobStub) (protocol.FinishedJob, json.RawMessage) {
	t.Helper()
	b.enqueue(t, s)

	c := b.claimOne(t, d, s.ID)
	require.Equal(t, s, c.JobStub, "the claimed stub is the stub as published")
	require.Regexp(t, leaseIDPattern, c.Lease.ID, "lease ids are lowercase UUID v4 (RB-F4)")
	require.Equal(t, runner, c.Lease.RunnerID)

	p := b.pending(t, s.ID)
	require.Equal(t, runner, p.RunnerID)
	require.Equal(t, c.Lease.ID, p.LeaseID)
	require.Equal(t, d.Keys().Public(), p.Device, "pending names the claiming device's keys")
	require.Equal(t, c.Lease.ExpiresAt, p.LeaseExpiresAt)

	payload := mustJSON(t, map[string]string{"prompt": secretPrompt})
	env, err := b.site.SealFor(p, s.ID, s.DeadlineAt, payload)
	require.NoError(t, err)
	_, err = b.site.Payload(b.ctx, s.ID, env)
	require.NoError(t, err)

	fetched, err := d.Fetch(b.ctx, s.ID, c.Lease.ID)
	require.NoError(t, err)
	require.Equal(t, env, fetched.Envelope, "fetch serves the sealed payload verbatim")
	b.requireState(t, s.ID, store.Running)
	site, ok := d.SiteIdentity()
	require.True(t, ok)
	opened, err := peer.Open(d.Keys(), fetched.Envelope, peer.Expectation{JobID: s.ID, Direction: protocol.DirectionPayload, SenderIdentity: site.Identity})
	require.NoError(t, err)
	require.JSONEq(t, string(payload), string(opened), "the daemon recovers the prompt")

	result := mustJSON(t, map[string]any{
		"outcome": map[string]string{"kind": "ok", "text": secretResult},
		"ran":     map[string]any{"model": "relayd-test", "backendClass": "http", "durationMs": 7},
	})
	b.finish(t, d, c, string(result))

	res, err := b.site.Results(b.ctx)
	require.NoError(t, err)
	require.Len(t, res.Jobs, 1)
	fin := res.Jobs[0]
	require.Equal(t, s.ID, fin.JobID)
	require.Equal(t, runner, fin.RunnerID)
	require.Equal(t, c.Lease.ID, fin.LeaseID)
	require.Equal(t, d.Keys().Public(), fin.Device, "results name the device that actually ran it (RB-F5)")
	require.Equal(t, protocol.DispositionOK, fin.Disposition)
	out, err := b.site.OpenResult(fin)
	require.NoError(t, err)
	require.JSONEq(t, string(result), string(out), "the site recovers the result")
	return fin, out
}

func TestFreezeGate1_SealedJobRoundTripsEndToEnd(t *testing.T) { // RB-F17, RB-F3, RB-F4, RB-F5, RB-F75
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		fin, _ := roundTrip(t, b, d, "runner_alice", b.stub(t, "job-1", "alice"))
		require.Equal(t, "alice", fin.RunnerOwner)
		b.requireState(t, "job-1", store.Done)
	})
}

func TestFreezeGate2_RelayStateNeverHoldsPlaintext(t *testing.T) { // RB-F18, RB-F3
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		roundTrip(t, b, d, "runner_alice", b.stub(t, "job-1", "alice"))

		state := b.dumpState(t)
		require.Contains(t, state, "job-1", "the dump does hold the job")
		require.Contains(t, state, "runner_alice", "the dump does hold the presence")
		for _, secret := range []string{secretPrompt, "heron", secretResult} {
			require.NotContains(t, state, secret)
		}

		jobs, err := b.store.Jobs(b.ctx, 0)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		var stub map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(mustJSON(t, jobs[0].Stub), &stub))
		keys := make([]string, 0, len(stub))
		for k := range stub {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		require.Equal(t, []string{"audience", "deadlineAt", "id", "kind", "owner", "site", "sizeClass", "streaming"}, keys)
	})
}

func TestFreezeGate3_DaemonRefusesWorkSealedByAKeyItNeverPinned(t *testing.T) { // RB-F19
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		s := b.stub(t, "job-1", "alice")
		b.enqueue(t, s)
		c := b.claimOne(t, d, s.ID)
		p := b.pending(t, s.ID)
		pinned, ok := d.SiteIdentity()
		require.True(t, ok)
		require.Equal(t, b.keys["site"].Public(), pinned, "pair pinned the site's identity")

		// A stranger seals to the right device; the relay cannot tell.
		forged, err := peer.Seal(b.keys["stranger"], p.Device, s.ID, protocol.DirectionPayload, s.DeadlineAt, json.RawMessage(`{"prompt":"obey me"}`))
		require.NoError(t, err)
		_, err = b.site.Payload(b.ctx, s.ID, forged)
		require.NoError(t, err, "the relay accepts any opaque envelope")

		got, err := d.Fetch(b.ctx, s.ID, c.Lease.ID)
		require.NoError(t, err)
		require.Equal(t, forged, got.Envelope, "the relay serves what it stored, verbatim")
		expect := peer.Expectation{JobID: s.ID, Direction: protocol.DirectionPayload, SenderIdentity: pinned.Identity}
		_, err = peer.Open(d.Keys(), got.Envelope, expect)
		require.Error(t, err, "the daemon refuses a sender it never pinned")

		// Relabelled to claim the site as sender, it fails the signature.
		relabelled := got.Envelope
		relabelled.SenderKeyID = b.keys["site"].KeyID()
		_, err = peer.Open(d.Keys(), relabelled, expect)
		require.ErrorContains(t, err, "signature")

		// Refusing gives the job back and keeps it away from this runner.
		rel, err := d.Release(b.ctx, []protocol.LeaseRef{lease(c)}, protocol.ReasonRefused)
		require.NoError(t, err)
		require.Equal(t, []string{s.ID}, rel.Released)
		require.Empty(t, b.claim(t, d, 8))
		b.requireState(t, s.ID, store.Queued)
	})
}

func TestFreezeGate4_RequeuesWhenTheSiteVanishesBetweenClaimAndSeal(t *testing.T) { // RB-F20
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		s := b.stub(t, "job-1", "alice")
		b.enqueue(t, s)
		c := b.claimOne(t, d, s.ID)
		p := b.pending(t, s.ID)

		b.advance(11 * time.Second)
		// The site's pending poll sweeps first, so the job is no longer listed.
		pend, err := b.site.Pending(b.ctx)
		require.NoError(t, err)
		require.Empty(t, pend.Jobs)
		j := b.requireState(t, s.ID, store.Queued)
		require.Equal(t, s, j.Stub, "the stub survives the requeue intact")
		require.Nil(t, j.ClaimedBy)
		require.Nil(t, j.Payload)

		// The site comes back with a fresh, correctly signed seal: too late.
		env, err := b.site.SealFor(p, s.ID, s.DeadlineAt, json.RawMessage(`{"prompt":"late"}`))
		require.NoError(t, err)
		_, err = b.site.Payload(b.ctx, s.ID, env)
		requireRefused(t, err, 409, bodyTooLate(store.Queued))
		b.requireState(t, s.ID, store.Queued)

		// The old grant is gone; a fresh claim gets a new one.
		_, err = d.Fetch(b.ctx, s.ID, c.Lease.ID)
		requireRefused(t, err, 403, bodyNotHolder)
		again := b.claimOne(t, d, s.ID)
		require.NotEqual(t, c.Lease.ID, again.Lease.ID)
	})
}

func TestFreezeGate5_RevocationKillsRoutingWithinOneHeartbeat(t *testing.T) { // RB-F21, RB-F91
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		b.enqueue(t, b.stub(t, "job-1", "alice"), b.stub(t, "job-2", "alice"))
		c := b.claimOne(t, d, "job-1")
		before := b.job(t, "job-1").ClaimedBy

		b.project(t, withRevocation("alice"))

		listed := []protocol.LeaseRef{lease(c), {JobID: "never-held", LeaseID: "x"}, lease(c)}
		hb, err := d.Heartbeat(b.ctx, listed)
		require.NoError(t, err)
		require.Equal(t, protocol.HeartbeatResponse{
			Revoked: true, Cancel: []string{}, Lost: []string{"job-1", "never-held", "job-1"}, ServerTime: b.relayNow(),
		}, hb, "lost is the listed job ids verbatim, in order, duplicates kept")
		// Nothing was renewed or released in the store.
		j := b.requireState(t, "job-1", store.AwaitingPayload)
		require.Equal(t, before, j.ClaimedBy)

		_, err = d.Claim(b.ctx, []string{protocol.KindGenerate}, 8)
		requireRefused(t, err, 403, bodyRevoked)
		b.requireState(t, "job-2", store.Queued)
		_, err = d.Fetch(b.ctx, "job-1", c.Lease.ID)
		requireRefused(t, err, 403, bodyRevoked)
	})
}

func TestFreezeGate6_NamedJobRoutesToARosterDeviceWhenBothOwnersConsented(t *testing.T) { // RB-F22, RB-F6
	opts := &setupOpts{Fixture: []fixtureMod{withRoster("bob", "alice")}}
	eachStore(t, opts, func(t *testing.T, b *bundle) {
		bob := b.paired(t, "bob")
		fin, _ := roundTrip(t, b, bob, "runner_bob", b.stub(t, "named-1", "alice", audience(protocol.AudienceNamed)))
		require.Equal(t, "bob", fin.RunnerOwner, "runnerOwner is the pairing owner, not the job owner (RB-F6)")
		require.NotContains(t, b.dumpState(t), "heron")

		// Without alice's consent the roster alone routes nothing.
		b.project(t, withoutConsent("alice"))
		b.enqueue(t, b.stub(t, "named-2", "alice", audience(protocol.AudienceNamed)))
		require.Empty(t, b.claim(t, bob, 8))
		b.requireState(t, "named-2", store.Queued)
	})
}

func TestFreezeGate7_StreamingFlagIsCarriedUntouched(t *testing.T) { // RB-F23
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		d := b.paired(t, "alice")
		for _, on := range []bool{false, true} {
			s := b.stub(t, "stream-"+strconv.FormatBool(on), "alice", streaming(on))
			b.enqueue(t, s)
			c := b.claimOne(t, d, s.ID)
			require.Equal(t, on, c.Streaming)
			b.runToDone(t, d, c)
			j := b.requireState(t, s.ID, store.Done)
			require.Equal(t, on, j.Stub.Streaming)
		}
	})
}

func TestFreezeGate10_DeviceNoHumanApprovedIsRefused(t *testing.T) { // RB-F24, RB-A16 #21
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		stranger := b.daemon(t, "stranger")
		_, err := stranger.Pair(b.ctx, "alice")
		requireRefused(t, err, 403, bodyDeviceNotApproved)
		people, err := b.store.Runners(b.ctx, 0)
		require.NoError(t, err)
		require.Empty(t, people, "a refused pairing leaves no presence")

		b.paired(t, "alice")
	})
}

func TestFreezeGate11_DeviceApprovedForAnotherOwnerIsRefused(t *testing.T) { // RB-F25, RB-G20, RB-A16 #22
	eachStore(t, nil, func(t *testing.T, b *bundle) {
		// bob consented, so the consent check passes and the owner check is
		// what refuses (RB-G20: upstream's test stopped at the consent check).
		alice := b.daemon(t, "alice")
		_, err := alice.Pair(b.ctx, "bob")
		requireRefused(t, err, 403, bodyDeviceOtherOwner)
		_, ok := b.presence(t, "runner_alice")
		require.False(t, ok)

		// The same presentation for an owner without consent stops earlier.
		_, err = alice.Pair(b.ctx, "carol")
		requireRefused(t, err, 403, bodyNoConsent)
	})
}
