package valkey

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// finishedStore is a store of testSite holding n finished jobs with
// results of size bytes, filled through the store's own scripts.
func finishedStore(t *testing.T, n, size int) *Store {
	t.Helper()
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	fill(t, s, "done", "alice", 0, n)
	finishConcurrently(t, s, size)
	return s
}

// freshReplica is another replica on s's keys: a cold results cache.
func freshReplica(t *testing.T, s *Store) *Store {
	t.Helper()
	r, err := NewFromClientForTest(s.client, s.prefix)
	require.NoError(t, err)
	return r
}

// sentBy runs poll and reports the bytes the server sent for it, less
// the INFO replies that measure them.
func sentBy(t *testing.T, s *Store, poll func()) int64 {
	t.Helper()
	a := netOutput(t, s)
	b := netOutput(t, s)
	poll()
	c := netOutput(t, s)
	return (c - b) - (b - a)
}

// cancelAtBodyCall makes every poll of r run out of time as its nth
// resultBodies call starts: the calls before it completed (one fetcher),
// that one and any after fail.
func cancelAtBodyCall(r *Store, n int) func() (context.Context, func() []string) {
	return cancelAtCall(r, opResultBodies, n, 2)
}

// cancelAtCall is cancelAtBodyCall for the nth call of op; the poll
// reports the arguments, after the first skip, of the calls of op before
// it.
func cancelAtCall(r *Store, op store.Op, n, skip int) func() (context.Context, func() []string) {
	return func() (context.Context, func() []string) {
		ctx, cancel := context.WithCancel(context.Background())
		var asked []string
		calls := 0
		r.onCall = func(c call) {
			if c.op != op {
				return
			}
			if calls++; calls == n {
				cancel()
				return
			}
			asked = append(asked, c.args[skip:]...)
		}
		return ctx, func() []string { return asked }
	}
}

// TestResultsIdsReadOverSeveralPolls: when even the ids of a listing take
// longer than a poll may (here each poll runs out of time at its third
// page of ids), the next poll continues the read where it stopped, and
// the listing is served once every page was read, each page once.
func TestResultsIdsReadOverSeveralPolls(t *testing.T) {
	const n = 3000
	s := finishedStore(t, n, 100)
	want, err := freshReplica(t, s).Results(t.Context(), testSite)
	require.NoError(t, err)

	r := freshReplica(t, s)
	r.results.pageIDs = 500
	poll := cancelAtCall(r, store.OpResults, 3, 1)
	pages := map[string]int{} // by the member a page starts after
	var got []store.Job
	for polls := 1; ; polls++ {
		require.LessOrEqual(t, polls, 4, "the listing is served by the fourth poll")
		ctx, asked := poll()
		got, err = r.Results(ctx, testSite)
		for i, a := range asked() {
			if i%3 == 0 { // after, page size, byte cap
				pages[a]++
			}
		}
		if err == nil {
			break
		}
	}
	require.Equal(t, want, got)
	require.Len(t, pages, n/500+1, "six full pages and the empty one that ends the read")
	for after, times := range pages {
		require.Equal(t, 1, times, "the page after %q is read once", after)
	}
}

// TestResultsPollOutOfTimeKeepsWhatItRead: a cold replica whose polls
// each run out of time after two body calls (1,000 of 3,000 results)
// still answers all of them by its third poll, each body read once: a
// poll keeps what it read for the next, so there is no 503 loop.
func TestResultsPollOutOfTimeKeepsWhatItRead(t *testing.T) {
	const n = 3000
	s := finishedStore(t, n, 1000)
	want, err := freshReplica(t, s).Results(t.Context(), testSite)
	require.NoError(t, err)
	require.Len(t, want, n)

	r := freshReplica(t, s)
	r.results.fetchers = 1
	poll := cancelAtBodyCall(r, 3)
	seen := map[string]int{}
	var got []store.Job
	for polls := 1; ; polls++ {
		require.LessOrEqual(t, polls, 3, "the listing is served by the third poll")
		ctx, asked := poll()
		got, err = r.Results(ctx, testSite)
		for _, id := range asked() {
			seen[id]++
		}
		if err == nil {
			break
		}
		require.ErrorIs(t, err, context.Canceled)
		kept := r.results.get(testSite)
		require.NotNil(t, kept, "what the poll read is kept")
		require.Len(t, kept.jobs, polls*2*readPage)
	}
	require.Equal(t, want, got)
	require.Len(t, seen, n)
	for id, times := range seen {
		require.Equal(t, 1, times, "the body of %s is read once", id)
	}
	require.Equal(t, uint64(2), r.ResultsCacheCounts().Partial)

	// Complete now: an unchanged poll is the version call alone.
	calls := recordCalls(r)
	_, err = r.Results(t.Context(), testSite)
	require.NoError(t, err)
	require.Len(t, calls(), 1)
}

