// Package store defines the RoutingStore: the relay's routing state (jobs,
// grants, presence) and every operation on it, each one atomic. The memory
// and Valkey packages implement it; storetest is the one contract suite both
// must pass.
//
// A store keeps its own clock: every deadline it stamps or enforces comes from
// Now, never from a caller. It holds no keys beyond public ones, no consent
// and no plaintext; payloads and results are sealed envelopes it cannot open.
package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/byollm/relayd/protocol"
)

// State is where a job is in its life.
type State string

// Job states. There is no cancelled or expired state: cancellation is a flag
// and an expired job is deleted.
const (
	Queued          State = "queued"
	AwaitingPayload State = "awaiting-payload"
	Ready           State = "ready"
	Running         State = "running"
	Done            State = "done"
)

// States lists every job state.
func States() []State { return []State{Queued, AwaitingPayload, Ready, Running, Done} }

// Claim records who holds a job under which grant.
type Claim struct {
	RunnerID       string
	Owner          string
	Device         protocol.PublicIdentity
	LeaseID        string
	LeaseExpiresAt int64
}

// Job is a routed job as the store holds it.
type Job struct {
	ID     string
	SiteID string
	Stub   protocol.JobStub
	State  State
	// ClaimedBy is set from claim until the job is requeued; a finished job
	// keeps it.
	ClaimedBy *Claim
	// AwaitingUntil is the end of the sealing window; zero when not awaiting.
	AwaitingUntil int64
	// RefusedBy lists runners that refused the job; it is never cleared.
	RefusedBy   []string
	Cancelled   bool
	Payload     *protocol.SealedEnvelope
	Result      *protocol.SealedEnvelope
	Disposition string
}

// Clone returns a copy of j that shares nothing a caller could change.
func (j Job) Clone() Job {
	j.RefusedBy = slices.Clone(j.RefusedBy)
	if j.ClaimedBy != nil {
		c := *j.ClaimedBy
		j.ClaimedBy = &c
	}
	if j.Payload != nil {
		p := *j.Payload
		j.Payload = &p
	}
	if j.Result != nil {
		r := *j.Result
		j.Result = &r
	}
	return j
}

// Presence is what the relay knows of a paired runner.
type Presence struct {
	RunnerID   string
	Owner      string
	Device     protocol.PublicIdentity
	LastSeenAt int64
}

// Route is a (site, job owner) pair a device may serve. A claim asks about
// routes, not about one site, so that a multi-site protocol fits later.
type Route struct {
	SiteID string
	Owner  string
}

// EnqueueInput publishes a stub for a site. The job id is Stub.ID.
type EnqueueInput struct {
	SiteID string
	Stub   protocol.JobStub
}

// EnqueueResult is the state of the job under that id after the call: a new
// job is Queued; a same-site republish reports the existing job's state.
type EnqueueResult struct {
	State   State
	Created bool
}

// ClaimInput asks for up to Max queued jobs the runner may serve.
type ClaimInput struct {
	RunnerID string
	// Owner is the device's owner; a "self" job goes only to its owner's devices.
	Owner  string
	Device protocol.PublicIdentity
	// Routes are the (site, job owner) pairs this device may serve now.
	Routes  []Route
	Kinds   []string
	Max     int
	LeaseMs int64
	// Touch also stamps the runner's presence in the same step, as Touch
	// does, whatever the claim grants.
	Touch bool
}

// LeaseInput names a job and the grant a runner claims to hold on it.
type LeaseInput struct {
	JobID    string
	RunnerID string
	LeaseID  string
	// Touch also stamps the runner's presence in the same step, as Touch
	// does, whether or not the call is refused. A re-run may stamp again,
	// at the re-run's time.
	Touch bool
}

// ResultInput delivers a result under a grant.
type ResultInput struct {
	LeaseInput
	Envelope    protocol.SealedEnvelope
	Disposition string
}

// ResultOutcome reports whether the result was recorded now (Duplicate
// false) or had already been recorded under this same grant.
type ResultOutcome struct {
	Duplicate bool
}

