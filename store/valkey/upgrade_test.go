package valkey

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// Issue 12 finding 7: records of a format this code cannot read, as a newer
// relay would leave them during a rolling upgrade.

// fromTheFuture rewrites a job's record into a format this code does not
// read, keeping every other field as it was.
func fromTheFuture(t *testing.T, s *Store, id string) string {
	t.Helper()
	rewriteRecord(t, s, testSite, id, func(f []string) []string { f[fieldVersion] = "9"; return f })
	return rawRecord(t, s, id)
}

func rawRecord(t *testing.T, s *Store, id string) string {
	t.Helper()
	raw, err := s.client.Do(t.Context(), s.client.B().Hget().Key(s.key("job")).Field(jobKey(testSite, id)).Build()).ToString()
	require.NoError(t, err)
	return raw
}

// A renew naming an unreadable record renews every other grant and reports
// that one lost, leaving its record as it was; it used to extend the
// grants before it and then fail the whole call.
func TestRenewReportsAnUnreadableRecordLost(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	pinClock(t, s)
	mustEnqueue(t, s, "a", "future", "b")
	got := mustClaim(t, s, "r1", 3)
	require.Len(t, got, 3)
	future := fromTheFuture(t, s, "future")

	now, err := s.Now(ctx)
	require.NoError(t, err)
	res, err := s.Renew(ctx, store.RenewInput{SiteID: testSite, RunnerID: "r1", Leases: leaseRefs(got), LeaseMs: 90_000})
	require.NoError(t, err, "an unreadable record does not fail the call")
	require.Equal(t, []store.Renewal{{JobID: "a", ExpiresAt: now + 90_000}, {JobID: "b", ExpiresAt: now + 90_000}}, res.Renewed)
	require.Equal(t, []protocol.LeaseRef{{JobID: "future", LeaseID: got[1].Lease.ID}}, res.Lost)
	require.Equal(t, future, rawRecord(t, s, "future"), "the unreadable record is left as it was")
}

// A release naming an unreadable record releases every other grant and
// skips that one, leaving it as it was; it used to requeue the grants
// before it (refusals filed) and then fail the whole call.
func TestReleaseSkipsAnUnreadableRecord(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	mustEnqueue(t, s, "a", "future", "b")
	got := mustClaim(t, s, "r1", 3)
	require.Len(t, got, 3)
	future := fromTheFuture(t, s, "future")

	// No site: each grant is found by its lease first.
	released, err := s.Release(ctx, store.ReleaseInput{RunnerID: "r1", Leases: leaseRefs(got), Reason: protocol.ReasonRefused})
	require.NoError(t, err, "an unreadable record does not fail the call")
	require.Equal(t, []string{"a", "b"}, released)
	require.Equal(t, future, rawRecord(t, s, "future"), "the unreadable record is left as it was")
	require.Empty(t, mustClaim(t, s, "r1", 3), "r1 refused a and b")
	require.Equal(t, []string{"a", "b"}, claimedIDs(mustClaim(t, s, "r2", 3)))
}

// A sweep that drops an unreadable record at its deadline takes its
// refusals with it. A refusal left behind once stood for no queued job, and
// a claim stepping over a run of its runner's refusals counted it as one:
// r2, which refused a, future and b, was never offered x, which it never
// refused.
func TestDroppedUnreadableRecordLeavesNoRefusal(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	mustEnqueue(t, s, "a", "x")
	short := testStub(t, s, "future")
	short.DeadlineAt -= (time.Hour - time.Minute).Milliseconds()
	_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Stub: short})
	require.NoError(t, err)
	mustEnqueue(t, s, "b")

	release := func(runner string, refused ...string) {
		t.Helper()
		got := mustClaim(t, s, runner, 4)
		require.Equal(t, []string{"a", "x", "future", "b"}, claimedIDs(got))
		var refuse, other []protocol.LeaseRef
		for _, c := range got {
			ref := protocol.LeaseRef{JobID: c.ID, LeaseID: c.Lease.ID}
			if slices.Contains(refused, c.ID) {
				refuse = append(refuse, ref)
			} else {
				other = append(other, ref)
			}
		}
		_, err := s.Release(ctx, store.ReleaseInput{RunnerID: runner, Leases: refuse, Reason: protocol.ReasonRefused})
		require.NoError(t, err)
		_, err = s.Release(ctx, store.ReleaseInput{RunnerID: runner, Leases: other, Reason: protocol.ReasonShutdown})
		require.NoError(t, err)
	}
	release("r2", "a", "future", "b")
	release("r3", "a", "x", "b")
	fromTheFuture(t, s, "future")

	advance(t, s, 2*time.Minute)
	res, err := s.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"future"}, res.Expired)
	require.Empty(t, mustClaim(t, s, "r3", 1), "r3 refused all that is left")
	require.Equal(t, []string{"x"}, claimedIDs(mustClaim(t, s, "r2", 1)), "r2 never refused x")
}