// TestResultsChangedPollReadsOnlyTheChange: over 2,000 finished 1 KB
// results, a poll after one more result reads that result and the
// journal's entry for it (a few KB), not every id; a job dropped at its
// deadline is read as its tombstone alone, and a job that comes back
// under the same id is listed again.
func TestResultsChangedPollReadsOnlyTheChange(t *testing.T) {
	s := finishedStore(t, 2000, 1000)
	ctx := t.Context()
	got, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Len(t, got, 2000)

	finishWithin(t, s, time.Minute, "late")
	calls := recordCalls(s)
	sent := sentBy(t, s, func() { got, err = s.Results(ctx, testSite) })
	require.NoError(t, err)
	require.Len(t, got, 2001)
	require.Equal(t, "late", got[2000].ID)
	require.Less(t, sent, int64(4096), "bytes Valkey sent for one new result")
	require.Equal(t, []string{"late"}, bodiesAsked(calls()))
	require.NotContains(t, opsOf(calls()), store.OpResults, "no id is read whole")

	advance(t, s, 2*time.Minute)
	_, err = s.Sweep(ctx)
	require.NoError(t, err)
	calls = recordCalls(s)
	sent = sentBy(t, s, func() { got, err = s.Results(ctx, testSite) })
	require.NoError(t, err)
	require.Len(t, got, 2000)
	require.NotEqual(t, "late", got[len(got)-1].ID)
	require.Less(t, sent, int64(1024), "bytes Valkey sent for one job gone")
	require.Empty(t, bodiesAsked(calls()))
	require.NotContains(t, opsOf(calls()), store.OpResults)

	finishWithin(t, s, time.Hour, "late")
	got, err = s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Len(t, got, 2001)
	require.Equal(t, "late", got[2000].ID)
	fresh, err := freshReplica(t, s).Results(ctx, testSite)
	require.NoError(t, err)
	require.Equal(t, fresh, got)
}

// TestResultsJournalGapsReadTheIdsWhole: a change the journal holds is
// read from it alone; one it does not hold (made by a relay that keeps
// none: the version moved, the journal did not), or a listing whose ids
// were read whole too long ago, is brought up to date by reading every
// id, and comes out right.
func TestResultsJournalGapsReadTheIdsWhole(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	finish(t, s, 0, "a", "b")
	_, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	_, err = s.Cancel(ctx, store.CancelInput{JobID: "b", SiteID: testSite})
	require.NoError(t, err)
	calls := recordCalls(s)
	got, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.True(t, got[1].Cancelled)
	require.NotContains(t, opsOf(calls()), store.OpResults, "a journalled change reads no id whole")

	// An older relay's cancel of finished job a: its record and mark
	// change, and the version, but nothing is journalled.
	writer := freshReplica(t, s)
	_, err = writer.Cancel(ctx, store.CancelInput{JobID: "a", SiteID: testSite})
	require.NoError(t, err)
	key := jobKey(testSite, "a")
	require.NoError(t, s.client.Do(ctx, s.client.B().Zrem().Key(s.key("changes")).Member(journalMember(t, s, "l", key)).Build()).Error())
	require.NoError(t, s.client.Do(ctx, s.client.B().Hset().Key(s.key("listing")).FieldValue().FieldValue("j|"+testSite, "0").Build()).Error())
	calls = recordCalls(s)
	got, err = s.Results(ctx, testSite)
	require.NoError(t, err)
	require.True(t, got[0].Cancelled)
	require.Contains(t, opsOf(calls()), store.OpResults, "the ids are read whole")

	// With no trust in the journal, every changed poll reads the ids.
	s.results.trust = 0
	finish(t, s, 0, "c")
	calls = recordCalls(s)
	got, err = s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Contains(t, opsOf(calls()), store.OpResults)
	require.Equal(t, []string{"c"}, bodiesAsked(calls()))
}

