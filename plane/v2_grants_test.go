package plane_test

// Relayd as its own grant author (docs/grants.md, spec grants.md §3, G-R57):
// the claim path of a device enrolled by its record's grantKey, through
// real sockets on both stores.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/admission"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/plane/codec2"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
	"github.com/byollm/relayd/store"
)

// testSigner is a grant key held in the test: the Signer a KMS would be.
type testSigner struct{ private ed25519.PrivateKey }

func newTestSigner(t *testing.T) testSigner {
	t.Helper()
	_, private, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return testSigner{private}
}

func (s testSigner) PublicKey() string {
	return protocol.EncodeKey(s.private.Public().(ed25519.PublicKey))
}

func (s testSigner) Sign(_ context.Context, statement []byte) (string, error) {
	return protocol.EncodeKey(ed25519.Sign(s.private, statement)), nil
}

func (s testSigner) grantKey(t *testing.T) projection.GrantKey {
	t.Helper()
	k, err := projection.ParseGrantKey(s.PublicKey())
	require.NoError(t, err)
	return k
}

// grantCounts records what the author told its observers.
type grantCounts struct {
	mu       sync.Mutex
	decided  []admission.Decision
	skipped  []string
	failures int
	// logs are the relay's log lines.
	logs logLines
}

func (g *grantCounts) reasons() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := []string{}
	for _, d := range g.decided {
		if d.Granted {
			out = append(out, "granted")
		} else {
			out = append(out, string(d.Reason))
		}
	}
	return out
}

func (g *grantCounts) skips() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string{}, g.skipped...)
}

// withGrants is a relay serving "0" and "2" whose grant author holds
// signer, with the owner's default on; counts hears its decisions.
func withGrants(t *testing.T, signer testSigner, counts *grantCounts, mods ...fixtureMod) *setupOpts {
	t.Helper()
	ring, err := admission.NewKeyRing(signer)
	require.NoError(t, err)
	opts := bothProtocols(mods...)
	opts.V2.Grants = &codec2.Grants{
		Author: admission.Author{Law: admission.Law{OwnDefault: true}, Keys: ring, Random: rand.Reader},
		Decided: func(d admission.Decision) {
			counts.mu.Lock()
			defer counts.mu.Unlock()
			counts.decided = append(counts.decided, d)
		},
		Skipped: func(cause string) {
			counts.mu.Lock()
			defer counts.mu.Unlock()
			counts.skipped = append(counts.skipped, cause)
		},
		SettleFailed: func() {
			counts.mu.Lock()
			defer counts.mu.Unlock()
			counts.failures++
		},
	}
	return opts
}

// eachStoreWithGrants runs test on every store, each with a relay of its
// own from withGrants and counts (and logs) of its own.
func eachStoreWithGrants(t *testing.T, signer testSigner, mods []fixtureMod, test func(t *testing.T, b *bundle, counts *grantCounts)) {
	t.Helper()
	eachStoreWithWrappedGrants(t, signer, mods, nil, test)
}

// eachStoreWithWrappedGrants is eachStoreWithGrants with the store under
// the relay wrapped by wrap, when it is not nil. wrap is given the subtest's
// t and reaches the bundle through b once setup has built it, for a hook
// that fires mid-request; the test finds the wrapper as b.store.
func eachStoreWithWrappedGrants(t *testing.T, signer testSigner, mods []fixtureMod,
	wrap func(t *testing.T, s store.RoutingStore, b func() *bundle) store.RoutingStore, test func(t *testing.T, b *bundle, counts *grantCounts)) {
	t.Helper()
	for _, sf := range storeFactories {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			counts := &grantCounts{}
			opts := withGrants(t, signer, counts, mods...)
			opts.Logger = slog.New(slog.NewJSONHandler(&counts.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			var b *bundle
			if wrap != nil {
				opts.WrapStore = func(s store.RoutingStore) store.RoutingStore { return wrap(t, s, func() *bundle { return b }) }
			}
			b = setup(t, sf.make, opts)
			test(t, b, counts)
		})
	}
}

// enrolled gives runner's device record grantKey k.
func enrolled(runner string, k projection.GrantKey) fixtureMod {
	return func(f *projection.Fixture, _ keyring) {
		for i := range f.Devices {
			if f.Devices[i].RunnerID == runner {
				f.Devices[i].GrantKey = k
			}
		}
	}
}

