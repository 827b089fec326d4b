package valkey

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// busy says whether a route of alice's is in K.busy, and whether K.busy
// is marked complete.
func busy(t *testing.T, s *Store, p store.Proto) (route, complete bool) {
	t.Helper()
	c := s.client
	got, err := c.Do(t.Context(), c.B().Smismember().Key(s.key("busy")).Member(routeFieldGo(p, testSite, "alice"), "").Build()).AsIntSlice()
	require.NoError(t, err)
	return got[0] == 1, got[1] == 1
}

func mustSweep(t *testing.T, s *Store) {
	t.Helper()
	_, err := s.Sweep(t.Context())
	require.NoError(t, err)
}

// Issue 12 finding 6: an empty claim over 1,000 roster members sent 2,000
// route arguments and read 1,000 count fields (24-28x an empty roster's
// time). Now the claim names its stored route list and one SINTER with
// the busy routes is its only command that touches them: its arguments
// and its commands are the same for 1,000 routes as for one.
func TestEmptyClaimWorkDoesNotGrowWithRoutes(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, quietClient(t, srv.Addr))
	fill(t, s, "idle", "nobody", 0, 100)
	mustSweep(t, s)
	var args []int
	s.onCall = func(c call) {
		if c.op == store.OpClaim {
			args = append(args, len(c.args))
		}
	}
	none, roster := rosterClaim(0), rosterClaim(1000)
	commandsOf(t, s, none) // the first claims store their route lists
	commandsOf(t, s, roster)
	args = nil
	work := func(in store.ClaimInput) map[string]int {
		before := commandCounts(t, s.client)
		commandsOf(t, s, in)
		after := commandCounts(t, s.client)
		for name, n := range after {
			after[name] = n - before[name]
			if after[name] == 0 {
				delete(after, name)
			}
		}
		return after
	}
	atNone, atRoster := work(none), work(roster)
	t.Logf("empty claim commands: %v with no roster, %v with 1,000 members", atNone, atRoster)
	require.Equal(t, atNone, atRoster, "1,000 empty routes run other commands than none")
	require.Equal(t, 1, atRoster["sinter"], "the routes are intersected with the busy ones once")
	require.Zero(t, atRoster["hmget"], "no count is read")
	require.Len(t, args, 2)
	require.Equal(t, args[0], args[1], "1,000 routes are sent as arguments")
}

// A route is in K.busy exactly while its queues hold work, through every
// way into and out of a queue, and a route a writer left out of it (one
// that keeps no K.busy) is put back by the next sweep.
func TestBusyRouteFollowsItsJob(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	s.mendEvery = 0 // every sweep mends, on the pinned clock
	ctx := t.Context()
	pinClock(t, s)
	mustSweep(t, s)
	in, complete := busy(t, s, store.Proto0)
	require.False(t, in)
	require.True(t, complete, "a census of no queues has passed")

	mustEnqueue(t, s, "a")
	in, _ = busy(t, s, store.Proto0)
	require.True(t, in, "enqueued")
	c := mustClaim(t, s, "r1", 1)
	require.Len(t, c, 1)
	in, _ = busy(t, s, store.Proto0)
	require.False(t, in, "claimed")

	_, err := s.Release(ctx, store.ReleaseInput{RunnerID: "r1", Leases: leaseRefs(c), Reason: "refused"})
	require.NoError(t, err)
	in, _ = busy(t, s, store.Proto0)
	require.True(t, in, "released")
	c = mustClaim(t, s, "r2", 1)
	require.Len(t, c, 1)
	advance(t, s, time.Duration(protocol.AwaitingPayloadMs+1)*time.Millisecond)
	mustSweep(t, s)
	in, _ = busy(t, s, store.Proto0)
	require.True(t, in, "requeued by the sweep")

	ok, err := s.Cancel(ctx, store.CancelInput{JobID: "a", SiteID: testSite})
	require.NoError(t, err)
	require.True(t, ok)
	in, _ = busy(t, s, store.Proto0)
	require.False(t, in, "cancelled")

	mustEnqueue(t, s, "b")
	advance(t, s, 2*time.Hour)
	mustSweep(t, s)
	in, _ = busy(t, s, store.Proto0)
	require.False(t, in, "expired")

	mustEnqueue(t, s, "c")
	field := routeFieldGo(store.Proto0, testSite, "alice")
	require.NoError(t, s.client.Do(ctx, s.client.B().Srem().Key(s.key("busy")).Member(field).Build()).Error())
	require.Empty(t, mustClaim(t, s, "r1", 1), "a claim trusts a complete K.busy")
	mustSweep(t, s)
	in, complete = busy(t, s, store.Proto0)
	require.True(t, in, "mended by the sweep")
	require.True(t, complete)
	require.Equal(t, []string{"c"}, claimedIDs(mustClaim(t, s, "r1", 1)))
}

// Until a census has passed, and from when the sweep finds a route holding
// work left out of K.busy until a census has passed again, a claim reads
// the counts, so a writer that keeps no K.busy hides no work.
func TestClaimReadsTheCountsUntilTheCensusHasPassed(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	s.mendEvery = 0
	ctx := t.Context()
	field := routeFieldGo(store.Proto0, testSite, "alice")
	leaveOut := func() {
		require.NoError(t, s.client.Do(ctx, s.client.B().Srem().Key(s.key("busy")).Member(field).Build()).Error())
	}
	mustEnqueue(t, s, "a", "b")
	require.NoError(t, s.client.Do(ctx, s.client.B().Del().Key(s.key("busy")).Build()).Error())
	require.Equal(t, []string{"a"}, claimedIDs(mustClaim(t, s, "r1", 1)), "a K.busy no census completed is not trusted")

	// More routes than one sweep's census visits, alice's first of them.
	for i := range 40 {
		fill(t, s, "m"+strconv.Itoa(i), "member-"+strconv.Itoa(i), 0, 1)
	}
	for sweeps := 0; ; sweeps++ {
		require.Less(t, sweeps, 10, "the census never completes")
		mustSweep(t, s)
		if _, complete := busy(t, s, store.Proto0); complete {
			break
		}
	}
	leaveOut()
	mustSweep(t, s)
	in, complete := busy(t, s, store.Proto0)
	require.True(t, in, "the sweep put the route back")
	require.False(t, complete, "a route found left out marks K.busy incomplete")
	leaveOut()
	require.Equal(t, []string{"b"}, claimedIDs(mustClaim(t, s, "r1", 1)), "the claim read the counts")
}

