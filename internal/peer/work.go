package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/protocol"
)

// RunFunc turns an opened payload into the result plaintext.
type RunFunc func(payload json.RawMessage) (json.RawMessage, error)

// Steps let a caller pace, watch and steer Work. The zero value is RunOnce's
// behaviour.
type Steps struct {
	// FirstFetchAfter delays the first fetch, for a caller that knows the
	// site usually needs a moment to seal.
	FirstFetchAfter time.Duration
	// FetchEvery is the pause between fetches while the payload is not
	// sealed; 0 means Config.PollInterval.
	FetchEvery time.Duration
	// FetchFor bounds the fetch poll; 0 means Config.FetchWait.
	FetchFor time.Duration
	// FetchBackoffTo, when set, doubles the pause after each unsuccessful
	// fetch, from FetchEvery up to it, as the published "2" daemon's
	// fetch does (50 ms doubling to 1 s, protocol-2 §8.1.4).
	FetchBackoffTo time.Duration
	// Persist polls on through transport failures and 5xx answers as well
	// as not-ready, and when the poll runs out releases the lease
	// (backend-down) instead of leaving the job to the relay's sweep.
	Persist bool
	// Send carries each request Work makes ("fetch", "result", "release"),
	// for a caller that times, counts or retries them; nil sends directly.
	Send func(ctx context.Context, endpoint string, request func(context.Context) error) error
	// Opened is told the payload opened. Returning false drops the job
	// there without a word, as a crashing daemon would.
	Opened func(payload json.RawMessage) bool
	// Releasing is told that a lease is about to be given back, and why.
	Releasing func(reason string)
}

// Worked is what the shared lifecycle did with one held job, whichever
// protocol granted it.
type Worked struct {
	// Sealed is the payload envelope as fetched; Payload its plaintext.
	Sealed  protocol.SealedEnvelope
	Payload json.RawMessage
	// Dropped says Steps.Opened dropped the job after opening it.
	Dropped bool
	// Result is the result plaintext the run returned.
	Result json.RawMessage
	// Envelope is the sealed result as posted.
	Envelope protocol.SealedEnvelope
	// Response is the relay's answer to the result.
	Response protocol.ResultResponse
}

// Ran is what Work did with one protocol "0" job.
type Ran struct {
	Job protocol.ClaimedStub
	Worked
}

// The steps of Work, as a StepError names them.
const (
	StepFetch  = "fetch"
	StepOpen   = "open"
	StepRun    = "run"
	StepSeal   = "seal"
	StepResult = "result"
)

// StepError is a failure of one step of Work.
type StepError struct {
	JobID string
	Step  string
	Err   error
}

