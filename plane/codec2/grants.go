package codec2

import (
	"context"
	"log/slog"
	"sync"

	"github.com/byollm/relayd/admission"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// Grants is relayd as its own grant author (docs/grants.md, spec
// grants.md §3). Off (nil in Options) every device keeps decision P2-D4; on,
// a device whose record names a grantKey is enrolled: it is offered what
// rosters route to it, and every job it claims is authored first.
type Grants struct {
	// Author authors each claimed job: the local law, an external author,
	// or both side by side (admission.Authors).
	Author admission.Authority
	// Decided, when set, hears each decision (G-R51), never the grant.
	Decided func(admission.Decision)
	// Skipped, when set, hears each claim a guard answered empty (G-R15),
	// by cause: SkipKeyUnavailable or SkipDeviceClock.
	Skipped func(cause string)
	// SettleFailed, when set, hears each claim whose settle failed twice
	// (G-R20).
	SettleFailed func()

	warned sync.Map // runner id and cause: logged once (G-R15)
}

// The causes a guard skips a claim for (G-R15).
const (
	SkipKeyUnavailable = "key-unavailable"
	SkipDeviceClock    = "device-clock"
)

// The device clock guard's bounds (G-R15): the signature's issuedAt minus
// the relay clock. Behind by more than 30 s every grant would be
// from-the-future; ahead by more than 90 s it leaves under 30 s of the
// grant's 120 s life for the round trip.
const (
	deviceBehindMs = -30_000
	deviceAheadMs  = 90_000
)

// RetryAfterMs is the not-before a transient decline gives the runner
// (RETRY_AFTER_MS, relay/state.ts:126).
const RetryAfterMs = 30_000

// PublicKeyFor is what the pairing answers carry as controlPlanePublic for
// a device enrolled with k (G-R31): k itself when this replica can sign
// with it, else "" (omitted).
func (g *Grants) PublicKeyFor(k projection.GrantKey) string {
	if g == nil || k.IsZero() {
		return ""
	}
	if !g.Author.Holds(k.String()) {
		return ""
	}
	return k.String()
}

// enrolled reports whether who's claims are authored.
func (g *Grants) enrolled(who *caller) bool { return g != nil && !who.device.GrantKey.IsZero() }

// guard is the cause a claim by who is answered empty for, or "" (G-R15).
func (g *Grants) guard(who *caller) string {
	if !g.Author.Holds(who.device.GrantKey.String()) {
		return SkipKeyUnavailable
	}
	if who.skewMs < deviceBehindMs || who.skewMs > deviceAheadMs {
		return SkipDeviceClock
	}
	return ""
}

// authoredClaim is the claim of an enrolled device (G-R14 to G-R20): the
// guards, a held claim over the routes rosters widen, every job authored
// in claim order against the projection in force now, one settle, and an
// answer of only the granted jobs still current, each with its grant.
func (c *Codec) authoredClaim(ctx context.Context, who *caller, req proto2.ClaimRequest, kinds []string) (proto2.ClaimResponse, error) {
	g := c.opts.Grants
	empty := proto2.ClaimResponse{Jobs: []proto2.ClaimedStub{}, LeaseMs: c.env.LeaseMs}
	if cause := g.guard(who); cause != "" {
		g.skipped(ctx, c.env.Logger, who, cause)
		return empty, c.stamp(ctx, who)
	}
	jobs, err := c.env.Store.Claim(ctx, store.ClaimInput{
		Proto: store.Proto2, RunnerID: who.device.RunnerID, Owner: who.device.Owner, Device: who.device.Device,
		Routes: storeRoutes(who.proj.RoutesFor(who.device.Owner)), Kinds: kinds, Max: req.Max, LeaseMs: c.env.LeaseMs,
		Admit: who.admission(), Hold: true,
	})
	if err != nil {
		return proto2.ClaimResponse{}, storeError(store.OpClaim, err)
	}
	if len(jobs) == 0 {
		return empty, nil
	}
	settle, grants := c.authorAll(ctx, who, req.Capabilities, jobs)
	current, err := c.settle(ctx, settle)
	if err != nil {
		// The held jobs go back at their window as plain requeues; no
		// grant is answered for a lease not confirmed current (G-R20).
		if g.SettleFailed != nil {
			g.SettleFailed()
		}
		c.log(ctx, slog.LevelWarn, "grants: settle failed; held jobs return at their window",
			slog.String("runner_id", who.device.RunnerID), slog.String("error", err.Error()))
		return empty, nil
	}
	empty.Jobs = answerGranted(jobs, current, grants)
	return empty, nil
}

// authorAll authors each claimed job in claim order and sorts the leases
// for the settle; grants holds each granted lease's grant.
func (c *Codec) authorAll(ctx context.Context, who *caller, caps []proto2.Capability, jobs []protocol.ClaimedStub) (store.SettleGrantsInput, map[string]*proto2.SignedGrant) {
	g := c.opts.Grants
	proj := c.env.Projection() // the projection in force when authoring (G-R5)
	in := store.SettleGrantsInput{RunnerID: who.device.RunnerID, RetryAfterMs: RetryAfterMs}
	grants := map[string]*proto2.SignedGrant{}
	for _, j := range jobs {
		claim := admission.Claim{Stub: proto2.JobStub(j.JobStub), DeviceOwner: who.device.Owner, Capabilities: caps,
			Lease: j.Lease, RunnerID: who.device.RunnerID}
		out := g.Author.Author(ctx, proj, claim, who.device.GrantKey, c.env.Clock.Now())
		ref := protocol.LeaseRef{JobID: j.ID, LeaseID: j.Lease.ID}
		switch {
		case out.Grant != nil:
			in.Granted = append(in.Granted, ref)
			grants[j.Lease.ID] = out.Grant
		case out.Decision.Permanent():
			in.Refused = append(in.Refused, ref)
		default:
			in.Returned = append(in.Returned, ref)
		}
		if g.Decided != nil {
			g.Decided(out.Decision)
		}
		c.log(ctx, slog.LevelDebug, "grants: decided", slog.String("job_id", j.ID), slog.String("runner_id", who.device.RunnerID),
			slog.Bool("granted", out.Grant != nil), slog.String("reason", string(out.Decision.Reason)), slog.Bool("permanent", out.Decision.Permanent()))
	}
	return in, grants
}

// settle runs SettleGrants, once more if the store fails (G-R20).
func (c *Codec) settle(ctx context.Context, in store.SettleGrantsInput) ([]protocol.LeaseRef, error) {
	current, err := c.env.Store.SettleGrants(ctx, in)
	if err != nil && ctx.Err() == nil {
		current, err = c.env.Store.SettleGrants(ctx, in)
	}
	return current, err
}

// answerGranted is the claim's answer (G-R19): the granted jobs the settle
// confirmed current, in claim order, each the stored stub, its lease and
// its grant last.
func answerGranted(jobs []protocol.ClaimedStub, current []protocol.LeaseRef, grants map[string]*proto2.SignedGrant) []proto2.ClaimedStub {
	confirmed := map[string]bool{}
	for _, l := range current {
		confirmed[l.LeaseID] = true
	}
	out := []proto2.ClaimedStub{}
	for _, j := range jobs {
		if grant := grants[j.Lease.ID]; grant != nil && confirmed[j.Lease.ID] {
			out = append(out, proto2.ClaimedStub{JobStub: proto2.JobStub(j.JobStub), Lease: j.Lease, Grant: grant})
		}
	}
	return out
}

// skipped counts a guard's empty answer and warns once per runner and
// cause.
func (g *Grants) skipped(ctx context.Context, logger *slog.Logger, who *caller, cause string) {
	if g.Skipped != nil {
		g.Skipped(cause)
	}
	if _, seen := g.warned.LoadOrStore(who.device.RunnerID+"\x00"+cause, true); seen || logger == nil {
		return
	}
	logger.LogAttrs(ctx, slog.LevelWarn, "grants: offering nothing to an enrolled device",
		slog.String("runner_id", who.device.RunnerID), slog.String("cause", cause), slog.Int64("clock_skew_ms", who.skewMs))
}

func (c *Codec) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if c.env.Logger != nil {
		c.env.Logger.LogAttrs(ctx, level, msg, attrs...)
	}
}

