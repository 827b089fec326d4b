package metrics

import (
	"context"
	"time"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// InstrumentStore wraps st so that every operation's latency is observed,
// failures (not refusals) are counted, and grants, renewals, losses and
// sweeps move their counters.
func (m *Metrics) InstrumentStore(st store.RoutingStore) store.RoutingStore {
	return &instrumented{next: st, m: m}
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

func (i *instrumented) Now(ctx context.Context) (now int64, err error) {
	start := time.Now()
	now, err = i.next.Now(ctx)
	i.observe(store.OpNow, start, err)
	return now, err
}

func (i *instrumented) Enqueue(ctx context.Context, in store.EnqueueInput) (res store.EnqueueResult, err error) {
	start := time.Now()
	res, err = i.next.Enqueue(ctx, in)
	i.observe(store.OpEnqueue, start, err)
	return res, err
}

func (i *instrumented) Claim(ctx context.Context, in store.ClaimInput) (jobs []protocol.ClaimedStub, err error) {
	start := time.Now()
	jobs, err = i.next.Claim(ctx, in)
	i.observe(store.OpClaim, start, err)
	i.m.claimsGranted.Add(float64(len(jobs)))
	return jobs, err
}

func (i *instrumented) Fetch(ctx context.Context, in store.LeaseInput) (env protocol.SealedEnvelope, err error) {
	start := time.Now()
	env, err = i.next.Fetch(ctx, in)
	i.observe(store.OpFetch, start, err)
	return env, err
}

func (i *instrumented) Result(ctx context.Context, in store.ResultInput) (res store.ResultOutcome, err error) {
	start := time.Now()
	res, err = i.next.Result(ctx, in)
	i.observe(store.OpResult, start, err)
	return res, err
}

func (i *instrumented) Release(ctx context.Context, in store.ReleaseInput) (ids []string, err error) {
	start := time.Now()
	ids, err = i.next.Release(ctx, in)
	i.observe(store.OpRelease, start, err)
	return ids, err
}

func (i *instrumented) Payload(ctx context.Context, in store.PayloadInput) (err error) {
	start := time.Now()
	err = i.next.Payload(ctx, in)
	i.observe(store.OpPayload, start, err)
	return err
}

func (i *instrumented) Cancel(ctx context.Context, in store.CancelInput) (ok bool, err error) {
	start := time.Now()
	ok, err = i.next.Cancel(ctx, in)
	i.observe(store.OpCancel, start, err)
	return ok, err
}

func (i *instrumented) CancelRequests(ctx context.Context, runnerID string) (ids []string, err error) {
	start := time.Now()
	ids, err = i.next.CancelRequests(ctx, runnerID)
	i.observe(store.OpCancelRequests, start, err)
	return ids, err
}

func (i *instrumented) Renew(ctx context.Context, in store.RenewInput) (res store.RenewResult, err error) {
	start := time.Now()
	res, err = i.next.Renew(ctx, in)
	i.observe(store.OpRenew, start, err)
	i.m.leasesRenewed.Add(float64(len(res.Renewed)))
	i.m.leasesLost.Add(float64(len(res.Lost)))
	return res, err
}

func (i *instrumented) Pair(ctx context.Context, in store.PairInput) (p store.Presence, err error) {
	start := time.Now()
	p, err = i.next.Pair(ctx, in)
	i.observe(store.OpPair, start, err)
	return p, err
}

func (i *instrumented) Touch(ctx context.Context, runnerID string) (ok bool, err error) {
	start := time.Now()
	ok, err = i.next.Touch(ctx, runnerID)
	i.observe(store.OpTouch, start, err)
	return ok, err
}

func (i *instrumented) Sweep(ctx context.Context) (res store.SweepResult, err error) {
	start := time.Now()
	res, err = i.next.Sweep(ctx)
	i.observe(store.OpSweep, start, err)
	i.m.sweepRequeued.Add(float64(len(res.Requeued)))
	i.m.sweepExpired.Add(float64(len(res.Expired)))
	return res, err
}

func (i *instrumented) Job(ctx context.Context, id string) (j store.Job, ok bool, err error) {
	start := time.Now()
	j, ok, err = i.next.Job(ctx, id)
	i.observe(store.OpJob, start, err)
	return j, ok, err
}

func (i *instrumented) Jobs(ctx context.Context, limit int) (jobs []store.Job, err error) {
	start := time.Now()
	jobs, err = i.next.Jobs(ctx, limit)
	i.observe(store.OpJobs, start, err)
	return jobs, err
}

func (i *instrumented) Pending(ctx context.Context, siteID string) (jobs []store.Job, err error) {
	start := time.Now()
	jobs, err = i.next.Pending(ctx, siteID)
	i.observe(store.OpPending, start, err)
	return jobs, err
}

func (i *instrumented) Results(ctx context.Context, siteID string) (jobs []store.Job, err error) {
	start := time.Now()
	jobs, err = i.next.Results(ctx, siteID)
	i.observe(store.OpResults, start, err)
	return jobs, err
}

func (i *instrumented) Presence(ctx context.Context, runnerID string) (p store.Presence, ok bool, err error) {
	start := time.Now()
	p, ok, err = i.next.Presence(ctx, runnerID)
	i.observe(store.OpPresence, start, err)
	return p, ok, err
}

func (i *instrumented) Runners(ctx context.Context, limit int) (ps []store.Presence, err error) {
	start := time.Now()
	ps, err = i.next.Runners(ctx, limit)
	i.observe(store.OpRunners, start, err)
	return ps, err
}

func (i *instrumented) Ping(ctx context.Context) (err error) {
	start := time.Now()
	err = i.next.Ping(ctx)
	i.observe(store.OpPing, start, err)
	return err
}

func (i *instrumented) Close() error { return i.next.Close() }
