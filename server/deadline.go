package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/backend"
)

// readinessShare is the part of the store timeout a readiness probe gets:
// half, so that with the default 2 s a probe answers its 503 well inside
// the probers' own timeouts (2 s in deploy/kubernetes, 3 s in HAProxy)
// rather than timing out, and never outlives the requests it vouches for.
const readinessShare = 2

// withCallDeadlines puts every call the relay makes on st, on b's
// limiters and on its pending device codes under timeout (see
// withDeadlines), returning them wrapped.
func withCallDeadlines(st store.RoutingStore, b backend.Backend, timeout time.Duration) (store.RoutingStore, backend.Backend) {
	b.RateLimit = limiterWithDeadline(b.RateLimit, timeout)
	b.SiteRateLimit = limiterWithDeadline(b.SiteRateLimit, timeout)
	b.Pairings = pairingsWithDeadline(b.Pairings, timeout)
	return withDeadlines(st, timeout), b
}

// withDeadlines gives every call on st a deadline of timeout, and Ping
// (the readiness probe) its shorter share, so that a store that stops
// answering costs a caller one bounded wait and a retryable 503, never a
// hung request. A caller's own earlier deadline still wins.
func withDeadlines(st store.RoutingStore, timeout time.Duration) store.RoutingStore {
	return &bounded{next: st, timeout: timeout, ping: timeout / readinessShare}
}

// bounded is the decorator withDeadlines returns. It names every method,
// rather than embedding the interface, so that a new store operation cannot
// slip past the deadline unnoticed: it will not compile until added here.
type bounded struct {
	next    store.RoutingStore
	timeout time.Duration
	ping    time.Duration
}

var _ store.RoutingStore = (*bounded)(nil)

// requestBudget marks a request whose store work has already waited out
// one deadline: the store is not answering, so the request's later calls
// fail at once instead of each waiting as long again. Without it a site
// call, charged to the rate limiter (which lets the request through when
// it cannot answer) before its store call, waited two timeouts.
type requestBudget struct{ spent atomic.Bool }

type budgetKey struct{}

// errBudgetSpent fails a store call that a request makes after an earlier
// call of the same request timed out; it was never sent.
var errBudgetSpent = errors.New("store call not attempted: an earlier store call of this request timed out")

// oneWaitPerRequest gives each request served by h a budget of one store
// timeout: the first call that times out ends the request's store work.
func oneWaitPerRequest(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), budgetKey{}, &requestBudget{})))
	})
}

// within runs call under a deadline of d from now, unless ctx's request
// has already waited out a deadline.
func within[T any](ctx context.Context, d time.Duration, call func(context.Context) (T, error)) (T, error) {
	budget, _ := ctx.Value(budgetKey{}).(*requestBudget)
	if budget != nil && budget.spent.Load() {
		var zero T
		return zero, errBudgetSpent
	}
	callCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	v, err := call(callCtx)
	if err != nil && budget != nil && (errors.Is(callCtx.Err(), context.DeadlineExceeded) || timedOut(err)) {
		budget.spent.Store(true)
	}
	return v, err
}

// timedOut reports whether err is the store giving up on a wait of its
// own: valkey-go bounds a reconnect by its dial timeout, which can end a
// hair before the call's deadline.
func timedOut(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &netErr) && netErr.Timeout())
}

// found is a lookup's answer, so that within can carry it.
type found[T any] struct {
	v  T
	ok bool
}

// withinFound is within for a lookup that may find nothing.
func withinFound[T any](ctx context.Context, d time.Duration, call func(context.Context) (T, bool, error)) (T, bool, error) {
	f, err := within(ctx, d, func(ctx context.Context) (found[T], error) {
		v, ok, err := call(ctx)
		return found[T]{v, ok}, err
	})
	return f.v, f.ok, err
}

