package valkey

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/byollm/relayd/internal/valkeytest"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
)

// retryLog records the retries a store reports (Options.OnRetry).
type retryLog struct {
	mu     sync.Mutex
	causes []string
	seen   chan struct{} // signalled at each retry, without blocking
}

func newRetryLog() *retryLog { return &retryLog{seen: make(chan struct{}, 1)} }

func (l *retryLog) observe(_ store.Op, cause string) {
	l.mu.Lock()
	l.causes = append(l.causes, cause)
	l.mu.Unlock()
	select {
	case l.seen <- struct{}{}:
	default:
	}
}

// take returns the causes seen since the last take, and forgets them.
func (l *retryLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.causes
	l.causes = nil
	select {
	case <-l.seen:
	default:
	}
	return out
}

// duringOutage runs call while the server is away: it waits until the
// store has retried the call at least once, then runs back (which brings
// the server back) and returns the call's error. A call that gives up
// before its first retry fails the test: that is the store without the
// retry.
func duringOutage(t *testing.T, log *retryLog, call func() error, back func()) error {
	t.Helper()
	log.take()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case <-log.seen:
	case err := <-done:
		t.Fatalf("the call gave up during the outage, before any retry: %v", err)
	}
	back()
	return <-done
}

// openRetrying opens a store on srv that reports its retries to log.
func openRetrying(t *testing.T, srv *valkeytest.Server, log *retryLog) *Store {
	t.Helper()
	s, err := New(t.Context(), Options{Addrs: srv.Addrs, KeyPrefix: valkeytest.Prefix(t), OnRetry: log.observe})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// stop stops srv, then reads on s with short deadlines until reads are
// refused a connection and meet no dropped one, several in a row, so that
// every connection the store's client multiplexes has met the drop (a
// pooled connection idle through the stop learns of it only from the EOF
// its next call meets) and the next call is refused a new one. One read
// under one deadline was not enough on a loaded machine: the limiter's
// charge, which is never sent again, could still meet a stale connection.
func stop(t *testing.T, srv *valkeytest.Server, s *Store, log *retryLog) {
	t.Helper()
	srv.Stop(t)
	deadline := time.Now().Add(10 * time.Second)
	for clean := 0; clean < 4; {
		log.take()
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		_, err := s.Now(ctx)
		cancel()
		require.Error(t, err, "the server is gone")
		causes := log.take()
		clean++
		if len(causes) == 0 || slices.Contains(causes, causeDropped) {
			clean = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("reads still met dropped connections 10 s after the stop: %v", err)
		}
	}
}

// Issue 23 item 6: a restart shorter than the call's deadline is not an
// error. Every kind of call is made while the server is stopped and
// succeeds once it is back: a remembered write, a charged claim, a
// charged fetch and a limiter's charge (which valkey-go never re-sends),
// a listing and a read.
func TestCallsRideOutAShortRestart(t *testing.T) {
	srv := valkeytest.StartWith(t, valkeytest.Options{Persist: true})
	if !srv.CanRestart() {
		t.Skip("needs a server started by valkeytest from a binary")
	}
	log := newRetryLog()
	s := openRetrying(t, srv, log)
	ctx := t.Context()
	rate := ratelimit.Rate{Every: time.Second, Burst: 100}
	charge := &store.Admission{Charge: &store.Charge{Key: "runner:r1", Every: rate.Every, Burst: rate.Burst}}
	limiter, err := s.Limiter(rate)
	require.NoError(t, err)
	mustEnqueue(t, s, "held")
	in := claimInput("r1", 1)
	in.Admit = charge
	var held protocol.ClaimedStub

	stub := testStub(t, s, "during-restart")
	var (
		enqueued store.EnqueueResult
		fetched  protocol.SealedEnvelope
		decision ratelimit.Decision
		found    bool
	)
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"enqueue", func(ctx context.Context) (err error) {
			enqueued, err = s.Enqueue(ctx, store.EnqueueInput{SiteID: testSite, Stub: stub})
			return err
		}},
		{"charged claim", func(ctx context.Context) error {
			got, err := s.Claim(ctx, in)
			if len(got) == 1 {
				held = got[0]
			}
			return err
		}},
		{"payload", func(ctx context.Context) error {
			return s.Payload(ctx, store.PayloadInput{JobID: held.ID, SiteID: testSite, Envelope: env(protocol.DirectionPayload, "p")})
		}},
		{"charged fetch", func(ctx context.Context) (err error) {
			lease := leaseOf(held)
			lease.Admit = charge
			fetched, err = s.Fetch(ctx, lease)
			return err
		}},
		{"limiter", func(ctx context.Context) (err error) {
			decision, err = limiter.Allow(ctx, "site:s1")
			if cause, _, ok := outageOf(err); ok && cause == causeDropped {
				// A charge that met a connection dropped under it is never
				// sent again, by design (outage.go): the plane admits that
				// request, and the limiter's next charge is answered. A
				// connection the restarting server closed while loading
				// its AOF can still be met after every stale one was.
				decision, err = limiter.Allow(ctx, "site:s1")
			}
			return err
		}},
		{"listing", func(ctx context.Context) error {
			_, err := s.Pending(ctx, testSite)
			return err
		}},
		{"read", func(ctx context.Context) (err error) {
			_, found, err = s.Job(ctx, testSite, held.ID)
			return err
		}},
	}
	for _, c := range calls {
		requireRidesOutARestart(ctx, t, srv, s, log, c.name, c.call)
	}
	require.Equal(t, store.EnqueueResult{State: store.Queued, Created: true}, enqueued)
	require.NotEmpty(t, held.ID, "the claim granted a job")
	require.Equal(t, "ct-p", fetched.Ciphertext, "the fetch read the payload sealed during the previous restart")
	require.True(t, decision.Allowed)
	require.True(t, found)
}

