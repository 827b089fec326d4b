package server

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
)

// deadlineSpy is a store that answers nothing and records how much time
// each call's context gave it.
type deadlineSpy struct {
	gave map[string]time.Duration
}

var errSpy = errors.New("spy answers nothing")

func (s *deadlineSpy) saw(ctx context.Context, method string) error {
	dl, ok := ctx.Deadline()
	if !ok {
		s.gave[method] = -1
		return errSpy
	}
	s.gave[method] = time.Until(dl)
	return errSpy
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
func (s *deadlineSpy) Touch(ctx context.Context, _ string) (bool, error) {
	return false, s.saw(ctx, "Touch")
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

// Every method of store.RoutingStore that takes a context, called through
// the decorator, reaches the store with a deadline no later than the store
// timeout (Ping: half of it), and the store's error comes back unchanged.
// The methods are found by reflection, so one added to the interface is
// covered without editing this test.
func TestEveryStoreCallRunsUnderTheStoreTimeout(t *testing.T) {
	const timeout = time.Hour // far beyond any scheduling delay in the test
	spy := &deadlineSpy{gave: map[string]time.Duration{}}
	bounded := reflect.ValueOf(withDeadlines(spy, timeout))
	iface := reflect.TypeFor[store.RoutingStore]()
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
		out := bounded.MethodByName(m.Name).Call(args)
		err, _ := out[len(out)-1].Interface().(error)
		require.ErrorIs(t, err, errSpy, m.Name)
		want := timeout
		if m.Name == "Ping" {
			want = timeout / readinessShare
		}
		gave, ok := spy.gave[m.Name]
		require.True(t, ok, "%s reached the store", m.Name)
		require.Positive(t, gave, "%s ran with a deadline", m.Name)
		require.LessOrEqual(t, gave, want, m.Name)
		require.Greater(t, gave, want-time.Minute, "%s got the whole timeout, not a sliver", m.Name)
		called++
	}
	require.Equal(t, iface.NumMethod()-1, called, "every method but Close takes a context")

	_, err := limiterWithDeadline(spy, timeout).Allow(context.Background(), "k")
	require.ErrorIs(t, err, errSpy)
	require.LessOrEqual(t, spy.gave["Allow"], timeout)
	require.Positive(t, spy.gave["Allow"], "the limiter call ran with a deadline")
	require.Nil(t, limiterWithDeadline(nil, timeout), "no limiter stays no limiter")
}

// A deadline the caller set earlier than the store timeout is kept.
func TestAnEarlierCallerDeadlineWins(t *testing.T) {
	spy := &deadlineSpy{gave: map[string]time.Duration{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := withDeadlines(spy, time.Hour).Claim(ctx, store.ClaimInput{})
	require.ErrorIs(t, err, errSpy)
	require.LessOrEqual(t, spy.gave["Claim"], time.Minute)
}
