package valkey

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// TestClaimMergesQueuesAcrossPages interleaves jobs over several queues
// and puts refused jobs at the heads, so a claim must page through each
// queue and still grant in first-enqueue order.
func TestClaimMergesQueuesAcrossPages(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	owners := []string{"alice", "bob", "carol"}
	kinds := []string{protocol.KindGenerate, protocol.KindChat}
	var order []string
	for i := range 120 {
		st := testStub(t, s, fmt.Sprintf("j%03d", i))
		st.Owner = owners[i%3]
		st.Kind = kinds[(i/3)%2]
		_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Stub: st})
		require.NoError(t, err)
		order = append(order, st.ID)
	}
	in := store.ClaimInput{RunnerID: "r1", Owner: "alice", Device: testDevice, Kinds: kinds, Max: 64, LeaseMs: 30_000}
	for _, o := range owners {
		in.Routes = append(in.Routes, store.Route{SiteID: testSite, Owner: o})
	}
	// r1 takes and refuses the first 40, which then sit at the queue heads.
	refuse := in
	refuse.Max = 40
	got, err := s.Claim(ctx, refuse)
	require.NoError(t, err)
	require.Len(t, got, 40)
	_, err = s.Release(ctx, store.ReleaseInput{RunnerID: "r1", Leases: leaseRefs(got), Reason: protocol.ReasonRefused})
	require.NoError(t, err)

	// One at a time, a claim reads the queues and r1's refusals in small
	// pages that grow; it must still step over all 40 refusals in order.
	one := in
	one.Max = 1
	for i := range 3 {
		got, err = s.Claim(ctx, one)
		require.NoError(t, err)
		require.Equal(t, order[40+i:41+i], claimedIDs(got))
	}
	_, err = s.Release(ctx, store.ReleaseInput{RunnerID: "r1", Leases: leaseRefs(got), Reason: protocol.ReasonRefused})
	require.NoError(t, err)
	got, err = s.Claim(ctx, in)
	require.NoError(t, err)
	require.Equal(t, order[43:107], claimedIDs(got))
	in.RunnerID = "r2"
	got, err = s.Claim(ctx, in)
	require.NoError(t, err)
	want := append(append(append([]string{}, order[:40]...), order[42]), order[107:]...)
	require.Equal(t, want, claimedIDs(got))
}

func leaseRefs(cs []protocol.ClaimedStub) []protocol.LeaseRef {
	var refs []protocol.LeaseRef
	for _, c := range cs {
		refs = append(refs, protocol.LeaseRef{JobID: c.ID, LeaseID: c.Lease.ID})
	}
	return refs
}

func claimedIDs(cs []protocol.ClaimedStub) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// TestSweepIsBounded shows one sweep settles at most a batch per index,
// and repeated sweeps finish the work.
func TestSweepIsBounded(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	const n = sweepBatch*2 + 10
	for i := range n {
		st := testStub(t, s, fmt.Sprintf("j%04d", i))
		st.DeadlineAt -= 2 * time.Hour.Milliseconds()
		_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Stub: st})
		require.NoError(t, err)
	}
	var total []string
	for _, want := range []int{sweepBatch, sweepBatch, 10, 0} {
		res, err := s.Sweep(ctx)
		require.NoError(t, err)
		require.Len(t, res.Expired, want)
		total = append(total, res.Expired...)
	}
	require.Len(t, total, n)
	require.Equal(t, "j0000", total[0], "oldest first")
}

// TestClaimStepsOverRefusalRunsOnly checks the claim's run-skipping: runs
// of refused jobs are stepped over whole, but an unrefused job between
// refused ones, and refusals of jobs that left and re-entered the queue,
// are honoured exactly.
func TestClaimStepsOverRefusalRunsOnly(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	var ids []string
	for i := range 10 {
		ids = append(ids, fmt.Sprintf("j%d", i))
	}
	mustEnqueue(t, s, ids...)
	release := func(runner, reason string, cs []protocol.ClaimedStub, keep func(string) bool) {
		t.Helper()
		var refs []protocol.LeaseRef
		for _, c := range cs {
			if keep(c.ID) {
				refs = append(refs, protocol.LeaseRef{JobID: c.ID, LeaseID: c.Lease.ID})
			}
		}
		_, err := s.Release(ctx, store.ReleaseInput{RunnerID: runner, Leases: refs, Reason: reason})
		require.NoError(t, err)
	}
	kept := map[string]bool{"j3": true, "j6": true, "j9": true}
	all := mustClaim(t, s, "r1", 10)
	release("r1", protocol.ReasonRefused, all, func(id string) bool { return !kept[id] })
	release("r1", protocol.ReasonShutdown, all, func(id string) bool { return kept[id] })

	got := mustClaim(t, s, "r1", 10)
	require.Equal(t, []string{"j3", "j6", "j9"}, claimedIDs(got))
	release("r1", protocol.ReasonShutdown, got, func(string) bool { return true })

	two := mustClaim(t, s, "r2", 2)
	require.Equal(t, []string{"j0", "j1"}, claimedIDs(two))
	release("r2", protocol.ReasonShutdown, two, func(id string) bool { return id == "j1" })

	require.Equal(t, []string{"j3", "j6", "j9"}, claimedIDs(mustClaim(t, s, "r1", 10)))
	require.Equal(t, []string{"j1", "j2", "j4", "j5", "j7", "j8"}, claimedIDs(mustClaim(t, s, "r2", 10)))
	refusals, err := s.client.Do(ctx, s.client.B().Zcard().Key(s.key("refusals")).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, refusals, "refusals are filed only for queued jobs")
}
