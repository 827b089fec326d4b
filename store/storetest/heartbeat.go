package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// heartbeatContract lists the heartbeat cases: its steps in one call.
func heartbeatContract(s suite) {
	// stamps, sweeps, lists cancels and renews, each as its own operation answers
	s.run("EachStepAnswers", heartbeatAnswersItsSteps)
	// not serving, stamps and sweeps but lists and renews nothing
	s.run("NotServing", heartbeatNotServing)
	// in protocol 2 writes presence through its admission as pair does, and resolves grants lease first
	s.run("V2WritesPresenceLeaseFirst", heartbeat2WritesPresence)
	// refused its admission, runs none of its steps
	s.run("RefusedRunsNothing", heartbeatRefusedRunsNothing)
}

// heartbeatWorld has alice hold sealed jobs a and b (b cancelled) and bob
// hold c unsealed, then lets c's sealing window lapse.
func heartbeatWorld(t *testing.T, b *bundle) (a, bb, c protocol.ClaimedStub) {
	for _, d := range []device{alice, bob} {
		b.pair(t, store.PairInput{RunnerID: d.runner, Owner: d.owner, Device: identityOf(d)})
	}
	b.enqueue(t, "a", "b", "c")
	a, bb = b.claimOne(t, alice), b.claimOne(t, alice)
	b.seal(t, a)
	b.seal(t, bb)
	c = b.claimOne(t, bob, alice.owner)
	require.True(t, b.cancel(t, Site, "b"))
	b.advance(t, sealingWindow)
	return a, bb, c
}

func (b *bundle) heartbeat(t *testing.T, in store.HeartbeatInput) store.HeartbeatResult {
	t.Helper()
	res, err := b.s.Heartbeat(b.ctx, in)
	require.NoError(t, err)
	return res
}

func heartbeatAnswersItsSteps(t *testing.T, b *bundle) {
	a, bb, c := heartbeatWorld(t, b)
	now := b.now(t)
	res := b.heartbeat(t, store.HeartbeatInput{Proto: store.Proto0, SiteID: Site, RunnerID: alice.runner, Touch: true, Serving: true,
		Leases: []protocol.LeaseRef{ref(a), ref(bb), ref(c)}, LeaseMs: leaseMs})
	require.Equal(t, store.HeartbeatResult{
		Swept:  store.SweepResult{Requeued: []string{"c"}, Expired: []string{}, Lapsed: []string{}},
		Cancel: []protocol.LeaseRef{ref(bb)},
		Renewed: store.RenewResult{
			Renewed: []store.Renewal{{JobID: "a", ExpiresAt: now + leaseMs}, {JobID: "b", ExpiresAt: now + leaseMs}},
			Lost:    []protocol.LeaseRef{ref(c)},
		},
	}, normalSweep(res))
	require.Equal(t, now, b.presence(t, alice.runner).LastSeenAt)
	require.Equal(t, now+leaseMs, b.job(t, "a").ClaimedBy.LeaseExpiresAt)
	b.requireState(t, "c", store.Queued)
}

// normalSweep makes a heartbeat's empty sweep lists empty, not nil, so
// stores that answer either compare alike.
func normalSweep(res store.HeartbeatResult) store.HeartbeatResult {
	for _, l := range []*[]string{&res.Swept.Requeued, &res.Swept.Expired, &res.Swept.Lapsed} {
		if *l == nil {
			*l = []string{}
		}
	}
	return res
}

func heartbeatNotServing(t *testing.T, b *bundle) {
	a, _, c := heartbeatWorld(t, b)
	expires := b.job(t, "a").ClaimedBy.LeaseExpiresAt
	now := b.now(t)
	res := b.heartbeat(t, store.HeartbeatInput{Proto: store.Proto0, SiteID: Site, RunnerID: alice.runner, Touch: true,
		Leases: []protocol.LeaseRef{ref(a), ref(c)}, LeaseMs: leaseMs})
	require.Equal(t, store.HeartbeatResult{
		Swept:   store.SweepResult{Requeued: []string{"c"}, Expired: []string{}, Lapsed: []string{}},
		Cancel:  []protocol.LeaseRef{},
		Renewed: store.RenewResult{Renewed: []store.Renewal{}, Lost: []protocol.LeaseRef{}},
	}, normalSweep(res))
	require.Equal(t, now, b.presence(t, alice.runner).LastSeenAt)
	require.Equal(t, expires, b.job(t, "a").ClaimedBy.LeaseExpiresAt, "nothing renewed")
	// A touch creates no presence.
	b.heartbeat(t, store.HeartbeatInput{Proto: store.Proto0, SiteID: Site, RunnerID: "runner_nobody", Touch: true})
	_, ok, err := b.s.Presence(b.ctx, "runner_nobody")
	require.NoError(t, err)
	require.False(t, ok)
}

func heartbeat2WritesPresence(t *testing.T, b *bundle) {
	b.enqueue2(t, "x")
	x := b.claim2One(t, alice)
	b.advance(t, time.Second)
	now := b.now(t)
	caps := json.RawMessage(`[{"kind":"generate"}]`)
	res := b.heartbeat(t, store.HeartbeatInput{Proto: store.Proto2, RunnerID: alice.runner, Serving: true,
		Admit:  &store.Admission{Pair: &store.PairInput{Owner: alice.owner, Device: identityOf(alice), Capabilities: caps, Withheld: json.RawMessage(`[]`)}},
		Leases: []protocol.LeaseRef{ref(x)}, LeaseMs: leaseMs})
	require.Equal(t, []store.Renewal{{JobID: "x", ExpiresAt: now + leaseMs}}, res.Renewed.Renewed)
	require.Empty(t, res.Renewed.Lost)
	require.Empty(t, res.Cancel)
	p := b.presence(t, alice.runner)
	require.Equal(t, store.Presence{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice), LastSeenAt: now,
		Capabilities: caps, Withheld: json.RawMessage(`[]`)}, p)
	runners, err := b.s.Runners(b.ctx, 0)
	require.NoError(t, err)
	require.Len(t, runners, 1, "a heartbeat's presence is a pairing")
}

func heartbeatRefusedRunsNothing(t *testing.T, b *bundle) {
	a, _, _ := heartbeatWorld(t, b)
	seen, expires := b.presence(t, alice.runner).LastSeenAt, b.job(t, "a").ClaimedBy.LeaseExpiresAt
	_, err := b.s.Heartbeat(b.ctx, store.HeartbeatInput{Proto: store.Proto0, SiteID: Site, RunnerID: alice.runner, Touch: true, Serving: true,
		Admit: admitted(bob), Leases: []protocol.LeaseRef{ref(a)}, LeaseMs: leaseMs})
	requireRefusal(t, err, store.RefusedUnknownRunner)
	require.Equal(t, seen, b.presence(t, alice.runner).LastSeenAt)
	require.Equal(t, expires, b.job(t, "a").ClaimedBy.LeaseExpiresAt)
	require.Equal(t, store.AwaitingPayload, b.job(t, "c").State, "no sweep ran")
}
