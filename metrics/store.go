package metrics

import (
	"context"
	"time"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// InstrumentStore wraps st so that every operation's latency is observed,
// failures (not refusals) are counted, and grants, renewals, losses and
// sweeps move their counters. Each operation is labelled with its store.Op.
func (m *Metrics) InstrumentStore(st store.RoutingStore) store.RoutingStore {
	return &instrumented{next: st, m: m}
}

// StoreRetried counts one retry of a store call of op through a short
// outage; cause is one of a small fixed set (valkey.RetryCauses).
func (m *Metrics) StoreRetried(op store.Op, cause string) {
	m.storeRetries.WithLabelValues(string(op), cause).Inc()
}

type instrumented struct {
	next store.RoutingStore
	m    *Metrics
}

// observe records one operation; err is counted only when it is a failure.
func (i *instrumented) observe(op store.Op, start time.Time, err error) {
	i.m.storeDuration.WithLabelValues(string(op)).Observe(time.Since(start).Seconds())
	if err != nil && store.RefusalOf(err) == "" {
		i.m.storeErrors.WithLabelValues(string(op)).Inc()
	}
}

// timed runs one operation and observes it as op.
func timed[T any](i *instrumented, op store.Op, call func() (T, error)) (T, error) {
	start := time.Now()
	v, err := call()
	i.observe(op, start, err)
	return v, err
}

// lookup runs one operation that may find nothing and observes it as op.
func lookup[T any](i *instrumented, op store.Op, call func() (T, bool, error)) (T, bool, error) {
	start := time.Now()
	v, ok, err := call()
	i.observe(op, start, err)
	return v, ok, err
}

func (i *instrumented) Now(ctx context.Context) (int64, error) {
	return timed(i, store.OpNow, func() (int64, error) { return i.next.Now(ctx) })
}

func (i *instrumented) Enqueue(ctx context.Context, in store.EnqueueInput) (store.EnqueueResult, error) {
	return timed(i, store.OpEnqueue, func() (store.EnqueueResult, error) { return i.next.Enqueue(ctx, in) })
}

func (i *instrumented) Claim(ctx context.Context, in store.ClaimInput) ([]protocol.ClaimedStub, error) {
	jobs, err := timed(i, store.OpClaim, func() ([]protocol.ClaimedStub, error) { return i.next.Claim(ctx, in) })
	i.m.claimsGranted.Add(float64(len(jobs)))
	return jobs, err
}

func (i *instrumented) SettleGrants(ctx context.Context, in store.SettleGrantsInput) ([]protocol.LeaseRef, error) {
	return timed(i, store.OpSettleGrants, func() ([]protocol.LeaseRef, error) { return i.next.SettleGrants(ctx, in) })
}

func (i *instrumented) Fetch(ctx context.Context, in store.LeaseInput) (protocol.SealedEnvelope, error) {
	return timed(i, store.OpFetch, func() (protocol.SealedEnvelope, error) { return i.next.Fetch(ctx, in) })
}

func (i *instrumented) Result(ctx context.Context, in store.ResultInput) (store.ResultOutcome, error) {
	return timed(i, store.OpResult, func() (store.ResultOutcome, error) { return i.next.Result(ctx, in) })
}

func (i *instrumented) Release(ctx context.Context, in store.ReleaseInput) ([]string, error) {
	return timed(i, store.OpRelease, func() ([]string, error) { return i.next.Release(ctx, in) })
}

func (i *instrumented) Payload(ctx context.Context, in store.PayloadInput) error {
	_, err := timed(i, store.OpPayload, func() (struct{}, error) { return struct{}{}, i.next.Payload(ctx, in) })
	return err
}

func (i *instrumented) Cancel(ctx context.Context, in store.CancelInput) (bool, error) {
	return timed(i, store.OpCancel, func() (bool, error) { return i.next.Cancel(ctx, in) })
}

func (i *instrumented) CancelRequests(ctx context.Context, in store.CancelRequestsInput) ([]protocol.LeaseRef, error) {
	return timed(i, store.OpCancelRequests, func() ([]protocol.LeaseRef, error) { return i.next.CancelRequests(ctx, in) })
}

func (i *instrumented) Renew(ctx context.Context, in store.RenewInput) (store.RenewResult, error) {
	res, err := timed(i, store.OpRenew, func() (store.RenewResult, error) { return i.next.Renew(ctx, in) })
	i.m.leasesRenewed.Add(float64(len(res.Renewed)))
	i.m.leasesLost.Add(float64(len(res.Lost)))
	return res, err
}

func (i *instrumented) Pair(ctx context.Context, in store.PairInput) (store.Presence, error) {
	return timed(i, store.OpPair, func() (store.Presence, error) { return i.next.Pair(ctx, in) })
}

func (i *instrumented) Touch(ctx context.Context, in store.TouchInput) (bool, error) {
	return timed(i, store.OpTouch, func() (bool, error) { return i.next.Touch(ctx, in) })
}

func (i *instrumented) Heartbeat(ctx context.Context, in store.HeartbeatInput) (store.HeartbeatResult, error) {
	res, err := timed(i, store.OpHeartbeat, func() (store.HeartbeatResult, error) { return i.next.Heartbeat(ctx, in) })
	i.swept(res.Swept)
	return res, err
}

func (i *instrumented) Sweep(ctx context.Context) (store.SweepResult, error) {
	res, err := timed(i, store.OpSweep, func() (store.SweepResult, error) { return i.next.Sweep(ctx) })
	i.swept(res)
	return res, err
}

// swept counts what a sweep, or a heartbeat's sweep, settled.
func (i *instrumented) swept(res store.SweepResult) {
	i.m.sweepRequeued.Add(float64(len(res.Requeued)))
	i.m.sweepExpired.Add(float64(len(res.Expired)))
	i.m.sweepLapsed.Add(float64(len(res.Lapsed)))
}

func (i *instrumented) Job(ctx context.Context, siteID, id string) (store.Job, bool, error) {
	return lookup(i, store.OpJob, func() (store.Job, bool, error) { return i.next.Job(ctx, siteID, id) })
}

func (i *instrumented) Jobs(ctx context.Context, limit int) ([]store.Job, error) {
	return timed(i, store.OpJobs, func() ([]store.Job, error) { return i.next.Jobs(ctx, limit) })
}

func (i *instrumented) JobSummaries(ctx context.Context, limit int) ([]store.JobSummary, error) {
	return timed(i, store.OpJobSummaries, func() ([]store.JobSummary, error) { return i.next.JobSummaries(ctx, limit) })
}

func (i *instrumented) Pending(ctx context.Context, siteID string) ([]store.Job, error) {
	return timed(i, store.OpPending, func() ([]store.Job, error) { return i.next.Pending(ctx, siteID) })
}

func (i *instrumented) Results(ctx context.Context, siteID string) ([]store.Job, error) {
	return timed(i, store.OpResults, func() ([]store.Job, error) { return i.next.Results(ctx, siteID) })
}

func (i *instrumented) Presence(ctx context.Context, runnerID string) (store.Presence, bool, error) {
	return lookup(i, store.OpPresence, func() (store.Presence, bool, error) { return i.next.Presence(ctx, runnerID) })
}

func (i *instrumented) Runners(ctx context.Context, limit int) ([]store.Presence, error) {
	return timed(i, store.OpRunners, func() ([]store.Presence, error) { return i.next.Runners(ctx, limit) })
}

func (i *instrumented) Ping(ctx context.Context) error {
	_, err := timed(i, store.OpPing, func() (struct{}, error) { return struct{}{}, i.next.Ping(ctx) })
	return err
}

func (i *instrumented) Close() error { return i.next.Close() }