// withMappings sets the mappings of owner's consent to siteMain.
func withMappings(owner string, ms ...projection.Mapping) fixtureMod {
	return func(f *projection.Fixture, _ keyring) {
		for i, c := range f.Consents {
			if c.Owner == owner && c.SiteID == siteMain {
				f.Consents[i].Mappings = projection.NewMappings(ms...)
			}
		}
	}
}

// aliceOnBobsEcho is grants.md G-R24's example: alice's default generate
// work runs on bob's echo, bob's own on his echo, and bob's roster lists
// alice.
func aliceOnBobsEcho() []fixtureMod {
	return []fixtureMod{
		withRoster("bob", "alice"),
		withMappings("alice", projection.Mapping{Purpose: "default", Kind: protocol.KindGenerate, Service: "echo", ServiceOwner: "bob"}),
		withMappings("bob", projection.Mapping{Purpose: "default", Kind: protocol.KindGenerate, Service: "echo"}),
	}
}

// teamEcho is what a daemon offering echo to its team says it can run.
func teamEcho() []proto2.Capability {
	caps := capabilities2(protocol.KindGenerate)
	caps[0].OfferScope = proto2.AudienceTeam
	return caps
}

// claimWith claims with caps, signed at the relay's now plus skew.
func (d *daemon2) claimWith(t *testing.T, caps []proto2.Capability, skew time.Duration) peer.RawResponse {
	t.Helper()
	raw := mustJSON(t, proto2.ClaimRequest{ProtocolVersion: "2", RunnerID: d.runner, Capabilities: caps, Max: 8})
	issuedAt := d.b.clock.Now().Add(skew).UnixMilli()
	return d.b.raw(t, peer.RawRequest{Method: http.MethodPost, Path: d.d.Path("claim"), Header: d.d.SignHeadersAt("claim", raw, issuedAt), Body: raw})
}

func decodeClaim(t *testing.T, resp peer.RawResponse) []proto2.ClaimedStub {
	t.Helper()
	require.Equal(t, http.StatusOK, resp.Status, "claim: %s", resp.Body)
	out, err := proto2.DecodeClaimResponse(resp.Body)
	require.NoError(t, err, "claim answer %s", resp.Body)
	return out.Jobs
}

// G-R14, G-R19: an enrolled device is offered what its roster routes to
// it, and each job it is answered carries a grant the device's pinned key
// verifies, with exactly the fields the daemon checks, last in the stub.
func TestGrants_EnrolledDeviceRunsATeamJobWithAVerifiedGrant(t *testing.T) {
	signer := newTestSigner(t)
	mods := append(aliceOnBobsEcho(), enrolled("runner_bob", signer.grantKey(t)))
	eachStoreWithGrants(t, signer, mods, func(t *testing.T, b *bundle, counts *grantCounts) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "alice-job", "alice"))
		before := b.clock.Now().UnixMilli()
		resp := b.device2(t, "bob").claimWith(t, teamEcho(), 0)
		jobs := decodeClaim(t, resp)
		require.Len(t, jobs, 1)
		c := jobs[0]
		require.Equal(t, "alice-job", c.ID)
		require.NotNil(t, c.Grant)
		g := *c.Grant
		require.True(t, admission.Verify(signer.PublicKey(), g), "the pinned key verifies the grant")
		require.Equal(t, []string{c.ID, site.peer.Keys().KeyID(), "alice", "bob", "default", protocol.KindGenerate, "echo"},
			[]string{g.JobID, g.Site, g.User, g.Owner, g.Purpose, g.Kind, g.Service})
		require.Equal(t, before, g.IssuedAt, "issued on the relay clock")
		require.Regexp(t, `^grant_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, g.GrantID)
		require.Regexp(t, `"lease":\{"id":"[^"]+","runnerId":"runner_bob","expiresAt":\d+\},"grant":\{"grantId":"grant_[^"]+","jobId":"alice-job","site":"[^"]+","user":"alice","owner":"bob","purpose":"default","kind":"llm.generate","service":"echo","issuedAt":\d+,"signature":"[A-Za-z0-9_-]{86}"\}\}\],"leaseMs":60000\}$`, string(resp.Body))

		// Settled as granted: the site lists it, sealed to bob's device.
		pending := site.pendingFor(t, "alice-job")
		require.Equal(t, "runner_bob", pending.RunnerID)
		require.Equal(t, c.Lease.ID, pending.LeaseID)
		require.Equal(t, []string{"granted"}, counts.reasons())

		// G-R21: the decision is logged, the grant never is.
		logs := counts.logs.String()
		require.Contains(t, logs, `"msg":"grants: decided","job_id":"alice-job","runner_id":"runner_bob","granted":true`)
		require.NotContains(t, logs, g.Signature)
		require.NotContains(t, logs, g.GrantID)
	})
}

