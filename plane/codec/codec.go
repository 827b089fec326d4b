// Package codec is the seam between relayd's HTTP plane and the wire
// protocol versions it speaks (protocol-2.md §2.4). The plane routes a
// request, reads its body once and has its classifier pick a Codec by the
// version the request declares; the Codec authenticates the request,
// decodes it, runs its endpoint and returns the answer's body, or an error
// that the plane's one writer puts on the wire: a Refusal, whatever its
// protocol, as it stands; a *StoreFailure as a retryable 503.
//
// What every version shares lives here too: the endpoint names each plane
// routes, signature freshness on the relay clock, and the environment a
// codec serves from. No HTTP framework appears in this package or in a
// codec, so a codec is plain functions over values.
package codec

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
)

// Plane is the half of the surface a request came in on.
type Plane int

const (
	// Daemon is the daemon plane: <base>/<endpoint>, dispatched on the
	// path's last segment.
	Daemon Plane = iota
	// Site is the site plane: the fixed /relay/site/<endpoint> routes.
	Site
)

// DaemonEndpoint reports whether the daemon plane routes name. Every
// protocol version has the same names (protocol-2.md §2.2); any other
// name is an unknown path, answered before any version is looked at.
func DaemonEndpoint(name string) bool {
	switch name {
	case "pair", "claim", "fetch", "result", "heartbeat", "release":
		return true
	}
	return false
}

// SiteEndpoints lists the site plane's routes, each served at
// /relay/site/<name> whatever the daemon plane's base path.
func SiteEndpoints() []string {
	return []string{"enqueue", "payload", "cancel", "pending", "results"}
}

// Unsigned reports whether a daemon endpoint is called without a
// signature, which makes its rate limit the caller's address.
func Unsigned(endpoint string) bool { return endpoint == "pair" }

// Request is one routed request with its body read.
type Request struct {
	Plane Plane
	// Endpoint is the route's name on its plane: "claim", "enqueue".
	Endpoint string
	// Header carries the signature.
	Header http.Header
	// ClientAddr is the client address an unsigned daemon call was charged
	// to (the per-address rate limit's key); "" on every other call.
	ClientAddr string
	// RawQuery is the URL's query, still encoded; the site plane's reads
	// take their siteId from it.
	RawQuery string
	// Body is empty for every method but POST. Its bytes are what the
	// signature covers.
	Body *protocol.Body
	// Schema, when set, is the body the request schema reads instead of
	// Body: a protocol "0" site request that declared "0", with that key
	// removed, since "0"'s site schemas have none (spec P2-A2).
	Schema *protocol.Body
}

// SchemaBody is the body the request's schema reads.
func (r *Request) SchemaBody() *protocol.Body {
	if r.Schema != nil {
		return r.Schema
	}
	return r.Body
}

// Codec serves the requests of one protocol version.
type Codec interface {
	// Serve authenticates, decodes and handles req, and returns the body
	// of its 200 answer, or the error the plane's writer answers with.
	Serve(ctx context.Context, req *Request) (any, error)
}

// Refusal is an error that is the request's whole answer, whatever protocol
// wrote it: *protocol.Refusal and *proto2.Refusal are two. The plane's one
// writer sends any Refusal alike, so a new protocol's refusals need no case
// of their own there.
type Refusal interface {
	error
	// Wire is the answer's status, its JSON body, and the whole seconds
	// after which the caller may retry (0 for none), which the writer also
	// sends as Retry-After (decision P2-D1).
	Wire() (status int, body any, retryAfter int64)
}

