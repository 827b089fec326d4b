package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// admissionContract lists the cases of an operation's admission: the
// presence check and rate charge a daemon call passes in the same step.
func admissionContract(s suite) {
	// charges one request per call and refuses an empty bucket with its wait
	s.run("ChargesOnePerCall", admissionChargesOnePerCall)
	// refuses a runner not paired as exactly that owner and device, spending nothing
	s.run("RefusesUnpairedRunner", admissionRefusesUnpairedRunner)
	// refused, runs no part of the call: nothing granted, stamped or changed
	s.run("RefusedRunsNothing", admissionRefusedRunsNothing)
	// admitted, runs the whole call, stamp included
	s.run("AdmittedRunsWholeCall", admissionAdmittedRunsCall)
	// spends from the bucket the store's limiter of that rate keeps
	s.run("SharesLimiterBuckets", admissionSharesLimiterBuckets)
	// charges a pairing first, which a refusal leaves unrecorded (protocol 2's stamp)
	s.run("ChargesPairingFirst", admissionChargesPairing)
	// charges a release first, which a refusal leaves held; admitted, it stamps and requeues
	s.run("ChargesReleaseFirst", admissionChargesRelease)
	// writes the presence it carries once admitted, whatever the operation answers, and not when refused
	s.run("WritesItsPresence", admissionWritesItsPresence)
	// charges a site's enqueue, payload and cancel first; refused, each writes nothing
	s.run("ChargesSiteWritesFirst", admissionChargesSiteWrites)
}

// admitted is the admission of d's call as protocol "0" makes it.
func admitted(d device) *store.Admission {
	return &store.Admission{
		Paired: &store.Paired{Owner: d.owner, Device: identityOf(d)},
		// One request a second, no burst: each admission charged to it
		// empties it for exactly a second.
		Charge: &store.Charge{Key: "runner:" + d.runner, Every: time.Second, Burst: 1},
	}
}

func (b *bundle) touchAdmitted(d device, a *store.Admission) (bool, error) {
	return b.s.Touch(b.ctx, store.TouchInput{RunnerID: d.runner, Admit: a})
}

// requireRateLimited asserts err is a rate-limit refusal with that wait.
func requireRateLimited(t *testing.T, err error, wait time.Duration) {
	t.Helper()
	requireRefusal(t, err, store.RefusedRateLimited)
	var r *store.Refusal
	require.True(t, errors.As(err, &r))
	require.Equal(t, wait, r.RetryAfter, "the wait until the bucket has a request")
}

func admissionChargesOnePerCall(t *testing.T, b *bundle) {
	b.pair(t, store.PairInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice)})
	known, err := b.touchAdmitted(alice, admitted(alice))
	require.NoError(t, err)
	require.True(t, known)
	_, err = b.touchAdmitted(alice, admitted(alice))
	requireRateLimited(t, err, time.Second)
	b.advance(t, 400*time.Millisecond)
	_, err = b.touchAdmitted(alice, admitted(alice))
	requireRateLimited(t, err, 600*time.Millisecond)
	// Another caller's bucket is its own.
	b.pair(t, store.PairInput{RunnerID: bob.runner, Owner: bob.owner, Device: identityOf(bob)})
	_, err = b.touchAdmitted(bob, admitted(bob))
	require.NoError(t, err)
	b.advance(t, 600*time.Millisecond)
	_, err = b.touchAdmitted(alice, admitted(alice))
	require.NoError(t, err, "the bucket refills on the store clock")
	// A burst is spent request by request.
	burst := &store.Admission{Charge: &store.Charge{Key: "burst", Every: time.Second, Burst: 3}}
	for range 3 {
		_, err = b.touchAdmitted(alice, burst)
		require.NoError(t, err)
	}
	_, err = b.touchAdmitted(alice, burst)
	requireRateLimited(t, err, time.Second)
}

func admissionRefusesUnpairedRunner(t *testing.T, b *bundle) {
	_, err := b.touchAdmitted(alice, admitted(alice))
	requireRefusal(t, err, store.RefusedUnknownRunner)
	b.pair(t, store.PairInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice)})
	otherOwner := admitted(alice)
	otherOwner.Paired.Owner = bob.owner
	_, err = b.touchAdmitted(alice, otherOwner)
	requireRefusal(t, err, store.RefusedUnknownRunner)
	for _, change := range []func(*protocol.PublicIdentity){
		func(d *protocol.PublicIdentity) { d.Identity = identityKey(bob.runner) },
		func(d *protocol.PublicIdentity) { d.Encryption += "-rotated" },
		func(d *protocol.PublicIdentity) { d.EncryptionSig += "-rotated" },
	} {
		otherDevice := admitted(alice)
		change(&otherDevice.Paired.Device)
		_, err = b.touchAdmitted(alice, otherDevice)
		requireRefusal(t, err, store.RefusedUnknownRunner)
	}
	// None of the refusals spent the one request the bucket holds.
	_, err = b.touchAdmitted(alice, admitted(alice))
	require.NoError(t, err)
	// Without Paired, only the charge is checked: an unpaired runner is
	// charged, and its touch reports it unknown.
	known, err := b.touchAdmitted(bob, &store.Admission{Charge: admitted(bob).Charge})
	require.NoError(t, err)
	require.False(t, known)
}