// G-R20: a settle that fails twice answers 200 with no job and no grant;
// the held job is hidden from the site and returns, at its window, as a
// plain requeue.
func TestGrants_ASettleThatFailsAnswersNothing(t *testing.T) {
	signer := newTestSigner(t)
	mods := append(aliceOnBobsEcho(), enrolled("runner_bob", signer.grantKey(t)))
	wrap := func(_ *testing.T, s store.RoutingStore, _ func() *bundle) store.RoutingStore {
		return &failingSettle{RoutingStore: s}
	}
	eachStoreWithWrappedGrants(t, signer, mods, wrap, func(t *testing.T, b *bundle, counts *grantCounts) {
		failing := b.store.(*failingSettle)
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "alice-job", "alice"))
		requireAnswer(t, b.device2(t, "bob").claimWith(t, teamEcho(), 0), http.StatusOK, `{"jobs":[],"leaseMs":60000}`)
		require.Equal(t, 2, int(failing.calls.Load()), "retried once")
		require.Equal(t, 1, counts.failures)
		requireAnswer(t, site.get(t, "pending"), http.StatusOK, `{"jobs":[]}`)
		b.advance(protocol.AwaitingPayloadMs * time.Millisecond)
		_, err := b.store.Sweep(b.ctx)
		require.NoError(t, err)
		j, ok, err := b.store.Job(b.ctx, siteMain, "alice-job")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, store.Queued, j.State)
		require.Empty(t, j.ReofferTo)
		require.Zero(t, j.SealAttempts)
	})
}

// failingSettle is a store whose SettleGrants cannot answer.
type failingSettle struct {
	store.RoutingStore
	calls atomic.Int32
}

func (f *failingSettle) SettleGrants(context.Context, store.SettleGrantsInput) ([]protocol.LeaseRef, error) {
	f.calls.Add(1)
	return nil, errors.New("the store is not answering")
}

// G-R16, G-R18: a transient decline is never answered, never listed, and
// bars the runner for 30 s on the store clock, after which it is offered
// again and, with its mapping added meanwhile, granted.
func TestGrants_ATransientDeclineWaitsThirtySeconds(t *testing.T) {
	signer := newTestSigner(t)
	mods := []fixtureMod{withRoster("bob", "alice"), enrolled("runner_bob", signer.grantKey(t))}
	eachStoreWithGrants(t, signer, mods, func(t *testing.T, b *bundle, counts *grantCounts) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "alice-job", "alice"))
		bob := b.device2(t, "bob")
		require.Empty(t, decodeClaim(t, bob.claimWith(t, teamEcho(), 0)), "alice has no mapping")
		requireDeclinedUnmapped(t, b, site, counts, "alice-job", "runner_bob")

		b.project(t, aliceOnBobsEcho()...)
		b.advance(codec2.RetryAfterMs*time.Millisecond - time.Millisecond)
		require.Empty(t, decodeClaim(t, bob.claimWith(t, teamEcho(), 0)), "not before 30 s")
		b.advance(time.Millisecond)
		jobs := decodeClaim(t, bob.claimWith(t, teamEcho(), 0))
		require.Len(t, jobs, 1)
		require.NotNil(t, jobs[0].Grant)
	})
}

// G-R5, G-R12: the author reads the projection in force when it authors;
// a roster removal that lands between the store claim and the authoring
// declines the job permanently (refused), and another device can still
// take it.
func TestGrants_APermanentDeclineRefusesTheJobForTheRunner(t *testing.T) {
	signer := newTestSigner(t)
	mods := append(aliceOnBobsEcho(), enrolled("runner_bob", signer.grantKey(t)))
	wrap := func(t *testing.T, s store.RoutingStore, b func() *bundle) store.RoutingStore {
		return claimHook{s, func() { b().project(t, withoutRoster("bob")) }}
	}
	eachStoreWithWrappedGrants(t, signer, mods, wrap, func(t *testing.T, b *bundle, counts *grantCounts) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "alice-job", "alice"))
		require.Empty(t, decodeClaim(t, b.device2(t, "bob").claimWith(t, teamEcho(), 0)))
		require.Equal(t, []string{"not-a-member"}, counts.reasons())
		j, ok, err := b.store.Job(b.ctx, siteMain, "alice-job")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, store.Queued, j.State)
		require.Equal(t, []string{"runner_bob"}, j.RefusedBy)
		require.Empty(t, j.RetryAfter)
		requireAnswer(t, site.get(t, "pending"), http.StatusOK, `{"jobs":[]}`)
		jobs := b.device2(t, "alice").claimed(t, 8)
		require.Len(t, jobs, 1, "alice's own device, not enrolled, still takes it")
		require.Nil(t, jobs[0].Grant)
	})
}