// ReleaseInput gives grants back. Reason "refused" also bars the runner from
// being offered the job again.
type ReleaseInput struct {
	RunnerID string
	Leases   []protocol.LeaseRef
	Reason   string
}

// PayloadInput attaches a site's sealed payload to a claimed job.
type PayloadInput struct {
	JobID    string
	SiteID   string
	Envelope protocol.SealedEnvelope
}

// CancelInput cancels a job of a site.
type CancelInput struct {
	JobID  string
	SiteID string
}

// RenewInput extends the grants a runner still holds.
type RenewInput struct {
	RunnerID string
	Leases   []protocol.LeaseRef
	LeaseMs  int64
}

// Renewal is one extended grant.
type Renewal struct {
	JobID     string
	ExpiresAt int64
}

// RenewResult lists, in request order, what was renewed and what was lost.
type RenewResult struct {
	Renewed []Renewal
	Lost    []string
}

// PairInput records a pairing.
type PairInput struct {
	RunnerID string
	Owner    string
	Device   protocol.PublicIdentity
}

// SweepResult lists the jobs a sweep requeued and those it dropped because
// their deadline passed.
type SweepResult struct {
	Requeued []string
	Expired  []string
}

// RoutingStore is the relay's routing state. Every method is atomic with
// respect to every other, across all replicas sharing the store.
//
// Any operation that touches a job first applies that job's passed deadlines
// on the store clock (job deadline: deleted; sealing window or lease: back to
// the queue), so no caller ever acts on a job whose time ran out, whether or
// not a sweep ran. Reads (Job, Jobs, Pending, Results, Presence, Runners)
// report what is stored and change nothing.
//
// Each method that serves one wire operation carries that operation's name
// (Fetch serves fetch, Payload serves site/payload, Pending serves
// site/pending), so one name leads from the wire to the store.
//
// Expected outcomes that refuse a request are returned as *Refusal errors;
// any other error means the store could not answer and the request may be
// retried.
type RoutingStore interface {
	// Now reads the store clock, in milliseconds since the epoch.
	Now(ctx context.Context) (int64, error)

	// Enqueue creates a queued job, or returns the existing job's state for a
	// republish by the same site (the new stub is ignored). An id held by
	// another site is refused with RefusedIDTaken.
	Enqueue(ctx context.Context, in EnqueueInput) (EnqueueResult, error)

	// Claim sweeps, then grants up to Max queued jobs in first-enqueue order
	// whose route and kind the input allows, that are not cancelled, not
	// refused by this runner and, for "self" jobs, owned by the device's owner.
	Claim(ctx context.Context, in ClaimInput) ([]protocol.ClaimedStub, error)

	// Fetch hands the sealed payload to the holder and marks the job
	// running. Refusals: RefusedNotFound, RefusedNotHolder,
	// RefusedStaleLease, RefusedFinished, RefusedNotReady.
	Fetch(ctx context.Context, in LeaseInput) (protocol.SealedEnvelope, error)

	// Result records a result once. A replay under the same grant is a
	// duplicate. Refusals: RefusedNotFound, RefusedNotHolder,
	// RefusedStaleLease, and RefusedOtherDevice when the envelope's
	// SenderKeyID is not the holder's key id (no site could verify it).
	Result(ctx context.Context, in ResultInput) (ResultOutcome, error)

	// Release requeues the unfinished jobs whose named grant the runner
	// holds, returning their ids in request order.
	Release(ctx context.Context, in ReleaseInput) ([]string, error)

	// Payload stores the payload of a job awaiting it. Refusals:
	// RefusedNotFound (missing or another site's), RefusedTooLate (with Was),
	// and RefusedOtherDevice when the envelope's RecipientKeyID is not the
	// key id of the device holding the current grant: a seal made for an
	// earlier holder, which the current one could never open (D11).
	Payload(ctx context.Context, in PayloadInput) error

	// Cancel flags a site's job as cancelled, reporting whether it exists.
	Cancel(ctx context.Context, in CancelInput) (bool, error)

	// CancelRequests lists the unfinished cancelled jobs the runner holds.
	CancelRequests(ctx context.Context, runnerID string) ([]string, error)

	// Renew extends each named grant the runner still holds.
	Renew(ctx context.Context, in RenewInput) (RenewResult, error)

	// Pair records a pairing: it creates the runner's presence or refreshes
	// its owner and keys, stamping LastSeenAt.
	Pair(ctx context.Context, in PairInput) (Presence, error)

	// Touch stamps LastSeenAt of an existing presence; it reports false when
	// the runner has none.
	Touch(ctx context.Context, runnerID string) (bool, error)

	// Sweep applies every passed deadline, in bounded work per call.
	Sweep(ctx context.Context) (SweepResult, error)

	// Job returns one job.
	Job(ctx context.Context, id string) (Job, bool, error)
	// Jobs returns up to limit jobs in first-enqueue order (all when limit <= 0).
	Jobs(ctx context.Context, limit int) ([]Job, error)
	// Pending returns the site's jobs awaiting a payload, in first-enqueue order.
	Pending(ctx context.Context, siteID string) ([]Job, error)
	// Results returns the site's done jobs that hold a result, in
	// first-enqueue order, without their payloads: sites poll it, and the
	// payload is theirs already.
	Results(ctx context.Context, siteID string) ([]Job, error)
	// Presence returns one runner's presence.
	Presence(ctx context.Context, runnerID string) (Presence, bool, error)
	// Runners returns up to limit presences in first-pair order (all when limit <= 0).
	Runners(ctx context.Context, limit int) ([]Presence, error)

	// Ping reports whether the store can answer.
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
}

