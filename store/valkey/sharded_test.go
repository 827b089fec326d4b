package valkey

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit/limitertest"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/storetest"
)

// shardedHarness builds an empty sharded store of n buckets under a
// fresh prefix, its clocks pinned together, the contract's protocol-"0"
// site as the relay's. With together, every site lives in bucket n-1
// (not 0, so that lease ids name a bucket no zero byte could stand for);
// else each in its hash's, which keeps the contract's two sites apart.
func shardedHarness(t *testing.T, client valkey.Client, n int, together bool) storetest.Harness {
	s := newShardedTestStore(t, client, n)
	if together {
		s.place = func(string) int { return n - 1 }
	} else if s.BucketOf(storetest.Site) == s.BucketOf(storetest.OtherSite) {
		t.Fatalf("with %d buckets the contract's sites share one", n)
	}
	c, err := ShardedTestClockOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Pin(t.Context()); err != nil {
		t.Fatal(err)
	}
	legacy := func(p store.Proto) func(t *testing.T, id, site, owner, kind string) {
		return func(t *testing.T, id, site, owner, kind string) {
			writeLegacyJob(t, s.site(site), p, id, site, owner, kind)
		}
	}
	return storetest.Harness{
		Store: s,
		Advance: func(t *testing.T, d time.Duration) {
			if err := c.Advance(t.Context(), d); err != nil {
				t.Fatal(err)
			}
		},
		Allow:                limitertest.Allower(s.Limiter),
		WriteUnparseableJob:  legacy(store.Proto0),
		WriteUnparseableJob2: legacy(store.Proto2),
		SitesApart:           !together,
	}
}

func newShardedTestStore(t testing.TB, client valkey.Client, n int) *Sharded {
	t.Helper()
	s, err := NewShardedForTest(t.Context(), client, valkeytest.Prefix(t), Sharding{Buckets: n, Proto0Site: storetest.Site})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestContractSharded runs the whole store contract on the sharded
// layout over a standalone server, twice: the contract's sites in one
// bucket, where every case holds as written, and in two, where the cases
// reading across sites take their per-bucket forms (SitesApart).
func TestContractSharded(t *testing.T) {
	runShardedContract(t, valkeytest.Start(t).Client(t), 4)
}

// runShardedContract runs the contract on n buckets, sites together and
// apart. The race pass runs the apart form only, the one whose calls
// cross buckets: make test's non-race pass runs both on a cluster
// (TestContractShardedCluster), so CI never skips either.
func runShardedContract(t *testing.T, client valkey.Client, n int) {
	t.Run("OneBucket", func(t *testing.T) {
		if raceEnabled {
			t.Skip("the sites-together form runs in make test's non-race pass")
		}
		storetest.Run(t, func(t *testing.T) storetest.Harness { return shardedHarness(t, client, n, true) })
	})
	t.Run("Apart", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Harness { return shardedHarness(t, client, n, false) })
	})
}

// TestContractShardedCluster runs both on a three-primary cluster, where
// the groups of one store live on different primaries.
func TestContractShardedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start-up skipped in -short mode")
	}
	if raceEnabled {
		// As TestContractCluster: make test runs this in its non-race pass.
		t.Skip("the cluster run of the contract is in make test's non-race pass")
	}
	runShardedContract(t, valkeytest.StartCluster(t).Client(t), 6)
}

// threeSites is a sharded store of three buckets, site "s<i>" in bucket i,
// its clocks pinned, and a protocol-"2" stub maker for it.
func threeSites(t *testing.T) (*Sharded, *ShardedTestClock, func(site, id string) protocol.JobStub) {
	t.Helper()
	s := newShardedTestStore(t, valkeytest.Shared(t).Client(t), 3)
	s.place = func(site string) int { return int(site[1] - '0') }
	c, err := ShardedTestClockOf(s)
	require.NoError(t, err)
	require.NoError(t, c.Pin(t.Context()))
	now, err := s.Now(t.Context())
	require.NoError(t, err)
	stub := func(site, id string) protocol.JobStub {
		return protocol.JobStub{ID: id, Kind: protocol.KindGenerate, Owner: "alice", Site: site, Audience: "team",
			SizeClass: "small", DeadlineAt: now + time.Hour.Milliseconds()}
	}
	return s, c, stub
}

// grantedInEach enqueues job "j<site>" in each of sites and claims them
// all for runner in one claim.
func grantedInEach(t *testing.T, s *Sharded, stub func(site, id string) protocol.JobStub, runner string, sites ...string) []protocol.ClaimedStub {
	t.Helper()
	for _, site := range sites {
		_, err := s.Enqueue(t.Context(), store.EnqueueInput{SiteID: site, Proto: store.Proto2, Stub: stub(site, "j"+site)})
		require.NoError(t, err)
	}
	got, err := s.Claim(t.Context(), claim2Input(runner, len(sites), sites...))
	require.NoError(t, err)
	require.Len(t, got, len(sites))
	return got
}

