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

// storedJobs counts the job records in the store.
func storedJobs(t *testing.T, s *Store) int64 {
	t.Helper()
	n, err := s.client.Do(t.Context(), s.client.B().Hlen().Key(s.key("job")).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// Issue 12 finding 4: a claim behind an expired backlog settled up to
// 4,096 jobs it stepped over on top of its sweep share (46,000 commands
// at 200k expired jobs). Now one claim settles at most its budget, and
// claims alone still work through the backlog to the live job behind it.
func TestClaimSettlesAtMostItsBudget(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	pinClock(t, s)
	const backlog = 5000 // more than the old step-over budget
	fill(t, s, "old", "alice", 0, backlog)
	advance(t, s, 25*time.Hour)
	mustEnqueue(t, s, "live")
	require.EqualValues(t, backlog+1, storedJobs(t, s))

	before := storedJobs(t, s)
	require.Empty(t, mustClaim(t, s, "r1", 1), "the live job is behind jobs this claim may not settle")
	settled := before - storedJobs(t, s)
	require.Positive(t, settled, "a claim takes its share of the backlog")
	require.LessOrEqual(t, settled, int64(claimSettleBudget))

	for claims := 1; ; claims++ {
		require.Less(t, claims, backlog, "claims make no progress through the backlog")
		before = storedJobs(t, s)
		got := mustClaim(t, s, "r1", 1)
		require.LessOrEqual(t, before-storedJobs(t, s), int64(claimSettleBudget))
		if len(got) > 0 {
			require.Equal(t, []string{"live"}, claimedIDs(got))
			break
		}
	}
	require.EqualValues(t, 1, storedJobs(t, s), "the claims dropped every expired job")
}

// rosterClaim is an empty claim by alice over her own route and one route
// per roster member, two kinds, as protocol "0" names them.
func rosterClaim(members int) store.ClaimInput {
	in := claimInput("r1", 64)
	in.Kinds = []string{protocol.KindGenerate, protocol.KindChat}
	for i := range members {
		in.Routes = append(in.Routes, store.Route{SiteID: testSite, Owner: "member-" + strconv.Itoa(i)})
	}
	return in
}

// commandsOf counts the commands one claim runs, those its script runs
// included.
func commandsOf(t *testing.T, s *Store, in store.ClaimInput) int {
	t.Helper()
	total := func() int {
		n := 0
		for _, c := range commandCounts(t, s.client) {
			n += c
		}
		return n
	}
	before := total()
	got, err := s.Claim(t.Context(), in)
	require.NoError(t, err)
	require.Empty(t, got)
	return total() - before
}

// Issue 12 finding 6: a claim opened a cursor per (route, kind) before
// granting anything, so an owner with 1,000 roster members paid 2,007
// commands on every empty poll. Queue counts let it open only queues with
// work: 1,000 empty routes cost a couple of commands more than none.
func TestClaimCostDoesNotGrowWithEmptyRoutes(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, quietClient(t, srv.Addr))
	fill(t, s, "idle", "nobody", 0, 100)
	none, roster := rosterClaim(0), rosterClaim(1000)
	commandsOf(t, s, none) // the first claim counts queues never counted
	commandsOf(t, s, roster)
	atNone, atRoster := commandsOf(t, s, none), commandsOf(t, s, roster)
	t.Logf("empty claim: %d commands with no roster, %d with 1,000 members", atNone, atRoster)
	require.LessOrEqual(t, atRoster, atNone+4, "1,000 empty routes: %d commands against %d", atRoster, atNone)
}

// The counts follow every way into and out of a queue: a job enqueued for
// one roster member among many is found, and once granted its queue reads
// as empty again.
func TestClaimFindsTheOneQueueWithWork(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	in := rosterClaim(1000)
	got, err := s.Claim(t.Context(), in)
	require.NoError(t, err)
	require.Empty(t, got)
	fill(t, s, "work", "member-500", 0, 3)
	got, err = s.Claim(t.Context(), in)
	require.NoError(t, err)
	require.Equal(t, []string{"work-0", "work-1", "work-2"}, claimedIDs(got))
	n, err := s.client.Do(t.Context(), s.client.B().Hget().Key(s.key("qcount")).Field(routeFieldGo(store.Proto0, testSite, "member-500")).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n)
}

// routeFieldGo names a route's queues in the counts, as route_field in
// store/lua/common/30_indexes.lua does.
func routeFieldGo(p store.Proto, site, owner string) string {
	return lencGo(strconv.Itoa(int(p))) + lencGo(site) + lencGo(owner)
}

// Queues filled by a relay that kept no counts are counted when first
// named, and a count such a relay left wrong (a job it queued uncounted)
// is mended by the next sweep.
func TestQueueCountsAreTakenFromTheQueuesWhenMissingOrWrong(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	mustEnqueue(t, s, "a", "b")
	require.NoError(t, s.client.Do(ctx, s.client.B().Del().Key(s.key("qcount")).Build()).Error())
	require.Equal(t, []string{"a"}, claimedIDs(mustClaim(t, s, "r1", 1)), "a queue never counted is counted")

	field := routeFieldGo(store.Proto0, testSite, "alice")
	require.NoError(t, s.client.Do(ctx, s.client.B().Hset().Key(s.key("qcount")).FieldValue().FieldValue(field, "0").Build()).Error())
	require.Empty(t, mustClaim(t, s, "r1", 1), "a claim trusts a count of 0")
	_, err := s.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, claimedIDs(mustClaim(t, s, "r1", 1)), "the sweep recounted the queue")
}
