package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
)

// deadlineSpy is a store, limiter and pairing store that answers nothing
// and records how much time each call's context gave it. A frozen spy
// answers only when the call's context ends, as a frozen Valkey does.
type deadlineSpy struct {
	mu     sync.Mutex
	gave   map[string]time.Duration
	frozen bool
}

func newSpy() *deadlineSpy { return &deadlineSpy{gave: map[string]time.Duration{}} }

var errSpy = errors.New("spy answers nothing")

func (s *deadlineSpy) saw(ctx context.Context, method string) error {
	gave := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		gave = time.Until(dl)
	}
	s.mu.Lock()
	s.gave[method] = gave
	s.mu.Unlock()
	if s.frozen {
		<-ctx.Done()
		return ctx.Err()
	}
	return errSpy
}

func (s *deadlineSpy) called(method string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.gave[method]
	return ok
}

func (s *deadlineSpy) Now(ctx context.Context) (int64, error) { return 0, s.saw(ctx, "Now") }
func (s *deadlineSpy) Enqueue(ctx context.Context, _ store.EnqueueInput) (store.EnqueueResult, error) {
	return store.EnqueueResult{}, s.saw(ctx, "Enqueue")
}
func (s *deadlineSpy) Claim(ctx context.Context, _ store.ClaimInput) ([]protocol.ClaimedStub, error) {
	return nil, s.saw(ctx, "Claim")
}
func (s *deadlineSpy) Fetch(ctx context.Context, _ store.LeaseInput) (protocol.SealedEnvelope, error) {
	return protocol.SealedEnvelope{}, s.saw(ctx, "Fetch")
}
func (s *deadlineSpy) Result(ctx context.Context, _ store.ResultInput) (store.ResultOutcome, error) {
	return store.ResultOutcome{}, s.saw(ctx, "Result")
}
func (s *deadlineSpy) Release(ctx context.Context, _ store.ReleaseInput) ([]string, error) {
	return nil, s.saw(ctx, "Release")
}
func (s *deadlineSpy) SettleGrants(ctx context.Context, _ store.SettleGrantsInput) ([]protocol.LeaseRef, error) {
	return nil, s.saw(ctx, "SettleGrants")
}
func (s *deadlineSpy) Payload(ctx context.Context, _ store.PayloadInput) error {
	return s.saw(ctx, "Payload")
}
func (s *deadlineSpy) Cancel(ctx context.Context, _ store.CancelInput) (bool, error) {
	return false, s.saw(ctx, "Cancel")
}
func (s *deadlineSpy) CancelRequests(ctx context.Context, _ store.CancelRequestsInput) ([]protocol.LeaseRef, error) {
	return nil, s.saw(ctx, "CancelRequests")
}
func (s *deadlineSpy) Renew(ctx context.Context, _ store.RenewInput) (store.RenewResult, error) {
	return store.RenewResult{}, s.saw(ctx, "Renew")
}
func (s *deadlineSpy) Pair(ctx context.Context, _ store.PairInput) (store.Presence, error) {
	return store.Presence{}, s.saw(ctx, "Pair")
}
func (s *deadlineSpy) Touch(ctx context.Context, _ store.TouchInput) (bool, error) {
	return false, s.saw(ctx, "Touch")
}
func (s *deadlineSpy) Heartbeat(ctx context.Context, _ store.HeartbeatInput) (store.HeartbeatResult, error) {
	return store.HeartbeatResult{}, s.saw(ctx, "Heartbeat")
}
func (s *deadlineSpy) Sweep(ctx context.Context) (store.SweepResult, error) {
	return store.SweepResult{}, s.saw(ctx, "Sweep")
}
func (s *deadlineSpy) Job(ctx context.Context, _, _ string) (store.Job, bool, error) {
	return store.Job{}, false, s.saw(ctx, "Job")
}
func (s *deadlineSpy) Jobs(ctx context.Context, _ int) ([]store.Job, error) {
	return nil, s.saw(ctx, "Jobs")
}
func (s *deadlineSpy) JobSummaries(ctx context.Context, _ int) ([]store.JobSummary, error) {
	return nil, s.saw(ctx, "JobSummaries")
}
func (s *deadlineSpy) Pending(ctx context.Context, _ string) ([]store.Job, error) {
	return nil, s.saw(ctx, "Pending")
}
func (s *deadlineSpy) Results(ctx context.Context, _ string) ([]store.Job, error) {
	return nil, s.saw(ctx, "Results")
}
func (s *deadlineSpy) Presence(ctx context.Context, _ string) (store.Presence, bool, error) {
	return store.Presence{}, false, s.saw(ctx, "Presence")
}
func (s *deadlineSpy) Runners(ctx context.Context, _ int) ([]store.Presence, error) {
	return nil, s.saw(ctx, "Runners")
}
func (s *deadlineSpy) Ping(ctx context.Context) error { return s.saw(ctx, "Ping") }
func (s *deadlineSpy) Close() error                   { return nil }

func (s *deadlineSpy) Allow(ctx context.Context, _ string) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, s.saw(ctx, "Allow")
}

