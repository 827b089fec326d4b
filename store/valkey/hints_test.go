package valkey

import (
	"strconv"

	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"

	"github.com/byollm/relayd/store"
)

// claimVisits answers how many bucket calls a claim over every one of
// sites made.
func claimVisits(t *testing.T, s *Sharded, in store.ClaimInput) (int, int64) {
	t.Helper()
	before := s.visits.Load()
	got, err := s.Claim(t.Context(), in)
	require.NoError(t, err)
	return len(got), s.visits.Load() - before
}

// TestShardedClaimVisitsOnlyHintedBuckets: a claim over routes in three
// buckets calls only the bucket where an enqueue wrote its owner's hint,
// and none when no bucket is hinted; without hints it calls all three.
func TestShardedClaimVisitsOnlyHintedBuckets(t *testing.T) {
	s, _, stub := threeSites(t)
	ctx := t.Context()
	all := claim2Input("r", 5, "s0", "s1", "s2")
	n, visits := claimVisits(t, s, all)
	require.Zero(t, n)
	require.Zero(t, visits, "no owner's hint is live: no bucket called")

	_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: "s1", Proto: store.Proto2, Stub: stub("s1", "a")})
	require.NoError(t, err)
	n, visits = claimVisits(t, s, all)
	require.Equal(t, 1, n)
	require.EqualValues(t, 1, visits, "only the hinted bucket called")

	bob := claim2Input("r2", 5, "s0", "s1", "s2")
	for i := range bob.Routes {
		bob.Routes[i].Owner = "bob"
	}
	bob.Owner = "bob"
	_, visits = claimVisits(t, s, bob)
	require.Zero(t, visits, "alice's hint is not bob's")

	// Three owners over three buckets: reading their hints would cost
	// what calling the buckets does, so the claim calls them.
	team := claim2Input("r3", 5, "s0", "s1", "s2")
	for i, o := range []string{"alice", "bob", "carol"} {
		team.Routes[i].Owner = o
	}
	_, visits = claimVisits(t, s, team)
	require.EqualValues(t, 3, visits, "as many owners as buckets: no hints read")

	s.noHints = true
	_, visits = claimVisits(t, s, all)
	require.EqualValues(t, 3, visits, "without hints every bucket of the routes is called")
}

// TestShardedHintOutlastsItsJobsDeadline: a hint stays live while the
// job it was written for can be (queued, held, requeued after a lapse)
// and is dropped once that job's deadline and the margin are past.
func TestShardedHintOutlastsItsJobsDeadline(t *testing.T) {
	s, c, stub := threeSites(t)
	ctx := t.Context()
	_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: "s2", Proto: store.Proto2, Stub: stub("s2", "a")})
	require.NoError(t, err)
	all := claim2Input("r", 1, "s0", "s1", "s2")
	all.LeaseMs = 1_000
	n, _ := claimVisits(t, s, all)
	require.Equal(t, 1, n)
	_, visits := claimVisits(t, s, all)
	require.EqualValues(t, 1, visits, "the granted job is live: its bucket is still visited")

	// Its lease lapses and the job is offered again: no enqueue ran, and
	// the hint written ahead of the first one still finds it.
	require.NoError(t, c.Advance(ctx, 5*time.Minute))
	_, err = s.Sweep(ctx)
	require.NoError(t, err)
	n, _ = claimVisits(t, s, all)
	require.Equal(t, 1, n, "the lapsed job is found again through its hint")

	require.NoError(t, c.Advance(ctx, time.Hour+time.Duration(hintMarginMs+hintQuantumMs)*time.Millisecond))
	_, visits = claimVisits(t, s, all)
	require.Zero(t, visits, "past the deadline and the margin the hint is gone")
}

