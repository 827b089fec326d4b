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
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

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

// Proto is the wire protocol a job was enqueued under. A claim sees only its
// own protocol's jobs (spec protocol-2 §2.4.3): both daemons parse claim
// answers strictly, so one stub in the other vocabulary would fail them all.
type Proto int

// The protocols.
const (
	Proto0 Proto = 0
	Proto2 Proto = 2
)

// Rules of protocol "2" the store enforces (spec protocol-2 §4.4, §4.5).
const (
	// UnsealedPerRoute is how many proto-2 jobs of one (site, job owner)
	// may await their payload at once.
	UnsealedPerRoute = 2
	// SealAttemptsBeforeEviction is the lapse of the sealing window that
	// deletes a proto-2 job instead of requeueing it.
	SealAttemptsBeforeEviction = 3
	// HolderReturnMs is how long a proto-2 job whose lease lapsed with its
	// payload sealed waits for its holder's next claim, which re-grants it
	// under the same lease id (README RD-D14): one default lease length, from
	// the lapse. The published site SDK completes a job only under the
	// first lease it sealed to, so a new holder could never finish it.
	// It does not follow --lease-ms: what it must outlast is the published
	// daemon's way back (a 10 s sleep after a failed call, an idle poll of
	// up to 11.5 s, a 30 s breaker on re-working a job), which a shorter
	// lease does not shorten.
	HolderReturnMs = protocol.DefaultLeaseMs
)

// OwnerOnly reports whether a job of this audience may go only to its
// owner's own devices: "self" in protocol "0", "private" in "2".
func OwnerOnly(audience string) bool { return audience == "self" || audience == "private" }

// Claim records who holds a job under which grant.
type Claim struct {
	RunnerID       string
	Owner          string
	Device         protocol.PublicIdentity
	LeaseID        string
	LeaseExpiresAt int64
}

// Job is a routed job as the store holds it. It is keyed by (SiteID, ID):
// two sites may use one id.
type Job struct {
	ID     string
	SiteID string
	Proto  Proto
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

	// Proto-2 bookkeeping of the sealing window (spec protocol-2 §4.5).
	// SealAttempts counts consecutive lapses; only a seal clears it.
	SealAttempts int
	// ReofferTo is the first runner that let an unsealed grant lapse; it is
	// never cleared. Until ReofferUntil only it is offered the job, and not
	// at all once it has refused it (decision P2-D8). ReofferUntil is the
	// lapsed AwaitingUntil plus one sealing window, stamped at each lapse
	// of a grant ReofferTo held; another runner's lapse leaves it, so that
	// runner's grant lapsing re-offers the job to nobody.
	ReofferTo    string
	ReofferUntil int64
	// RetryAfter holds per-runner not-before times on the store clock.
	RetryAfter map[string]int64
}

// JobSummary is a job as the debug page shows it: the job without its
// payload and result, and a size in bytes for each, positive exactly when
// one is stored (each store measures its own stored form), so that
// listing it never reads a sealed body.
type JobSummary struct {
	Job
	PayloadBytes int64
	ResultBytes  int64
}

// Clone returns a copy of j that shares nothing a caller could change.
func (j Job) Clone() Job {
	j.RefusedBy = slices.Clone(j.RefusedBy)
	j.RetryAfter = maps.Clone(j.RetryAfter)
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
	// Capabilities and Withheld are what a protocol-2 daemon last said it
	// can run and what it withholds: JSON arrays the store keeps verbatim
	// and routes on never. Nil means never said (a v0 runner).
	Capabilities json.RawMessage
	Withheld     json.RawMessage
}

// Route is a (site, job owner) pair a device may serve. A claim asks about
// routes, not about one site, so that a multi-site protocol fits later.
type Route struct {
	SiteID string
	Owner  string
}

// EnqueueInput publishes a stub for a site under a protocol. The job id is
// Stub.ID.
type EnqueueInput struct {
	SiteID string
	Proto  Proto
	Stub   protocol.JobStub
	// Admit, when set, is checked first (a site's call: its Charge);
	// a refused admission enqueues nothing.
	Admit *Admission
}

// EnqueueResult is the state of the job under that id after the call: a new
// job is Queued; a same-site republish reports the existing job's state.
type EnqueueResult struct {
	State   State
	Created bool
}

// Admission is what a daemon-plane call must pass before its operation
// runs, and the presence it then writes, within that operation's own
// atomic step, so that the whole call is one round trip to the store. Its
// checks run in field order, before the operation's Touch stamp; the
// first to fail refuses the call and leaves everything as it was: no
// token spent, no presence written, the operation not run.
type Admission struct {
	// Paired, when set, refuses the call with RefusedUnknownRunner unless
	// the runner has a presence paired as exactly this owner and device
	// (protocol "0" asks this of every signed call, relayd RB-G7).
	Paired *Paired
	// Charge, when set, takes one request from a rate bucket, refusing
	// with RefusedRateLimited (and the wait) when it is empty.
	Charge *Charge
	// Pair, when set, is written as Pair writes it once the call is
	// admitted, whatever the operation then answers (protocol "2"
	// refreshes presence on every signed call). Its RunnerID is the
	// call's runner.
	Pair *PairInput
}

