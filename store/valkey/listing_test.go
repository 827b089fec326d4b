package valkey

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// finish enqueues ids and takes each through to a recorded result whose
// ciphertext is size bytes long (at least its tag).
func finish(t testing.TB, s *Store, size int, ids ...string) {
	t.Helper()
	finishOn(t, s, testSite, size, ids...)
}

// finishOn is finish for the jobs of a site.
func finishOn(t testing.TB, s *Store, site string, size int, ids ...string) {
	t.Helper()
	ctx := t.Context()
	for _, id := range ids {
		_, err := s.Enqueue(ctx, store.EnqueueInput{SiteID: site, Stub: testStub(t, s, id)})
		require.NoError(t, err)
	}
	in := claimInput("r1", protocol.MaxClaim)
	in.Routes = []store.Route{{SiteID: site, Owner: "alice"}}
	for done := 0; done < len(ids); {
		got, err := s.Claim(ctx, in)
		require.NoError(t, err)
		require.NotEmpty(t, got, "every enqueued job is claimable")
		for _, c := range got {
			require.NoError(t, s.Payload(ctx, store.PayloadInput{JobID: c.ID, SiteID: site, Envelope: env(protocol.DirectionPayload, c.ID)}))
			lease := store.LeaseInput{SiteID: site, JobID: c.ID, RunnerID: c.Lease.RunnerID, LeaseID: c.Lease.ID}
			_, err := s.Fetch(ctx, lease)
			require.NoError(t, err)
			e := env(protocol.DirectionResult, c.ID)
			if pad := size - len(e.Ciphertext); pad > 0 {
				e.Ciphertext += strings.Repeat("x", pad)
			}
			_, err = s.Result(ctx, store.ResultInput{LeaseInput: lease, Envelope: e, Disposition: "ok"})
			require.NoError(t, err)
			done++
		}
	}
}

func numberedIDs(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

// recordCalls makes s report every script call it makes from now on.
func recordCalls(s *Store) func() []call {
	var mu sync.Mutex
	var calls []call
	s.onCall = func(c call) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, c)
	}
	return func() []call {
		mu.Lock()
		defer mu.Unlock()
		return append([]call(nil), calls...)
	}
}

// bodiesAsked lists the job ids the calls fetched bodies of.
func bodiesAsked(calls []call) []string {
	var out []string
	for _, c := range calls {
		if c.op == opResultBodies {
			out = append(out, c.args[2:]...)
		}
	}
	return out
}

// TestResultsListingReusesOnlyUnchangedJobs: a poll may reuse what the
// previous poll read, but what it returns is the store's state now, and no
// caller can change what another is given.
func TestResultsListingReusesOnlyUnchangedJobs(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	finish(t, s, 0, "a", "b")
	first, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Len(t, first, 2)
	want := first[0].Clone()

	// A caller scribbling on its listing changes nobody else's.
	first[0].Result.Ciphertext = "scribbled"
	first[0].ClaimedBy.Owner = "mallory"
	for range 2 {
		again, err := s.Results(ctx, testSite)
		require.NoError(t, err)
		require.Equal(t, want, again[0])
		again[0].Result.Ciphertext = "scribbled on a cached listing"
		again[0].ClaimedBy.Owner = "mallory"
	}

	// A changed record (a done job cancelled) is read afresh, and so are
	// changed result bytes once a script marks them changed (as every
	// script's save does).
	_, err = s.Cancel(ctx, store.CancelInput{JobID: "a", SiteID: testSite})
	require.NoError(t, err)
	other, err := json.Marshal(env(protocol.DirectionResult, "rewritten"))
	require.NoError(t, err)
	key := jobKey(testSite, "b")
	require.NoError(t, s.client.Do(ctx, s.client.B().Hset().Key(s.key("result")).FieldValue().FieldValue(key, string(other)).Build()).Error())
	require.NoError(t, s.client.Do(ctx, s.client.B().Hset().Key(s.key("listing")).FieldValue().
		FieldValue(key, "by hand").FieldValue("v|"+testSite, "by hand").Build()).Error())
	now, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.True(t, now[0].Cancelled)
	require.Equal(t, "ct-rewritten", now[1].Result.Ciphertext)
	require.Equal(t, "ct-a", now[0].Result.Ciphertext)
}

// netOutput reads how many bytes the server has sent its clients.
func netOutput(t *testing.T, s *Store) int64 {
	t.Helper()
	info, err := s.client.Do(t.Context(), s.client.B().Info().Section("stats").Build()).ToString()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_net_output_bytes:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("INFO stats has no total_net_output_bytes")
	return 0
}

