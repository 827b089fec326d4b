package storetest

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// Site is the site the contract routes for; OtherSite is a second one.
const (
	Site      = "site_store"
	OtherSite = "site_other"
)

// leaseMs is the lease length the contract claims with.
const leaseMs = 45_000

// leaseIDPattern is a lowercase UUID v4.
var leaseIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// Run runs every case of the contract, each against a fresh store of its
// own and in parallel with the others: a case shares nothing with another,
// not even the clock, so none has to wait for one that moves time.
//
// A case is named after the store operation it checks, then a short
// CamelCase name, so that -run is easy to type: Claim/AtMostMax. A
// protocol "2" case starts with V2 and a protocol "0" one that contrasts
// with it with V0 (-run 'TestContract/Claim/V2' runs them all); a case
// checking one of relayd's decisions starts with its tag
// (Claim/P2_D8_ReofferEndsOnRefusal). The sentence above each s.run says what
// the case asserts. Admission, Withdrawn and Holder group what spans
// several operations: a call's admission, consent withdrawn from a site
// (RD-D12), a sealed job kept for its holder (RD-D14).
func Run(t *testing.T, newHarness NewHarness) {
	groups := []struct {
		name  string
		cases []func(suite)
	}{
		{"Enqueue", []func(suite){enqueueContract, enqueueContract2}},
		{"Claim", []func(suite){claimContract, claimContract2}},
		{"Fetch", []func(suite){fetchContract, fetchContract2}},
		{"Result", []func(suite){resultContract, resultContract2}},
		{"Release", []func(suite){releaseContract, releaseContract2}},
		{"Renew", []func(suite){renewContract, renewContract2}},
		{"Payload", []func(suite){payloadContract, payloadContract2}},
		{"Cancel", []func(suite){cancelContract, cancelContract2}},
		{"CancelRequests", []func(suite){cancelRequestsContract, cancelRequestsContract2}},
		{"Pending", []func(suite){pendingContract, pendingContract2}},
		{"Results", []func(suite){resultsContract, resultsContract2}},
		{"Sweep", []func(suite){sweepContract, sweepContract2}},
		{"Now", []func(suite){clockContract}},
		{"Presence", []func(suite){presenceContract, presenceContract2}},
		{"Admission", []func(suite){admissionContract}},
		{"Heartbeat", []func(suite){heartbeatContract}},
		{"Withdrawn", []func(suite){withdrawnContract2}},
		{"SettleGrants", []func(suite){settleContract2}},
		{"Holder", []func(suite){holderContract2}},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, cases := range g.cases {
				cases(suite{t: t, newHarness: newHarness})
			}
		})
	}
}

// suite runs the cases of one group.
type suite struct {
	t          *testing.T
	newHarness NewHarness
}

// run runs one case as a parallel subtest against a store of its own.
func (s suite) run(name string, c func(t *testing.T, b *bundle)) {
	s.t.Run(name, func(t *testing.T) {
		t.Parallel()
		c(t, setup(t, s.newHarness))
	})
}

// bundle is what each case works with.
type bundle struct {
	h   Harness
	s   store.RoutingStore
	ctx context.Context
}

func setup(t *testing.T, newHarness NewHarness) *bundle {
	h := newHarness(t)
	require.NotNil(t, h.Store)
	require.NotNil(t, h.Advance)
	return &bundle{h: h, s: h.Store, ctx: t.Context()}
}

// device is a paired runner as the contract sees it.
type device struct {
	runner string
	owner  string
}

var (
	alice  = device{runner: "runner_alice", owner: "alice"}
	alice2 = device{runner: "runner_alice_2", owner: "alice"}
	bob    = device{runner: "runner_bob", owner: "bob"}
)

// identityOf is a contract device's public identity. Its identity key is a
// real Ed25519 key derived from the runner id, so that the device has a key
// id that envelopes can name; the store checks no signature.
func identityOf(d device) protocol.PublicIdentity {
	return protocol.PublicIdentity{Identity: identityKey(d.runner), Encryption: "enc-" + d.runner, EncryptionSig: "sig-" + d.runner}
}

func identityKey(runner string) string {
	seed := sha256.Sum256([]byte("storetest/" + runner))
	return base64.RawURLEncoding.EncodeToString(ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey))
}

// keyIDOf is the key id of the runner's contract device.
func keyIDOf(runner string) string {
	id, ok := protocol.KeyIDOf(identityKey(runner))
	if !ok {
		panic("storetest: a derived identity key does not decode")
	}
	return id
}

func (b *bundle) now(t *testing.T) int64 {
	now, err := b.s.Now(b.ctx)
	require.NoError(t, err)
	return now
}

func (b *bundle) advance(t *testing.T, d time.Duration) { b.h.Advance(t, d) }

// stubOpt adjusts a contract stub.
type stubOpt func(*protocol.JobStub)

func ownedBy(owner string) stubOpt { return func(s *protocol.JobStub) { s.Owner = owner } }
func ofKind(kind string) stubOpt   { return func(s *protocol.JobStub) { s.Kind = kind } }
func forAudience(a string) stubOpt { return func(s *protocol.JobStub) { s.Audience = a } }
func deadlineIn(t *testing.T, b *bundle, d time.Duration) stubOpt {
	at := b.now(t) + d.Milliseconds()
	return func(s *protocol.JobStub) { s.DeadlineAt = at }
}