// Paired is the owner and device a runner's presence must hold.
type Paired struct {
	Owner  string
	Device protocol.PublicIdentity
}

// Charge names a caller's rate bucket, of one request every Every and
// bursts of Burst: the same bucket the store's own limiter of that rate
// keeps under Key, so that a request charged either way spends from one
// allowance.
type Charge struct {
	Key   string
	Every time.Duration
	Burst int
}

// ClaimInput asks for up to Max queued jobs of one protocol the runner may
// serve.
type ClaimInput struct {
	Proto    Proto
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
	// Admit, when set, is checked first; a refused admission grants nothing.
	Admit *Admission
	// Hold keeps what the claim grants out of Pending until SettleGrants
	// decides it (spec grants.md G-R16): a held job awaits its payload and
	// counts toward the unsealed cap, but no site can see it or seal to
	// it. A held job whose sealing window lapses goes back to the queue as
	// a plain requeue, with no re-offer and no seal attempt counted: its
	// site never had the chance to seal.
	Hold bool
}

// SettleGrantsInput decides the held grants of one runner's claim (spec
// grants.md G-R18). Each lease is resolved lease first among proto-2 jobs
// and acted on only while it is the current grant of a job this runner
// holds that is not done:
//   - Granted: the hold ends and the sealing window restarts at store now,
//     so the site gets the whole of it;
//   - Refused: released as by Release with reason "refused";
//   - Returned: released with a not-before of RetryAfterMs for this runner.
type SettleGrantsInput struct {
	RunnerID     string
	Granted      []protocol.LeaseRef
	Refused      []protocol.LeaseRef
	Returned     []protocol.LeaseRef
	RetryAfterMs int64
}

// LeaseInput names a job and the grant a runner claims to hold on it.
//
// With SiteID set the job is (SiteID, JobID), as protocol "0" names it.
// With SiteID empty it is resolved lease first (spec protocol-2 §4.1
// P2-R4.1.3): the job whose current grant is LeaseID, if its id is JobID;
// else the first job with that id this runner holds; else none. Either way
// only jobs of Proto are found.
type LeaseInput struct {
	Proto    Proto
	SiteID   string
	JobID    string
	RunnerID string
	LeaseID  string
	// Touch also stamps the runner's presence in the same step, as Touch
	// does, whether or not the call is refused. A re-run may stamp again,
	// at the re-run's time.
	Touch bool
	// Admit, when set, is checked first. Fetch keeps no memo, so a store
	// that could re-send a charged fetch after a lost reply does not: the
	// caller gets an error and retries, and the re-run answers alike.
	Admit *Admission
	// Sites, when not nil, are the only sites whose jobs the holder may
	// still act on (protocol "2": the sites its owner consents to). A
	// job of any other site that the runner holds under the named grant
	// is refused with RefusedWithdrawn, after the holder checks and
	// before any other (decision RD-D12). Release never asks.
	Sites []string
}

// ServesSite reports whether sites, a LeaseInput's Sites, lets a holder
// act on a job of siteID: nil allows every site.
func ServesSite(sites []string, siteID string) bool {
	return sites == nil || slices.Contains(sites, siteID)
}