// withinErr is within for a call that returns only an error.
func withinErr(ctx context.Context, d time.Duration, call func(context.Context) error) error {
	_, err := within(ctx, d, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
	return err
}

func (b *bounded) Now(ctx context.Context) (int64, error) {
	return within(ctx, b.timeout, b.next.Now)
}

func (b *bounded) Enqueue(ctx context.Context, in store.EnqueueInput) (store.EnqueueResult, error) {
	return within(ctx, b.timeout, func(ctx context.Context) (store.EnqueueResult, error) { return b.next.Enqueue(ctx, in) })
}

func (b *bounded) Claim(ctx context.Context, in store.ClaimInput) ([]protocol.ClaimedStub, error) {
	return within(ctx, b.timeout, func(ctx context.Context) ([]protocol.ClaimedStub, error) { return b.next.Claim(ctx, in) })
}

func (b *bounded) Fetch(ctx context.Context, in store.LeaseInput) (protocol.SealedEnvelope, error) {
	return within(ctx, b.timeout, func(ctx context.Context) (protocol.SealedEnvelope, error) { return b.next.Fetch(ctx, in) })
}

func (b *bounded) Result(ctx context.Context, in store.ResultInput) (store.ResultOutcome, error) {
	return within(ctx, b.timeout, func(ctx context.Context) (store.ResultOutcome, error) { return b.next.Result(ctx, in) })
}

func (b *bounded) SettleGrants(ctx context.Context, in store.SettleGrantsInput) ([]protocol.LeaseRef, error) {
	return within(ctx, b.timeout, func(ctx context.Context) ([]protocol.LeaseRef, error) { return b.next.SettleGrants(ctx, in) })
}

func (b *bounded) Release(ctx context.Context, in store.ReleaseInput) ([]string, error) {
	return within(ctx, b.timeout, func(ctx context.Context) ([]string, error) { return b.next.Release(ctx, in) })
}

func (b *bounded) Payload(ctx context.Context, in store.PayloadInput) error {
	return withinErr(ctx, b.timeout, func(ctx context.Context) error { return b.next.Payload(ctx, in) })
}

func (b *bounded) Cancel(ctx context.Context, in store.CancelInput) (bool, error) {
	return within(ctx, b.timeout, func(ctx context.Context) (bool, error) { return b.next.Cancel(ctx, in) })
}

func (b *bounded) CancelRequests(ctx context.Context, in store.CancelRequestsInput) ([]protocol.LeaseRef, error) {
	return within(ctx, b.timeout, func(ctx context.Context) ([]protocol.LeaseRef, error) { return b.next.CancelRequests(ctx, in) })
}

func (b *bounded) Renew(ctx context.Context, in store.RenewInput) (store.RenewResult, error) {
	return within(ctx, b.timeout, func(ctx context.Context) (store.RenewResult, error) { return b.next.Renew(ctx, in) })
}

func (b *bounded) Pair(ctx context.Context, in store.PairInput) (store.Presence, error) {
	return within(ctx, b.timeout, func(ctx context.Context) (store.Presence, error) { return b.next.Pair(ctx, in) })
}

func (b *bounded) Touch(ctx context.Context, in store.TouchInput) (bool, error) {
	return within(ctx, b.timeout, func(ctx context.Context) (bool, error) { return b.next.Touch(ctx, in) })
}

func (b *bounded) Heartbeat(ctx context.Context, in store.HeartbeatInput) (store.HeartbeatResult, error) {
	return within(ctx, b.timeout, func(ctx context.Context) (store.HeartbeatResult, error) { return b.next.Heartbeat(ctx, in) })
}

func (b *bounded) Sweep(ctx context.Context) (store.SweepResult, error) {
	return within(ctx, b.timeout, b.next.Sweep)
}

func (b *bounded) Job(ctx context.Context, siteID, id string) (store.Job, bool, error) {
	return withinFound(ctx, b.timeout, func(ctx context.Context) (store.Job, bool, error) { return b.next.Job(ctx, siteID, id) })
}

func (b *bounded) Jobs(ctx context.Context, limit int) ([]store.Job, error) {
	return within(ctx, b.timeout, func(ctx context.Context) ([]store.Job, error) { return b.next.Jobs(ctx, limit) })
}

func (b *bounded) JobSummaries(ctx context.Context, limit int) ([]store.JobSummary, error) {
	return within(ctx, b.timeout, func(ctx context.Context) ([]store.JobSummary, error) { return b.next.JobSummaries(ctx, limit) })
}

func (b *bounded) Pending(ctx context.Context, siteID string) ([]store.Job, error) {
	return within(ctx, b.timeout, func(ctx context.Context) ([]store.Job, error) { return b.next.Pending(ctx, siteID) })
}

func (b *bounded) Results(ctx context.Context, siteID string) ([]store.Job, error) {
	return within(ctx, b.timeout, func(ctx context.Context) ([]store.Job, error) { return b.next.Results(ctx, siteID) })
}

func (b *bounded) Presence(ctx context.Context, runnerID string) (store.Presence, bool, error) {
	return withinFound(ctx, b.timeout, func(ctx context.Context) (store.Presence, bool, error) { return b.next.Presence(ctx, runnerID) })
}

func (b *bounded) Runners(ctx context.Context, limit int) ([]store.Presence, error) {
	return within(ctx, b.timeout, func(ctx context.Context) ([]store.Presence, error) { return b.next.Runners(ctx, limit) })
}

// Ping is the readiness probe's call, under its shorter deadline.
func (b *bounded) Ping(ctx context.Context) error {
	return withinErr(ctx, b.ping, b.next.Ping)
}

// Close has no deadline: it waits for nothing remote.
func (b *bounded) Close() error { return b.next.Close() }

// limiterWithDeadline gives every Allow on l the store timeout: the Valkey
// limiter shares the store's server, and the plane lets a request through
// when its limiter cannot answer, so a frozen server must not hold the
// request there first. A nil limiter stays nil (no limit).
func limiterWithDeadline(l ratelimit.Limiter, timeout time.Duration) ratelimit.Limiter {
	if l == nil {
		return nil
	}
	return boundedLimiter{next: l, timeout: timeout}
}

type boundedLimiter struct {
	next    ratelimit.Limiter
	timeout time.Duration
}

func (l boundedLimiter) Allow(ctx context.Context, key string) (ratelimit.Decision, error) {
	return within(ctx, l.timeout, func(ctx context.Context) (ratelimit.Decision, error) { return l.next.Allow(ctx, key) })
}

// pairingsWithDeadline gives every call on p the store timeout, as
// withDeadlines does for the routing store; nil stays nil.
func pairingsWithDeadline(p store.Pairings, timeout time.Duration) store.Pairings {
	if p == nil {
		return nil
	}
	return boundedPairings{next: p, timeout: timeout}
}

type boundedPairings struct {
	next    store.Pairings
	timeout time.Duration
}

func (p boundedPairings) StartPairing(ctx context.Context, in store.StartPairingInput) (int64, error) {
	return within(ctx, p.timeout, func(ctx context.Context) (int64, error) { return p.next.StartPairing(ctx, in) })
}

func (p boundedPairings) PairingByDeviceCode(ctx context.Context, deviceCode string) (store.PendingPairing, bool, error) {
	return withinFound(ctx, p.timeout, func(ctx context.Context) (store.PendingPairing, bool, error) {
		return p.next.PairingByDeviceCode(ctx, deviceCode)
	})
}

func (p boundedPairings) PairingByUserCode(ctx context.Context, userCode string) (store.PendingPairing, bool, error) {
	return withinFound(ctx, p.timeout, func(ctx context.Context) (store.PendingPairing, bool, error) {
		return p.next.PairingByUserCode(ctx, userCode)
	})
}

func (p boundedPairings) ApprovePairing(ctx context.Context, userCode, identity string) (store.PendingPairing, bool, error) {
	return withinFound(ctx, p.timeout, func(ctx context.Context) (store.PendingPairing, bool, error) {
		return p.next.ApprovePairing(ctx, userCode, identity)
	})
}

func (p boundedPairings) DropPairing(ctx context.Context, deviceCode string) error {
	return withinErr(ctx, p.timeout, func(ctx context.Context) error { return p.next.DropPairing(ctx, deviceCode) })
}