// TestResultsUnchangedPollReadsOnlyTheVersion: over 300 finished 4 KB
// results (1.2 MB), a poll after an unchanged one is one tiny script that
// reads under 1 KB from Valkey, and answers the full listing.
func TestResultsUnchangedPollReadsOnlyTheVersion(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	finish(t, s, 4096, numberedIDs(300, "j")...)
	first, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Len(t, first, 300)

	// INFO's own reply is the baseline: measure it between two INFOs.
	a := netOutput(t, s)
	b := netOutput(t, s)
	calls := recordCalls(s)
	again, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	c := netOutput(t, s)
	read := (c - b) - (b - a)
	require.Less(t, read, int64(1024), "bytes sent by Valkey for an unchanged poll")
	require.Len(t, calls(), 1)
	require.Equal(t, opResultsVersion, calls()[0].op)
	require.Equal(t, first, again)
}

// TestResultsOneNewResultFetchesOnlyIt: after one more result, a poll
// reads the ids and marks, then the body of that result alone.
func TestResultsOneNewResultFetchesOnlyIt(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	finish(t, s, 1000, numberedIDs(50, "j")...)
	_, err := s.Results(ctx, testSite)
	require.NoError(t, err)

	finish(t, s, 1000, "new")
	calls := recordCalls(s)
	got, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Len(t, got, 51)
	require.Equal(t, "new", got[50].ID)
	require.Equal(t, []string{"new"}, bodiesAsked(calls()))

	// A cancel of a finished job changes its record: that job alone is
	// read again.
	_, err = s.Cancel(ctx, store.CancelInput{JobID: "j00007", SiteID: testSite})
	require.NoError(t, err)
	calls = recordCalls(s)
	got, err = s.Results(ctx, testSite)
	require.NoError(t, err)
	require.True(t, got[7].Cancelled)
	require.Equal(t, []string{"j00007"}, bodiesAsked(calls()))
}

// TestResultsDroppedJobLeavesTheListing: a finished job dropped by its
// deadline moves the version on, and the next poll fetches no body.
func TestResultsDroppedJobLeavesTheListing(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	finish(t, s, 0, "a", "b")
	_, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.NoError(t, s.client.Do(ctx, s.client.B().Set().Key(ClockKey(s.prefix)).Value(strconv.Itoa(365*24*3600*1000*100)).Build()).Error())
	_, err = s.Sweep(ctx)
	require.NoError(t, err)
	calls := recordCalls(s)
	got, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Empty(t, got)
	require.Empty(t, bodiesAsked(calls()))
}

// TestResultsCacheStaysWithinItsBound: listings of many sites never hold
// more than the configured bytes, the least recently polled going first,
// and a listing not kept is read again, whole and right.
func TestResultsCacheStaysWithinItsBound(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	finishOn(t, s, testSite, 10_000, numberedIDs(20, "j")...) // about 220 KB listed
	finishOn(t, s, "other", 10_000, numberedIDs(20, "o")...)
	const bound = 300_000
	s.results = newResultsCache(bound)
	want, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Len(t, want, 20)
	used := s.results.bytesUsed()
	require.Positive(t, used)
	require.LessOrEqual(t, used, int64(bound))
	require.NotNil(t, s.results.get(testSite))

	// A second listing of the same size does not fit beside it: the
	// least recently polled goes.
	others, err := s.Results(ctx, "other")
	require.NoError(t, err)
	require.Len(t, others, 20)
	require.LessOrEqual(t, s.results.bytesUsed(), int64(bound))
	require.Nil(t, s.results.get(testSite))
	require.NotNil(t, s.results.get("other"))

	// Below one listing, only the part that fits is kept, and answers
	// stay whole.
	s.results = newResultsCache(used - 1)
	for range 2 {
		got, err := s.Results(ctx, testSite)
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Positive(t, s.results.bytesUsed())
		require.Less(t, s.results.bytesUsed(), used)
	}

	// With caching off, nothing is kept.
	s.results = newResultsCache(0)
	got, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Zero(t, s.results.bytesUsed())
	require.Zero(t, s.ResultsCacheCounts().OverLimit)
}