func claim2Input(runner string, max int, sites ...string) store.ClaimInput {
	in := store.ClaimInput{Proto: store.Proto2, RunnerID: runner, Owner: "alice", Device: testDevice,
		Kinds: []string{protocol.KindGenerate}, Max: max, LeaseMs: 30_000}
	for _, site := range sites {
		in.Routes = append(in.Routes, store.Route{SiteID: site, Owner: "alice"})
	}
	return in
}

// TestShardedLeasesNameTheirBucket: a grant's lease id is a UUIDv4 whose
// first byte is its bucket, so that calls naming the lease alone go
// straight there; a lease naming no bucket is not found, and lost.
func TestShardedLeasesNameTheirBucket(t *testing.T) {
	s, _, stub := threeSites(t)
	ctx := t.Context()
	for i, site := range []string{"s0", "s1", "s2"} {
		_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: site, Proto: store.Proto2, Stub: stub(site, "j")})
		require.NoError(t, err)
		got, err := s.Claim(ctx, claim2Input("r", 1, site))
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Regexp(t, `^0`+strconv.Itoa(i)+`[0-9a-f]{6}-[0-9a-f]{4}-4`, got[0].Lease.ID)
	}
	forged := "ff000000-0000-4000-8000-000000000000"
	_, err := s.Fetch(ctx, store.LeaseInput{Proto: store.Proto2, JobID: "j", RunnerID: "r", LeaseID: forged})
	require.Equal(t, store.RefusedStaleLease, store.RefusalOf(err), "the runner holds a job of that id: its lease is stale")
	_, err = s.Fetch(ctx, store.LeaseInput{Proto: store.Proto2, JobID: "nope", RunnerID: "r", LeaseID: forged})
	require.Equal(t, store.RefusedNotFound, store.RefusalOf(err))
	res, err := s.Renew(ctx, store.RenewInput{Proto: store.Proto2, RunnerID: "r", LeaseMs: 30_000,
		Leases: []protocol.LeaseRef{{JobID: "j", LeaseID: forged}}})
	require.NoError(t, err)
	require.Empty(t, res.Renewed)
	require.Len(t, res.Lost, 1)
}

// TestShardedClaimVisitsBucketsUntilMax: one claim over three buckets
// takes from each in turn, stops at max, and a later one takes the rest.
func TestShardedClaimVisitsBucketsUntilMax(t *testing.T) {
	s, _, stub := threeSites(t)
	ctx := t.Context()
	for _, site := range []string{"s0", "s1", "s2"} {
		for _, id := range []string{"a", "b"} {
			_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: site, Proto: store.Proto2, Stub: stub(site, id)})
			require.NoError(t, err)
		}
	}
	got, err := s.Claim(ctx, claim2Input("r", 5, "s0", "s1", "s2"))
	require.NoError(t, err)
	require.Len(t, got, 5)
	buckets := map[string]int{}
	for _, c := range got {
		buckets[c.Lease.ID[:2]]++
	}
	require.Len(t, buckets, 3, "every bucket gave")
	rest, err := s.Claim(ctx, claim2Input("r", 5, "s0", "s1", "s2"))
	require.NoError(t, err)
	require.Len(t, rest, 1)
}

// TestShardedHeartbeatHearsCancelsOfEveryBucketItHolds: a runner's
// heartbeat naming no grant still lists the cancel requests of each
// bucket it was granted a job in (P2-ST14); once those jobs' deadlines
// are well past, the bucket leaves the runner's list.
func TestShardedHeartbeatHearsCancelsOfEveryBucketItHolds(t *testing.T) {
	s, c, stub := threeSites(t)
	ctx := t.Context()
	grantedInEach(t, s, stub, "r", "s1", "s2")
	for _, site := range []string{"s1", "s2"} {
		ok, err := s.Cancel(ctx, store.CancelInput{SiteID: site, JobID: "j" + site})
		require.NoError(t, err)
		require.True(t, ok)
	}
	hb, err := s.Heartbeat(ctx, store.HeartbeatInput{Proto: store.Proto2, RunnerID: "r", Serving: true, LeaseMs: 30_000})
	require.NoError(t, err)
	var ids []string
	for _, g := range hb.Cancel {
		ids = append(ids, g.JobID)
	}
	require.ElementsMatch(t, []string{"js1", "js2"}, ids)

	held, err := s.heldBuckets(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, held)
	require.NoError(t, c.Advance(ctx, time.Hour+2*time.Duration(heldMarginMs)*time.Millisecond))
	held, err = s.heldBuckets(ctx, "r")
	require.NoError(t, err)
	require.Empty(t, held, "kept until the deadline and the margin, then let go")
}