// claimHook runs after each store claim returns, before the codec authors.
type claimHook struct {
	store.RoutingStore
	after func()
}

func (h claimHook) Claim(ctx context.Context, in store.ClaimInput) ([]protocol.ClaimedStub, error) {
	jobs, err := h.RoutingStore.Claim(ctx, in)
	if in.Hold {
		h.after()
	}
	return jobs, err
}

func withoutRoster(owner string) fixtureMod {
	return func(f *projection.Fixture, _ keyring) {
		kept := f.Rosters[:0]
		for _, r := range f.Rosters {
			if r.Owner != owner {
				kept = append(kept, r)
			}
		}
		f.Rosters = kept
	}
}

// G-R8: an enrolled device's owner's own job with no mapping runs on the
// one service the claim offers for its kind.
func TestGrants_OwnDefault(t *testing.T) {
	signer := newTestSigner(t)
	eachStoreWithGrants(t, signer, []fixtureMod{enrolled("runner_alice", signer.grantKey(t))}, func(t *testing.T, b *bundle, _ *grantCounts) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "own", "alice"))
		jobs := b.device2(t, "alice").claimed(t, 8)
		require.Len(t, jobs, 1)
		require.NotNil(t, jobs[0].Grant)
		require.Equal(t, "echo", jobs[0].Grant.Service)
		require.Equal(t, "alice", jobs[0].Grant.User)
		require.Equal(t, "alice", jobs[0].Grant.Owner)
	})
}

// G-R8 with --grant-own-default=false: the same unmapped own job is
// declined unmapped, as the reference's law does, transiently (a 30 s
// not-before for the runner, never listed to the site); a mapping added
// then lets it run, and the owner's other devices were never barred.
func TestGrants_OwnDefaultOff(t *testing.T) {
	signer := newTestSigner(t)
	for _, sf := range storeFactories {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			counts := &grantCounts{}
			opts := withGrants(t, signer, counts, enrolled("runner_alice", signer.grantKey(t)))
			author := opts.V2.Grants.Author.(admission.Author)
			author.Law.OwnDefault = false
			opts.V2.Grants.Author = author
			b := setup(t, sf.make, opts)
			site := b.site2(t, "site", siteMain)
			site.enqueued(t, site.stub2(t, "own", "alice"))
			alice := b.device2(t, "alice")
			require.Empty(t, decodeClaim(t, alice.claim(t, 8)), "no mapping and no owner's default")
			requireDeclinedUnmapped(t, b, site, counts, "own", "runner_alice")

			b.project(t, withMappings("alice", projection.Mapping{Purpose: "default", Kind: protocol.KindGenerate, Service: "echo"}))
			b.advance(codec2.RetryAfterMs * time.Millisecond)
			jobs := decodeClaim(t, alice.claim(t, 8))
			require.Len(t, jobs, 1)
			require.NotNil(t, jobs[0].Grant)
			require.Equal(t, "echo", jobs[0].Grant.Service)
			require.Equal(t, []string{"unmapped", "granted"}, counts.reasons())
		})
	}
}