// requireRidesOutARestart stops srv, makes call while it restarts, and
// requires that the call succeeds, having retried for a restart's causes
// and no others.
func requireRidesOutARestart(ctx context.Context, t *testing.T, srv *valkeytest.Server, s *Store, log *retryLog, name string, call func(ctx context.Context) error) {
	t.Helper()
	stop(t, srv, s, log)
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := duringOutage(t, log, func() error { return call(callCtx) }, func() { srv.Restart(t) })
	cancel()
	require.NoError(t, err, "%s: a restart within the deadline is not an error", name)
	// The stopped server refuses new connections, and a pooled one that
	// sat through the stop fails when next used; once back from its AOF
	// the server may answer LOADING for a moment. Nothing else is retried.
	causes := slices.Compact(log.take())
	// Met the stopped server: refused a connection, or (a connection the
	// client had multiplexed, or one the restarting server closed) dropped
	// under the call.
	require.True(t, slices.Contains(causes, causeConnect) || slices.Contains(causes, causeDropped),
		"%s: the stopped server was met: %v", name, causes)
	for _, cause := range causes {
		require.Contains(t, []string{causeConnect, causeLoading, causeDropped}, cause, "%s: retried for a restart's causes only", name)
	}
}

// Past its deadline a call through an outage fails with a plain error,
// never a refusal, having retried: the caller's 503.
func TestAnOutageLongerThanTheDeadlineFails(t *testing.T) {
	srv := valkeytest.Start(t)
	if !srv.CanRestart() {
		t.Skip("needs a server started by valkeytest from a binary")
	}
	log := newRetryLog()
	s := openRetrying(t, srv, log)
	mustEnqueue(t, s, "a")
	srv.Stop(t)

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := s.Claim(ctx, claimInput("r1", 1))
	require.Error(t, err)
	require.Empty(t, store.RefusalOf(err), "an outage is not a refusal: %v", err)
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded, "the call retried until its deadline")
	require.NotEmpty(t, log.take(), "it retried")

	// Without a deadline of its own a call waits at most outageWait.
	_, err = s.Now(t.Context())
	require.Error(t, err)

	srv.Restart(t)
	_, err = s.Now(t.Context())
	require.NoError(t, err, "and the store answers again")
}