// TestResultsPagesAreBoundedInBytes: no listing script reads more than a
// page's byte cap, but for one job that alone is larger.
func TestResultsPagesAreBoundedInBytes(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	finish(t, s, listPageBytes/3, numberedIDs(7, "j")...)
	finish(t, s, 2*listPageBytes, "huge")
	calls := recordCalls(s)
	got, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Len(t, got, 8)
	n := 0
	for _, c := range calls() {
		if c.op == opResultBodies {
			n++
		}
	}
	// A third of a page and its record: two fit a page, so seven take
	// four pages, and the huge one has its own.
	require.Equal(t, 5, n)

	pending, err := s.Pending(ctx, testSite)
	require.NoError(t, err)
	require.Empty(t, pending)
}

// TestResultsConcurrentChangeIsNeverMissed: a change landing between the
// ids page and the bodies of a listing is seen, and never cached as the
// state of the version read before it.
func TestResultsConcurrentChangeIsNeverMissed(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	s := newTestStore(t, client)
	ctx := t.Context()
	finish(t, s, 0, "a", "b")
	writer, err := NewFromClientForTest(client, s.prefix)
	require.NoError(t, err)

	changed := false
	s.onCall = func(c call) {
		if c.op == opResultBodies && !changed {
			changed = true
			_, err := writer.Cancel(ctx, store.CancelInput{JobID: "b", SiteID: testSite})
			require.NoError(t, err)
		}
	}
	got, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.True(t, changed)
	require.True(t, got[1].Cancelled, "the listing read after the change shows it")

	s.onCall = nil
	again, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	fresh, err := writer.Results(ctx, testSite)
	require.NoError(t, err)
	require.Equal(t, fresh, again)
	require.True(t, again[1].Cancelled)
}

// replyDropper relays to a server, except that it closes the connection
// of the first request carrying needle once that request is forwarded, so
// its reply is lost. It counts the requests carrying needle it saw.
type replyDropper struct {
	needle []byte
	mu     sync.Mutex
	seen   int
	conns  int
}

func (d *replyDropper) serve(t *testing.T, server string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", server)
			if err != nil {
				_ = c.Close()
				return
			}
			d.mu.Lock()
			d.conns++
			d.mu.Unlock()
			var lost atomic.Bool
			go d.back(c, up, &lost)
			go d.forward(c, up, &lost)
		}
	}()
	return ln.Addr().String()
}