func admissionRefusedRunsNothing(t *testing.T, b *bundle) {
	b.pair(t, store.PairInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice)})
	b.enqueue(t, "a", "b")
	c := b.claimOne(t, alice)
	b.seal(t, c)
	_, err := b.touchAdmitted(alice, admitted(alice)) // empties the bucket
	require.NoError(t, err)
	b.advance(t, 500*time.Millisecond)
	seen := b.presence(t, alice.runner).LastSeenAt

	claim := store.ClaimInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice),
		Routes: []store.Route{{SiteID: Site, Owner: alice.owner}}, Kinds: []string{protocol.KindGenerate}, Max: 1, LeaseMs: leaseMs,
		Touch: true, Admit: admitted(alice)}
	_, err = b.s.Claim(b.ctx, claim)
	requireRateLimited(t, err, 500*time.Millisecond)
	b.requireState(t, "b", store.Queued)
	held := lease(c)
	held.Touch, held.Admit = true, admitted(alice)
	_, err = b.s.Fetch(b.ctx, held)
	requireRateLimited(t, err, 500*time.Millisecond)
	b.requireState(t, "a", store.Ready)
	_, err = b.s.Result(b.ctx, store.ResultInput{LeaseInput: held, Envelope: envelope(protocol.DirectionResult, "a-ok"), Disposition: protocol.DispositionOK})
	requireRateLimited(t, err, 500*time.Millisecond)
	b.requireState(t, "a", store.Ready)
	require.Equal(t, seen, b.presence(t, alice.runner).LastSeenAt, "a refused call stamps nothing")

	stranger := admitted(bob)
	claim.Admit = stranger
	_, err = b.s.Claim(b.ctx, claim)
	requireRefusal(t, err, store.RefusedUnknownRunner)
	b.requireState(t, "b", store.Queued)
}

func admissionAdmittedRunsCall(t *testing.T, b *bundle) {
	b.pair(t, store.PairInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice)})
	b.enqueue(t, "a")
	step := func(call func() error) {
		t.Helper()
		b.advance(t, time.Second)
		now := b.now(t)
		require.NoError(t, call())
		require.Equal(t, now, b.presence(t, alice.runner).LastSeenAt, "the admitted call stamps the runner")
	}
	var got []protocol.ClaimedStub
	step(func() (err error) {
		got, err = b.s.Claim(b.ctx, store.ClaimInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice),
			Routes: []store.Route{{SiteID: Site, Owner: alice.owner}}, Kinds: []string{protocol.KindGenerate}, Max: 1, LeaseMs: leaseMs,
			Touch: true, Admit: admitted(alice)})
		return err
	})
	require.Len(t, got, 1)
	b.seal(t, got[0])
	held := lease(got[0])
	held.Touch, held.Admit = true, admitted(alice)
	step(func() error {
		env, err := b.s.Fetch(b.ctx, held)
		require.Equal(t, envelopeFor(alice.runner, protocol.DirectionPayload, "a"), env)
		return err
	})
	b.requireState(t, "a", store.Running)
	step(func() error {
		res, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: held, Envelope: envelope(protocol.DirectionResult, "a-ok"), Disposition: protocol.DispositionOK})
		require.False(t, res.Duplicate)
		return err
	})
	b.requireState(t, "a", store.Done)
	// An operation's own refusals still come after an admitted charge.
	b.advance(t, time.Second)
	held.LeaseID = "not-the-lease"
	_, err := b.s.Fetch(b.ctx, held)
	requireRefusal(t, err, store.RefusedStaleLease)
	_, err = b.touchAdmitted(alice, admitted(alice))
	requireRateLimited(t, err, time.Second)
}

func admissionSharesLimiterBuckets(t *testing.T, b *bundle) {
	require.NotNil(t, b.h.Allow, "the harness charges through the store's limiter")
	b.pair(t, store.PairInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice)})
	allowed, _ := b.h.Allow(t, "runner:"+alice.runner, time.Second, 1)
	require.True(t, allowed)
	_, err := b.touchAdmitted(alice, admitted(alice))
	requireRateLimited(t, err, time.Second)
	b.advance(t, time.Second)
	_, err = b.touchAdmitted(alice, admitted(alice))
	require.NoError(t, err)
	allowed, wait := b.h.Allow(t, "runner:"+alice.runner, time.Second, 1)
	require.False(t, allowed, "the limiter sees the admission's request")
	require.Equal(t, time.Second, wait)
}