// A server loading its data set answers LOADING; a call made then is
// retried until the load ends. DEBUG RELOAD reloads the data set in place,
// slowed by key-load-delay, with the server answering others LOADING
// meanwhile.
func TestCallsRideOutLoading(t *testing.T) {
	srv := valkeytest.StartWith(t, valkeytest.Options{Args: []string{
		"--enable-debug-command", "yes", "--loading-process-events-interval-bytes", "1024", "--key-load-delay", "300"}})
	if !srv.CanRestart() {
		t.Skip("needs a server started by valkeytest from a binary")
	}
	log := newRetryLog()
	s := openRetrying(t, srv, log)
	mustEnqueue(t, s, "loaded")
	admin := srv.Client(t)
	require.NoError(t, admin.Do(t.Context(), admin.B().Arbitrary("DEBUG", "POPULATE").Args("3000", "filler", "100").Build()).Error())
	// A client that is told LOADING and not retried, to see the load begin.
	probe, err := valkey.NewClient(valkey.ClientOption{InitAddress: srv.Addrs, DisableCache: true, ForceSingleClient: true, DisableRetry: true})
	require.NoError(t, err)
	t.Cleanup(probe.Close)

	loading := func() bool {
		err := probe.Do(t.Context(), probe.B().Ping().Build()).Error()
		verr, ok := valkey.IsValkeyErr(err)
		return ok && verr.IsLoading()
	}
	reload := func() chan error {
		done := make(chan error, 1)
		go func() { done <- admin.Do(context.Background(), admin.B().Arbitrary("DEBUG", "RELOAD").Build()).Error() }()
		require.Eventually(t, loading, 10*time.Second, time.Millisecond, "the server answers LOADING")
		return done
	}

	reloaded := reload()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got, err := s.Claim(ctx, claimInput("r1", 1))
	require.NoError(t, err, "a call during the load succeeds once it ends")
	require.Len(t, got, 1)
	require.NoError(t, <-reloaded)
	require.Contains(t, log.take(), causeLoading)

	reloaded = reload()
	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, _, err = s.Job(short, testSite, "loaded")
	require.Error(t, err, "a load longer than the deadline fails the call")
	require.Empty(t, store.RefusalOf(err))
	require.NoError(t, <-reloaded)
}

// A failover: the store's address is a replica until it is promoted. A
// write meanwhile is answered READONLY, and a read on a replica whose
// primary is gone and that serves no stale data MASTERDOWN; each is
// retried, and runs once the replica is promoted. (A write function is
// refused READONLY on such a replica too: the server checks a function's
// write flag before its staleness, where an EVAL script met MASTERDOWN.)
func TestCallsRideOutAFailover(t *testing.T) {
	for _, tc := range []struct {
		name, cause  string
		primaryAlive bool
	}{
		{"readonly", causeReadOnly, true},
		{"masterdown", causeMasterDown, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary, replica := valkeytest.Start(t), valkeytest.Start(t)
			if !primary.CanRestart() || !replica.CanRestart() {
				t.Skip("needs servers started by valkeytest from a binary")
			}
			prefix := valkeytest.Prefix(t)
			first, err := New(t.Context(), Options{Addrs: primary.Addrs, KeyPrefix: prefix})
			require.NoError(t, err)
			t.Cleanup(func() { _ = first.Close() })
			mustEnqueue(t, first, "failed-over")

			rc := replica.Client(t)
			do := func(args ...string) {
				t.Helper()
				require.NoError(t, rc.Do(t.Context(), rc.B().Arbitrary(args[0]).Args(args[1:]...).Build()).Error(), "%v", args)
			}
			host, port := splitAddr(t, primary.Addr)
			do("REPLICAOF", host, port)
			require.Eventually(t, func() bool {
				n, err := rc.Do(t.Context(), rc.B().Exists().Key(first.key("seq")).Build()).AsInt64()
				return err == nil && n == 1
			}, 10*time.Second, 5*time.Millisecond, "the replica has the primary's data")
			log := newRetryLog()
			s, err := New(t.Context(), Options{Addrs: replica.Addrs, KeyPrefix: prefix, OnRetry: log.observe})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			if !tc.primaryAlive {
				do("CONFIG", "SET", "replica-serve-stale-data", "no")
				primary.Stop(t)
			}

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var got []protocol.ClaimedStub
			claim := func() (err error) {
				got, err = s.Claim(ctx, claimInput("r1", 1))
				return err
			}
			call := claim
			if !tc.primaryAlive {
				call = func() error {
					_, ok, err := s.Job(ctx, testSite, "failed-over")
					require.True(t, err != nil || ok, "the read found the job")
					return err
				}
			}
			err = duringOutage(t, log, call, func() { do("REPLICAOF", "NO", "ONE") })
			require.NoError(t, err, "the call runs on the promoted replica")
			if !tc.primaryAlive {
				require.NoError(t, claim(), "the write runs on the promoted replica")
			}
			require.Len(t, got, 1)
			require.Equal(t, "failed-over", got[0].ID)
			causes := log.take()
			require.Contains(t, causes, tc.cause)
			require.False(t, slices.Contains(causes, causeConnect), "the server was there all along: %v", causes)
		})
	}
}

