package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/store"
)

// sweepContract2 lists the protocol "2" sweep cases.
func sweepContract2(s suite) {
	// v2: stops offering a job past its deadline, and drops the ciphertext (published case 21)
	s.run("V2DropsPastDeadline", sweep2DropsJobPastDeadline)
	// v2: reports what a sweep removed, not only what it requeued (published case 22)
	s.run("V2ReportsRemoved", sweep2ReportsWhatItRemoved)
	// v2: evicts a job on the third consecutive lapse of its sealing window (§4.5, P2-S18)
	s.run("V2EvictsOnThirdLapse", sweep2EvictsOnThirdLapse)
	// v2: evicts on the third lapse even when no sweep ran (P2-S17)
	s.run("V2EvictsWithoutSweep", sweep2EvictsLazily)
	// v0: keeps the plain requeue of a lapsed sealing window, with no count and no re-offer (P2-A5)
	s.run("V0PlainRequeue", sweep0PlainRequeue)
	// v2: a lapsed lease requeues and keeps the sealing bookkeeping (P2-ST20, after RD-D14's holder window)
	s.run("V2LeaseLapseKeepsBookkeeping", sweep2LeaseLapseKeepsBookkeeping)
}

// presenceContract2 lists the protocol "2" presence cases.
func presenceContract2(s suite) {
	// v2: remembers a device, and what it says it can run (published case 31)
	s.run("V2RemembersCapabilities", presence2RemembersCapabilities)
	// v2: replaces the matrix rather than merging it (published case 32)
	s.run("V2ReplacesMatrix", presence2ReplacesMatrix)
	// v2: keeps an empty matrix, because empty is an answer (published case 33)
	s.run("V2KeepsEmptyMatrix", presence2KeepsEmptyMatrix)
	// v2: remembers which kinds are withheld, and drops them when resolved (published case 34)
	s.run("V2RemembersWithheld", presence2RemembersWithheld)
	// leaves capabilities and withheld alone when a pairing does not say them (§2.4.3 item 9)
	s.run("LeavesUnsaidAlone", presenceLeavesUnsaidAlone)
	// v2: stamps presence from its own clock, and moves it on the next beat (published case 35)
	s.run("V2StampsFromOwnClock", presence2StampsFromOwnClock)
	// v2: lists everyone it has seen (published case 36)
	s.run("V2ListsEveryone", presence2ListsEveryone)
	// v2: does not know a runner it has never seen (published case 37)
	s.run("V2UnknownStranger", presence2DoesNotKnowStranger)
}

func sweep2DropsJobPastDeadline(t *testing.T, b *bundle) {
	b.enqueue2On(t, Site, b.stub2(t, "a", deadlineIn(t, b, -time.Second)))
	require.Empty(t, b.claim2(t, alice, 10))
	b.requireGone(t, "a")
}

func sweep2ReportsWhatItRemoved(t *testing.T, b *bundle) {
	b.enqueue2On(t, Site, b.stub2(t, "old", deadlineIn(t, b, time.Second)))
	b.enqueue2(t, "live")
	b.advance(t, time.Second)
	res := b.sweep(t)
	require.Equal(t, []string{"old"}, res.Expired)
	require.Empty(t, res.Requeued)
	b.requireState(t, "live", store.Queued)
}

func sweep2EvictsOnThirdLapse(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	for attempt := 1; attempt < store.SealAttemptsBeforeEviction; attempt++ {
		b.claim2One(t, alice)
		res := b.lapse(t)
		require.Equal(t, store.SweepResult{Requeued: []string{"a"}, Lapsed: []string{"a"}}, normalised(res), "lapse %d", attempt)
		j := b.requireState(t, "a", store.Queued)
		require.Equal(t, attempt, j.SealAttempts)
		require.Equal(t, alice.runner, j.ReofferTo)
	}
	b.claim2One(t, alice)
	res := b.lapse(t)
	require.Equal(t, store.SweepResult{Expired: []string{"a"}, Lapsed: []string{"a"}}, normalised(res))
	b.requireGone(t, "a")
	pending, err := b.s.Pending(b.ctx, Site)
	require.NoError(t, err)
	require.Empty(t, pending)
}

func sweep2EvictsLazily(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	for range store.SealAttemptsBeforeEviction - 1 {
		b.claim2One(t, alice)
		b.lapse(t)
	}
	c := b.claim2One(t, alice)
	b.advance(t, sealingWindow)
	_, err := b.fetch2(c)
	requireRefusal(t, err, store.RefusedNotFound)
	b.requireGone(t, "a")
	require.Equal(t, store.SweepResult{}, normalised(b.sweep(t)), "what an operation dropped, the sweep does not report")
	require.True(t, b.enqueue2On(t, Site, b.stub2(t, "a")).Created, "the id is free again")
}

func sweep0PlainRequeue(t *testing.T, b *bundle) {
	b.enqueue(t, "a")
	for range store.SealAttemptsBeforeEviction + 1 {
		b.claimOne(t, alice)
		b.advance(t, sealingWindow)
		res := b.sweep(t)
		require.Equal(t, store.SweepResult{Requeued: []string{"a"}}, normalised(res))
	}
	j := b.requireState(t, "a", store.Queued)
	require.Zero(t, j.SealAttempts)
	require.Empty(t, j.ReofferTo)
	require.Equal(t, "a", b.claimOne(t, alice2).ID, "re-offered to anyone")
}