// G-R15: a device enrolled with a key this replica does not hold is
// offered nothing, its presence is still stamped, and the skip is counted
// and warned of once.
func TestGrants_AKeyNotHeldOffersNothing(t *testing.T) {
	signer, stranger := newTestSigner(t), newTestSigner(t)
	eachStoreWithGrants(t, signer, []fixtureMod{enrolled("runner_alice", stranger.grantKey(t))}, func(t *testing.T, b *bundle, counts *grantCounts) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "own", "alice"))
		alice := b.device2(t, "alice")
		requireAnswer(t, alice.claim(t, 8), http.StatusOK, `{"jobs":[],"leaseMs":60000}`)
		requireAnswer(t, alice.claim(t, 8), http.StatusOK, `{"jobs":[],"leaseMs":60000}`)
		p, ok := b.presence(t, "runner_alice")
		require.True(t, ok, "presence is stamped")
		require.Equal(t, b.storeNow(t), p.LastSeenAt)
		require.Equal(t, store.Queued, b.jobState(t, "own"))
		require.Equal(t, []string{codec2.SkipKeyUnavailable, codec2.SkipKeyUnavailable}, counts.skips())
		logs := counts.logs.String()
		require.Equal(t, 1, strings.Count(logs, `"runner_id":"runner_alice","cause":"key-unavailable"`), "warned once per runner: %s", logs)
	})
}

// G-R15, difference DG4: a device whose clock is more than 30 s behind or
// more than 90 s ahead of the relay's is offered nothing; at the
// thresholds it is served.
func TestGrants_DeviceClockGuard(t *testing.T) {
	signer := newTestSigner(t)
	eachStoreWithGrants(t, signer, []fixtureMod{enrolled("runner_alice", signer.grantKey(t))}, func(t *testing.T, b *bundle, counts *grantCounts) {
		site := b.site2(t, "site", siteMain)
		alice := b.device2(t, "alice")
		for _, skew := range []time.Duration{-30*time.Second - time.Millisecond, 90*time.Second + time.Millisecond} {
			site.enqueued(t, site.stub2(t, "skewed", "alice"))
			require.Empty(t, decodeClaim(t, alice.claimWith(t, capabilities2(), skew)), "skew %v", skew)
			require.Equal(t, store.Queued, b.jobState(t, "skewed"))
		}
		require.Equal(t, []string{codec2.SkipDeviceClock, codec2.SkipDeviceClock}, counts.skips())
		for i, skew := range []time.Duration{-30 * time.Second, 90 * time.Second} {
			jobs := decodeClaim(t, alice.claimWith(t, capabilities2(), skew))
			require.Len(t, jobs, 1, "skew %v", skew)
			require.NotNil(t, jobs[0].Grant)
			if i == 0 {
				site.enqueued(t, site.stub2(t, "second", "alice"))
			}
		}
	})
}

// G-R31: both pairing answers carry controlPlanePublic exactly when the
// approved record's key is one this replica holds.
func TestGrants_PairingAnswersCarryTheHeldKeyOnly(t *testing.T) {
	signer, stranger := newTestSigner(t), newTestSigner(t)
	mods := []fixtureMod{enrolled("runner_alice", signer.grantKey(t)), enrolled("runner_bob", stranger.grantKey(t))}
	eachStoreWithGrants(t, signer, mods, func(t *testing.T, b *bundle, _ *grantCounts) {
		sites := b.sitesJSON(t, "site")
		requireAnswer(t, b.pair2(t, fixturePair("alice", b.keys["alice"].Public())), http.StatusOK,
			`{"protocolVersion":"2","runnerId":"runner_alice","sites":`+sites+`,"controlPlanePublic":"`+signer.PublicKey()+`"}`)
		requireAnswer(t, b.pair2(t, fixturePair("bob", b.keys["bob"].Public())), http.StatusOK,
			`{"protocolVersion":"2","runnerId":"runner_bob","sites":`+sites+`}`)

		resp := b.pair2(t, pairStartBody(b.keys["stranger"].Public()))
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		start, err := proto2.DecodePairStartResponse(resp.Body)
		require.NoError(t, err)
		b.project(t, func(f *projection.Fixture, k keyring) {
			f.Devices = append(f.Devices, projection.DeviceRecord{Owner: "alice", RunnerID: "runner_new", Device: k["stranger"].Public(), GrantKey: signer.grantKey(t)})
		})
		requireAnswer(t, b.pair2(t, pairPollBody(start.DeviceCode)), http.StatusOK,
			`{"status":"approved","runnerId":"runner_new","owner":"alice","sites":`+sites+`,"controlPlanePublic":"`+signer.PublicKey()+`"}`)

		// Protocol "0" never carries it.
		v0 := b.daemon(t, "alice")
		pr, err := v0.Pair(b.ctx, "alice")
		require.NoError(t, err)
		raw, err := json.Marshal(pr)
		require.NoError(t, err)
		require.NotContains(t, string(raw), "controlPlanePublic")
	})
}