// A claim whose stored route list the server lost (unused for its TTL, or
// a flushed server) stores it again and answers as before, charging its
// admission once.
func TestClaimStoresItsLostRouteListAgain(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	mustSweep(t, s)
	in := rosterClaim(10)
	got, err := s.Claim(ctx, in)
	require.NoError(t, err)
	require.Empty(t, got)
	key := s.routeListKey(in.Proto, in.Routes)
	ttl, err := s.client.Do(ctx, s.client.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	require.Positive(t, ttl)
	require.LessOrEqual(t, ttl, routesTTL.Milliseconds())
	require.NoError(t, s.client.Do(ctx, s.client.B().Del().Key(key).Build()).Error())

	fill(t, s, "work", "member-5", 0, 2)
	var ops []store.Op
	s.onCall = func(c call) { ops = append(ops, c.op) }
	got, err = s.Claim(ctx, in)
	require.NoError(t, err)
	require.Equal(t, []string{"work-0", "work-1"}, claimedIDs(got))
	require.Equal(t, []store.Op{store.OpClaim, opRoutes, store.OpClaim}, ops)
	n, err := s.client.Do(ctx, s.client.B().Scard().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 11, n, "alice's own route and ten members'")
}

// A route list is named by its set of routes: the same routes in another
// order, or named twice, share a key; another route or protocol does not.
func TestRouteListKeyNamesTheSet(t *testing.T) {
	s := &Store{prefix: "test:{k}:", routeLists: newRouteLists()}
	a, b, c := store.Route{SiteID: "s1", Owner: "a"}, store.Route{SiteID: "s1", Owner: "b"}, store.Route{SiteID: "s2", Owner: "a"}
	key := s.routeListKey(store.Proto0, []store.Route{a, b, c})
	require.True(t, strings.HasPrefix(key, "test:{k}:routes:"), key)
	require.Equal(t, key, s.routeListKey(store.Proto0, []store.Route{c, a, b}))
	require.Equal(t, key, s.routeListKey(store.Proto0, []store.Route{b, c, a, b}))
	require.Equal(t, key, s.routeListKey(store.Proto0, []store.Route{a, b, c}), "remembered as it came")
	require.NotEqual(t, key, s.routeListKey(store.Proto0, []store.Route{a, b}))
	require.NotEqual(t, key, s.routeListKey(store.Proto2, []store.Route{a, b, c}))
	require.NotEqual(t, key, s.routeListKey(store.Proto0, []store.Route{a, b, {SiteID: "s2", Owner: "b"}}))
}

// A relay that keeps counts but no K.busy (one before it, in a rolling
// upgrade) may raise a route's count from 0 without putting the route in
// K.busy; the next job this code queues on that route puts it back, even
// though the count it raises is past 1.
func TestAnEnqueueRestatesARouteAnOlderWriterLeftOutOfBusy(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	mustSweep(t, s)
	mustEnqueue(t, s, "a")
	field := routeFieldGo(store.Proto0, testSite, "alice")
	require.NoError(t, s.client.Do(ctx, s.client.B().Srem().Key(s.key("busy")).Member(field).Build()).Error())
	in, complete := busy(t, s, store.Proto0)
	require.False(t, in)
	require.True(t, complete, "the older writer's job is hidden from a claim that trusts K.busy")
	mustEnqueue(t, s, "b")
	in, _ = busy(t, s, store.Proto0)
	require.True(t, in, "the count went from 1 to 2, and the route is busy again")
	require.Equal(t, []string{"a", "b"}, claimedIDs(mustClaim(t, s, "r1", 2)))
}

// The mending rides on one sweep per mendEvery of store time, whichever
// replica makes it: a sweep in between (a site's poll sweeps first)
// settles what is due and mends nothing.
func TestSweepsMendOnceASecond(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	s := newTestStore(t, client)
	other, err := NewFromClientForTest(client, s.prefix) // another replica
	require.NoError(t, err)
	ctx := t.Context()
	pinClock(t, s)
	field := routeFieldGo(store.Proto0, testSite, "alice")
	leaveOut := func() {
		require.NoError(t, client.Do(ctx, client.B().Srem().Key(s.key("busy")).Member(field).Build()).Error())
	}
	mustEnqueue(t, s, "a")
	mustSweep(t, s)
	leaveOut()
	mustSweep(t, s)
	mustSweep(t, other)
	in, _ := busy(t, s, store.Proto0)
	require.False(t, in, "a sweep within a second of the last mending one mended")

	advance(t, s, mendEvery-time.Millisecond)
	mustSweep(t, other)
	in, _ = busy(t, s, store.Proto0)
	require.False(t, in, "mended before mendEvery had passed")
	advance(t, s, time.Millisecond)
	mustSweep(t, other)
	in, _ = busy(t, s, store.Proto0)
	require.True(t, in, "the first sweep once mendEvery had passed mended, on another replica too")
}