// stub is a public generate job for alice, due in an hour.
func (b *bundle) stub(t *testing.T, id string, opts ...stubOpt) protocol.JobStub {
	s := protocol.JobStub{
		ID: id, Kind: protocol.KindGenerate, Owner: "alice", Site: siteKeyID,
		Audience: protocol.AudiencePublic, SizeClass: "small", Streaming: false,
		DeadlineAt: b.now(t) + time.Hour.Milliseconds(),
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func (b *bundle) enqueueOn(t *testing.T, site string, s protocol.JobStub) store.EnqueueResult {
	res, err := b.s.Enqueue(b.ctx, store.EnqueueInput{SiteID: site, Stub: s})
	require.NoError(t, err)
	return res
}

// enqueue publishes stubs for Site.
func (b *bundle) enqueue(t *testing.T, ids ...string) {
	for _, id := range ids {
		b.enqueueOn(t, Site, b.stub(t, id))
	}
}

// claimFor asks, for device d, for up to max jobs of every kind on Site
// from the owners given (d's own owner when none are given).
func (b *bundle) claimFor(t *testing.T, d device, max int, owners ...string) []protocol.ClaimedStub {
	if len(owners) == 0 {
		owners = []string{d.owner}
	}
	routes := make([]store.Route, 0, len(owners))
	for _, o := range owners {
		routes = append(routes, store.Route{SiteID: Site, Owner: o})
	}
	return b.claimInput(t, store.ClaimInput{
		RunnerID: d.runner, Owner: d.owner, Device: identityOf(d), Routes: routes,
		Kinds: []string{protocol.KindGenerate, protocol.KindChat}, Max: max, LeaseMs: leaseMs,
	})
}

func (b *bundle) claimInput(t *testing.T, in store.ClaimInput) []protocol.ClaimedStub {
	got, err := b.s.Claim(b.ctx, in)
	require.NoError(t, err)
	require.NotNil(t, got, "claim returns an empty list, not nil")
	return got
}

// claimOne claims exactly one job for d and returns its grant.
func (b *bundle) claimOne(t *testing.T, d device, owners ...string) protocol.ClaimedStub {
	got := b.claimFor(t, d, 1, owners...)
	require.Len(t, got, 1)
	return got[0]
}

func ids(stubs []protocol.ClaimedStub) []string {
	out := make([]string, 0, len(stubs))
	for _, s := range stubs {
		out = append(out, s.ID)
	}
	return out
}

func jobIDs(jobs []store.Job) []string {
	out := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func (b *bundle) job(t *testing.T, id string) store.Job {
	j, ok, err := b.s.Job(b.ctx, Site, id)
	require.NoError(t, err)
	require.True(t, ok, "job %s exists", id)
	return j
}

func (b *bundle) requireGone(t *testing.T, id string) {
	_, ok, err := b.s.Job(b.ctx, Site, id)
	require.NoError(t, err)
	require.False(t, ok, "job %s is gone", id)
}

func (b *bundle) requireState(t *testing.T, id string, want store.State) store.Job {
	j := b.job(t, id)
	require.Equal(t, want, j.State, "state of %s", id)
	return j
}

// envelope is an envelope between the site and alice's device.
func envelope(direction, tag string) protocol.SealedEnvelope {
	return envelopeFor(alice.runner, direction, tag)
}

// envelopeFor is an envelope between the site and the runner's device: a
// payload sealed to it, or a result sealed by it.
func envelopeFor(runner, direction, tag string) protocol.SealedEnvelope {
	e := protocol.SealedEnvelope{
		Ciphertext: "ciphertext-" + tag, RecipientKeyID: keyIDOf(runner), SenderKeyID: siteKeyID,
		Direction: direction, DeadlineAt: 4_000_000_000_000,
	}
	if direction == protocol.DirectionResult {
		e.RecipientKeyID, e.SenderKeyID = e.SenderKeyID, e.RecipientKeyID
	}
	return e
}

// siteKeyID is the contract site's key id, as its stubs name it.
const siteKeyID = "BYOLLM-TEST-SITE"

func lease(c protocol.ClaimedStub) store.LeaseInput {
	return store.LeaseInput{SiteID: Site, JobID: c.ID, RunnerID: c.Lease.RunnerID, LeaseID: c.Lease.ID}
}

func ref(c protocol.ClaimedStub) protocol.LeaseRef {
	return protocol.LeaseRef{JobID: c.ID, LeaseID: c.Lease.ID}
}

func (b *bundle) seal(t *testing.T, c protocol.ClaimedStub) {
	require.NoError(t, b.s.Payload(b.ctx, store.PayloadInput{JobID: c.ID, SiteID: Site, Envelope: envelopeFor(c.Lease.RunnerID, protocol.DirectionPayload, c.ID)}))
}

func (b *bundle) complete(t *testing.T, c protocol.ClaimedStub, disposition string) store.ResultOutcome {
	res, err := b.s.Result(b.ctx, store.ResultInput{LeaseInput: lease(c), Envelope: envelopeFor(c.Lease.RunnerID, protocol.DirectionResult, c.ID+"-"+disposition), Disposition: disposition})
	require.NoError(t, err)
	return res
}

// runToDone takes a claimed job through seal, fetch and result.
func (b *bundle) runToDone(t *testing.T, c protocol.ClaimedStub) {
	b.seal(t, c)
	_, err := b.s.Fetch(b.ctx, lease(c))
	require.NoError(t, err)
	require.False(t, b.complete(t, c, protocol.DispositionOK).Duplicate)
}

func requireRefusal(t *testing.T, err error, want store.RefusalCode) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, store.RefusalOf(err), "refusal code of %v", err)
}