// DG1: without a grant key nothing changes, byte for byte, even for a
// device record that names one: P2-D4 holds, no grant and no key is sent.
func TestGrants_OffWithoutAKeyChangesNothing(t *testing.T) {
	signer := newTestSigner(t)
	mods := append(aliceOnBobsEcho(), enrolled("runner_bob", signer.grantKey(t)))
	eachStore(t, bothProtocols(mods...), func(t *testing.T, b *bundle) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "alice-job", "alice"), site.stub2(t, "bob-job", "bob"))
		bob := b.device2(t, "bob")
		resp := bob.claimWith(t, teamEcho(), 0)
		jobs := decodeClaim(t, resp)
		require.Len(t, jobs, 1)
		require.Equal(t, "bob-job", jobs[0].ID, "P2-D4: alice's team job is not offered")
		want, err := json.Marshal(protocol.ClaimResponse{Jobs: []protocol.ClaimedStub{{JobStub: protocol.JobStub(jobs[0].JobStub), Lease: jobs[0].Lease}}, LeaseMs: 60000})
		require.NoError(t, err)
		requireAnswer(t, resp, http.StatusOK, string(want))
		requireAnswer(t, b.pair2(t, fixturePair("bob", b.keys["bob"].Public())), http.StatusOK,
			`{"protocolVersion":"2","runnerId":"runner_bob","sites":`+b.sitesJSON(t, "site")+`}`)
	})
}

func (b *bundle) jobState(t *testing.T, id string) store.State {
	t.Helper()
	j, ok, err := b.store.Job(b.ctx, siteMain, id)
	require.NoError(t, err)
	require.True(t, ok, "job %s exists", id)
	return j.State
}

// G-R50: the admin listener names the grant keys (public halves only) for
// `relayd approve`, and /readyz says the mode, the keys and how many
// device records name a key this replica lacks; without a key, current is
// null and /readyz says nothing of grants.
func TestGrants_AdminListenerNamesTheKeys(t *testing.T) {
	signer, stranger := newTestSigner(t), newTestSigner(t)
	keyID, ok := protocol.KeyIDOf(signer.PublicKey())
	require.True(t, ok)
	mods := []fixtureMod{enrolled("runner_alice", signer.grantKey(t)), enrolled("runner_bob", stranger.grantKey(t))}
	eachStoreWithGrants(t, signer, mods, func(t *testing.T, b *bundle, _ *grantCounts) {
		key := `{"publicKey":"` + signer.PublicKey() + `","keyId":"` + keyID + `","signer":"local"}`
		resp := b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/grant-keys"})
		requireAnswer(t, resp, http.StatusOK, `{"current":`+key+`,"keys":[`+key+`]}`)
		resp = b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/readyz"})
		require.Equal(t, http.StatusOK, resp.Status)
		require.Contains(t, string(resp.Body), `"grants":{"mode":"local","current":"`+keyID+`","keys":["`+keyID+`"],"unsignable":1}`)
	})
	eachStore(t, bothProtocols(), func(t *testing.T, b *bundle) {
		resp := b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/grant-keys"})
		requireAnswer(t, resp, http.StatusOK, `{"current":null,"keys":[]}`)
		resp = b.raw(t, peer.RawRequest{BaseURL: b.adminURL, Method: http.MethodGet, Path: "/readyz"})
		require.NotContains(t, string(resp.Body), "grants")
	})
}

// /readyz's unsignable count reads the projection's per-key counts, not a
// copy of its fixture: what it allocates does not grow with the fixture
// (it copied every device, consent and roster on each call).
func TestGrants_ReadinessDoesNotCopyTheFixture(t *testing.T) {
	signer, stranger := newTestSigner(t), newTestSigner(t)
	ring, err := admission.NewKeyRing(signer)
	require.NoError(t, err)
	g := &codec2.Grants{Author: admission.Author{Keys: ring}}
	fixtureOf := func(n int) *projection.Projection {
		f := &projection.Fixture{}
		for i := range n {
			identity := protocol.EncodeKey(bytes.Repeat([]byte{byte(i), byte(i >> 8), 1}, 11)[:32])
			key := signer.grantKey(t)
			if i%2 == 1 {
				key = stranger.grantKey(t)
			}
			owner := fmt.Sprintf("owner-%d", i)
			f.Devices = append(f.Devices, projection.DeviceRecord{Owner: owner, RunnerID: fmt.Sprintf("r%d", i),
				Device: protocol.PublicIdentity{Identity: identity, Encryption: identity, EncryptionSig: "S"}, GrantKey: key})
			f.Rosters = append(f.Rosters, projection.RosterRecord{ID: "team-" + owner, Owner: owner, Members: []string{"alice"}})
		}
		p, err := projection.New(f)
		require.NoError(t, err)
		return p
	}
	small, large := fixtureOf(2), fixtureOf(2000)
	require.Equal(t, 1, g.Unsignable(small))
	require.Equal(t, 1000, g.Unsignable(large))
	smallAllocs := testing.AllocsPerRun(50, func() { g.Unsignable(small) })
	largeAllocs := testing.AllocsPerRun(50, func() { g.Unsignable(large) })
	require.Equal(t, smallAllocs, largeAllocs, "allocations per call, 2 and 2,000 device records")
}