func sweep2LeaseLapseKeepsBookkeeping(t *testing.T, b *bundle) {
	b.enqueue2(t, "a")
	b.claim2One(t, alice)
	b.lapse(t)
	c := b.claim2One(t, alice)
	b.sealOn(t, Site, c)
	b.advance(t, leaseMs*time.Millisecond)
	b.sweep(t) // sealed: kept for its holder for one lease length (RD-D14)
	b.advance(t, store.HolderReturnMs*time.Millisecond)
	res := b.sweep(t)
	require.Equal(t, store.SweepResult{Requeued: []string{"a"}}, normalised(res), "a lease lapse is no sealing lapse")
	j := b.requireState(t, "a", store.Queued)
	require.Equal(t, alice.runner, j.ReofferTo, "reofferTo survives a lease-expiry requeue")
	require.Nil(t, j.ClaimedBy)
	require.Nil(t, j.Payload)
}

// normalised makes a sweep result's empty lists nil, so results compare
// whichever way a store spells "none".
func normalised(r store.SweepResult) store.SweepResult {
	for _, l := range []*[]string{&r.Requeued, &r.Expired, &r.Lapsed} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	return r
}

// Capability matrices as a v2 daemon reports them; the store keeps them
// verbatim and never reads them.
var (
	llama3       = json.RawMessage(`[{"kind":"llm.generate","models":["llama3"]}]`)
	mistral      = json.RawMessage(`[{"kind":"llm.generate","models":["mistral"]}]`)
	empty        = json.RawMessage(`[]`)
	chatWithheld = json.RawMessage(`[{"kind":"llm.chat","claimants":["site_store"]}]`)
)

func pairWith(d device, capabilities, withheld json.RawMessage) store.PairInput {
	return store.PairInput{RunnerID: d.runner, Owner: d.owner, Device: identityOf(d), Capabilities: capabilities, Withheld: withheld}
}

func presence2RemembersCapabilities(t *testing.T, b *bundle) {
	now := b.now(t)
	p := b.pair(t, pairWith(alice, llama3, empty))
	want := store.Presence{RunnerID: alice.runner, Owner: alice.owner, Device: identityOf(alice), LastSeenAt: now, Capabilities: llama3, Withheld: empty}
	require.Equal(t, want, p)
	require.Equal(t, want, b.presence(t, alice.runner))
}

func presence2ReplacesMatrix(t *testing.T, b *bundle) {
	b.pair(t, pairWith(alice, llama3, nil))
	b.pair(t, pairWith(alice, mistral, nil))
	require.Equal(t, mistral, b.presence(t, alice.runner).Capabilities)
}

func presence2KeepsEmptyMatrix(t *testing.T, b *bundle) {
	b.pair(t, pairWith(alice, llama3, nil))
	b.pair(t, pairWith(alice, empty, nil))
	got := b.presence(t, alice.runner).Capabilities
	require.NotNil(t, got)
	require.Equal(t, empty, got)
}

func presence2RemembersWithheld(t *testing.T, b *bundle) {
	b.pair(t, pairWith(alice, llama3, chatWithheld))
	require.Equal(t, chatWithheld, b.presence(t, alice.runner).Withheld)
	b.pair(t, pairWith(alice, llama3, empty))
	p := b.presence(t, alice.runner)
	require.Equal(t, empty, p.Withheld)
	require.Equal(t, llama3, p.Capabilities)
}

func presenceLeavesUnsaidAlone(t *testing.T, b *bundle) {
	b.pair(t, pairWith(alice, llama3, chatWithheld))
	b.advance(t, time.Second)
	now := b.now(t)
	p := b.pair(t, pairWith(alice, nil, nil))
	require.Equal(t, llama3, p.Capabilities)
	require.Equal(t, chatWithheld, p.Withheld)
	require.Equal(t, now, p.LastSeenAt)
	fresh := b.pair(t, pairWith(bob, nil, nil))
	require.Nil(t, fresh.Capabilities, "a runner that never said is nil, not empty")
	require.Nil(t, fresh.Withheld)
}

func presence2StampsFromOwnClock(t *testing.T, b *bundle) {
	before := b.now(t)
	first := b.pair(t, pairWith(alice, llama3, empty))
	require.GreaterOrEqual(t, first.LastSeenAt, before)
	b.advance(t, 30*time.Second)
	second := b.pair(t, pairWith(alice, llama3, empty))
	require.Equal(t, first.LastSeenAt+30_000, second.LastSeenAt)
}

func presence2ListsEveryone(t *testing.T, b *bundle) {
	r5 := device{runner: "runner_5", owner: "alice"}
	r6 := device{runner: "runner_6", owner: "bob"}
	b.pair(t, pairWith(r5, llama3, empty))
	b.pair(t, pairWith(r6, mistral, empty))
	all, err := b.s.Runners(b.ctx, 0)
	require.NoError(t, err)
	var runners []string
	for _, p := range all {
		runners = append(runners, p.RunnerID)
	}
	require.Equal(t, []string{"runner_5", "runner_6"}, runners)
	require.Equal(t, mistral, all[1].Capabilities)
}

func presence2DoesNotKnowStranger(t *testing.T, b *bundle) {
	_, ok, err := b.s.Presence(b.ctx, "runner_never_seen")
	require.NoError(t, err)
	require.False(t, ok)
}