// TestShardedEnqueueWritesAHintOncePerQuantum: enqueues whose deadlines
// a hint this replica wrote covers write none; one past it writes again,
// and a second replica writes its own.
func TestShardedEnqueueWritesAHintOncePerQuantum(t *testing.T) {
	s, _, stub := threeSites(t)
	ctx := t.Context()
	writes := 0
	for _, g := range s.runners {
		g.onCall = func(c call) {
			if c.op == opHeld {
				writes++
			}
		}
	}
	first := stub("s0", "a")
	for i, id := range []string{"a", "b", "c"} {
		st := stub("s0", id)
		st.DeadlineAt = first.DeadlineAt + int64(i)*1_000
		_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: "s0", Proto: store.Proto2, Stub: st})
		require.NoError(t, err)
	}
	require.Equal(t, 1, writes, "three deadlines within a quantum: one hint write")
	late := stub("s0", "d")
	late.DeadlineAt = first.DeadlineAt + hintQuantumMs + 1
	_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: "s0", Proto: store.Proto2, Stub: late})
	require.NoError(t, err)
	require.Equal(t, 2, writes, "a deadline past what was written writes again")

	other := newHintCache()
	s.hints = other
	_, err = s.Enqueue(ctx, store.EnqueueInput{SiteID: "s0", Proto: store.Proto2, Stub: stub("s0", "e")})
	require.NoError(t, err)
	require.Equal(t, 3, writes, "a replica that wrote nothing writes its own")
}

// BenchmarkShardedClaimOverSites measures what route hints save a
// protocol-"2" daemon whose owner uses many sites, each in its own
// bucket: an idle claim (no job anywhere) and a claim while one bucket
// holds the owner's job granted elsewhere (a live hint, nothing to
// take), with and without hints, in one run. It reports the bucket calls
// per claim and the server's script time per claim (INFO commandstats on
// one standalone server, which holds every bucket).
func BenchmarkShardedClaimOverSites(b *testing.B) {
	const sites = 48
	for _, hinted := range []bool{true, false} {
		for _, busy := range []bool{false, true} {
			name := map[bool]string{true: "hints", false: "no-hints"}[hinted] + map[bool]string{true: "/one-busy", false: "/idle"}[busy]
			b.Run(name, func(b *testing.B) {
				srv := valkeytest.Start(b)
				s, err := NewShardedForTest(b.Context(), srv.Client(b), valkeytest.Prefix(b), Sharding{Buckets: sites, NoRouteHints: !hinted})
				require.NoError(b, err)
				s.place = func(site string) int { n, _ := strconv.Atoi(site[1:]); return n }
				c, err := ShardedTestClockOf(s)
				require.NoError(b, err)
				require.NoError(b, c.Pin(b.Context()))
				now, err := s.Now(b.Context())
				require.NoError(b, err)
				in := store.ClaimInput{Proto: store.Proto2, RunnerID: "r", Owner: "alice", Device: testDevice,
					Kinds: []string{protocol.KindGenerate}, Max: 1, LeaseMs: 30_000}
				for i := range sites {
					in.Routes = append(in.Routes, store.Route{SiteID: "s" + strconv.Itoa(i), Owner: "alice"})
				}
				if busy {
					st := protocol.JobStub{ID: "held", Kind: protocol.KindGenerate, Owner: "alice", Site: "s7", Audience: "team",
						SizeClass: "small", DeadlineAt: now + time.Hour.Milliseconds()}
					_, err := s.Enqueue(b.Context(), store.EnqueueInput{SiteID: "s7", Proto: store.Proto2, Stub: st})
					require.NoError(b, err)
					other := in
					other.RunnerID = "r-other"
					got, err := s.Claim(b.Context(), other)
					require.NoError(b, err)
					require.Len(b, got, 1)
				}
				st := &scriptTime{s: s.global}
				visits := s.visits.Load()
				b.ResetTimer()
				st.start(b)
				for range b.N {
					got, err := s.Claim(b.Context(), in)
					if err != nil || len(got) != 0 {
						b.Fatal(err, len(got))
					}
				}
				st.stop(b)
				b.StopTimer()
				b.ReportMetric(float64(s.visits.Load()-visits)/float64(b.N), "visits/claim")
				b.ReportMetric(float64(st.calls)/float64(b.N), "scripts/claim")
				st.report(b, b.N, "", 0)
			})
		}
	}
}
