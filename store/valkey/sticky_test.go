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

// memoHgets and memoHsets are the commands of those kinds one remembering
// write's memo runs (answer_once: its own id looked up, its slot read, its
// answer written), which the job reads counted here leave aside.
const memoHgets, memoHsets = 2, 1

// commandCalls reads how many times the server ran cmd since the last
// CONFIG RESETSTAT, the calls scripts make included.
func commandCalls(t *testing.T, s *Store, cmd string) int {
	t.Helper()
	info, err := s.client.Do(t.Context(), s.client.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// P2-D8 in the Valkey store: a job re-offered to one runner waits in that
// runner's sticky place, not in the queue, so another runner's claim
// reads none of them, however many there are, and takes the job behind
// them; the runner they wait for still gets them.
func TestP2_D8_AClaimReadsNoJobReofferedToAnotherRunner(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	pinClock(t, s)
	ctx := t.Context()
	const routes = 50
	var all []store.Route
	for i := range routes {
		all = append(all, store.Route{SiteID: testSite, Owner: "o" + strconv.Itoa(i)})
	}
	claim := func(runner string, max int) []protocol.ClaimedStub {
		t.Helper()
		in := claimInput(runner, max)
		in.Proto, in.Routes = store.Proto2, all
		got, err := s.Claim(ctx, in)
		require.NoError(t, err)
		return got
	}
	enqueue := func(id, owner string) {
		t.Helper()
		st := testStub(t, s, id)
		st.Audience, st.Owner = "team", owner
		_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Proto: store.Proto2, Stub: st})
		require.NoError(t, err)
	}
	// Fifty runners each take the two jobs of one route (the cap stops
	// them there) and let both lapse: a hundred jobs, each re-offered to
	// the runner that let it lapse.
	for i := range routes {
		enqueue("j"+strconv.Itoa(2*i), all[i].Owner)
		enqueue("j"+strconv.Itoa(2*i+1), all[i].Owner)
	}
	for i := range routes {
		require.Equal(t, []string{"j" + strconv.Itoa(2*i), "j" + strconv.Itoa(2*i+1)}, claimedIDs(claim("r"+strconv.Itoa(i), 2)))
	}
	advance(t, s, protocol.AwaitingPayloadMs*time.Millisecond)
	var lapsed []string
	for {
		res, err := s.Sweep(ctx)
		require.NoError(t, err)
		if len(res.Lapsed) == 0 {
			break
		}
		lapsed = append(lapsed, res.Lapsed...)
	}
	require.Len(t, lapsed, 2*routes, "the sweeps, each a batch, let every grant lapse")
	enqueue("fresh", all[0].Owner)

	require.NoError(t, s.client.Do(ctx, s.client.B().ConfigResetstat().Build()).Error())
	got := claim("other", 1)
	require.Equal(t, []string{"fresh"}, claimedIDs(got))
	require.LessOrEqual(t, commandCalls(t, s, "hget"), routes+1+memoHgets,
		"the claim read each route's count and the one record it granted, none of the hundred re-offered")

	require.Equal(t, []string{"j98", "j99"}, claimedIDs(claim("r49", 10)), "the re-offer runner still gets its jobs")
}

// A route at its unsealed cap is not read at all: a claim on it reads the
// route's count and nothing of the jobs queued behind the cap.
func TestClaimReadsNothingOfACappedRoute(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	pinClock(t, s)
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = "j" + strconv.Itoa(i)
	}
	enqueue2(t, s, ids...)
	require.Equal(t, ids[:store.UnsealedPerRoute], claimedIDs(mustClaim2(t, s, "r1", 10)))

	require.NoError(t, s.client.Do(t.Context(), s.client.B().ConfigResetstat().Build()).Error())
	require.Empty(t, mustClaim2(t, s, "r2", 10))
	require.Equal(t, 1+memoHgets, commandCalls(t, s, "hget"), "only the route's count is read")
	require.Equal(t, memoHsets, commandCalls(t, s, "hset"), "nothing is granted or rewritten")
}