// G-R57: the claim answer relayd sends an enrolled device, bytes as they
// came off the socket, passes the published 0.1.1 daemon's strict
// ClaimResponse schema, verifyGrant and its follow-up checks
// (admission/testdata/verifygrant.mjs); a tampered copy does not.
func TestGrants_ThePublishedDaemonAcceptsTheClaimAnswer(t *testing.T) {
	interop := publishedPackages(t)
	signer := newTestSigner(t)
	mods := append(aliceOnBobsEcho(), enrolled("runner_bob", signer.grantKey(t)))
	eachStoreWithGrants(t, signer, mods, func(t *testing.T, b *bundle, _ *grantCounts) {
		site := b.site2(t, "site", siteMain)
		site.enqueued(t, site.stub2(t, "alice-job", "alice"))
		resp := b.device2(t, "bob").claimWith(t, teamEcho(), 0)
		require.Len(t, decodeClaim(t, resp), 1)
		now := b.clock.Now().UnixMilli()
		tampered := strings.Replace(string(resp.Body), `"service":"echo"`, `"service":"other"`, 1)
		verdicts := askPublishedDaemon(t, interop, signer.PublicKey(), now, string(resp.Body), tampered)
		require.Equal(t, []string{"ok", "bad-signature"}, verdicts)
	})
}

// askPublishedDaemon has verifygrant.mjs judge each claim answer as bob's
// daemon, pinned to key, would at now.
func askPublishedDaemon(t *testing.T, interop, key string, now int64, responses ...string) []string {
	t.Helper()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, r := range responses {
		require.NoError(t, enc.Encode(map[string]any{"response": r, "owner": "bob", "controlPlanePublic": key, "now": now}))
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("..", "admission", "testdata", "verifygrant.mjs"), interop)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node: %s", stderr.String())
	return strings.Fields(string(out))
}

// publishedPackages is interop/ holding the published 0.1.1 packages, or
// a skip (a failure under CI) naming the command that installs them.
func publishedPackages(t *testing.T) string {
	t.Helper()
	ci := os.Getenv("CI") != ""
	interop, err := filepath.Abs(filepath.Join("..", "interop"))
	require.NoError(t, err)
	_, nodeErr := exec.LookPath("node")
	_, pkgErr := os.Stat(filepath.Join(interop, "node_modules", "@byollm", "protocol", "package.json"))
	switch {
	case (nodeErr != nil || pkgErr != nil) && ci:
		t.Fatal("node and interop/node_modules are needed in CI (cd interop && npm ci --no-audit --no-fund)")
	case nodeErr != nil || pkgErr != nil:
		t.Skip("needs node and `cd interop && npm ci --no-audit --no-fund`")
	}
	return interop
}

// requireDeclinedUnmapped: runner's claim of job was declined unmapped,
// transiently (G-R12): the job is back in the queue with the runner's
// 30 s not-before, refused by nobody, and not listed to the site.
func requireDeclinedUnmapped(t *testing.T, b *bundle, site *site2, counts *grantCounts, job, runner string) {
	t.Helper()
	require.Equal(t, []string{"unmapped"}, counts.reasons())
	requireAnswer(t, site.get(t, "pending"), http.StatusOK, `{"jobs":[]}`)
	j, ok, err := b.store.Job(b.ctx, siteMain, job)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, store.Queued, j.State)
	require.Equal(t, b.storeNow(t)+codec2.RetryAfterMs, j.RetryAfter[runner])
	require.Empty(t, j.RefusedBy, "unmapped is transient")
}