func (s *deadlineSpy) StartPairing(ctx context.Context, _ store.StartPairingInput) (int64, error) {
	return 0, s.saw(ctx, "StartPairing")
}
func (s *deadlineSpy) PairingByDeviceCode(ctx context.Context, _ string) (store.PendingPairing, bool, error) {
	return store.PendingPairing{}, false, s.saw(ctx, "PairingByDeviceCode")
}
func (s *deadlineSpy) PairingByUserCode(ctx context.Context, _ string) (store.PendingPairing, bool, error) {
	return store.PendingPairing{}, false, s.saw(ctx, "PairingByUserCode")
}
func (s *deadlineSpy) ApprovePairing(ctx context.Context, _, _ string) (store.PendingPairing, bool, error) {
	return store.PendingPairing{}, false, s.saw(ctx, "ApprovePairing")
}
func (s *deadlineSpy) DropPairing(ctx context.Context, _ string) error {
	return s.saw(ctx, "DropPairing")
}

// callEvery calls, through decorated, every method of iface that takes a
// context, with zero arguments, and checks each reached spy with a
// deadline at most want away (ping for Ping) and its error unchanged. It
// returns how many methods it called.
func callEvery(t *testing.T, iface reflect.Type, decorated any, spy *deadlineSpy, want, ping time.Duration) int {
	t.Helper()
	ctxType := reflect.TypeFor[context.Context]()
	called := 0
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		if m.Type.NumIn() == 0 || m.Type.In(0) != ctxType {
			continue
		}
		args := []reflect.Value{reflect.ValueOf(context.Background())}
		for j := 1; j < m.Type.NumIn(); j++ {
			args = append(args, reflect.Zero(m.Type.In(j)))
		}
		out := reflect.ValueOf(decorated).MethodByName(m.Name).Call(args)
		err, _ := out[len(out)-1].Interface().(error)
		require.ErrorIs(t, err, errSpy, m.Name)
		limit := want
		if m.Name == "Ping" {
			limit = ping
		}
		gave, ok := spy.gave[m.Name]
		require.True(t, ok, "%s reached the store", m.Name)
		require.Positive(t, gave, "%s ran with a deadline", m.Name)
		require.LessOrEqual(t, gave, limit, m.Name)
		require.Greater(t, gave, limit-time.Minute, "%s got the whole timeout, not a sliver", m.Name)
		called++
	}
	return called
}

// Every method of store.RoutingStore that takes a context, called through
// the decorator, reaches the store with a deadline no later than the store
// timeout (Ping: half of it), and the store's error comes back unchanged;
// so do the pairing store's and the limiter's. The methods are found by
// reflection, so one added to an interface is covered without editing
// this test.
func TestEveryStoreCallRunsUnderTheStoreTimeout(t *testing.T) {
	const timeout = time.Hour // far beyond any scheduling delay in the test
	spy := newSpy()
	routing := reflect.TypeFor[store.RoutingStore]()
	called := callEvery(t, routing, withDeadlines(spy, timeout), spy, timeout, timeout/readinessShare)
	require.Equal(t, routing.NumMethod()-1, called, "every method but Close takes a context")

	pairings := reflect.TypeFor[store.Pairings]()
	called = callEvery(t, pairings, pairingsWithDeadline(spy, timeout), spy, timeout, timeout)
	require.Equal(t, pairings.NumMethod(), called)
	require.Nil(t, pairingsWithDeadline(nil, timeout), "no pairing store stays none")

	called = callEvery(t, reflect.TypeFor[ratelimit.Limiter](), limiterWithDeadline(spy, timeout), spy, timeout, timeout)
	require.Equal(t, 1, called)
	require.Nil(t, limiterWithDeadline(nil, timeout), "no limiter stays no limiter")
}

// Within one request, the first store call that times out ends the
// request's store work: a later call fails at once without reaching the
// store, so a request waits one timeout, not one per call. Outside a
// request (the sweeper), each call waits its own.
func TestARequestWaitsOutOneStoreTimeoutNotOnePerCall(t *testing.T) {
	spy := newSpy()
	spy.frozen = true
	st, limiter := withDeadlines(spy, time.Millisecond), limiterWithDeadline(spy, time.Millisecond)
	var limitErr, sweepErr error
	h := oneWaitPerRequest(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, limitErr = limiter.Allow(r.Context(), "site:s")
		_, sweepErr = st.Sweep(r.Context())
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/relay/site/pending", nil))
	require.ErrorIs(t, limitErr, context.DeadlineExceeded)
	require.ErrorIs(t, sweepErr, errBudgetSpent)
	require.True(t, spy.called("Allow"))
	require.False(t, spy.called("Sweep"), "the second call never reached the frozen store")

	_, err := st.Now(context.Background())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = st.Sweep(context.Background())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.True(t, spy.called("Sweep"), "without a request, each call is tried")
}

// A deadline the caller set earlier than the store timeout is kept.
func TestAnEarlierCallerDeadlineWins(t *testing.T) {
	spy := newSpy()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := withDeadlines(spy, time.Hour).Claim(ctx, store.ClaimInput{})
	require.ErrorIs(t, err, errSpy)
	require.LessOrEqual(t, spy.gave["Claim"], time.Minute)
}

// A store's own timeouts spend a request's budget as its deadline does;
// any other failure (a limiter hiccup the plane lets through) does not.
func TestTimedOutKnowsTheStoresOwnTimeouts(t *testing.T) {
	require.True(t, timedOut(fmt.Errorf("valkey store: claim: %w", context.DeadlineExceeded)))
	require.True(t, timedOut(fmt.Errorf("read: %w", os.ErrDeadlineExceeded)))
	require.True(t, timedOut(&net.OpError{Op: "dial", Err: os.ErrDeadlineExceeded}))
	require.False(t, timedOut(errSpy))
	require.False(t, timedOut(fmt.Errorf("valkey store: %w", context.Canceled)), "a caller that went away is not a frozen store")
}