// storeRoutes are projection routes as a claim names them.
func storeRoutes(rs []projection.Route) []store.Route {
	out := make([]store.Route, 0, len(rs))
	for _, r := range rs {
		out = append(out, store.Route{SiteID: r.SiteID, Owner: r.Owner})
	}
	return out
}

// GrantKey is one key the author signs with, as the admin listener shows
// it (G-R50): its public half and key id, never more.
type GrantKey struct {
	PublicKey string `json:"publicKey"`
	KeyID     string `json:"keyId"`
	Signer    string `json:"signer"`
}

// Keys lists the author's keys, current first; none when g is nil.
func (g *Grants) Keys() []GrantKey {
	out := []GrantKey{}
	if g == nil {
		return out
	}
	for _, k := range g.Author.AuthorKeys() {
		out = append(out, GrantKey{PublicKey: k.PublicKey, KeyID: k.KeyID, Signer: k.Signer})
	}
	return out
}

// Unsignable counts p's device records enrolled with a key the author does
// not hold: devices the key guard offers nothing (G-R15, G-R50). It reads
// the projection's per-key counts, never a copy of its fixture.
func (g *Grants) Unsignable(p *projection.Projection) int {
	n := 0
	for k, devices := range p.Enrolments() {
		if g.PublicKeyFor(k) == "" {
			n += devices
		}
	}
	return n
}