// RefusalCode names an expected refusal of a store operation.
type RefusalCode string

// Store refusals.
const (
	RefusedNotFound   RefusalCode = "not-found"
	RefusedNotHolder  RefusalCode = "not-holder"
	RefusedStaleLease RefusalCode = "stale-lease"
	RefusedNotReady   RefusalCode = "not-ready"
	RefusedTooLate    RefusalCode = "too-late"
	RefusedFinished   RefusalCode = "finished"
	RefusedIDTaken    RefusalCode = "id-taken"
	// RefusedOtherDevice: an envelope names a device other than the holder.
	RefusedOtherDevice RefusalCode = "other-device"
)

// RefusalCodes lists every refusal code.
func RefusalCodes() []RefusalCode {
	return []RefusalCode{
		RefusedNotFound, RefusedNotHolder, RefusedStaleLease, RefusedNotReady, RefusedTooLate, RefusedFinished, RefusedIDTaken,
		RefusedOtherDevice,
	}
}

// Refusal is an expected "no" from the store, as opposed to a failure.
type Refusal struct {
	Code RefusalCode
	// Was is the job's state, set on RefusedTooLate.
	Was State
}

func (r *Refusal) Error() string {
	if r.Was != "" {
		return fmt.Sprintf("store refused: %s (job is %s)", r.Code, r.Was)
	}
	return "store refused: " + string(r.Code)
}

// Refuse returns a *Refusal error with the given code.
func Refuse(code RefusalCode) error { return &Refusal{Code: code} }

// RefusalOf returns the refusal code err carries, or "" when err is not a refusal.
func RefusalOf(err error) RefusalCode {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

// HolderKeyID is the key id of the device a claim was granted to, the one a
// payload must be sealed to and a result sealed by; "" when its identity is
// not a decodable key, which matches no envelope.
func (c *Claim) HolderKeyID() string {
	id, _ := protocol.KeyIDOf(c.Device.Identity)
	return id
}

// ClaimedStub builds the stub a daemon receives for a granted job.
func ClaimedStub(stub protocol.JobStub, c Claim) protocol.ClaimedStub {
	return protocol.ClaimedStub{
		JobStub: stub,
		Lease:   protocol.Lease{ID: c.LeaseID, RunnerID: c.RunnerID, ExpiresAt: c.LeaseExpiresAt},
	}
}