// Env is what the codecs serve from; the plane builds one for all of them.
type Env struct {
	// SiteID is the one site the relay routes for.
	SiteID string
	// LeaseMs is the lease length granted and renewed.
	LeaseMs int64
	// Store holds the routing state.
	Store store.RoutingStore
	// Projection returns the projection in force now.
	Projection func() *projection.Projection
	// Clock is the relay's own clock: signature freshness and serverTime.
	Clock clock.Clock
	// RunnerLimit limits each runner (under RunnerKey) once its signature
	// checks, and each client address that pairs. Unless it is charged
	// apart, a codec leaves a signed call's checks that need the store
	// to the call's own store operation (store.Admission, its Charge
	// from StoreCharge): one round trip instead of a presence read, a
	// charge and the operation.
	RunnerLimit ratelimit.Limit
	// SiteLimit limits each site (under SiteKey) once its signature
	// checks; unless it is charged apart, a site's write takes the charge
	// within its own store operation (SiteCaller).
	SiteLimit ratelimit.Limit
	// Pairings holds the pending device codes every replica shares; nil
	// when the store keeps none, which turns device-code pairing off.
	Pairings store.Pairings
	// Random is the source pairing codes are drawn from: crypto/rand in
	// production, a fixed stream in tests.
	Random io.Reader
	// ResultsAnswers keeps the sites' last rendered results answers; nil
	// keeps none (every answer is rendered whole).
	ResultsAnswers *ResultsAnswers
	// Logger receives the codecs' own events (never bodies or signatures).
	Logger *slog.Logger
}

// SiteCaller is an authenticated site and the rate charge its call still
// owes: its store write takes it (Admission), and anything else pays it
// first (Pay).
type SiteCaller struct {
	projection.SiteRecord
	owed *store.Charge
}

// NewSiteCaller authenticates site's call as far as the projection and
// signature go: the charge is left owed to the call's store write unless
// SiteLimit is charged apart, when it is taken now.
func (e *Env) NewSiteCaller(ctx context.Context, site projection.SiteRecord) (*SiteCaller, *protocol.Refusal) {
	key := SiteKey(site.SiteID)
	if !e.SiteLimit.ChargedApart() {
		return &SiteCaller{SiteRecord: site, owed: StoreCharge(e.SiteLimit, key)}, nil
	}
	if refusal := e.Charge(ctx, e.SiteLimit, key); refusal != nil {
		return nil, refusal
	}
	return &SiteCaller{SiteRecord: site}, nil
}

// SiteRefusals are a protocol's answers to a site-plane request with no
// signature and to one whose signer the projection does not have.
type SiteRefusals struct {
	NotSigned, NotRegistered func() Refusal
}

// AuthenticateSite authenticates a site-plane request, as every protocol
// does (P2-A4, protocol-2.md §3.4): signed, by a site the projection has,
// with its current key or, while they retire, an earlier one (spec P2-A8);
// then charged as NewSiteCaller charges.
func (e *Env) AuthenticateSite(ctx context.Context, req *Request, refuse SiteRefusals) (*SiteCaller, error) {
	sig, ok := protocol.ParseSignature(req.Header, protocol.HeaderSite)
	if !ok {
		return nil, refuse.NotSigned()
	}
	site, ok := e.Projection().SiteFor(sig.CallerID)
	if !ok {
		return nil, refuse.NotRegistered()
	}
	keys := site.VerifyingKeys(e.Clock.Now())
	if refusal := e.VerifyAny(sig, "site/"+req.Endpoint, req.Body, keys); refusal != nil {
		return nil, refusal
	}
	caller, refusal := e.NewSiteCaller(ctx, site)
	if refusal != nil {
		return nil, refusal
	}
	return caller, nil
}

// Admission hands the owed charge to the call's store write, once.
func (s *SiteCaller) Admission() *store.Admission {
	if s.owed == nil {
		return nil
	}
	a := &store.Admission{Charge: s.owed}
	s.owed = nil
	return a
}

// Pay takes the owed charge, if any, on its own: for a call that refuses,
// or reads, before any store write would take it.
func (s *SiteCaller) Pay(ctx context.Context, e *Env) *protocol.Refusal {
	if s.owed == nil {
		return nil
	}
	s.owed = nil
	return e.Charge(ctx, e.SiteLimit, SiteKey(s.SiteID))
}

// requestIDKey carries a request's id in its context.
type requestIDKey struct{}

// WithRequestID returns ctx carrying the id of the request it serves, for
// every log line written while serving it, the plane's and the codecs'.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the id WithRequestID gave ctx; "" when it gave none.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// NowMs reads the relay clock in milliseconds.
func (e *Env) NowMs() int64 { return clock.UnixMilli(e.Clock) }