func (e *StepError) Error() string {
	if e.Step == StepOpen {
		return fmt.Sprintf("run %s: refuse payload: %v", e.JobID, e.Err)
	}
	return fmt.Sprintf("run %s: %v", e.JobID, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// RunOnce claims at most one job of the daemon's configured kinds and takes
// it through Work with run. It reports false when there was nothing to claim.
func (d *Daemon) RunOnce(ctx context.Context, run RunFunc) (Ran, bool, error) {
	if _, ok := d.SiteIdentity(); !ok {
		// Checked before claiming so that a misconfigured daemon takes no lease.
		return Ran{}, false, errors.New("run: no site identity pinned: pair first")
	}
	claim, err := d.Claim(ctx, d.kinds, 1)
	if err != nil {
		return Ran{}, false, fmt.Errorf("run: %w", err)
	}
	if len(claim.Jobs) == 0 {
		return Ran{}, false, nil
	}
	ran, err := d.Work(ctx, claim.Jobs[0], run, Steps{})
	return ran, true, err
}

// Work takes a job the daemon holds a lease on through the rest of its life,
// the one way every Go daemon here does it (RunOnce, the demo, the
// workload, and Daemon2.Work for protocol "2"): it polls fetch while the
// site has not sealed the payload, opens the payload with the pinned site
// identity, runs it, seals the result back to the site and posts it with
// disposition ok.
//
// A payload that does not open (wrong sender, tampered, wrong job) is
// refused: the lease is released with reason "refused". A run or seal
// failure releases it with reason "backend-down". Every failure comes back
// as a *StepError naming the step.
func (d *Daemon) Work(ctx context.Context, job protocol.ClaimedStub, run RunFunc, steps Steps) (Ran, error) {
	w := d.newWork(d, steps, protocol.LeaseRef{JobID: job.ID, LeaseID: job.Lease.ID}, job.DeadlineAt)
	w.site, w.pinned = d.SiteIdentity()
	worked, err := w.run(ctx, run)
	return Ran{Job: job, Worked: worked}, err
}

// leaseHolder is what the lifecycle needs of a daemon: the three calls a
// holder makes. Daemon and Daemon2 both are one; their answers have the
// same shapes under both protocols.
type leaseHolder interface {
	Fetch(ctx context.Context, jobID, leaseID string) (protocol.FetchResponse, error)
	Result(ctx context.Context, jobID, leaseID string, env protocol.SealedEnvelope, disposition string) (protocol.ResultResponse, error)
	Release(ctx context.Context, leases []protocol.LeaseRef, reason string) (protocol.ReleaseResponse, error)
}

// work is one job in the lifecycle's hands.
type work struct {
	h      leaseHolder
	keys   Keys
	sealer *Sealer
	// every and limit are the daemon's fetch poll and bound, which steps
	// may override.
	every, limit time.Duration
	steps        Steps
	lease        protocol.LeaseRef
	deadlineAt   int64
	// site is the identity the payload must come from and the result is
	// sealed to; pinned says the daemon has one for this job at all.
	site   protocol.PublicIdentity
	pinned bool
}

// run is the lifecycle itself: fetch, open, run, seal, result.
func (w *work) run(ctx context.Context, run RunFunc) (Worked, error) {
	var ran Worked
	jobID := w.lease.JobID
	if !w.pinned {
		return ran, &StepError{JobID: jobID, Step: StepOpen, Err: errors.New("no site identity pinned for this job: pair first")}
	}
	var err error
	if ran.Sealed, err = w.awaitPayload(ctx); err != nil {
		return ran, err
	}
	ran.Payload, err = Open(w.keys, ran.Sealed, Expectation{JobID: jobID, Direction: protocol.DirectionPayload, SenderIdentity: w.site.Identity})
	if err != nil {
		return ran, w.giveUp(ctx, protocol.ReasonRefused, StepOpen, err)
	}
	if w.steps.Opened != nil && !w.steps.Opened(ran.Payload) {
		ran.Dropped = true
		return ran, nil
	}
	if ran.Result, err = run(ran.Payload); err != nil {
		return ran, w.giveUp(ctx, protocol.ReasonBackendDown, StepRun, err)
	}
	ran.Envelope, err = w.sealer.Seal(w.keys, w.site, jobID, protocol.DirectionResult, w.deadlineAt, ran.Result)
	if err != nil {
		return ran, w.giveUp(ctx, protocol.ReasonBackendDown, StepSeal, err)
	}
	err = w.send(ctx, "result", func(ctx context.Context) (err error) {
		ran.Response, err = w.h.Result(ctx, jobID, w.lease.LeaseID, ran.Envelope, protocol.DispositionOK)
		return err
	})
	if err != nil {
		return ran, &StepError{JobID: jobID, Step: StepResult, Err: err}
	}
	return ran, nil
}

func (w *work) send(ctx context.Context, endpoint string, request func(context.Context) error) error {
	if w.steps.Send == nil {
		return request(ctx)
	}
	return w.steps.Send(ctx, endpoint, request)
}

// awaitPayload polls fetch while the relay answers not-ready (and, with
// Persist, while it does not answer at all).
func (w *work) awaitPayload(ctx context.Context) (protocol.SealedEnvelope, error) {
	every, limit := w.steps.FetchEvery, w.steps.FetchFor
	if every <= 0 {
		every = w.every
	}
	if limit <= 0 {
		limit = w.limit
	}
	giveUpAt := time.Now().Add(limit)
	fail := func(err error) error { return &StepError{JobID: w.lease.JobID, Step: StepFetch, Err: err} }
	if w.steps.FirstFetchAfter > 0 {
		if err := clock.Sleep(ctx, w.steps.FirstFetchAfter); err != nil {
			return protocol.SealedEnvelope{}, fail(fmt.Errorf("waiting for payload: %w", err))
		}
	}
	for {
		var resp protocol.FetchResponse
		err := w.send(ctx, "fetch", func(ctx context.Context) (err error) {
			resp, err = w.h.Fetch(ctx, w.lease.JobID, w.lease.LeaseID)
			return err
		})
		if err == nil {
			return resp.Envelope, nil
		}
		if ctx.Err() != nil || !w.pollOn(err) {
			return protocol.SealedEnvelope{}, fail(err)
		}
		if time.Now().Add(every).After(giveUpAt) {
			err = fmt.Errorf("payload not sealed within %s: %w", limit, err)
			if w.steps.Persist {
				return protocol.SealedEnvelope{}, w.giveUp(ctx, protocol.ReasonBackendDown, StepFetch, err)
			}
			return protocol.SealedEnvelope{}, fail(err)
		}
		if err := clock.Sleep(ctx, every); err != nil {
			return protocol.SealedEnvelope{}, fail(fmt.Errorf("waiting for payload: %w", err))
		}
		if w.steps.FetchBackoffTo > every {
			every = min(2*every, w.steps.FetchBackoffTo)
		}
	}
}

// pollOn says whether a failed fetch is worth another try.
func (w *work) pollOn(err error) bool {
	if ErrorCode(err) == protocol.CodeNotReady {
		return true
	}
	st := ErrorStatus(err)
	return w.steps.Persist && (st == 0 || st >= 500)
}

// giveUp releases the lease after a failure at step and returns the
// failure, joined with the release's own error if that failed too. The
// release runs even if ctx is already done, so a cancelled run does not
// strand the job until its lease expires.
func (w *work) giveUp(ctx context.Context, reason, step string, cause error) error {
	failure := &StepError{JobID: w.lease.JobID, Step: step, Err: cause}
	if w.steps.Releasing != nil {
		w.steps.Releasing(reason)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := w.send(rctx, "release", func(ctx context.Context) error {
		_, err := w.h.Release(ctx, []protocol.LeaseRef{w.lease}, reason)
		return err
	})
	if err != nil {
		return errors.Join(failure, fmt.Errorf("and releasing the lease failed: %w", err))
	}
	return failure
}