// back relays replies until the connection's reply is to be lost.
func (d *replyDropper) back(c, up net.Conn, lost *atomic.Bool) {
	defer func() { _ = c.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		if lost.Load() {
			return
		}
		if n > 0 {
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (d *replyDropper) forward(c, up net.Conn, lost *atomic.Bool) {
	defer func() { _ = up.Close(); _ = c.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			d.mu.Lock()
			hit := len(d.needle) > 0 && bytes.Contains(buf[:n], d.needle)
			d.mu.Unlock()
			if hit {
				d.mu.Lock()
				d.seen++
				if d.seen == 1 {
					lost.Store(true)
				}
				d.mu.Unlock()
			}
			if _, werr := up.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (d *replyDropper) setNeedle(needle []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.needle = needle
}

func (d *replyDropper) requests() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seen
}

// TestListingsAreNotRetriedByTheClient: valkey-go re-sends a read-only
// command whose reply was lost; a listing, whose reply may be large, is
// never re-sent by valkey-go, only once by the store's own retry
// (outage.go), so it goes out twice at most and answers. A small read
// (job) is re-sent too, which shows the proxy does drop.
func TestListingsAreNotRetriedByTheClient(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	finish(t, s, 0, "a")
	try := func(op store.Op, run func(*Store) error) (int, error) {
		d := &replyDropper{}
		addr := d.serve(t, srv.Addr)
		client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
		require.NoError(t, err)
		t.Cleanup(client.Close)
		through, err := NewFromClientForTest(client, s.prefix)
		require.NoError(t, err)
		require.NoError(t, through.LoadScripts(ctx))
		d.setNeedle([]byte(through.scripts[op].function()))
		err = run(through)
		t.Logf("%s: %d requests over %d connections", op, d.requests(), d.conns)
		return d.requests(), err
	}
	sent, err := try(store.OpResults, func(s *Store) error { _, err := s.Results(ctx, testSite); return err })
	require.NoError(t, err, "the listing answers after one lost reply")
	require.Equal(t, 2, sent, "the listing went out twice: the first run and the store's one re-send")

	sent, err = try(store.OpJob, func(s *Store) error { _, _, err := s.Job(ctx, testSite, "a"); return err })
	require.NoError(t, err)
	require.Equal(t, 2, sent, "a small read is retried")
}

// TestJobSummariesReadLengthsNotBodies: the debug page's listing of a job
// holding a 1 MiB result reads its length, not its bytes.
func TestJobSummariesReadLengthsNotBodies(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	finish(t, s, 1<<20, "big")
	a := netOutput(t, s)
	b := netOutput(t, s)
	sums, err := s.JobSummaries(ctx, 0)
	require.NoError(t, err)
	c := netOutput(t, s)
	require.Less(t, (c-b)-(b-a), int64(4096), "bytes sent by Valkey for the debug listing")
	require.Len(t, sums, 1)
	require.Greater(t, sums[0].ResultBytes, int64(1<<20))
	require.Positive(t, sums[0].PayloadBytes)
	require.Equal(t, "ok", sums[0].Disposition)
}

// TestJobsPagesAreBoundedInBytes: Jobs, which carries bodies, reads them
// in pages of at most listPageBytes (one larger job alone), and still
// lists every job.
func TestJobsPagesAreBoundedInBytes(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	finish(t, s, listPageBytes/3, numberedIDs(4, "j")...)
	calls := recordCalls(s)
	all, err := s.Jobs(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, numberedIDs(4, "j"), func() []string {
		var ids []string
		for _, j := range all {
			ids = append(ids, j.ID)
		}
		return ids
	}())
	// Two jobs (a third of a page each, plus a small payload) fit a page:
	// two pages, then the empty one that ends the listing.
	require.Len(t, calls(), 3)
	three, err := s.Jobs(ctx, 3)
	require.NoError(t, err)
	require.Len(t, three, 3)
}

// TestResultsWithoutAVersionStillSeeJobsComeAndGo: jobs finished by a
// relay that keeps no results version (no marks, no version) are listed,
// read afresh whenever the listing changes, and a job that relay drops
// leaves the listing, since the count of listed jobs is checked too.
func TestResultsWithoutAVersionStillSeeJobsComeAndGo(t *testing.T) {
	srv := valkeytest.Start(t)
	s := newTestStore(t, srv.Client(t))
	ctx := t.Context()
	finish(t, s, 0, "a", "b")
	require.NoError(t, s.client.Do(ctx, s.client.B().Del().Key(s.key("listing")).Build()).Error())
	got, err := s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Len(t, got, 2)

	calls := recordCalls(s)
	_, err = s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Len(t, calls(), 1, "unchanged: the version call alone")

	// What an older relay's drop of b does: its record and entries go,
	// and no version moves.
	key := jobKey(testSite, "b")
	members, err := s.client.Do(ctx, s.client.B().Zrange().Key(s.key("finished")).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	for _, m := range members {
		if strings.HasSuffix(m, key) {
			require.NoError(t, s.client.Do(ctx, s.client.B().Zrem().Key(s.key("finished")).Member(m).Build()).Error())
		}
	}
	require.NoError(t, s.client.Do(ctx, s.client.B().Hdel().Key(s.key("job")).Field(key).Build()).Error())
	calls = recordCalls(s)
	got, err = s.Results(ctx, testSite)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "a", got[0].ID)
	require.Equal(t, []string{"a"}, bodiesAsked(calls()), "an unmarked job is read afresh")
}

// TestResultsBusyListingKeepsWhatItRead: a listing whose site's results
// change during every attempt to read it is still kept for its bodies, so
// the next poll fetches only the jobs finished since, not all of them.
func TestResultsBusyListingKeepsWhatItRead(t *testing.T) {
	srv := valkeytest.Start(t)
	client := srv.Client(t)
	s := newTestStore(t, client)
	writer, err := NewFromClientForTest(client, s.prefix)
	require.NoError(t, err)
	finish(t, s, 0, numberedIDs(50, "j")...)

	during := 0
	s.onCall = func(c call) {
		if c.op == opResultBodies {
			during++
			finish(t, writer, 0, "during-"+strconv.Itoa(during))
		}
	}
	got, err := s.Results(t.Context(), testSite)
	require.NoError(t, err)
	require.Equal(t, listingAttempts, during, "every attempt saw a change")
	require.Len(t, got, 50+listingAttempts-1, "the listing as last read")

	s.onCall = nil
	finish(t, writer, 0, "late")
	calls := recordCalls(s)
	got, err = s.Results(t.Context(), testSite)
	require.NoError(t, err)
	require.Len(t, got, 50+listingAttempts+1)
	require.ElementsMatch(t, []string{"during-" + strconv.Itoa(listingAttempts), "late"}, bodiesAsked(calls()),
		"only the jobs the busy read did not fetch are fetched")
}