// Verify checks a signature's freshness on the relay clock, then its key,
// returning the refusal the protocol gives for a failure.
func (e *Env) Verify(sig protocol.Signature, endpoint string, body *protocol.Body, identity string) *protocol.Refusal {
	now := e.NowMs()
	switch protocol.Verify(sig, endpoint, body.Raw(), identity, now) {
	case protocol.Stale:
		return protocol.ClockSkew(now)
	case protocol.BadSignature:
		return protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgBadSignature)
	}
	return nil
}

// VerifyAny checks a signature's freshness on the relay clock, then tries
// keys in order and accepts the first that verifies: a site's current key
// and, while it retires, its earlier ones (spec protocol-2 §3.2). A stale
// timestamp fails whatever the key, so it is answered as clock skew.
func (e *Env) VerifyAny(sig protocol.Signature, endpoint string, body *protocol.Body, keys []string) *protocol.Refusal {
	now := e.NowMs()
	for _, key := range keys {
		switch protocol.Verify(sig, endpoint, body.Raw(), key, now) {
		case protocol.Valid:
			return nil
		case protocol.Stale:
			return protocol.ClockSkew(now)
		}
	}
	return protocol.Refuse(protocol.CodeUnauthorized, protocol.MsgBadSignature)
}

// Swept reports what a sweep did that an operator should hear of: the
// sealing windows that lapsed (decision P2-D6). The count is a metric the
// store's instrumentation keeps; this is the log line.
func (e *Env) Swept(ctx context.Context, res store.SweepResult) {
	if len(res.Lapsed) > 0 && e.Logger != nil {
		e.Logger.LogAttrs(ctx, slog.LevelInfo, "sealing windows lapsed",
			slog.Int("lapsed", len(res.Lapsed)), slog.Any("job_ids", res.Lapsed))
	}
}

// PendingJobs is the site's pending answer for its jobs awaiting a
// payload: each with the grant the site must seal to. The entries have one
// shape under every protocol.
func PendingJobs(jobs []store.Job) []protocol.PendingJob {
	out := make([]protocol.PendingJob, 0, len(jobs))
	for _, j := range jobs {
		if j.ClaimedBy == nil {
			continue
		}
		out = append(out, protocol.PendingJob{
			JobID: j.ID, Device: j.ClaimedBy.Device, RunnerID: j.ClaimedBy.RunnerID, LeaseID: j.ClaimedBy.LeaseID,
			AwaitingUntil: j.AwaitingUntil, LeaseExpiresAt: j.ClaimedBy.LeaseExpiresAt,
		})
	}
	return out
}

// FinishedJobs is the site's results answer for its finished jobs, each
// with its result and who produced it. The entries have one shape under
// every protocol.
func FinishedJobs(jobs []store.Job) []protocol.FinishedJob {
	out := make([]protocol.FinishedJob, 0, len(jobs))
	for _, j := range jobs {
		if j.ClaimedBy == nil || j.Result == nil {
			continue
		}
		out = append(out, protocol.FinishedJob{
			JobID: j.ID, Envelope: *j.Result, Disposition: j.Disposition, RunnerID: j.ClaimedBy.RunnerID,
			LeaseID: j.ClaimedBy.LeaseID, Device: j.ClaimedBy.Device, RunnerOwner: j.ClaimedBy.Owner,
		})
	}
	return out
}

// ResultsAnswer renders a site's results answer from its finished jobs,
// reusing the bytes of its last answer where the jobs are unchanged.
func (e *Env) ResultsAnswer(siteID string, jobs []store.Job) (RawJSON, error) {
	answers := e.ResultsAnswers
	if answers == nil {
		answers = NewResultsAnswers(0)
	}
	return answers.Render(siteID, FinishedJobs(jobs))
}

// StoreFailure is a store operation that could not answer. The writer
// logs it under Op and answers a retryable 503: every store operation is
// atomic, so nothing was half-written.
type StoreFailure struct {
	Op  store.Op
	Err error
}

// Failed wraps the error of store operation op.
func Failed(op store.Op, err error) error { return &StoreFailure{Op: op, Err: err} }

func (f *StoreFailure) Error() string {
	return fmt.Sprintf("store operation %s failed: %v", f.Op, f.Err)
}

// Unwrap returns the store's error.
func (f *StoreFailure) Unwrap() error { return f.Err }