func splitAddr(t *testing.T, addr string) (host, port string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	return host, port
}

// A result whose reply is lost as the server stops, after the server ran
// and persisted it: the store sends it again through the restart, and the
// re-run answers the first run's answer from the memo and changes
// nothing, so the result takes effect once.
func TestAWriteReSentThroughARestartTakesEffectOnce(t *testing.T) {
	srv := valkeytest.StartWith(t, valkeytest.Options{Persist: true})
	if !srv.CanRestart() {
		t.Skip("needs a server started by valkeytest from a binary")
	}
	h := newLossyStoresOn(t, srv, &Options{})
	log := newRetryLog()
	h.lossy.onRetry = log.observe
	c := h.heldBy(t, "restart-runner", "restart-job")
	require.NoError(t, h.direct.Payload(t.Context(), store.PayloadInput{JobID: c.ID, SiteID: testSite, Envelope: env(protocol.DirectionPayload, "p")}))

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	type answer struct {
		res store.ResultOutcome
		err error
	}
	tr := h.proxy.arm(c.Lease.ID)
	done := make(chan answer, 1)
	go func() {
		res, err := h.lossy.Result(ctx, store.ResultInput{LeaseInput: leaseOf(c), Envelope: env(protocol.DirectionResult, "r"), Disposition: "ok"})
		done <- answer{res, err}
	}()
	<-tr.held
	advance(t, h.direct, time.Second)
	firstRun := dump(t, h.direct)
	srv.Stop(t)
	log.take()
	close(tr.drop)
	select {
	case <-log.seen:
	case a := <-done:
		t.Fatalf("the result gave up during the outage, before any retry: %v", a.err)
	}
	srv.Restart(t)
	a := <-done
	require.NoError(t, a.err, "the result is answered across the restart")
	require.False(t, a.res.Duplicate, "the re-run answers the first run's answer: a first delivery")
	require.GreaterOrEqual(t, h.proxy.sent(), 2)
	require.Equal(t, firstRun, dump(t, h.direct), "the re-run changed nothing")
}

// A limiter's charge whose reply is lost is not sent again, by valkey-go
// or the store: the caller gets the error (the plane then lets the
// request through), and the bucket spent one request, not two.
func TestALimitersChargeIsNotReSentAfterALostReply(t *testing.T) {
	h := newLossyStoresOn(t, valkeytest.Start(t), &Options{})
	rate := ratelimit.Rate{Every: time.Hour, Burst: 2}
	lossy, err := h.lossy.Limiter(rate)
	require.NoError(t, err)
	tr := h.proxy.arm("ratelimit:lost-charge")
	done := make(chan error, 1)
	go func() {
		_, err := lossy.Allow(t.Context(), "lost-charge")
		done <- err
	}()
	<-tr.held
	close(tr.drop)
	require.Error(t, <-done)
	require.Equal(t, 1, h.proxy.sent(), "sent once")
	direct, err := h.direct.Limiter(rate)
	require.NoError(t, err)
	d, err := direct.Allow(t.Context(), "lost-charge")
	require.NoError(t, err)
	require.True(t, d.Allowed, "one request of two was spent")
	d, err = direct.Allow(t.Context(), "lost-charge")
	require.NoError(t, err)
	require.False(t, d.Allowed)
}

// A listing whose reply is lost is sent again once: after a restart, the
// first call on each pooled connection meets its EOF, and a site's
// pending or results poll must not answer 503 for it (issue 23, found by
// interop/test/faults.test.mjs). A second loss is the caller's error.
func TestAListingIsReSentOnceAfterALostReply(t *testing.T) {
	h := newLossyStoresOn(t, valkeytest.Start(t), &Options{})
	mustEnqueue(t, h.direct, "listed")
	tr := h.proxy.arm(testSite)
	done := make(chan error, 1)
	go func() {
		_, err := h.lossy.Results(t.Context(), testSite)
		done <- err
	}()
	<-tr.held
	close(tr.drop)
	require.NoError(t, <-done, "the listing answers after one lost reply")
	require.Equal(t, 2, h.proxy.sent(), "sent twice: the first run and one more")
}