// TouchInput names a runner whose presence to stamp, with the admission
// its call must pass first, if any.
type TouchInput struct {
	RunnerID string
	Admit    *Admission
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
// being offered the job again; RetryAfterMs > 0 bars it until that long
// after now on the store clock. Jobs resolve as in LeaseInput.
type ReleaseInput struct {
	Proto        Proto
	SiteID       string
	RunnerID     string
	Leases       []protocol.LeaseRef
	Reason       string
	RetryAfterMs int64
	// Touch also stamps the runner's presence in the same step, as Touch
	// does, whatever is released.
	Touch bool
	// Admit, when set, is checked first; a refused admission releases
	// nothing.
	Admit *Admission
}

// PayloadInput attaches a site's sealed payload to a claimed job.
type PayloadInput struct {
	JobID    string
	SiteID   string
	Envelope protocol.SealedEnvelope
	// Admit, when set, is checked first; a refused admission stores
	// nothing.
	Admit *Admission
}

// CancelInput cancels a job of a site.
type CancelInput struct {
	JobID  string
	SiteID string
	// Admit, when set, is checked first; a refused admission cancels
	// nothing.
	Admit *Admission
}

// RenewInput extends the grants a runner still holds. Jobs resolve as in
// LeaseInput.
type RenewInput struct {
	Proto    Proto
	SiteID   string
	RunnerID string
	Leases   []protocol.LeaseRef
	LeaseMs  int64
}

// Renewal is one extended grant.
type Renewal struct {
	JobID     string
	ExpiresAt int64
}

// RenewResult lists, in request order, what was renewed and what was lost
// (each lost grant as the caller named it).
type RenewResult struct {
	Renewed []Renewal
	Lost    []protocol.LeaseRef
}

// CancelRequestsInput asks which cancelled jobs of one protocol a runner
// holds.
type CancelRequestsInput struct {
	Proto    Proto
	RunnerID string
}

// PairInput records a pairing or, for protocol "2", any call that refreshes
// presence (heartbeat, an approved poll, a presence rebuilt from the
// projection). Capabilities and Withheld replace the stored ones wholesale
// when non-nil (an empty array is an answer) and leave them when nil.
type PairInput struct {
	// Proto is the protocol whose presence this is: the sharded Valkey
	// layout keeps a protocol-"0" presence beside that protocol's jobs
	// and a protocol-"2" one beside the runner's rate bucket; the other
	// stores keep one presence per runner either way.
	Proto        Proto
	RunnerID     string
	Owner        string
	Device       protocol.PublicIdentity
	Capabilities json.RawMessage
	Withheld     json.RawMessage
	// Admit, when set, is checked first; a refused admission records
	// nothing.
	Admit *Admission
}

// HeartbeatInput is a daemon's heartbeat: the steps a heartbeat takes,
// in one call.
type HeartbeatInput struct {
	Proto    Proto
	SiteID   string
	RunnerID string
	// Touch stamps the runner's presence as Touch does (protocol "0";
	// protocol "2" writes it through Admit.Pair).
	Touch bool
	// Admit, when set, is checked first; a refused admission runs none of
	// the heartbeat.
	Admit *Admission
	// Serving says the runner serves a site now: only then are its cancel
	// requests listed and the grants it names renewed.
	Serving bool
	Leases  []protocol.LeaseRef
	LeaseMs int64
	// Sites, when not nil, restrict the renewal as LeaseInput.Sites
	// restricts a holder's calls: a grant on a job of any other site is
	// lost, and left to lapse (RD-D12).
	Sites []string
}

// HeartbeatResult is what each step of a heartbeat answered.
type HeartbeatResult struct {
	Swept SweepResult
	// Cancel and Renewed are empty unless the runner was Serving.
	Cancel  []protocol.LeaseRef
	Renewed RenewResult
}

// SweepResult lists the jobs a sweep requeued and those it dropped because
// their deadline passed or (proto 2) their sealing window lapsed a third
// time. Ids are bare: they are for reporting.
type SweepResult struct {
	Requeued []string
	Expired  []string
	// Lapsed lists the proto-2 jobs, requeued or evicted, whose sealing
	// window lapsed in this sweep (decision P2-D6 counts and logs them).
	Lapsed []string
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
	// republish of (site, id), whatever its protocol (the new stub is
	// ignored). A proto-0 enqueue of an id that a proto-0 job of another site
	// holds is refused with RefusedIDTaken; proto 2 never refuses.
	Enqueue(ctx context.Context, in EnqueueInput) (EnqueueResult, error)

	// Claim sweeps, then grants up to Max queued jobs of in.Proto in
	// first-enqueue order whose route and kind the input allows, that are
	// not cancelled, not refused by this runner and, for owner-only jobs,
	// owned by the device's owner. Proto 2 also applies the unsealed cap
	// per route, the sticky re-offer and per-runner not-before times.
	Claim(ctx context.Context, in ClaimInput) ([]protocol.ClaimedStub, error)

	// SettleGrants decides the jobs a Hold claim granted, and returns the
	// granted leases that were still current, in request order. It is
	// idempotent per lease: settling again changes nothing and answers
	// alike.
	SettleGrants(ctx context.Context, in SettleGrantsInput) ([]protocol.LeaseRef, error)

	// Fetch hands the sealed payload to the holder and marks the job
	// running. Refusals: RefusedNotFound, RefusedNotHolder,
	// RefusedStaleLease, RefusedWithdrawn, then RefusedFinished and
	// RefusedNotReady: proto 0 refuses a done job as finished first
	// (design RB-G9); proto 2 checks for the payload first (P2-ST9), so a job
	// done without one is not-ready (P2-S15).
	Fetch(ctx context.Context, in LeaseInput) (protocol.SealedEnvelope, error)

	// Result records a result once. A replay under the same grant is a
	// duplicate. Refusals: RefusedNotFound, RefusedNotHolder,
	// RefusedStaleLease, RefusedWithdrawn, and RefusedOtherDevice when the
	// envelope's SenderKeyID is not the holder's key id (no site could
	// verify it).
	Result(ctx context.Context, in ResultInput) (ResultOutcome, error)

	// Release requeues the unfinished jobs whose named grant the runner
	// holds, returning their ids in request order.
	Release(ctx context.Context, in ReleaseInput) ([]string, error)

	// Payload stores the payload of a job awaiting it. Refusals:
	// RefusedNotFound (missing or another site's), RefusedTooLate (with Was),
	// and RefusedOtherDevice when the envelope's RecipientKeyID is not the
	// key id of the device holding the current grant: a seal made for an
	// earlier holder, which the current one could never open (P2-D11).
	Payload(ctx context.Context, in PayloadInput) error

	// Cancel flags a site's job as cancelled, reporting whether it exists.
	Cancel(ctx context.Context, in CancelInput) (bool, error)

	// CancelRequests lists the grants of cancelled jobs of in.Proto the
	// runner holds, in first-enqueue order: proto 0 leaves finished jobs out
	// (design RB-G11); proto 2 lists them too (spec protocol-2 P2-ST14).
	CancelRequests(ctx context.Context, in CancelRequestsInput) ([]protocol.LeaseRef, error)

	// Renew extends each named grant the runner still holds.
	Renew(ctx context.Context, in RenewInput) (RenewResult, error)

	// Pair records a pairing: it creates the runner's presence or refreshes
	// its owner and keys (and, when given, capabilities and withheld),
	// stamping LastSeenAt.
	Pair(ctx context.Context, in PairInput) (Presence, error)

	// Touch stamps LastSeenAt of an existing presence; it reports false when
	// the runner has none.
	Touch(ctx context.Context, in TouchInput) (bool, error)

	// Heartbeat stamps the runner's presence when in.Touch, sweeps (a
	// share of what Sweep would), then, when in.Serving, lists the
	// runner's CancelRequests and Renews in.Leases, each step as its own
	// operation answers it: a daemon's heartbeat in one atomic step.
	Heartbeat(ctx context.Context, in HeartbeatInput) (HeartbeatResult, error)

	// Sweep applies every passed deadline, in bounded work per call.
	Sweep(ctx context.Context) (SweepResult, error)

	// Job returns one job by its key.
	Job(ctx context.Context, siteID, id string) (Job, bool, error)
	// Jobs returns up to limit jobs in first-enqueue order (all when limit <= 0).
	Jobs(ctx context.Context, limit int) ([]Job, error)
	// JobSummaries is Jobs for the debug page: sizes instead of payloads
	// and results.
	JobSummaries(ctx context.Context, limit int) ([]JobSummary, error)
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

// SiteSweeper is a RoutingStore that can sweep only what one site's reads
// see: the sharded Valkey layout, where a site's jobs live in one bucket
// of many and a whole sweep visits them all.
type SiteSweeper interface {
	SweepSite(ctx context.Context, siteID string) (SweepResult, error)
}

// SweepForSite sweeps before a read of siteID's jobs: st's SweepSite
// where it has one, else Sweep.
func SweepForSite(ctx context.Context, st RoutingStore, siteID string) (SweepResult, error) {
	if ss, ok := st.(SiteSweeper); ok {
		return ss.SweepSite(ctx, siteID)
	}
	return st.Sweep(ctx)
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
	// RefusedAtCapacity: too many pairings are pending.
	RefusedAtCapacity RefusalCode = "at-capacity"
	// RefusedUnknownRunner: an admission's Paired does not match the
	// runner's presence, or it has none.
	RefusedUnknownRunner RefusalCode = "unknown-runner"
	// RefusedRateLimited: an admission's Charge found its bucket empty.
	RefusedRateLimited RefusalCode = "rate-limited"
	// RefusedWithdrawn: the holder's job is of a site outside the call's
	// Sites, one its owner no longer consents to (RD-D12).
	RefusedWithdrawn RefusalCode = "withdrawn"
)

// RefusalCodes lists every refusal code.
func RefusalCodes() []RefusalCode {
	return []RefusalCode{
		RefusedNotFound, RefusedNotHolder, RefusedStaleLease, RefusedNotReady, RefusedTooLate, RefusedFinished, RefusedIDTaken,
		RefusedOtherDevice, RefusedAtCapacity, RefusedUnknownRunner, RefusedRateLimited, RefusedWithdrawn,
	}
}

// Refusal is an expected "no" from the store, as opposed to a failure.
type Refusal struct {
	Code RefusalCode
	// Was is the job's state, set on RefusedTooLate.
	Was State
	// RetryAfter is how long until the bucket has a request again, set
	// on RefusedRateLimited.
	RetryAfter time.Duration
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