func admissionChargesPairing(t *testing.T, b *bundle) {
	charge := &store.Admission{Charge: admitted(alice).Charge}
	in := store.PairInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice), Admit: charge}
	now := b.now(t)
	p, err := b.s.Pair(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, store.Presence{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice), LastSeenAt: now}, p)
	b.advance(t, 250*time.Millisecond)
	in.Owner, in.Capabilities = bob.owner, []byte(`["x"]`)
	_, err = b.s.Pair(b.ctx, in)
	requireRateLimited(t, err, 750*time.Millisecond)
	require.Equal(t, p, b.presence(t, alice.runner), "the refused pairing recorded nothing")
	_, err = b.s.Pair(b.ctx, store.PairInput{RunnerID: bob.runner, Owner: bob.owner, Device: identityOf(bob), Admit: admitted(bob)})
	requireRefusal(t, err, store.RefusedUnknownRunner)
	_, ok, err := b.s.Presence(b.ctx, bob.runner)
	require.NoError(t, err)
	require.False(t, ok, "a refused pairing creates no presence")
}

func admissionChargesRelease(t *testing.T, b *bundle) {
	b.pair(t, store.PairInput{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice)})
	b.enqueue(t, "a")
	c := b.claimOne(t, alice)
	release := store.ReleaseInput{SiteID: Site, RunnerID: alice.runner, Leases: []protocol.LeaseRef{ref(c)}, Reason: protocol.ReasonShutdown,
		Touch: true, Admit: admitted(bob)}
	_, err := b.s.Release(b.ctx, release)
	requireRefusal(t, err, store.RefusedUnknownRunner)
	b.requireState(t, "a", store.AwaitingPayload)
	b.advance(t, time.Second)
	now := b.now(t)
	release.Admit = admitted(alice)
	released, err := b.s.Release(b.ctx, release)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, released)
	b.requireState(t, "a", store.Queued)
	require.Equal(t, now, b.presence(t, alice.runner).LastSeenAt, "the admitted release stamps the runner")
	_, err = b.s.Release(b.ctx, release)
	requireRateLimited(t, err, time.Second)
}

func admissionWritesItsPresence(t *testing.T, b *bundle) {
	owed := func() *store.Admission {
		return &store.Admission{Charge: admitted(alice).Charge, Pair: &store.PairInput{Owner: alice.owner, Device: identityOf(alice)}}
	}
	now := b.now(t)
	// A fetch no job answers still writes the presence (protocol "2"
	// rebuilds it on every signed call).
	_, err := b.s.Fetch(b.ctx, store.LeaseInput{Proto: store.Proto2, JobID: "none", RunnerID: alice.runner, LeaseID: "none", Admit: owed()})
	requireRefusal(t, err, store.RefusedNotFound)
	require.Equal(t, store.Presence{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice), LastSeenAt: now}, b.presence(t, alice.runner))
	runners, err := b.s.Runners(b.ctx, 0)
	require.NoError(t, err)
	require.Len(t, runners, 1, "the written presence is a pairing")
	// Refused by its charge, it writes nothing.
	b.advance(t, 500*time.Millisecond)
	_, err = b.s.Claim(b.ctx, store.ClaimInput{Proto: store.Proto2, RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice),
		Routes: []store.Route{{SiteID: Site, Owner: alice.owner}}, Kinds: []string{protocol.KindGenerate}, Max: 1, LeaseMs: leaseMs, Admit: owed()})
	requireRateLimited(t, err, 500*time.Millisecond)
	require.Equal(t, now, b.presence(t, alice.runner).LastSeenAt)
}

func admissionChargesSiteWrites(t *testing.T, b *bundle) {
	charge := func() *store.Admission {
		return &store.Admission{Charge: &store.Charge{Key: "site:" + Site, Every: time.Second, Burst: 1}}
	}
	res, err := b.s.Enqueue(b.ctx, store.EnqueueInput{SiteID: Site, Stub: b.stub(t, "a"), Admit: charge()})
	require.NoError(t, err)
	require.True(t, res.Created)
	_, err = b.s.Enqueue(b.ctx, store.EnqueueInput{SiteID: Site, Stub: b.stub(t, "b"), Admit: charge()})
	requireRateLimited(t, err, time.Second)
	b.requireGone(t, "b")

	c := b.claimOne(t, alice)
	payload := store.PayloadInput{JobID: c.ID, SiteID: Site, Envelope: envelopeFor(alice.runner, protocol.DirectionPayload, c.ID), Admit: charge()}
	requireRateLimited(t, b.s.Payload(b.ctx, payload), time.Second)
	b.requireState(t, "a", store.AwaitingPayload)
	_, err = b.s.Cancel(b.ctx, store.CancelInput{JobID: "a", SiteID: Site, Admit: charge()})
	requireRateLimited(t, err, time.Second)
	require.False(t, b.job(t, "a").Cancelled)

	b.advance(t, time.Second)
	require.NoError(t, b.s.Payload(b.ctx, payload))
	b.requireState(t, "a", store.Ready)
}