// TestResultsOverCacheListingStaysRight: a listing twice the size of the
// cache is answered whole and right on every poll; the cache keeps what
// fits, so a poll reads only the rest; the metric counts it and the log
// says it once.
func TestResultsOverCacheListingStaysRight(t *testing.T) {
	const n = 2000
	s := finishedStore(t, n, 1000)
	ctx := t.Context()
	want, err := freshReplica(t, s).Results(ctx, testSite)
	require.NoError(t, err)

	r := freshReplica(t, s)
	var logged bytes.Buffer
	r.results = newResultsCache(2 << 20) // about 3.5 MB listed
	r.results.logger = slog.New(slog.NewTextHandler(&logged, nil))
	for poll := range 3 {
		calls := recordCalls(r)
		got, err := r.Results(ctx, testSite)
		require.NoError(t, err)
		require.Equal(t, want, got)
		l := r.results.get(testSite)
		require.NotNil(t, l, "the part that fits is kept")
		kept := len(l.jobs)
		require.Positive(t, kept)
		require.LessOrEqual(t, r.results.bytesUsed(), int64(2<<20))
		if poll > 0 {
			require.Len(t, bodiesAsked(calls()), n-kept, "a poll reads what the cache could not keep")
		}
	}
	counts := r.ResultsCacheCounts()
	require.Equal(t, uint64(3), counts.OverLimit)
	require.Positive(t, counts.OverLimitBytes)
	require.Equal(t, 1, strings.Count(logged.String(), "larger than --results-cache-bytes"), logged.String())
}

// finishWithin enqueues and finishes one job of testSite whose deadline
// is within d of the store clock.
func finishWithin(t *testing.T, s *Store, d time.Duration, id string) {
	t.Helper()
	ctx := t.Context()
	st := testStub(t, s, id)
	st.DeadlineAt += (d - time.Hour).Milliseconds()
	_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Stub: st})
	require.NoError(t, err)
	got, err := s.Claim(ctx, claimInput("r1", protocol.MaxClaim))
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NoError(t, finishClaimed(ctx, s, got[0], 1000))
}

// journalMember is the live (kind "l") journal entry of a listed job.
func journalMember(t *testing.T, s *Store, kind, key string) string {
	t.Helper()
	mark, err := s.client.Do(t.Context(), s.client.B().Hget().Key(s.key("listing")).Field(key).Build()).ToString()
	require.NoError(t, err)
	site := kind + testSite
	return lencGo(site) + "|" + strings.Repeat("0", 16-len(strings.Split(mark, ".")[0])) + strings.Split(mark, ".")[0] + key
}

func opsOf(calls []call) []store.Op {
	var out []store.Op
	for _, c := range calls {
		out = append(out, c.op)
	}
	return out
}

// TestResultsConcurrentPollsOfOneSiteReadItOnce: a second poll of a site
// arriving while a cold replica reads its listing waits for that read and
// answers from it, so the replica reads (and holds) the listing once.
func TestResultsConcurrentPollsOfOneSiteReadItOnce(t *testing.T) {
	s := finishedStore(t, 1000, 100)
	r := freshReplica(t, s)
	calls := recordCalls(r)
	record := r.onCall
	inRead, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.onCall = func(c call) {
		record(c)
		if c.op == opResultBodies {
			once.Do(func() { close(inRead); <-release })
		}
	}
	answers := make(chan []store.Job, 2)
	poll := func() {
		got, err := r.Results(context.Background(), testSite)
		assert.NoError(t, err)
		answers <- got
	}
	go poll()
	<-inRead
	go poll()
	require.Eventually(t, func() bool { return r.results.waiters() == 1 }, 10*time.Second, time.Millisecond)
	close(release)
	first, second := <-answers, <-answers
	require.Len(t, first, 1000)
	require.Equal(t, first, second)
	ops := opsOf(calls())
	n := 0
	for _, op := range ops {
		if op == store.OpResults {
			n++
		}
	}
	require.Equal(t, 1, n, "the ids are read once")
	require.Len(t, bodiesAsked(calls()), 1000, "each body is read once")
}

// TestResultsOverCacheListingIsAnsweredWhenPollsRunOutOfTime: a listing
// four times the cache, whose polls each run out of time after two body
// calls (1,000 of its 2,000 results), is still answered every second
// poll: an unfinished read is kept whole until a poll finishes it, and
// only then cut down to what the cache keeps.
func TestResultsOverCacheListingIsAnsweredWhenPollsRunOutOfTime(t *testing.T) {
	const n = 2000
	s := finishedStore(t, n, 1000)
	want, err := freshReplica(t, s).Results(t.Context(), testSite)
	require.NoError(t, err)

	r := freshReplica(t, s)
	r.results = newResultsCache(1 << 20) // about 3.7 MB listed
	r.results.fetchers = 1
	poll := cancelAtBodyCall(r, 3)
	for range 3 {
		var got []store.Job
		for polls := 1; ; polls++ {
			require.LessOrEqual(t, polls, 2, "answered by the second poll")
			ctx, _ := poll()
			if got, err = r.Results(ctx, testSite); err == nil {
				break
			}
		}
		require.Equal(t, want, got)
		require.LessOrEqual(t, r.results.bytesUsed(), int64(1<<20), "once answered, cut down to the cache")
	}
}