// RD-D15: on the sharded layout, sites in different buckets keep their
// own first-enqueue order, and successive claims over both start at
// different buckets, so neither waits behind the other's backlog; a
// protocol-"0" id taken in one bucket is free in another.
func TestRD_D15_ShardedOrderIsEachSitesAndTheIDCheckPerBucket(t *testing.T) {
	s, _, stub := threeSites(t)
	ctx := t.Context()
	for _, site := range []string{"s0", "s1"} {
		for _, id := range []string{"a", "b", "c"} {
			_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: site, Proto: store.Proto2, Stub: stub(site, id)})
			require.NoError(t, err)
		}
	}
	firsts := map[string]bool{}
	for range 2 {
		in := claim2Input("r", 1, "s0", "s1")
		in.Owner = "alice"
		got, err := s.Claim(ctx, in)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, "a", got[0].ID, "each site's oldest job first")
		firsts[got[0].Lease.ID[:2]] = true
	}
	require.Len(t, firsts, 2, "the two claims started at different buckets")

	v0 := stub("s0", "taken")
	v0.Audience = protocol.AudiencePublic
	_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: "s0", Proto: store.Proto0, Stub: v0})
	require.NoError(t, err)
	res, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: "s1", Proto: store.Proto0, Stub: v0})
	require.NoError(t, err)
	require.True(t, res.Created, "another bucket's site holds its own")
}

// downBucket makes bucket b of s unreachable: its calls fail at once,
// as with a primary gone.
func downBucket(t *testing.T, s *Sharded, b int) (restore func()) {
	t.Helper()
	dead := valkeytest.Shared(t).Client(t)
	dead.Close()
	was := s.buckets[b]
	down := onScripts(dead, was.prefix, was.scripts, was.testClock)
	down.marksLeases, down.leaseByte = true, was.leaseByte
	s.buckets[b] = down
	return func() { s.buckets[b] = was }
}

// TestShardedOneBucketDownHoldsUpNoOther: with one bucket's primary
// gone, a heartbeat still renews the leases of the others, a sweep still
// sweeps them (and reports the failure), a lease of a job that is gone
// is still refused as not found, and a site's read sweeps its own bucket
// alone.
func TestShardedOneBucketDownHoldsUpNoOther(t *testing.T) {
	s, c, stub := threeSites(t)
	ctx := t.Context()
	got := grantedInEach(t, s, stub, "r", "s1", "s2")
	var inS1 protocol.LeaseRef
	for _, g := range got {
		if g.Site == "s1" {
			inS1 = protocol.LeaseRef{JobID: g.ID, LeaseID: g.Lease.ID}
		}
	}
	require.NotEmpty(t, inS1.LeaseID)
	restore := downBucket(t, s, 2)
	hb, err := s.Heartbeat(ctx, store.HeartbeatInput{Proto: store.Proto2, RunnerID: "r", Serving: true, LeaseMs: 30_000,
		Leases: []protocol.LeaseRef{inS1}})
	require.NoError(t, err, "the bucket down is named by no lease of this heartbeat")
	require.Len(t, hb.Renewed.Renewed, 1)
	_, err = s.Fetch(ctx, store.LeaseInput{Proto: store.Proto2, JobID: "gone", RunnerID: "r", LeaseID: "ff000000-0000-4000-8000-000000000000"})
	require.Equal(t, store.RefusedNotFound, store.RefusalOf(err), "a bucket down turns no refusal into an outage")
	restore()

	// Both grants lapse; a sweep reaches s1's bucket past the one down.
	require.NoError(t, c.Advance(ctx, 10*time.Minute))
	downBucket(t, s, 2)
	swept, err := s.Sweep(ctx)
	require.Error(t, err, "the bucket down is reported")
	require.Equal(t, []string{"js1"}, swept.Requeued, "the others are swept all the same")

	_, err = s.SweepSite(ctx, "s1")
	require.NoError(t, err, "a site's read sweeps its own bucket, not the one down")
	_, err = s.SweepSite(ctx, "s2")
	require.Error(t, err)
}

// TestShardedReleaseAnswersInRequestOrder: a release over two buckets
// answers the released jobs in the order the request named them, also
// when one bucket holds two sites' jobs of one id and only the second
// lease of that id is current.
func TestShardedReleaseAnswersInRequestOrder(t *testing.T) {
	s, _, stub := threeSites(t)
	ctx := t.Context()
	for _, j := range []struct{ site, id string }{{"s1x", "j"}, {"s2", "k"}} {
		_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: j.site, Proto: store.Proto2, Stub: stub(j.site, j.id)})
		require.NoError(t, err)
	}
	got, err := s.Claim(ctx, claim2Input("r", 2, "s1x", "s2"))
	require.NoError(t, err)
	require.Len(t, got, 2)
	lease := map[string]string{}
	for _, g := range got {
		lease[g.ID] = g.Lease.ID
	}
	stale := "01" + lease["j"][2:8] + "-0000-4000-8000-000000000000"
	ids, err := s.Release(ctx, store.ReleaseInput{Proto: store.Proto2, RunnerID: "r", Leases: []protocol.LeaseRef{
		{JobID: "j", LeaseID: stale}, {JobID: "k", LeaseID: lease["k"]}, {JobID: "j", LeaseID: lease["j"]}}})
	require.NoError(t, err)
	require.Equal(t, []string{"k", "j"}, ids)
}
